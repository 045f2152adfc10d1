"""The secret scanner: what a secret value looks like (the rules, their value tests), and the scan of a line, a
YAML or env structure and whole texts and objects that finds them. One module, since every line of a manifest
runs through all of it; and the masking of a text by it. Which *names* hold a secret is written here too (the
scan asks it of every key it meets), and so is what of a value an error line may quote. docs/secret-lint.md
states the rules."""
from __future__ import annotations

import base64
import binascii
import bisect
import functools
import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

# ------------------------------------------------------------ names
# Which names hold a secret: a variable, key, flag or header name (HF_TOKEN, NGC_API_KEY, Authorization) --
# the one rule every part of the bank asks (docs/secret-lint.md states it in full).

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


@functools.lru_cache(maxsize=4096)  # a long line repeats a few names many times
def is_credential_name(name: str) -> bool:
    """True when a variable or key named ``name`` holds a secret: HF_TOKEN, NGC_API_KEY, PGPASSWORD, WANDB_KEY.

    Words split on ``_``, ``-``, ``.`` and camelCase; the last word decides, so HF_TOKEN_PATH,
    CRED_SECRET_FILE and SECRET_NAME name a place, and SORT_KEY, MONKEY, MAX_TOKENS are no secret.
    docs/secret-lint.md states the rule in full.
    """
    last_part = re.split(r"[./]", name.rstrip("./"))[-1]  # auth.password, example.com/token: the last part
    words: list[str] = [w.lower() for w in _WORDS.findall(last_part)]
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


@functools.lru_cache(maxsize=4096)
def is_auth_name(name: str) -> bool:
    """``Authorization``, ``PROXY_AUTHORIZATION``: a header name, whose value holds a secret after a scheme."""
    words = _WORDS.findall(re.split(r"[./]", name)[-1])
    return bool(words) and words[-1].lower() == "authorization"


@functools.lru_cache(maxsize=4096)
def may_name_secret(name: str) -> bool:
    """A credential's name, or an authorization header's (whose value then must carry a scheme)."""
    return is_credential_name(name) or is_auth_name(name)


# ------------------------------------------------------------ values
#: What a redacted value becomes (a value holding it is no secret: it was masked already).
MASK = "***REDACTED***"

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
#: YAML syntax in a value's place, no value: ``&anchor``/``*alias``/``!!str`` alone, a ``|``/``>-`` block indicator.
_YAML_SYNTAX = re.compile(r"[&*][\w.-]+|!!\w*|[|>][-+0-9]*")
_WHOLE_REF = re.compile(r"\$\{?[A-Za-z_]\w*\}?|\$\([^()]*\)|\{\{.*\}\}|%[A-Za-z_]\w*%")


#: A URL with no user:password, query or fragment (``CTK_KEY=https://host/gpgkey`` says where a key is).
_PLAIN_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]{0,30}://[^\s@?#]+")


def _looks_random(piece: str) -> bool:
    """A run of letters and digits that no one types as a name: 16+ mixing letters and digits, or 12+
    mixing upper case, lower case and digits (a key, a token, a generated password)."""
    digit = any(c.isdigit() for c in piece)
    if len(piece) >= 16 and digit and any(c.isalpha() for c in piece):
        return True
    return len(piece) >= 12 and digit and any(c.isupper() for c in piece) and any(c.islower() for c in piece)


def has_random_piece(text: str) -> bool:
    return any(_looks_random(p) for p in re.split(r"[^A-Za-z0-9]+", text))


def unquote(value: str) -> str:
    v = value.strip()
    if len(v) >= 4 and v.startswith('\\"') and v.endswith('\\"'):  # quoted inside a JSON string
        v = v[2:-2].strip()
    elif len(v) >= 2 and v[0] == v[-1] and v[0] in "\"'":
        v = v[1:-1].strip()
    return v


def is_reference(value: str) -> bool:
    """True when ``value`` is no literal secret: a reference, a name, a path, a placeholder, empty or boolean."""
    v = unquote(value)
    if v.lower() in _NOT_SECRET or MASK in v:
        return True
    if "$" in v or "`" in v or "{{" in v or "{%" in v or _PRINTF.fullmatch(v):
        return True
    if _PLACEHOLDER.fullmatch(v) or _ENV_NAME.fullmatch(v) or v.startswith("<") or _YAML_SYNTAX.fullmatch(v):
        return True
    if _IDENT.fullmatch(v) and is_credential_name(v.rsplit(".", 1)[-1]) and not has_random_piece(v):
        return True  # a program variable (``key=args.api_key``); ``aA22222222PW`` is a password, not a name
    if _PLAIN_URL.fullmatch(v) and not has_random_piece(v):  # a webhook URL with a token in it is a secret
        return True
    return bool(_PATH.fullmatch(v) and _PATH_WORD.search(v))


