"""Which names hold a secret: a variable, key, flag or header name (``HF_TOKEN``, ``NGC_API_KEY``,
``Authorization``) -- the one rule every part of the bank asks (docs/secret-lint.md states it in full)."""
from __future__ import annotations

import functools
import re


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
