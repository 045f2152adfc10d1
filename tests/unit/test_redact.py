"""Secret lint/redact: each shape caught or left alone, redaction removes what lint flags, values never printed."""
from __future__ import annotations

import base64
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import assume, given, settings, strategies as st

from taobank import redact

BANK = Path(__file__).resolve().parents[2]
CLI = BANK / "scripts" / "redact_secrets.py"

SECRET = "s3cr3tVALUE42"  # the literal each positive plants; it must never be printed
HF = "hf_" + "A1b2C3d4" * 5
NVAPI = "nvapi-" + "Zx9_" * 8
GHP = "ghp_" + "a1B2" * 10
AKIA = "AKIA" + "ABCDEFGHIJ234567"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
# vendor prefixes are joined at run time so that push-protection scanners do not take the file for a leak
STRIPE = "sk_" + "live_" + "FAKE" + "0" * 20
GLPAT = "glp" + "at-" + "FAKEfake0000000000000"
PEM_B64 = base64.b64encode(b"-----BEGIN RSA PRIVATE" + b" KEY-----\nMIIEfake\n-----END RSA PRIVATE KEY-----\n").decode()
DOCKER_AUTH = base64.b64encode(b"robot:" + SECRET.encode()).decode()

POSITIVES = [
    ("credential-assignment", f"HF_TOKEN={SECRET}"),
    ("credential-assignment", f'export NGC_API_KEY="{SECRET}"'),
    ("credential-assignment", f"AWS_SECRET_ACCESS_KEY='{SECRET}'"),
    ("credential-assignment", f"srun --export=ALL,WANDB_API_KEY={SECRET} train"),
    ("credential-assignment", f"password: {SECRET}"),
    ("credential-assignment", f'{{"clientSecret": "{SECRET}"}}'),
    ("credential-assignment", f'DB_PASSWORD = "{SECRET}"'),
    ("from-literal", f"kubectl create secret generic c --from-literal=HF_TOKEN={SECRET}"),
    ("from-literal", f"kubectl create secret generic c --from-literal HF_TOKEN='{SECRET}'"),
    ("docker-password", f"kubectl create secret docker-registry r --docker-username='$oauthtoken' --docker-password={SECRET}"),
    ("docker-password", f'--docker-password "{SECRET}"'),
    ("password-flag", f"docker login nvcr.io --password {SECRET}"),
    ("password-flag", f"tool --token={SECRET}"),
    ("password-flag", f"cli --api-key {SECRET}"),
    ("authorization-header", f'curl -H "Authorization: Bearer {SECRET}" https://x'),
    ("authorization-header", f"Authorization: Basic {SECRET}"),
    ("url-credentials", f"git clone https://user:{SECRET}@example.com/repo.git"),
    ("url-credentials", f"mysql://root:{SECRET}@db:3306/x"),
    ("presigned-url", f"https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature={SECRET}"),
    ("presigned-url", f"https://b.s3.amazonaws.com/k?X-Amz-Security-Token={SECRET}&x=1"),
    ("presigned-url", f"https://storage.googleapis.com/b/o?X-Goog-Signature={SECRET}"),
    ("aws-access-key", f"key id {AKIA} here"),
    ("nvidia-api-key", f"echo {NVAPI}"),
    ("huggingface-token", f"login {HF}"),
    ("github-token", f"url {GHP}"),
    ("jwt", f"token {JWT}"),
    ("slack-token", "xoxb-" + "1234567890-abcdefghij"),
    ("openai-key", "sk-proj-" + "Q" * 40),
    ("google-api-key", "AIza" + "S" * 35),
    ("private-key", f"-----BEGIN RSA PRIVATE KEY-----\n{SECRET}\n-----END RSA PRIVATE KEY-----"),
    ("k8s-env-literal", f'- {{name: HF_TOKEN, value: "{SECRET}"}}'),
    ("k8s-env-literal", f'{{"name": "NGC_API_KEY", "value": "{SECRET}"}}'),
    # the shapes a hostile review found missed
    ("credential-assignment", f"[default]\naws_secret_access_key = {SECRET}"),
    ("cli-credential", f"aws configure set aws_secret_access_key {SECRET}"),
    ("private-key-base64", f"client-key-data: {PEM_B64}"),
    ("secret-manifest-data", f'{{"apiVersion":"v1","kind":"Secret","data":{{"x":"{SECRET}"}}}}'),
    ("credential-assignment", f'{{"db": {{"conn": {{"password": "{SECRET}"}}}}}}'),
    ("credential-assignment", f"export PGPASSWORD={SECRET}"),
    ("short-password-flag", f"sshpass -p '{SECRET}' ssh u@login"),
    ("short-password-flag", f"mysql -u root -p{SECRET} -e 'select 1'"),
    ("short-password-flag", f"curl -u admin:{SECRET} https://x"),
    ("short-password-flag", f"docker login -u robot -p {SECRET} registry.example.com"),
    ("docker-config-auth", f'{{"auths":{{"r.example.com":{{"auth":"{DOCKER_AUTH}"}}}}}}'),
    ("netrc-password", f"machine files.example.com login ci password {SECRET}"),
    ("credential-assignment", f"DefaultEndpointsProtocol=https;AccountName=a;AccountKey={SECRET}==;EndpointSuffix=x"),
    ("service-token", f"key {STRIPE}"),
    ("service-token", f"export CI_TOKEN_X={GLPAT}"),
    ("cli-credential", f"wandb login {SECRET}{SECRET}{SECRET}"),
    ("url-credentials", f"redis://:{SECRET}@redis:6379/0"),
    ("url-credentials", f"postgres://app:pa$${SECRET}@db/app"),
    ("password-flag", f'args: ["--password", "{SECRET}"]'),
    ("password-flag", f"--hf-token\n- {SECRET}".replace("--hf", "- --hf")),
    ("pgpass-entry", f"db.internal:5432:tao:tao:{SECRET}"),
]

