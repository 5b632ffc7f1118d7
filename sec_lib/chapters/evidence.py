"""Which tier a page shows: a committed tier as the main evidence where it holds every run the page
needs (the decisive tier: :data:`MAIN_TIERS`), with the quick tier (the profile ``make book`` trains) beside it.
The decisive tier takes a page over from the quick tier as soon as its committed stages hold every run of the
page's sweeps, chapter by chapter, with no switch to flip.

A page calls :func:`evidence_profile` with its own ``profile`` parameter and the sweeps it reads
(``experiments.SWEEPS``), loads its runs for the returned profile, says which tier produced its
numbers with :func:`tier_sentence`, and compares the two tiers' signs with :func:`sign_agreement`.
A page given an explicit store (``root``), or run at a long profile, shows exactly that.
"""
from __future__ import annotations

import dataclasses
import functools
import importlib
import math
import os
import re
from typing import Iterable, Sequence

import numpy as np
import pandas as pd

from ..data.benchmarks import DISPLAY_NAMES
from ..report import fmt_metric
from ..report.claims import answer, box, decide
from ..runs import experiments as ex
from ..runs import followup
from ..runs.benchmarks import page_note
from ..runs.store import run_key
from ..runs.tier import STAGED_TIERS, TIER_PROFILES, has_tier, open_tier, stage_dirs, store_for, tier_dir
from . import PAGE_NAMES, PAGES, common
from .common import MissingSweep

#: The committed tiers a page may show as its main evidence, in order of preference: the first that holds every run of
#: the page's sweeps: the decisive tier (converged runs, seeds planned for power), committed stage by stage. A retired
#: tier (``tier.RETIRED_TIERS``) is never one.
MAIN_TIERS = ("decisive",)
#: Every committed long tier: a page run at one of these profiles shows exactly that tier.
LONG_TIERS = (*STAGED_TIERS, *TIER_PROFILES)
#: Profiles whose pages show their own runs: the test suite's smoke book, and the real-benchmark books (their
#: data is not the glyphs', so the glyph book's committed tiers never stand in for them).
PIPELINE_PROFILES = ("smoke", *ex.BENCHMARK_PROFILES)


#: Sweeps that a staged tier trains as held-out selection stages, not as chapters: its profile (written from their
#: choices) exists only once they are complete, and the pages read them from their stage folders.
SELECTION_SWEEPS = ("selection", "ftrates")


@functools.lru_cache(maxsize=64)
def _covers(tier: str, sweeps: tuple, stamp: float) -> bool:
    store = open_tier(tier_dir(tier))
    if tier in STAGED_TIERS:
        sweeps = tuple(ch for ch in sweeps if ch not in SELECTION_SWEEPS)
        if not sweeps:
            return False
    try:
        named = [ex.sweep_configs(ch, tier, store) for ch in sweeps]
        # a chapter that names no runs in this tier (the scale chapter before its grid is planned there) is not held
        return all(named) and all(store.has(c) for configs in named for c in configs)
    except (KeyError, ValueError, ex.SelectionError):
        return False


def _stamp(tier: str) -> tuple:
    """What changes when a committed tier's runs do: its runs file (a staged tier's every stage file, and the
    plan and choices its chapters' configs are derived from)."""
    d = tier_dir(tier)
    files = ([d / "runs.parquet"] if (d / "runs.parquet").exists() else
             [*(s / "runs.parquet" for s in stage_dirs(d)), *(f for f in (d / "plan.json", d / "choices.json")
                                                              if f.exists())])
    return tuple((f.relative_to(d).as_posix(), f.stat().st_mtime_ns) for f in files)


def covers(tier: str, sweeps: Iterable[str]) -> bool:
    """Whether the committed tier ``tier`` holds every run of ``sweeps`` (its pilot and selection
    included, since the chapters' configs are derived from them); a chapter that names no runs there is not held
    (nor is any chapter of the decisive tier before its plan is written: its profile does not exist yet)."""
    if not has_tier(tier):
        return False
    return _covers(tier, tuple(sweeps), _stamp(tier))


