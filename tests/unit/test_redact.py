"""Secret lint/redact: each shape caught or left alone, redaction removes what lint flags, values never printed."""
from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import assume, given, settings, strategies as st

from taobank import redact
from taobank.secrets import scanner as scan

BANK = Path(__file__).resolve().parents[2]
CLI = BANK / "scripts" / "redact_secrets.py"

SECRET = "s3cr3tVALUE42"  # the literal each positive plants; it must never be printed
HF = "hf_" + "A1b2C3d4" * 5
NVAPI = "nvapi-" + "Zx9_" * 8
GHP = "ghp_" + "a1B2" * 10
AKIA = "AKIA" + "ABCDEFGHIJ234567"
#: a bare 40-character AWS secret access key (AWS's documented example, its parts joined at run time)
AWS_SECRET = "wJalrXUtnFEMI/" + "K7MDENG/bPxRfiCYEXAMPLEKEY"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
# vendor prefixes are joined at run time so that push-protection scanners do not take the file for a leak
STRIPE = "sk_" + "live_" + "FAKE" + "0" * 20
GLPAT = "glp" + "at-" + "FAKEfake0000000000000"
PEM_B64 = base64.b64encode(b"-----BEGIN RSA PRIVATE" + b" KEY-----\nMIIEfake\n-----END RSA PRIVATE KEY-----\n").decode()
DOCKER_AUTH = base64.b64encode(b"robot:" + SECRET.encode()).decode()
DOCKER_CONFIG_B64 = base64.b64encode(json.dumps({"auths": {"nvcr.io": {"auth": DOCKER_AUTH}}}).encode()).decode()

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
    ("aws-secret-key", f"train.optim.lr={AWS_SECRET}"),
    ("aws-secret-key", f"secret {AWS_SECRET} alone"),
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
    ("encoded-credential-json", f"  .dockerconfigjson: {DOCKER_CONFIG_B64}"),
]