NEGATIVES = [
    "CRED_SECRET=tao-creds-$JOB_ID",
    "HF_TOKEN_PATH=/run/x",
    "NUM_TOKEN=5",
    "MAX_TOKENS=4096",
    'export HF_TOKEN="$HF_TOKEN"',
    "export NGC_API_KEY=${NGC_API_KEY}",
    'HF_TOKEN="$(cat /run/secrets/hf)"',
    "kubectl create secret generic c --from-literal=HF_TOKEN=\"$HF_TOKEN\"",
    "kubectl create secret generic c --from-literal=region=us-east-1",
    "kubectl create secret generic c --from-env-file=/dev/stdin",
    "docker login nvcr.io --username '$oauthtoken' --password-stdin",
    "--token-file /run/secrets/t",
    'curl -H "Authorization: Bearer $TOKEN" https://x',
    "git clone https://github.com/x/y.git",
    "git clone https://user@example.com/x",
    "aws s3 cp s3://bucket/prefix/ /results/ --recursive",
    "https://b.s3.amazonaws.com/k?versionId=3",
    "valueFrom:",
    "  secretKeyRef: {name: tao-creds-x, key: HF_TOKEN}",
    "envFrom:\n- secretRef:\n    name: tao-creds-x",
    "- name: HF_TOKEN\n  valueFrom:\n    secretKeyRef: {name: c, key: HF_TOKEN}",
    "- name: HF_TOKEN_PATH\n  value: /run/x",
    "- name: NUM_TOKEN\n  value: \"5\"",
    "- name: main\n  image: nvcr.io/nvidia/tao/tao-toolkit:7.1.0-pyt",
    "NGC_API_KEY=<your-key>",
    "password: ''",
    "token: null",
    "PASSWORD_FILE=/run/secrets/pw",
    "SECRET_NAME=tao-creds-abc",
    "imagePullSecrets: [{name: ngc}]",
    "secretName: tao-creds-abc",
    "HF_TOKEN={{ hf_token }}",
    "kind: ConfigMap\ndata:\n  a: b",
    "Never pass `--password` on argv; use --password-stdin.",
    # the false positives a hostile review found
    "Use --password-stdin, never --password on argv.",
    "auth:\n  existingSecret: db\n  secretKeys:\n    adminPasswordKey: password",
    "spec:\n  data:\n  - secretKey: NGC_API_KEY\n    remoteRef: {key: tao/ngc}",
    "SORT_KEY=name\nMONKEY=banana\nMAX_TOKENS=4096",
    "tokenizer:\n  pad_token: \"[PAD]\"",
    "Token: see below.",
    "-----BEGIN OPENSSH PRIVATE KEY----- starts the file; keep it mode 600.",
    "docker build --secret id=npmrc,src=$HOME/.npmrc .",
    "image: nvcr.io#nvidia/tao/tao-toolkit:7.1.0-pyt",
    "ssh -i \"$SSH_KEY_PATH\" user@login",
    "PASS=0; FAIL=0",
    "cd \"$OLDPWD\"; PWD=/tmp",
]


