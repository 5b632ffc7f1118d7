"""C4L, a registered follow-up to the primary test: has the SEC − none gap stopped moving at 13,500 iterations?

Registered before any of its runs (``data/followups/longer-runs/README.md``):

- **Why.** In the main comparison the pooled SEC − none gap is +0.35 R@1 at iteration 10,122 and +0.49 at 13,500,
  where the runs stop: it grew over the last quarter, and the runs themselves still gain test R@1 there. The tier's
  convergence rule (the pilot's 1.5× test) was decided on held-out runs without a regularizer.
- **Runs.** The main comparison's none, SEC (at the held-out η) and L2-reg (at the held-out weight) arms, the four
  main losses, seeds :data:`SEEDS`, at :data:`LENGTH` iterations (1.5 × 13,500), the cosine schedule over the longer
  horizon; otherwise each run is its 13,500-iteration twin (:func:`twin_configs`, committed in the decisive tier's
  ``main/``): the same data, network, Adam at 3e-3, 8 evaluations a run, batch statistics every 20 steps, pin.
- **Estimands.** Per seed, the mean over the four losses of (SEC − none at :data:`LENGTH`) − (SEC − none at 13,500),
  paired by loss and seed: Δ, this follow-up's primary, a family of its own. The same for SEC − L2-reg, a second
  family of its own. One-sample t-interval (95%) over the seeds.
- **Verdict rule** (:func:`verdict`), read from Δ's 95% interval: *stable* if it lies inside ±:data:`MARGIN`;
  *still moving* if it excludes 0 and the estimate lies beyond ±:data:`MARGIN`; *undecided* otherwise.
- **Power line** (:func:`power_line`): the SD of the per-seed change of the pooled gap over the committed last
  quarter (iteration 10,122 to 13,500); the largest |Δ| that :data:`SEEDS` seeds can call stable with 80% power is
  ``MARGIN − mde(sd, n)``; under :data:`MIN_STABLE` more seeds would have been registered (they were not needed).
"""
from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from ..report import min_detectable_effect
from . import followup, study, tier
from . import sweeps as sw
from .config import TrainConfig
from .decisive import read_plan
from .mainstage import EVALS, arm_config

#: The question it answers, as the pages name it.
QUESTION = "has the SEC − none gap stopped moving at 13,500 iterations?"
#: The follow-up's id on the pages.
ID = "C4L"
#: The length of its runs: 1.5 × the tier's 13,500.
LENGTH = 20250
#: The tier's length, where the primary test reads its runs.
BASE_LENGTH = 13500
#: The arms retrained at :data:`LENGTH` (the main comparison's arm names, :data:`sec_lib.runs.mainstage.ARMS`).
ARMS = ("none", "sec", "l2reg")
#: The test seeds: the main comparison's five.
SEEDS = tuple(range(5))
#: The verdict's margin (R@1 points): the tier's convergence threshold.
MARGIN = 0.3
#: The smallest |Δ| that the seeds must be able to call stable (else more seeds are registered first).
MIN_STABLE = 0.15
#: The two comparisons, each a family of its own: (name, arm, against).
COMPARISONS = (("SEC − none", "sec", "none"), ("SEC − L2-reg", "sec", "l2reg"))
FOLDER = ("data", "followups", "longer-runs")
FOLDER_TEXT = "/".join(FOLDER) + "/"


def folder(root=None) -> Path:
    """:data:`FOLDER` of the repository (or of ``root``)."""
    return Path(root or tier.REPO).joinpath(*FOLDER)


def twin_configs(root=None) -> list[TrainConfig]:
    """The main comparison's runs of :data:`ARMS`, four losses and :data:`SEEDS`, as committed (13,500 iterations),
    loss by loss within arm within seed."""
    plan = read_plan(root)
    return [arm_config(plan, loss, arm, seed) for seed in SEEDS for arm in ARMS for loss in sw.MAIN_LOSSES]


