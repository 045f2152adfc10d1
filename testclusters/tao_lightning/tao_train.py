"""The Lightning side of the TAO stand-in: ``python tao_train.py [-e spec.yaml] key=value ...`` (test infrastructure).

As TAO's Lightning networks do (initialize_train_experiment), it trains on the devices TAO_VISIBLE_DEVICES
names (set by tao_entry.py) and on ``train.num_nodes`` nodes from its config (the ``train.num_nodes=``
override, last one wins as in Hydra, else the spec file's, else 1), with ``strategy='ddp'``; Lightning picks
its cluster environment and, in LightningEnvironment, starts the other processes of the node itself.
Here everything is on the CPU with gloo, a tiny model and a couple of batches.

Every process, once the process group is up, does one all_reduce (the rendezvous really happened) and
appends one JSON line to ``<results>/lightning_ranks.jsonl``: the ranks and world size Lightning gave it,
the cluster environment class it chose, its host, and the task environment tao_entry.py recorded. The
results folder is ``results_dir=`` when given, else the bank's $TAO_API_RESULTS_DIR/$TAO_API_JOB_ID.
The process group times out after TAO_STANDIN_PG_TIMEOUT_S (default 90) seconds, so a rank whose peers
never come fails instead of hanging until the job's time limit.

As TAO's Lightning networks do (TAOStatusLogger, monitor_status), global rank 0 writes
``<results>/train/status.json`` in the StatusLogger's JSON Lines (testclusters/fake_tao_train.sh writes the same
shape): STARTED lines, one epoch line each epoch (epoch, step, max_epoch, max_step, times, eta, the KPI dict
train_loss), "Training loop complete." and "Train finished successfully."; ``train.num_epochs=N`` (TAO's key)
sets the epochs (default 1), so status, metrics and artifacts work on it as on TAO.
"""
from __future__ import annotations

import json
import os
import socket
import sys
import time
from datetime import datetime, timedelta

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_py311  # noqa: E402  (before anything imports torch.distributed's sharded tensors)

torch_py311.install()

import torch  # noqa: E402
import pytorch_lightning as pl  # noqa: E402
from pytorch_lightning.strategies import DDPStrategy  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

RANKS_FILE = "lightning_ranks.jsonl"


def overrides(args: list[str]) -> dict[str, str]:
    """key=value arguments; a later one wins (Hydra)."""
    return dict(a.split("=", 1) for a in args if "=" in a and not a.startswith("-"))


def num_nodes(args: list[str], spec_file: str | None) -> int:
    given = overrides(args).get("train.num_nodes")
    if given is not None:
        return int(given)
    if spec_file:
        import yaml

        with open(spec_file, encoding="utf-8") as fh:
            return int(((yaml.safe_load(fh) or {}).get("train") or {}).get("num_nodes", 1))
    return 1


def results_dir(args: list[str]) -> str:
    given = overrides(args).get("results_dir")
    if given:
        return given
    return os.path.join(os.environ["TAO_API_RESULTS_DIR"], os.environ["TAO_API_JOB_ID"])


def num_epochs(args: list[str]) -> int:
    return max(1, int(overrides(args).get("train.num_epochs", "1")))


class TaoStatus(pl.Callback):
    """TAO's status.json, written on global rank 0 as TAO's StatusLogger writes it (keys, then date, time, status,
    verbosity, message, and the KPI dict in effect)."""

    def __init__(self, results: str, network: str = "dino") -> None:
        self.path = os.path.join(results, "train", "status.json")
        self.network = network
        self.kpi: dict[str, float] = {}
        self.t0 = 0.0

    def line(self, trainer: pl.Trainer, status: str, message: str, **keys: object) -> None:
        if trainer.global_rank != 0:
            return
        now = datetime.now()
        row = {**keys, "date": f"{now.month}/{now.day}/{now.year}", "time": f"{now.hour}:{now.minute}:{now.second}",
               "status": status, "verbosity": "INFO", "message": message}
        if self.kpi:
            row["kpi"] = dict(self.kpi)
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(row) + "\n")

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.line(trainer, "STARTED", f"Starting {self.network.upper()} train.")
        self.line(trainer, "STARTED", "Starting Training Loop.")

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.t0 = time.monotonic()

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        took = timedelta(seconds=round(time.monotonic() - self.t0))
        epoch, last = trainer.current_epoch, trainer.max_epochs - 1
        steps = trainer.num_training_batches
        self.line(trainer, "RUNNING", "Training loop in progress", epoch=epoch, step=trainer.global_step,
                  max_epoch=last, max_step=steps * trainer.max_epochs, time_per_epoch=str(took),
                  eta=str(took * (last - epoch)))
        loss = trainer.callback_metrics.get("train_loss")
        if loss is not None:
            self.kpi = {"train_loss": round(float(loss), 6)}
            self.line(trainer, "RUNNING", "Train metrics generated.")

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.line(trainer, "RUNNING", "Training loop complete.")
        self.line(trainer, "RUNNING", "Train finished successfully.")


class Tiny(pl.LightningModule):
    def __init__(self, out: str) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)
        self.out = out

    def on_train_start(self) -> None:
        # one all_reduce of ones: the sum is the world size only if every rank joined the same group
        total = torch.ones(1)
        torch.distributed.all_reduce(total)
        trainer = self.trainer
        line = {
            "global_rank": trainer.global_rank, "world_size": trainer.world_size,
            "local_rank": trainer.local_rank, "node_rank": trainer.node_rank,
            "num_nodes": trainer.num_nodes, "devices": trainer.num_devices,
            "cluster_environment": type(trainer.strategy.cluster_environment).__name__,
            "all_reduce_sum": int(total.item()), "hostname": socket.gethostname(), "pid": os.getpid(),
            "task_env": json.loads(os.environ.get("TAO_STANDIN_TASK_ENV", "{}")),
        }
        os.makedirs(self.out, exist_ok=True)
        # one write of one short line with O_APPEND: lines of different processes never interleave
        fd = os.open(os.path.join(self.out, RANKS_FILE), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (json.dumps(line, sort_keys=True) + "\n").encode())
        finally:
            os.close(fd)
        print(f"tao stand-in: rank {trainer.global_rank}/{trainer.world_size} local {trainer.local_rank} "
              f"node {trainer.node_rank} env {line['cluster_environment']} all_reduce={line['all_reduce_sum']}",
              flush=True)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.layer(x), y)
        self.log("train_loss", loss, on_step=False, on_epoch=True, sync_dist=True)
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def main(argv: list[str]) -> int:
    spec = argv[argv.index("-e") + 1] if "-e" in argv[:-1] else None
    args = [a for i, a in enumerate(argv) if a != "-e" and (i == 0 or argv[i - 1] != "-e")]
    devices = len([d for d in os.environ.get("TAO_VISIBLE_DEVICES", "0").split(",") if d.strip()])
    timeout = timedelta(seconds=int(os.environ.get("TAO_STANDIN_PG_TIMEOUT_S", "90")))
    trainer = pl.Trainer(accelerator="cpu", devices=devices, num_nodes=num_nodes(args, spec),
                         strategy=DDPStrategy(process_group_backend="gloo", timeout=timeout),
                         max_epochs=num_epochs(args), limit_train_batches=2, logger=False,
                         enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                         callbacks=[TaoStatus(results_dir(args))])
    data = TensorDataset(torch.randn(32, 4), torch.randn(32, 1))
    trainer.fit(Tiny(results_dir(args)), DataLoader(data, batch_size=4))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
