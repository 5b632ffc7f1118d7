"""C4W, a registered follow-up to the primary test: does SEC add anything to the authors' own baseline, which trains
with weight decay?

Registered before any of its runs (``data/followups/weight-decay/README.md``):

- **Why.** Every decisive run trains with ``weight_decay = 0``; the authors' code trains with Adam's weight decay
  (2.5e-3 on CUB and Cars, 1e-5 on SOP and In-Shop) on every parameter except BatchNorm's
  (:data:`sec_lib.runs.benchmark_settings`). On glyphs every regularizer gains about the same over none, so the
  primary test may only say that an unregularized network gains from any regularizer.
- **The form.** Adam's coupled weight decay on every parameter but the BatchNorm layers'
  (:func:`sec_lib.runs.train.decay_groups`); ``TrainConfig.weight_decay`` in the store key as before (no committed
  run has a nonzero value, so no key changed).
- **Selection 1, the weight decay** (held-out classes). For each main loss without a regularizer: the grid
  :data:`WD_GRID` with the tier's η = 0 held-out runs as the point 0, 3 seeds a point, the tier's edge rule
  (:func:`sec_lib.runs.selection.choose`: the best mean held-out R@1, ties to the smaller weight, the nonzero grid
  grown ×/÷ 10 at an edge, twice a side at most). If 0 wins, the best nonzero weight is tested, flagged: the
  follow-up then asks whether SEC adds to a baseline with the authors' kind of weight decay at the weight closest to
  helping, not to a tuned one.
- **Selection 2, SEC's η under that weight decay** (held-out classes): the tier's chosen η and ×/÷ 10 around it
  (:func:`eta_grid`), the point 0 being selection 1's chosen run, 3 seeds, the same edge rule (0 may win; then the
  best nonzero η is tested, flagged).
- **Test.** none + WD and SEC + WD at the chosen weights, the four main losses, seeds 0-4 on the test classes,
  otherwise the main comparison's runs (:func:`test_configs`).
- **Families** (the book's rule: a pooled row alone, its per-loss components in a family of their own):
  the pooled (SEC + WD) − (none + WD), per seed the mean over the four losses, t-test, alone; the four per-loss
  rows, Holm. Outside the families, descriptive: (none + WD) − none and (SEC + WD) − SEC, pooled the same way
  (the runs without weight decay are the main comparison's).
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd

from ..report import paired_diff, pooled_diff, with_verdict
from . import followup, selection, study, tier
from .config import TrainConfig
from .decisive import read_plan
from .mainstage import arm_config

#: The question it answers, as the pages name it.
QUESTION = "does SEC add anything to a baseline trained with the authors' weight decay?"
#: The follow-up's id on the pages.
ID = "C4W"
#: The nonzero weight-decay grid of selection 1 (the point 0 is the tier's η = 0 held-out runs).
WD_GRID = (2.5e-4, 2.5e-3, 2.5e-2)
#: The test seeds: the main comparison's five (the plan's count).
SEEDS = tuple(range(5))
#: The four main losses, each selected and tested.
LOSSES = ("triplet", "semihard", "npair", "ms")
FOLDER = ("data", "followups", "weight-decay")
FOLDER_TEXT = "/".join(FOLDER) + "/"
#: The Holm family of the four per-loss rows (the pooled row is a family of its own).
FAMILY = "C4W: per loss"


def folder(root=None) -> Path:
    """:data:`FOLDER` of the repository (or of ``root``)."""
    return Path(root or tier.REPO).joinpath(*FOLDER)


def _round(w: float) -> float:
    """A grid weight written as it reads (0.05 / 10 is 0.005, not 0.005000000000000001)."""
    return float(f"{w:.6g}")


def eta_grid(eta: float) -> tuple:
    """Selection 2's first nonzero grid: the tier's chosen η and ×/÷ 10 around it."""
    return tuple(_round(x) for x in (eta / selection.FACTOR, eta, eta * selection.FACTOR))


def wd_configs(loss: str, weights, plan=None) -> list[TrainConfig]:
    """Selection 1's held-out runs of ``loss`` without a regularizer at each weight decay of ``weights`` (0: the
    tier's own η = 0 selection runs), every seed of :data:`~sec_lib.runs.selection.SEEDS`."""
    if loss not in LOSSES:
        raise ValueError(f"loss {loss!r} is not selected by this follow-up; valid values: {', '.join(LOSSES)}")
    plan = plan or followup.tier_plan()
    base = selection.configs(loss, (0.0,), plan.shape, plan.length)
    return [dataclasses.replace(c, weight_decay=float(w)) for w in weights for c in base]


def eta_configs(loss: str, etas, weight_decay: float, plan=None) -> list[TrainConfig]:
    """Selection 2's held-out runs of ``loss``: SEC at each η of ``etas`` (0: no regularizer, selection 1's run)
    under ``weight_decay``, every seed of :data:`~sec_lib.runs.selection.SEEDS`."""
    if loss not in LOSSES:
        raise ValueError(f"loss {loss!r} is not selected by this follow-up; valid values: {', '.join(LOSSES)}")
    plan = plan or followup.tier_plan()
    return [dataclasses.replace(c, weight_decay=float(weight_decay))
            for c in selection.configs(loss, etas, plan.shape, plan.length)]


