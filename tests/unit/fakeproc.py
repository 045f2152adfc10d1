"""A stand-in for kubectl and ssh: rules match argv, every call is recorded, answers are canned.

Every process of the bank goes through ``taobank.run``; with
``taobank.run.fake_processes(fake)`` active, :class:`FakeProcs` answers
instead of the OS. A call no rule matches fails the test at once
(``AssertionError``), so an unexpected cluster call can never pass unseen.

kubectl calls are matched on the words after the global ``--context C`` and
``-n NS``; ssh calls on the remote command (the last argv element), split with
:func:`shlex.split`. A ``sh -c SCRIPT tao ARGS...`` command is named after the
:mod:`taobank.platforms.slurm.remote` constant its SCRIPT is (``SBATCH``, ``SWEEP``...).
``ssh -O check`` answers 0 (the master is alive) and the local linters of a
rendered sbatch script (``bash -n``, ``shellcheck``) pass, unless a rule says
otherwise.
"""
from __future__ import annotations

import json
import shlex
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

from taobank import results_shell
from taobank.progress import READ_STATUS_SH
from taobank.run import Result
from taobank.campaign.search import site as search_site
from taobank.platforms.slurm import cancel as slurm_cancel, logs as slurm_logs, remote, sweep as slurm_sweep

#: script text -> the remote.py constant's name (and the status-file reader's, which SLURM also runs; and the
#: sweep's and the batched cancel's scripts, which live next to their verbs)
SCRIPTS: dict[str, str] = {v: k for mod in (results_shell, slurm_sweep, slurm_cancel, slurm_logs, remote, search_site) for k, v in vars(mod).items()
                           if k.isupper() and isinstance(v, str)}
SCRIPTS[READ_STATUS_SH] = "READ_STATUS_SH"


@dataclass
class Call:
    """One process the bank ran, taken apart."""

    argv: list[str]
    stdin: str | None
    program: str  # "kubectl", "ssh" or the basename of argv[0]
    #: kubectl: the words after --context/-n; ssh: the remote argv (or ["-O", "check"] / ["-G"])
    words: list[str] = field(default_factory=list)
    namespace: str | None = None
    context: str | None = None
    #: ssh: the remote.py constant name of ``sh -c SCRIPT`` (None for a plain remote argv)
    script: str | None = None
    #: ssh: the positional arguments after ``sh -c SCRIPT tao``
    args: list[str] = field(default_factory=list)
    control: bool = False  # ssh -O/-G (no remote command)

    def __repr__(self) -> str:
        what = self.script or " ".join(self.words)
        return f"<{self.program} {what} {self.args if self.script else ''}>".replace(" >", ">")


def parse(argv: Sequence[str], stdin: str | None = None) -> Call:
    argv = [str(a) for a in argv]
    prog = argv[0].rsplit("/", 1)[-1]
    call = Call(argv, stdin, prog)
    if prog == "kubectl":
        rest = argv[1:]
        while rest and rest[0] in ("--context", "-n", "--namespace"):
            if rest[0] == "--context":
                call.context = rest[1]
            else:
                call.namespace = rest[1]
            rest = rest[2:]
        call.words = rest
    elif prog == "ssh":
        if "-O" in argv:
            call.control, call.words = True, ["-O", argv[argv.index("-O") + 1]]
        elif "-G" in argv:
            call.control, call.words = True, ["-G"]
        else:
            words = shlex.split(argv[-1])
            call.words = words
            if words[:2] == ["sh", "-c"] and len(words) >= 4:
                call.script = SCRIPTS.get(words[2], "<unknown script>")
                call.args = words[4:]
    else:
        call.words = argv[1:]
    return call


Answer = Callable[[Call], Result] | Result | dict | list | str | None


@dataclass
class Rule:
    program: str
    match: Callable[[Call], bool]
    answer: Answer
    rc: int
    stderr: str
    times: int | None  # None: any number of times
    used: int = 0
    label: str = ""


def ok(stdout: str = "", rc: int = 0, stderr: str = "") -> Result:
    return Result([], rc, stdout, stderr)


