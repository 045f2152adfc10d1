"""Secret lint and redaction: the rules are data (:data:`RULES`).

``lint_text`` finds inline credentials in rendered manifests, sbatch scripts
and shell snippets and reports the rule and ``file:line`` -- never the value,
nor any part of it. ``redact_text`` returns the text with every value that
``lint_text`` flags masked (the record store passes free text through it).
``lint_objects`` lints manifests as sent: objects, never a re-wrapped dump.
``is_credential_name`` is the one rule for "this variable name holds a secret".

What is never flagged: references (``$VAR``, ``${VAR}``, ``$(cmd)``,
``{{ tmpl }}``, ``valueFrom``/``secretRef``, another variable's name such as
``NGC_API_KEY``), placeholders (``<your-key>``, ``***``, ``...``), names that
only contain a credential word (``HF_TOKEN_PATH``, ``CRED_SECRET_FILE``,
``NUM_TOKEN=5``).

A reviewed line is allowed by a marker on that line naming the rule and a
reason, e.g. ``# lint-ok: credential-assignment fixed password of the local
test cluster``. Lint lists every allowance it honoured; a marker with an
unknown rule or no reason is itself a finding (``bad-allowance``).

Every scan is linear in the size of the text: line rules use bounded
quantifiers, and the YAML structure rules walk the lines once with a stack.
"""
from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

MASK = "***REDACTED***"

# ---------------------------------------------------------------- names
#: A last word that alone says "secret".
_CRED_LAST = {"password", "passwd", "passphrase", "sshpass", "secret", "token", "apikey", "credential", "credentials",
              "creds"}
#: A single run-together word ending like this is a credential too: PGPASSWORD, AUTHTOKEN.
_CRED_SUFFIX = ("password", "passwd", "passphrase", "secret", "token", "apikey")
#: Credential only after another word: DB_PASS, SMTP_PW, GH_PAT, WANDB_KEY (a bare PASS=0 or KEY is not).
_CRED_LAST_QUALIFIED = {"pass", "pw", "pwd", "pat", "key"}
#: ``<word>_KEY`` where the word says what the key indexes, not what it unlocks.
_KEY_NOT_CRED = {
    "sort", "sorting", "primary", "foreign", "partition", "cache", "hash", "lookup", "join", "index", "group", "grouping",
    "routing", "shard", "sharding", "row", "dict", "map", "metric", "label", "selector", "node", "topology",
    "annotation", "data", "dataset", "batch", "image", "input", "output", "feature", "target", "field", "column",
    "attr", "attribute", "public", "pub", "host", "hot", "idempotency", "dedup", "unique", "composite", "object", "obj",
    "config", "state", "order", "match", "experiment", "run", "result", "file", "path", "dir", "env", "name", "id",
    "type", "kind", "ref", "mode", "lock", "queue", "cursor", "page", "layout", "json", "yaml", "locale", "message",
    "msg", "event", "topic", "stream", "record", "entry", "item", "version", "tag", "release", "cluster", "prefix",
    "model", "checkpoint", "split", "class", "sample", "metadata", "schema", "translation", "lang", "search", "sub",
}
#: ``passwordKey``/``tokenKey`` name the key *inside* a Secret that holds the value (Helm values).
_NAMES_A_KEY = {"password", "passwd", "pass", "pwd", "token", "credential", "credentials", "creds"}
#: ``imagePullSecret``, ``tlsSecret``: the name of a Secret object, not its content.
_SECRET_OBJECT_PREV = {"pull", "tls"}
#: A first word that makes the whole name a reference (``existingSecret``) or a count (``NUM_TOKEN``, ``MAX_TOKENS``).
#: ``pad_token``, ``eos_token``: a tokenizer's special tokens.
_TOKENIZER_PREV = {"pad", "eos", "bos", "unk", "cls", "sep", "mask", "special", "start", "end", "stop", "image"}
_NOT_CRED_FIRST = {"existing", "num", "n", "nb", "max", "min", "count", "total", "len", "length", "number"}
_WORDS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[0-9]+")