@pytest.mark.parametrize("rule,line", POSITIVES)
def test_positive_lines(rule, line):
    text = f"# header\n{line}\n"
    findings = redact.lint_text(text, "f.sh")
    assert findings and findings[0].rule == rule and findings[0].line >= 2, findings
    for f in findings:
        assert SECRET not in str(f) and SECRET not in repr(f.to_dict())
    red = redact.redact_text(text)
    for value in (SECRET, HF, NVAPI, GHP, AKIA, JWT, STRIPE, GLPAT, PEM_B64, DOCKER_AUTH):
        assert value not in red
    assert red.startswith("# header\n") and red.endswith("\n")
    assert redact.MASK in red


@pytest.mark.parametrize("text", NEGATIVES)
def test_negative_lines(text):
    assert redact.lint_text(text, "f") == []
    assert redact.redact_text(text) == text


K8S_ENV = """\
apiVersion: batch/v1
kind: Job
spec:
  template:
    spec:
      containers:
      - name: main
        env:
        - name: HF_TOKEN
          value: s3cr3tVALUE42   # planted
        - value: "s3cr3tVALUE42"
          name: NGC_API_KEY
        - name: SAFE
          value: plain
        - name: WANDB_API_KEY
          valueFrom:
            secretKeyRef: {name: tao-creds-x, key: WANDB_API_KEY}
"""

SECRET_MANIFESTS = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: cm}
data:
  config: fine
---
apiVersion: v1
kind: Secret
metadata:
  name: tao-creds-x
type: Opaque
stringData:
  A_VALUE: s3cr3tVALUE42