def choose(store, loss: str, plan=None):
    """(``{"wd": Choice, "eta": Choice}`` once both selections of ``loss`` are final, else None; every run of its
    grids so far; the runs still to train). Selection 2 starts when selection 1 is final."""
    plan = plan or followup.tier_plan()
    wd, grid, todo = study.grid_choice(store, lambda ws: wd_configs(loss, ws, plan), (0.0, *WD_GRID),
                                       study.rule(WD_GRID, by="weight_decay"))
    if wd is None:
        return None, grid, todo
    base = eta_grid(plan.eta[loss])
    eta, grid2, todo2 = study.grid_choice(store, lambda es: eta_configs(loss, es, tested(wd), plan),
                                          (0.0, *base), study.rule(base))
    return ({"wd": wd, "eta": eta} if eta is not None else None), grid + [c for c in grid2 if c not in grid], todo2


def tested(choice) -> float:
    """The weight a choice tests: the chosen one, or the best nonzero one where 0 won (flagged)."""
    return float(choice.weight or choice.best_nonzero)


def choice_record(loss: str, both: dict) -> dict:
    """``choices.json``'s entry for ``loss``: each selection's chosen and tested weights, flags and scores."""
    wd, eta = both["wd"], both["eta"]
    return {"weight_decay": float(wd.weight), "weight_decay_tested": tested(wd),
            "eta": float(eta.weight), "eta_tested": tested(eta),
            "flags": [*(f"weight decay: {f}" for f in wd.flags_for("weight decay")), *eta.flags_for("SEC")],
            "scores": {"weight_decay": followup.scores_json(wd.scores), "eta": followup.scores_json(eta.scores)}}


def test_configs(choices: dict, root=None) -> list[TrainConfig]:
    """none + WD and SEC + WD for the four main losses at :data:`SEEDS`, seed by seed: the main comparison's runs
    (:func:`sec_lib.runs.mainstage.arm_config`) with the tested weight decay and, for SEC, the tested η."""
    plan = read_plan(root)
    out = []
    for seed in SEEDS:
        for arm in ("none", "sec"):
            for loss in LOSSES:
                ch = choices[loss]
                c = dataclasses.replace(arm_config(plan, loss, arm, seed), weight_decay=float(ch["weight_decay_tested"]))
                out.append(dataclasses.replace(c, eta=float(ch["eta_tested"])) if arm == "sec" else c)
    return out


def families(runs: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The two registered families from test runs ``runs`` (columns loss, arm 'none' / 'sec' (both with weight
    decay), seed, R@1, and optionally status): (the pooled (SEC + WD) − (none + WD) row, alone; the four per-loss
    rows, one Holm family), each with the book's verdict, adjusted p and detectable effect."""
    pooled = pooled_diff(runs, "arm", "none", "sec", "R@1")
    row = pd.DataFrame([{"comparison": "(SEC + WD) − (none + WD)", "metric": "R@1",
                         **{k: pooled[k] for k in ("estimate", "ci_lo", "ci_hi", "p_value", "n")}}])
    per = paired_diff(runs, ["loss"], "arm", "none", "sec", metrics=["R@1"])
    return with_verdict(row, +1, family=ID), with_verdict(per, +1, family=FAMILY)


def read_choices(root=None) -> dict:
    return followup.read_json(folder(root) / "choices.json")


def test_runs(root=None) -> pd.DataFrame:
    """The committed test runs, once ``choices.json`` is written and every test run is there; KeyError before."""
    return followup.committed_test_runs(folder(root), lambda ch: test_configs(ch, root), ID)


def stage_runs(stage: str, root=None) -> pd.DataFrame:
    """The committed runs of ``stage`` ('selection', 'test'); empty before the stage is committed."""
    return followup.committed_runs(folder(root) / stage)


def train(session, study_) -> dict:
    """Train the follow-up, resumably: both selections of every loss (grown until final), ``choices.json``, then the
    test runs, each exported after every chunk of ``jobs`` runs. The tier's η = 0 selection runs (the point 0 of
    selection 1) and this follow-up's committed runs are restored first and never retrained. Returns the choices."""
    store, jobs = session.store, session.jobs
    out = study_.path()
    plan = followup.tier_plan()
    choosers = {loss: (lambda loss=loss: choose(store, loss, plan)) for loss in LOSSES}
    final = {loss: choice_record(loss, both)
             for loss, both in study.select(store, choosers, out / "selection", jobs, f"{ID} selection").items()}
    followup.settle_choices(out / "choices.json", final)
    print(f"{ID} choices: " + "; ".join(f"{loss} weight decay {v['weight_decay_tested']:g} η {v['eta_tested']:g}"
                                       for loss, v in final.items()), flush=True)
    study.train_named(store, test_configs(final), out / "test", jobs, f"{ID} test")
    return final


#: The study as the driver trains it (:func:`sec_lib.runs.study.run`; ``make followup-weight-decay``).
STUDY = study.Study("weight-decay", FOLDER, __doc__.splitlines()[0], train,
                    stages=("selection", "test"), reads=(("decisive", "selection"),))
