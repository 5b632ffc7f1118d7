"""Evidence tiers committed to the repository: compact, read-only copies of a profile's runs.

The quick tier lives in the result store (``data/runs``, trained by ``make book``). Longer tiers
(``gpu``, and the staged ``decisive`` tier, one such folder per stage; the retired ``reference`` tier:
:data:`RETIRED`) take hours, so their results are committed under
``data/reference/<profile>/`` as a handful of parquet files that pandas reads directly:

    runs.parquet        one row per run: key, config (the full TrainConfig as JSON), status, error,
                        final metrics (R@1, ...), commit, device, torch, python, machine, date, the CPU kind
                        and kernel settings (:data:`PROVENANCE`), wall_s
    evals.parquet       every periodic evaluation (key, step, R@1, ...)
    steps.parquet       the per-step log, decimated to at most STEP_ROWS rows per run (last step kept; where the
                        run logs some columns every k steps, rows that have them: decimate_steps)
    tracked.parquet     tracked samples' norms, at most TRACK_STEPS steps per run
    test_norms.parquet  per test sample: label, norm, hit@1 (float32 / int32 / bool)
    cosines.parquet     sampled test pairs, at most COSINES per run
    grad_scatter.parquet

:class:`TierStore` reads such a folder with the interface of :class:`~sec_lib.runs.store.ResultStore`
(``get``, ``has``, ``keys``), so every chapter reads a tier exactly as it reads the store.
``TrainConfig.from_dict(json.loads(row.config))`` rebuilds any row's run; ``python -m sec_lib.book
rerun KEY`` retrains it and compares its final R@1 with the committed one.
"""
from __future__ import annotations

import functools
import json
import multiprocessing as mp
import os
import queue as queue_mod
import tempfile
from concurrent.futures import ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, NamedTuple

import numpy as np
import pandas as pd

from .. import kernels
from ..params import ParameterError
from .config import RunResult, TrainConfig
from .store import TABLES, ResultStore, run_key
from .tablehash import HASHED_TABLES, UNHASHED_COLUMNS, column_hashes, table_hash  # noqa: F401
from .train import train

REPO = Path(__file__).resolve().parents[2]
STEP_ROWS = 250
TRACK_STEPS = 60
COSINES = 1000
#: The provenance columns of a committed tier: where and when, then the CPU kind and its kernel settings
#: (:func:`sec_lib.kernels.provenance`; empty for rows committed before the reproducibility contract, whose
#: kind ``kinds.csv`` beside the tier records where it is known).
PROVENANCE = ("commit", "device", "torch", "python", "machine", "date", "cpu_vendor", "cpu_model", "cpu_isa",
              "aten_capability", "mkl", "onednn", "kernel_pin", "kernel_env", "cpu_kind",
              "cuda", "driver", "cudnn", "runs_together")


def tier_dir(profile: str, root: str | Path | None = None) -> Path:
    """``data/reference/<profile>`` of the repository (or of ``root``)."""
    return Path(root or REPO) / "data" / "reference" / profile


def decimate(df: pd.DataFrame, col: str, max_values: int) -> pd.DataFrame:
    """Rows at (about) ``max_values`` evenly spaced values of ``col``, first and last kept."""
    if df.empty:
        return df
    values = np.unique(df[col].to_numpy())
    if len(values) <= max_values:
        return df
    keep = values[np.unique(np.linspace(0, len(values) - 1, max_values).round().astype(int))]
    return df[df[col].isin(keep)]


def decimate_steps(df: pd.DataFrame) -> pd.DataFrame:
    """The per-step log at about :data:`STEP_ROWS` steps, first and last kept. A run that logs its batch statistics
    or Δθ only every k steps (``stats_every``, ``dtheta_every``) has those columns on few rows: evenly spaced steps
    of the whole run would keep them on one row in k or fewer (12 of 250 rows at ``stats_every`` = 20), so the
    steps kept are chosen, evenly spaced, among the rows that have every column the run logs. A row where a logged
    quantity is undefined (a batch with no nonzero gradient has no gradient slope) is not among them, so a run with
    such batches keeps fewer rows (116 to 137 in the decisive main comparison, every run to its last step)."""
    logged = [c for c in df.columns if c != "step" and df[c].notna().any()]
    full = df[logged].notna().all(axis=1)
    if df.empty or full.all() or not full.any() or df["step"].nunique() <= STEP_ROWS:
        return decimate(df, "step", STEP_ROWS)
    keep = set(decimate(df[full], "step", STEP_ROWS - 2)["step"]) | {df["step"].min(), df["step"].max()}
    return df[df["step"].isin(keep)]