def is_whole_reference(value: str) -> bool:
    """Stricter: the whole value is one reference (a password may contain a literal ``$``)."""
    v = unquote(value)
    return bool(not v or _WHOLE_REF.fullmatch(v) or _PLACEHOLDER.fullmatch(v) or _ENV_NAME.fullmatch(v))


#: Lowercase words of prose, never a password after a flag: "never pass --password on argv".
PROSE_WORDS = {
    "on", "in", "or", "and", "the", "a", "an", "to", "is", "are", "be", "with", "via", "from", "for", "at", "as", "of",
    "if", "not", "never", "only", "instead", "here", "there", "it", "this", "that", "which", "when", "flag", "option",
    "argument", "value", "must", "should", "will", "can", "may", "see", "below", "above", "prompt", "prompts", "then",
    "so", "but", "by", "use", "using", "was", "were", "has", "have", "into",
}


def not_prose(v: str) -> bool:
    return v.rstrip(".,:;") not in PROSE_WORDS


def not_spec(v: str) -> bool:
    """``--secret id=npmrc,src=...`` (docker build) is a spec of where the secret is, not a secret."""
    return not re.match(r"[A-Za-z][\w-]*=(?!=|$)", unquote(v)) and not_prose(v)


def _b64decode(v: str) -> bytes:
    """``v`` decoded as (standard or URL-safe) base64, or ``b""``."""
    v = v.strip("\"'")
    try:
        return base64.b64decode(v.replace("-", "+").replace("_", "/") + "=" * (-len(v) % 4))
    except (binascii.Error, ValueError):
        return b""


_JSON_STRING_PAIR = re.compile(r'"(?P<k>[\w.-]{1,64})"\s{0,8}:\s{0,8}"(?P<v>[^"\\]{1,4096})"')


def is_encoded_credential_json(v: str) -> bool:
    """Base64 of JSON that holds a literal credential: a docker config's ``auth``/``password``, an ``api_key``."""
    text = _b64decode(v).decode("utf-8", "replace")
    for m in _JSON_STRING_PAIR.finditer(text):
        if (m.group("k") in ("auth", "identitytoken") or is_credential_name(m.group("k"))) \
                and not is_reference(m.group("v")):
            return True
    return False


