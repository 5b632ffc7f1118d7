"""The schedule pilot of the decisive tier: which learning-rate schedule, and how long, makes runs converge.

Runs are trained on held-out training classes only (never the test classes), with pilot seeds that no
reported run uses, and committed under ``data/reference/decisive/pilot/``. Pre-registered before any of
them trained (this docstring is the registration; :data:`RULE` states the choice in one line):

- **Shapes.** ``cosine``: cosine decay of the learning rate to 0 over the run. ``step``: ×0.1 at 60% and
  again at 85% of the run. Both keep Adam and the reference tier's chosen rate (3e-3; chosen on held-out
  classes by that tier's pilot).
- **Lengths.** Each shape at ``T`` and at ``1.5 T`` (:data:`LENGTHS`). Converged means that training longer
  would not help: the runs of length ``1.5 T`` gain less than :data:`CONVERGED_GAIN` = 0.3 R@1 points over the
  runs of length ``T`` of the same shape, loss and seed, averaged over losses and seeds (its 95% t-interval
  over the (loss, seed) pairs is shown beside it). A decaying schedule flattens any curve, so flatness at the
  end of one run is not the rule.
- **Losses and seeds.** semihard and ms (a triplet loss and a pair-weighting loss), no regularizer, seeds
  :data:`SEEDS`, held-out R@1 evaluated every 250 iterations.
- **Choice.** Among the shapes that converge at ``T``, the one with the higher mean held-out R@1 at ``T``;
  if neither converges, the pilot is extended to the next length pair (:data:`LENGTH_PAIRS`: 6,000 against
  9,000, then 9,000 against 13,500, then 13,500 against 20,250) before anything else trains.
- **If no shape converges at the last pair** (:func:`fallback`): the tier trains at the last pair's ``T``
  (13,500), with the shape of higher mean held-out R@1 there, and says on every page that reads it that its runs
  are not converged by this rule, with the measured remaining gain (the last pair's gain and interval) beside.

The third pair was added on 2026-11-25, when 6 of the 12 runs of 9,000 iterations were done and gained about
0.5 held-out R@1 over their 6,000-iteration twins: it continues the registered rule (each pair 1.5x the last,
same shapes, losses, seeds and margin) so that the pilot does not stop when the second pair fails too; nothing
else about the pilot changed.

The fourth pair and the fallback were added on 2026-11-26, when 4 of the 12 runs of 13,500 iterations were
done (seed 1000 of each shape and loss; their gains over 9,000 were +0.29 to +1.02, mean +0.60): the gains had
fallen from +1.44/+1.07 (first pair) to +0.75/+0.76 (second) and seemed to fall by less than half each time, so
the rule might never be met within a tier that can be trained (a 20,250-iteration run takes about 20 minutes of
one core on the AVX-512 EPYC, 50 on the AVX2 one). The pilot stops at the fourth pair: the fallback above bounds
the tier's cost and keeps its runs comparable, and nothing else about the pilot changed.

The step shape's first milestone (60% of ``T`` = 2,400 for ``T`` = 4,000) comes after the convergence
chapter's early window (2,000 iterations), so the early curve of a step run is still a prefix of its full run.
"""
from __future__ import annotations

import math

import pandas as pd
from scipy import stats

from . import sweeps as sw
from .config import TrainConfig
from .schedules import SHAPES, schedule

LENGTHS = (4000, 6000)            # T and 1.5 T
#: The length pairs in the order the pilot tries them: the next pair only when no shape converged at the last.
LENGTH_PAIRS = (LENGTHS, (6000, 9000), (9000, 13500), (13500, 20250))
LOSSES = ("semihard", "ms")
SEEDS = (1000, 1001, 1002)
CONVERGED_GAIN = 0.3
EVAL_EVERY = 250
TIER = "decisive"


def rule(pair=LENGTHS) -> str:
    """The registered choice for one length pair ``(T, 1.5 T)``, in one line."""
    t, longer = pair
    return (f"a shape converges at T = {t} when its {longer}-iteration runs gain less than {CONVERGED_GAIN} "
            f"held-out R@1 points over its {t}-iteration runs (mean over {len(LOSSES)} losses x {len(SEEDS)} seeds); "
            "of the shapes that converge, the higher held-out R@1 at T wins")