class FakeProcs:
    """Rules (the latest added wins), recorded calls, canned answers."""

    def __init__(self) -> None:
        self.rules: list[Rule] = []
        self.calls: list[Call] = []
        # the SSH master is alive; ``ssh -G`` has nothing to say
        self.on("ssh", lambda c: c.words == ["-O", "check"], "", label="ssh -O check")
        self.on("ssh", lambda c: c.words == ["-G"], "", label="ssh -G")
        # the local linters of a rendered sbatch script pass (they have their own tests)
        self.on("bash", lambda c: c.words[:1] == ["-n"], "", label="bash -n")
        self.on("shellcheck", lambda c: True, "", label="shellcheck")
        # a SLURM submit's one preflight command: every path exists, sinfo tells no node size (a test says otherwise)
        self.on("ssh", lambda c: c.script == "MISSING", "", label="ssh MISSING")

    # ------------------------------------------------------------------ rules
    def on(self, program: str, match: Callable[[Call], bool], answer: Answer = "", *, rc: int = 0,
           stderr: str = "", times: int | None = None, label: str = "") -> Rule:
        rule = Rule(program, match, answer, rc, stderr, times, label=label)
        self.rules.append(rule)
        return rule

    def kubectl(self, *words: str, answer: Answer = "", rc: int = 0, stderr: str = "", times: int | None = None,
                where: Callable[[Call], bool] | None = None) -> Rule:
        """kubectl calls whose words (after the globals) start with ``words``; a dict/list answer is JSON."""
        pre = list(words)
        return self.on("kubectl", lambda c: c.words[: len(pre)] == pre and (where is None or where(c)), answer,
                       rc=rc, stderr=stderr, times=times, label="kubectl " + " ".join(words))

    def ssh(self, script: str, answer: Answer = "", *, rc: int = 0, stderr: str = "", times: int | None = None,
            where: Callable[[Call], bool] | None = None) -> Rule:
        """ssh ``sh -c <remote.SCRIPT>`` calls (``script`` is the constant's name, e.g. "SBATCH"),
        or a plain remote argv when ``script`` is its first word (e.g. "scancel")."""
        if script not in SCRIPTS.values():
            match = lambda c: c.script is None and not c.control and c.words[:1] == [script]  # noqa: E731
        else:
            match = lambda c: c.script == script  # noqa: E731
        return self.on("ssh", lambda c: match(c) and (where is None or where(c)), answer, rc=rc, stderr=stderr,
                       times=times, label="ssh " + script)

    # ------------------------------------------------------------------ running
    def __call__(self, argv: list[str], stdin: str | None) -> Result:
        call = parse(argv, stdin)
        self.calls.append(call)
        for rule in reversed(self.rules):
            if rule.program != call.program or (rule.times is not None and rule.used >= rule.times):
                continue
            if not rule.match(call):
                continue
            rule.used += 1
            return self._answer(rule, call)
        raise AssertionError(f"fakeproc: no rule answers {call!r} (argv {argv})")

    @staticmethod
    def _answer(rule: Rule, call: Call) -> Result:
        a = rule.answer(call) if callable(rule.answer) else rule.answer
        if isinstance(a, Result):
            return Result(call.argv, a.returncode, a.stdout, a.stderr)
        if isinstance(a, (dict, list)):
            a = json.dumps(a)
        return Result(call.argv, rule.rc, a or "", rule.stderr)

    # ------------------------------------------------------------------ reading calls
    def of(self, program: str, *, control: bool = False) -> list[Call]:
        """Calls of ``program`` (ssh control calls -O/-G left out unless ``control``)."""
        return [c for c in self.calls if c.program == program and (control or not c.control)]

    def kubectl_calls(self, *words: str) -> list[Call]:
        pre = list(words)
        return [c for c in self.of("kubectl") if c.words[: len(pre)] == pre]

    def scripts(self) -> list[str]:
        """Names of the remote commands run over ssh, in order (plain argv: its first word)."""
        return [c.script or c.words[0] for c in self.of("ssh")]

    def count(self, script: str) -> int:
        return self.scripts().count(script)

    def ssh_calls(self, script: str) -> list[Call]:
        """The ssh calls of one remote command (a remote.py constant's name, or a plain argv's first word such as
        "scancel"): read a call by what it is, not by where it sits in :attr:`calls`."""
        return [c for c in self.of("ssh") if (c.script or c.words[0]) == script]


# ---------------------------------------------------------------- Kubernetes objects
def items(objs: Iterable[dict]) -> dict:
    return {"apiVersion": "v1", "kind": "List", "items": list(objs)}


