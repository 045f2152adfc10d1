"""TAO's own code as the tests' oracle: status files written by nvidia-tao-core's ``StatusLogger`` and checkpoint
names made by pytorch-lightning's ``ModelCheckpoint`` at TAO's settings (requirements-tao.txt, installed
``--no-deps``), in the order a Lightning training calls them: the callback's own hooks (``setup``,
``on_train_start``, ``on_train_batch_end``, ``on_validation_end``, ``on_train_epoch_end``) decide when a checkpoint
is saved and linked (every epoch, every ``every_n_train_steps`` batches, with validations ``val_every`` apart),
over a stand-in of the Trainer's attributes they read, and a resumed run restores the callback's state from the
checkpoint as Lightning does (``load_state_dict``).

Two stand-ins, both only here and both for code that does not decide a single byte of the output:

* torch (too big to install for a test): ``ModelCheckpoint``'s module imports it; its naming needs only
  ``torch.tensor`` (a value stands for its tensor: the names format ``{epoch:03d}`` of it) and ``torch.inf``.
  The Lightning packages' ``__init__`` files (which import all of torch) are skipped: the modules the naming
  needs are loaded from Lightning's own files.
* nvidia-tao-core's status logger imports its cloud status hook (``status_callback``), whose module pulls the
  whole TAO API server in (kubernetes, mongo, NGC SDK, ...). Outside TAO's cloud (``CLOUD_BASED`` unset, no
  ``EARLY_STOP_EPOCH``) that hook does nothing, so a no-op stands in for it.

Around the action, nvidia-tao-core's own ``monitor_status`` decorator writes the run's first and last lines
(STARTED ``Starting DINO train``; RUNNING ``DINO train completed successfully``; on an interrupt or SystemError
FAILURE ``DINO train was interrupted: ...``, on another exception FAILURE ``DINO train failed: ...``, both
raised on). What TAO's PyTorch backend (nvidia_tao_pytorch, not published on PyPI) adds is the order and the
words of its other calls, which :func:`train` makes: its entrypoint swallows an interrupt or SystemError (the
process exits 0 after the FAILURE line: "Execution status: PASS"), its Lightning status callback ("Starting
Training Loop.", the epoch line, "Training loop complete.") and DINO's module (validation KPIs on a line of
their own before the epoch line, ``val_mAP`` as text; the training loss after it).
"""
from __future__ import annotations

import importlib.machinery
import json
import math
import os
import sys
import types
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

#: TAO's ModelCheckpoint settings (core/lightning/tao_lightning_module.py; versions.yaml tao_checkpoints).
TAO_FILENAME = "model_{epoch:03d}_{step:05d}"
TAO_EQUALS_CHAR = "_"
TAO_EXTENSION = ".pth"
STEPS_PER_EPOCH = 10


# ------------------------------------------------------------------ loading TAO's modules
class _Placeholder(type):
    """Any torch name only used in annotations or imports (``Tensor``, ``nn.Module``): a class of its own."""

    def __getattr__(cls, name: str) -> Any:
        return _Placeholder(name, (), {})

    def __getitem__(cls, key: Any) -> Any:
        return cls

    def __or__(cls, other: Any) -> Any:
        return cls

    __ror__ = __or__


class _TorchFinder:
    """torch and torchmetrics as modules whose names are placeholders; torch.tensor(v) is v, torch.inf is inf."""

    ROOTS = ("torch", "torchmetrics")

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname.split(".")[0] in self.ROOTS:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)  # type: ignore[arg-type]
        return None

    def create_module(self, spec: Any) -> types.ModuleType:
        module = types.ModuleType(spec.name)
        module.__path__ = []
        module.__getattr__ = lambda name: _Placeholder(name, (), {})  # type: ignore[method-assign]
        if spec.name == "torch":
            module.tensor = lambda value: value  # type: ignore[attr-defined]
            module.inf = math.inf  # type: ignore[attr-defined]
            module.__version__ = "2.5.1"  # type: ignore[attr-defined]
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        pass