NEGATIVES = [
    "git rev 0123456789abcdef0123456789abcdef01234567",  # a 40-character hex digest is no AWS secret
    "ckpt ResNet18Backbone/ModelEpoch004/Checkpoin",  # CamelCase words, few capitals
    "/results/abc/DefGhiJklMnoPqrStuVwx12345",  # a path
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


# ---------------------------------------------------------------- YAML values behind syntax (folded, anchored, tagged)
YAML_SHAPES = [  # (text, what must stay) -- the value is masked, never only the indicator in front of it
    (f"auth:\n  password: >-\n    {SECRET}\n  user: tao\n", ">-"),
    (f"auth:\n  password: >\n    {SECRET}\n", ">"),
    (f"auth:\n  api_key: |\n    {SECRET}\n  user: tao\n", "|"),
    (f"auth:\n  clientSecret: |+\n    {SECRET}\n\n  user: tao\n", "|+"),
    (f"tls:\n  TLS_PRIVATE_KEY: |\n    -----BEGIN RSA PRIVATE KEY-----\n    {SECRET}\n"
     "    -----END RSA PRIVATE KEY-----\n", "|"),
    (f"auth:\n  password: &pw {SECRET}\nmirror: *pw\n", "&pw"),
    (f"auth:\n  password: !!str {SECRET}\n", "!!str"),
    (f"auth:\n  password: !!str '{SECRET}'\n", "!!str"),
    (f"x-shared:\n  value: &cred {SECRET}\nclient:\n  DB_PASSWORD: *cred\n", "*cred"),
    (f"x-shared:\n  blob: &cred |\n    {SECRET}\nclient:\n  token: *cred\n", "*cred"),
    (f"auth:\n  password:\n    {SECRET}\n  user: tao\n", "user: tao"),
    (f"auth: {{user: tao, password: !!str {SECRET}}}\n", "!!str"),
    (f"env:\n- name: HF_TOKEN\n  value: !!str {SECRET}\n", "HF_TOKEN"),
    (f"env:\n- name: HF_TOKEN\n  value: >-\n    {SECRET}\n", ">-"),
    (f"headers:\n  Authorization: >-\n    Bearer {SECRET}\n", ">-"),
    (f"client:\n  token: Bearer {SECRET}\n", "token:"),
    (f"args:\n- --authorization\n- Bearer {SECRET}\n", "--authorization"),
    (f'  "DJANGO_SECRET_KEY": ab*){SECRET}%)x9\n', "DJANGO_SECRET_KEY"),
]


@pytest.mark.parametrize("text,kept", YAML_SHAPES)
def test_yaml_value_behind_syntax_is_caught_and_masked(text, kept):
    assert redact.lint_text(text, "v.yaml"), text
    red = redact.redact_text(text)
    assert SECRET not in red and SECRET[:6] not in red and kept in red, red
    assert redact.lint_text(red) == [], red


YAML_NOT_SECRETS = [
    "auth:\n  password: >-\n    ${DB_PASSWORD}\n",
    "auth:\n  token: |\n    {{ .Values.token }}\n",
    "credentials:\n  name: tao-creds\n  key: HF_TOKEN\n",  # a nested mapping, no scalar
    "credentials: &creds\n  existingSecret: tao-creds\nother:\n  <<: *creds\n",
    "x-shared:\n  value: &tok ${HF_TOKEN}\nclient:\n  token: *tok\n",  # the anchored value is a reference
    "token: *undefined_alias\n",
    "script: |\n  echo hi\n  python train.py\n",
    "tokenizer:\n  pad_token: |\n    [PAD]\n",
    'CTK_KEY="https://nvidia.github.io/libnvidia-container/gpgkey"\n',  # where a key is, not a key
    "Token: see below.\nPassword: ask the cluster admin.\n",
]


@pytest.mark.parametrize("text", YAML_NOT_SECRETS)
def test_yaml_syntax_and_references_are_no_secret(text):
    assert redact.lint_text(text, "n.yaml") == [], text


def test_encoded_credential_json_anywhere():
    """A base64 docker config (or any base64 JSON holding a credential) is flagged outside a Secret too."""
    for text in (f"kind: ConfigMap\ndata:\n  .dockerconfigjson: {DOCKER_CONFIG_B64}\n",
                 f"metadata:\n  annotations:\n    example.com/registry: \"{DOCKER_CONFIG_B64}\"\n",
                 f"export DOCKER_CONFIG_B64={DOCKER_CONFIG_B64}\n",
                 "api: " + base64.b64encode(json.dumps({"api_key": SECRET}).encode()).decode() + "\n"):
        assert [f.rule for f in redact.lint_text(text)] == ["encoded-credential-json"], text
        assert DOCKER_CONFIG_B64[12:18] not in redact.redact_text(text)
    for clean in (base64.b64encode(json.dumps({"epochs": 80, "lr": 1e-4}).encode()).decode(),
                  base64.b64encode(json.dumps({"auths": {"nvcr.io": {"auth": "$NGC_AUTH"}}}).encode()).decode(),
                  JWT):
        assert not [f for f in redact.lint_text(f"x: {clean}\n") if f.rule == "encoded-credential-json"], clean


def test_escaped_json_in_a_string_is_read():
    text = 'DOCKER_AUTH_CONFIG: "{\\"auths\\":{\\"r.example.com\\":{\\"password\\":\\"' + SECRET \
           + '\\",\\"auth\\":\\"' + DOCKER_AUTH + '\\"}}}"\n'
    red = redact.redact_text(text)
    assert redact.lint_text(text) and SECRET not in red and DOCKER_AUTH not in red


@pytest.mark.parametrize("token", [
    "xapp-" + "1-A0123456789-1234567890123-" + "ab12" * 16,
    "xoxb-" + "12345678901-1234567890123-" + "AbCd" * 6,
    "xoxp-" + "12345678901-123456789012-1234567890123-" + "ab12" * 8,
    "xoxa-" + "2-12345678901-" + "AbCd" * 6,
    "xoxe.xoxp-" + "1-" + "AbCd" * 10,
    "xoxe-" + "1-" + "AbCd" * 10,
])
def test_slack_tokens(token):
    text = f"tool {token} here\n"
    assert [f.rule for f in redact.lint_text(text)] == ["slack-token"]
    assert token[6:] not in redact.redact_text(text)


def test_credential_flag_value_starting_with_a_dash():
    """A random token may start with "-"; a short "-x" after a flag is still the next option."""
    tok = "-EVZphSHSgWW3J2lrfK0if_MyZw7USe3sr6Ncpaw"
    for text in (f"train.py --api-token {tok} --epochs 8", f"train.py --api-token={tok}"):
        assert tok not in redact.redact_text(text)
    assert redact.lint_text("tool --token -v --epochs 8") == []


# ---------------------------------------------------------------- the scan is linear, with a small constant
#: one long line of each: the shapes that made the scan restart its value match from every position
#: (1.2 MB of ``a=a=...`` took 58 s), and others of the same kind
ADVERSARIAL = ["a=", "-Da=", "--a ", '"a":', ":", "=", '"', "'", "a-", "TOKEN=<", "--token=$", "?sig=$",
               "a_token=$x)", "docker login ", "htpasswd -b ", "echo a | ", "curl -u a:", "x-eyJ", "'--token', ",
               "-----BEGIN RSA PRIVATE KEY-----", "rclone config create a ", "name: A_TOKEN, value: ", "- a: "]
#: an ordinary line of the same size, with the characters the rules look for
BASELINE = "step 100 loss=0.231 lr: 1e-4 --epochs 80 name=run7 /data/x.json "


def _line(shape: str, n: int) -> str:
    return (shape * (n // len(shape) + 1))[:n] + "\n"


@pytest.mark.parametrize("shape", ADVERSARIAL)
def test_each_value_is_vetted_once_per_run(shape, monkeypatch):
    """Structural: however many keys a long run of value characters holds, the values cut from it are
    vetted a bounded number of times -- not once per position (which made TOKEN=<TOKEN=<... quadratic)."""
    n = 1 << 16
    seen = {"calls": 0, "chars": 0}
    real = scan._value_ok

    def counting(rule, v):
        seen["calls"] += 1
        seen["chars"] += len(v)
        return real(rule, v)

    monkeypatch.setattr(scan, "_value_ok", counting)
    redact.lint_text(_line(shape, n))
    assert seen["calls"] <= n // 2 and seen["chars"] <= 2 * n + 8192, seen


# ---------------------------------------------------------------- a token where a name belongs
@pytest.mark.parametrize("text", [
    "hf_" + "AbCdEfGh12345678" * 2, "ghp_" + "x1Y2" * 9, "AKIA" + "ABCDEFGHIJ234567", "nvapi-" + "Zx9_" * 8,
    "fa4e" + "0123456789abcdef" * 2, "Xk3vQ9pL2mWr7tZs", "github_pat_" + "A1b2C3d4" * 4,
])
def test_looks_like_secret(text):
    assert redact.looks_like_secret(text)


@pytest.mark.parametrize("text", ["HF_TOKEN", "NGC_API_KEY", "WANDB_API_KEY", "AWS_SECRET_ACCESS_KEY",
                                  "CUDA_VISIBLE_DEVICES", "TF_VAR_db_password", "MY_TOKEN", "myToken", "NV_GPU0",
                                  "PYTORCH_CUDA_ALLOC_CONF", "HF_HUB_ENABLE_HF_TRANSFER", ""])
def test_names_do_not_look_like_secrets(text):
    assert not redact.looks_like_secret(text)


def test_shown_looks_past_control_sequences_glued_to_a_token():
    from taobank.redact import shown

    token = "nvapi-" + "Q7zK2mX9pL4vR8sT1wY6bN3cJ5hG0dF" * 2
    for glue in ("\x9b31m", "\x1b[2J", "\x1b]0;title\x07", "\x1bP+q\x1b\\", "\x00", "\x85"):
        assert shown(glue + token) == "(value not shown: it looks like it carries a credential)", repr(glue)
        assert shown(token + glue) == "(value not shown: it looks like it carries a credential)", repr(glue)
    assert shown("\x1b[2Jplain") == repr("\x1b[2Jplain")
