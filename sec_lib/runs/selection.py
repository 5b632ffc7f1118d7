"""The decisive tier's held-out selection: η (and the L2 weight) per loss, with 3 seeds per grid point, grids
that grow until the choice is interior, and η = 0 allowed to win.

Pre-registered (``data/reference/decisive/README.md``):

- every grid point trains :data:`SEEDS` (3 pilot seeds) on the 400 held-out training classes, under the schedule
  the pilot chose; the score of a point is its mean held-out R@1 over the seeds;
- the η grid is :data:`ETA_GRID` with η = 0 (no regularizer) as a point of its own; the L2 grid is :data:`L2_GRID`;
- the choice is the best point (ties: the smaller weight). When the best *nonzero* point sits at an edge of its
  grid (its smallest or largest nonzero weight) the grid grows by one point on that side (÷10 or ×10), at most
  :data:`MAX_EXTENSIONS` times per side; a choice still at an edge after that is used and flagged;
- when η = 0 wins, SEC was not selected for that loss: the page says so, and still tests the best nonzero η,
  flagged.

Paired on the seed, the η = 0 runs and the chosen η's runs give the SD of the paired differences that the seed
plan needs (:func:`sec_lib.runs.plan.seed_mean_sd`).
"""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from . import sweeps as sw
from .schedules import schedule

ETA_GRID = (0.005, 0.05, 0.1, 0.5, 1.0)
#: Relative (scale-free) SEC's held-out η grid (the scale chapter; the gpu profile's).
RELATIVE_GRID = (0.1, 1.0, 10.0)
#: The kinds of weight a held-out selection chooses: SEC's η, the L2 weight (μ = 0), relative SEC's η.
KINDS = ("sec", "l2reg", "relative")
#: How a flag names each kind's regularizer (:meth:`Choice.flags_for`).
KIND_NAMES = {"sec": "SEC", "l2reg": "L2-reg", "relative": "relative SEC"}
L2_GRID = (0.001, 0.005, 0.01)
SEEDS = (1000, 1001, 1002)
MAX_EXTENSIONS = 2
FACTOR = 10.0


@dataclass(frozen=True)
class Choice:
    """A selection's outcome for one loss and one regularizer kind."""
    weight: float                 # the chosen weight (0: no regularizer won)
    best_nonzero: float           # the best nonzero weight (what is tested when 0 won)
    scores: dict                  # weight -> mean held-out R@1 over the seeds
    grid: tuple                   # the nonzero weights trained so far, sorted
    edge: str | None              # 'low' / 'high' when the best nonzero weight sits at that edge, else None
    needs: float | None           # the next weight to train (an extension), or None when the choice is final

    @property
    def flags(self) -> list[str]:
        """:meth:`flags_for` SEC's η."""
        return self.flags_for("SEC")

    def flags_for(self, what: str) -> list[str]:
        """What the page flags about this choice, ``what`` naming the regularizer chosen ('SEC', 'L2-reg')."""
        out = []
        if self.weight == 0:
            out.append(f"{what} not selected (no regularizer scored best); the best nonzero weight is tested")
        if self.edge and self.needs is None:
            out.append(f"at the {self.edge} edge of its grid after {MAX_EXTENSIONS} extensions")
        return out


def first_round(n_losses: int) -> int:
    """The runs a selection of ``n_losses`` losses names before any grid grows: η = 0, :data:`ETA_GRID` and
    :data:`L2_GRID`, each at every seed of :data:`SEEDS`."""
    return n_losses * len(SEEDS) * (1 + len(ETA_GRID) + len(L2_GRID))


def grid_after(base: tuple, scores: dict) -> tuple:
    """The nonzero grid: ``base`` plus every extension point already scored."""
    return tuple(sorted({*base, *(w for w in scores if w > 0)}))


def choose(scores: dict, base: tuple = ETA_GRID, zero: bool = True, factor: float = FACTOR) -> Choice:
    """The choice from ``scores`` ({weight: mean held-out R@1}, complete points only; 0 is the no-regularizer
    point when ``zero``). Returns the next extension to train in ``needs`` while the best nonzero weight sits at
    an edge with extensions left on that side."""
    grid = grid_after(base, scores)
    missing = [w for w in grid if w not in scores] + ([0.0] if zero and 0.0 not in scores else [])
    if missing:
        raise ValueError(f"grid points without scores: {missing}; train them first")
    best_nonzero = max(grid, key=lambda w: (scores[w], -w))
    weight = max([*grid, *([0.0] if zero else [])], key=lambda w: (scores[w], -w))
    edge = "low" if best_nonzero == grid[0] else "high" if best_nonzero == grid[-1] else None
    used = {"low": sum(w < min(base) for w in grid), "high": sum(w > max(base) for w in grid)}
    needs = None
    if edge and used[edge] < MAX_EXTENSIONS:
        needs = grid[0] / factor if edge == "low" else grid[-1] * factor
    return Choice(weight, best_nonzero, dict(scores), grid, edge, needs)


