"""P1c, a registered follow-up to P1: does SEC gain less when fine-tuning than from scratch, on fresh seeds?

Registered before any of its runs (``data/followups/regime-seeds/README.md``):

- **Why.** The pretrained page's regime interaction, (SEC − none fine-tuned) − (SEC − none from scratch), pooled
  over the four main losses, is −0.40 [−0.67, −0.13] R@1 on seeds 0-4 (raw p 0.015; Holm over its registered family
  of five gives 0.077, so it reads inconclusive). Those seeds keep that registered verdict.
- **Runs.** The decisive ``pretrained`` stage's none and SEC arms (fine-tuned from the committed glyph backbone at
  the tier's held-out rates, SEC at the held-out η) and their from-scratch twins (the main comparison's none and SEC
  arms), the four main losses, on the new seeds :data:`SEEDS` only: each run is a committed run of seed 0 with
  another seed (:func:`test_configs`).
- **Seeds.** A hint that did not survive Holm likely overstates its size, so the test is powered for half the
  observed effect, with the SD of the per-seed pooled interaction in the committed runs, at 80% power for a
  one-sided t-test at α = 0.05 (:func:`seed_plan`: :func:`sec_lib.runs.plan.planned_seeds` with ``sides=1``, at
  least 5, capped at :data:`CAP`).
- **Test.** One test, one-sided in the observed direction (SEC gains less when fine-tuning): per new seed the
  pooled interaction, a one-sample t-test against 0, ``alternative='less'``; a family of its own.
- **Verdict** (:func:`verdict`): p < 0.05, *confirmed*: SEC gains less when fine-tuning, the opposite of P1's
  prediction, so P1 reads *not reproduced* (opposite). Otherwise *not confirmed*: P1 stays *inconclusive*, with the
  detectable effect beside it.
"""
from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from ..report import min_detectable_effect
from . import followup, study, tier
from .config import TrainConfig
from .decisive import read_plan
from .plan import planned_seeds

#: The question it answers, as the pages name it.
QUESTION = "does SEC gain less when fine-tuning than from scratch, on fresh seeds?"
#: The follow-up's id on the pages.
ID = "P1c"
#: The seed count's cap.
CAP = 10
#: The first new seed (seeds 0-4 are the registered stage's).
FIRST_SEED = 5
#: The level of the one-sided test.
ALPHA = 0.05
LOSSES = ("triplet", "semihard", "npair", "ms")
ARMS = ("none", "sec")
REGIMES = ("fine-tuned", "from scratch")
FOLDER = ("data", "followups", "regime-seeds")
FOLDER_TEXT = "/".join(FOLDER) + "/"
#: The seed count registered: :func:`seed_plan` on the committed runs (tested to agree).
N_SEEDS = 10
#: The new seeds.
SEEDS = tuple(range(FIRST_SEED, FIRST_SEED + N_SEEDS))


def folder(root=None) -> Path:
    """:data:`FOLDER` of the repository (or of ``root``)."""
    return Path(root or tier.REPO).joinpath(*FOLDER)


def arm_of(cfg: dict, eta: dict) -> str | None:
    """'none', 'sec' (SEC at the held-out η ``eta[loss]``, μ the batch mean, not relative) or None (another arm)
    for a run's config (a dict)."""
    if not cfg.get("eta"):
        return "none"
    if cfg.get("mu") == "batch" and not cfg.get("relative") and math.isclose(cfg["eta"], eta[cfg["loss"]]):
        return "sec"
    return None


def committed(stage: str, root=None) -> pd.DataFrame:
    """The decisive ``stage``'s committed runs of :data:`ARMS` (columns key, config, loss, arm, seed, R@1)."""
    eta = read_plan(root).eta
    runs = pd.read_parquet(tier.tier_dir("decisive", root) / stage / "runs.parquet")
    cfg = [json.loads(c) for c in runs["config"]]
    runs = runs.assign(arm=[arm_of(c, eta) for c in cfg], loss=[c["loss"] for c in cfg])
    return runs[runs["arm"].notna()].reset_index(drop=True)


def templates(root=None) -> dict:
    """{(loss, arm, regime): the committed seed-0 config}: the ``pretrained`` stage's (fine-tuned) and the main
    comparison's (from scratch)."""
    out = {}
    for regime, stage in zip(REGIMES, ("pretrained", "main")):
        runs = committed(stage, root)
        for _, r in runs[runs["seed"] == 0].iterrows():
            out[(r["loss"], r["arm"], regime)] = TrainConfig(**json.loads(r["config"]))
    missing = [(l, a, g) for l in LOSSES for a in ARMS for g in REGIMES if (l, a, g) not in out]
    if missing:
        raise KeyError(f"{ID} needs the decisive tier's seed-0 runs of {missing}")
    return out