def is_private_key_b64(v: str) -> bool:
    head = v[: len(v) // 4 * 4][:96]
    try:
        return b"PRIVATE KEY" in base64.b64decode(head + "=" * (-len(head) % 4))
    except (binascii.Error, ValueError):
        return False


def is_aws_secret(v: str) -> bool:
    """40 characters of base64's alphabet mixing many upper- and lower-case letters and a digit: an AWS
    secret access key standing alone (no name says so). A path (``/a/b``), a hex digest (no upper case) or
    a CamelCase word list (few capitals) is none."""
    upper = sum(c.isupper() for c in v)
    lower = sum(c.islower() for c in v)
    return (not v.startswith("/") and "//" not in v and upper >= 8 and lower >= 8 and any(c.isdigit() for c in v)
            and max(len(p) for p in v.split("/")) >= 8)


#: An authorization header's value: a scheme, then the credential.
AUTH_SCHEME = r"(?:Bearer|Basic|Token|Bot|Digest)"

AUTH_VALUE = re.compile(r"[\"']?" + AUTH_SCHEME + r"\s{1,8}[^\s\"']", re.I)


def named_value_ok(name: str, value: str) -> bool:
    """The value under ``name`` is a secret by its name (or, under an authorization name, by its scheme)."""
    return is_credential_name(name) or bool(AUTH_VALUE.match(value))


# ------------------------------------------------------------ rules
#: A value: double-quoted, single-quoted, or an unquoted word (never a flow mapping/sequence opener).
VCHARS = r"""[^\s"'`#;&|,(){}\[\]]"""
#: (an unquoted value is taken whole -- the next character is no value character -- and a call such
#: as ``os.environ[...]`` or ``get_token(...)`` is no value; no possessive quantifier: Python 3.10 runs this)
V = (r"""(?P<v>"(?:[^"\\\n]|\\.){0,4096}"|'[^'\n]{0,4096}'|(?![{\[])""" + VCHARS + r"{1,4096}(?!" + VCHARS
      + r")(?![(\[]))")
_NAME = r"(?P<name>[A-Za-z_][A-Za-z0-9_.-]{0,127})"
_SHNAME = r"(?P<name>[A-Za-z_][A-Za-z0-9_]{0,127})"
#: A YAML/JSON key: a dotted or slashed name too (``auth.password``, ``example.com/token``).
_KEYNAME = r"(?P<name>[A-Za-z_][A-Za-z0-9_./-]{0,127})"
#: Before a key: start of line or a delimiter (a lookbehind, so a skipped match never hides the next key).
_KEY_START = r"(?<![^\s{,\[(`;])"
#: YAML node properties before a value: ``&anchor``, ``!!str``, ``!tag`` (the value follows them).
_PROPS = r"(?:(?:&[^\s,{}\[\]]{1,128}|![^\s,{}\[\]]{0,128})[ \t]+){0,2}"
#: A value that starts with "-" and is no option: 20+ characters with a digit (a random token).
_DASH_TOKEN = r"(?=-(?!-)(?=[A-Za-z_-]{0,4096}[0-9])[\w-]{19,4096}(?![^\s\"'`]))"


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
    "huggingface-token": ("hf_",), "github-token": ("gh", "github_pat_"),
    "slack-token": ("xox", "xapp-", "hooks.slack"), "encoded-credential-json": ("eyj",),
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
         (r"-----BEGIN (?:[A-Z0-9]+ ){0,4}PRIVATE KEY(?: BLOCK)?-----(?P<v>.{0,65536}?)(?=-----END|-----BEGIN|$)",),
         reference="never"),
    Rule("private-key-base64", "base64-encoded PEM private key (LS0tLS1CRUdJTi...)",
         (r"(?<![A-Za-z0-9+/])(?P<v>LS0tLS1CRUdJT[A-Za-z0-9+/]{16,65536}={0,2})",), reference="never",
         check=is_private_key_b64),
    Rule("aws-access-key", "AWS access key id", (r"(?<![A-Za-z0-9])(?P<v>(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16})\b",),
         reference="never"),
    Rule("nvidia-api-key", "NVIDIA API key (nvapi-...)", (r"(?<![A-Za-z0-9])(?P<v>nvapi-[A-Za-z0-9_-]{20,512})",), reference="never"),
    Rule("huggingface-token", "Hugging Face token (hf_...)", (r"(?<![A-Za-z0-9])(?P<v>hf_[A-Za-z0-9]{30,512})\b",),
         reference="never"),
    Rule("github-token", "GitHub token (ghp_/gho_/ghs_/github_pat_...)",
         (r"(?<![A-Za-z0-9])(?P<v>gh[pousr]_[A-Za-z0-9]{36,512}|github_pat_[A-Za-z0-9_]{22,512})\b",), reference="never"),
    Rule("slack-token", "Slack token (xoxb-/xoxp-/xoxa-/xoxe-..., xapp-) or webhook URL",
         (r"(?<![A-Za-z0-9])(?P<v>(?:xox[abeoprs]|xapp)-[A-Za-z0-9-]{10,512}|xoxe\.xox[a-z]-[A-Za-z0-9-]{10,512})",
          r"hooks\.slack\.com/services/(?P<v>[A-Za-z0-9/]{16,256})"),
         reference="never"),
    Rule("openai-key", "OpenAI/Anthropic-style secret key (sk-...)",
         (r"(?<![A-Za-z0-9])(?P<v>sk-(?:ant-|proj-|svcacct-)?[A-Za-z0-9_-]{32,512})",), reference="never"),
    Rule("google-api-key", "Google API key (AIza...)", (r"(?<![A-Za-z0-9])(?P<v>AIza[0-9A-Za-z_-]{35})",), reference="never"),
    Rule("service-token", "service token with a known prefix (sk_live_, glpat-, npm_, pypi-, dckr_pat_, hvs., SG.)",
         (r"(?<![A-Za-z0-9])(?P<v>(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,256}|whsec_[A-Za-z0-9]{24,256}|glpat-[A-Za-z0-9_-]{20,256}"
          r"|npm_[A-Za-z0-9]{36}|pypi-AgE[A-Za-z0-9_-]{50,512}|dckr_pat_[A-Za-z0-9_-]{20,256}|hvs\.[A-Za-z0-9_-]{24,512}"
          r"|SG\.[A-Za-z0-9_-]{16,64}\.[A-Za-z0-9_-]{16,128}|dop_v1_[a-f0-9]{64}|dapi[a-f0-9]{32})",),
         reference="never"),
    Rule("jwt", "JSON Web Token (eyJ...)",
         (r"(?<![A-Za-z0-9_-])(?P<v>eyJ[A-Za-z0-9_-]{10,4096}\.eyJ[A-Za-z0-9_-]{10,8192}\.[A-Za-z0-9_-]{10,4096})",),
         reference="never"),
    Rule("authorization-header", "Authorization header with a literal credential",
         (r"Authorization[\"']?\s{0,8}[:=]\s{0,8}" + _PROPS + r"[\"']?" + AUTH_SCHEME + r"\s{1,8}" + V,), flags=re.I),
    Rule("url-credentials", "user:password@ in a URL (an empty user too)",
         (r"\b[A-Za-z][A-Za-z0-9+.-]{0,30}://[^/\s:@\"'<>]{0,256}:(?P<v>[^/\s@\"'<>]{1,1024})@",), reference="whole"),
    Rule("presigned-url", "presigned/signed URL query parameter (signature, credential, token)",
         (r"[?&](?:X-Amz-Signature|X-Amz-Credential|X-Amz-Security-Token|X-Goog-Signature|X-Goog-Credential"
          r"|Signature|sig|AWSAccessKeyId)=(?P<v>[^&?\s\"'#<>]{1,4096})",)),
    Rule("docker-config-auth", "docker/containers config \"auth\" (base64 user:password)",
         (r"\\?[\"']auth\\?[\"']\s{0,8}:\s{0,8}"  # also escaped inside a JSON string: \"auth\":\"...\"
          r"(?P<v>\\?\"[A-Za-z0-9+/]{8,4096}={0,2}\\?\"|'[A-Za-z0-9+/]{8,4096}={0,2}')",),
         reference="never"),
    Rule("encoded-credential-json", "base64 of JSON holding a credential (.dockerconfigjson, a key file), anywhere",
         (r"(?<![A-Za-z0-9+/_-])(?P<v>eyJ[A-Za-z0-9+/_-]{16,65536}={0,2})(?![A-Za-z0-9+/=_.-])",), reference="never",
         check=is_encoded_credential_json),
    Rule("from-literal", "literal credential in kubectl --from-literal=KEY=VALUE",
         (r"--from-literal(?:=|[ \t]+)[\"']?" + _NAME + r"=" + V,)),
    Rule("docker-password", "literal value after --docker-password", (r"--docker-password(?:=|[ \t]+)" + V,)),
    Rule("password-flag", "literal value after a credential flag (--password, --token, --api-key, -storepass...)",
         (r"(?<![\w-])--(?P<name>[A-Za-z][\w-]{0,63})(?:=|[ \t]+(?:(?!-)|" + _DASH_TOKEN + "))" + V,
          r"(?<![\w-])--(?P<name>[A-Za-z][\w-]{0,63})[\"']?\s{0,8},\s{0,8}(?!-)(?P<v>\"(?:[^\"\\\n]|\\.){0,4096}\""
          r"|'[^'\n]{0,4096}'|[^\s\"'`#,=\[\]{}()]{1,4096}(?=\s{0,8}[,\]]))",  # ["--token", "VALUE"]
          r"(?<![\w-])-(?:pass(?:in|out)?|passphrase)[ \t]+(?:pass:|env:(?=\$))" + V,
          r"(?<![\w-])-(?:storepass|keypass|srcstorepass|deststorepass|srckeypass|destkeypass|password|passwd)"
          r"[ \t]+(?!-)" + V), check=not_spec),
    Rule("short-password-flag", "password after a short option of a login or database tool (-p of docker login, sshpass, "
         "mysql; -a of redis-cli; -w of ldapsearch; -P of sqlcmd, zip; user%pw of smbclient; user:pw of curl -u; "
         "-D...Password=)",
         (r"\b(?:docker|podman|nerdctl|buildah|skopeo|helm|oras|crane|regctl|apptainer|singularity|az|oc|cf)\b"
          r"(?:(?!\blogin\b)[^\n|;&]){0,512}\blogin\b(?:(?!\blogin\b)[^\n|;&]){0,512}?[ \t]-p(?:=|[ \t]+)?(?!-)" + V,
          r"\b(?:echo|printf)[ \t]+(?:-\w+[ \t]+)?" + V
          + r"[ \t]*\|[^\n|;&]{0,512}?(?:--password-stdin|\blogin\b|chpasswd|\bsudo[ \t]+-S)",
          r"\bhtpasswd(?=[^\n|;&)]{0,256}?[ \t]-\w*b)(?:[ \t]+[^\s|;&)]{1,256}){1,8}?[ \t]+"  # its last word
          r"(?=(?:\"[^\"\n]{0,4096}\"|'[^'\n]{0,4096}'|[^\s|;&)\"']{1,4096})[ \t]*(?:$|[)|;&]))" + V
          + r"[ \t]*(?=$|[)|;&])",
          r"\bredis-cli\b[^\n|;&]{0,512}?[ \t]-a[ \t]+(?!-)" + V,
          r"\b(?:ldapsearch|ldapadd|ldapmodify|ldapdelete|ldappasswd|ldapwhoami)\b[^\n|;&]{0,512}?[ \t]-w[ \t]+(?!-)" + V,
          r"\b(?:mongo|mongosh|mongodump|mongorestore|mongoexport|mongoimport)\b[^\n|;&]{0,512}?[ \t]-p[ \t]+(?!-)" + V,
          r"\b(?:sqlcmd|bcp|osql|isql)\b[^\n|;&]{0,512}?[ \t]-P[ \t]*(?!-)" + V,
          r"\b(?:zip|unzip|zipcloak)\b[^\n|;&]{0,512}?[ \t]-P[ \t]+(?!-)" + V,
          r"\b7z[ar]?\b[^\n|;&]{0,512}?[ \t]-p(?!-)" + V,
          r"\bopenssl\b[^\n|;&]{0,512}?[ \t]-k[ \t]+(?!-)" + V,
          r"\b(?:smbclient|rpcclient|smbmap|smbcacls)\b[^\n|;&]{0,512}?(?:-U|--user(?:name)?)(?:=|[ \t]+)[\"']?[^\s%\"']{1,256}%"
          + V,
          r"(?<![\w$])-D(?P<name>[A-Za-z_][\w.-]{0,127})=" + V,
          r"\bsshpass[ \t]+(?:-[a-oq-zA-Z]\S{0,64}[ \t]+){0,4}-p[ \t]*(?!-)" + V,
          r"\b(?:mysql|mysqldump|mysqladmin|mysqlimport|mysqlsh|mariadb|mariadb-dump)\b[^\n|;&]{0,512}?[ \t]-p" + V,
          r"\b(?:curl|http|https|xh)\b[^\n|;&]{0,512}?[ \t](?:-u|--user|--proxy-user|-U|--auth|-a)(?:=|[ \t]+)?"
          r"[\"']?[^\s:\"'/]{0,256}:(?P<v>[^\s\"'@]{1,1024})"), check=not_prose),
    Rule("cli-credential", "credential given to a CLI (aws configure set, npm config set, wandb login, mc alias set)",
         (r"\bconfig(?:ure)?[ \t]+set[ \t]+(?:--?[\w-]+[ \t]+){0,4}(?:[\w/:.@-]{0,256}[.:/])?" + _NAME + r"(?:[ \t]+|=)"
          + V,
          r"\bgh[ \t]+secret[ \t]+set\b[^\n|;&]{0,512}?[ \t](?:--body|-b)(?:=|[ \t]+)(?!-)" + V,
          r"\bwandb\.login\([^)\n]{0,256}?\bkey\s{0,8}=\s{0,8}" + V,
          r"\bwandb[ \t]+login\b[^\n|;&#]{0,512}?[ \t][\"']?(?P<v>(?:local-)?[A-Za-z0-9_]{32,256})",
          r"\brclone[ \t]+config[ \t]+(?:create|update)\b(?:(?!rclone)[^\n|;&]){0,1024}?"
          r"[ \t](?P<name>\w{0,64}(?:secret|password|pass|token|key))[ \t]+" + V,
          r"\bmc[ \t]+(?:alias[ \t]+set|config[ \t]+host[ \t]+add)[ \t]+\S{1,256}[ \t]+\S{1,1024}[ \t]+\S{1,256}[ \t]+"
          + V)),
    Rule("k8s-env-literal", "Kubernetes env entry with a credential name and a literal value",
         (r"[\"']?name[\"']?\s{0,8}:\s{0,8}[\"']?" + _NAME + r"[\"']?\s{0,8},\s{0,8}[\"']?value[\"']?\s{0,8}:\s{0,8}"
          + _PROPS + V,)),
    Rule("secret-manifest-data", "Secret manifest carrying data/stringData (block, flow or one-line JSON)"),
    Rule("pgpass-entry", "line of a .pgpass file (host:port:database:user:password)",
         (r"(?<![\w.:/-])(?=[\w*-]{0,128}?[A-Za-z.*])[\w.*-]{1,257}:(?:[0-9]{1,5}|\*):"
          r"(?=[\w.*-]{0,128}?[A-Za-z*])[\w.*-]{1,257}:(?=[\w.*@-]{0,128}?[A-Za-z*])[\w.*@-]{1,257}:"
          r"(?P<v>[^\s:'\"]{1,1024})",)),
    Rule("netrc-password", "password entry of a .netrc file",
         (r"\b(?:machine[ \t]+\S{1,256}|default)(?:[ \t]+(?:login|account|port)[ \t]+\S{1,256}){0,3}[ \t]+password"
          r"[ \t]+" + V,
          r"^[ \t]*password[ \t]+" + V + r"[ \t]*$"), check=not_prose),
    Rule("credential-assignment", "credential-named variable or key assigned a literal",
         (r"(?:(?<![\w$.\-/])|(?<=\\n))" + _SHNAME + r"=" + V,  # shell, env files, srun --export, Azure strings
          r"--set(?:-string)?(?:=|[ \t]+)[\"']?(?:[^\s=,\"']{1,256}=[^\s,\"']{0,1024},){0,16}"
          r"(?P<name>[A-Za-z_][\w.\[\]-]{0,127})=" + V,  # helm --set a.b=x,auth.password=y
          _KEY_START + r"\\?[\"']" + _KEYNAME + r"\\?[\"']\s{0,8}:\s{0,8}" + _PROPS + V,  # JSON / quoted YAML keys
          r"(?<![^\s{,\[(`;\"'])(?:-[ \t]+)?" + _KEYNAME + r":[ \t]+" + _PROPS + V
          + r"(?=[ \t]*(?:#.*)?$|[ \t]*[,}\]\"'`|])",  # YAML keys, quoted HTTP headers (a phrase is prose)
          r"<" + _NAME + r"(?:[ \t][^<>\n]{0,256})?>(?P<v>[^<\s]{1,4096})</",  # XML elements
          r"\[[\"']" + _NAME + r"[\"']\][ \t]*=[ \t]*(?P<v>\"[^\"\n]{0,4096}\"|'[^'\n]{0,4096}')",  # x["NAME"] = "..."
          r"(?<![\w$.\-])" + _NAME + r"[ \t]+=[ \t]+(?P<v>\"[^\"\n]{0,4096}\"|'[^'\n]{0,4096}')",  # NAME = "..."
          r"^[ \t]*" + _NAME + r"[ \t]*=[ \t]*" + V + r"[ \t]*(?:[#;].*)?$",  # ini / aws credentials / toml
          r"^[ \t]*pass[ \t]+=[ \t]+" + V + r"[ \t]*$",  # rclone.conf ``pass = ...``
          r"^[ \t]*(?:ENV|ARG)[ \t]+" + _SHNAME + r"[ \t]+" + V,  # Dockerfile ``ENV NAME value``
          r"[\"']username[\"']\s{0,8}:\s{0,8}[\"'][^\"'\n]{0,256}[\"']\s{0,8},\s{0,8}[\"']key[\"']\s{0,8}:\s{0,8}" + V,
          r"[\"']key[\"']\s{0,8}:\s{0,8}" + V + r"\s{0,8},\s{0,8}[\"']username[\"']")),  # kaggle.json
    Rule("aws-secret-key", "AWS secret access key standing alone (40 random base64 characters)",
         (r"(?<![A-Za-z0-9/+])(?P<v>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])",), reference="never", check=is_aws_secret),
    Rule("bad-allowance", "lint-ok marker without a known rule name and a reason"),
)
RULE_NAMES = tuple(r.name for r in RULES)

