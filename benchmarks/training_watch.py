#!/usr/bin/env python3
"""Training you can watch, on the local SLURM cluster: the cost of `status` with progress for N = 1, 10, 100
running jobs, and of `fetch` of a results folder against a plain `scp -r` of the same folder.

  python3 benchmarks/training_watch.py [--sizes 1,10,100] [--fetch-mb 1024] [--runs 3] [--kubernetes] [--check]

status: N records of running trainings (each with TAO's status.json in its own results folder on the
shared filesystem), all tied to one running SLURM job so N costs no cluster capacity. The bank reads
every job's progress inside its one sweep command; the baseline reads each status.json with its own
`ssh cat` (a new session each, as an agent improvising would). fetch: one file of --fetch-mb MiB in a
finished job's folder; the bank (`tao_jobs.py fetch`: each byte read once on the cluster, its digest
computed in the same pass and checked here per 64 MiB block) against `scp -O -r` (the classic protocol:
the local sshd has no SFTP) with the same host, key and known_hosts, --runs of each taken in turn (medians);
then a rerun with every file here, and --runs reruns after a fetch killed (SIGTERM) once half the file was
verified. Besides the times, the CPU seconds per MiB of each side, which depend less on the load than times do:
the local cluster's login node is this host, so /proc shows the sender and its sshd too. The bank's CLI keeps
its compiled modules as on a user's machine (a session with PYTHONDONTWRITEBYTECODE set would compile ~70
modules at each start), and each copy writes into memory used before (see warm_page_cache). Docker: the
bank's fetch from a finished job's local folder against `cp -r`. Ratios are measured in the same run.
--kubernetes also fetches from a finished job's folder on the local cluster's PVC, the bank's reader pod
included, against a pod mounting the PVC plus `kubectl cp` (that pod included).

Measured here (2 cores shared with other sessions' tests at a load average of 5 to 7, and `yes` holding one
core; medians of 3, taken in turn): fetch of 1 GiB 0.76x the time of scp -O -r as users run it and 0.93x scp
given the bank's AES-GCM-first cipher order (the bank's master asks for it on an AES CPU); 512 MiB 1.12x and
1.44x (another series, 4 each: 0.74x and 0.84x). CPU per MiB, both sides together: 3.8 ms (1 GiB) and 4.5 ms
(512 MiB), against scp's 5.5 and AES-GCM scp's 3.8 to 3.9. Resumed after half: 0.38x (512 MiB) and 0.53x (1 GiB)
a full fetch. Before (64 KiB pipes, a new 4 MiB object per read here, two copies per byte on the cluster), in the
same series of 5 at 512 MiB: 1.53x scp and 8.0 ms per MiB against scp's 6.1. Status of 100 running trainings in
3.1 s (one command) vs 58.7 s for a cat per job, at a load of 10 to 14. Docker (a finished job's big files are
hard links; cp -r reads them from memory): 0.88x cp -r at 1 GiB, 3.6x at 512 MiB (the CLI's start is most of
it). Kubernetes (not measured again): 0.98x a pod plus kubectl cp.

--check (CI: tests/e2e/slurm/test_benchmark_training_watch.py, small N and size) exits 1 unless every
job's progress was read with ONE remote command and at most one connection per status, the fetch took
two remote commands (a rerun with everything here one) and brought back identical bytes on SLURM, Docker
and Kubernetes. Times are printed, never asserted.
"""
from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

BANK = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(BANK / "scripts"), str(BANK), str(BANK / "benchmarks")]  # taobank, testclusters, checks.py

from taobank import records  # noqa: E402
from taobank import run as runmod  # noqa: E402
from taobank.core import platform  # noqa: E402
from taobank.platforms.slurm import ssh  # noqa: E402

from slurm_sweep import counts, plain_options, use_cluster  # noqa: E402

