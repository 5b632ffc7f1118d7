"""Q6d, a registered follow-up to Q6c: does SEC help under SGD at an η chosen for SGD?

Registered on 2026-11-28, before any of its runs (``data/followups/sgd-eta/README.md``):

- **Why.** Q6b and Q6c train SEC under SGD at the paper's η (1 for triplet, N-pair and MS; 0.5 for semihard), an η
  the paper chose for its own optimizer. With it, every SGD rate from 0.3 up diverges, so Q6c's SEC arm trained at
  0.03 while triplet and MS without SEC trained best at 0.3: its verdict ("not reproduced", −1.82) cannot separate
  SEC from the lower rate it forced. Q6d holds the rate fixed and chooses η instead.
- **Selection** (held-out classes only). For each of :data:`LOSSES`, at the rate its arm *without* SEC uses under
  SGD (:func:`base_rates`: Q6c's choice for triplet, N-pair and MS, Q6b's 0.1 for semihard), exactly the decisive
  tier's η rule (:func:`sec_lib.runs.decisive_studies.select_stage`): the grid η = 0 and
  :data:`~sec_lib.runs.selection.ETA_GRID`, 3 seeds a point, the best mean held-out R@1 (a diverged run scores −∞;
  ties: the smaller η), the nonzero grid grown ×/÷ 10 while its best sits at an edge, twice a side at most. When
  η = 0 wins, SEC was not selected and its best nonzero η is tested, flagged. The runs are SGD's held-out runs of
  the tier (:func:`sec_lib.runs.selection.rate_configs`' settings), so Q6c's rate grids give the η = 0 points and
  some η = paper points.
- **Test.** Q6b's own runs (the decisive ``optim`` stage's SGD configs, :data:`SEEDS`) with both arms at the loss's
  rate without SEC and SEC at the chosen η: the arm without SEC is exactly Q6c's (semihard's: Q6b's), reused.
- **Primary metric and family.** As Q6c: R@1, SEC − none averaged over the four main losses per seed (a loss with a
  failed run is left out), one t-test against 0; with the four per-loss differences, one Holm family of 5
  (:data:`FAMILY`). Verdict words and margins are the book's (:func:`sec_lib.report.with_verdict`).
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd

from ..tempfiles import atomic_write_json
from . import followup, selection, study, tier
from . import experiments as ex
from .config import TrainConfig
from .schedules import schedule

#: The four main losses, each selected and tested.
LOSSES = ("triplet", "semihard", "npair", "ms")
#: The test seeds: Q6b's (the decisive tier's floor).
SEEDS = tuple(range(5))
#: The follow-up's folder: ``selection/`` (held-out runs), ``test/`` (test-class runs), ``choices.json``, README.
FOLDER = ("data", "followups", "sgd-eta")
FOLDER_TEXT = "/".join(FOLDER) + "/"
#: Its Holm family's name.
FAMILY = "Q6d: SGD at a held-out η"


def folder(root=None) -> Path:
    """:data:`FOLDER` of the repository (or of ``root``)."""
    return Path(root or tier.REPO).joinpath(*FOLDER)


def base_rates(root=None) -> dict:
    """{loss: lr}: the SGD rate of each loss's arm without SEC, at which Q6d trains both arms: Q6c's held-out choice
    (``sgd-rates/choices.json``) for its losses, Q6b's shared rate for semihard. KeyError while Q6c's choice is not
    committed."""
    chosen = followup.read_json(study.folder_of("sgd-rates", root) / "choices.json")
    if not chosen:
        raise KeyError("Q6d needs Q6c's rates: data/followups/sgd-rates/choices.json is not committed")
    q6b = followup.q6b_rates(root)
    return {loss: float(chosen[loss]["sgd"]["lr"]) if loss in chosen else float(q6b[loss]["none"]) for loss in LOSSES}


def selection_configs(loss: str, etas, lr: float, plan=None) -> list[TrainConfig]:
    """The held-out runs of ``loss``'s η selection under SGD at rate ``lr``: every η of ``etas`` (0: no SEC) and seed
    of :data:`~sec_lib.runs.selection.SEEDS`, with the settings of the tier's SGD rate runs (the tier's schedule and
    length), so that η = 0 and the paper's η are points of Q6c's rate grids."""
    if loss not in LOSSES:
        raise ValueError(f"loss {loss!r} is not selected by this follow-up; valid values: {', '.join(LOSSES)}")
    plan = plan or followup.tier_plan()
    p = ex.get_profile("reference")
    return [ex.config(p, loss, "sec" if w else "none", seed, holdout_classes=p.holdout_classes, optimizer="sgd",
                      lr=float(lr), eval_every=0, stats_every=20, **({"eta": float(w)} if w else {}),
                      **schedule(plan.shape, plan.length))
            for w in etas for seed in selection.SEEDS]


def choose(store, loss: str, lr: float, plan=None):
    """(the :class:`~sec_lib.runs.selection.Choice` once final, else None; every run of the grid so far; the runs of
    it still to train): the tier's η rule (η = 0 a point of its own) on :data:`~sec_lib.runs.selection.ETA_GRID`,
    grown at an edge (:func:`sec_lib.runs.study.grid_choice`, as ``select_stage`` scores it)."""
    return study.grid_choice(store, lambda etas: selection_configs(loss, etas, lr, plan),
                             (0.0, *selection.ETA_GRID), study.rule(selection.ETA_GRID))


def test_configs(choices: dict, root=None) -> list[TrainConfig]:
    """Q6b's runs with both arms at the loss's rate without SEC and SEC at the η to test (``choices``:
    {loss: {"lr": lr, "tested": η}}), in Q6b's order."""
    out = []
    for c in followup.q6b_configs(root):
        ch = choices[c.loss]
        out.append(dataclasses.replace(c, lr=float(ch["lr"]), **({"eta": float(ch["tested"])} if c.eta > 0 else {})))
    return out