ORDER = {name: i for i, name in enumerate(RULE_NAMES)}
DESCRIPTIONS = {r.name: r.description for r in RULES}


# ------------------------------------------------------------ findings
@dataclass
class Finding:
    """One lint finding; it never holds the offending value."""

    rule: str
    file: str
    line: int
    allowed: str | None = None  # the allowance reason when a marker allowed it

    @property
    def description(self) -> str:
        return DESCRIPTIONS.get(self.rule, self.rule)

    def __str__(self) -> str:
        if self.allowed is not None:
            return f"{self.file}:{self.line}: allowed {self.rule} ({self.allowed})"
        return f"{self.file}:{self.line}: {self.rule}: {self.description}"

    def to_dict(self) -> dict[str, object]:
        return {"rule": self.rule, "file": self.file, "line": self.line, "allowed": self.allowed,
                "description": self.description}


@dataclass
class Hit:
    rule: str
    line: int  # 0-based
    start: int
    end: int
    extra: list[tuple[int, int, int]] = field(default_factory=list)  # more (line, start, end) spans to mask


# ------------------------------------------------------------ line rules
@dataclass(frozen=True)
class _Pattern:
    """A compiled line pattern. One built around ``V`` is split there: ``rx`` ends where the value starts
    and ``tail`` (if any) must follow the value, which :func:`_value_at` cuts from the line's runs. So the
    regex engine never walks a value, and a long run is walked once, not from every position in it."""

    rx: re.Pattern[str]
    tail: re.Pattern[str] | None = None
    split: bool = False
    named: bool = False  # a ``name`` group: checked before the value is cut


