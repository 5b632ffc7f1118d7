"""Several runs in one process on one device: :func:`train_many`.

A small glyph network leaves most of a GPU idle when it trains alone, and separate processes take turns on the GPU
rather than sharing it. Here the runs share one process: each run's loop (:func:`sec_lib.runs.train.training_steps`, a
generator) advances one step at a time, in turn, each on a CUDA stream of its own, so one run's kernels fill the gaps
of another's. Each run keeps its own random number generators (saved and restored around its steps), so a run
computes exactly what it computes alone: the same operations in the same order on the same inputs. On a CPU this is
tested to the bit (``tests/test_device_path.py``); on a GPU the bench (``bench/gpu_step.py``) compares the two, and
until it has, a GPU run trained together is a kind of its own under the reproducibility contract
(:func:`sec_lib.runs.tier.gpu_kind`).

The store records how a run was trained (``runs_together`` in its provenance); its key does not change.
"""
from __future__ import annotations

import contextlib
from typing import Callable

import torch

from .. import kernels
from ..params import ParameterError
from ..threads import torch_threads
from .provenance import provenance
from .config import RunResult, TrainConfig
from .train import training_steps

__all__ = ["train_many", "Together", "run_together", "process_groups"]


def process_groups(items: list, jobs: int, together: int) -> list[list]:
    """``items`` split into the groups that worker processes train together: at most ``together`` each, and no fewer
    than ``jobs`` groups while there are that many items (4 runs on 4 processes train alone, not all in one)."""
    size = max(1, min(together, -(-len(items) // max(1, jobs))))
    return [items[i:i + size] for i in range(0, len(items), size)]


def train_many(configs: list[TrainConfig], on_done: Callable[[int, RunResult], None] | None = None) -> list[RunResult]:
    """Train ``configs`` together, their steps interleaved, and return their results in order.

    ``on_done(i, result)`` is called as soon as run ``i`` ends (a store saves it there, so a killed process loses
    only the unfinished runs). Every config is validated before any work; they must share a device and a thread
    count."""
    runs = Together(configs, on_done)
    with torch_threads(runs.num_threads):
        while runs.step():
            pass
    return runs.results


class Together:
    """Runs advanced one step each, in turn (:func:`train_many`; ``bench/gpu_step.py`` times :meth:`step`). The
    caller sets the thread count (``torch_threads(together.num_threads)``)."""

    def __init__(self, configs: list[TrainConfig], on_done: Callable[[int, RunResult], None] | None = None):
        for cfg in configs:
            cfg.validate()
        if len({c.device for c in configs}) > 1 or len({c.num_threads for c in configs}) > 1:
            raise ParameterError("runs trained together share one device and one thread count; got devices "
                                 f"{sorted({c.device for c in configs})} and num_threads "
                                 f"{sorted({c.num_threads for c in configs})}: group the configs by both")
        kernels.check()
        self.configs, self.on_done = list(configs), on_done
        self.num_threads = configs[0].num_threads if configs else 1
        self.device = torch.device(configs[0].device) if configs else torch.device("cpu")
        self.cuda = self.device.type == "cuda"
        self.results: list = [None] * len(configs)
        self.live = [(i, training_steps(cfg), _stream(self.device), None) for i, cfg in enumerate(configs)]

    def step(self) -> bool:
        """One step of every live run (a run's first step also builds it); False once every run has ended."""
        caller = _rng_state(self.cuda, self.device)
        still = []
        try:
            for i, steps, stream, rng in self.live:
                if rng is not None:
                    _set_rng_state(rng, self.cuda, self.device)
                try:
                    with torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext():
                        next(steps)
                except StopIteration as done:
                    self.results[i] = done.value
                    if self.on_done is not None:
                        self.on_done(i, done.value)
                    continue
                still.append((i, steps, stream, _rng_state(self.cuda, self.device)))
        finally:
            _set_rng_state(caller, self.cuda, self.device)
        self.live = still
        return bool(still)

    def close(self) -> None:
        """Stop every live run where it is (a bench's timed steps done)."""
        for _, steps, _, _ in self.live:
            steps.close()
        self.live = []


def run_together(store, configs: list[TrainConfig], retry_failed: bool = False) -> list[RunResult]:
    """``store.run`` for several configs trained together in this process (:func:`train_many`): each is saved as
    soon as it ends, with ``runs_together`` in its provenance. Returns every config's result, stored or new."""
    stored = [store.get(c) for c in configs]
    todo = [i for i, r in enumerate(stored) if r is None or (r.status != "done" and retry_failed)]

    def save(j, result):
        i = todo[j]
        store.save(result, replace=stored[i] is not None,
                   provenance_={**provenance(result.config), "runs_together": len(todo)})
        stored[i] = result
    train_many([configs[i] for i in todo], on_done=save)
    return stored


def _stream(device: torch.device):
    return torch.cuda.Stream(device=device) if device.type == "cuda" else None


def _rng_state(cuda: bool, device: torch.device):
    return torch.get_rng_state(), (torch.cuda.get_rng_state(device) if cuda else None)


def _set_rng_state(state, cuda: bool, device: torch.device):
    torch.set_rng_state(state[0])
    if cuda:
        torch.cuda.set_rng_state(state[1], device)
