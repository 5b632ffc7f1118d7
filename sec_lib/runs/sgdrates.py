"""Q6c, a registered follow-up to Q6b: does SEC help under SGD when each loss and arm gets its own held-out rate?

Registered on 2026-11-28, before any of its test-class runs (``data/followups/sgd-rates/README.md``):

- **Why.** The decisive tier chose SGD's two rates (without SEC, and with SEC at the paper's η) on semihard alone
  (``sgd-selection``); Q6b's other losses reuse them. A held-out diagnostic (54 runs, now points of the grids in the
  ``selection`` folder here) showed that rate is no other loss's best.
- **Selection** (held-out classes only). For each of :data:`LOSSES` and each arm of
  :data:`~sec_lib.runs.selection.RATE_ARMS`, exactly the tier's own rule for SGD's rates
  (:func:`sec_lib.runs.decisive_studies.select_rates`): the grid :data:`~sec_lib.runs.selection.LR_GRID`, 3 seeds a rate,
  the best mean held-out R@1 (a diverged run scores −∞; ties: the smaller rate), grown ×/÷ 10 at an edge, twice a
  side at most. The runs are :func:`~sec_lib.runs.selection.rate_configs` (the tier's schedule and length), so the
  diagnostic's runs are points of these grids. Semihard is not selected again: the tier's ``sgd-selection`` is its
  per-loss selection already.
- **Test.** Q6b's own runs (the decisive ``optim`` stage's SGD configs, :data:`SEEDS`), with only the rate changed to
  the loss's and arm's choice: SEC at the paper's η, as in Q6b. Semihard's chosen rates are Q6b's, so its runs are
  Q6b's runs, reused.
- **Primary metric and family.** R@1, SEC − none averaged over the four main losses per seed (a loss with a failed
  run is left out, as in Q6b), one t-test against 0; with the four per-loss differences, one Holm family of 5
  (:data:`FAMILY`). Verdict words and margins are the book's (:func:`sec_lib.report.with_verdict`).
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd

from ..tempfiles import atomic_write_json
from . import followup, selection, study, tier
from .config import TrainConfig
from .followup import q6b_configs
from .store import run_key

#: The losses whose SGD rates this follow-up selects (semihard's are the tier's ``sgd-selection``).
LOSSES = ("triplet", "npair", "ms")
#: The four main losses its test pools, as Q6b.
TEST_LOSSES = ("triplet", "semihard", "npair", "ms")
#: The test seeds: Q6b's (the decisive tier's floor).
SEEDS = tuple(range(5))
#: The follow-up's folder under the repository: ``selection/`` (held-out runs), ``test/`` (test-class runs),
#: ``choices.json`` and its README.
FOLDER = ("data", "followups", "sgd-rates")
FOLDER_TEXT = "/".join(FOLDER) + "/"
#: Its Holm family's name.
FAMILY = "Q6c: SGD at per-loss rates"


def folder(root=None) -> Path:
    """:data:`FOLDER` of the repository (or of ``root``)."""
    return Path(root or tier.REPO).joinpath(*FOLDER)


def selection_configs(loss: str, arm: str, rates, plan=None) -> list[TrainConfig]:
    """The held-out runs of ``loss``'s rate selection for ``arm`` at ``rates`` (the tier's schedule and length)."""
    if loss not in LOSSES:
        raise ValueError(f"loss {loss!r} is not selected by this follow-up; valid values: {', '.join(LOSSES)}")
    plan = plan or followup.tier_plan()
    return selection.rate_configs(arm, rates, plan.shape, plan.length, loss=loss)


def choose(store, loss: str, arm: str, plan=None):
    """(the :class:`~sec_lib.runs.selection.Choice` once final, else None; every run of the grid so far, grown
    points included; the runs of it still to train): the tier's rule on :data:`~sec_lib.runs.selection.LR_GRID`,
    grown at an edge (:func:`sec_lib.runs.study.grid_choice`, as ``select_rates`` scores it)."""
    return study.grid_choice(store, lambda rates: selection_configs(loss, arm, rates, plan),
                             tuple(selection.LR_GRID), study.rule(selection.LR_GRID, by="lr", zero=False))


def reused_from(root=None) -> dict:
    """{(stage, whose): run keys}: the runs committed before this follow-up that its stages reuse (the test's
    semihard runs are Q6b's), for the page's account of what produced it."""
    return {("test", "Q6b's"): {run_key(c) for c in q6b_configs(root)}}


def test_configs(rates: dict, root=None) -> list[TrainConfig]:
    """Q6b's runs with each loss's and arm's rate from ``rates`` ({loss: {'sgd': lr, 'sgd+sec': lr}}; a loss not
    there keeps Q6b's rate)."""
    out = []
    for c in q6b_configs(root):
        arm = "sgd+sec" if c.eta > 0 else "sgd"
        lr = rates.get(c.loss, {}).get(arm, c.lr)
        out.append(dataclasses.replace(c, lr=float(lr)))
    return out


def read_choices(root=None) -> dict:
    return followup.read_json(folder(root) / "choices.json")


def write_choices(choices: dict, root=None) -> None:
    """``choices.json``, atomically: {loss: {arm: {"lr": lr, "flags": [...], "scores": {lr: R@1}}}}."""
    atomic_write_json(folder(root) / "choices.json", choices)


def test_runs(root=None) -> pd.DataFrame:
    """The committed test runs (``test/runs.parquet``), once ``choices.json`` is written and every test run of its
    rates is there; KeyError (no evidence yet) before, saying how many are missing."""
    return followup.committed_test_runs(
        folder(root), lambda ch: test_configs({loss: {a: v["lr"] for a, v in arms.items()}
                                               for loss, arms in ch.items()}, root), "Q6c")


def stage_runs(stage: str, root=None) -> pd.DataFrame:
    """The committed runs of ``stage`` ('selection', 'test') in :func:`sec_lib.chapters.evidence.tier_runs`' columns
    (the date to the day), for the page's account of what produced Q6c; empty before the stage is committed."""
    return followup.committed_runs(folder(root) / stage)


def rate_table(root=None) -> pd.DataFrame:
    """The selection as committed: per loss, arm ('none', or 'sec' at the paper's η, as the page's other rate tables
    name them) and rate, the mean held-out R@1 over the seeds that trained to their end, the ``seeds`` and how many
    ``failed`` (a failed run scores −∞ in the rule, so its rate is never chosen), and whether the rate was
    ``chosen`` (``choices.json``)."""
    path = folder(root) / "selection" / "runs.parquet"
    cols = ["loss", "arm", "eta", "lr", "R@1", "seeds", "failed", "chosen"]
    if not path.exists():
        return pd.DataFrame(columns=cols)
    runs = pd.read_parquet(path, columns=["loss", "eta", "lr", "seed", "status", "R@1"])
    runs["arm"] = ["sec" if e > 0 else "none" for e in runs["eta"]]
    runs["failed"] = runs["status"].astype(str) != "done"
    runs.loc[runs["failed"], "R@1"] = float("nan")
    out = (runs.groupby(["loss", "arm", "eta", "lr"], sort=True)
           .agg(**{"R@1": ("R@1", "mean"), "seeds": ("seed", "size"), "failed": ("failed", "sum")}).reset_index())
    choices = read_choices(root)
    arms = {"none": "sgd", "sec": "sgd+sec"}            # choices.json's arms are selection.RATE_ARMS
    out["chosen"] = [choices.get(lo, {}).get(arms[a], {}).get("lr") == lr
                     for lo, a, lr in zip(out["loss"], out["arm"], out["lr"])]
    order = {lo: i for i, lo in enumerate(LOSSES)}
    return out.sort_values(["loss", "arm", "lr"], key=lambda c: c.map(order) if c.name == "loss" else c)[cols] \
        .reset_index(drop=True)


def train(session, study_) -> dict:
    """Train the follow-up, resumably: the selections (grown until final), ``choices.json``, then the test runs;
    each export after every chunk of ``jobs`` runs. Returns the choices."""
    store, jobs = session.store, session.jobs
    out = study_.path()
    choosers = {(loss, arm): (lambda loss=loss, arm=arm: choose(store, loss, arm))
                for arm in ("sgd", "sgd+sec") for loss in LOSSES}   # the arm without SEC first: its grids sit at edges
    final: dict = {}
    for (loss, arm), c in study.select(store, choosers, out / "selection", jobs, "Q6c selection").items():
        final.setdefault(loss, {})[arm] = {"lr": float(c.weight), "flags": c.flags_for("rate"),
                                           "scores": followup.scores_json(c.scores)}
    followup.settle_choices(out / "choices.json", final)
    print("Q6c rates: " + "; ".join(f"{loss} {a} {v['lr']:g}" for loss, arms in final.items() for a, v in arms.items()),
          flush=True)
    study.train_named(store, test_configs({loss: {a: v["lr"] for a, v in arms.items()} for loss, arms in final.items()}),
                      out / "test", jobs, "Q6c test")
    return final


#: The study as the driver trains it (:func:`sec_lib.runs.study.run`; ``make followup-sgd``).
STUDY = study.Study("sgd-rates", FOLDER, __doc__.splitlines()[0], train,
                    stages=("selection", "test"), reads=(("decisive", "optim"),))
