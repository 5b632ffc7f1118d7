"""C3b, a registered follow-up to C3: does SEC reach 90% of its final R@1 sooner, measured where the crossing is?

Registered on 2026-11-28, before any of its runs (``data/followups/dense-curves/README.md``):

- **Why.** C3 (the convergence page) measures the iteration at which a run's test R@1 first reaches 90% of its
  final R@1. The decisive tier evaluates its main runs every 1,687 iterations and retraces each run's first 2,000
  iterations evaluated every 100 (the ``convergence`` stage). Its page reports that 37 of the 40 runs cross after
  iteration 2,000, so their reach is a straight line across a gap of up to 1,687 iterations, not a measured crossing.
  Every run's evaluation at iteration 5,061 is already past its threshold.
- **Runs.** C3's own 40 prefixes (the decisive ``convergence`` stage's configs: the four main losses, without SEC
  and with SEC at the paper's η, seeds 0-4, the tier's cosine schedule over 13,500 iterations), each retraced to
  :data:`PREFIX` iterations instead of 2,000 and evaluated every :data:`EVERY` (the stage's own spacing). Nothing
  else changes: each is an exact prefix of its full run, as the page's training-log check shows for C3's prefixes.
- **Primary metric and family.** C3's estimand: the reach (``convergence.reach_step``, 90% of the run's own final
  R@1, the final from its full run) on each full run's curve with this prefix spliced in, SEC − none averaged over
  the four main losses per seed, one t-test against 0, expected sign −1 (sooner). With the four per-loss paired
  differences, one Holm family of 5 (:data:`FAMILY`). Verdict words and margins are the book's. C3 itself is
  unchanged: it answers with the registered 2,000-iteration prefixes.
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pandas as pd

from . import followup, study, tier
from .config import TrainConfig
from .store import load_runs

#: The iterations each prefix is retraced to (C3's stage: 2,000).
PREFIX = 5000
#: The spacing of its evaluations (C3's stage: the same).
EVERY = 100
#: The follow-up's folder under the repository: ``test/`` (the retraced prefixes) and its README.
FOLDER = ("data", "followups", "dense-curves")
FOLDER_TEXT = "/".join(FOLDER) + "/"
#: Its Holm family's name.
FAMILY = "C3b: reach on dense curves"


def folder(root=None) -> Path:
    """:data:`FOLDER` of the repository (or of ``root``)."""
    return Path(root or tier.REPO).joinpath(*FOLDER)


def c3_configs(root=None) -> list[TrainConfig]:
    """C3's prefixes as the decisive ``convergence`` stage committed them (in the repository, or in ``root``), in
    its order."""
    runs = pd.read_parquet(tier.tier_dir("decisive", root) / "convergence" / "runs.parquet", columns=["config"])
    return [TrainConfig(**json.loads(c)) for c in runs["config"]]


def test_configs(root=None) -> list[TrainConfig]:
    """C3's prefixes retraced to :data:`PREFIX` iterations, evaluated every :data:`EVERY`. ValueError if a prefix
    would not be shorter than its run's cosine horizon (it would be another run)."""
    out = []
    for c in c3_configs(root):
        horizon = c.schedule_iterations or c.iterations
        if c.schedule != "cosine" or not c.iterations < PREFIX < horizon:
            raise ValueError(f"C3b retraces a prefix of a cosine run to {PREFIX} iterations: needs {c.iterations} < "
                             f"{PREFIX} < the horizon {horizon} under schedule 'cosine', got schedule {c.schedule!r}")
        out.append(dataclasses.replace(c, iterations=PREFIX, eval_every=EVERY))
    return out


def test_runs(root=None) -> pd.DataFrame:
    """The committed runs (``test/runs.parquet``), once all of :func:`test_configs` are there; KeyError (no evidence
    yet) before, saying how many are."""
    return followup.all_committed(folder(root) / "test" / "runs.parquet", test_configs(root), "C3b")


def test_frames(root=None, tables=("evals", "steps")):
    """The committed runs as :class:`~sec_lib.runs.store.Frames` (``tables`` of them, in :func:`test_configs`' order;
    the columns the pages' frames have), once all are there (:func:`test_runs`); KeyError before."""
    test_runs(root)
    return load_runs(test_configs(root), tables=tables, store=tier.TierStore(folder(root) / "test"))


def stage_runs(root=None) -> pd.DataFrame:
    """The committed runs in :func:`sec_lib.chapters.evidence.tier_runs`' columns, for the page's account of what
    produced C3b; empty before any is committed."""
    return followup.committed_runs(folder(root) / "test")


#: The study as the driver trains it (:func:`sec_lib.runs.study.run`; ``make followup-convergence``).
STUDY = study.Study("dense-curves", FOLDER, __doc__.splitlines()[0],
                    study.fixed_runs(test_configs, "C3b test"),
                    stages=("test",))