def shown_tier(sweeps: Iterable[str]) -> str | None:
    """The first of :data:`MAIN_TIERS` that holds every run of ``sweeps``, or None."""
    sweeps = tuple(sweeps)
    return next((t for t in MAIN_TIERS if covers(t, sweeps)), None)


def evidence_profile(profile: str, sweeps: Iterable[str], root=None) -> str:
    """The profile whose runs a page shows as its main evidence: the first of :data:`MAIN_TIERS` whose committed
    tier holds every run of ``sweeps``; otherwise ``profile`` itself (also when a store ``root``
    is given, when ``profile`` is already a long tier, and for :data:`PIPELINE_PROFILES`)."""
    if profile not in STAGED_TIERS:         # the decisive profile exists only once its plan is written
        ex.get_profile(profile)
    if root is not None or profile in LONG_TIERS or profile in PIPELINE_PROFILES:
        return profile
    return shown_tier(sweeps) or profile


def tier_runs(profile: str, sweeps: Iterable[str], root=None) -> pd.DataFrame:
    """One row per distinct run of ``sweeps`` in the tier of ``profile``: key, dataset, iterations,
    test_classes, wall_s, device, torch, date (provenance where the store records it)."""
    store = store_for(profile, root)
    rows, seen = [], set()
    for ch in sweeps:
        try:
            configs = ex.sweep_configs(ch, profile, store)
        except (KeyError, ValueError, ex.SelectionError):
            continue
        for c in configs:
            key = run_key(c)
            if key in seen:
                continue
            seen.add(key)
            r = store.get(c, tables=())
            if r is None:
                continue
            prov = store.meta(key).get("provenance", {})
            rows.append({"key": key, "dataset": c.dataset, "iterations": c.iterations, "test_classes": c.test_classes,
                         "holdout_classes": c.holdout_classes,
                         "wall_s": r.wall_s, "device": prov.get("device"), "torch": prov.get("torch"),
                         "date": str(prov.get("date") or "")[:10]})
    return pd.DataFrame(rows, columns=["key", "dataset", "iterations", "test_classes", "holdout_classes", "wall_s",
                                       "device", "torch", "date"])


def _describe(profile: str, runs: pd.DataFrame, what: str = "") -> str:
    if not len(runs):
        return "no runs yet"
    its = "/".join(f"{i:,}" for i in sorted(runs["iterations"].unique()))
    held = runs["holdout_classes"].fillna(0).astype(int)
    tc = runs.loc[held == 0, "test_classes"].dropna().unique()
    parts = []
    if (held == 0).any():
        parts.append("all test classes" if not len(tc) else "/".join(f"{int(t)}" for t in sorted(tc)) + " test classes")
    if (held > 0).any():
        parts.append("/".join(f"{h}" for h in sorted(held[held > 0].unique())) + " held-out training classes")
    classes = " and ".join(parts)
    hours = float(runs["wall_s"].sum()) / 3600
    dev = ", ".join(sorted(map(str, runs["device"].dropna().unique()))) or "?"
    torch_ = ", ".join(sorted(map(str, runs["torch"].dropna().unique()))) or "?"
    dates = sorted(d for d in runs["date"] if d)
    when = (dates[0] if dates[0] == dates[-1] else f"{dates[0]} to {dates[-1]}") if dates else "?"
    data = " and ".join(sorted({DISPLAY_NAMES.get(d, d) for d in runs["dataset"]}))
    return (f"{len(runs)} runs of {its} iterations{what} on {data}, scored on {classes}, {hours:.2f} run-hours of wall time on {dev} "
            f"(torch {torch_}, one thread per run: at most that many core-hours, less where the machine was shared), "
            f"trained {when}")


def runs_sentence(runs: pd.DataFrame, what: str = "") -> str:
    """'40 runs of 13,500 iterations on glyphs, scored on all test classes, 2.53 run-hours ... trained 2026-11-28':
    the evidence banner's description of ``runs`` (:func:`tier_runs`' columns), for evidence outside a tier (a
    registered follow-up's folder)."""
    return _describe("", runs, what)