def longer(c: TrainConfig) -> TrainConfig:
    """``c`` at :data:`LENGTH` iterations: the cosine schedule over the longer horizon and the same number of
    evaluations (every ``LENGTH // 8``). ValueError for a run that is not the tier's cosine run of 13,500."""
    if c.schedule != "cosine" or c.iterations != BASE_LENGTH or c.schedule_iterations not in (0, BASE_LENGTH):
        raise ValueError(f"{ID} lengthens the tier's cosine runs of {BASE_LENGTH} iterations; got schedule "
                         f"{c.schedule!r}, {c.iterations} iterations, horizon {c.schedule_iterations}")
    return dataclasses.replace(c, iterations=LENGTH, schedule_iterations=0, eval_every=max(1, LENGTH // EVALS))


def test_configs(root=None) -> list[TrainConfig]:
    """Every run of the follow-up, seed by seed (the first seeds are whole first)."""
    return [longer(c) for c in twin_configs(root)]


def last_quarter_changes(main_runs: pd.DataFrame, evals: pd.DataFrame) -> pd.Series:
    """Per seed, the change of the pooled SEC − none gap (mean over losses) over the main comparison's last quarter:
    from its last evaluation at or before 3/4 of the run (iteration 10,122) to its final one (13,500).
    ``main_runs`` (key, loss, arm, seed) and ``evals`` (key, step, R@1)."""
    steps = sorted(evals["step"].unique())
    last = steps[-1]
    before = max(s for s in steps if s <= 0.75 * last)
    e = evals[evals["step"].isin((before, last))].merge(main_runs, on="key")
    w = e.pivot_table(index=["seed", "loss", "step"], columns="arm", values="R@1")
    gap = (w["sec"] - w["none"]).unstack("step")
    return (gap[last] - gap[before]).groupby(level="seed").mean()


def power_line(changes: pd.Series, n: int = len(SEEDS)) -> dict:
    """The registration's power line: the SD of the per-seed changes, the detectable effect of ``n`` seeds (80%
    power, two-sided, α = 0.05) and the largest |Δ| they can call stable, :data:`MARGIN` − that effect."""
    sd = float(np.std(np.asarray(changes, float), ddof=1))
    mde = float(min_detectable_effect(sd, n))
    return {"seeds_measured": int(len(changes)), "sd": sd, "seeds": int(n), "mde": mde, "stable_below": MARGIN - mde,
            "enough": bool(MARGIN - mde >= MIN_STABLE)}


def verdict(lo: float, hi: float, estimate: float, margin: float = MARGIN) -> str:
    """The registered rule on Δ's 95% interval [lo, hi]: 'stable', 'still moving' or 'undecided'."""
    if -margin < lo and hi < margin:
        return "stable"
    if (lo > 0 or hi < 0) and abs(estimate) > margin:
        return "still moving"
    return "undecided"


def deltas(runs: pd.DataFrame) -> pd.DataFrame:
    """Per comparison and seed, Δ: the change of the pooled gap from 13,500 to :data:`LENGTH` iterations.
    ``runs``: one row a run with columns loss, arm (:data:`ARMS`), seed, length and R@1 (the final)."""
    w = runs.pivot_table(index=["seed", "loss", "length"], columns="arm", values="R@1")
    out = []
    for name, a, b in COMPARISONS:
        gap = (w[a] - w[b]).unstack("length")
        d = (gap[LENGTH] - gap[BASE_LENGTH]).groupby(level="seed").mean()
        out += [{"comparison": name, "seed": s, "delta": float(v)} for s, v in d.items()]
    return pd.DataFrame(out)


def family(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per comparison (each its own family, so no adjustment): Δ's mean, 95% interval, p (t-test against 0),
    seeds, detectable effect and the registered verdict; also the gap at each length."""
    rows = []
    d = deltas(runs)
    w = runs.pivot_table(index=["seed", "loss", "length"], columns="arm", values="R@1")
    for name, a, b in COMPARISONS:
        x = d[d["comparison"] == name]["delta"].to_numpy(float)
        n = len(x)
        m, se = float(x.mean()), float(x.std(ddof=1) / math.sqrt(n))
        half = float(stats.t.ppf(0.975, n - 1)) * se
        p = float(stats.ttest_1samp(x, 0.0).pvalue)
        gap = (w[a] - w[b]).groupby(level=["length", "seed"]).mean().groupby(level="length").mean()
        rows.append({"comparison": name, "gap_13500": float(gap[BASE_LENGTH]), f"gap_{LENGTH}": float(gap[LENGTH]),
                     "delta": m, "lo": m - half, "hi": m + half, "p": p, "seeds": n,
                     "mde": float(min_detectable_effect(float(x.std(ddof=1)), n)),
                     "verdict": verdict(m - half, m + half, m)})
    return pd.DataFrame(rows)


def test_runs(root=None) -> pd.DataFrame:
    """The committed runs (``test/runs.parquet``), once all of :func:`test_configs` are there; KeyError (no evidence
    yet) before, saying how many are."""
    return followup.all_committed(folder(root) / "test" / "runs.parquet", test_configs(root), ID)


def stage_runs(root=None) -> pd.DataFrame:
    """The committed runs in :func:`sec_lib.chapters.evidence.tier_runs`' columns; empty before any is committed."""
    return followup.committed_runs(folder(root) / "test")


def arm_of(cfg: dict) -> str:
    """The main comparison's arm of a run's config (a dict): 'none', 'sec' or 'l2reg'."""
    if not cfg.get("eta"):
        return "none"
    return "l2reg" if cfg.get("mu") == "zero" else "sec"


#: The study as the driver trains it (:func:`sec_lib.runs.study.run`; ``make followup-length``).
STUDY = study.Study("longer-runs", FOLDER, __doc__.splitlines()[0],
                    study.fixed_runs(test_configs, f"{ID} test"),
                    stages=("test",))