def _bare_package(name: str) -> None:
    """``name`` importable for its submodules without running its ``__init__`` (which imports all of torch)."""
    if name in sys.modules:
        return
    spec = importlib.machinery.PathFinder.find_spec(name.split(".")[0])
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(f"{name.split('.')[0]} is not installed: pip install --no-deps -r requirements-tao.txt")
    root = Path(list(spec.submodule_search_locations)[0])
    module = types.ModuleType(name)
    module.__path__ = [str(root.joinpath(*name.split(".")[1:]))]
    sys.modules[name] = module


_LOADED: dict[str, Any] = {}


def tao() -> Any:
    """nvidia-tao-core's ``nvidia_tao_core.loggers.logging`` (StatusLogger, Status, Verbosity)."""
    if "logging" not in _LOADED:
        hook = "nvidia_tao_core.microservices.handlers.cloud_handlers.utils"
        if hook not in sys.modules:
            stub = types.ModuleType(hook)
            stub.status_callback = lambda data_string, retry=0: None  # type: ignore[attr-defined]
            sys.modules[hook] = stub
        import nvidia_tao_core.loggers.logging as tao_logging

        _LOADED["logging"] = tao_logging
    return _LOADED["logging"]


def monitor_status() -> Any:
    """nvidia-tao-core's ``monitor_status`` decorator (``nvidia_tao_core.loggers.decorators``)."""
    if "monitor_status" not in _LOADED:
        tao()
        from nvidia_tao_core.loggers.decorators import monitor_status as decorator

        _LOADED["monitor_status"] = decorator
    return _LOADED["monitor_status"]


@contextmanager
def clock(at: datetime) -> Iterator[None]:
    """TAO's logger writes ``at`` as every line's date and time (its module's ``datetime.now``)."""
    tao_logging = tao()

    class _Fixed(datetime):
        @classmethod
        def now(cls, tz: Any = None) -> "_Fixed":  # type: ignore[override]
            return cls.fromtimestamp(at.timestamp())

    real = tao_logging.datetime
    tao_logging.datetime = _Fixed
    try:
        yield
    finally:
        tao_logging.datetime = real


def model_checkpoint() -> Any:
    """pytorch-lightning's ``ModelCheckpoint`` class (its own module, over the torch stand-in)."""
    if "ModelCheckpoint" not in _LOADED:
        finder = _TorchFinder()
        sys.meta_path.insert(0, finder)  # type: ignore[arg-type]
        try:
            for name in ("pytorch_lightning", "pytorch_lightning.callbacks", "pytorch_lightning.utilities",
                         "pytorch_lightning.trainer", "lightning_fabric", "lightning_fabric.utilities"):
                _bare_package(name)
            callbacks = sys.modules["pytorch_lightning.callbacks"]
            if not hasattr(callbacks, "Checkpoint"):
                from pytorch_lightning.callbacks.checkpoint import Checkpoint

                callbacks.Checkpoint = Checkpoint  # type: ignore[attr-defined]
            from pytorch_lightning.callbacks.model_checkpoint import ModelCheckpoint
            from pytorch_lightning.trainer import states  # noqa: F401  (the hooks import it when they run)

            _LOADED["ModelCheckpoint"] = ModelCheckpoint
        finally:
            # The stand-in must not outlive the load: another test's library (hypothesis seeds torch's RNG
            # when it finds torch imported) would take it for torch. Lightning's modules keep their reference.
            sys.meta_path.remove(finder)  # type: ignore[arg-type]
            for name in [n for n in sys.modules if n.split(".")[0] in _TorchFinder.ROOTS]:
                del sys.modules[name]
    return _LOADED["ModelCheckpoint"]


def tao_checkpoint(folder: Path, network: str = "dino", every_n_train_steps: int | None = None) -> Any:
    """A ModelCheckpoint as TAO's Lightning networks configure it: ``model_epoch_007_step_00800.pth`` and
    the relative link ``dino_model_latest.pth`` to the last one saved (every epoch, or every
    ``every_n_train_steps`` batches)."""
    checkpoint = model_checkpoint()(dirpath=str(folder), filename=TAO_FILENAME, save_last="link",
                                    save_top_k=-1, every_n_train_steps=every_n_train_steps)
    checkpoint.CHECKPOINT_EQUALS_CHAR = TAO_EQUALS_CHAR
    checkpoint.FILE_EXTENSION = TAO_EXTENSION
    checkpoint.CHECKPOINT_NAME_LAST = f"{network}_model_latest"
    return checkpoint