EPOCH_LINE = ('{{"date": "3/7/2025", "time": "9:{e}:3", "status": "RUNNING", "verbosity": "INFO", "epoch": {e}, '
              '"max_epoch": 10, "eta": "0:12:30", "time_per_epoch": "0:01:00", "kpi": {{"train_loss": {loss}}}}}\n')


def shared_root() -> Path:
    """The shared filesystem's folder for this user's results, as this host sees it (the local cluster's
    login node and this host share it)."""
    return Path(os.environ["SLURM_BASE_RESULTS_DIR"])


def running_job(conn: ssh.Connection) -> str:
    """One SLURM job that keeps running while the sweeps are measured (scancel-ed at the end)."""
    site = [f"--{flag}={os.environ[var]}" for flag, var in (("partition", "SLURM_PARTITION"),
                                                             ("account", "SLURM_ACCOUNT")) if os.environ.get(var)]
    res = conn.remote(["sbatch", "--parsable", "--job-name=tao-bench-watch", "-t", "10", *site, "--wrap",
                       "sleep 600"], what="sbatch (benchmark)")
    return res.stdout.strip().split(";")[0]


def job_folder(folder: Path) -> Path:
    """``folder`` made on the shared filesystem, owned (with any parent made for it) by the cluster's user, as
    the cluster makes it: a results/ folder made here by root would refuse the cluster's next jobs."""
    owner = shared_root().parent.stat()
    for part in [*reversed(folder.parents), folder]:
        if part.is_relative_to(shared_root().parent) and not part.exists():
            part.mkdir()
            os.chown(part, owner.st_uid, owner.st_gid)
    return folder


def records_for(n: int, jid: str, tmp: str) -> list[str]:
    """N records of running trainings with status.json in their folders, all watching SLURM job ``jid``."""
    ids = []
    for _ in range(n):
        rec = records.open_record("slurm", "none", "bench", "train", "A", str(shared_root() / "results" / "{id}"),
                                  backend={"backend_type": "slurm", "partition": "bench"})
        folder = job_folder(Path(rec["results_dir"]))
        (folder / "status.json").write_text("".join(EPOCH_LINE.format(e=e, loss=1 / e) for e in range(1, 4)))
        jobs = shared_root() / "jobs" / rec["id"]
        records.mark(rec["id"], "RUNNING", backend_ref=f"slurm:{jid}", message="bench", backend={
            "slurm_job_id": jid, "job_dir": str(jobs), "results_dir": rec["results_dir"], "job_name": rec["id"]})
        ids.append(rec["id"])
    return ids


def bank_status(ids: list[str]) -> dict:
    ssh.Connection().close()  # from a closed master: the bank pays for its one connection, like the baseline
    start = len(runmod.CALLS)
    t0 = time.perf_counter()
    views = platform.refresh([records.load(i) for i in ids], retry=False)
    wall = time.perf_counter() - t0
    c = counts(runmod.CALLS[start:])
    shown = sum(1 for v in views if (v.progress or {}).get("epoch") == 3)
    return {"connections": c["connect"], "commands": c["command"], "wall_s": wall, "with_progress": shown}


def naive_status(conn: ssh.Connection, ids: list[str]) -> dict:
    """One `cat status.json` per job, each over its own new SSH session (on top of the sweep it still needs)."""
    host = conn.connect()
    base = plain_options(conn.options(host)) + ["--", host.host]
    t0 = time.perf_counter()
    failed = 0
    for job_id in ids:
        folder = records.load(job_id)["results_dir"]
        res = runmod.run(base + [shlex.join(["cat", "--", f"{folder}/status.json"])], check=False, timeout=60,
                         what="naive cat")
        failed += res.returncode != 0
    return {"connections": len(ids), "commands": len(ids), "wall_s": time.perf_counter() - t0, "failed": failed}