def test_configs(root=None, seeds=SEEDS) -> list[TrainConfig]:
    """Every run, seed by seed (loss, arm, regime within a seed): the seed-0 templates with another seed."""
    t = templates(root)
    return [dataclasses.replace(t[(loss, arm, regime)], seed=int(s))
            for s in seeds for loss in LOSSES for arm in ARMS for regime in REGIMES]


def interaction(runs: pd.DataFrame) -> pd.Series:
    """Per seed, the pooled interaction: the mean over losses of (SEC − none fine-tuned) − (SEC − none from scratch).
    ``runs``: columns seed, loss, arm (:data:`ARMS`), regime (:data:`REGIMES`), R@1."""
    w = runs.pivot_table(index=["seed", "loss", "regime"], columns="arm", values="R@1")
    gap = (w["sec"] - w["none"]).unstack("regime")
    return (gap["fine-tuned"] - gap["from scratch"]).groupby(level="seed").mean()


def committed_interaction(root=None) -> pd.Series:
    """:func:`interaction` of the registered stage's seeds 0-4 (its verdict stays the registered one)."""
    frames = [committed(stage, root).assign(regime=regime) for regime, stage in zip(REGIMES, ("pretrained", "main"))]
    runs = pd.concat(frames)
    runs = runs[runs["seed"].isin(set(frames[0]["seed"]))]
    return interaction(runs)


def seed_plan(observed: pd.Series) -> dict:
    """The registration's seed count from the committed seeds' per-seed interactions ``observed``: powered for half
    the observed mean effect, with their SD, one-sided at α = 0.05 and 80% power, 5 to :data:`CAP` seeds."""
    x = np.asarray(observed, float)
    effect, sd = abs(float(x.mean())) / 2, float(x.std(ddof=1))
    n, mde = planned_seeds(sd, target=effect, alpha=ALPHA, power=0.8, floor=5, cap=CAP, sides=1)
    return {"observed": float(x.mean()), "effect": effect, "sd": sd, "seeds": int(n), "mde": float(mde)}


def verdict(p_less: float, alpha: float = ALPHA) -> str:
    """The registered rule: 'confirmed' (one-sided p below ``alpha``) or 'not confirmed'."""
    return "confirmed" if p_less < alpha else "not confirmed"


#: What each outcome means for P1 (the paper predicts SEC gains more, or no less, when fine-tuning).
P1_READING = {"confirmed": "not reproduced", "not confirmed": "inconclusive"}


def test(runs: pd.DataFrame) -> dict:
    """The one-sided test on the new seeds: the mean interaction, its 95% two-sided interval, the one-sided p
    (``alternative='less'``), the detectable effect (one-sided, 80%), the follow-up's verdict and P1's reading."""
    x = interaction(runs).to_numpy(float)
    n = len(x)
    m, sd = float(x.mean()), float(x.std(ddof=1))
    half = float(stats.t.ppf(0.975, n - 1)) * sd / math.sqrt(n)
    p = float(stats.ttest_1samp(x, 0.0, alternative="less").pvalue)
    v = verdict(p)
    return {"estimate": m, "lo": m - half, "hi": m + half, "p_one_sided": p, "seeds": n,
            "mde": float(min_detectable_effect(sd, n, sides=1)), "verdict": v, "P1": P1_READING[v]}


def test_runs(root=None) -> pd.DataFrame:
    """The committed runs (``test/runs.parquet``), once all of :func:`test_configs` are there; KeyError before."""
    return followup.all_committed(folder(root) / "test" / "runs.parquet", test_configs(root), ID)


def stage_runs(root=None) -> pd.DataFrame:
    """The committed runs in :func:`sec_lib.chapters.evidence.tier_runs`' columns; empty before any is committed."""
    return followup.committed_runs(folder(root) / "test")


#: The study as the driver trains it (:func:`sec_lib.runs.study.run`; ``make followup-regime``).
STUDY = study.Study("regime-seeds", FOLDER, __doc__.splitlines()[0],
                    study.fixed_runs(test_configs, f"{ID} test"),
                    stages=("test",))
