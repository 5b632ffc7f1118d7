"""What the registered follow-ups (``data/followups/<name>/``, each a module with its ``STUDY``) read and write:
the decisive tier's plan their held-out runs train under, Q6b's SGD runs, ``choices.json`` (never rewritten by a
different choice), and their committed runs, read only once all are committed."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from ..tempfiles import atomic_write_json
from . import tier
from .config import TrainConfig
from .decisive import read_plan
from .store import run_key


def rel(path: Path) -> str:
    """``path`` as a reader finds it: relative to the repository where it is inside it."""
    try:
        return str(Path(path).relative_to(tier.REPO))
    except ValueError:
        return str(path)


def tier_plan():
    """The decisive tier's registered plan, whose schedule shape and length the follow-ups' held-out runs train
    under (``data/reference/decisive/plan.json``)."""
    return read_plan()


def scores_json(scores: dict) -> dict:
    """A choice's scores as ``choices.json`` keeps them: {"0.03": R@1}, a point with a diverged seed (−∞ in the rule)
    as null, so that the file is strict JSON."""
    return {f"{k:g}": (float(v) if math.isfinite(v) else None) for k, v in sorted(scores.items())}


def read_json(path: Path) -> dict:
    """A follow-up's ``choices.json``; {} while it is not written."""
    return json.loads(Path(path).read_text()) if Path(path).exists() else {}


def settle_choices(path: Path, final: dict) -> None:
    """Write the selection's ``final`` choices to ``path``; RuntimeError if a committed file says otherwise (the
    registered choice is never rewritten by a different one)."""
    have = read_json(path)
    if have and have != final:
        raise RuntimeError(f"{path} differs from the selection's runs: {have} vs {final}")
    atomic_write_json(path, final)


def committed_runs(where: Path) -> pd.DataFrame:
    """The runs committed in the folder ``where`` (a follow-up's stage) in
    :func:`sec_lib.chapters.evidence.tier_runs`' columns (the date to the day); empty when it has none."""
    cols = ["key", "dataset", "iterations", "test_classes", "holdout_classes", "wall_s", "device", "torch", "date"]
    path = Path(where) / "runs.parquet"
    if not path.exists():
        return pd.DataFrame(columns=cols)
    runs = pd.read_parquet(path)
    cfg = [json.loads(c) for c in runs["config"]]
    return runs.assign(dataset=[c["dataset"] for c in cfg], test_classes=[c.get("test_classes") for c in cfg],
                       date=runs["date"].astype(str).str[:10])[cols]


def committed_count(path: Path, configs) -> tuple[int, int]:
    """(how many of ``configs`` are committed in ``path``, a stage's ``runs.parquet``; how many there are): a
    follow-up's progress while it trains."""
    want = {run_key(c) for c in configs}
    path = Path(path)
    have = set(pd.read_parquet(path, columns=["key"])["key"]) if path.exists() else set()
    return len(want & have), len(want)


def all_committed(path: Path, configs, what: str) -> pd.DataFrame:
    """The runs of ``configs`` committed in ``path`` (a stage's ``runs.parquet``), once every one is there; KeyError
    (no evidence yet) before, saying how many are (as :func:`committed_count` counts them, from the one read here).
    ``what``: the follow-up's id, for the message."""
    want = {run_key(c) for c in configs}
    path = Path(path)
    runs = pd.read_parquet(path) if path.exists() else pd.DataFrame(columns=["key"])
    have = want & set(runs["key"])
    if have != want:
        raise KeyError(f"{what}'s runs are not all committed yet: {len(have)} of {len(want)} are in {rel(path)}")
    return runs[runs["key"].isin(want)].reset_index(drop=True)


def committed_test_runs(here: Path, want_of, what: str) -> pd.DataFrame:
    """A follow-up's committed test runs (``here/test/runs.parquet``), once its ``choices.json`` is written and every
    run ``want_of(choices)`` names (their configs) is there; KeyError (no evidence yet) before, saying how many are
    missing. ``what``: the follow-up's id, for the message."""
    choices = read_json(here / "choices.json")
    if not choices:
        raise KeyError(f"{what}'s held-out selection is not final yet: {rel(here / 'choices.json')} is not written")
    want = {run_key(c) for c in want_of(choices)}
    path = here / "test" / "runs.parquet"
    runs = pd.read_parquet(path) if path.exists() else pd.DataFrame(columns=["key"])
    missing = want - set(runs["key"])
    if missing:
        raise KeyError(f"{what}'s test runs are not all committed yet: {len(want) - len(missing)} of {len(want)} are "
                       f"in {rel(path)}")
    return runs[runs["key"].isin(want)].reset_index(drop=True)


def q6b_configs(root=None) -> list[TrainConfig]:
    """Q6b's SGD runs as the decisive ``optim`` stage committed them (in the repository, or in ``root``), in its
    order."""
    runs = pd.read_parquet(tier.tier_dir("decisive", root) / "optim" / "runs.parquet", columns=["config", "optimizer"])
    return [TrainConfig(**json.loads(c)) for c in runs.loc[runs["optimizer"] == "sgd", "config"]]


def q6b_rates(root=None) -> dict:
    """{loss: {'none': lr, 'sec': lr}}: the rates Q6b's runs trained at (the tier's shared SGD rates)."""
    out: dict = {}
    for c in q6b_configs(root):
        out.setdefault(c.loss, {})["sec" if c.eta > 0 else "none"] = float(c.lr)
    return out