def is_credential_name(name: str) -> bool:
    """True when a variable or key named ``name`` holds a secret: HF_TOKEN, NGC_API_KEY, PGPASSWORD, WANDB_KEY.

    Words split on ``_``, ``-``, ``.`` and camelCase; the last word decides, so HF_TOKEN_PATH,
    CRED_SECRET_FILE and SECRET_NAME name a place, and SORT_KEY, MONKEY, MAX_TOKENS are no secret.
    docs/secret-lint.md states the rule in full.
    """
    words = [w.lower() for w in _WORDS.findall(name.rstrip(".").rsplit(".", 1)[-1])]  # auth.password: its last part
    if not words or words[0] in _NOT_CRED_FIRST:
        return False
    last = words[-1]
    prev = words[-2] if len(words) >= 2 else None
    if last == "key":
        return prev is not None and not {prev, prev.rstrip("s")} & (_KEY_NOT_CRED | _NAMES_A_KEY)
    if last == "secret" and prev in _SECRET_OBJECT_PREV:
        return False
    if last == "token" and prev in _TOKENIZER_PREV:
        return False
    if (prev, last) == ("key", "base"):  # SECRET_KEY_BASE
        return True
    if last in _CRED_LAST or (prev is not None and last in _CRED_LAST_QUALIFIED):
        return True
    return last.endswith(_CRED_SUFFIX)


_NOT_SECRET = {"", "-", "null", "none", "~", "true", "false", "yes", "no", "''", '""', "[]", "{}"}
_PLACEHOLDER = re.compile(r"<[^<>]*>|[*xX.\u2026]{3,}|\.\.\.|changeme|changeit|REDACTED|\*+REDACTED\*+|your[-_][\w-]*",
                          re.I)
#: Another variable's or key's name (ExternalSecret ``secretKey: NGC_API_KEY``).
_ENV_NAME = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+")
#: A program variable (``token=hf_token``, ``key=args.api_key``): its last part is a credential name.
_IDENT = re.compile(r"(?:[a-z_][a-z0-9_]*|[a-z]+[A-Z]\w*)(?:\.[A-Za-z_]\w*)*")
#: A file path (``SSH_KEY: /home/u/.ssh/id_rsa``): absolute or ~/ and with a plain lowercase directory word.
_PATH = re.compile(r"(?:~|\.{1,2})?/[\w.@+-]+(?:/[\w.@+-]*)+")
_PATH_WORD = re.compile(r"/[a-z]{3,}(?=/)")
_PRINTF = re.compile(r"%[-0-9.]*[sdqb](?:\\n)*")
_WHOLE_REF = re.compile(r"\$\{?[A-Za-z_]\w*\}?|\$\([^()]*\)|\{\{.*\}\}|%[A-Za-z_]\w*%")


def _unquote(value: str) -> str:
    v = value.strip()
    if len(v) >= 2 and v[0] == v[-1] and v[0] in "\"'":
        v = v[1:-1].strip()
    return v


def is_reference(value: str) -> bool:
    """True when ``value`` is no literal secret: a reference, a name, a path, a placeholder, empty or boolean."""
    v = _unquote(value)
    if v.lower() in _NOT_SECRET or MASK in v:
        return True
    if "$" in v or "`" in v or "{{" in v or "{%" in v or _PRINTF.fullmatch(v):
        return True
    if _PLACEHOLDER.fullmatch(v) or _ENV_NAME.fullmatch(v) or v.startswith("<"):
        return True
    if _IDENT.fullmatch(v) and is_credential_name(v.rsplit(".", 1)[-1]):
        return True
    return bool(_PATH.fullmatch(v) and _PATH_WORD.search(v))


def _is_whole_reference(value: str) -> bool:
    """Stricter: the whole value is one reference (a password may contain a literal ``$``)."""
    v = _unquote(value)
    return bool(not v or _WHOLE_REF.fullmatch(v) or _PLACEHOLDER.fullmatch(v) or _ENV_NAME.fullmatch(v))


#: Lowercase words of prose, never a password after a flag: "never pass --password on argv".
PROSE_WORDS = {
    "on", "in", "or", "and", "the", "a", "an", "to", "is", "are", "be", "with", "via", "from", "for", "at", "as", "of",
    "if", "not", "never", "only", "instead", "here", "there", "it", "this", "that", "which", "when", "flag", "option",
    "argument", "value", "must", "should", "will", "can", "may", "see", "below", "above", "prompt", "prompts", "then",
    "so", "but", "by", "use", "using", "was", "were", "has", "have", "into",
}


def _not_prose(v: str) -> bool:
    return v.rstrip(".,:;") not in PROSE_WORDS


def _not_spec(v: str) -> bool:
    """``--secret id=npmrc,src=...`` (docker build) is a spec of where the secret is, not a secret."""
    return not re.match(r"[A-Za-z][\w-]*=(?!=|$)", _unquote(v)) and _not_prose(v)


