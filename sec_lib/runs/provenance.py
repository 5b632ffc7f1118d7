"""Where and how a run was trained: :func:`provenance`, which the store saves with every run (its ``result.json``), the
commit of the code (:func:`git_commit`) and the GPU's side (:func:`gpu_provenance`). The store
(:mod:`sec_lib.runs.store`) and the runs trained together in one process (:mod:`sec_lib.runs.many`) both write it."""
from __future__ import annotations

import datetime
import functools
import os
import platform
import subprocess
from pathlib import Path

import torch

from .. import kernels
from .config import TrainConfig

__all__ = ["provenance", "git_commit", "gpu_provenance", "gpu_driver"]


def provenance(cfg: TrainConfig) -> dict:
    """Where and how a run was trained: the date, commit, device, versions, and the CPU kind with its kernel
    settings (:func:`sec_lib.kernels.provenance`)."""
    dev, gpu = cfg.device, cfg.device.startswith("cuda") and torch.cuda.is_available()
    dev = torch.cuda.get_device_name(torch.device(dev)) if gpu else dev
    return {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "torch": torch.__version__, "python": platform.python_version(), "machine": platform.machine(),
            "device": dev, **(gpu_provenance() if gpu else {}), "commit": git_commit(), **kernels.provenance()}


def git_commit() -> str | None:
    """``$SEC_GIT_COMMIT`` when set (a tree copied to another machine, whose ``.git`` may be absent
    or stale), else the commit of the checkout holding this package (a plain clone or a git
    worktree), else None."""
    if os.environ.get("SEC_GIT_COMMIT"):
        return os.environ["SEC_GIT_COMMIT"]
    head = Path(__file__).resolve().parents[2] / ".git"
    try:
        if head.is_file():                      # a worktree: ".git" names the real git folder
            head = Path(head.read_text().split("gitdir:", 1)[1].strip())
        ref = (head / "HEAD").read_text().strip()
        if not ref.startswith("ref:"):
            return ref
        name = ref.split(" ", 1)[1]
        common = Path((head / "commondir").read_text().strip()) if (head / "commondir").exists() else None
        for base in (head, (head / common) if common else None):
            if base is not None and (base / name).exists():
                return (base / name).read_text().strip()
        for base in (head, (head / common) if common else None):
            packed = base / "packed-refs" if base is not None else None
            if packed is not None and packed.exists():
                for line in packed.read_text().splitlines():
                    if line.endswith(name):
                        return line.split()[0]
        return None
    except (OSError, IndexError):
        return None


def gpu_provenance() -> dict:
    """The GPU side of a run's provenance: CUDA and cuDNN as torch was built with them, and the driver."""
    return {"cuda": torch.version.cuda, "driver": gpu_driver(), "cudnn": torch.backends.cudnn.version()}


@functools.lru_cache(maxsize=1)
def gpu_driver() -> str | None:
    """The NVIDIA driver's version as ``nvidia-smi`` reports it (None where it cannot be read)."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None
    except (OSError, subprocess.SubprocessError):
        return None
