"""The book's pages: one *page module* per notebook, holding that page's analysis and its ``PARAMS``.

This file is the one list of the book's pages (:data:`PAGES`): which notebook, where its output goes,
the papermill parameters it is run with and which sweeps of :data:`sec_lib.runs.experiments.SWEEPS` it
reads. The runner (:mod:`sec_lib.site.runner`) trains those sweeps, then executes the pages. A page
named ``X`` is ``notebooks/X.ipynb`` and its code is :mod:`sec_lib.chapters.X`.

No page module imports another (``tests/test_import_graph.py``). What several pages read lives outside the pages:
in :mod:`sec_lib.analysis` where it needs nothing of this package, else in a module here that is named for no
notebook (:mod:`.common`, :mod:`.evidence`, :mod:`.gains`, :mod:`.scorecard`, ...).

Importing this package does not import the chapter modules (each pulls in what its page needs).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..runs import experiments as ex
from ..params import Choice
from ..runs.tier import STAGED_TIERS

__all__ = ["Page", "PAGES", "PAGE_NAMES", "TRAIN_PAGES", "check_shown", "profile_param"]


def check_shown(profile: str) -> str:
    """``profile`` checked as a tier a page may show: a notebook's profile parameter
    (:data:`sec_lib.runs.experiments.PROFILE_NAMES`) or a staged committed tier (the decisive tier), which a page
    shows in place of the reference tier where it holds the page's runs (:mod:`sec_lib.chapters.evidence`)."""
    return Choice((*ex.PROFILE_NAMES, *STAGED_TIERS)).check("profile", profile)


def profile_param() -> dict:
    """The ``profile`` parameter every notebook takes: one of :data:`sec_lib.runs.experiments.PROFILE_NAMES`."""
    return {"profile": Choice(tuple(ex.PROFILE_NAMES))}


@dataclass(frozen=True)
class Page:
    """One executed notebook of the book: its source, its output path and its papermill parameters."""
    source: str
    output: str
    params: dict = field(default_factory=dict)
    sweeps: tuple = ()          # the experiments.SWEEPS whose runs it needs trained
    reads: tuple | None = None    # the sweeps whose tier it shows (its evidence); None: ``sweeps``

    @property
    def evidence_sweeps(self) -> tuple:
        """The sweeps whose tier this page shows (:func:`sec_lib.chapters.evidence.page_evidence`)."""
        return self.sweeps if self.reads is None else self.reads


#: The train page once per main loss and variant (the main table's runs, seed 0).
TRAIN_PAGES = tuple(Page("train", f"runs/train_{loss}_{v}", {"loss": loss, "variant": v}, ("compare",))
                    for loss in ex.MAIN_LOSSES for v in ex.VARIANTS)

#: The sweeps of the compare page, whose claim C4v (the primary test) the landing page states: the landing page shows
#: the tier the compare page shows, so that its answer and its per-loss rows are read from the same runs.
COMPARE_SWEEPS = ("compare", "tuned", "selection", "beyond")

#: Every page of the book, in reading order.
PAGES = (
    Page("home", "home", sweeps=tuple(ex.SWEEPS),     # the landing page (the claims tally reads every chapter)
         reads=COMPARE_SWEEPS),                           # its answer is the compare page's claim C4v: same tier
    Page("data", "data"),
    Page("theory", "theory"),
    Page("compare", "compare", sweeps=COMPARE_SWEEPS),
    Page("table1", "table1", sweeps=("compare",)),
    Page("norms", "norms", sweeps=("norms", "bnwn")),
    Page("runs", "runs", sweeps=tuple(ex.SWEEPS)),    # the runs index and the per-run data of the whole tier
    *TRAIN_PAGES,
    Page("eta", "eta", sweeps=("eta",)),
    Page("mu", "mu", sweeps=("mu",)),
    Page("bnwn", "bnwn", sweeps=("bnwn",)),
    Page("normlayer", "normlayer", sweeps=("normlayer",)),
    Page("scale", "scale", sweeps=("selection", "scale")),     # shrink or equalize?
    Page("pretrained", "pretrained", sweeps=("ftrates", "pretrained")),   # the paper's regime
    Page("optim", "optim", sweeps=("optim",)),
    Page("convergence", "convergence", sweeps=("convergence",)),
    Page("instability", "instability", sweeps=("instability",)),
    Page("monitor", "monitor"),                           # check your own model: trains its own two short runs
    Page("ssl", "ssl", sweeps=("selection", "ssl")),
    Page("npair", "npair", sweeps=("selection", "npair")),
    Page("face", "face", sweeps=("selection", "face")),
    Page("fairness", "fairness", sweeps=("compare",)),
    Page("claims", "claims", sweeps=tuple(ex.SWEEPS), reads=("compare",)),   # collects every page's claims
    Page("tiers", "tiers", sweeps=("selection",)),
    Page("explore", "explore", sweeps=("explore",)),
)
#: The notebooks' names (``notebooks/<name>.ipynb``, ``sec_lib/chapters/<name>.py``).
PAGE_NAMES = tuple(dict.fromkeys(p.source for p in PAGES))