class _Trainer:
    """What ModelCheckpoint's hooks ask of Lightning's Trainer, for one process fitting with a validation every
    epoch (TAO's default): where the loop is, and a ``save_checkpoint`` that keeps the callback's own state in
    the file (as Lightning's checkpoint does), which a resumed run hands back to ``load_state_dict``."""

    fast_dev_run = False
    sanity_checking = False
    is_global_zero = True
    loggers: list = []
    callback_metrics: dict = {}
    check_val_every_n_epoch = 1
    num_val_batches = [1]
    val_check_interval = 1.0

    class strategy:  # noqa: N801  (Lightning's attribute names)
        @staticmethod
        def broadcast(obj: Any, src: int = 0) -> Any:
            return obj

        @staticmethod
        def barrier(*args: Any) -> None:
            pass

        @staticmethod
        def reduce_boolean_decision(decision: bool, all: bool = True) -> bool:  # noqa: A002
            return decision

    def __init__(self, checkpoint: Any) -> None:
        from pytorch_lightning.trainer.states import TrainerFn, TrainerState

        self.state = TrainerState(fn=TrainerFn.FITTING)
        self.checkpoint = checkpoint
        self.current_epoch = 0
        self.global_step = 0

    def save_checkpoint(self, filepath: str, weights_only: bool = False, storage_options: Any = None) -> None:
        state = {"epoch": self.current_epoch, "global_step": self.global_step,
                 "ModelCheckpoint": self.checkpoint.state_dict()}
        Path(filepath).write_text(json.dumps(state, default=str) + "\n", encoding="utf-8")


# ------------------------------------------------------------------ a training, as TAO's calls make it
class Interrupted(KeyboardInterrupt):
    """A Ctrl-C (or the SystemError TAO treats the same) in the middle of an epoch."""


class Crashed(RuntimeError):
    """Any other exception in the middle of an epoch."""


@dataclass
class Scenario:
    """What happens in one run of :func:`train`."""

    #: val_mAP of each epoch (None: NaN, a diverged validation); DINO writes it as text (str of the float).
    #: The best epoch is 4 (0-based); validation diverges from epoch 5 on.
    val_map: Sequence[float | None] = (0.1, 0.2, 0.3, 0.45, 0.5, None, None, None)
    #: val_loss of each epoch (None: NaN)
    val_loss: Sequence[float | None] = (0.9, 0.8, 0.7, 0.55, 0.5, None, None, None)
    #: train_loss of each epoch (None: NaN, a diverged loss); empty: 10 / (epoch + 2)
    train_loss: Sequence[float | None] = ()
    #: an exception raised during this epoch (before its validation): (epoch, Interrupted | Crashed)
    stop_at: tuple[int, type[BaseException]] | None = None
    #: the exception's text; ``{epoch}`` is the epoch it stopped in
    stop_message: str = "stopped in epoch {epoch}"
    #: resume after this epoch (the run starts at the next one, appending to status.json as TAO does)
    resume_after: int | None = None
    #: the time_per_epoch TAO's callback measured, in seconds
    epoch_seconds: float = 100
    #: Lightning's ``every_n_train_steps`` (a checkpoint every so many batches); None: one per epoch
    every_n_train_steps: int | None = None
    #: Lightning's ``check_val_every_n_epoch`` (TAO's validation_interval): a validation every so many epochs
    val_every: int = 1


