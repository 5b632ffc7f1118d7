"""Launchers: who trains a sweep's missing runs, and where.

A launcher takes a list of :class:`~sec_lib.runs.train.TrainConfig` and a result-store folder and
trains every config the store does not hold yet; every run is stored by
``ResultStore(root).run(cfg)``, wherever it trains, so a run's key never depends on the launcher.

* :class:`PoolLauncher`: a local process pool (``pool.run_all``), the default;
* :class:`SubmititLauncher`: jobs submitted through submitit, to Slurm (one job array per wave,
  ``runs_per_job`` runs packed into each job) or, with ``cluster="local"``, to processes on this
  machine (the same path, used by the tests).

The runner trains in three dependent waves (:func:`train_stages`): the learning-rate pilot, the
η / L2-weight selection (whose configs depend on the pilot's results), then the chapters' runs
(which depend on both). Each wave waits for the previous one.

GPUs are never named in a config: a run says ``device="cuda"``, and the scheduler gives its job
GPUs through ``CUDA_VISIBLE_DEVICES`` (submitit's ``gpus_per_node``), so the run's store key is
the same on every node and every GPU. A config naming a GPU (``cuda:1``) is refused before
anything is submitted (:func:`check_device`).
"""
from __future__ import annotations

import dataclasses
import multiprocessing as mp
import os
import sys
import time
import traceback
from abc import ABC, abstractmethod
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Callable, Iterable

from ..params import Choice, Number, ParameterError
from .config import TrainConfig
from . import pool
from .store import ResultStore, default_root, run_key


LAUNCHERS = ("pool", "submitit")
CLUSTERS = (None, "local", "slurm")
DEVICES = ("cpu", "cuda", "mps")

Progress = Callable[[str, int, int], None]     # (event 'reused' | 'trained', n, total distinct runs)


class LaunchError(RuntimeError):
    """One or more jobs of a wave failed; the message names each job, its runs and its error."""


# -- checks shared by every launcher ----------------------------------------------------------------

def check_device(cfg: TrainConfig) -> TrainConfig:
    """Refuse a config that names one GPU (``cuda:1``): its key would depend on which GPU ran it,
    and the notebooks (which ask for ``device="cuda"``) would never find it. GPUs are given to a
    job through ``CUDA_VISIBLE_DEVICES``; inside the job, ``cuda`` is the GPU it was given."""
    if not isinstance(cfg.device, str) or cfg.device not in DEVICES:
        raise ParameterError(
            f"parameter 'device' = {cfg.device!r} is not valid for a sweep; valid values: "
            + ", ".join(repr(d) for d in DEVICES)
            + ". A sweep never names a GPU: the launcher assigns GPUs through CUDA_VISIBLE_DEVICES, "
              "so every run says device='cuda' and its store key does not depend on the GPU that ran it")
    return cfg


def check_config(cfg: TrainConfig, here: bool = True) -> TrainConfig:
    """Validate ``cfg`` before anything trains or is submitted. ``here=False``: the runs train on
    other machines, so CUDA need not be available on this one (every other check still applies)."""
    check_device(cfg)
    if not here and cfg.device == "cuda":
        dataclasses.replace(cfg, device="cpu").validate()
    else:
        cfg.validate()
    return cfg


def pending(configs: Iterable[TrainConfig], store: ResultStore) -> tuple[dict, int]:
    """The distinct configs (by key, first occurrence kept) that the store does not hold, and the
    number of distinct configs."""
    unique: dict[str, TrainConfig] = {}
    for c in configs:
        unique.setdefault(run_key(c), c)
    todo = {k: c for k, c in unique.items() if not store.has(c)}
    return todo, len(unique)


def pack(items: list, runs_per_job: int) -> list[list]:
    """Consecutive groups of at most ``runs_per_job`` items: ceil(n / runs_per_job) jobs."""
    return [items[i:i + runs_per_job] for i in range(0, len(items), runs_per_job)]


# -- the launchers ----------------------------------------------------------------------------------