---
apiVersion: v1
kind: Secret
data: {X: czNjcjN0VkFMVUU0Mg==}
---
apiVersion: v1
kind: Secret
metadata: {name: empty}
data: {}
"""


def test_k8s_env_block_yaml():
    findings = redact.lint_text(K8S_ENV, "job.yaml")
    assert [(f.rule, f.line) for f in findings] == [("k8s-env-literal", 10), ("k8s-env-literal", 11)]
    red = redact.redact_text(K8S_ENV)
    assert SECRET not in red and "value: plain" in red and "# planted" in red


def test_secret_manifests():
    findings = redact.lint_text(SECRET_MANIFESTS, "s.yaml")
    assert [(f.rule, f.line) for f in findings] == [("secret-manifest-data", 12), ("secret-manifest-data", 17)]
    red = redact.redact_text(SECRET_MANIFESTS)
    assert SECRET not in red and "czNjcjN0" not in red and "config: fine" in red


def test_private_key_body_redacted():
    text = "-----BEGIN OPENSSH PRIVATE KEY-----\nAAAAbody1\nAAAAbody2\n-----END OPENSSH PRIVATE KEY-----\n"
    red = redact.redact_text(text)
    assert "AAAAbody" not in red and red.count("\n") == 4


def test_allowance_marker():
    text = (
        "HF_TOKEN=s3cr3tVALUE42  # lint-ok: credential-assignment fixed token of the local test cluster\n"
        "HF_TOKEN=s3cr3tVALUE42  # lint-ok: from-literal wrong rule named\n"
        "HF_TOKEN=s3cr3tVALUE42  # lint-ok: credential-assignment\n"
        "X=1  # lint-ok: no-such-rule because\n"
        "| `password: s3cr3tVALUE42` | <!-- lint-ok: credential-assignment doc example -->\n"
    )
    allf = redact.lint_text(text, "a.sh", include_allowed=True)
    got = [(f.rule, f.line, f.allowed) for f in allf]
    assert ("credential-assignment", 1, "fixed token of the local test cluster") in got
    assert ("credential-assignment", 2, None) in got
    assert ("credential-assignment", 3, None) in got and ("bad-allowance", 3, None) in got
    assert ("bad-allowance", 4, None) in got
    assert ("credential-assignment", 5, "doc example") in got
    failing = redact.lint_text(text, "a.sh")
    assert {f.line for f in failing} == {2, 3, 4}
    assert "allowed credential-assignment (fixed token" in str(allf[0])
    assert SECRET not in redact.redact_text(text)


def test_rules_are_data():
    names = [r.name for r in redact.RULES]
    assert len(names) == len(set(names))
    planted = {rule for rule, _ in POSITIVES} | {"secret-manifest-data", "bad-allowance"}
    assert planted == set(names), "every rule has a planted positive"


CREDENTIAL_NAMES = [  # (name, holds a secret) -- the one rule docs/secret-lint.md states
    ("HF_TOKEN", True), ("NGC_API_KEY", True), ("AWS_SECRET_ACCESS_KEY", True), ("password", True),
    ("apiKey", True), ("clientSecret", True), ("DOCKER_PASSWORD", True), ("AWS_SESSION_TOKEN", True),
    ("SSHPASS", True), ("DB_PASS", True), ("SMTP_PW", True), ("PGPASSWORD", True), ("WANDB_KEY", True),
    ("WANDB_API_KEY", True), ("NGC_KEY", True), ("GITLAB_TOKEN", True), ("JWT_SECRET", True), ("MYSQL_PASSWORD", True),
    ("LDAP_PASSWD", True), ("OPENAI_API_KEY", True), ("GH_PAT", True), ("SECRET_KEY_BASE", True),
    ("secretKey", True), ("X-API-Key", True), ("auth.password", True), ("MYSQL_PWD", True), ("ENCRYPTION_KEY", True),
    ("SSH_KEY", True), ("STRIPE_KEY", True), ("authToken", True), ("REGISTRYTOKEN", True),
    ("HF_TOKEN_PATH", False), ("NUM_TOKEN", False), ("MAX_TOKENS", False), ("SECRET_NAME", False),
    ("AWS_ACCESS_KEY_ID", False), ("SSH_KEY_PATH", False), ("name", False), ("PWD", False), ("key", False),
    ("PASS", False), ("OLDPWD", False), ("MONKEY", False), ("SORT_KEY", False), ("CRED_SECRET_FILE", False),
    ("PASSWORD_FILE", False), ("HF_TOKEN_FILE", False), ("NGC_API_KEY_REF", False), ("PGPASSFILE", False),
    ("sortKey", False), ("topologyKey", False), ("PRIMARY_KEY", False), ("PUBLIC_KEY", False),
    ("adminPasswordKey", False), ("existingSecret", False), ("auth.existingSecret", False),
    ("imagePullSecret", False), ("pad_token", False), ("TOKENIZER", False), ("SPECIAL_TOKENS", False),
    ("versions-key", False), ("KEY", False), ("", False),
]


@pytest.mark.parametrize("name,cred", CREDENTIAL_NAMES)
def test_credential_names(name, cred):
    assert redact.is_credential_name(name) is cred


def test_credential_name_table_in_docs_matches():
    """docs/secret-lint.md shows the table of examples; each row is what the function says."""
    text = (BANK / "docs" / "secret-lint.md").read_text(encoding="utf-8")
    rows = [ln for ln in text.splitlines() if ln.startswith("| `") and ln.endswith(("| yes |", "| no |"))]
    assert len(rows) >= 20
    for row in rows:
        name = row.split("`")[1]
        assert redact.is_credential_name(name) is row.endswith("| yes |"), row


def test_redact_removes_what_lint_flags():
    """Redacting a text leaves nothing lint flags (one-line PEM body, AWS ini secret, Secret JSON...)."""
    pem_one_line = ("-----BEGIN RSA PRIVATE" + f" KEY-----MIIEfake{SECRET}body-----END RSA PRIVATE KEY-----")
    texts = [pem_one_line, '{"private_key": "' + pem_one_line.replace("MIIE", "\\nMIIE") + '"}',
             f"[default]\naws_access_key_id = {AKIA}\naws_secret_access_key = {SECRET}\n",
             *(line for _, line in POSITIVES)]
    for text in texts:
        assert redact.lint_text(text), text
        red = redact.redact_text(text)
        assert SECRET not in red and AKIA not in red
        assert redact.lint_text(red) == [], (text, red)


_secret_chars = st.text(alphabet=st.characters(whitelist_categories=("Lu", "Ll", "Nd"), max_codepoint=127),
                        min_size=8, max_size=40)


@settings(max_examples=200, deadline=None)
@given(_secret_chars, st.sampled_from(["HF_TOKEN={}", "export NGC_API_KEY='{}'", "password: {}",
                                       "--from-literal=HF_TOKEN={}", "--password {}", "Authorization: Bearer {}",
                                       "https://u:{}@host/x", "- {{name: HF_TOKEN, value: \"{}\"}}"]))
def test_redaction_never_leaks(value, shape):
    assume(value.lower() not in ("changeme", "changeit", "redacted") and not set(value) <= set("xX"))
    assume(not redact.is_credential_name(value))  # ``token=password`` names a variable
    assume(value not in redact.PROSE_WORDS)  # ``--password on`` is prose
    assume(value.lower() not in (shape + "line").lower())
    text = "line\n" + shape.format(value) + "\n"
    assert value not in redact.redact_text(text)
    findings = redact.lint_text(text, "p")
    assert findings and all(value not in str(f).replace(f.description, "").replace(f.rule, "") for f in findings)


def _cli(*args, stdin=None):
    return subprocess.run([sys.executable, str(CLI), *args], input=stdin, capture_output=True, text=True, timeout=60)


def test_cli(tmp_path):
    bad = tmp_path / "bad.sh"
    bad.write_text(f"ok=1\nexport HF_TOKEN={SECRET}\n")
    good = tmp_path / "good.sh"
    good.write_text('export HF_TOKEN="$HF_TOKEN"\nHF_TOKEN=x1y2z3w4  # lint-ok: credential-assignment reviewed\n')
    r = _cli("lint", str(bad), str(good))
    assert r.returncode == 1
    assert f"{bad}:2: credential-assignment" in r.stdout
    assert f"{good}:2: allowed credential-assignment (reviewed)" in r.stdout
    assert SECRET not in r.stdout + r.stderr
    r = _cli("lint", str(good))
    assert r.returncode == 0
    r = _cli("lint", str(tmp_path / "missing"))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    r = _cli("redact", stdin=f"HF_TOKEN={SECRET}\n")
    assert r.returncode == 0 and r.stdout == f"HF_TOKEN={redact.MASK}\n"
    r = _cli("lint", "--json", "-", stdin=f"HF_TOKEN={SECRET}\n")
    assert r.returncode == 1 and '"rule": "credential-assignment"' in r.stdout and SECRET not in r.stdout
    r = _cli("rules")
    assert "k8s-env-literal:" in r.stdout


JSON_MANIFEST = """\
{
  "apiVersion": "v1",
  "kind": "Secret",
  "metadata": {"name": "tao-creds-x"},
  "stringData": {
    "HF_TOKEN": "s3cr3tVALUE42"
  }
}
{
  "env": [
    {
      "name": "NGC_API_KEY",
      "value": "s3cr3tVALUE42"
    },
    {
      "name": "REGION",
      "value": "us-east-1"
    }
  ]
}
"""


def test_pretty_json_manifests():
    got = [(f.rule, f.line) for f in redact.lint_text(JSON_MANIFEST, "m.json")]
    assert ("secret-manifest-data", 5) in got and ("k8s-env-literal", 13) in got
    assert all(line < 14 for _, line in got)
    red = redact.redact_text(JSON_MANIFEST)
    assert SECRET not in red and "us-east-1" in red
