"""Training under the kernel pin when this process cannot hold it: one run in a child process started under the pin.

A process that imported torch, numpy or pandas before ``sec_lib`` runs their kernels as they found the CPU (ATen's
capability, numpy's SIMD dispatch), not as the pin says (:mod:`sec_lib.kernels`). In a notebook that is the natural
order. :func:`sec_lib.runs.train.train` then does not refuse: it calls :func:`train_in_child`, which starts a fresh
interpreter whose environment carries the pin before anything is imported, trains the run there, and returns its
:class:`~sec_lib.runs.train.RunResult`: the same bits a pinned process gives (the child *is* a pinned process), so
the run may share its store key with every other run of its config. Nothing ever trains unpinned.
"""
from __future__ import annotations

import os
import pickle
import subprocess
import sys
import tempfile
from pathlib import Path

from .. import kernels
from ..tempfiles import atomic_write_bytes

#: The line printed (to stderr) when a run goes to a child process.
NOTICE = ("sec_lib: this process imported torch or numpy before sec_lib, so it cannot hold the kernel pin {pin!r} "
          "({why}); training in a child process started under the pin (same bits as a pinned process)")
#: What the child prints for each step, for the caller's ``progress`` callback.
_PROGRESS = "sec-progress"


def holds_pin() -> tuple[bool, str]:
    """(whether this process's kernels are the pinned ones, the reason when they are not)."""
    try:
        kernels.check()
    except kernels.KernelPinError as e:
        return False, str(e).split(": ", 1)[-1].split(". ", 1)[0]
    return True, ""


def train_in_child(cfg, progress=None, why: str = ""):
    """Train ``cfg`` in a fresh Python process under this process's pin and return its RunResult. ``progress`` (as
    :func:`sec_lib.runs.train.train` takes it) is called as the child reports its steps. RuntimeError with the
    child's own error when it fails."""
    pin = kernels.pin_name()
    print(NOTICE.format(pin=pin, why=why or "its kernels are not the pinned ones"), file=sys.stderr, flush=True)
    with tempfile.TemporaryDirectory(prefix="sec-pinned-") as tmp:
        cfg_path, out_path = os.path.join(tmp, "config.pkl"), os.path.join(tmp, "result.pkl")
        with open(cfg_path, "wb") as fh:
            pickle.dump(cfg, fh)
        cmd = [sys.executable, "-c", "import sys; from sec_lib.runs.pinned import child_main; "
               "from sec_lib.runs.train import train; sys.exit(child_main(train, sys.argv[1], sys.argv[2]))",
               cfg_path, out_path]
        proc = subprocess.Popen(cmd, env=kernels.child_env(pin), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        for line in proc.stdout:
            parts = line.split()
            if progress is not None and len(parts) == 3 and parts[0] == _PROGRESS:
                progress(int(parts[1]), int(parts[2]))
        err = proc.stderr.read()
        if proc.wait() != 0 or not os.path.exists(out_path):
            raise RuntimeError(f"the pinned child process failed (exit {proc.returncode}):\n{err.strip()}")
        with open(out_path, "rb") as fh:
            return pickle.load(fh)


def child_main(train, cfg_path: str, out_path: str) -> int:
    """The child's side: load the config, train it with ``train`` (:func:`sec_lib.runs.train.train`, passed in by the
    child's command line, so that this module imports nothing above it), write the RunResult atomically."""
    with open(cfg_path, "rb") as fh:
        cfg = pickle.load(fh)
    ok, why = holds_pin()
    if not ok:                              # never recurse: a child that cannot hold the pin says so
        raise kernels.KernelPinError(f"the child process started under the pin cannot hold it either: {why}")

    def report(i, n):
        print(_PROGRESS, i, n, flush=True)
    result = train(cfg, progress=report)
    atomic_write_bytes(Path(out_path), pickle.dumps(result))
    return 0