def followup_runs_sentence(fid: str, stages, folder_text: str) -> str:
    """'**Evidence for C4W:** the selection, 36 runs of ...; the test, 40 runs of ...; committed under `...`.': a
    registered follow-up's runs in the evidence box's words (:func:`runs_sentence`), stage by stage; ``stages``:
    (label, folder) pairs, label '' for a follow-up of one stage, or (label, folder, keys to leave out: runs that an
    earlier body of evidence trained and the follow-up's export copies); a stage without committed runs is left out,
    and '' where none has any."""
    parts = []
    for label, where, *skip in stages:
        runs = followup.committed_runs(where)
        parts.append((label, runs[~runs["key"].isin(skip[0])] if skip else runs))
    said = [f"{label}, {runs_sentence(r)}" if label else runs_sentence(r) for label, r in parts if len(r)]
    return f"**Evidence for {fid}:** " + "; ".join(said) + f"; committed under `{folder_text}`." if said else ""


#: What the evidence box counts: the tier's runs of the page's sweeps; a registered follow-up's runs live in its own
#: folder and are counted in its own section (C3b, C4L, C4W, Q6c, Q6d, P1c).
WHAT_COUNTED = (" (every run of this tier's sweeps that the page draws on; a registered follow-up's runs are counted "
                "in its own section)")


def tier_sentence(shown: str, quick: str, sweeps: Sequence[str], root=None) -> str:
    """Which tier produced this page's numbers, with how many runs, iterations and core-hours, and
    what the quick tier beside it is."""
    main = tier_runs(shown, sweeps, root)
    # the runs of the page's sweeps: a page may read only some of them (the norms page reads 10 of the BN/WN
    # sweep's runs), and says so where it does
    text = f"**Evidence on this page: the {shown} tier**, {_describe(shown, main, WHAT_COUNTED)}"
    if shown in LONG_TIERS:
        text += f", committed under `data/reference/{shown}/`"
    if shown != quick:
        text += (f". Beside it, the quick tier (profile {quick}, trained by `make book`): "
                 f"{_describe(quick, tier_runs(quick, sweeps, root))}")
    else:
        committed = [t for t in MAIN_TIERS if has_tier(t)]
        if committed:
            text += (f". No committed tier ({' or '.join(committed)}) holds every run this page needs yet, so the "
                     f"page shows the quick tier; see the tiers page for their progress")
    return text + "."


def _cell(r, metric) -> str:
    if r is None or not np.isfinite(r["estimate"]):
        return "n/a"
    d = fmt_metric(r["estimate"], metric, 2, True)
    if not np.isfinite(r["ci_lo"]):
        return d
    return f"{d} [{fmt_metric(r['ci_lo'], metric, 2, True)}, {fmt_metric(r['ci_hi'], metric, 2, True)}]"


def same_sign(a, b) -> str:
    """'yes' / 'no': whether two estimates have the same sign; 'n/a' where one is missing or zero."""
    if a is None or b is None or not (np.isfinite(a) and np.isfinite(b)) or a == 0 or b == 0:
        return "n/a"
    return "yes" if np.sign(a) == np.sign(b) else "no"


def sign_agreement(main: pd.DataFrame, quick: pd.DataFrame, metric: str = "R@1",
                   by: Sequence[str] = ("loss", "variant"), names=("decisive", "quick")) -> pd.DataFrame:
    """Per comparison (``by``), the main tier's and the quick tier's paired difference in ``metric``
    with their intervals and verdicts, and whether the two estimates have the same sign.

    ``main`` and ``quick``: tidy gains tables (:func:`sec_lib.chapters.gains.sec_gain`: columns
    ``by``, metric, estimate, ci_lo, ci_hi, verdict). Rows of either side only are kept, with 'n/a'.
    'same sign' is 'yes' / 'no' on the point estimates, and 'n/a' where one is missing or zero.
    """
    a = main[main["metric"] == metric].set_index(list(by))
    b = quick[quick["metric"] == metric].set_index(list(by))
    rows = []
    for idx in list(dict.fromkeys([*a.index, *b.index])):
        ra = a.loc[idx] if idx in a.index else None
        rb = b.loc[idx] if idx in b.index else None
        same = same_sign(ra["estimate"] if ra is not None else math.nan, rb["estimate"] if rb is not None else math.nan)
        key = dict(zip(by, idx if isinstance(idx, tuple) else (idx,)))
        rows.append({**key, names[0]: _cell(ra, metric), f"{names[0]} verdict": ra["verdict"] if ra is not None else "n/a",
                     names[1]: _cell(rb, metric), f"{names[1]} verdict": rb["verdict"] if rb is not None else "n/a",
                     "same sign": same})
    return pd.DataFrame(rows)