@dataclass
class Run:
    """What one run left: its exit code as the TAO entrypoint's process would have it, and its files."""

    exit_code: int
    folder: Path
    checkpoints: list[str] = field(default_factory=list)
    #: how many status lines were written when each checkpoint was saved
    saved_at: list[int] = field(default_factory=list)
    #: the status file's lines before this run (an earlier run's, appended to)
    first_line: int = 0
    #: (what, status lines written then) as the run went: "begun" (after monitor_status's first line),
    #: "resumed", "loop", "epoch N" (before epoch N's batches), "saved NAME" (Lightning saved a checkpoint),
    #: "epochs done", "stopped" (before the exception reached monitor_status); an action's "done"
    marks: list[tuple[str, int]] = field(default_factory=list)

    @property
    def status_text(self) -> str:
        return (self.folder / "status.json").read_text(encoding="utf-8")


def _number(value: float | None) -> float:
    return math.nan if value is None else value


def _written(folder: Path) -> int:
    status = folder / "status.json"
    return len(status.read_text(encoding="utf-8").splitlines()) if status.exists() else 0


def _entrypoint(run: Run, name: str, mode: str, body: Callable[[Any], None]) -> Run:
    """``body(status_logger)`` as TAO runs an action: wrapped in nvidia-tao-core's ``monitor_status`` (its
    first and last status lines), under an entrypoint that swallows an interrupt or SystemError after the
    FAILURE line, as TAO PyTorch's does (exit code 0); any other exception is exit code 1."""
    tao_logging = tao()

    @monitor_status()(name=name, mode=mode, results_dir=str(run.folder))
    def action_body() -> None:
        run.marks.append(("begun", _written(run.folder)))
        body(tao_logging.get_status_logger())

    try:
        action_body()
        run.exit_code = 0
    except (KeyboardInterrupt, SystemError):
        run.exit_code = 0  # TAO PyTorch's entrypoint: "Execution status: PASS"
    except Exception:
        run.exit_code = 1
    return run


def train(results: Path, scenario: Scenario, *, network: str = "dino", name: str | None = None) -> Run:
    """One ``<network> train`` run into ``results/train`` (TAO's results folder of the action); ``name`` is what
    monitor_status calls the network (default: the network in capitals)."""
    tao_logging = tao()
    folder = Path(results) / "train"
    folder.mkdir(parents=True, exist_ok=True)
    checkpoint = tao_checkpoint(folder, network, scenario.every_n_train_steps)
    trainer = _Trainer(checkpoint)
    trainer.check_val_every_n_epoch = scenario.val_every
    run = Run(1, folder, first_line=_written(folder))
    status = tao_logging.Status

    def body(logger: Any) -> None:
        def mark(what: str) -> None:
            run.marks.append((what, _written(folder)))

        def hook(hook_name: str, *args: Any) -> None:
            """A ModelCheckpoint hook as Lightning calls it; a checkpoint it saves is noted with where it came."""
            before = checkpoint._last_checkpoint_saved
            getattr(checkpoint, hook_name)(trainer, None, *args)
            if checkpoint._last_checkpoint_saved != before:
                run.checkpoints.append(Path(checkpoint._last_checkpoint_saved).name)
                run.saved_at.append(_written(folder))
                mark(f"saved {run.checkpoints[-1]}")

        first = 0
        if scenario.resume_after is not None:
            first = scenario.resume_after + 1
            latest = folder / f"{checkpoint.CHECKPOINT_NAME_LAST}{TAO_EXTENSION}"
            saved = json.loads(latest.read_text(encoding="utf-8"))
            checkpoint.load_state_dict(saved["ModelCheckpoint"])  # Lightning restores the callback's state
            trainer.current_epoch, trainer.global_step = saved["epoch"] + 1, saved["global_step"]
            logger.write(message=f"Resuming training from checkpoint: {os.path.realpath(latest)}")
            mark("resumed")
        with warnings.catch_warnings():  # "exists and is not empty": TAO's status.json is there first, as in TAO
            warnings.simplefilter("ignore", UserWarning)
            checkpoint.setup(trainer, None, "fit")
        checkpoint.on_train_start(trainer, None)
        logger.write(status_level=status.STARTED, message="Starting Training Loop.")  # TAO's callback
        mark("loop")
        epochs = len(scenario.val_map)
        last = epochs - 1
        for epoch in range(first, epochs):
            mark(f"epoch {epoch}")
            trainer.current_epoch = epoch
            if scenario.stop_at and scenario.stop_at[0] == epoch:
                mark("stopped")
                raise scenario.stop_at[1](scenario.stop_message.format(epoch=epoch))
            for batch in range(STEPS_PER_EPOCH):  # the epoch's batches
                trainer.global_step = epoch * STEPS_PER_EPOCH + batch + 1
                hook("on_train_batch_end", None, None, batch)
            step = trainer.global_step
            if (epoch + 1) % scenario.val_every == 0:
                # validation at the epoch's end (DINO's on_validation_epoch_end): val_mAP as text
                logger.kpi = {"val_mAP": str(_number(scenario.val_map[epoch])),
                              "val_loss": _number(scenario.val_loss[epoch])}
                logger.write(message="Eval metrics generated.")
                hook("on_validation_end")
            # on_train_epoch_end: the callbacks (TAO's status callback: the epoch line), the module (DINO's
            # training loss), then the monitoring callbacks (ModelCheckpoint)
            per_epoch = timedelta(seconds=scenario.epoch_seconds)
            logger.write(data={"epoch": epoch, "step": step, "max_epoch": last,
                               "max_step": epochs * STEPS_PER_EPOCH, "time_per_epoch": str(per_epoch),
                               "time_per_step": str(per_epoch / STEPS_PER_EPOCH),
                               "eta": str(per_epoch * (last - epoch))}, message="Training loop in progress")
            loss = scenario.train_loss[epoch] if scenario.train_loss else round(10.0 / (epoch + 2), 6)
            logger.kpi = {"train_loss": _number(loss)}
            logger.write(message="Train metrics generated.")
            hook("on_train_epoch_end")
        mark("epochs done")
        logger.write(message="Training loop complete.")  # on_train_end

    return _entrypoint(run, name or network.upper(), "train", body)