def node(name: str, gpus: int = 8, *, ready: bool = True) -> dict:
    return {"kind": "Node", "metadata": {"name": name, "labels": {}}, "spec": {},
            "status": {"allocatable": {"nvidia.com/gpu": str(gpus)},
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def job(job_id: str, uid: str, *, name: str | None = None, condition: str | None = None) -> dict:
    conds = [{"type": condition, "status": "True"}] if condition else []
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name or job_id, "uid": uid, "labels": {"tao-job-id": job_id}},
            "spec": {"parallelism": 1}, "status": {"conditions": conds}}


def pod(job_id: str, job_uid: str, phase: str = "Running", *, name: str | None = None) -> dict:
    return {"kind": "Pod", "metadata": {"name": name or f"{job_id}-0-abcde", "labels": {"tao-job-id": job_id},
                                        "ownerReferences": [{"kind": "Job", "uid": job_uid}]},
            "spec": {"nodeName": "gpu-0"}, "status": {"phase": phase}}


def echo_applied(uid_of: Callable[[dict], str] = lambda o: f"uid-{o['metadata']['name']}") -> Callable[[Call], Result]:
    """An ``apply``/``create -f -`` answer: the objects sent on stdin (a List or one object), each given a
    uid (as the server does)."""

    def answer(call: Call) -> Result:
        body = json.loads(call.stdin or "{}")
        sent = body.get("items") or [] if body.get("kind") == "List" else [body]
        out = [{**o, "metadata": {**o["metadata"], "uid": uid_of(o)}} for o in sent]
        return ok(json.dumps(items(out)))

    return answer


def applied_names(call: Call) -> Result:
    """A ``kubectl apply --server-side -f - -o name`` answer: ``kind/name`` of each object sent."""
    body = json.loads(call.stdin or "{}")
    sent = body.get("items") or [] if body.get("kind") == "List" else [body]
    return ok("".join(f"{o['kind'].lower()}/{o['metadata']['name']}\n" for o in sent))


#: what a submit's gates read in one call (taobank.platforms.kubernetes.gates.GATE_READ)
KUEUE_GATE_READ = "localqueues.kueue.x-k8s.io,clusterqueues.kueue.x-k8s.io,nodes,pods"
#: what a submit naming a queue reads (the namespace's LocalQueues and the ClusterQueues)
KUEUE_QUEUES_READ = "localqueues.kueue.x-k8s.io,clusterqueues.kueue.x-k8s.io"
#: kubectl's answer where the cluster has no Kueue (no LocalQueue API)
NO_KUEUE = 'error: the server doesn\'t have a resource type "localqueues"\n'


def k8s_cluster(fake: "FakeProcs", nodes: Iterable[dict] | None = None, pods: Iterable[dict] = (), *,
                version: str = "v1.34.4") -> None:
    """A cluster without Kueue that lets us do everything: its nodes and pods in the one read of the capacity gate,
    every create (the server dry run included) echoed, every server-side apply named, can-i yes, the server at
    ``version``."""
    fake.kubectl("get", "nodes,pods", answer=items([*(nodes if nodes is not None else [node("gpu-0", 8)]), *pods]))
    fake.kubectl("get", "localqueues.kueue.x-k8s.io", rc=1, stderr=NO_KUEUE)  # no Kueue (tests/unit/test_k8s_queues.py)
    fake.kubectl("get", KUEUE_GATE_READ, rc=1, stderr=NO_KUEUE)  # the submit's one read of queues, nodes and pods
    fake.kubectl("get", KUEUE_QUEUES_READ, rc=1, stderr=NO_KUEUE)  # a named queue's read
    fake.kubectl("auth", "can-i", answer="yes\n")
    fake.kubectl("create", answer=echo_applied())
    fake.kubectl("apply", "--server-side", answer=applied_names)
    fake.kubectl("version", answer={"serverVersion": {"gitVersion": version}})


# ---------------------------------------------------------------- SLURM answers
#: the remote commands of a plain SLURM submit, each once (the preflight check, the staging, the look for a job of
#: that name, the sbatch): compare ``Counter(fake.scripts())`` with it where the cost, not the order, is the claim
PLAIN_SUBMIT = Counter(["MISSING", "STAGE", "FIND", "SBATCH"])


def squeue_row(jid: str, state: str, name: str, reason: str = "None") -> str:
    return f"{jid}|{state}|{reason}|{name}"


def sacct_row(jid: str, name: str, state: str, exit_code: str = "0:0") -> str:
    return f"{jid}|{name}|{state}|{exit_code}"


