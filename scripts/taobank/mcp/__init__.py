"""The MCP server of the bank (scripts/tao_mcp.py): the helpers' verbs as typed tools.

Every tool runs the helper's own ``main`` in this process (same parser, same records, same gates, same
one-line errors) with ``--json``; :mod:`.tools` derives each tool's schema from that parser and is plain
Python, :mod:`.server` is the glue to the ``mcp`` SDK (an optional dependency). Nothing imports this
package but scripts/tao_mcp.py.
"""