def agreement_sentence(table: pd.DataFrame, names=("decisive", "quick")) -> str:
    """How many comparisons keep their sign from the quick tier to the main one."""
    known = table[table["same sign"] != "n/a"]
    if not len(known):
        return f"No comparison can be set beside the {names[1]} tier."
    flips = known[known["same sign"] == "no"]
    text = (f"The {names[1]} tier agrees in sign with the {names[0]} tier on {len(known) - len(flips)} of "
            f"{len(known)} comparisons")
    if len(flips):
        # "triplet (sec, paper's η)": a variant's name may hold a comma, so the items are set apart by semicolons
        what = "; ".join(f"{r[table.columns[0]]} ({r[table.columns[1]]})" for _, r in flips.iterrows())
        text += f"; it has the opposite sign for {what}"
    return text + "."


#: How a table names SEC's rows by the η arm their runs were made with (the ``eta_arm`` label).
ETA_ARM_NAMES = {"paper": "sec, paper's η", "selected": "sec, selected η"}


def name_eta_arms(gains: pd.DataFrame) -> pd.DataFrame:
    """Gains tables (:func:`sec_lib.chapters.gains.sec_gain`) with each SEC row named for its η arm, from the
    ``eta_arm`` label of its runs ('sec, paper's η', 'sec, selected η'); other rows keep their variant."""
    if "eta_arm" not in gains.columns:
        raise ValueError("the gains carry no eta_arm column: load the runs with common.load, which adds the labels "
                         "the sweeps were made with")
    named = gains["eta_arm"].map(ETA_ARM_NAMES)
    return gains.assign(variant=named.where(gains["variant"].eq("sec") & named.notna(), gains["variant"]))


# ------------------------------------------------------------------------------------------- claims
# One evidence object per page, and the claims each page owns: a page module's ``CLAIMS``
# (:class:`sec_lib.report.claims.Claim`) are decided by :func:`page_records`, the one path by which
# the page itself, the claims page and the landing page get a claim's verdict.

class Evidence:
    """The frames a page's claims draw on, per chapter, loaded once on first use.

    ``Evidence(profile, tiers=True)`` loads each chapter from the tier :func:`evidence_profile` picks
    for it alone (the first committed tier of :data:`MAIN_TIERS` that holds every run of that chapter, else
    ``profile``);
    :meth:`profile_of` says which, and :attr:`touched` collects the chapters read since it was last
    cleared (a claim's record names the tier it was read from). ``Evidence.from_frames({chapter:
    Frames}, profile)`` wraps hand-made frames (tests)."""
    def __init__(self, profile=None, frames: dict | None = None, loader=None, root=None, tiers: bool = False):
        self.profile = profile
        self.root = root
        self._frames = dict(frames or {})
        self._derived = {}
        self._from_store = loader is None
        self.tier_of: dict = {}
        self.touched: set = set()
        self._tiers = tiers and loader is None and profile is not None
        self._loader = loader if loader is not None else self._load
        self.sweeps: tuple = ()     # the sweeps of the page this evidence serves (page_evidence sets them)
        self.records: dict = {}       # page -> its claims' records decided on this evidence (page_records)
        self.shared: dict | None = None   # frames shared with the other pages' evidence (page_evidence sets it)

    def _load(self, sweep: str):
        tp = evidence_profile(self.profile, (sweep,), self.root) if self._tiers else self.profile
        self.tier_of[sweep] = tp
        if self.shared is None:
            return common.load(sweep, tp, root=self.root)
        key = (sweep, tp, None if self.root is None else str(self.root), os.environ.get("SEC_RUNS_DIR"))
        if key not in self.shared:
            self.shared[key] = common.load(sweep, tp, root=self.root)
        frames = self.shared[key]         # each evidence object gets its own copy: no claim sees another's edits
        return dataclasses.replace(frames, **{f.name: getattr(frames, f.name).copy()
                                              for f in dataclasses.fields(frames)})

    @classmethod
    def from_frames(cls, frames: dict, profile=None) -> "Evidence":

        def missing(ch):
            raise MissingSweep(f"no frames for chapter {ch!r}; given: {sorted(frames)}")
        return cls(profile, frames, loader=missing)

    def profile_of(self, sweep: str):
        """The profile (tier) whose runs ``sweep``'s frames hold."""
        return self.tier_of.get(sweep, self.profile)

    def frames(self, sweep: str):
        self.touched.add(sweep)
        if sweep not in self._frames:
            # chapters that show the same runs (compare, convergence, instability: the main table) load once
            same = [c for c in self._frames if self._from_store and ex.SWEEPS.get(c) is ex.SWEEPS.get(sweep)]
            if same:
                self._frames[sweep] = self._frames[same[0]]
                self.tier_of[sweep] = self.profile_of(same[0])
            else:
                self._frames[sweep] = self._loader(sweep)
        return self._frames[sweep]

    def runs(self, sweep: str) -> pd.DataFrame:
        return self.frames(sweep).runs

    def table(self, sweep: str, name: str) -> pd.DataFrame:
        return getattr(self.frames(sweep), name)

    def derived(self, name: str, fn):
        """``fn()`` computed once per Evidence under ``name`` (per-run tables shared by several claims)."""
        if name not in self._derived:
            self._derived[name] = fn()
        return self._derived[name]

    def tier_label(self) -> str:
        """The tier this evidence reads: its profile when fixed (a page's evidence), else the tiers of the
        chapters touched since :attr:`touched` was last cleared, joined by '/'."""
        if not self._tiers:
            return "" if self.profile is None else str(self.profile)
        return "/".join(sorted({str(self.profile_of(ch)) for ch in self.touched if self.profile_of(ch) is not None}))


