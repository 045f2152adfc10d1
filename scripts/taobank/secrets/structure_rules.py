"""The rules a single line cannot see, read from the text's YAML/JSON structure in one pass each: a Kubernetes env
``name``/``value`` pair, a credential key's block scalar, value on the next line or anchored value, a Secret
manifest's ``data``, a private key's body lines, and a credential flag and its value as two list items.

A hand-written reader, not a YAML parser, on purpose: the text is any text (a shell script, an sbatch file,
a broken or half-rendered manifest, a log line), must be read whole whatever it holds, and the record store
masks every message with it (a parser's import would cost each helper's start-up; it would also stop at the
first syntax error, where a secret may follow)."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from .findings import Hit
from .names import is_auth_name, is_credential_name, may_name_secret
from .values import AUTH_SCHEME, AUTH_VALUE, MASK, is_reference, named_value_ok, not_prose, not_spec, unquote


_KEY = re.compile(r"^(?P<ind>[ \t]*)(?P<dash>-[ \t]+)?(?P<q>[\"']?)(?P<key>[A-Za-z_.][\w./-]*)(?P=q)[ \t]*:"
                  r"(?:[ \t]+(?P<rest>.*))?$")
_BLOCK_SCALAR = re.compile(r"[|>][-+0-9]*")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def _blank(line: str) -> bool:
    s = line.strip()
    return not s or s.startswith("#")


def _key(line: str) -> tuple[int, str, str, bool] | None:
    """(column of the key, key, rest of line, line starts a list item) for a YAML ``key: rest`` line."""
    m = _KEY.match(line)
    if not m:
        return None
    col = len(m.group("ind")) + len(m.group("dash") or "")
    return col, m.group("key"), (m.group("rest") or ""), bool(m.group("dash"))


def _value_span(line: str, rest: str, value: str) -> tuple[int, int]:
    """(start, end) of ``value`` inside ``rest``, the tail of ``line`` after ``key:``."""
    start = len(line) - len(rest) + rest.index(value)
    return start, start + len(value)


def _strip_comment(rest: str) -> str:
    if rest[:1] in "\"'":
        return rest.rstrip().rstrip(",")
    return re.split(r"[ \t]#", rest, maxsplit=1)[0].strip().rstrip(",")


_NODE_PROPS = re.compile(r"(?:(?:&(?P<anchor>[^\s,{}\[\]]+)|![^\s,{}\[\]]*)(?:[ \t]+|$))*")
_ALIAS = re.compile(r"\*(?P<alias>[^\s,{}\[\]]+)")


def _scalar(rest: str) -> tuple[str | None, str]:
    """(anchor, value) of the text after ``key:``: node properties (``&a``, ``!!str``) and a comment dropped."""
    value = _strip_comment(rest)
    m = _NODE_PROPS.match(value)
    assert m is not None  # the pattern matches the empty string too
    return m.group("anchor"), value[m.end():]


def _block(lines: list[str], i: int, col: int) -> list[int]:
    """The lines of the block below line ``i`` (indented deeper than ``col``), blank lines left out."""
    out = []
    for j in range(i + 1, len(lines)):
        if not lines[j].strip():
            continue
        if _indent(lines[j]) <= col:
            break
        out.append(j)
    return out


def _next_line(lines: list[str], i: int) -> int | None:
    """The first line after ``i`` that is not blank."""
    for j in range(i + 1, len(lines)):
        if lines[j].strip():
            return j
    return None


def _is_nested_node(line: str) -> bool:
    """The first line below a bare ``key:`` opens a mapping, a list, a flow collection or is a comment:
    no scalar continues there."""
    s = line.strip()
    return bool(_key(line)) or s[:1] in ("-", "{", "[", "#", "?", "&", "!", "*")


@dataclass
class _Item:
    """The keys of one mapping at one column (a ``- name: X`` list item, a JSON object)."""

    col: int
    name: str | None = None
    values: list[tuple[int, int, int]] = field(default_factory=list)  # (line, start, end) of literal values
    block: list[tuple[int, int, int]] = field(default_factory=list)  # lines of a ``value: |`` block scalar
    texts: list[str] = field(default_factory=list)  # the value's text (an authorization value needs its scheme)


def env_hits(lines: list[str]) -> list[Hit]:
    """``name: CRED`` / ``value: literal`` pairs of one mapping (either order), in one pass with a stack."""
    hits: list[Hit] = []
    stack: list[_Item] = []
    block_of: _Item | None = None  # the item whose ``value: |`` block scalar is being read
    block_col = 0

    def close(item: _Item) -> None:
        text = "\n".join(item.texts).strip()
        if (item.name and (item.values or item.block) and named_value_ok(item.name.strip("\"'"), text)
                and not (item.block and is_reference(text))):
            spans = item.values + item.block
            ln, s, e = spans[0]
            hits.append(Hit("k8s-env-literal", ln, s, e, extra=spans[1:]))

    for i, line in enumerate(lines):
        if _blank(line):
            continue
        ind = _indent(line)
        if block_of is not None:
            if ind > block_col:
                if MASK not in line:
                    block_of.block.append((i, ind, len(line)))
                    block_of.texts.append(line.strip())
                continue
            block_of = None
        while stack and stack[-1].col > ind:  # a dash line (ind < key column) closes the previous item too
            close(stack.pop())
        k = _key(line)
        if not k:
            continue
        col, key, rest, _ = k
        if not stack or stack[-1].col != col:
            stack.append(_Item(col))
        item = stack[-1]
        if key == "name":
            item.name = _strip_comment(rest)
            continue
        _, value = _scalar(rest)
        if key == "value" and value:
            if _BLOCK_SCALAR.fullmatch(value):
                block_of, block_col = item, col
            elif not is_reference(value):
                item.values.append((i, *_value_span(line, rest, value)))
                item.texts.append(unquote(value))
    while stack:
        close(stack.pop())
    return hits


def yaml_hits(lines: list[str]) -> list[Hit]:
    """Credential keys whose value no line rule sees whole: a block scalar (``|``, ``>-``, under any key), a
    plain value on the lines below the key, ``Bearer TOKEN`` as a plain value, and an alias (``*a``) of an
    anchored literal (``&a``) -- the anchored value is masked. One pass: a block read as a value (a string,
    not keys) is not read again, and a bare ``key:`` looks at one line below it before reading a block."""
    hits: list[Hit] = []
    anchors: dict[str, tuple[str, list[tuple[int, int, int]]]] = {}  # anchor -> (text, spans) of its scalar
    covered = -1
    for i, line in enumerate(lines):
        if i <= covered:
            continue
        k = _key(line)
        if not k:
            continue
        col, key, rest, _ = k
        anchor, value = _scalar(rest)
        cred = is_credential_name(key) or is_auth_name(key)
        rule = "authorization-header" if is_auth_name(key) and not is_credential_name(key) else "credential-assignment"
        alias = _ALIAS.fullmatch(value)
        if alias:
            text, spans = anchors.get(alias.group("alias"), ("", []))
            if cred and spans and named_value_ok(key, text) and not is_reference(text):
                hits.append(Hit(rule, i, len(line), len(line), extra=spans))
            continue
        is_block = not value or bool(_BLOCK_SCALAR.fullmatch(value))
        if is_block:
            if not (anchor or cred):
                continue
            if not value:  # a bare key: a scalar continues below it, or a mapping/list is nested there
                j = _next_line(lines, i)
                if j is None or _indent(lines[j]) <= col or _is_nested_node(lines[j]):
                    continue
            block = _block(lines, i, col)
            if block:
                covered = block[-1]
            spans = [(j, _indent(lines[j]), len(lines[j])) for j in block if MASK not in lines[j]]
            text = "\n".join(lines[j].strip() for j in block)
        elif anchor or (cred and _is_plain_scalar(value)):
            spans, text = [(i, *_value_span(line, rest, value))], unquote(value)
        else:
            continue
        if anchor and spans:
            anchors[anchor] = (text, spans)
        if not (cred and spans and named_value_ok(key, text)) or is_reference(_credential_part(text)):
            continue
        if is_block:
            hits.append(Hit(rule, i, len(line), len(line), extra=spans))  # the finding names the key's line
        elif not_prose(text):
            hits.append(Hit(rule, i, spans[0][1], spans[0][2]))
    return hits


def _is_plain_scalar(value: str) -> bool:
    """A YAML plain value the line rules may cut short: one word (``)`` and ``(`` are value characters in YAML),
    or ``Bearer TOKEN``; never a quoted string, a flow collection or a phrase."""
    if value[:1] in ("\"", "'", "{", "[", "("):
        return False
    return not re.search(r"\s", value) or bool(AUTH_VALUE.match(value))


def _credential_part(text: str) -> str:
    """The part of a value that is the secret: the token after an authorization scheme, else all of it."""
    m = AUTH_VALUE.match(text)
    return text[m.end() - 1:] if m else text


_KIND_SECRET = re.compile(r"[\"']?\bkind[\"']?\s{0,8}:\s{0,8}[\"']?Secret\b(?![\w-])")
_DATA_INLINE = re.compile(r"[\"']?\b(?P<k>data|stringData)[\"']?\s{0,8}:\s{0,8}\{(?P<v>[^{}]{0,65536})\}")
_FLOW_VALUE = re.compile(r":\s*(\"(?:[^\"\\]|\\.)*\"|'[^']*'|[^,}]+)")


def _flow_has_literal(inner: str) -> bool:
    if MASK in inner:
        return False
    values = [m.group(1).strip() for m in _FLOW_VALUE.finditer(inner)]
    return any(not is_reference(v) for v in values) if values else bool(inner.strip())


def secret_hits(lines: list[str]) -> list[Hit]:
    """``data``/``stringData`` with content in a ``kind: Secret`` document (``stringData`` anywhere)."""
    hits: list[Hit] = []
    docs: list[list[int]] = []
    cur: list[int] = []
    for i, line in enumerate(lines):
        if line.startswith("---"):
            docs.append(cur)
            cur = []
        else:
            cur.append(i)
    docs.append(cur)
    for doc in docs:
        is_secret = any(_KIND_SECRET.search(lines[i]) for i in doc)
        covered = -1  # data blocks already masked reach up to this line: nested keys are inside them
        for pos, i in enumerate(doc):
            if i <= covered:
                continue
            line = lines[i]
            spans: list[tuple[int, int, int]] = []
            for m in _DATA_INLINE.finditer(line):  # flow YAML or one-line JSON
                if (m.group("k") == "stringData" or is_secret) and _flow_has_literal(m.group("v")):
                    spans.append((i, m.start("v"), m.end("v")))
            k = _key(line)
            if not spans and k and k[1] in ("data", "stringData") and (k[1] == "stringData" or is_secret):
                col, _, rest, _ = k
                rest = _strip_comment(rest)
                if rest and rest not in ("{", "{}", "null", "~") and not is_reference(rest):
                    spans.append((i, *_value_span(line, k[2], rest)))
                elif not rest or rest == "{":  # block YAML, or pretty JSON opening a mapping
                    for j in doc[pos + 1:]:
                        if _blank(lines[j]):
                            continue
                        if _indent(lines[j]) <= col:
                            break
                        covered = j
                        kj = _key(lines[j])
                        if kj and kj[2]:
                            vj = _strip_comment(kj[2])
                            if vj in ("{", "[") or is_reference(vj):
                                continue
                            spans.append((j, *_value_span(lines[j], kj[2], vj)))
                        elif lines[j].strip() not in ("{", "}", "},", "[", "]", "],") and MASK not in lines[j]:
                            s = _indent(lines[j])
                            spans.append((j, s, len(lines[j])))
            if spans:
                end = len(line)  # the finding sits on the data line; the values are masked
                hits.append(Hit("secret-manifest-data", i, end, end, extra=spans))
    return hits


_PEM_ONE_LINE = re.compile(r"(?:\\[nr]|[A-Za-z0-9+/=\s\"'])*")
_PEM_LINE = re.compile(r"[\"']?[A-Za-z0-9+/=]{8,}(?:\\n)?[\"']?,?")


def private_key_bodies(lines: list[str], hits: list[Hit]) -> list[Hit]:
    """Mask the body lines of each block; a block with no base64 body (prose naming the BEGIN line,
    a body already masked) is no finding. Only a body that runs to the end of its line goes on to the
    next lines (one stopped by an END or another BEGIN on the line is whole)."""
    kept = []
    for h in hits:
        if h.rule != "private-key":
            kept.append(h)
            continue
        body = lines[h.line][h.start:h.end]
        literal = bool(_PEM_ONE_LINE.fullmatch(body)) and len(re.findall(r"[A-Za-z0-9+/=]", body)) >= 8
        if h.end == len(lines[h.line]):
            for j in range(h.line + 1, len(lines)):
                if "-----END" in lines[j] or "-----BEGIN" in lines[j]:
                    break
                text = lines[j].strip()
                if text:
                    h.extra.append((j, _indent(lines[j]), len(lines[j])))
                    literal = literal or bool(_PEM_LINE.fullmatch(text))
        if literal:
            kept.append(h)
    return kept


_FLAG_ITEM = re.compile(r"^[ \t]*(?:-[ \t]+)?[\"']?--(?P<name>[A-Za-z][\w-]{0,63})[\"']?[ \t]*,?[ \t]*$")
_VALUE_ITEM = re.compile(r"^[ \t]*(?:-[ \t]+)?(?P<v>\"(?:[^\"\\]|\\.){1,4096}\"|'[^']{1,4096}'"
                         r"|(?:" + AUTH_SCHEME + r"[ \t]+)?[^\s#\"',-][^\s#]{0,4096})"
                         r"[ \t]*,?[ \t]*$")


def flag_item_hits(lines: list[str]) -> list[Hit]:
    """``- --token`` then ``- VALUE``: a credential flag and its value as two list items (YAML or JSON)."""
    hits = []
    flag: str | None = None  # the credential (or authorization) flag of the item before
    for i, line in enumerate(lines):
        if _blank(line):
            continue
        if flag:
            m = _VALUE_ITEM.match(line)
            v = m.group("v") if m else ""
            if m and named_value_ok(flag, v) and not is_reference(_credential_part(v)) and not_spec(v):
                hits.append(Hit("password-flag", i, m.start("v"), m.end("v")))
        m = _FLAG_ITEM.match(line)
        flag = m.group("name") if m and may_name_secret(m.group("name")) else None
    return hits