def scores_of(runs: pd.DataFrame, seeds=None, metric: str = "R@1", by: str = "eta") -> dict:
    """{weight: mean ``metric`` over ``seeds``} from held-out runs (columns ``by`` (the weight: η, or a learning
    rate), seed, metric), for the weights whose every seed is there (``seeds``: default :data:`SEEDS`)."""
    seeds = SEEDS if seeds is None else seeds
    out = {}
    for w, g in runs.groupby(by):
        if set(seeds) <= set(g["seed"]):
            out[float(w)] = float(g[g["seed"].isin(seeds)][metric].mean())
    return out


def held_out_frame(results, by: str = "eta") -> pd.DataFrame:
    """Columns ``by`` (the config field a grid varies: η, or ``lr``), seed and R@1 of held-out RunResults (None
    skipped), a run that did not finish scoring −∞ so that it cannot win: what :func:`scores_of` averages."""
    return pd.DataFrame([{by: getattr(r.config, by), "seed": r.config.seed,
                          "R@1": r.metrics.get("R@1") if r.status == "done" else float("-inf")}
                         for r in results if r is not None], columns=[by, "seed", "R@1"])


def paired_diffs(runs: pd.DataFrame, weight: float, metric: str = "R@1") -> pd.DataFrame:
    """Per seed: ``metric`` at ``weight`` minus at 0 (columns seed, diff), for the seed plan's SD."""
    w = runs.pivot_table(index="seed", columns="eta", values=metric)
    if 0.0 not in w or weight not in w:
        return pd.DataFrame(columns=["seed", "diff"])
    return (w[weight] - w[0.0]).dropna().rename("diff").reset_index()


def configs(loss: str, weights, shape: str, length: int, kind: str = "sec", profile: str = "reference") -> list:
    """The held-out runs of ``weights`` for ``loss`` (``kind`` 'sec': η with μ the batch mean, 0 = no
    regularizer; 'l2reg': the L2 weight, μ = 0; 'relative': relative SEC's η) under the pilot's ``shape`` and ``length``, every seed of
    :data:`SEEDS`; evaluated at the end only, batch statistics every 20 steps (the choice needs neither more)."""
    if kind not in KINDS:
        raise ValueError(f"kind {kind!r} is not valid; valid values: {', '.join(KINDS)}")
    p = sw.glyph_profile(profile)
    out = []
    for w in weights:
        variant = "none" if w == 0 else "sec" if kind == "relative" else kind
        extra = {"relative": True} if kind == "relative" and w else {}
        for seed in SEEDS:
            out.append(sw.config(p, loss, variant, seed, holdout_classes=p.holdout_classes, optimizer="adam", lr=3e-3,
                                 eval_every=0, stats_every=20, **({"eta": float(w)} if w else {}), **extra,
                                 **schedule(shape, length)))
    return out


#: SGD's held-out learning-rate grid for the Adam-vs-SGD chapter (the reference tier's), grown like the others.
LR_GRID = (0.01, 0.03, 0.1, 0.3, 1.0)
#: The rate selections: SGD without a regularizer, and SGD with SEC at the paper's η (each optimizer arm at its own
#: rate, as in the reference tier's pilot).
RATE_ARMS = ("sgd", "sgd+sec")


def rate_configs(arm: str, rates, shape: str, length: int, profile: str = "reference", loss: str = "semihard") -> list:
    """The held-out runs of SGD's rate selection for ``arm`` (:data:`RATE_ARMS`) at ``rates``: ``loss`` (semihard,
    as the reference tier's pilot) without a regularizer or with SEC at the paper's η, under the pilot's schedule,
    every seed of :data:`SEEDS`, evaluated at the end."""
    if arm not in RATE_ARMS:
        raise ValueError(f"arm {arm!r} is not valid; valid values: {', '.join(RATE_ARMS)}")
    p = sw.glyph_profile(profile)
    return [sw.config(p, loss, "sec" if arm == "sgd+sec" else "none", seed, holdout_classes=p.holdout_classes,
                      optimizer="sgd", lr=float(lr), eval_every=0, stats_every=20, **schedule(shape, length))
            for lr in rates for seed in SEEDS]
