"""The decisive tier's main comparison, planned from the held-out selection and written down before it trains.

Pre-registered (``data/reference/decisive/README.md``):

- **The plan is computed, then frozen.** When the selection of the four main losses is final, the SD of the
  per-seed mean paired difference (SEC at the chosen η − no regularizer, held-out R@1) is estimated from the
  selection runs (:func:`sec_lib.runs.plan.seed_mean_sd`), and the seed count is the smallest n whose
  detectable effect is at most 0.5 R@1 points (:func:`sec_lib.runs.plan.planned_seeds`, 5 to 30). The plan is
  written to ``data/reference/decisive/plan.json`` (:func:`write_plan`) before any test-class run trains, and
  is never rewritten: a later call reads it back.
- **Primary arms**: the four main losses × {no regularizer, SEC at the held-out η} × the planned seeds. Where
  η = 0 won the selection, SEC was not selected for that loss and its best nonzero η is tested, flagged.
- **Secondary arms**, :data:`sec_lib.runs.plan.FLOOR` seeds: L2-reg (μ = 0) at its held-out weight, and SEC
  at the paper's η (:data:`sec_lib.runs.experiments.ETA_SEC`).
- Test seeds 0, 1, 2, … on the test classes (the selection's seeds and held-out classes are never reused);
  the pilot's schedule and length; R@1 evaluated :data:`EVALS` times over the run (the tiers page's
  last-quarter gain needs the last two), batch statistics every 20 steps.
"""
from __future__ import annotations

import json
import math
import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pandas as pd

from . import sweeps as sw
from .schedules import schedule
from .plan import FLOOR, TARGET, planned_seeds, seed_mean_sd
from .selection import Choice
from .store import run_key

#: Evaluations over a main-comparison run (every length / EVALS iterations).
EVALS = 8
#: The arms of the main comparison: (name, variant, seeds 'planned' or 'floor').
ARMS = (("none", "none", "planned"), ("sec", "sec", "planned"), ("l2reg", "l2reg", "floor"),
        ("sec_paper", "sec", "floor"))


@dataclass(frozen=True)
class Plan:
    """The frozen plan of the main comparison."""
    shape: str
    length: int
    seeds: int                    # planned seeds of the primary arms
    mde: float                    # the primary test's detectable effect at that count (R@1 points)
    sd: float                     # SD of the per-seed mean paired difference (held-out), used for the count
    sd_detail: dict               # direct / from_losses / per-loss SDs, seeds and losses behind them
    eta: dict                     # loss -> SEC's η tested (the held-out choice, or its best nonzero η)
    l2: dict                      # loss -> the L2 weight tested
    flags: dict = field(default_factory=dict)   # loss -> the selection's flags (not selected, at an edge)
    target: float = TARGET

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, sort_keys=True, ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> "Plan":
        return cls(**json.loads(text))


def make_plan(sec: dict, l2: dict, diffs: pd.DataFrame, shape: str, length: int) -> Plan:
    """The plan from the final selection: ``sec`` and ``l2`` ({loss: :class:`~sec_lib.runs.selection.Choice`}),
    ``diffs`` the held-out paired differences at each loss's tested η (columns loss, seed, diff)."""
    missing = [l for l in sw.MAIN_LOSSES if l not in sec or l not in l2]
    if missing:
        raise ValueError(f"the selection has no choice for {missing}; losses: {list(sw.MAIN_LOSSES)}")
    for name, ch in (*sec.items(), *l2.items()):
        if ch.needs is not None:
            raise ValueError(f"the selection of {name} is not final (it still needs {ch.needs:g})")
    sd = seed_mean_sd(diffs)
    if not (isinstance(sd["sd"], float) and math.isfinite(sd["sd"]) and sd["sd"] > 0):
        raise ValueError(f"the held-out paired differences give no usable SD ({sd}); train the selection first")
    n, mde = planned_seeds(sd["sd"])
    eta = {l: float(sec[l].weight or sec[l].best_nonzero) for l in sw.MAIN_LOSSES}
    weights = {l: float(l2[l].weight or l2[l].best_nonzero) for l in sw.MAIN_LOSSES}
    flags = {l: [*sec[l].flags, *(f"L2: {f}" for f in l2[l].flags_for("L2-reg"))] for l in sw.MAIN_LOSSES}
    return Plan(shape, int(length), int(n), float(mde), float(sd["sd"]), sd, eta, weights,
                {l: f for l, f in flags.items() if f})


def tested_weight(choice: Choice) -> float:
    """The weight the main comparison tests: the choice, or its best nonzero weight where 0 won."""
    return float(choice.weight or choice.best_nonzero)


def write_plan(plan: Plan, path: Path) -> Plan:
    """Write ``plan`` to ``path`` atomically unless a plan is already there; return the plan on disk (the
    first one written: a pre-registration is never rewritten)."""
    path = Path(path)
    if path.exists():
        return Plan.from_json(path.read_text())
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-plan-")
    with os.fdopen(fd, "w") as f:
        f.write(plan.to_json() + "\n")
    os.replace(tmp, path)
    return plan


def arm_config(plan: Plan, loss: str, arm: str, seed: int, profile: str = "reference"):
    """One run of ``arm`` (:data:`ARMS`) for ``loss`` and ``seed`` under ``plan``."""
    p = sw.glyph_profile(profile)
    variant = dict((a, v) for a, v, _ in ARMS)[arm]
    weight = {"sec": {"eta": plan.eta[loss]}, "l2reg": {"eta": plan.l2[loss]}, "sec_paper": {}, "none": {}}[arm]
    return sw.config(p, loss, variant, seed, optimizer="adam", lr=3e-3, eval_every=max(1, plan.length // EVALS),
                     stats_every=20, **weight, **schedule(plan.shape, plan.length))


def configs(plan: Plan, profile: str = "reference") -> list:
    """Every run of the main comparison, primary arms first, seed by seed (so a stopped tier is usable)."""
    seeds = {"planned": plan.seeds, "floor": FLOOR}
    out = {}
    for seed in range(max(plan.seeds, FLOOR)):
        for arm, _, count in ARMS:
            if seed < seeds[count]:
                for loss in sw.MAIN_LOSSES:          # SEC at the paper's η may be the chosen η: one run, one key
                    c = arm_config(plan, loss, arm, seed, profile)
                    out.setdefault(run_key(c), c)
    return list(out.values())


def plan_table(plan: Plan) -> pd.DataFrame:
    """The plan as a table for the tiers page: one row per loss with the η and L2 weight tested and their flags."""
    return pd.DataFrame([{"loss": l, "SEC η tested": plan.eta[l], "L2 weight tested": plan.l2[l],
                          "flags": "; ".join(plan.flags.get(l, [])) or "—"} for l in sw.MAIN_LOSSES])