def _is_private_key_b64(v: str) -> bool:
    head = v[: len(v) // 4 * 4][:96]
    try:
        return b"PRIVATE KEY" in base64.b64decode(head + "=" * (-len(head) % 4))
    except (binascii.Error, ValueError):
        return False


# ---------------------------------------------------------------- rules
#: A value: double-quoted, single-quoted, or an unquoted word (never a flow mapping/sequence opener).
_VCHARS = r"""[^\s"'`#;&|,(){}\[\]]"""
#: (an unquoted value is taken whole -- the next character is no value character -- and a call such
#: as ``os.environ[...]`` or ``get_token(...)`` is no value; no possessive quantifier: Python 3.10 runs this)
_V = (r"""(?P<v>"(?:[^"\\\n]|\\.){0,4096}"|'[^'\n]{0,4096}'|(?![{\[])""" + _VCHARS + r"{1,4096}(?!" + _VCHARS
      + r")(?![(\[]))")
_NAME = r"(?P<name>[A-Za-z_][A-Za-z0-9_.-]{0,127})"
_SHNAME = r"(?P<name>[A-Za-z_][A-Za-z0-9_]{0,127})"
#: Before a key: start of line or a delimiter (a lookbehind, so a skipped match never hides the next key).
_KEY_START = r"(?<![^\s{,\[(`;])"


@dataclass(frozen=True)
class Rule:
    """One lint rule. Line rules carry regexes with a ``v`` group (the value to mask) and optionally a
    ``name`` group that must be a credential name; structure rules (``patterns=()``) are code below.
    ``reference``: "any" (a value holding ``$VAR`` is a reference), "whole" (only a value that *is*
    a reference), "never" (the shape alone is a secret). ``check`` vets a value the regex matched."""

    name: str
    description: str
    patterns: tuple[str, ...] = ()
    flags: int = 0
    reference: str = "any"
    check: Callable[[str], bool] | None = None

    @property
    def needles(self) -> tuple[str, ...]:
        """Lowercase strings one of which a line must hold for a pattern to match (a cheap pre-filter)."""
        return _NEEDLES.get(self.name, ("",))


_TOOLS = ("login", "sshpass", "mysql", "mariadb", "curl", "http", "xh ", "redis-cli", "ldap", "mongo", "sqlcmd",
          "bcp", "osql", "isql", "zip", "7z", "openssl", "smb", "rpcclient", "-d", "echo", "printf", "htpasswd")
_NEEDLES: dict[str, tuple[str, ...]] = {
    "private-key": ("private key",), "private-key-base64": ("ls0tls1crudjt",),
    "aws-access-key": ("akia", "asia", "agpa", "aida", "aroa", "anpa", "anva", "aipa"), "nvidia-api-key": ("nvapi-",),
    "huggingface-token": ("hf_",), "github-token": ("gh", "github_pat_"), "slack-token": ("xox", "hooks.slack"),
    "openai-key": ("sk-",), "google-api-key": ("aiza",),
    "service-token": ("sk_", "rk_", "whsec_", "glpat-", "npm_", "pypi-", "dckr_pat_", "hvs.", "sg.", "dop_v1_",
                      "dapi"),
    "jwt": ("eyj",), "authorization-header": ("authorization",), "url-credentials": ("://",),
    "presigned-url": ("sig", "x-amz-", "x-goog-", "awsaccesskeyid"), "docker-config-auth": ("auth",),
    "from-literal": ("--from-literal",), "docker-password": ("--docker-password",), "password-flag": ("-",),
    "short-password-flag": _TOOLS, "cli-credential": ("config", "wandb", "mc ", "secret"), "k8s-env-literal": ("name",),
    "pgpass-entry": (":",), "netrc-password": ("password",), "credential-assignment": ("=", ":", "<", "env", "arg"),
}


RULES: tuple[Rule, ...] = (
    Rule("private-key", "private key block (PEM, also on one line)",
         (r"-----BEGIN (?:[A-Z0-9]+ ){0,4}PRIVATE KEY(?: BLOCK)?-----(?P<v>.{0,65536}?)(?=-----END|$)",),
         reference="never"),
    Rule("private-key-base64", "base64-encoded PEM private key (LS0tLS1CRUdJTi...)",
         (r"(?<![A-Za-z0-9+/])(?P<v>LS0tLS1CRUdJT[A-Za-z0-9+/]{16,65536}={0,2})",), reference="never",
         check=_is_private_key_b64),
    Rule("aws-access-key", "AWS access key id", (r"\b(?P<v>(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16})\b",),
         reference="never"),
    Rule("nvidia-api-key", "NVIDIA API key (nvapi-...)", (r"\b(?P<v>nvapi-[A-Za-z0-9_-]{20,512})",), reference="never"),
    Rule("huggingface-token", "Hugging Face token (hf_...)", (r"\b(?P<v>hf_[A-Za-z0-9]{30,512})\b",),
         reference="never"),
    Rule("github-token", "GitHub token (ghp_/gho_/ghs_/github_pat_...)",
         (r"\b(?P<v>gh[pousr]_[A-Za-z0-9]{36,512}|github_pat_[A-Za-z0-9_]{22,512})\b",), reference="never"),
    Rule("slack-token", "Slack token (xox...-) or webhook URL",
         (r"\b(?P<v>xox[abprs]-[A-Za-z0-9-]{10,512})", r"hooks\.slack\.com/services/(?P<v>[A-Za-z0-9/]{16,256})"),
         reference="never"),
    Rule("openai-key", "OpenAI/Anthropic-style secret key (sk-...)",
         (r"\b(?P<v>sk-(?:ant-|proj-|svcacct-)?[A-Za-z0-9_-]{32,512})",), reference="never"),
    Rule("google-api-key", "Google API key (AIza...)", (r"\b(?P<v>AIza[0-9A-Za-z_-]{35})",), reference="never"),
    Rule("service-token", "service token with a known prefix (sk_live_, glpat-, npm_, pypi-, dckr_pat_, hvs., SG.)",
         (r"\b(?P<v>(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,256}|whsec_[A-Za-z0-9]{24,256}|glpat-[A-Za-z0-9_-]{20,256}"
          r"|npm_[A-Za-z0-9]{36}|pypi-AgE[A-Za-z0-9_-]{50,512}|dckr_pat_[A-Za-z0-9_-]{20,256}|hvs\.[A-Za-z0-9_-]{24,512}"
          r"|SG\.[A-Za-z0-9_-]{16,64}\.[A-Za-z0-9_-]{16,128}|dop_v1_[a-f0-9]{64}|dapi[a-f0-9]{32})",),
         reference="never"),
    Rule("jwt", "JSON Web Token (eyJ...)",
         (r"\b(?P<v>eyJ[A-Za-z0-9_-]{10,4096}\.eyJ[A-Za-z0-9_-]{10,8192}\.[A-Za-z0-9_-]{10,4096})",),
         reference="never"),
    Rule("authorization-header", "Authorization header with a literal credential",
         (r"Authorization\s{0,8}[:=]\s{0,8}(?:Bearer|Basic|Token|Bot|Digest)\s{1,8}" + _V,), flags=re.I),
    Rule("url-credentials", "user:password@ in a URL (an empty user too)",
         (r"\b[A-Za-z][A-Za-z0-9+.-]{0,30}://[^/\s:@\"'<>]{0,256}:(?P<v>[^/\s@\"'<>]{1,1024})@",), reference="whole"),
    Rule("presigned-url", "presigned/signed URL query parameter (signature, credential, token)",
         (r"[?&](?:X-Amz-Signature|X-Amz-Credential|X-Amz-Security-Token|X-Goog-Signature|X-Goog-Credential"
          r"|Signature|sig|AWSAccessKeyId)=(?P<v>[^&\s\"'#<>]{1,4096})",)),
    Rule("docker-config-auth", "docker/containers config \"auth\" (base64 user:password)",
         (r"[\"']auth[\"']\s{0,8}:\s{0,8}(?P<v>\"[A-Za-z0-9+/]{8,4096}={0,2}\"|'[A-Za-z0-9+/]{8,4096}={0,2}')",),
         reference="never"),
    Rule("from-literal", "literal credential in kubectl --from-literal=KEY=VALUE",
         (r"--from-literal(?:=|[ \t]+)[\"']?" + _NAME + r"=" + _V,)),
    Rule("docker-password", "literal value after --docker-password", (r"--docker-password(?:=|[ \t]+)" + _V,)),
    Rule("password-flag", "literal value after a credential flag (--password, --token, --api-key, -storepass...)",
         (r"(?<![\w-])--(?P<name>[A-Za-z][\w-]{0,63})(?:=|[ \t]+)(?!-)" + _V,
          r"(?<![\w-])--(?P<name>[A-Za-z][\w-]{0,63})[\"']?\s{0,8},\s{0,8}(?!-)(?P<v>\"(?:[^\"\\\n]|\\.){0,4096}\""
          r"|'[^'\n]{0,4096}'|[^\s\"'`#,=\[\]{}()]{1,4096}(?=\s{0,8}[,\]]))",  # ["--token", "VALUE"]
          r"(?<![\w-])-(?:pass(?:in|out)?|passphrase)[ \t]+(?:pass:|env:(?=\$))" + _V,
          r"(?<![\w-])-(?:storepass|keypass|srcstorepass|deststorepass|srckeypass|destkeypass|password|passwd)"
          r"[ \t]+(?!-)" + _V), check=_not_spec),
    Rule("short-password-flag", "password after a short option of a login or database tool (-p of docker login, sshpass, "
         "mysql; -a of redis-cli; -w of ldapsearch; -P of sqlcmd, zip; user%pw of smbclient; user:pw of curl -u; "
         "-D...Password=)",
         (r"\b(?:docker|podman|nerdctl|buildah|skopeo|helm|oras|crane|regctl|apptainer|singularity|az|oc|cf)\b[^\n|;&]{0,512}?"
          r"\blogin\b[^\n|;&]{0,512}?[ \t]-p(?:=|[ \t]+)?(?!-)" + _V,
          r"\b(?:echo|printf)[ \t]+(?:-\w+[ \t]+)?" + _V + r"[ \t]*\|[^\n]{0,512}?(?:--password-stdin|\blogin\b|chpasswd|\bsudo[ \t]+-S)",
          r"\bhtpasswd\b[^\n|;&)]{0,256}?[ \t]-\w*b\w*\b[^\n|;&)]{0,512}[ \t]" + _V + r"[ \t]*(?=$|[)|;&])",
          r"\bredis-cli\b[^\n|;&]{0,512}?[ \t]-a[ \t]+(?!-)" + _V,
          r"\b(?:ldapsearch|ldapadd|ldapmodify|ldapdelete|ldappasswd|ldapwhoami)\b[^\n|;&]{0,512}?[ \t]-w[ \t]+(?!-)" + _V,
          r"\b(?:mongo|mongosh|mongodump|mongorestore|mongoexport|mongoimport)\b[^\n|;&]{0,512}?[ \t]-p[ \t]+(?!-)" + _V,
          r"\b(?:sqlcmd|bcp|osql|isql)\b[^\n|;&]{0,512}?[ \t]-P[ \t]*(?!-)" + _V,
          r"\b(?:zip|unzip|zipcloak)\b[^\n|;&]{0,512}?[ \t]-P[ \t]+(?!-)" + _V,
          r"\b7z[ar]?\b[^\n|;&]{0,512}?[ \t]-p(?!-)" + _V,
          r"\bopenssl\b[^\n|;&]{0,512}?[ \t]-k[ \t]+(?!-)" + _V,
          r"\b(?:smbclient|rpcclient|smbmap|smbcacls)\b[^\n|;&]{0,512}?(?:-U|--user(?:name)?)(?:=|[ \t]+)[\"']?[^\s%\"']{1,256}%"
          + _V,
          r"(?<![\w$])-D(?P<name>[A-Za-z_][\w.-]{0,127})=" + _V,
          r"\bsshpass[ \t]+(?:-[a-oq-zA-Z]\S{0,64}[ \t]+){0,4}-p[ \t]*(?!-)" + _V,
          r"\b(?:mysql|mysqldump|mysqladmin|mysqlimport|mysqlsh|mariadb|mariadb-dump)\b[^\n|;&]{0,512}?[ \t]-p" + _V,
          r"\b(?:curl|http|https|xh)\b[^\n|;&]{0,512}?[ \t](?:-u|--user|--proxy-user|-U|--auth|-a)(?:=|[ \t]+)?"
          r"[\"']?[^\s:\"'/]{0,256}:(?P<v>[^\s\"'@]{1,1024})"), check=_not_prose),
    Rule("cli-credential", "credential given to a CLI (aws configure set, npm config set, wandb login, mc alias set)",
         (r"\bconfig(?:ure)?[ \t]+set[ \t]+(?:--?[\w-]+[ \t]+){0,4}(?:[\w/:.@-]{0,256}[.:/])?" + _NAME + r"(?:[ \t]+|=)"
          + _V,
          r"\bgh[ \t]+secret[ \t]+set\b[^\n|;&]{0,512}?[ \t](?:--body|-b)(?:=|[ \t]+)(?!-)" + _V,
          r"\bwandb\.login\([^)\n]{0,256}?\bkey\s{0,8}=\s{0,8}" + _V,
          r"\bwandb[ \t]+login\b[^\n|;&#]{0,512}?[ \t][\"']?(?P<v>(?:local-)?[A-Za-z0-9_]{32,256})",
          r"\brclone[ \t]+config[ \t]+(?:create|update)\b[^\n]{0,1024}?[ \t](?P<name>\w{0,64}(?:secret|password|pass|token|key))"
          r"[ \t]+" + _V,
          r"\bmc[ \t]+(?:alias[ \t]+set|config[ \t]+host[ \t]+add)[ \t]+\S{1,256}[ \t]+\S{1,1024}[ \t]+\S{1,256}[ \t]+"
          + _V)),
    Rule("k8s-env-literal", "Kubernetes env entry with a credential name and a literal value",
         (r"[\"']?name[\"']?\s{0,8}:\s{0,8}[\"']?" + _NAME + r"[\"']?\s{0,8},\s{0,8}[\"']?value[\"']?\s{0,8}:\s{0,8}"
          + _V,)),
    Rule("secret-manifest-data", "Secret manifest carrying data/stringData (block, flow or one-line JSON)"),
    Rule("pgpass-entry", "line of a .pgpass file (host:port:database:user:password)",
         (r"(?<![\w.:/-])[\w*-]{0,128}[A-Za-z.*][\w.*-]{0,128}:(?:[0-9]{1,5}|\*):[\w.*-]{0,128}[A-Za-z*][\w.*-]{0,128}:"
          r"[\w.*@-]{0,128}[A-Za-z*][\w.*@-]{0,128}:(?P<v>[^\s:'\"]{1,1024})",)),
    Rule("netrc-password", "password entry of a .netrc file",
         (r"\b(?:machine[ \t]+\S{1,256}|default)(?:[ \t]+(?:login|account|port)[ \t]+\S{1,256}){0,3}[ \t]+password"
          r"[ \t]+" + _V,
          r"^[ \t]*password[ \t]+" + _V + r"[ \t]*$"), check=_not_prose),
    Rule("credential-assignment", "credential-named variable or key assigned a literal",
         (r"(?:(?<![\w$.\-/])|(?<=\\n))" + _SHNAME + r"=" + _V,  # shell, env files, srun --export, Azure strings
          r"--set(?:-string)?(?:=|[ \t]+)[\"']?(?:[^\s=,\"']{1,256}=[^\s,\"']{0,1024},){0,16}"
          r"(?P<name>[A-Za-z_][\w.\[\]-]{0,127})=" + _V,  # helm --set a.b=x,auth.password=y
          _KEY_START + r"[\"']" + _NAME + r"[\"']\s{0,8}:\s{0,8}" + _V,  # JSON / quoted YAML keys
          r"(?<![^\s{,\[(`;\"'])(?:-[ \t]+)?" + _NAME + r":[ \t]+" + _V
          + r"(?=[ \t]*(?:#.*)?$|[ \t]*[,}\]\"'`|])",  # YAML keys, quoted HTTP headers (a phrase is prose)
          r"<" + _NAME + r"(?:[ \t][^<>\n]{0,256})?>(?P<v>[^<\s]{1,4096})</",  # XML elements
          r"\[[\"']" + _NAME + r"[\"']\][ \t]*=[ \t]*(?P<v>\"[^\"\n]{0,4096}\"|'[^'\n]{0,4096}')",  # x["NAME"] = "..."
          r"(?<![\w$.\-])" + _NAME + r"[ \t]+=[ \t]+(?P<v>\"[^\"\n]{0,4096}\"|'[^'\n]{0,4096}')",  # NAME = "..."
          r"^[ \t]*" + _NAME + r"[ \t]*=[ \t]*" + _V + r"[ \t]*(?:[#;].*)?$",  # ini / aws credentials / toml
          r"^[ \t]*pass[ \t]+=[ \t]+" + _V + r"[ \t]*$",  # rclone.conf ``pass = ...``
          r"^[ \t]*(?:ENV|ARG)[ \t]+" + _SHNAME + r"[ \t]+" + _V,  # Dockerfile ``ENV NAME value``
          r"[\"']username[\"']\s{0,8}:\s{0,8}[\"'][^\"'\n]{0,256}[\"']\s{0,8},\s{0,8}[\"']key[\"']\s{0,8}:\s{0,8}" + _V,
          r"[\"']key[\"']\s{0,8}:\s{0,8}" + _V + r"\s{0,8},\s{0,8}[\"']username[\"']")),  # kaggle.json
    Rule("bad-allowance", "lint-ok marker without a known rule name and a reason"),
)
RULE_NAMES = tuple(r.name for r in RULES)
_COMPILED = tuple((r, r.needles, tuple(re.compile(p, r.flags) for p in r.patterns)) for r in RULES if r.patterns)
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
def _value_ok(rule: Rule, v: str) -> bool:
    """True when the matched value is a literal this rule reports."""
    if rule.reference == "any" and is_reference(v):
        return False
    if rule.reference == "whole" and _is_whole_reference(v):
        return False
    if rule.reference == "never" and (not v or MASK in v):
        return rule.name == "private-key"  # an empty one-line body: the block lines decide below
    return rule.check is None or rule.check(v)


def _line_hits(lines: list[str]) -> list[_Hit]:
    hits: list[_Hit] = []
    for i, line in enumerate(lines):
        low = line.lower()
        for rule, needles, rxs in _COMPILED:
            if not any(n in low for n in needles):
                continue
            for rx in rxs:
                pos = 0
                while pos <= len(line) and (m := rx.search(line, pos)):
                    ok = ("name" not in rx.groupindex or is_credential_name(m.group("name"))) and _value_ok(rule, m.group("v"))
                    if ok:
                        hits.append(_Hit(rule.name, i, m.start("v"), m.end("v")))
                    # a rejected match (NAME="...;AccountKey=x" with NAME no credential) must not hide what it spans
                    pos = max(m.end(), m.start() + 1) if ok else m.start() + 1
    return hits


_KEY = re.compile(r"^(?P<ind>[ \t]*)(?P<dash>-[ \t]+)?(?P<q>[\"']?)(?P<key>[A-Za-z_][\w.-]*)(?P=q)[ \t]*:(?:[ \t]+(?P<rest>.*))?$")
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


@dataclass
class _Item:
    """The keys of one mapping at one column (a ``- name: X`` list item, a JSON object)."""

    col: int
    name: str | None = None
    values: list[tuple[int, int, int]] = field(default_factory=list)  # (line, start, end) of literal values
    block: list[tuple[int, int, int]] = field(default_factory=list)  # lines of a ``value: |`` block scalar


def _env_hits(lines: list[str]) -> list[_Hit]:
    """``name: CRED`` / ``value: literal`` pairs of one mapping (either order), in one pass with a stack."""
    hits: list[_Hit] = []
    stack: list[_Item] = []
    block_of: _Item | None = None  # the item whose ``value: |`` block scalar is being read
    block_col = 0

    def close(item: _Item) -> None:
        if item.name and is_credential_name(item.name.strip("\"'")) and (item.values or item.block):
            spans = item.values + item.block
            ln, s, e = spans[0]
            hits.append(_Hit("k8s-env-literal", ln, s, e, extra=spans[1:]))

    for i, line in enumerate(lines):
        if _blank(line):
            continue
        ind = _indent(line)
        if block_of is not None:
            if ind > block_col:
                if MASK not in line:
                    block_of.block.append((i, ind, len(line)))
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
        value = _strip_comment(rest)
        if key == "name":
            item.name = value
        elif key == "value" and value:
            if _BLOCK_SCALAR.fullmatch(value):
                block_of, block_col = item, col
            elif not is_reference(value):
                item.values.append((i, *_value_span(line, rest, value)))
    while stack:
        close(stack.pop())
    return hits


_KIND_SECRET = re.compile(r"[\"']?\bkind[\"']?\s{0,8}:\s{0,8}[\"']?Secret\b(?![\w-])")
_DATA_INLINE = re.compile(r"[\"']?\b(?P<k>data|stringData)[\"']?\s{0,8}:\s{0,8}\{(?P<v>[^{}]{0,65536})\}")
_FLOW_VALUE = re.compile(r":\s*(\"(?:[^\"\\]|\\.)*\"|'[^']*'|[^,}]+)")


def _flow_has_literal(inner: str) -> bool:
    if MASK in inner:
        return False
    values = [m.group(1).strip() for m in _FLOW_VALUE.finditer(inner)]
    return any(not is_reference(v) for v in values) if values else bool(inner.strip())


def _secret_hits(lines: list[str]) -> list[_Hit]:
    """``data``/``stringData`` with content in a ``kind: Secret`` document (``stringData`` anywhere)."""
    hits: list[_Hit] = []
    docs, cur = [], []
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
                hits.append(_Hit("secret-manifest-data", i, end, end, extra=spans))
    return hits


_PEM_ONE_LINE = re.compile(r"(?:\\[nr]|[A-Za-z0-9+/=\s\"'])*")
_PEM_LINE = re.compile(r"[\"']?[A-Za-z0-9+/=]{8,}(?:\\n)?[\"']?,?")


def _private_key_bodies(lines: list[str], hits: list[_Hit]) -> list[_Hit]:
    """Mask the body lines of each block; a block with no base64 body (prose naming the BEGIN line,
    a body already masked) is no finding."""
    kept = []
    for h in hits:
        if h.rule != "private-key":
            kept.append(h)
            continue
        body = lines[h.line][h.start:h.end]
        literal = bool(_PEM_ONE_LINE.fullmatch(body)) and len(re.findall(r"[A-Za-z0-9+/=]", body)) >= 8
        if "-----END" not in lines[h.line][h.end:]:
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
_VALUE_ITEM = re.compile(r"^[ \t]*(?:-[ \t]+)?(?P<v>\"(?:[^\"\\]|\\.){1,4096}\"|'[^']{1,4096}'|[^\s#\"',-][^\s#]{0,4096})"
                         r"[ \t]*,?[ \t]*$")


def _flag_item_hits(lines: list[str]) -> list[_Hit]:
    """``- --token`` then ``- VALUE``: a credential flag and its value as two list items (YAML or JSON)."""
    hits = []
    pending = False
    for i, line in enumerate(lines):
        if _blank(line):
            continue
        if pending:
            m = _VALUE_ITEM.match(line)
            if m and not is_reference(m.group("v")) and _not_spec(m.group("v")):
                hits.append(_Hit("password-flag", i, m.start("v"), m.end("v")))
        m = _FLAG_ITEM.match(line)
        pending = bool(m and is_credential_name(m.group("name")))
    return hits


def _scan(text: str) -> tuple[list[str], list[_Hit]]:
    lines = text.splitlines()
    hits = _line_hits(lines) + _flag_item_hits(lines) + _env_hits(lines) + _secret_hits(lines)
    hits = _private_key_bodies(lines, hits)
    hits.sort(key=lambda h: (h.line, _ORDER[h.rule], h.start))
    kept: list[_Hit] = []
    by_line: dict[int, list[_Hit]] = {}
    for h in hits:  # overlapping spans on one line: the earlier rule wins
        same = by_line.setdefault(h.line, [])
        if any(k.start < h.end and h.start < k.end for k in same):
            continue
        if h.start == h.end and any(k.rule == h.rule for k in same):
            continue
        same.append(h)
        kept.append(h)
    return lines, kept


def scan(text: str, filename: str = "<stdin>") -> list[Finding]:
    """Every finding, allowed ones included (``Finding.allowed`` holds the reason)."""
    lines, hits = _scan(text)
    allow: dict[int, tuple[str, str]] = {}
    out: list[Finding] = []
    for i, line in enumerate(lines):
        if "lint-ok:" not in line:
            continue
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


def _strings(obj: Any, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(obj, str):
        yield path, obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from _strings(v, f"{path}.{k}")
    elif isinstance(obj, (list, tuple)):
        for n, v in enumerate(obj):
            yield from _strings(v, f"{path}[{n}]")


def lint_objects(objs: Iterable[Any], what: str = "<objects>") -> list[Finding]:
    """Lint manifest objects as they are sent, never a line-folded dump of them.

    The objects are serialised as indented JSON (no line is ever folded, keys and values
    stay on one line) and every string in them is linted on its own as well, so a script
    held in ``args`` is read line by line however it would have been quoted. Findings of
    the JSON carry its line; those of a string name the object path (``what doc[0].spec...``).
    """
    objs = list(objs)
    findings = lint_text(json.dumps(objs, indent=2, ensure_ascii=False, default=str), what)
    for n, obj in enumerate(objs):
        for path, s in _strings(obj, f"doc[{n}]"):
            if s.strip():
                findings.extend(lint_text(s, f"{what} {path}"))
    return findings


def redact_text(text: str) -> str:
    """``text`` with every value lint flags masked (allowance markers do not apply here)."""
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
        body = line.rstrip("\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")
        nl = line[len(body):]
        parts, pos = [], 0
        for s, e in _merge(ss):
            parts += [body[pos:s], MASK]
            pos = e
        raw[ln] = "".join(parts) + body[pos:] + nl
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


def shown(value: object, limit: int = 80) -> str:
    """A value fit to quote in an error line: repr'd and cut, or withheld when it looks like a credential."""
    text = str(value)
    if redact_text(text) != text or lint_text(text, "value"):
        return "(value not shown: it looks like it carries a credential)"
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")