#: Where a value can start: a quote or a value character (never ``{``/``[``, a flow mapping or sequence).
_VSTART = r"(?=[\"']|" + VCHARS + ")"


def _compile(pattern: str, flags: int) -> _Pattern:
    named = "(?P<name>" in pattern
    if V not in pattern:
        return _Pattern(re.compile(pattern, flags), named=named)
    head, tail = pattern.split(V)
    return _Pattern(re.compile(head + _VSTART, flags), re.compile(tail, flags) if tail else None, True, named)


class _Lazy:
    """A rule's patterns, compiled the first time a line holds one of the rule's needles: a short text (a
    record's metadata value, a message) wakes few of the rules, and compiling every pattern up front was most
    of a helper's start-up."""

    __slots__ = ("_patterns", "_flags", "_compiled")

    def __init__(self, patterns: tuple[str, ...], flags: int) -> None:
        self._patterns, self._flags = patterns, flags
        self._compiled: tuple[_Pattern, ...] | None = None

    def __iter__(self) -> Iterator[_Pattern]:
        if self._compiled is None:
            self._compiled = tuple(_compile(p, self._flags) for p in self._patterns)
        return iter(self._compiled)


_COMPILED = tuple((r, r.needles, _Lazy(r.patterns, r.flags)) for r in RULES if r.patterns)