RULE = rule(LENGTHS)


def configs(profile: str = "reference", pairs: int = 1) -> list[TrainConfig]:
    """Every run of the schedule pilot's first ``pairs`` length pairs, shortest first (so the first half of the
    pilot is already usable)."""
    p = sw.glyph_profile(profile)
    out = []
    for length in sorted({n for pair in LENGTH_PAIRS[:pairs] for n in pair}):
        for seed in SEEDS:
            for loss in LOSSES:
                for shape in SHAPES:
                    out.append(sw.config(p, loss, "none", seed, holdout_classes=p.holdout_classes, optimizer="adam",
                                         lr=3e-3, eval_every=EVAL_EVERY, **schedule(shape, length)))
    return out


def table(results) -> pd.DataFrame:
    """One row per pilot run: shape, length, loss, seed, held-out R@1 (``results``: RunResults or None)."""
    rows = []
    for r in results:
        if r is None or r.status != "done":
            continue
        c = r.config
        rows.append({"shape": c.schedule, "length": c.iterations, "loss": c.loss, "seed": c.seed,
                     "R@1": r.metrics.get("R@1", math.nan)})
    return pd.DataFrame(rows, columns=["shape", "length", "loss", "seed", "R@1"])


def convergence(runs: pd.DataFrame, pair: tuple = LENGTHS) -> pd.DataFrame:
    """Per shape: mean held-out R@1 at T and at 1.5 T (``pair``), the gain (paired on loss and seed) with its 95%
    t-interval, the pairs used, and whether it converged by :data:`RULE`."""
    rows = []
    for shape in SHAPES:
        w = runs[runs["shape"] == shape].pivot_table(index=["loss", "seed"], columns="length", values="R@1")
        short, long_ = pair
        if short not in w or long_ not in w:
            rows.append({"shape": shape, "pairs": 0})
            continue
        d = (w[long_] - w[short]).dropna()
        n = len(d)
        half = stats.t.ppf(0.975, n - 1) * d.std(ddof=1) / math.sqrt(n) if n > 1 else math.nan
        rows.append({"shape": shape, "pairs": n, f"R@1 at {short}": float(w[short].mean()),
                     f"R@1 at {long_}": float(w[long_].mean()), "gain": float(d.mean()) if n else math.nan,
                     "gain_lo": float(d.mean() - half) if n > 1 else math.nan,
                     "gain_hi": float(d.mean() + half) if n > 1 else math.nan,
                     "converged": bool(n and d.mean() < CONVERGED_GAIN)})
    return pd.DataFrame(rows)


def choice(conv: pd.DataFrame, pair: tuple = LENGTHS) -> str | None:
    """The chosen shape at the pair's ``T`` by :data:`RULE` (None while no shape has converged or pairs are
    missing)."""
    full = len(LOSSES) * len(SEEDS)
    ok = conv[(conv["pairs"] == full) & conv.get("converged", False)]
    if ok.empty:
        return None
    return str(ok.sort_values(f"R@1 at {pair[0]}", ascending=False)["shape"].iloc[0])


def fallback(conv: pd.DataFrame, pair: tuple = LENGTH_PAIRS[-1]) -> str | None:
    """The shape the tier trains when no shape converged at the last length pair: the higher mean held-out R@1 at
    the pair's ``T``; None while the pair is incomplete or when a shape converged (then :func:`choice` decides)."""
    full = len(LOSSES) * len(SEEDS)
    if not (conv.get("pairs", pd.Series(dtype=int)) == full).all() or conv["converged"].any():
        return None
    return str(conv.sort_values(f"R@1 at {pair[0]}", ascending=False)["shape"].iloc[0])


def last_quarter_gain(evals: pd.DataFrame, iterations: int, metric: str = "R@1") -> float:
    """R@1 at the end of a run minus R@1 at 75% of it (the nearest evaluation at or before), NaN without one."""
    ev = evals.dropna(subset=[metric]).sort_values("step")
    before = ev[ev["step"] <= 0.75 * iterations]
    end = ev[ev["step"] == ev["step"].max()]
    if before.empty or end.empty:
        return math.nan
    return float(end[metric].iloc[-1] - before[metric].iloc[-1])


