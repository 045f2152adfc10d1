"""Lets Debian 12's PyTorch 1.13 import its sharded-tensor module on Python 3.11 (test infrastructure).

PyTorch 1.13 predates Python 3.11: its torch/distributed/_shard/sharded_tensor/metadata.py gives a
dataclass field the mutable default ``field(default=TensorProperties())``, which Python 3.11's dataclasses
refuse (ValueError: mutable default ... use default_factory). PyTorch Lightning imports that module (through
torch.distributed.fsdp) even for plain DDP, so without this Lightning cannot be imported at all on the local
clusters' Debian Python. The module is loaded from its own file with upstream PyTorch 2.0's spelling of that
one field (``default_factory=TensorProperties``); nothing else changes, and a PyTorch without the line is
loaded as it is.
"""
from __future__ import annotations

import importlib.abc
import importlib.util
import sys

MODULE = "torch.distributed._shard.sharded_tensor.metadata"
OLD = "field(default=TensorProperties())"
NEW = "field(default_factory=TensorProperties)"


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path, target=None):
        if fullname != MODULE:
            return None
        sys.meta_path.remove(self)  # the real spec, found by the other finders
        try:
            real = importlib.util.find_spec(fullname)
        finally:
            sys.meta_path.insert(0, self)
        if real is None or not real.origin or not real.origin.endswith(".py"):
            return None
        self.origin = real.origin
        return importlib.util.spec_from_file_location(fullname, real.origin, loader=self)

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        with open(self.origin, encoding="utf-8") as fh:
            source = fh.read().replace(OLD, NEW)
        exec(compile(source, self.origin, "exec"), module.__dict__)


def install() -> None:
    if sys.version_info >= (3, 11) and not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
