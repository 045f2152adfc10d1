"""The MCP server of the bank (scripts/tao_mcp.py): the helpers' verbs as typed tools.

Every tool runs the helper's own ``main`` in this process (same parser, same records, same gates, same
one-line errors) with ``--json``; :mod:`.tools` derives each tool's schema from that parser and is plain
Python, :mod:`.server` is the glue to the ``mcp`` SDK (an optional dependency), :mod:`.sdk` imports only the SDK
parts it uses. A key a submit lacks is found or stored by :mod:`.credentials` and asked of the user on the
one-time page of :mod:`.keypage` (both plain Python). Nothing imports this package but scripts/tao_mcp.py.
"""