class Launcher(ABC):
    """Trains every config missing from the store at ``root`` and reports progress."""
    name: str = ""
    #: submit the chapters' runs as one wave (True) or one sweep per chapter (False, the local pool)
    one_wave_per_stage: bool = False

    @abstractmethod
    def run(self, configs: list[TrainConfig], root: str | Path | None = None,
            progress: Progress | None = None) -> None:
        """Train the configs missing from the store; return when all are stored, raise
        :class:`LaunchError` (after every job has ended) when some job failed."""

    def check(self, configs) -> None:
        """Validate the configs for this launcher before anything trains or is submitted."""
        for c in configs:
            check_config(c)

    def close(self) -> None:
        """Release what the launcher holds between waves (the local pool's worker processes)."""


class PoolLauncher(Launcher):
    """A local process pool of ``jobs`` spawned workers (``pool.run_all``); ``jobs=1`` trains in
    this process."""
    name = "pool"

    def __init__(self, jobs: int = 1, together: int = 1):
        self.jobs = Number(1, 1024, True).check("jobs", jobs)
        self.together = Number(1, 1024, True).check("together", together)
        self._pool = None

    def run(self, configs, root=None, progress=None) -> None:
        for c in configs:
            check_device(c)
        if self.jobs > 1 and self._pool is None:
            self._pool = pool.worker_pool(self.jobs)     # one set of workers for every wave until close()
        try:
            pool.run_all(list(configs), root=root, jobs=self.jobs, progress=progress, pool=self._pool,
                         together=self.together)
        except BrokenProcessPool:
            self.close()                            # a worker died: the next wave starts fresh workers
            raise

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None

    def __repr__(self):
        return f"PoolLauncher(jobs={self.jobs}" + (f", together={self.together})" if self.together > 1 else ")")


def submitit_package():
    """The submitit package; ParameterError where it is not installed."""
    try:
        import submitit  # local: an optional dependency (the [cluster] extra), needed only by this launcher
    except ImportError as e:
        raise ParameterError("launcher 'submitit' needs the submitit package: "
                             "pip install 'sec_lib[cluster]' (or pip install submitit)") from e
    return submitit