def scp_options(conn: ssh.Connection) -> tuple[list[str], str]:
    """The bank's ssh options as scp takes them (user in the destination, -P for the port), unmultiplexed."""
    host = conn.connect()
    opts = plain_options(conn.options(host))[1:]  # without argv[0] ("ssh")
    out: list[str] = []
    user = None
    i = 0
    while i < len(opts):
        if opts[i] == "-l":
            user = opts[i + 1]
        elif opts[i] == "-p":
            out += ["-P", opts[i + 1]]
        else:
            out.append(opts[i])
            i += 1
            continue
        i += 2
    return out, f"{user}@{host.host}" if user else host.host


def write_blob(path: Path, size_mb: int) -> str:
    """``size_mb`` MiB of random bytes at ``path``; their sha256."""
    digest = hashlib.sha256()
    with path.open("wb") as fh:
        for _ in range(size_mb):
            chunk = os.urandom(1024 * 1024)
            digest.update(chunk)
            fh.write(chunk)
    return digest.hexdigest()


def same_file(path: Path, want: str) -> bool:
    return path.is_file() and hashlib.sha256(path.read_bytes()).hexdigest() == want


def same_copy(folder: Path, name: str, want: str) -> bool:
    """scp -r into a new folder (the folder becomes it): its one copy of ``name`` is the blob; the folder is then
    removed (the next copy writes into the memory it frees, see :func:`warm_page_cache`)."""
    copies = list(folder.rglob(name))
    ok = len(copies) == 1 and same_file(copies[0], want)
    shutil.rmtree(folder)
    return ok


def warm_page_cache(path: Path, size_mb: int) -> None:
    """Write and delete ``size_mb`` MiB here, so that each measured copy writes into memory this host has used
    before. A fresh VM's memory is backed on its first touch: the copy that first wrote into it paid up to 8x the
    CPU for the same bytes (perf: all in the kernel's copy into the page cache), whichever copy it was. Every copy
    is deleted once checked, for the same reason."""
    zeros = bytes(1 << 20)
    with path.open("wb") as fh:
        for _ in range(size_mb):
            fh.write(zeros)
    path.unlink()


def with_bytecode(env: dict, tmp: Path) -> dict:
    """``env`` in which Python keeps the bank's compiled modules (in a folder of this run, warmed here), as on a
    user's machine: a session with PYTHONDONTWRITEBYTECODE would compile every module at each CLI start."""
    env = dict(env, PYTHONPYCACHEPREFIX=str(tmp / "pycache"))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(BANK / "scripts")], env=env, check=True,
                   capture_output=True, timeout=600)
    return env


def cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of a live process (from /proc); None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def master_pid(conn: ssh.Connection) -> int | None:
    """The pid of the bank's ssh ControlMaster (it decrypts the bank's bytes, as scp's own ssh does scp's)."""
    host = conn.connect()
    res = subprocess.run(conn.options(host) + ["-O", "check", "--", host.host], capture_output=True, text=True,
                         timeout=15)
    text = res.stderr + res.stdout
    return int(text.split("pid=", 1)[1].split(")", 1)[0]) if "pid=" in text else None


class ClusterCPU:
    """CPU seconds of the cluster's side of one transfer, read from /proc because the local cluster's login node
    is this host: the sender (a process whose command line names the folder: the bank's python3, scp -f) and the
    processes above it up to its sshd session. Polled in a thread (a process that ends loses at most one poll);
    a session that outlives the transfer (the bank's master's) counts only what it spent meanwhile."""

    def __init__(self, folder: str) -> None:
        self.folder = folder.encode()
        self.base: dict[int, float] = {}
        self.last: dict[int, float] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self) -> "ClusterCPU":
        self.base = {pid: c for pid in _pids() if (c := cpu_s(pid)) is not None}
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()
        self._sample()

    def _sample(self) -> None:
        for pid in self.last:
            c = cpu_s(pid)
            if c is not None:
                self.last[pid] = c

    def _poll(self) -> None:
        scan = 0.0
        while not self.stop.is_set():
            if time.monotonic() - scan > 0.05:  # new senders (a full scan: 2 ms here, a sample far less)
                scan = time.monotonic()
                for pid in _pids():
                    if pid not in self.last and self.folder in _cmdline(pid):
                        for up in _up_to_sshd(pid):
                            self.last.setdefault(up, 0.0)
            self._sample()
            time.sleep(0.01)

    def seconds(self) -> float:
        return sum(max(c - self.base.get(pid, 0.0), 0.0) for pid, c in self.last.items())