def _compact(name: str, df: pd.DataFrame) -> pd.DataFrame:
    if name == "steps":
        df = decimate_steps(df)
    elif name == "tracked":
        df = decimate(df, "step", TRACK_STEPS)
    elif name == "cosines":
        df = df.groupby("kind", group_keys=False).head(COSINES // 2) if len(df) else df
    out = df.copy()
    for c in out.columns:
        if out[c].dtype == np.float64 and name in ("test_norms", "cosines", "tracked", "grad_scatter"):
            out[c] = out[c].astype(np.float32)
        elif out[c].dtype == np.int64 and name in ("test_norms", "tracked"):
            out[c] = out[c].astype(np.int32)
    return out


def export(store: ResultStore, configs, out: str | Path) -> dict:
    """Write the runs of ``configs`` that are in ``store`` into the tier folder ``out`` (each file
    replaced atomically); runs already in the tier but no longer in the store are kept. Returns
    counts: exported, missing (not trained yet)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    old = TierStore(out) if (out / "runs.parquet").exists() else None
    rows, parts, seen, missing = [], {t: [] for t in TABLES}, set(), 0
    for cfg in configs:
        key = run_key(cfg)
        if key in seen:
            continue
        seen.add(key)
        r = store.get(cfg)
        if r is None and old is not None and old.has_key(key):
            r = old.get(cfg)
        if r is None:
            missing += 1
            continue
        meta = store.meta(key) if store.has(cfg) else old.meta(key)
        rows.append(_row(key, r, meta))
        for t in TABLES:
            df = getattr(r, t)
            if len(df):
                parts[t].append(_compact(t, df).assign(key=key))
    runs = pd.DataFrame(rows)
    _write(runs, out / "runs.parquet")
    for t in TABLES:
        df = pd.concat(parts[t], ignore_index=True) if parts[t] else pd.DataFrame({"key": pd.Series(dtype=str)})
        _write(df, out / f"{t}.parquet")
    return {"exported": len(rows), "missing": missing}


def _row(key: str, r: RunResult, meta: dict) -> dict:
    prov = meta.get("provenance", {})
    c = r.config
    return {"key": key, "config": json.dumps(c.to_dict(), sort_keys=True, default=str), "status": r.status,
            "error": r.error, "loss": c.loss, "variant": c.variant, "eta": c.eta, "mu": str(c.mu),
            "optimizer": c.optimizer, "lr": c.lr, "seed": c.seed, "iterations": c.iterations,
            "holdout_classes": c.holdout_classes, "head": c.head,
            **{k: float(v) for k, v in r.metrics.items()},
            **{k: prov.get(k) for k in PROVENANCE}, "wall_s": r.wall_s}


def _write(df: pd.DataFrame, path: Path) -> None:
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".parquet", dir=path.parent)
    os.close(fd)
    try:
        df.to_parquet(tmp, index=False, compression="zstd")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


class TierStore:
    """A committed tier read like a :class:`~sec_lib.runs.store.ResultStore` (read-only)."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        if not (self.root / "runs.parquet").exists():
            raise FileNotFoundError(f"no tier at {self.root} (runs.parquet missing); "
                                    "train it with `make decisive` or use the quick tier")
        self.runs = pd.read_parquet(self.root / "runs.parquet")
        self._by_key = {k: i for i, k in enumerate(self.runs["key"])}
        self._tables: dict = {}

    def table(self, name: str) -> dict:
        """``{key: (start, stop)}`` row ranges of table ``name`` (the export writes each run's rows
        together), with the table itself kept once; slices are cut on demand by :meth:`_rows`."""
        if name not in self._tables:
            df = pd.read_parquet(self.root / f"{name}.parquet")
            spans = {}
            if len(df):
                keys = df["key"].to_numpy()
                starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
                stops = np.r_[starts[1:], len(keys)]
                for k, a, b in zip(keys[starts], starts, stops):
                    if k in spans:               # not contiguous (hand-written file): fall back to grouping
                        spans = None
                        break
                    spans[k] = (int(a), int(b))
            if spans is None:
                groups = {k: g.drop(columns="key").reset_index(drop=True) for k, g in df.groupby("key", sort=False)}
                self._tables[name] = (None, groups)
            else:
                self._tables[name] = (df.drop(columns="key"), spans)
        return self._tables[name]

    def _rows(self, name: str, key: str) -> pd.DataFrame:
        df, index = self.table(name)
        if df is None:
            return index.get(key, pd.DataFrame())
        if key not in index:
            return pd.DataFrame()
        a, b = index[key]
        return df.iloc[a:b].reset_index(drop=True)

    def has_key(self, key: str) -> bool:
        return key in self._by_key

    def has(self, cfg: TrainConfig) -> bool:
        return run_key(cfg) in self._by_key

    def keys(self) -> list[str]:
        return sorted(self._by_key)

    def config(self, key: str) -> TrainConfig:
        if key not in self._by_key:
            raise ParameterError(f"run {key!r} is not in the tier {self.root}; "
                                 f"it holds {len(self._by_key)} runs (see runs.parquet)")
        return TrainConfig.from_dict(json.loads(self.runs.iloc[self._by_key[key]]["config"]))

    def meta(self, key: str) -> dict:
        row = self.runs.iloc[self._by_key[key]]
        return {"provenance": {k: row.get(k) for k in PROVENANCE}}

    def get(self, cfg: "TrainConfig | str", tables=TABLES) -> RunResult | None:
        """The committed run of ``cfg`` or of a store key (None if absent), with the per-run ``tables``
        (default: all; the others empty, so a page that needs only the metrics does not read the large
        tables): the same ``get`` as :meth:`sec_lib.runs.store.ResultStore.get`."""
        key = cfg if isinstance(cfg, str) else run_key(cfg)
        if key not in self._by_key:
            return None
        row = self.runs.iloc[self._by_key[key]]
        skip = {"key", "config", "status", "error", "loss", "variant", "eta", "mu", "optimizer", "lr", "seed",
                "iterations", "holdout_classes", "head", "wall_s", *PROVENANCE}
        metrics = {k: float(v) for k, v in row.items() if k not in skip and pd.notna(v)}
        frames = {t: (self._rows(t, key) if t in tables else pd.DataFrame()) for t in TABLES}
        return RunResult(self.config(key), row["status"], metrics, **frames,
                         error=row["error"] if isinstance(row["error"], str) else None,
                         wall_s=float(row["wall_s"]), key=key)

    def load(self, path: Path) -> RunResult:
        return self.get(self.config(Path(path).name))


TIER_PROFILES = ("gpu",)
@dataclass(frozen=True)
class Retired:
    """A committed tier kept only as history. Its folder keeps ``runs.parquet`` (every run's config, metrics and
    provenance: ``rerun --tier`` retrains any of them), ``evals.parquet``, ``kinds.csv`` and its portability report;
    its other tables were dropped. No page reads it as evidence and no training run restores from it."""
    name: str
    on: str             # the day it was retired
    at: str             # the last commit whose tree holds it whole
    replaced_by: str    # the tier that holds its profile's committed runs now: where ``rerun --profile`` looks, and
                        # what ``export`` names instead


#: The retired tiers by name: the reference tier (5,000 iterations at a constant rate, 5 seeds, trained before the
#: reproducibility contract), replaced by the decisive tier, which trains the reference profile's network and data.
RETIRED = {"reference": Retired("reference", on="2026-11-28", at="9649a31", replaced_by="decisive")}
#: Views of :data:`RETIRED` that the pages read.
RETIRED_TIERS = tuple(RETIRED)
RETIRED_AT = {n: r.at for n, r in RETIRED.items()}
REPLACED_BY = {n: r.replaced_by for n, r in RETIRED.items()}
#: Tiers committed one folder per stage (``data/reference/<tier>/<stage>/runs.parquet``: the decisive tier's
#: pilot, selection, main comparison, ...), read as one store (:class:`StagedTier`).
STAGED_TIERS = ("decisive",)


def stage_dirs(root: str | Path) -> list[Path]:
    """The stage folders of a staged tier at ``root`` that hold runs, in name order."""
    root = Path(root)
    return sorted(d for d in root.iterdir() if (d / "runs.parquet").exists()) if root.is_dir() else []


def has_tier(profile: str) -> bool:
    """Whether a committed tier exists for ``profile`` (``data/reference/<profile>/runs.parquet``; for a staged
    tier, a stage folder with runs)."""
    if profile in STAGED_TIERS:
        return bool(stage_dirs(tier_dir(profile)))
    return (tier_dir(profile) / "runs.parquet").exists()


class StagedTier:
    """A staged tier's folders read as one read-only store (the :class:`TierStore` interface): a run is looked up
    in each stage in turn (a stage never re-exports an earlier stage's run; were one in two, both copies are the
    same run). ``runs``: every stage's rows, each run once."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.parts = [TierStore(d) for d in stage_dirs(self.root)]
        if not self.parts:
            raise FileNotFoundError(f"no staged tier at {self.root} (no stage folder holds a runs.parquet)")
        self.runs = pd.concat([t.runs for t in self.parts], ignore_index=True).drop_duplicates("key")

    def _part(self, key: str):
        return next((t for t in self.parts if t.has_key(key)), None)

    def has_key(self, key: str) -> bool:
        return self._part(key) is not None

    def has(self, cfg: TrainConfig) -> bool:
        return self.has_key(run_key(cfg))

    def keys(self) -> list[str]:
        return sorted({k for t in self.parts for k in t.keys()})

    def config(self, key: str) -> TrainConfig:
        t = self._part(key)
        if t is None:
            raise ParameterError(f"run {key!r} is not in the staged tier {self.root}; its stages: "
                                 + ", ".join(x.root.name for x in self.parts))
        return t.config(key)

    def meta(self, key: str) -> dict:
        return self._part(key).meta(key)

    def get(self, cfg: "TrainConfig | str", tables=TABLES) -> RunResult | None:
        key = cfg if isinstance(cfg, str) else run_key(cfg)
        t = self._part(key)
        return None if t is None else t.get(key, tables=tables)

    def load(self, path: Path) -> RunResult:
        return self.get(Path(path).name)


@functools.lru_cache(maxsize=8)
def _open(root: str, stamp: float) -> TierStore:
    return TierStore(root)


def open_tier(root: str | Path) -> "TierStore | StagedTier":
    """The :class:`TierStore` at ``root`` (a :class:`StagedTier` where ``root`` holds stage folders instead of a
    ``runs.parquet``), opened once per process while its runs files are unchanged (its tables, read on first use,
    are then shared by every page and chapter)."""
    root = Path(root)
    runs = root / "runs.parquet"
    if not runs.exists() and stage_dirs(root):
        return _open_staged(str(root.resolve()), tuple((d.name, (d / "runs.parquet").stat().st_mtime_ns)
                                                       for d in stage_dirs(root)))
    return _open(str(root.resolve()), runs.stat().st_mtime_ns if runs.exists() else -1)


@functools.lru_cache(maxsize=4)
def _open_staged(root: str, stamp: tuple) -> StagedTier:
    return StagedTier(root)


def store_for(profile: str, root=None):
    """Where a page of ``profile`` reads its runs: the result store at ``root`` when one is given;
    else the committed tier of a long profile (gpu, and the staged decisive tier) when it exists; else
    the quick store (``$SEC_RUNS_DIR`` or ``data/runs``)."""
    if root is None and profile in (*TIER_PROFILES, *STAGED_TIERS) and has_tier(profile):
        return open_tier(tier_dir(profile))
    return ResultStore(root)


def restore(tier: str | Path, store: ResultStore | None = None) -> int:
    """Copy the committed tier's runs that ``store`` lacks into it, each with the provenance it was
    committed with, so that a training run on a fresh machine resumes where the committed work
    stopped (the copies hold the tier's compacted tables, enough for every page and selection).
    Returns how many runs were restored; a missing tier restores none."""
    if not (Path(tier) / "runs.parquet").exists():
        return 0
    t = TierStore(tier)
    store = store if store is not None else ResultStore()
    n = 0
    for key in t.keys():
        if store.has(key):
            continue
        r = t.get(t.config(key))
        # each value as its column holds it (a number stays a number: a restored row and a new one must share
        # their columns' types when the tier is exported again, cuDNN's version and runs_together among them)
        prov = {k: (None if pd.isna(v) else v.item() if hasattr(v, "item") else v)
                for k, v in t.meta(key)["provenance"].items()}
        store.save(r, provenance_=prov)
        n += 1
    return n


def rerun(key: str, tier: str | Path, store: ResultStore | None = None,
          progress: Callable[[int, int], None] | None = None) -> tuple[float, float, RunResult]:
    """Retrain one committed run from its row and return (committed R@1, retrained R@1, the new result).

    The run is always trained afresh, even when ``store`` (default: the local result store) already
    holds that key, as it does after :func:`restore`: comparing the committed row with its own restored
    copy would prove nothing. The new result is saved to ``store`` only where the key is missing there.
    ``progress(step, iterations)`` is called after every step (``rerun``'s progress bar)."""
    t = TierStore(tier)
    cfg = t.config(key)
    committed = t.get(cfg).metrics.get("R@1", float("nan"))
    store = store or ResultStore()
    result = train(cfg) if progress is None else train(cfg, progress=progress)
    if not store.has(key):
        store.save(result)
    return committed, result.metrics.get("R@1", float("nan")), result


#: Beside a tier: what is known of the CPU kind of rows committed before the reproducibility contract, per
#: committing commit (columns commit, cpu_kind, evidence), established by retraining one row of each batch.
KINDS_FILE = "kinds.csv"
UNKNOWN_KIND = "unknown"


def committed_pin(t: TierStore, key: str) -> str:
    """The kernel pin a committed run was trained under: its ``kernel_pin``, else (a row committed before
    the contract, when nothing was pinned) :data:`sec_lib.kernels.LEGACY_PIN`."""
    pin = t.meta(key)["provenance"].get("kernel_pin")
    return pin if isinstance(pin, str) and pin else kernels.LEGACY_PIN


def gpu_kind(cfg: TrainConfig, prov: dict) -> str:
    """The kind of a run trained on a GPU (the reproducibility contract's unit there, in place of the CPU kind):
    ``gpu:<GPU>/torch <v>[/cuda <v>/cudnn <v>]``, then the settings that change its kernels: ``/bf16``,
    ``/channels_last``, ``/together`` (several runs per process: not measured equal to runs alone on a GPU yet)."""
    parts = [f"gpu:{prov.get('device')}", f"torch {prov.get('torch')}"]
    for name in ("cuda", "cudnn"):
        v = prov.get(name)
        if v is not None and v == v:                       # not None, not NaN (rows from before the column)
            parts.append(f"{name} {int(v) if isinstance(v, float) else v}")
    if cfg.autocast != "none":
        parts.append(cfg.autocast)
    if cfg.channels_last:
        parts.append("channels_last")
    together = prov.get("runs_together")
    if together is not None and together == together and int(together) > 1:
        parts.append("together")
    return "/".join(parts)


def committed_kind(t: TierStore, key: str) -> str:
    """A committed run's kind: for a GPU run its :func:`gpu_kind`; else its CPU kind, ``cpu_kind``, or for an older
    row what ``kinds.csv`` records for its commit; else :data:`UNKNOWN_KIND`."""
    prov = t.meta(key)["provenance"]
    cfg = t.config(key)
    if not cfg.device.startswith("cpu"):
        return gpu_kind(cfg, prov)
    kind = prov.get("cpu_kind")
    if isinstance(kind, str) and kind:
        return kind
    path = Path(t.root) / KINDS_FILE
    if path.exists():
        known = pd.read_csv(path, dtype=str).set_index("commit")["cpu_kind"]
        if prov.get("commit") in known.index:
            return known[prov.get("commit")]
    return UNKNOWN_KIND


def seed_sd(t: TierStore, key: str, metric: str = "R@1") -> tuple[float, str]:
    """The seed-to-seed SD of ``metric`` for a committed run's arm (its config but the seed), with a phrase
    saying what it is: the arm's own SD where it has 2 or more seeds, else the pooled within-arm SD of the
    arms of the same loss, length and class split; NaN where there is none."""
    runs = t.runs[t.runs["status"] == "done"].copy()
    runs["arm"] = [json.dumps({k: v for k, v in json.loads(c).items() if k != "seed"}, sort_keys=True)
                   for c in runs["config"]]
    row = t.runs.iloc[t._by_key[key]]
    arm = json.dumps({k: v for k, v in json.loads(row["config"]).items() if k != "seed"}, sort_keys=True)
    own = runs.loc[runs["arm"] == arm, metric].dropna()
    if len(own) >= 2:
        return float(own.std(ddof=1)), f"the SD of this arm's {len(own)} seeds"
    same = runs[(runs["loss"] == row["loss"]) & (runs["iterations"] == row["iterations"])
                & (runs["holdout_classes"] == row["holdout_classes"])]
    g = same.groupby("arm")[metric].agg(["var", "count"]).dropna()
    g = g[g["count"] >= 2]
    if g.empty:
        return float("nan"), "no arm of this loss has two seeds"
    pooled = float(np.sqrt(((g["count"] - 1) * g["var"]).sum() / (g["count"] - 1).sum()))
    return pooled, f"the pooled seed SD of {len(g)} {row['loss']} arms (this arm has one seed)"


def compacted(result: RunResult, name: str) -> pd.DataFrame:
    """A run's table ``name`` as :func:`export` commits it (the step log decimated, ...)."""
    return _compact(name, getattr(result, name))


def _hashes(tables: dict[str, pd.DataFrame]) -> dict:
    out = {}
    for name, df in tables.items():
        have = len(df) > 0
        out[f"{name}_hash"] = table_hash(df) if have else None
        out[f"{name}_columns"] = column_hashes(df) if have else {}
    return out


def result_hashes(result: RunResult) -> dict:
    """``{"steps_hash", "steps_columns", "evals_hash", "evals_columns"}`` of a run just trained, its tables
    compacted as a tier keeps them (:func:`table_hash`, :func:`column_hashes`)."""
    return _hashes({name: compacted(result, name) for name in HASHED_TABLES})


def committed_hashes(t: "TierStore | StagedTier", key: str) -> dict:
    """The same hashes (:func:`result_hashes`) of a committed run's rows; a table the tier no longer holds (the
    retired tier dropped its steps) has no hash (None) and no columns."""
    tables = {}
    for name in HASHED_TABLES:
        try:
            tables[name] = getattr(t.get(key, tables=(name,)), name)
        except FileNotFoundError:                  # the tier's folder has no such table file
            tables[name] = pd.DataFrame()
    return _hashes(tables)


class Retrained(NamedTuple):
    """A committed run retrained by :func:`retrain`: its R@1, the CPU kind it ran on, its tables' hashes (whole and
    per column: :func:`result_hashes`)."""
    r1: float
    kind: str
    steps_hash: str | None
    evals_hash: str | None
    steps_columns: dict = {}
    evals_columns: dict = {}


#: In a worker process of :func:`retrain`: where it reports its steps (set by :func:`_init_worker`).
_STEPS_QUEUE = None


def _init_worker(queue) -> None:
    global _STEPS_QUEUE
    _STEPS_QUEUE = queue


def step_counter(report: Callable[[int], None]) -> Callable[[int, int], None]:
    """A ``train`` progress callback that reports the steps done since its last report, about 200 times a run."""
    last = [0]

    def progress(step: int, total: int) -> None:
        if step - last[0] >= max(1, total // 200) or step == total:
            report(step - last[0])
            last[0] = step
    return progress


def _retrain_one(root: str, key: str, report: Callable[[int], None] | None = None) -> tuple:
    t = open_tier(root)
    if report is None and _STEPS_QUEUE is not None:
        report = _STEPS_QUEUE.put
    r = train(t.config(key)) if report is None else train(t.config(key), progress=step_counter(report))
    return key, Retrained(float(r.metrics.get("R@1", float("nan"))), kernels.this_kind(),
                          **result_hashes(r))


def retrain(keys, tier: str | Path, jobs: int = 1,
            progress: Callable[[int], None] | None = None) -> dict[str, Retrained]:
    """Retrain committed runs afresh (``jobs`` processes; nothing is read from or saved to a store) and
    return ``{key: Retrained(R@1, CPU kind it ran on, its tables' hashes)}``. The caller runs under the runs'
    kernel pin. ``progress(n)`` is called in this process with the number of steps trained since its last call,
    summed over the runs (a few hundred calls a run), for a progress bar."""
    keys = list(keys)
    if jobs <= 1:
        return dict(_retrain_one(str(tier), k, progress) for k in keys)
    ctx = mp.get_context("spawn")
    steps = ctx.Queue() if progress is not None else None

    def drain(block: bool) -> None:
        while steps is not None:
            try:
                progress(steps.get(timeout=0.5) if block else steps.get_nowait())
            except queue_mod.Empty:
                return
            block = False

    with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, initializer=_init_worker, initargs=(steps,)) as pool:
        futures = [pool.submit(_retrain_one, str(tier), k) for k in keys]
        while not all(f.done() for f in futures):
            if steps is None:
                wait(futures)
            drain(block=True)
        got = dict(f.result() for f in futures)
    drain(block=False)
    if steps is not None:
        steps.close()
    return got