#: The pages whose modules own claims (``sec_lib.chapters.<page>.CLAIMS``), in the book's order; the
#: claims page owns the norm-by-class questions (Q10a-c).
def claim_pages() -> tuple:
    return tuple(p for p in PAGE_NAMES if getattr(_page_module(p), "CLAIMS", None))


def _page_module(page: str):
    return importlib.import_module(f"{__package__}.{page}")


def page_claims(page: str) -> list:
    """The :class:`~sec_lib.report.claims.Claim` s that ``page`` owns."""
    return list(getattr(_page_module(page), "CLAIMS", ()))


def page_records(page: str, ev: Evidence) -> list:
    """The records of the claims ``page`` owns, decided on ``ev``
    (:func:`sec_lib.report.claims.decide`: Holm within each declared family), once per evidence object: its frames
    are loaded once, so the page's claims box, the scorecard and the landing page get one decision, not three."""
    if page not in ev.records:
        ev.records[page] = decide(page_claims(page), ev, tier_of=ev.tier_label)
    return list(ev.records[page])


_PAGE_EVIDENCE: dict = {}
#: The frames the page evidence objects of this process loaded from a store, by (chapter, tier, root,
#: $SEC_RUNS_DIR): a chapter that several pages read (the main comparison: compare, convergence, instability,
#: fairness, the landing page ...) is loaded once, not once per page, when the landing page's tally decides every
#: page's claims.
_PAGE_FRAMES: dict = {}


def forget_pages() -> None:
    """Drop every page evidence object and the frames they share (the next :func:`page_evidence` reads the
    stores again)."""
    _PAGE_EVIDENCE.clear()
    _PAGE_FRAMES.clear()


def page_of(name: str):
    """The :class:`~sec_lib.chapters.Page` of page ``name`` (its first entry in ``PAGES``)."""
    for p in PAGES:
        if p.source == name:
            return p
    raise ValueError(f"unknown page {name!r}; pages: {list(PAGE_NAMES)}")