def _value_ok(rule: Rule, v: str) -> bool:
    """True when the matched value is a literal this rule reports."""
    if rule.reference == "any" and is_reference(v):
        return False
    if rule.reference == "whole" and is_whole_reference(v):
        return False
    if rule.reference == "never" and (not v or MASK in v):
        return rule.name == "private-key"  # an empty one-line body: the block lines decide below
    return rule.check is None or rule.check(v)


_QUOTED = re.compile(r"\"(?:[^\"\\\n]|\\.){0,4096}\"|'[^'\n]{0,4096}'|\\\"[^\"\n]{0,4096}(?<=\\)\"")
#: A run of value characters; a ")" inside a word is one of them (``ab*)cd``), one that ends a call, a group or
#: a subshell is not (``f(x=None):``, ``(x=ab)``).
_RUN = re.compile("(?:" + VCHARS + r"|\)(?=[A-Za-z0-9]))*")
_MAX_VALUE = 4096


class _Runs:
    """The end of the run of value characters around a position, each run walked once (the last one is kept:
    one pattern's matches come in line order)."""

    def __init__(self, line: str) -> None:
        self.line, self.start, self.end = line, 0, 0

    def end_of(self, pos: int) -> int:
        if not self.start <= pos < self.end:
            run = _RUN.match(self.line, pos)
            assert run is not None  # the pattern matches the empty string too
            self.start, self.end = pos, run.end()
        return self.end