class SubmititLauncher(Launcher):
    """Jobs through submitit: ``runs_per_job`` runs packed into each job (trained in sequence, or
    spread over the job's GPUs when it has more than one), all jobs of a wave in one job array
    with at most ``array_parallelism`` running at once.

    ``cluster``: None lets submitit choose (Slurm where ``srun`` exists), 'local' runs the jobs as
    processes of this machine (same path, no scheduler), 'slurm' insists on Slurm.
    ``folder``: where submitit keeps each job's pickles and logs (``<folder>/<job id>_*``).
    ``executor_params``: more submitit parameters, e.g. ``{"slurm_account": "abc", "mem_gb": 32}``.
    """
    name = "submitit"
    one_wave_per_stage = True

    def __init__(self, folder: str | Path | None = None, partition: str | None = None, gpus_per_job: int = 0,
                 timeout_min: int = 240, array_parallelism: int = 64, runs_per_job: int = 8,
                 cluster: str | None = None, poll_s: float = 10.0, executor_params: dict | None = None):
        Choice(CLUSTERS).check("cluster", cluster)
        if partition is not None and (not isinstance(partition, str) or not partition.strip()):
            raise ParameterError(f"parameter 'partition' = {partition!r} is not valid; expected a Slurm partition name")
        self.gpus_per_job = Number(0, 64, True).check("gpus_per_job", gpus_per_job)
        self.timeout_min = Number(1, 60 * 24 * 30, True).check("timeout_min", timeout_min)
        self.array_parallelism = Number(1, 100000, True).check("array_parallelism", array_parallelism)
        self.runs_per_job = Number(1, 100000, True).check("runs_per_job", runs_per_job)
        self.poll_s = Number(0.01, 3600).check("poll_s", poll_s)
        self.partition, self.cluster = partition, cluster
        self.folder = Path(folder) if folder is not None else None
        self.executor_params = dict(executor_params or {})
        self.jobs: list = []              # the jobs of the last wave (tests and error reports read them)
        submitit_package()

    def __repr__(self):
        return (f"SubmititLauncher(cluster={self.cluster!r}, partition={self.partition!r}, gpus_per_job="
                f"{self.gpus_per_job}, runs_per_job={self.runs_per_job}, array_parallelism={self.array_parallelism})")

    def executor(self, root: Path, cluster: str):
        submitit = submitit_package()
        folder = self.folder or (root.parent / "submitit")
        ex_ = submitit.AutoExecutor(folder=str(Path(folder).resolve() / "%j"), cluster=cluster)
        params = dict(timeout_min=self.timeout_min, gpus_per_node=self.gpus_per_job, tasks_per_node=1, nodes=1,
                      cpus_per_task=max(1, self.gpus_per_job), name="sec-book",
                      slurm_array_parallelism=self.array_parallelism)
        if self.partition:
            params["slurm_partition"] = self.partition
        params.update(self.executor_params)
        ex_.update_parameters(**params)
        return ex_

    def resolved_cluster(self) -> str:
        """The cluster the jobs go to: the one given, else submitit's choice (Slurm where it exists)."""
        return self.cluster or submitit_package().AutoExecutor.which()

    def check(self, configs) -> str:
        """Validate the configs for this launcher (nothing is submitted); return the cluster."""
        cluster = self.resolved_cluster()
        for c in configs:
            check_config(c, here=(cluster == "local"))
            if c.device == "cuda" and self.gpus_per_job == 0:
                raise ParameterError("runs with device='cuda' need GPUs, but gpus_per_job = 0; "
                                     "pass --gpus-per-job 1 (or more)")
        return cluster

    def run(self, configs, root=None, progress=None) -> None:
        configs = list(configs)
        cluster = self.check(configs)
        store = ResultStore(Path(root if root is not None else default_root()).resolve())
        todo, total = pending(configs, store)
        if progress:
            progress("reused", total - len(todo), total)
        self.jobs = []
        if not todo:
            return
        batches = pack(list(todo.values()), self.runs_per_job)
        executor = self.executor(store.root, cluster)
        if cluster == "local":       # no scheduler: keep at most K jobs alive
            self.jobs = self._rolling(executor, batches, store, todo, total, progress)
        else:                                             # Slurm: one job array, throttled by Slurm
            self.jobs = executor.map_array(train_batch, batches, [str(store.root)] * len(batches))
            self._wait(self.jobs, store, todo, total, progress)
        self._raise_failures(self.jobs, batches)

    # -- waiting ----------------------------------------------------------------------------------
    def _report(self, store, todo, total, progress) -> None:
        """Report the runs that reached the store since the last call."""
        landed = [k for k, c in todo.items() if store.has(c)]
        for k in landed:
            del todo[k]
        if progress and landed:
            progress("trained", len(landed), total)

    def _wait(self, jobs, store, todo, total, progress) -> None:
        try:
            while not all(j.done() for j in jobs):
                self._report(store, todo, total, progress)
                time.sleep(self.poll_s)
        except KeyboardInterrupt:
            for j in jobs:
                if not j.done():
                    j.cancel(check=False)
            print(f"interrupted: cancelled the wave's unfinished jobs; the runs already stored stay in {store.root}, "
                  "and the same command resumes from them", file=sys.stderr)
            raise
        self._report(store, todo, total, progress)

    def _rolling(self, executor, batches, store, todo, total, progress) -> list:
        jobs, queue, alive = [], list(batches), []
        try:
            while queue or alive:
                while queue and len(alive) < self.array_parallelism:
                    job = executor.submit(train_batch, queue.pop(0), str(store.root))
                    jobs.append(job)
                    alive.append(job)
                alive = [j for j in alive if not j.done()]
                self._report(store, todo, total, progress)
                if alive:
                    time.sleep(self.poll_s)
        except KeyboardInterrupt:
            for j in alive:
                j.cancel(check=False)
            raise
        self._report(store, todo, total, progress)
        return jobs

    @staticmethod
    def _raise_failures(jobs, batches) -> None:
        failed = []
        for job, batch in zip(jobs, batches):
            err = job.exception()
            if err is None:
                continue
            msg = str(err).strip().splitlines()
            tail = (job.stderr() or "").strip().splitlines()[-15:]
            failed.append(f"job {job.job_id} ({len(batch)} runs, e.g. {run_key(batch[0])}): "
                          + (msg[-1] if msg else type(err).__name__)
                          + ("\n    stderr tail:\n      " + "\n      ".join(tail) if tail else "")
                          + f"\n    logs: {job.paths.stderr}")
        if failed:
            raise LaunchError(f"{len(failed)} of {len(jobs)} job(s) failed; the runs that finished are stored "
                              "and a rerun resumes from them:\n  " + "\n  ".join(failed))