def page_evidence(page: str, profile: str, root=None, tier: str | None = None) -> Evidence:
    """The one evidence object of ``page``: the tier it shows (:func:`evidence_profile` over the sweeps
    the page reads, declared once in ``PAGES``), its store, and each sweep's frames loaded once.
    The same object (per process) serves the page itself and every other page that shows its claims,
    so a claim is decided on the same runs wherever it appears. ``tier``: read that tier instead (the
    claims page sets the quick tier beside the decisive one)."""
    key = (page, profile, None if root is None else str(root), tier)
    if key not in _PAGE_EVIDENCE:
        sweeps = page_of(page).evidence_sweeps
        ev = Evidence(tier or evidence_profile(profile, sweeps, root), root=root)
        ev.sweeps = sweeps
        ev.shared = _PAGE_FRAMES
        _PAGE_EVIDENCE[key] = ev
    return _PAGE_EVIDENCE[key]


def claim_records(profile: str, root=None, pages=None, tier: str | None = None) -> list:
    """The records of every claim of the book (or of ``pages``), sorted by id, each decided by the page
    that owns it on that page's evidence (:func:`page_evidence`; ``tier`` forces one tier for all)."""
    recs = [r for p in (pages or claim_pages()) if page_note(profile, p) is None     # a page that does not apply
            for r in page_records(p, page_evidence(p, profile, root, tier))]          # to a benchmark book: no claims
    return sorted(recs, key=lambda r: claim_sort_key(r.id))


def claim_sort_key(cid: str):
    """C1 < C4 < C4a < C4v < C4W < C5 < Q1 < Q2 < Q8a < Q8a-r < Q10a (letter, number, suffix; the suffix read without
    case, so that a follow-up's capital letter sorts among its claim's small ones)."""
    m = re.match(r"([A-Z]+)(\d+)(.*)", cid)
    return (m.group(1), int(m.group(2)), m.group(3).lower(), m.group(3)) if m else (cid, 0, "", "")


def claims_box(page: str, profile: str, root=None) -> str:
    """HTML: the claims ``page`` decides, each with its verdict badge linking to the claims page."""
    return box(page_records(page, page_evidence(page, profile, root)))


def answer_box(page: str, profile: str, root=None) -> str:
    """HTML: the page's answer for its opening (:func:`sec_lib.report.claims.answer`), from the same records as
    :func:`claims_box`."""
    return answer(page_records(page, page_evidence(page, profile, root)))


def waiting_records(page: str, shown: str, root=None) -> list:
    """Where ``page`` shows another tier (``shown``) because the first long tier (:data:`MAIN_TIERS`, the decisive
    tier) does not hold all of its sweeps yet: the records of the page's claims decided on that tier's runs, for the
    claims whose own runs it already holds (a finite estimate; a claim missing runs there is not testable and left
    out). [] where the page shows that tier, or the tier is not committed."""
    first = MAIN_TIERS[0]
    if shown == first or not has_tier(first) or root is not None:
        return []
    return [r for r in page_records(page, page_evidence(page, first, tier=first)) if r.has_estimate]


def lacking(tier: str, sweeps: Iterable[str]) -> list[str]:
    """The sweeps of ``sweeps`` the committed ``tier`` does not hold yet, each on its own (:func:`covers`); the
    selection sweeps are left out, since the sweeps made from their choices cannot be held without them."""
    return [c for c in sweeps if c in ex.SWEEPS and c not in SELECTION_SWEEPS and not covers(tier, (c,))]


def waiting_sentence(page: str, shown: str, root=None) -> str:
    """:func:`waiting_records` in words, for the page's opening: the claims the first long tier can already decide,
    with their estimates and verdicts there, and the sweeps it does not hold yet. '' where there are none."""
    first = MAIN_TIERS[0]
    recs = waiting_records(page, shown, root)
    if not recs:
        return ""
    missing = lacking(first, page_of(page).evidence_sweeps)
    each = "; ".join(f"{r.id} ({r.statement}): {r.estimate:+.3f} [{r.ci_lo:+.3f}, {r.ci_hi:+.3f}] {r.unit}, "
                     f"**{r.verdict}**" for r in recs)
    ids = ", ".join(r.id for r in recs[:-1]) + (" and " if len(recs) > 1 else "") + recs[-1].id
    return (f"**Already in the {first} tier.** It holds the runs behind {ids}, but not yet "
            f"those of {', '.join(missing) or 'every sweep of this page'}. Decided there (Holm over the claims it can "
            f"decide): {each}. This page and its claims read the {shown} tier until the {first} tier holds all of "
            f"its runs.")
