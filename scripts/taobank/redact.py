"""Secret lint and redaction: the rules are data (:data:`RULES`).

``lint_text`` finds inline credentials in rendered manifests, sbatch scripts
and shell snippets and reports the rule and ``file:line`` -- never the value.
``redact_text`` returns the text with every such value masked (the record
store passes free text through it).

What is never flagged: references (``$VAR``, ``${VAR}``, ``$(cmd)``,
``{{ tmpl }}``, ``valueFrom``/``secretRef``), placeholders (``<your-key>``,
``***``, ``...``), names that only contain a credential word
(``HF_TOKEN_PATH``, ``CRED_SECRET=tao-creds-$JOB_ID``, ``NUM_TOKEN=5``).

A reviewed line is allowed by a marker on that line naming the rule and a
reason, e.g. ``# lint-ok: credential-assignment fixed password of the local
test cluster``. Lint lists every allowance it honoured; a marker with an
unknown rule or no reason is itself a finding (``bad-allowance``).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

MASK = "***REDACTED***"

# ---------------------------------------------------------------- names
_CRED_LAST = {"password", "passwd", "passphrase", "sshpass", "secret", "token", "apikey", "credential", "credentials",
              "creds"}
#: Credential only after another word: DB_PASS is a password, a bare PASS=0 is a counter.
_CRED_LAST_QUALIFIED = {"pass", "pw", "pwd"}
_CRED_PAIRS = {("api", "key"), ("access", "key"), ("secret", "key"), ("private", "key"), ("auth", "key"),
               ("account", "key"), ("signing", "key"), ("encryption", "key"), ("master", "key"), ("ngc", "key"),
               ("session", "key"), ("client", "secret"), ("access", "token"), ("refresh", "token")}
#: A leading quantity word makes a name a count, not a credential (NUM_TOKEN=5, MAX_TOKENS).
_QUANTITY_FIRST = {"num", "n", "nb", "max", "min", "count", "total", "len", "length", "number"}
_WORDS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[0-9]+")


def is_credential_name(name: str) -> bool:
    """True for names whose last word(s) say "secret": HF_TOKEN, NGC_API_KEY, password, apiKey.

    False for HF_TOKEN_PATH (last word PATH), SECRET_NAME, NUM_TOKEN, MAX_TOKENS.
    """
    words = [w.lower() for w in _WORDS.findall(name)]
    if not words or words[0] in _QUANTITY_FIRST:
        return False
    if words[-1] in _CRED_LAST or (len(words) >= 2 and words[-1] in _CRED_LAST_QUALIFIED):
        return True
    return len(words) >= 2 and (words[-2], words[-1]) in _CRED_PAIRS


_NOT_SECRET = {"", "-", "null", "none", "~", "true", "false", "yes", "no", "''", '""'}
_PLACEHOLDER = re.compile(r"<[^<>]*>|[*xX.\u2026]{3,}|\.\.\.|changeme|REDACTED|\*+REDACTED\*+", re.I)


def is_reference(value: str) -> bool:
    """True when ``value`` is no literal secret: a reference, placeholder, empty or boolean."""
    v = value.strip()
    if len(v) >= 2 and v[0] == v[-1] and v[0] in "\"'":
        v = v[1:-1].strip()
    if v.lower() in _NOT_SECRET:
        return True
    if "$" in v or "`" in v or "{{" in v or "{%" in v:
        return True
    return bool(_PLACEHOLDER.fullmatch(v))


# ---------------------------------------------------------------- rules
#: A value: double-quoted, single-quoted, or an unquoted word.
_V = r"""(?P<v>"(?:[^"\\\n]|\\.)*"|'[^'\n]*'|[^\s"'`#;&|,})\]]+)"""
_NAME = r"(?P<name>[A-Za-z_][A-Za-z0-9_.-]*)"


@dataclass(frozen=True)
class Rule:
    """One lint rule. Line rules carry regexes with a ``v`` group (the value to mask)
    and optionally a ``name`` group that must be a credential name; structure
    rules (``patterns=()``) are implemented in code below."""

    name: str
    description: str
    patterns: tuple[str, ...] = ()
    flags: int = 0
    reference_ok: bool = True  # a reference in the v group is no finding