def _pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _up_to_sshd(pid: int) -> list[int]:
    """``pid`` and its parents up to the first sshd (included): a process on the cluster's side; none for a
    process of this side (below this benchmark: scp, the bank's ssh client name the folder too) or no sshd."""
    chain = [pid]
    while True:
        try:
            stat_ = Path(f"/proc/{chain[-1]}/stat").read_text()
            comm, ppid = stat_[stat_.index("(") + 1:stat_.rindex(")")], int(stat_.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return []
        if comm == "sshd":
            return chain
        if ppid <= 1 or ppid == os.getpid():
            return []
        chain.append(ppid)


def timed(argv: list[str], env: dict | None, folder: str | None) -> tuple[float, float, float]:
    """Run ``argv`` (a fetch, scp): (wall seconds, CPU seconds here, CPU seconds on the cluster's side, 0 without
    ``folder``). Here: the process and the children it waited for (scp's ssh); the bank's master is added by the
    caller."""
    os.sync()  # no dirty pages of an earlier copy written back while this one runs (each side starts alike)
    remote = ClusterCPU(folder) if folder else None
    with remote or contextlib.nullcontext():
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if status != 0:
        raise SystemExit(f"{argv[0]} failed: {err.strip()[-500:]}")
    return wall, usage.ru_utime + usage.ru_stime, remote.seconds() if remote else 0.0


def bank_fetch(job_id: str, dest: Path, env: dict, log: Path, conn: ssh.Connection | None = None,
               folder: str | None = None) -> dict:
    """``tao_jobs.py fetch JOB --to DEST`` as a user runs it: wall seconds, remote commands, and (given the
    connection and the folder) CPU seconds here (the CLI and its master's share) and on the cluster's side."""
    log.unlink(missing_ok=True)
    before = master_pid(conn) if conn else None
    base = (cpu_s(before) or 0.0) if before else 0.0
    wall, here, there = timed([sys.executable, str(BANK / "scripts" / "tao_jobs.py"), "fetch", job_id, "--to",
                               str(dest)], dict(env, TAO_CALL_LOG=str(log)), folder)
    after = master_pid(conn) if conn else None
    if after:
        here += (cpu_s(after) or 0.0) - (base if after == before else 0.0)
    return {"wall_s": wall, "cpu_here_s": here, "cpu_cluster_s": there,
            "commands": counts([json.loads(x) for x in log.read_text().splitlines()])["command"]}


def killed_at_half(job_id: str, dest: Path, env: dict, size: int, name: str) -> bool:
    """Start a fetch and SIGTERM it once half of the file's bytes are verified in its staging folder; whether
    it was caught half-way (a file under two verified blocks cannot be: the signal comes once it is whole)."""
    import signal

    state = dest / f".tao-fetch-{job_id}" / "state.json"
    proc = subprocess.Popen([sys.executable, str(BANK / "scripts" / "tao_jobs.py"), "fetch", job_id, "--to",
                             str(dest)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    caught = False
    while proc.poll() is None:
        try:
            have = max((v.get("have", 0) for v in json.loads(state.read_text()).values()), default=0)
        except (OSError, ValueError):
            have = 0
        if have >= size // 2:
            proc.send_signal(signal.SIGTERM)
            caught = True
            break
        time.sleep(0.002)
    proc.wait(timeout=120)
    return caught and proc.returncode != 0 and not (dest / name).exists()


def fetch_case(size_mb: int, tmp: Path, conn: ssh.Connection, runs: int) -> dict:
    """A finished job's folder holding one file of ``size_mb`` MiB: the bank's fetch against scp -r (``runs`` of
    each, taken in turn; the medians), a rerun with everything here, and ``runs`` reruns after a fetch killed
    half-way."""
    rec = records.open_record("slurm", "none", "bench", "train", "A", str(shared_root() / "results" / "{id}"),
                              backend={"backend_type": "slurm", "partition": "bench"})
    folder = job_folder(Path(rec["results_dir"]))
    blob = folder / "model_epoch_001.pth"
    want = write_blob(blob, size_mb)
    records.mark(rec["id"], "COMPLETE", message="bench", backend={"results_dir": rec["results_dir"]})
    log = tmp / "fetch-calls.jsonl"
    env = with_bytecode(dict(os.environ), tmp)
    opts, dest = scp_options(conn)
    # the cipher order the bank's master asks for (ssh.cipher_options), given to scp too for the second baseline
    aes = ssh.cipher_options(ssh.DEFAULT_CIPHERS)
    bank: list[dict] = []
    scp: list[tuple[float, float, float]] = []
    scp_aes: list[tuple[float, float, float]] = []
    commands, same = 0, True
    warm_page_cache(tmp / "warm.bin", size_mb)
    for i in range(runs):
        got = bank_fetch(rec["id"], tmp / f"bank-{i}", env, log, conn, str(folder))
        bank.append(got)
        commands = got["commands"]
        same = same and same_file(tmp / f"bank-{i}" / blob.name, want)
        if i < runs - 1:  # the last one stays for the rerun with every file here
            shutil.rmtree(tmp / f"bank-{i}")
        scp.append(timed(["scp", "-O", "-q", "-r", *opts, f"{dest}:{folder}", str(tmp / f"scp-{i}")], None,
                         str(folder)))
        same = same and same_copy(tmp / f"scp-{i}", blob.name, want)
        if aes:
            scp_aes.append(timed(["scp", "-O", "-q", "-r", *aes, *opts, f"{dest}:{folder}",
                                  str(tmp / f"scp-aes-{i}")], None, str(folder)))
            same = same and same_copy(tmp / f"scp-aes-{i}", blob.name, want)
    rerun = bank_fetch(rec["id"], tmp / f"bank-{runs - 1}", env, log)
    shutil.rmtree(tmp / f"bank-{runs - 1}")
    resumed = []
    for i in range(runs):
        if not killed_at_half(rec["id"], tmp / f"half-{i}", env, blob.stat().st_size, blob.name):
            shutil.rmtree(tmp / f"half-{i}", ignore_errors=True)
            break
        got = bank_fetch(rec["id"], tmp / f"half-{i}", env, log)
        same = same and same_file(tmp / f"half-{i}" / blob.name, want)
        shutil.rmtree(tmp / f"half-{i}")
        resumed.append(got)
    med = statistics.median
    return {"mb": size_mb, "runs": runs, "commands": commands, "identical": same,
            "bank_wall_s": med(b["wall_s"] for b in bank), "scp_wall_s": med(w for w, _, _ in scp),
            "scp_aes_wall_s": med(w for w, _, _ in scp_aes) if scp_aes else None,
            "bank_cpu": (med(b["cpu_here_s"] for b in bank), med(b["cpu_cluster_s"] for b in bank)),
            "scp_cpu": (med(h for _, h, _ in scp), med(c for _, _, c in scp)),
            "scp_aes_cpu": (med(h for _, h, _ in scp_aes), med(c for _, _, c in scp_aes)) if scp_aes else None,
            "rerun_wall_s": rerun["wall_s"], "rerun_commands": rerun["commands"],
            "resumed": {"wall_s": med(r["wall_s"] for r in resumed), "commands": max(r["commands"] for r in resumed),
                        "runs": len(resumed)} if resumed else None}


def docker_fetch_case(size_mb: int, tmp: Path) -> dict:
    """A finished Docker job's results folder (a local bind mount) holding one file: the bank's fetch against
    ``cp -r`` of the folder (best of two each, same run)."""
    base = tmp / "docker-results"
    rec = records.open_record("docker", "busybox", "bench", "train", "A", str(base / "{id}"),
                              backend={"backend_type": "docker"})
    folder = Path(rec["results_dir"])
    folder.mkdir(parents=True)
    blob = folder / "model_epoch_001.pth"
    want = write_blob(blob, size_mb)
    records.mark(rec["id"], "COMPLETE", message="bench", backend={"results_dir": rec["results_dir"]})
    bank, cp, same = [], [], True
    for i in range(2):
        wall = bank_fetch(rec["id"], tmp / f"docker-bank-{i}", dict(os.environ), tmp / "docker-calls.jsonl")["wall_s"]
        bank.append(wall)
        same = same and same_file(tmp / f"docker-bank-{i}" / blob.name, want)
        os.sync()
        t0 = time.perf_counter()
        subprocess.run(["cp", "-r", str(folder), str(tmp / f"docker-cp-{i}")], check=True)
        cp.append(time.perf_counter() - t0)
        same = same and same_file(tmp / f"docker-cp-{i}" / blob.name, want)
    return {"mb": size_mb, "bank_wall_s": min(bank), "cp_wall_s": min(cp), "identical": same}


def k8s_fetch_case(size_mb: int, tmp: Path) -> dict:
    """A finished Kubernetes job's folder on the local PVC (tier A) holding one file of ``size_mb`` MiB: the
    bank's fetch (its reader pod included) against a pod mounting the PVC plus `kubectl cp` (pod included)."""
    import testclusters.kubernetes as lk
    from taobank import pins
    from taobank.platforms.kubernetes.logs import SPEC_FILE

    env = dict(os.environ, **lk.env())
    os.environ.update(lk.env())
    spec = {"image": "busybox", "command": "true", "mounts": [{"pvc": lk.PVC_NAME, "mount_path": "/results"}],
            "node_selector": {lk.REAL_NODE_LABEL: "true"}}
    rec = records.open_record("kubernetes", "busybox", "bench", "train", "A", "/results/{id}",
                              backend={"namespace": lk.NAMESPACE, "context": ""})
    (records.artifact_dir(rec["id"]) / SPEC_FILE).write_text(json.dumps(spec))
    records.mark(rec["id"], "COMPLETE", message="bench")
    host = lk.state_root() / "pv" / rec["id"]
    host.mkdir(parents=True)
    blob = host / "model_epoch_001.pth"
    with blob.open("wb") as fh:
        chunk = os.urandom(1024 * 1024)
        for _ in range(size_mb):
            fh.write(chunk)
    want = hashlib.sha256(blob.read_bytes()).hexdigest()
    try:
        log = tmp / "k8s-fetch-calls.jsonl"
        os.sync()
        t0 = time.perf_counter()
        subprocess.run([sys.executable, str(BANK / "scripts" / "tao_jobs.py"), "fetch", rec["id"], "--to",
                        str(tmp / "k8s-bank")], env=dict(env, TAO_CALL_LOG=str(log)), check=True,
                       capture_output=True, text=True, timeout=3600)
        bank_wall = time.perf_counter() - t0
        kubectl_calls = sum(1 for x in log.read_text().splitlines() if Path(json.loads(x)[0]).name == "kubectl")
        pod = f"bench-cp-{rec['id'][-8:]}"
        manifest = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod, "namespace": lk.NAMESPACE},
                    "spec": {"nodeSelector": spec["node_selector"], "terminationGracePeriodSeconds": 1,
                             "containers": [{"name": "cp", "image": str(pins.resolve("images.busybox")),
                                             "command": ["sleep", "3600"],
                                             "volumeMounts": [{"name": "r", "mountPath": "/results"}]}],
                             "volumes": [{"name": "r", "persistentVolumeClaim": {"claimName": lk.PVC_NAME}}]}}
        kubectl = [lk.env()[lk.KUBECTL_ENV], "-n", lk.NAMESPACE]
        os.sync()
        t0 = time.perf_counter()
        subprocess.run(kubectl + ["create", "-f", "-"], input=json.dumps(manifest), env=env, check=True,
                       capture_output=True, text=True)
        subprocess.run(kubectl + ["wait", "--for=condition=Ready", f"pod/{pod}", "--timeout=120s"], env=env,
                       check=True, capture_output=True, text=True)
        subprocess.run(kubectl + ["cp", f"{pod}:/results/{rec['id']}", str(tmp / "k8s-cp")], env=env, check=True,
                       capture_output=True, text=True, timeout=3600)
        cp_wall = time.perf_counter() - t0
        subprocess.run(kubectl + ["delete", "pod", pod, "--wait=false"], env=env, capture_output=True)
        got = tmp / "k8s-bank" / blob.name
        copies = list((tmp / "k8s-cp").rglob(blob.name))
        same = (got.is_file() and hashlib.sha256(got.read_bytes()).hexdigest() == want and len(copies) == 1
                and hashlib.sha256(copies[0].read_bytes()).hexdigest() == want)
    finally:
        import shutil

        shutil.rmtree(host, ignore_errors=True)
    return {"mb": size_mb, "bank_wall_s": bank_wall, "cp_wall_s": cp_wall, "kubectl_calls": kubectl_calls,
            "identical": same}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1,10,100")
    ap.add_argument("--fetch-mb", type=int, default=1024, help="size of the folder fetched, in MiB")
    ap.add_argument("--kubernetes", action="store_true", help="also fetch from the local Kubernetes PVC vs kubectl cp")
    ap.add_argument("--runs", type=int, default=3, help="SLURM fetches and scp runs each (the medians are shown)")
    ap.add_argument("--check", action="store_true", help="exit 1 unless the command counts hold")
    args = ap.parse_args()
    if not use_cluster(check=args.check):
        return 1
    bad: list[str] = []
    with tempfile.TemporaryDirectory(prefix="tao-watch-bench-") as tmp:
        os.environ["TAO_STATE_DIR"] = str(Path(tmp) / "state")
        conn = ssh.Connection()
        jid = running_job(conn)
        try:
            rows = []
            for n in (int(x) for x in args.sizes.split(",") if x):
                ids = records_for(n, jid, tmp)
                bank, naive = bank_status(ids), naive_status(ssh.Connection(), ids)
                rows.append((n, bank, naive))
                if (bank["commands"], bank["with_progress"]) != (1, n) or bank["connections"] > 1:
                    bad.append(f"status of {n} running trainings: {bank['connections']} connections, "
                               f"{bank['commands']} commands, progress for {bank['with_progress']} "
                               f"(want <= 1, 1 and {n})")
                if naive["failed"]:
                    bad.append(f"the baseline's cat failed {naive['failed']} times at n={n}")
            fetched = fetch_case(args.fetch_mb, Path(tmp), conn, max(args.runs, 1))
            if fetched["commands"] != 2 or not fetched["identical"]:
                bad.append(f"fetch: {fetched['commands']} remote commands (want 2: the files' sizes, then each "
                           f"file read once), identical bytes: {fetched['identical']}")
            if fetched["rerun_commands"] != 1:
                bad.append(f"a rerun with every file here: {fetched['rerun_commands']} remote commands (want 1)")
            if fetched["resumed"] and fetched["resumed"]["commands"] != 2:
                bad.append(f"a resumed fetch: {fetched['resumed']['commands']} remote commands (want 2)")
            docker = docker_fetch_case(args.fetch_mb, Path(tmp))
            if not docker["identical"]:
                bad.append("Docker fetch: the bytes differ from the folder's")
            k8s = k8s_fetch_case(args.fetch_mb, Path(tmp)) if args.kubernetes else None
            if k8s and not k8s["identical"]:
                bad.append("Kubernetes fetch: the bytes differ from the PVC's")
        finally:
            conn.remote(["scancel", jid], check=False, what="scancel (benchmark)")
    print("status with progress of N running trainings: bank (one sweep command reads every status.json) vs "
          "naive (one ssh cat per job, new session each); ratios = naive/bank")
    print("n | bank_conn | bank_cmds | bank_wall_s | naive_conn | naive_cmds | naive_wall_s | wall_ratio")
    for n, b, v in rows:
        ratio = f"{v['wall_s'] / b['wall_s']:.1f}x" if b["wall_s"] else "-"
        print(f"{n} | {b['connections']} | {b['commands']} | {b['wall_s']:.2f} | {v['connections']} | "
              f"{v['commands']} | {v['wall_s']:.2f} | {ratio}")
    f = fetched
    print(f"\nfetch of {f['mb']} MiB: bank {f['bank_wall_s']:.2f} s (medians of {f['runs']} runs each, taken in turn; "
          f"{f['commands']} remote commands, each byte read once, digest per block checked) vs scp -r "
          f"{f['scp_wall_s']:.2f} s: {f['bank_wall_s'] / max(f['scp_wall_s'], 1e-9):.2f}x scp's time")
    if f["scp_aes_wall_s"]:
        print(f"  (the bank's master asks for AES-GCM first on this AES CPU; scp -r given that cipher order too: "
              f"{f['scp_aes_wall_s']:.2f} s, the bank {f['bank_wall_s'] / f['scp_aes_wall_s']:.2f}x "
              "its time: what the protocol itself costs)")
    per = 1000 / max(f["mb"], 1)
    cpu = [("bank", f["bank_cpu"]), ("scp -r", f["scp_cpu"])] + ([("scp -r AES-GCM", f["scp_aes_cpu"])]
                                                                 if f["scp_aes_cpu"] else [])
    print("  CPU ms per MiB (medians; both sides on this host: here the CLI with its ssh and the bank's master, "
          "there the sender and its sshd), load-independent: " + "; ".join(
              f"{name} {h * per:.2f} here + {c * per:.2f} there = {(h + c) * per:.2f}" for name, (h, c) in cpu))
    print(f"rerun with every file here: {f['rerun_wall_s']:.2f} s ({f['rerun_commands']} remote command)")
    if f["resumed"]:
        r = f["resumed"]
        print(f"resumed after a fetch killed half-way (median of {r['runs']}): {r['wall_s']:.2f} s ({r['commands']} "
              f"remote commands): {r['wall_s'] / max(f['bank_wall_s'], 1e-9):.2f}x a full fetch")
    else:
        print("resumed: not measured (the file is under two verified blocks, so no fetch stops half-way)")
    print(f"Docker fetch of {docker['mb']} MiB: bank {docker['bank_wall_s']:.2f} s (a finished job's: hard links "
          f"where the filesystem allows, else a local copy) vs cp -r {docker['cp_wall_s']:.2f} s: {docker['bank_wall_s'] / max(docker['cp_wall_s'], 1e-9):.2f}x "
          "cp's time")
    if k8s:
        print(f"Kubernetes fetch of {k8s['mb']} MiB from the PVC: bank {k8s['bank_wall_s']:.2f} s (reader pod included, "
              f"{k8s['kubectl_calls']} kubectl calls, digest per block checked) vs pod + kubectl cp {k8s['cp_wall_s']:.2f} s: "
              f"{k8s['bank_wall_s'] / max(k8s['cp_wall_s'], 1e-9):.2f}x kubectl cp's time")
    if args.check:
        from checks import verdict

        return verdict(bad, f"progress in one command for N = {', '.join(str(n) for n, _, _ in rows)}; "
                            "fetch in two, a rerun in one, bytes identical")
    return 0


if __name__ == "__main__":
    sys.exit(main())
