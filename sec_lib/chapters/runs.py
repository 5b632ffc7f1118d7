"""The runs index: every seed of the main table's runs (the twelve run pages show seed 0), and the
per-run data of this build's tier and of the committed tiers (``data/reference/<profile>/``) to
download: the runs table (one row per run, its full config as JSON, final metrics, provenance), the
evaluation curves and the per-step log (decimated), as parquet files and the runs table as CSV."""
from __future__ import annotations

import io
import json
from pathlib import Path

import pandas as pd

from ..runs import experiments as ex
from ..runs import tier
from ..runs.store import ResultStore, load_runs, run_key
from . import profile_param
from .common import MAIN_CHAPTER, beside_cv, load, order_rows, with_norm_cv

#: The notebook's parameters (checked by ``sec_lib.params.notebook_params``).
PARAMS = profile_param()

#: Columns of the index (those present are shown); the train norm variance has its CV (std / mean) beside it.
INDEX_COLUMNS = ("loss", "variant", "eta", "seed", "status", "R@1", "NMI", "F1", "train_norm_var", "train_norm_cv")
#: The per-step log keeps at most this many steps per run in the download (first and last kept).
DOWNLOAD_STEPS = 50
#: The committed tier files the page offers (the others are in the repository).
TIER_FILES = ("runs", "evals", "steps")
PAGE_SEED = 0          # the seed of the twelve run pages (chapters.TRAIN_PAGES)


def run_index(profile, root=None) -> pd.DataFrame:
    """Every run of the main table (every loss, variant and seed) with its final numbers, and whether
    a run page shows it (only seed 0 has one)."""
    runs = with_norm_cv(load(MAIN_CHAPTER, profile, tables=(), root=root).runs)
    cols = [c for c in beside_cv(INDEX_COLUMNS, runs.columns) if c in runs.columns]
    out = order_rows(runs[cols + ["key"]].sort_values("seed", kind="stable"))
    out["run page"] = ["yes" if s == PAGE_SEED else "" for s in out["seed"]]
    out["key"] = out["key"].str[:12]
    return out.reset_index(drop=True)


def _parquet(df: pd.DataFrame) -> bytes:
    buf = io.BytesIO()
    df.to_parquet(buf, index=False, compression="zstd")
    return buf.getvalue()


def _decimate_steps(steps: pd.DataFrame, max_steps: int) -> pd.DataFrame:
    if steps.empty or "key" not in steps.columns:
        return steps
    return pd.concat([tier.decimate(g, "step", max_steps) for _, g in steps.groupby("key", sort=False)],
                     ignore_index=True)


def tier_frames(profile, root=None, max_steps: int = DOWNLOAD_STEPS) -> dict:
    """This build's runs of ``profile`` (every run the store holds for it, pilot and selection
    included) as {"runs", "evals", "steps"} frames; ``steps`` keeps at most ``max_steps`` steps per run."""
    if max_steps < 2:
        raise ValueError(f"max_steps = {max_steps!r} is not valid; expected an integer >= 2")
    store = ResultStore(root)
    uniq = {}
    for c in tier.profile_configs(profile, store):
        uniq.setdefault(run_key(c), c)
    frames = load_runs(list(uniq.values()), root=root, tables=("evals", "steps"), missing="skip")
    runs = frames.runs.copy()
    runs["config"] = [json.dumps(uniq[k].to_dict(), sort_keys=True, default=str) if k in uniq else ""
                      for k in runs["key"]]
    return {"runs": runs, "evals": frames.evals, "steps": _decimate_steps(frames.steps, max_steps)}


def tier_downloads(profile, root=None, max_steps: int = DOWNLOAD_STEPS) -> list[tuple[str, bytes, str]]:
    """(file name, bytes, what it is) for this build's tier: runs as CSV and parquet, curves as parquet."""
    f = tier_frames(profile, root, max_steps)
    n = len(f["runs"])
    return [(f"{profile}_runs.csv", f["runs"].to_csv(index=False).encode(), f"the {n} runs, one row each"),
            (f"{profile}_runs.parquet", _parquet(f["runs"]), "the same as parquet"),
            (f"{profile}_evals.parquet", _parquet(f["evals"]), f"evaluation curves ({len(f['evals'])} rows)"),
            (f"{profile}_steps.parquet", _parquet(f["steps"]),
             f"per-step log, at most {max_steps} steps per run ({len(f['steps'])} rows)")]


def committed_tiers(root=None) -> dict:
    """{profile: {file name: path}} of the committed tiers present under ``data/reference/``."""
    base = tier.tier_dir("x", root).parent
    out = {}
    for d in sorted(base.iterdir()) if base.is_dir() else []:
        files = {f"{d.name}_{t}.parquet": d / f"{t}.parquet" for t in TIER_FILES if (d / f"{t}.parquet").is_file()}
        if files:
            out[d.name] = files
    return out


def committed_downloads(root=None, max_steps: int = DOWNLOAD_STEPS) -> list[tuple[str, bytes, str]]:
    """(file name, bytes, what it is) of each committed tier's runs table, evaluation curves and per-step
    log, the last thinned to at most ``max_steps`` steps per run as for this build's tier (the full log
    is in the repository)."""
    out = []
    for prof, files in committed_tiers(root).items():
        for name, path in files.items():
            if name.endswith("_steps.parquet"):
                data = _parquet(_decimate_steps(pd.read_parquet(path), max_steps))
                what = f"{prof} tier, per-step log, at most {max_steps} steps per run"
            else:
                data, what = path.read_bytes(), f"{prof} tier"
            out.append((name, data, what))
    return out


def committed_summary(root=None) -> pd.DataFrame:
    """Per committed tier: how many runs, losses, variants and seeds its runs table holds."""
    rows = []
    for prof, files in committed_tiers(root).items():
        runs = pd.read_parquet(files[f"{prof}_runs.parquet"]) if f"{prof}_runs.parquet" in files else pd.DataFrame()
        rows.append({"tier": prof, "runs": len(runs),
                     "done": int((runs["status"] == "done").sum()) if "status" in runs else 0,
                     "losses": runs["loss"].nunique() if "loss" in runs else 0,
                     "seeds": runs["seed"].nunique() if "seed" in runs else 0,
                     "folder": f"data/reference/{prof}/"})
    return pd.DataFrame(rows, columns=["tier", "runs", "done", "losses", "seeds", "folder"])


def index_sentence(index: pd.DataFrame, profile: str) -> str:
    """What the index shows, computed from it."""
    n_seeds = index["seed"].nunique()
    pages = int((index["run page"] == "yes").sum())
    failed = int((index["status"] != "done").sum()) if "status" in index else 0
    return (f"The table lists all **{len(index)} runs** of the main comparison in profile `{profile}`: "
            f"{index['loss'].nunique()} losses × {index['variant'].nunique()} variants × {n_seeds} seeds "
            f"({failed} failed). The {pages} run pages show seed {PAGE_SEED} only; every other seed is a row here "
            "and in the downloads below.")
