"""The book's pages: one *page module* per notebook, holding that page's analysis and its ``PARAMS``.

This file is the one list of the book's pages (:data:`PAGES`): which notebook, where its output goes, its part of
the table of contents (:data:`PARTS`), the papermill parameters it is run with and which sweeps of :data:`sec_lib.runs.experiments.SWEEPS` it
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

__all__ = ["Page", "PAGES", "PAGE_NAMES", "PARTS", "TRAIN_PAGES", "check_shown", "profile_param"]


def check_shown(profile: str) -> str:
    """``profile`` checked as a tier a page may show: a notebook's profile parameter
    (:data:`sec_lib.runs.experiments.PROFILE_NAMES`) or a staged committed tier (the decisive tier), which a page
    shows in place of the reference tier where it holds the page's runs (:mod:`sec_lib.chapters.evidence`)."""
    return Choice((*ex.PROFILE_NAMES, *STAGED_TIERS)).check("profile", profile)


def profile_param() -> dict:
    """The ``profile`` parameter every notebook takes: one of :data:`sec_lib.runs.experiments.PROFILE_NAMES`."""
    return {"profile": Choice(tuple(ex.PROFILE_NAMES))}


#: The parts of the table of contents, in order: each part's caption and the markdown pages (``book/*.md``, not
#: executed) that close it. A page names its part (:attr:`Page.part`); ``_toc.yml`` is written from the two
#: (:mod:`sec_lib.site.toc`, ``python -m sec_lib.book toc``).
READING, APPENDIX = "The review record", "Appendix: how the evidence was made"
PARTS = (
    ("The paper and the data", ()),
    ("Reproduction", ()),
    (READING, ()),
    ("Explore", ()),
    ("Using the book", ("book/glossary", "book/cite")),
    (APPENDIX, ("book/preregistration", "book/rerun", "book/gpu", "book/changelog")),
)


@dataclass(frozen=True)
class Page:
    """One executed notebook of the book: its source, its output path, its papermill parameters, the sweeps it
    needs trained and reads, and the part of the table of contents it is listed in (None: the landing page, the
    book's root; a page whose output lies in another page's folder, ``runs/train_x``, is a section of that page)."""
    source: str
    output: str
    params: dict = field(default_factory=dict)
    sweeps: tuple = ()            # the experiments.SWEEPS whose runs it needs trained
    reads: tuple | None = None    # the sweeps whose tier it shows (its evidence); None: ``sweeps``
    part: str | None = None       # its part of the table of contents (a caption of PARTS)

    def __post_init__(self):
        if self.part is not None:
            Choice(tuple(c for c, _ in PARTS)).check("part", self.part)

    @property
    def evidence_sweeps(self) -> tuple:
        """The sweeps whose tier this page shows (:func:`sec_lib.chapters.evidence.page_evidence`)."""
        return self.sweeps if self.reads is None else self.reads


#: The train page once per main loss and variant (the main table's runs, seed 0): sections of the runs page.
TRAIN_PAGES = tuple(Page("train", f"runs/train_{loss}_{v}", {"loss": loss, "variant": v}, ("compare",), part=APPENDIX)
                    for loss in ex.MAIN_LOSSES for v in ex.VARIANTS)

#: The sweeps of the compare page, whose claim C4v (the primary test) the landing page states: the landing page shows
#: the tier the compare page shows, so that its answer and its per-loss rows are read from the same runs.
COMPARE_SWEEPS = ("compare", "tuned", "selection", "beyond")

#: Every page of the book, in reading order (the order of the table of contents, part by part).
PAGES = (
    Page("home", "home", sweeps=tuple(ex.SWEEPS),     # the landing page (the claims tally reads every sweep)
         reads=COMPARE_SWEEPS),                       # its answer is the compare page's claim C4v: same tier
    Page("data", "data", part="The paper and the data"),
    Page("theory", "theory", part="The paper and the data"),
    Page("compare", "compare", sweeps=COMPARE_SWEEPS, part="Reproduction"),
    Page("table1", "table1", sweeps=("compare",), part="Reproduction"),
    Page("norms", "norms", sweeps=("norms", "bnwn"), part="Reproduction"),
    Page("eta", "eta", sweeps=("eta",), part=READING),
    Page("mu", "mu", sweeps=("mu",), part=READING),
    Page("bnwn", "bnwn", sweeps=("bnwn",), part=READING),
    Page("normlayer", "normlayer", sweeps=("normlayer",), part=READING),
    Page("scale", "scale", sweeps=("selection", "scale"), part=READING),              # shrink or equalize?
    Page("pretrained", "pretrained", sweeps=("ftrates", "pretrained"), part=READING),   # the paper's regime
    Page("optim", "optim", sweeps=("optim",), part=READING),
    Page("convergence", "convergence", sweeps=("convergence",), part=READING),
    Page("instability", "instability", sweeps=("instability",), part=READING),
    Page("ssl", "ssl", sweeps=("selection", "ssl"), part=READING),
    Page("npair", "npair", sweeps=("selection", "npair"), part=READING),
    Page("face", "face", sweeps=("selection", "face"), part=READING),
    Page("fairness", "fairness", sweeps=("compare",), part=READING),
    Page("claims", "claims", sweeps=tuple(ex.SWEEPS), reads=("compare",), part=READING),   # every page's claims
    Page("explore", "explore", sweeps=("explore",), part="Explore"),
    Page("monitor", "monitor", part="Explore"),        # check your own model: trains its own two short runs
    Page("tiers", "tiers", sweeps=("selection",), part=APPENDIX),
    Page("runs", "runs", sweeps=tuple(ex.SWEEPS), part=APPENDIX),   # the runs index and the per-run data of the tier
    *TRAIN_PAGES,
)
#: The notebooks' names (``notebooks/<name>.ipynb``, ``sec_lib/chapters/<name>.py``).
PAGE_NAMES = tuple(dict.fromkeys(p.source for p in PAGES))