def read_choices(root=None) -> dict:
    return followup.read_json(folder(root) / "choices.json")


def write_choices(choices: dict, root=None) -> None:
    """``choices.json``, atomically: {loss: {"lr", "eta" (chosen; 0: SEC not selected), "tested" (the η the test
    trains), "flags", "scores": {η: R@1}}}."""
    atomic_write_json(folder(root) / "choices.json", choices)


def test_runs(root=None) -> pd.DataFrame:
    """The committed test runs (``test/runs.parquet``), once ``choices.json`` is written and every test run is
    there; KeyError (no evidence yet) before, saying how many are missing."""
    return followup.committed_test_runs(folder(root), lambda ch: test_configs(ch, root), "Q6d")


def reused_from(root=None) -> dict:
    """{(stage, whose): run keys}: the runs committed before this follow-up that its stages reuse: the selection's
    η = 0 and paper-η points are Q6c's or the tier's ``sgd-selection`` runs; the test's arm without SEC is Q6c's
    (semihard's: Q6b's), for the page's account of what produced it."""
    dec, q6c = tier.tier_dir("decisive", root), study.folder_of("sgd-rates", root)

    def keys(where):
        path = where / "runs.parquet"
        return set(pd.read_parquet(path, columns=["key"])["key"]) if path.exists() else set()
    return {("selection", "Q6c's"): keys(q6c / "selection"), ("selection", "the tier's"): keys(dec / "sgd-selection"),
            ("test", "Q6c's"): keys(q6c / "test") - keys(dec / "optim"), ("test", "Q6b's"): keys(dec / "optim")}


def stage_runs(stage: str, root=None) -> pd.DataFrame:
    """The committed runs of ``stage`` ('selection', 'test'), as :func:`sec_lib.runs.sgdrates.stage_runs` gives
    Q6c's; empty before the stage is committed."""
    return followup.committed_runs(folder(root) / stage)


def eta_table(root=None) -> pd.DataFrame:
    """The selection as committed: per loss and η (0: without SEC) at the loss's rate ``lr``, the mean held-out R@1
    over the seeds that trained to their end, the ``seeds`` and how many ``failed`` (a failed run scores −∞ in the
    rule, so its η is never chosen), whether η was ``chosen`` and whether it is the one the test trains (``tested``:
    the chosen η, or the best nonzero one where η = 0 won)."""
    path = folder(root) / "selection" / "runs.parquet"
    cols = ["loss", "lr", "eta", "R@1", "seeds", "failed", "chosen", "tested"]
    if not path.exists():
        return pd.DataFrame(columns=cols)
    runs = pd.read_parquet(path, columns=["loss", "eta", "lr", "seed", "status", "R@1"])
    runs["failed"] = runs["status"].astype(str) != "done"
    runs.loc[runs["failed"], "R@1"] = float("nan")
    out = (runs.groupby(["loss", "lr", "eta"], sort=True)
           .agg(**{"R@1": ("R@1", "mean"), "seeds": ("seed", "size"), "failed": ("failed", "sum")}).reset_index())
    choices = read_choices(root)
    for col, field in (("chosen", "eta"), ("tested", "tested")):
        out[col] = [choices.get(lo, {}).get(field) == e and choices[lo]["lr"] == lr
                    for lo, lr, e in zip(out["loss"], out["lr"], out["eta"])]
    order = {lo: i for i, lo in enumerate(LOSSES)}
    return out.sort_values(["loss", "eta"], key=lambda c: c.map(order) if c.name == "loss" else c)[cols] \
        .reset_index(drop=True)


def train(session, study_) -> dict:
    """Train the follow-up, resumably: the η selections (grown until final), ``choices.json``, then the test runs;
    each export after every chunk of ``jobs`` runs. Committed runs that are points of it (Q6b's, Q6c's, the tier's
    ``sgd-selection``) are restored first and never retrained. Returns the choices."""
    store, jobs = session.store, session.jobs
    out = study_.path()
    rates = base_rates()
    choosers = {loss: (lambda loss=loss: choose(store, loss, rates[loss])) for loss in LOSSES}
    final = {loss: {"lr": rates[loss], "eta": float(c.weight), "tested": float(c.best_nonzero),
                    "flags": c.flags_for("SEC"), "scores": followup.scores_json(c.scores)}
             for loss, c in study.select(store, choosers, out / "selection", jobs, "Q6d selection").items()}
    followup.settle_choices(out / "choices.json", final)
    print("Q6d η at SGD's rate: " + "; ".join(f"{loss} lr {v['lr']:g} η {v['eta']:g} (tested {v['tested']:g})"
                                             for loss, v in final.items()), flush=True)
    study.train_named(store, test_configs(final), out / "test", jobs, "Q6d test")
    return final


#: The study as the driver trains it (:func:`sec_lib.runs.study.run`; ``make followup-sgd-eta``).
STUDY = study.Study("sgd-eta", FOLDER, __doc__.splitlines()[0], train,
                    stages=("selection", "test"), reads=(("decisive", "optim"), ("decisive", "sgd-selection"),
                                                         ("sgd-rates", "selection"), ("sgd-rates", "test")))