def _value_at(line: str, pos: int, runs: _Runs) -> tuple[int, bool] | None:
    """(end, quoted) of the value starting at ``pos``: a quoted string, or a whole run of value characters
    of at most ``_MAX_VALUE`` (a longer run, or one followed by ``(``/``[``, a call, is no value)."""
    if line[pos] in "\"'" or line.startswith('\\"', pos):
        m = _QUOTED.match(line, pos)
        return (m.end(), True) if m else None
    end = runs.end_of(pos)
    if end - pos > _MAX_VALUE or line[end:end + 1] in ("(", "["):
        return None
    return end, False


def _cut(pat: _Pattern, m: re.Match[str], line: str, runs: _Runs, rejected_end: int
         ) -> tuple[int, int, int, bool] | None:
    """(start, end, end of the match, a bare run) of the value match ``m`` points at; None when no value
    starts there, the tail does not follow, or the value is a suffix of a run already rejected (same run,
    same verdict: ``TOKEN=<TOKEN=<...``)."""
    if not pat.split:
        return m.start("v"), m.end("v"), m.end(), False
    start = m.end()
    cut = _value_at(line, start, runs)
    if cut is None or (not cut[1] and cut[0] == rejected_end):
        return None
    end, quoted = cut
    tail = pat.tail.match(line, end) if pat.tail else None
    if pat.tail and not tail:
        return None
    return start, end, (tail.end() if tail else end), not quoted


def _pattern_hits(rule: Rule, pat: _Pattern, i: int, line: str, hits: list[Hit]) -> None:
    """The hits of one pattern on one line. A rejected match (NAME="...;AccountKey=x" with NAME no
    credential) must not hide what it spans, so the search goes on from inside it."""
    m = pat.rx.search(line)
    if m is None:  # most lines: one search, nothing more
        return
    runs, rejected_end, search = _Runs(line), -1, pat.rx.search
    while m is not None:
        pos = m.start() + 1
        if pat.named and not may_name_secret(m.group("name")):  # checked before any value is cut
            m = search(line, pos)
            continue
        cut = _cut(pat, m, line, runs, rejected_end)
        if cut is not None:
            start, end, after, bare = cut
            value = line[start:end]
            if (not pat.named or named_value_ok(m.group("name"), value)) and _value_ok(rule, value):
                hits.append(Hit(rule.name, i, start, end))
                pos = max(after, pos)
            elif bare:
                rejected_end = end
        m = search(line, pos) if pos <= len(line) else None


def line_hits(lines: list[str]) -> list[Hit]:
    hits: list[Hit] = []
    for i, line in enumerate(lines):
        low = line.lower()
        for rule, needles, pats in _COMPILED:
            if not any(n in low for n in needles):
                continue
            for pat in pats:
                _pattern_hits(rule, pat, i, line, hits)
    return hits


# ------------------------------------------------------------ structure rules
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


# ------------------------------------------------------------ lint
_ALLOW = re.compile(r"lint-ok:[ \t]*(?P<rule>[A-Za-z0-9_-]*)(?:[ \t]+(?P<reason>.*?))?[ \t]*(?:-->)?[ \t]*$")


def _scan(text: str) -> tuple[list[str], list[Hit]]:
    lines, kept, _ = scan_all(text)
    return lines, kept


def scan_all(text: str) -> tuple[list[str], list[Hit], list[Hit]]:
    """(lines, the hits that become findings -- one per span --, every hit)."""
    lines = text.splitlines()
    hits = line_hits(lines) + flag_item_hits(lines) + env_hits(lines) + yaml_hits(lines) + secret_hits(lines)
    hits = private_key_bodies(lines, hits)
    hits.sort(key=lambda h: (h.line, ORDER[h.rule], h.start))
    kept: list[Hit] = []
    spans: dict[int, _Spans] = {}
    for h in hits:  # overlapping spans on one line: the earlier rule wins
        if spans.setdefault(h.line, _Spans()).add(h):
            kept.append(h)
    return lines, kept, hits


