"""The result store: one folder per run, keyed by a hash of its config, written atomically.

Layout of ``<root>/<key>/``::

    config.json     the TrainConfig
    result.json     status, final metrics, error message, wall time, provenance
    steps.parquet   per-step log            tracked.parquet  tracked samples' norms
    evals.parquet   periodic test metrics   test_norms.parquet, cosines.parquet, grad_scatter.parquet

A run is written into ``<root>/.tmp-<key>-<pid>/`` and renamed into place only when every file
is there, so an interrupted run leaves nothing that looks complete, and a rerun with a completed
key returns the stored result without training.
"""
from __future__ import annotations

import datetime
import hashlib
import json
import multiprocessing as mp
import os
import platform
import shutil
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

import pandas as pd
import torch

from .train import RunResult, TrainConfig, train

TABLES = ("steps", "tracked", "evals", "test_norms", "cosines", "grad_scatter")
NOT_IN_KEY = ("num_threads",)


def default_root() -> Path:
    """``$SEC_RUNS_DIR`` if set, else ``data/runs`` under the repository (or the current directory)."""
    env = os.environ.get("SEC_RUNS_DIR")
    if env:
        return Path(env)
    repo = Path(__file__).resolve().parents[1]
    base = repo if (repo / "pyproject.toml").exists() else Path.cwd()
    return base / "data" / "runs"