RULES: tuple[Rule, ...] = (
    Rule("private-key", "private key block", (r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----(?P<v>)",),
         reference_ok=False),
    Rule("aws-access-key", "AWS access key id", (r"\b(?P<v>(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16})\b",),
         reference_ok=False),
    Rule("nvidia-api-key", "NVIDIA API key (nvapi-...)", (r"\b(?P<v>nvapi-[A-Za-z0-9_-]{20,})",), reference_ok=False),
    Rule("huggingface-token", "Hugging Face token (hf_...)", (r"\b(?P<v>hf_[A-Za-z0-9]{30,})\b",), reference_ok=False),
    Rule("github-token", "GitHub token (ghp_/gho_/ghs_/github_pat_...)",
         (r"\b(?P<v>gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})\b",), reference_ok=False),
    Rule("slack-token", "Slack token (xox...-)", (r"\b(?P<v>xox[abprs]-[A-Za-z0-9-]{10,})",), reference_ok=False),
    Rule("openai-key", "OpenAI/Anthropic-style secret key (sk-...)",
         (r"\b(?P<v>sk-(?:ant-|proj-)?[A-Za-z0-9_-]{32,})",), reference_ok=False),
    Rule("google-api-key", "Google API key (AIza...)", (r"\b(?P<v>AIza[0-9A-Za-z_-]{35})",), reference_ok=False),
    Rule("jwt", "JSON Web Token (eyJ...)",
         (r"\b(?P<v>eyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,})",), reference_ok=False),
    Rule("authorization-header", "Authorization header with a literal credential",
         (r"Authorization\s*:\s*(?:Bearer|Basic|Token|Bot|Digest)\s+" + _V,), flags=re.I),
    Rule("url-credentials", "user:password@ in a URL",
         (r"\b[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@\"'<>]+:(?P<v>[^/\s@\"'<>]+)@",)),
    Rule("presigned-url", "presigned/signed URL query parameter (signature, credential, token)",
         (r"[?&](?:X-Amz-Signature|X-Amz-Credential|X-Amz-Security-Token|X-Goog-Signature|X-Goog-Credential"
          r"|Signature|sig|AWSAccessKeyId)=(?P<v>[^&\s\"'#<>]+)",)),
    Rule("from-literal", "literal credential in kubectl --from-literal=KEY=VALUE",
         (r"--from-literal(?:=|\s+)[\"']?" + _NAME + r"=" + _V,)),
    Rule("docker-password", "literal value after --docker-password", (r"--docker-password(?:=|[ \t]+)" + _V,)),
    Rule("password-flag", "literal value after --password, --token, --api-key, --secret-key...",
         (r"--(?:password|passwd|token|api-key|apikey|access-token|auth-token|secret-key|client-secret)"
          r"(?:=|[ \t]+)(?!-)" + _V,)),
    Rule("k8s-env-literal", "Kubernetes env entry with a credential name and a literal value",
         (r"[\"']?name[\"']?\s*:\s*[\"']?" + _NAME + r"[\"']?\s*,\s*[\"']?value[\"']?\s*:\s*" + _V,)),
    Rule("secret-manifest-data", "Secret manifest carrying data/stringData"),
    Rule("credential-assignment", "credential-named variable or key assigned a literal",
         (r"(?<![\w$.\-/])" + _NAME.replace("_.-", "_") + r"=" + _V,  # shell, env files, srun --export
          r"(?:^|[\s{,\[(`;])[\"']" + _NAME + r"[\"']\s*:\s*" + _V,  # JSON / quoted YAML keys
          r"(?:^|[\s{,\[(`;])(?:-\s+)?" + _NAME + r":[ \t]+" + _V,  # YAML keys
          r"(?<![\w$.])" + _NAME + r"\s+=\s+(?P<v>\"[^\"\n]*\"|'[^'\n]*')")),  # NAME = "..."
    Rule("bad-allowance", "lint-ok marker without a known rule name and a reason"),
)
RULE_NAMES = tuple(r.name for r in RULES)
_COMPILED = tuple((r, tuple(re.compile(p, r.flags) for p in r.patterns)) for r in RULES)
_ORDER = {name: i for i, name in enumerate(RULE_NAMES)}
_DESCRIPTIONS = {r.name: r.description for r in RULES}

_ALLOW = re.compile(r"lint-ok:[ \t]*(?P<rule>[A-Za-z0-9_-]*)(?:[ \t]+(?P<reason>.*?))?[ \t]*(?:-->)?[ \t]*$")


@dataclass
class Finding:
    """One lint finding; it never holds the offending value."""

    rule: str
    file: str
    line: int
    allowed: str | None = None  # the allowance reason when a marker allowed it

    @property
    def description(self) -> str:
        return _DESCRIPTIONS.get(self.rule, self.rule)

    def __str__(self) -> str:
        if self.allowed is not None:
            return f"{self.file}:{self.line}: allowed {self.rule} ({self.allowed})"
        return f"{self.file}:{self.line}: {self.rule}: {self.description}"

    def to_dict(self) -> dict:
        return {"rule": self.rule, "file": self.file, "line": self.line, "allowed": self.allowed,
                "description": self.description}


@dataclass
class _Hit:
    rule: str
    line: int  # 0-based
    start: int
    end: int
    extra: list[tuple[int, int, int]] = field(default_factory=list)  # more (line, start, end) spans to mask


# ---------------------------------------------------------------- scanning
def _line_hits(lines: list[str]) -> list[_Hit]:
    hits: list[_Hit] = []
    for i, line in enumerate(lines):
        for rule, rxs in _COMPILED:
            for rx in rxs:
                for m in rx.finditer(line):
                    v = m.group("v")
                    if "name" in rx.groupindex and not is_credential_name(m.group("name")):
                        continue
                    if rule.reference_ok and is_reference(v):
                        continue
                    hits.append(_Hit(rule.name, i, m.start("v"), m.end("v")))
    return hits


_KEY = re.compile(r"^(?P<ind>[ \t]*)(?P<dash>-[ \t]+)?(?P<q>[\"']?)(?P<key>[A-Za-z_][\w.-]*)(?P=q)[ \t]*:(?:[ \t]+(?P<rest>.*))?$")


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


def _strip_comment(rest: str) -> str:
    if rest[:1] in "\"'":
        return rest
    return re.split(r"[ \t]#", rest, maxsplit=1)[0].strip()


def _env_hits(lines: list[str]) -> list[_Hit]:
    """``- name: CRED`` / ``value: literal`` pairs in block YAML (either order)."""
    hits = []
    for i, line in enumerate(lines):
        k = _key(line)
        if not k or k[1] != "value":
            continue
        col, _, rest, item_start = k
        value = _strip_comment(rest)
        if not value or is_reference(value):
            continue
        name = None
        # up to the item's dash line, then down to the item's end
        if not item_start:
            for j in range(i - 1, -1, -1):
                if _blank(lines[j]):
                    continue
                kj = _key(lines[j])
                if kj and kj[0] == col:
                    if kj[1] == "name":
                        name = _strip_comment(kj[2])
                    if kj[3] or name:
                        break
                    continue
                if _indent(lines[j]) <= col:
                    break
        if name is None:
            for j in range(i + 1, len(lines)):
                if _blank(lines[j]):
                    continue
                kj = _key(lines[j])
                if _indent(lines[j]) < col or (kj and kj[3]):
                    break
                if kj and kj[0] == col and kj[1] == "name":
                    name = _strip_comment(kj[2])
                    break
        if name and is_credential_name(name.strip("\"'")):
            start = line.index(value, len(line) - len(line.lstrip()) + 1)
            hits.append(_Hit("k8s-env-literal", i, start, start + len(value)))
    return hits


_KIND_SECRET = re.compile(r"^\s*[\"']?kind[\"']?\s*:\s*[\"']?Secret[\"']?\s*,?\s*$", re.M)


def _secret_hits(lines: list[str]) -> list[_Hit]:
    """``data``/``stringData`` with content in a ``kind: Secret`` document (stringData anywhere)."""
    hits = []
    docs, cur = [], []
    for i, line in enumerate(lines):
        if line.startswith("---"):
            docs.append(cur)
            cur = []
        else:
            cur.append(i)
    docs.append(cur)
    for doc in docs:
        is_secret = any(_KIND_SECRET.match(lines[i]) for i in doc)
        for pos, i in enumerate(doc):
            k = _key(lines[i])
            if not k or k[1] not in ("data", "stringData") or (k[1] == "data" and not is_secret):
                continue
            col, _, rest, _ = k
            rest = _strip_comment(rest)
            spans: list[tuple[int, int, int]] = []
            if rest and rest not in ("{}", "null", "~", "{", "{},"):
                start = lines[i].rindex(rest)
                spans.append((i, start, start + len(rest)))
            elif not rest or rest == "{":  # block YAML, or pretty JSON opening a mapping
                for j in doc[pos + 1:]:
                    if _blank(lines[j]):
                        continue
                    if _indent(lines[j]) <= col:
                        break
                    kj = _key(lines[j])
                    if kj and kj[2]:
                        s = lines[j].rindex(kj[2])
                        spans.append((j, s, s + len(kj[2])))
                    else:
                        s = _indent(lines[j])
                        spans.append((j, s, len(lines[j])))
            if spans:
                end = len(lines[i])  # the finding sits on the data line; the values are masked
                hits.append(_Hit("secret-manifest-data", i, end, end, extra=spans))
    return hits


def _private_key_extra(lines: list[str], hits: list[_Hit]) -> None:
    for h in hits:
        if h.rule != "private-key":
            continue
        for j in range(h.line + 1, len(lines)):
            if "-----END" in lines[j]:
                break
            h.extra.append((j, 0, len(lines[j])))


def _scan(text: str) -> tuple[list[str], list[_Hit]]:
    lines = text.splitlines()
    hits = _line_hits(lines) + _env_hits(lines) + _secret_hits(lines)
    _private_key_extra(lines, hits)
    hits.sort(key=lambda h: (h.line, _ORDER[h.rule], h.start))
    kept: list[_Hit] = []
    for h in hits:  # overlapping spans on one line: the earlier rule wins
        if any(k.line == h.line and k.start < h.end and h.start < k.end for k in kept):
            continue
        if h.start == h.end and any(k.line == h.line and k.rule == h.rule for k in kept):
            continue
        kept.append(h)
    return lines, kept


def scan(text: str, filename: str = "<stdin>") -> list[Finding]:
    """Every finding, allowed ones included (``Finding.allowed`` holds the reason)."""
    lines, hits = _scan(text)
    allow: dict[int, tuple[str, str]] = {}
    out: list[Finding] = []
    for i, line in enumerate(lines):
        m = _ALLOW.search(line)
        if not m:
            continue
        rule, reason = m.group("rule"), (m.group("reason") or "").strip()
        if rule not in RULE_NAMES or rule == "bad-allowance" or not reason:
            out.append(Finding("bad-allowance", filename, i + 1))
        else:
            allow[i] = (rule, reason)
    seen = set()
    for h in hits:
        key = (h.rule, h.line)
        if key in seen:
            continue
        seen.add(key)
        a = allow.get(h.line)
        out.append(Finding(h.rule, filename, h.line + 1, a[1] if a and a[0] == h.rule else None))
    out.sort(key=lambda f: (f.line, _ORDER[f.rule]))
    return out


def lint_text(text: str, filename: str = "<stdin>", *, include_allowed: bool = False) -> list[Finding]:
    """Findings that fail the lint (and, with ``include_allowed``, the allowed ones too)."""
    return [f for f in scan(text, filename) if include_allowed or f.allowed is None]


def redact_text(text: str) -> str:
    """``text`` with every secret value masked (allowance markers do not apply here)."""
    lines, hits = _scan(text)
    spans: dict[int, list[tuple[int, int]]] = {}
    for h in hits:
        for ln, s, e in [(h.line, h.start, h.end), *h.extra]:
            if e > s:
                spans.setdefault(ln, []).append((s, e))
    if not spans:
        return text
    raw = text.splitlines(keepends=True)
    for ln, ss in spans.items():
        line = raw[ln]
        body = line.rstrip("\r\n")
        nl = line[len(body):]
        for s, e in sorted(_merge(ss), reverse=True):
            body = body[:s] + MASK + body[e:]
        raw[ln] = body + nl
    return "".join(raw)


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for s, e in sorted(spans):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


def rules_markdown() -> str:
    """The rule list as a Markdown table (docs/secret-lint.md embeds exactly this)."""
    rows = ["| rule | catches |", "|---|---|"] + [f"| `{r.name}` | {r.description} |" for r in RULES]
    return "\n".join(rows) + "\n"