# -- what runs inside a job ---------------------------------------------------------------------------

def visible_gpus() -> list[str]:
    """The GPUs this process may use, as ``CUDA_VISIBLE_DEVICES`` lists them (empty: none set)."""
    return [g.strip() for g in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if g.strip()]


def train_batch(configs: list[TrainConfig], root: str) -> list[str]:
    """One job: train (or reuse) each config with ``ResultStore(root).run``. With several GPUs
    visible, the runs are spread over one worker process per GPU, each seeing only its own GPU
    (so ``cuda`` is that GPU and no key names one). A run that raises does not stop the others;
    the job raises at the end, naming every failed run."""
    for c in configs:
        check_device(c)
    gpus = visible_gpus()
    if len(gpus) > 1 and len(configs) > 1 and any(c.device == "cuda" for c in configs):
        return _train_on_gpus(configs, root, gpus)
    errors, keys = [], []
    for c in configs:
        try:
            ResultStore(root).run(c)
            keys.append(run_key(c))
        except Exception as e:             # keep training the job's other runs
            traceback.print_exc()
            errors.append(f"{run_key(c)}: {type(e).__name__}: {e}")
    if errors:
        raise RuntimeError(f"{len(errors)} of {len(configs)} run(s) failed: " + "; ".join(errors))
    return keys


def _pin_gpu(gpu: str) -> None:
    os.environ["CUDA_VISIBLE_DEVICES"] = gpu          # before this worker touches CUDA


def _train_on_gpus(configs, root, gpus) -> list[str]:

    pools = [ProcessPoolExecutor(max_workers=1, mp_context=mp.get_context("spawn"), initializer=_pin_gpu,
                                 initargs=(g,)) for g in gpus]
    try:
        futures = [pools[i % len(pools)].submit(train_batch, [c], root) for i, c in enumerate(configs)]
        errors, keys = [], []
        for c, f in zip(configs, futures):
            try:
                keys += f.result()
            except Exception as e:
                errors.append(f"{run_key(c)}: {e}")
        if errors:
            raise RuntimeError(f"{len(errors)} of {len(configs)} run(s) failed: " + "; ".join(errors))
        return keys
    finally:
        for p in pools:
            p.shutdown()


# -- choosing a launcher and the dependent waves ------------------------------------------------------

def make_launcher(kind: str = "pool", jobs: int = 1, together: int = 1, **submitit_options) -> Launcher:
    """The launcher named ``kind`` ('pool' or 'submitit'), validated before anything runs; ``together``: runs per
    process of the pool (:func:`sec_lib.runs.pool.run_all`).
    ``submitit_options`` (those not None) go to :class:`SubmititLauncher`; with 'pool' any given
    option is an error (it would be silently ignored)."""
    Choice(LAUNCHERS).check("launcher", kind)
    given = {k: v for k, v in submitit_options.items() if v is not None}
    if kind == "pool":
        if given:
            raise ParameterError(f"option(s) {sorted(given)} apply only to launcher 'submitit', "
                                 f"not to launcher 'pool'; valid launchers: {', '.join(LAUNCHERS)}")
        return PoolLauncher(jobs, together)
    return SubmititLauncher(**given)


def as_launcher(launcher_or_jobs: Launcher | int) -> Launcher:
    """A launcher, or a job count for the local pool (the runner's historical ``jobs``)."""
    if isinstance(launcher_or_jobs, Launcher):
        return launcher_or_jobs
    return PoolLauncher(launcher_or_jobs)