def find_answer(squeue: Sequence[str] = (), sacct: Sequence[str] = ()) -> str:
    """What remote.FIND prints: squeue rows, ``@@sacct``, sacct rows."""
    return "".join(r + "\n" for r in squeue) + "@@sacct\n" + "".join(r + "\n" for r in sacct)


def sweep_answer(squeue: Sequence[str] = (), sacct: Sequence[str] = (), markers: dict[str, str] | None = None,
                 *, sacct_rc: int = 0) -> Callable[[Call], Result]:
    """What remote.SWEEP prints for the markers it was asked about (empty marker unless given); an argument
    ``<folder>/*/status.json`` prints each given marker of a sub-folder's status file, as the glob would."""

    def answer(call: Call) -> Result:
        text = "@@squeue\n" + "".join(r + "\n" for r in squeue) + "@@rc 0\n"
        text += "@@sacct\n" + "".join(r + "\n" for r in sacct) + f"@@rc {sacct_rc}\n"
        for m in call.args[1:]:
            if m.endswith("/*/status.json"):
                folder = m[:-len("/*/status.json")]
                for path, body in sorted((markers or {}).items()):
                    rel = path[len(folder) + 1:] if path.startswith(folder + "/") else ""
                    if rel.count("/") == 1 and rel.endswith("/status.json"):
                        text += f"@@marker {path}\n{body}\n"
                continue
            text += f"@@marker {m}\n{(markers or {}).get(m, '')}\n"
        return ok(text)

    return answer


def slurm_env(monkeypatch: Any, tmp_path: Any) -> None:
    """What a SLURM Connection needs: a user, a login host, a private control folder."""
    monkeypatch.setenv("SLURM_USER", "alice")
    monkeypatch.setenv("SLURM_HOSTNAME", "login1")
    monkeypatch.setenv("TAO_SSH_CONTROL_DIR", str(tmp_path / "ctl"))
    for name in ("SSH_KEY_PATH", "TAO_SSH_CONFIG", "TAO_SSH_KNOWN_HOSTS", "SLURM_BASE_RESULTS_DIR"):
        monkeypatch.delenv(name, raising=False)


# ---------------------------------------------------------------- records as a submit leaves them
def k8s_record(*, launched: bool = True, state: str = "RUNNING", uid: str | None = None,
               namespace: str = "default") -> dict:
    """A Kubernetes record; ``launched`` binds it to Job ``<id>`` (uid ``uid-<id>``), else it is an
    interrupted submit (opened, no backend_ref)."""
    from taobank import records

    rec = records.open_record("kubernetes", "nvcr.io/nvidia/tao/tao-toolkit:x", "dino", "train", "A", "/results",
                              backend={"namespace": namespace, "context": ""})
    jid = rec["id"]
    if not launched:
        return rec
    rec = records.mark(jid, "PENDING", backend_ref=f"{namespace}/{jid}", message="Job created",
                       backend={"uid": uid or f"uid-{jid}", "name": jid, "namespace": namespace, "nodes": 1})
    return records.mark(jid, state) if state != "PENDING" else rec


SLURM_BASE = "/lustre/base"


def slurm_record(*, staged: bool = True, slurm_job_id: str | None = "101", state: str = "RUNNING",
                 staged_secrets: bool = False) -> dict:
    """A SLURM record: opened; ``staged`` (job folder and script recorded); submitted when
    ``slurm_job_id`` is given (the sbatch answer recorded)."""
    from taobank import records

    rec = records.open_record("slurm", "none", "dino", "train", "A", f"{SLURM_BASE}/results/{records.ID_PLACEHOLDER}",
                              backend={"backend_type": "slurm", "partition": "gpu", "container_runtime": "none"})
    jid = rec["id"]
    if not staged:
        return rec
    jdir = f"{SLURM_BASE}/jobs/{jid}"
    rec = records.mark(jid, "PENDING", message="staged; submitting", backend={
        "staged_dir": jdir, "results_dir": f"{SLURM_BASE}/results/{jid}", "script": f"{jdir}/sbatch/job_{jid}.sbatch",
        "login_host": "login1", "job_name": jid, "staged_secrets": staged_secrets})
    if slurm_job_id is None:
        return rec
    rec = records.mark(jid, "PENDING", backend_ref=f"slurm:{slurm_job_id}", message=f"submitted as {slurm_job_id}",
                       backend={"slurm_job_id": slurm_job_id, "job_dir": jdir,
                                "log_dir": f"{jdir}/slurm-logs/{jid}-{slurm_job_id}"})
    return records.mark(jid, state) if state != "PENDING" else rec
