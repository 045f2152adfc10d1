"""The lint rules as data (:data:`RULES`): each a name, what it catches and its line patterns, built from the
value and name fragments below (a pattern's ``v`` group is the value to mask); rules without patterns are the
structure rules of :mod:`.structure_rules`."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from .values import AUTH_SCHEME, is_aws_secret, is_encoded_credential_json, is_private_key_b64, not_prose, not_spec


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