def action(results: Path, name: str, kpis: dict[str, Any] | None = None, *, network: str = "dino",
           title: str | None = None, stop: type[BaseException] | None = None,
           stop_message: str = "stopped") -> Run:
    """One ``<network> <name>`` run (evaluate, export, inference) into ``results/<name>``: monitor_status's
    lines around the action, the KPIs an evaluate writes on a line of their own; ``stop``: the action raises
    that (Interrupted | Crashed) first."""
    folder = Path(results) / name
    run = Run(1, folder, first_line=_written(folder))

    def body(logger: Any) -> None:
        if stop is not None:
            run.marks.append(("stopped", _written(folder)))
            raise stop(stop_message)
        if kpis:
            logger.kpi = dict(kpis)
            logger.write(message="Evaluation metrics generated.")
        run.marks.append(("done", _written(folder)))

    return _entrypoint(run, title or network.upper(), name, body)


def lines(run: Run) -> list[dict]:
    """The status file's lines as JSON objects."""
    return [json.loads(line) for line in run.status_text.splitlines() if line.strip()]


def write_replay(run: Run, dest: Path) -> Path:
    """The run's status lines and checkpoint names as a replay file for the in-cluster stand-in (one JSON line
    per status line; ``#checkpoint NAME`` where Lightning saved it (its hooks decide: at the epoch's end, after
    the module's own hook); ``#exit N`` last: the
    code TAO's process exits with), for ``testclusters/fake_tao_train.sh --replay``."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    out: list[str] = []
    saved = dict(zip(run.saved_at, run.checkpoints))
    for number, line in enumerate(run.status_text.splitlines(), 1):
        if number <= run.first_line:
            continue
        out.append(line)
        if number in saved:
            out.append(f"#checkpoint {saved[number]}")
    out.append(f"#exit {run.exit_code}")
    dest.write_text("\n".join(out) + "\n", encoding="utf-8")
    return dest


__all__: Sequence[str] = ("Scenario", "Run", "Interrupted", "Crashed", "train", "action", "lines", "tao",
                          "monitor_status", "clock", "model_checkpoint", "tao_checkpoint", "write_replay")