class _Spans:
    """The kept spans of one line, disjoint and sorted: a new one is checked against its two neighbours
    (not against every kept one: a long line can hold many findings)."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.rules: set[str] = set()

    def add(self, h: Hit) -> bool:
        """Keep ``h`` unless it overlaps a kept span (or is a second zero-width finding of its rule)."""
        if h.start == h.end and h.rule in self.rules:
            return False
        k = bisect.bisect_left(self.starts, h.start)
        if k > 0 and self.ends[k - 1] > h.start:
            return False
        if k < len(self.starts) and self.starts[k] < h.end and h.start < self.ends[k]:
            return False
        self.starts.insert(k, h.start)
        self.ends.insert(k, h.end)
        self.rules.add(h.rule)
        return True


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
    out.sort(key=lambda f: (f.line, ORDER[f.rule]))
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


def rules_markdown() -> str:
    """The rule list as a Markdown table (docs/secret-lint.md embeds exactly this)."""
    rows = ["| rule | catches |", "|---|---|"] + [f"| `{r.name}` | {r.description} |" for r in RULES]
    return "\n".join(rows) + "\n"


def looks_like_secret(text: str) -> bool:
    """True when ``text`` is, or holds, what may be a credential: a shape the lint knows (``hf_...``,
    ``AKIA...``, ``ghp_...``) or a long random-looking word. Such text is never printed, not even in an
    error that says it is no valid name (a token pasted where a name belongs)."""
    return bool(text.strip()) and (has_random_piece(text) or bool(lint_text(text, "value")))


# ------------------------------------------------------------ masking: a text with every value the lint flags replaced by MASK (what the record store and the log
# savers pass free text through)
def redact_text(text: str) -> str:
    """``text`` with every value lint flags masked (allowance markers do not apply here). Every span any rule
    found is masked, also one that overlaps a finding of another rule (it may reach further)."""
    lines, _, hits = scan_all(text)
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



def redact_texts(texts: Iterable[str]) -> list[str]:
    """:func:`redact_text` of each text: one call for a batch (a record's fields, a table's cells)."""
    return [redact_text(t) for t in texts]


def secret_entries(items: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Of ``(name, text value)`` pairs (a record's metadata), those that carry a secret, with why: ``"name"`` when
    the name holds one (:func:`is_credential_name`), else ``"value"`` when :func:`redact_text` masks the value.
    One call for all pairs."""
    out: dict[str, str] = {}
    for name, value in items:
        if is_credential_name(name):
            out[name] = "name"
        elif redact_text(value) != value:
            out[name] = "value"
    return out


def secret_entries_each(groups: Iterable[Iterable[tuple[str, str]]]) -> list[dict[str, str]]:
    """:func:`secret_entries` of each group of pairs (the metadata of each record of a batch): one call for all."""
    return [secret_entries(items) for items in groups]


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for s, e in sorted(spans):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


# ------------------------------------------------------------ quoting in an error line
#: past, so a token glued to an escape sequence is still seen as one.
_CONTROLS = re.compile(r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*"
                       r"(?:\x07|\x1b\\|\x9c)?|[\x00-\x1f\x7f-\x9f]")


def shown(value: object, limit: int = 80) -> str:
    """A value fit to quote in an error line: repr'd and cut, or withheld when it looks like a credential
    (looked at with its control sequences taken out: ``ESC[31m`` glued to a token hides nothing)."""
    text = str(value)
    bare = _CONTROLS.sub(" ", text)
    if redact_text(text) != text or lint_text(text, "value") or redact_text(bare) != bare or lint_text(bare, "value"):
        return "(value not shown: it looks like it carries a credential)"
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")


#: A mapping key an error may quote: a short field-like name. A line of some other file read as YAML (a spec
#: path pointing at /etc/shadow: ``root:$6$...:``) or a token is no such key.
_SHOWN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,39}\Z")


def shown_keys(keys: Iterable[object]) -> tuple[list[str], int]:
    """(the keys of a file's mapping an error may name, how many others it only counts): a key is named when it
    is a short field-like name (:data:`_SHOWN_KEY`) that does not look like a credential; never any other text
    of the file."""
    every = list(keys)
    named = [k for k in every if isinstance(k, str) and _SHOWN_KEY.match(k) and not looks_like_secret(k)]
    return named, len(every) - len(named)


def unknown_fields(named: list[str], others: int) -> str:
    """The phrase of an unknown-field error: the ``named`` keys (as the caller writes them, from
    :func:`shown_keys`), and how many ``others`` there are, never what they say."""
    why = "(not field names: is it the right file?)" if others != 1 else "(not a field name: is it the right file?)"
    if not named:
        return f"{others} unknown field{'s' if others != 1 else ''}, not shown {why}"
    return "unknown field " + ", ".join(named) + (f" and {others} more, not shown {why}" if others else "")