def run_key(cfg: TrainConfig) -> str:
    """A stable 16-hex-digit key from the config's fields (``num_threads`` excluded)."""
    d = {k: v for k, v in cfg.to_dict().items() if k not in NOT_IN_KEY}
    blob = json.dumps(d, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


class ResultStore:
    """Reads and writes runs under ``root`` (default: :func:`default_root`)."""

    def __init__(self, root: str | Path | None = None):
        self.root = Path(root) if root is not None else default_root()

    def path(self, cfg_or_key) -> Path:
        key = cfg_or_key if isinstance(cfg_or_key, str) else run_key(cfg_or_key)
        return self.root / key

    def has(self, cfg: TrainConfig) -> bool:
        return (self.path(cfg) / "result.json").exists()

    def get(self, cfg: TrainConfig) -> RunResult | None:
        """The stored result for ``cfg``, or None."""
        p = self.path(cfg)
        if not (p / "result.json").exists():
            return None
        return self.load(p)

    def load(self, path: Path) -> RunResult:
        meta = json.loads((path / "result.json").read_text())
        cfg = TrainConfig.from_dict(json.loads((path / "config.json").read_text()))
        tables = {t: pd.read_parquet(path / f"{t}.parquet") for t in TABLES}
        return RunResult(cfg, meta["status"], meta["metrics"], tables["steps"], tables["tracked"], tables["evals"],
                         tables["test_norms"], tables["cosines"], tables["grad_scatter"],
                         error=meta.get("error"), wall_s=meta.get("wall_s", 0.0), key=path.name)

    def save(self, result: RunResult) -> Path:
        """Write atomically: everything into a temporary folder, then one rename."""
        key = run_key(result.config)
        final = self.root / key
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{key}-", dir=self.root))
        try:
            (tmp / "config.json").write_text(json.dumps(result.config.to_dict(), indent=1, sort_keys=True, default=str))
            for t in TABLES:
                getattr(result, t).to_parquet(tmp / f"{t}.parquet", index=False)
            meta = {"key": key, "status": result.status, "metrics": result.metrics, "error": result.error,
                    "wall_s": result.wall_s, "provenance": provenance(result.config)}
            (tmp / "result.json").write_text(json.dumps(meta, indent=1, default=float))
            if final.exists():              # a concurrent or failed earlier copy: replace it
                shutil.rmtree(final)
            os.replace(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        result.key = key
        return final

    def run(self, cfg: TrainConfig, retry_failed: bool = False, progress=None) -> RunResult:
        """Return the stored result for ``cfg``, training (and storing) it first if needed."""
        cfg.validate()
        stored = self.get(cfg)
        if stored is not None and (stored.status == "done" or not retry_failed):
            return stored
        result = train(cfg, progress=progress)
        self.save(result)
        return result

    def keys(self) -> list[str]:
        if not self.root.exists():
            return []
        return sorted(p.name for p in self.root.iterdir() if not p.name.startswith(".") and (p / "result.json").exists())

    def clean_partial(self) -> int:
        """Remove temporary folders left by interrupted runs; return how many."""
        n = 0
        for p in self.root.glob(".tmp-*") if self.root.exists() else []:
            shutil.rmtree(p, ignore_errors=True)
            n += 1
        return n


def provenance(cfg: TrainConfig) -> dict:
    dev = cfg.device
    if dev.startswith("cuda") and torch.cuda.is_available():
        dev = torch.cuda.get_device_name(torch.device(dev))
    return {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "torch": torch.__version__, "python": platform.python_version(), "machine": platform.machine(),
            "device": dev, "commit": git_commit()}


def git_commit() -> str | None:
    head = Path(__file__).resolve().parents[1] / ".git"
    try:
        ref = (head / "HEAD").read_text().strip()
        if ref.startswith("ref:"):
            ref_path = head / ref.split(" ", 1)[1]
            if ref_path.exists():
                return ref_path.read_text().strip()
            packed = (head / "packed-refs").read_text()
            for line in packed.splitlines():
                if line.endswith(ref.split(" ", 1)[1]):
                    return line.split()[0]
            return None
        return ref
    except OSError:
        return None


@dataclass
class Frames:
    """Tidy tables over many runs; every table carries the run ``key``."""
    runs: pd.DataFrame
    steps: pd.DataFrame
    tracked: pd.DataFrame
    evals: pd.DataFrame
    test_norms: pd.DataFrame
    cosines: pd.DataFrame
    grad_scatter: pd.DataFrame


RUN_COLUMNS = ("dataset", "model", "width", "head", "embed_dim", "loss", "optimizer", "lr", "eta", "mu",
               "momentum", "seed", "iterations", "batch_size", "image_size", "device")


def results_to_frames(results: Iterable[RunResult], tables: Iterable[str] = TABLES) -> Frames:
    """Tidy frames from RunResults (the order of ``results`` is kept)."""
    tables = tuple(tables)
    rows, parts = [], {t: [] for t in TABLES}
    for r in results:
        key = r.key or run_key(r.config)
        c = r.config
        row = {"key": key, "status": r.status, **{k: getattr(c, k) for k in RUN_COLUMNS},
               "mu": str(c.mu), "variant": c.variant, "wall_s": r.wall_s, "error": r.error, **r.metrics}
        rows.append(row)
        for t in tables:
            df = getattr(r, t)
            if len(df):
                parts[t].append(df.assign(key=key))
    runs = pd.DataFrame(rows)
    out = {t: (pd.concat(parts[t], ignore_index=True) if parts[t] else pd.DataFrame(columns=["key"])) for t in TABLES}
    return Frames(runs=runs, **out)


def load_runs(configs: Iterable[TrainConfig] | None = None, root: str | Path | None = None,
              tables: Iterable[str] = TABLES, missing: str = "error") -> Frames:
    """Tidy frames of stored runs: the given configs (in order), or every run under ``root``.

    ``missing``: 'error' raises KeyError naming configs that are not in the store, 'skip' leaves them out.
    """
    if missing not in ("error", "skip"):
        raise ValueError(f"missing = {missing!r} is not valid; valid values: 'error', 'skip'")
    store = ResultStore(root)
    if configs is None:
        results = [store.load(store.root / k) for k in store.keys()]
    else:
        results, absent = [], []
        for cfg in configs:
            r = store.get(cfg)
            (results.append(r) if r is not None else absent.append(cfg))
        if absent and missing == "error":
            raise KeyError(f"{len(absent)} run(s) not in the store {store.root}, e.g. {absent[0]}; "
                           "run them first (python -m sec_lib.book run) or pass missing='skip'")
    return results_to_frames(results, tables)


def run_all(configs: list[TrainConfig], root: str | Path | None = None, jobs: int = 1,
            progress: Callable[[str, int, int], None] | None = None) -> list[RunResult]:
    """Run (or load) every config and return their results in order.

    Completed runs are reused; ``jobs`` > 1 trains in spawned worker processes with one torch
    thread each. ``progress(event, n, total)`` is called with 'reused' once and 'trained' per run.
    Every config is validated before any training starts.
    """
    for cfg in configs:
        cfg.validate()
    store = ResultStore(root)
    unique = {}
    for c in configs:
        unique.setdefault(run_key(c), c)
    todo = {k: c for k, c in unique.items() if not store.has(c)}
    if progress:
        progress("reused", len(unique) - len(todo), len(unique))
    if jobs <= 1 or len(todo) <= 1:
        for c in todo.values():
            store.run(c)
            if progress:
                progress("trained", 1, len(unique))
    else:
        with ProcessPoolExecutor(max_workers=jobs, mp_context=mp.get_context("spawn"),
                                 initializer=_exit_with_parent, initargs=(os.getpid(),)) as pool:
            futures = [pool.submit(_worker, c, str(store.root)) for c in todo.values()]
            for f in as_completed(futures):
                f.result()
                if progress:
                    progress("trained", 1, len(unique))
    return [store.get(c) for c in configs]


def _exit_with_parent(parent_pid: int) -> None:
    """Worker initializer: end this worker if the sweep that started it is killed (no orphans)."""
    def watch():
        while os.getppid() == parent_pid:
            time.sleep(1.0)
        os._exit(1)
    threading.Thread(target=watch, daemon=True).start()


def _worker(cfg: TrainConfig, root: str) -> str:
    torch.set_num_threads(cfg.num_threads or 1)
    ResultStore(root).run(cfg)
    return run_key(cfg)
