"""Training many configs at once: :func:`run_all` trains (or loads) a list of configs in a pool of spawned worker
processes (:func:`worker_pool`), each run stored by :meth:`ResultStore.run <sec_lib.runs.store.ResultStore.run>`, so a
run's key never depends on where it trained. :func:`prepare_data` renders the dataset caches once, before the
workers start. The launchers (:mod:`sec_lib.runs.launch`) and the runner use these.
"""
from __future__ import annotations

import multiprocessing as mp
import os
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Callable

from ..data import get_dataset
from ..lifetime import exit_with_parent
from ..params import Number
from .config import RunResult, TrainConfig
from .many import process_groups, run_together
from .profiles import Profile
from .store import ResultStore, run_key


def prepare_data(p: Profile) -> None:
    """Render / load the dataset caches once, before worker processes start."""
    size = p.base.get("image_size", 32)
    for split in ("train", "test"):
        get_dataset("glyphs", split, image_size=size)


def worker_pool(jobs: int) -> ProcessPoolExecutor:
    """``jobs`` spawned worker processes for :func:`run_all`, which end with the process that made them.
    Starting one costs each worker its imports (torch, the library: seconds), so a sweep in several
    waves passes the same pool to every wave (:class:`sec_lib.runs.launch.PoolLauncher`)."""
    return ProcessPoolExecutor(max_workers=jobs, mp_context=mp.get_context("spawn"),
                               initializer=exit_with_parent, initargs=(os.getpid(),))


def run_all(configs: list[TrainConfig], root: str | Path | None = None, jobs: int = 1,
            progress: Callable[[str, int, int], None] | None = None,
            pool: ProcessPoolExecutor | None = None, together: int = 1) -> list[RunResult]:
    """Run (or load) every config and return their results in order.

    Completed runs are reused (each stored record is checked in full; a corrupt one is quarantined
    and trained again); ``jobs`` > 1 trains in spawned worker processes, in ``pool``
    (:func:`worker_pool`, left running for the caller's next call) when given, else in a pool of
    this call's own. ``progress(event, n, total)`` is called with 'reused' once, 'quarantined' once
    when corrupt records were found, and 'trained' per run. Every config is validated before any
    training starts. ``together`` > 1: groups of that many runs per process, their steps interleaved on one
    device (:func:`~sec_lib.runs.many.run_together`; a GPU's option: on a CPU the runs only take turns).
    """
    Number(1, 1024, True).check("together", together)
    for cfg in configs:
        cfg.validate()
    store = ResultStore(root)
    unique = {}
    for c in configs:
        unique.setdefault(run_key(c), c)
    results = {k: store.get(c) for k, c in unique.items()}
    todo = {k: c for k, c in unique.items() if results[k] is None}
    if progress:
        progress("reused", len(unique) - len(todo), len(unique))
        if store.quarantined:
            progress("quarantined", len(store.quarantined), len(unique))
    if jobs > 1 and (len(todo) > 1 or (pool is not None and todo)):
        own = pool is None
        pool = worker_pool(jobs) if own else pool
        try:
            groups = process_groups(list(todo.items()), jobs, together)
            futures = {pool.submit(_worker, [c for _, c in g], str(store.root)): [k for k, _ in g] for g in groups}
            for f in as_completed(futures):
                f.result()
                for k in futures[f]:
                    results[k] = store.get(k)
                    if progress and results[k] is not None:
                        progress("trained", 1, len(unique))
        finally:
            if own:
                pool.shutdown()
    left = [k for k in todo if results[k] is None]
    for group in [left[i:i + together] for i in range(0, len(left), together)] if together > 1 else []:
        for k, r in zip(group, run_together(store, [todo[k] for k in group]) if len(group) > 1 else []):
            results[k] = r                # (a single run left over trains alone, below)
            progress and progress("trained", 1, len(unique))
    for k, c in todo.items():             # in-process, and any record that went bad after a worker wrote it
        if results[k] is None:
            results[k] = store.run(c)
            if progress:
                progress("trained", 1, len(unique))
    return [results[run_key(c)] for c in configs]


def _worker(cfgs: list[TrainConfig], root: str) -> list[str]:
    if len(cfgs) == 1:
        ResultStore(root).run(cfgs[0])    # train() pins the run's own thread count
    else:
        run_together(ResultStore(root), cfgs)
    return [run_key(c) for c in cfgs]
