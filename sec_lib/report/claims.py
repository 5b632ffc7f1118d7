"""Claims as records: a :class:`Claim` is defined once, by the page that shows its evidence, and
:func:`decide` turns a page's claims into :class:`ClaimRecord` s, one decision path for every page.

A claim's ``estimate(ev)`` computes our number from an evidence object (anything with
``runs(chapter)``; the book's is :class:`sec_lib.chapters.evidence.Evidence`) and returns a dict:
``estimate, ci_lo, ci_hi, n, p_value`` and optionally ``note``, ``mde`` and, when the page already
tested the comparison inside a family of its own (the compare page's R@1 rows, the μ page's table),
``p_adj`` and ``m`` of that family, or a ``verdict`` that the page's own rule gave (Q9's range of η).
Every other claim is Holm-adjusted within its declared ``family`` (by default: the claims of its
page) and judged by :func:`sec_lib.report.verdict`. The record is what every page shows: the claims
page collects the records, and a page that states a claim's verdict renders that record
(:func:`badge`), so a claim carries one verdict everywhere.
"""
from __future__ import annotations

import html as _html
import math
import re
from dataclasses import asdict, dataclass, field, replace
from typing import Callable, Sequence

import numpy as np
import pandas as pd

from .multiplicity import adjust_family
from .verdicts import mde_from_ci  # noqa: F401 - re-exported: pages import it from here
from .verdicts import (N_COUNTS, PRIMARY_METRIC, VERDICT_RULES, claim_margin, equivalence_p, margin_for,
                       paper_range_of, refine, usable_interval, verdict)
from pathlib import Path

#: The book's one written rule for families, for every registration from now on (the claims page states it):
FAMILY_RULE = ("A registered primary test, and any row pooled over the losses, is a family of its own (no "
               "adjustment); the per-loss rows it pools form a second family, Holm-adjusted together; every other "
               "question's rows form one Holm family per question. Families registered before this rule keep their "
               "registered verdicts; where the rule would read a row differently, the row shows both words, "
               "labelled.")

#: Units whose estimates are shown with three decimals (the rest with two).
FINE_UNITS = ("r", "η²", "CV", "slope", "log10 ratio", "log ratio")
#: Units counted in whole steps, shown without decimals ('+483 [+173, +794] iterations').
WHOLE_UNITS = ("iterations",)
#: Units of a span (never below 0, no interval): shown unsigned, with one decimal ('0.0 decades', not '+0.000').
SPAN_UNITS = ("decades",)
_SIGN_WORD = {1: "increase", -1: "decrease", 0: "no change"}


@dataclass(frozen=True)
class Claim:
    """One claim of the paper or question of the review, as the page that owns it defines it.

    ``page``: the owning page (its evidence is at ``<page>.html``, or ``link`` when given);
    ``family``: the Holm family it is adjusted in (default: its page's claims); ``paper``: the paper's
    number, a string, or a callable computing it from ``data/reference``; ``n_counts``: what n counts
    (:data:`sec_lib.report.N_COUNTS`); ``same_runs_as``: the id of a claim whose runs it reuses (it is
    then not counted again in the tally); ``target``: a value the interval must contain to be
    *reproduced* (Q7a's slope −1); ``margin``: the equivalence margin (default: R@1's for ``unit`` "pp");
    ``paper_size``: the paper's reported values for the claim in the claim's units (a callable returning a list of
    numbers; None: the paper gives no size), which the verdict sets the interval against, and ``paper_size_text``
    names them and their data ("the paper's gains of +1.7 to +7.5 R@1 points on CUB, Cars, SOP and In-Shop");
    ``failed_words``: for a no-change claim, what a failure above and below the margin means, as (above, below)
    ("the batch mean does better"); for a directional claim, one phrase: what an effect wholly on the wrong side
    means ("SEC takes longer"); ``added``: why a claim was added after its runs (it is labelled so);
    ``pooled``: a row pooled over the losses that its registration adjusted together with its per-loss components
    (the written family rule, :data:`FAMILY_RULE`, would test it alone: its record shows that word beside)."""
    id: str
    claim: str
    estimate: Callable
    expected_sign: int
    page: str
    source: str = ""
    measured: str = ""
    unit: str = "pp"
    paper: object = None
    family: str = ""
    link: str = ""
    n_counts: str = "seeds"
    same_runs_as: str = ""
    target: float = math.nan
    margin: float | None = None
    paper_size: Callable | None = None
    paper_size_text: Callable | str = ""
    failed_words: tuple = ()
    added: str = ""
    pooled: bool = False

    def __post_init__(self):
        if int(self.expected_sign) not in (-1, 0, 1):
            raise ValueError(f"claim {self.id!r}: expected_sign must be -1, 0 or +1, got {self.expected_sign!r}")
        if self.n_counts not in N_COUNTS:
            raise ValueError(f"claim {self.id!r}: n_counts must be one of {list(N_COUNTS)}, got {self.n_counts!r}")
        if not callable(self.estimate):
            raise ValueError(f"claim {self.id!r}: estimate must be a function of the evidence")

    @property
    def href(self) -> str:
        return self.link or f"{self.page}.html"

    @property
    def family_name(self) -> str:
        return self.family or f"{self.page} page"

    def margin_value(self):
        if self.margin is not None:
            return self.margin
        return margin_for(PRIMARY_METRIC) if self.unit == "pp" else None


@dataclass(frozen=True)
class ClaimRecord:
    """A claim decided on the evidence: what every page shows for it."""
    id: str
    statement: str
    page: str
    href: str
    family: str
    unit: str
    expected_sign: int
    estimate: float
    ci_lo: float
    ci_hi: float
    n: int | None
    n_counts: str
    p_value: float
    p_adj: float
    m: int
    mde: float
    verdict: str
    tier: str = ""
    paper: object = None
    note: str = ""
    source: str = ""
    measured: str = ""
    same_runs_as: str = ""
    margin: float | None = None
    p_eq_adj: float = math.nan
    paper_range: tuple | None = None
    paper_size_text: str = ""
    reading: str = ""
    added: str = ""
    rule_verdict: str = ""
    extra: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        d = asdict(self)
        d.pop("extra")
        return {**d, **self.extra}

    @property
    def digits(self) -> int:
        return 3 if self.unit in FINE_UNITS else 0 if self.unit in WHOLE_UNITS else 2

    @property
    def detectable(self) -> str:
        """The smallest effect the design could detect, as a reader reads it: '≥ 0.50', '' without one, and for a
        correlation whose detectable effect lies beyond r's range, 'none (≥ 1.49 is beyond the range of r)'."""
        if self.mde is None or not np.isfinite(self.mde):
            return ""
        text = f"≥ {self.mde:.{self.digits}f}"
        return f"none ({text} is beyond the range of r)" if self.unit == "r" and self.mde >= 1 else text

    @property
    def has_estimate(self) -> bool:
        """Whether the claim has evidence on its tier: a finite estimate (else it reads 'no evidence')."""
        return self.estimate is not None and bool(np.isfinite(self.estimate))

    @property
    def evidence(self) -> str:
        """'estimate [lo, hi]' (or the estimate alone, or 'no evidence')."""
        if not self.has_estimate:
            return "no evidence"
        d = self.digits
        if self.unit in SPAN_UNITS and not (np.isfinite(self.ci_lo) and np.isfinite(self.ci_hi)):
            return f"{self.estimate:.1f}"
        if not (np.isfinite(self.ci_lo) and np.isfinite(self.ci_hi)):
            return f"{self.estimate:+.{d}f}"
        lo, est, hi = self.ci_lo, self.estimate, self.ci_hi
        while d < 6 and lo < est < hi and not (round(lo, d) < round(est, d) < round(hi, d)):
            d += 1                            # an interval never looks degenerate: '+0.0027 [+0.0023, +0.0031]'
        return f"{est:+.{d}f} [{lo:+.{d}f}, {hi:+.{d}f}]"


def from_row(row, note: str = "") -> dict:
    """A row of a page's Holm family (``estimate``, ``ci_lo``, ``ci_hi``, ``n``,
    ``p_value``, ``p_adj``, ``m``, ``mde``, ``verdict``) as a claim's estimate: the claim then carries
    exactly the verdict the page's own table shows."""
    r = dict(row)
    out = {"estimate": r["estimate"], "ci_lo": r["ci_lo"], "ci_hi": r["ci_hi"], "n": r.get("n"),
           "p_value": r["p_value"]}
    for k in ("p_adj", "m", "p_eq_adj", "mde", "verdict", "groups_p", "groups_differ", "apart"):
        if k in r and r[k] is not None and not (isinstance(r[k], float) and math.isnan(r[k]) and k == "verdict"):
            out[k] = r[k]
    if note:
        out["note"] = note
    return out


def derived_family(module: str, name: str, compute: Callable) -> Callable:
    """A page's ``page_family(ev)``: ``compute(ev)``, the page's Holm family on its evidence, computed once per
    evidence object (``ev.derived(name, ...)``), so that the page, its claims (:func:`family_row`) and the pages
    that show them read one table. ``module``: the page module's ``__name__``, which :func:`estimate_source` names."""
    def page_family(ev):
        return ev.derived(name, lambda: compute(ev))
    page_family.__module__ = module
    page_family.__doc__ = f"The page's Holm family on its evidence ({name}), computed once per evidence object."
    return page_family


def family_row(family: Callable, **match) -> Callable:
    """An ``estimate(ev)`` for a claim a page decides: the row of the page's Holm family (``family(ev)``, a
    table of verdict rows) whose columns equal ``match``, with that row's adjusted p and verdict
    (:func:`from_row`). No such row (no runs for it): ``KeyError``, so the claim has no evidence."""
    def estimate(ev) -> dict:
        t = family(ev)
        for k, v in match.items():
            t = t[t[k] == v] if len(t) else t
        if not len(t):
            raise KeyError(f"no row with {match} in the page's family")
        return from_row(t.iloc[0])
    estimate.__name__ = "row_" + "_".join(str(v) for v in match.values())
    estimate.row_of = (getattr(family, "__module__", "") or "", ", ".join(f"{k} = {v}" for k, v in match.items()))
    return estimate


def estimate_source(estimate: Callable) -> str:
    """Where a claim's estimate is computed, for a reader going to the code: 'sec_lib.chapters.fairness: the row
    statistic = eta2_excess, variant = none of the page's family' (:func:`family_row`), else the function's module
    and name (a closure: the function that made it)."""
    module, row = getattr(estimate, "row_of", ("", ""))
    if row:
        return f"{module}: the row {row} of the page's family"
    name = getattr(estimate, "__qualname__", "").split(".<locals>")[0]
    return f"{getattr(estimate, '__module__', '')}.{name}".strip(".")


def _paper_value(p):
    try:
        return p() if callable(p) else p
    except (FileNotFoundError, KeyError, IndexError):
        return None


def _number(x) -> float:
    return math.nan if x is None else float(x)


def decide(claims: Sequence[Claim], ev, tier_of: Callable | None = None) -> list[ClaimRecord]:
    """The records of ``claims`` on the evidence ``ev``, in the given order.

    Each estimate is computed once. A claim whose estimate gives no ``verdict`` and no ``p_adj`` is
    Holm-adjusted with the others of its ``family`` among ``claims`` (its test and its equivalence
    test); its detectable effect is given at the strictest level of that family, α/m. ``tier_of``:
    a function returning which tier each claim's estimate was read from (the evidence object tells).
    An estimate that raises ``KeyError`` (no runs for it) gives a claim without evidence."""
    raw = []
    for c in claims:
        if hasattr(ev, "touched"):
            ev.touched.clear()
        try:
            e = dict(c.estimate(ev))
        except KeyError as err:
            e = {"note": str(err).strip("\"'")}
        e["tier"] = tier_of() if tier_of is not None else ""
        raw.append(e)
    fams: dict[str, list[int]] = {}
    for i, (c, e) in enumerate(zip(claims, raw)):
        if "verdict" not in e and "p_adj" not in e:
            fams.setdefault(c.family_name, []).append(i)
    adj = {}
    for name, idx in fams.items():          # the one family adjustment of the book (report.adjust_family)
        rows = pd.DataFrame([{"estimate": _number(raw[i].get("estimate")), "ci_lo": _number(raw[i].get("ci_lo")),
                              "ci_hi": _number(raw[i].get("ci_hi")),
                              "p_value": _number(raw[i].get("p_value")) if _usable(raw[i]) else math.nan,
                              "expected_sign": int(claims[i].expected_sign), "n": raw[i].get("n"),
                              "margin": claim_margin(claims[i].margin_value(), int(claims[i].expected_sign))}
                             for i in idx])
        fam = adjust_family(rows)
        for k, i in enumerate(idx):
            adj[i] = (float(fam["p_adj"].iloc[k]), float(fam["p_eq_adj"].iloc[k]), int(fam["m"].iloc[k]))
    return [_record(c, e, adj.get(i)) for i, (c, e) in enumerate(zip(claims, raw))]


def _usable(e: dict) -> bool:
    return usable_interval(e.get("ci_lo"), e.get("ci_hi"), e.get("n"))


def _paper_size(c: Claim):
    """(the paper's values for ``c``, their text) or (None, '') where the paper gives no size or its table is not
    there."""
    if c.paper_size is None:
        return None, ""
    try:
        values = list(c.paper_size())
    except (FileNotFoundError, KeyError, IndexError):
        return None, ""
    text = c.paper_size_text(values) if callable(c.paper_size_text) else c.paper_size_text
    return (values or None), (text if values else "")


def reading(c: Claim, verdict_word: str, lo: float, hi: float, margin) -> str:
    """Which way a failed claim failed, in the claim's own words (:attr:`Claim.failed_words`): '' unless it reads
    *not reproduced* with its interval wholly above or below the margin (a no-change claim, two phrases) or wholly on
    the side opposite the claim (a directional claim, one phrase)."""
    if verdict_word != "not reproduced":
        return ""
    if c.expected_sign != 0:
        wrong = lo > 0 if c.expected_sign < 0 else hi < 0
        return c.failed_words[0] if len(c.failed_words) == 1 and wrong else ""
    if len(c.failed_words) != 2 or margin is None:
        return ""
    if lo > margin:
        return c.failed_words[0]
    if hi < -margin:
        return c.failed_words[1]
    return ""


def _record(c: Claim, e: dict, adj) -> ClaimRecord:
    est, lo, hi = _number(e.get("estimate")), _number(e.get("ci_lo")), _number(e.get("ci_hi"))
    n = e.get("n")
    n = None if n is None or (isinstance(n, float) and math.isnan(n)) else int(n)
    usable = _usable(e)
    p = _number(e.get("p_value")) if usable else math.nan
    p_eq_adj = _number(e.get("p_eq_adj"))
    paper_values, paper_text = _paper_size(c)
    if "verdict" in e:                          # the page's own rule decided (and adjusted) it; sized here
        v, p_adj, m = e["verdict"], _number(e.get("p_adj", p)), int(e.get("m", 1))
        v = refine(v, lo, hi, c.expected_sign, paper_values) if usable else v
    elif adj is None:                           # tested in the page's family: its adjusted p
        p_adj, m = _number(e["p_adj"]), int(e.get("m", 1))
        v = verdict(est, lo, hi, c.expected_sign, c.margin_value(), n=n, p_adj=p_adj,
                    p_eq_adj=e.get("p_eq_adj"), paper=paper_values)
    else:
        p_adj, p_eq_adj, m = adj
        v = verdict(est, lo, hi, c.expected_sign, c.margin_value(), n=n, p_adj=p_adj, p_eq_adj=p_eq_adj,
                    paper=paper_values)
    if np.isfinite(c.target) and v == "reproduced" and not (lo <= c.target <= hi):
        v = "not reproduced"                    # the right sign, but not the predicted law
    mde = _number(e["mde"]) if "mde" in e else mde_from_ci(lo, hi, n, VERDICT_RULES.alpha / max(m, 1))
    rule = ""
    if c.pooled and m > 1 and usable:          # the written rule: this pooled row alone, its raw p
        margin = claim_margin(c.margin_value(), int(c.expected_sign))
        rule = verdict(est, lo, hi, c.expected_sign, c.margin_value(), n=n, p_adj=p,
                       p_eq_adj=equivalence_p(est, lo, hi, n, margin), paper=paper_values)
        rule = "" if rule == v else rule
    known = {"estimate", "ci_lo", "ci_hi", "n", "p_value", "p_adj", "m", "mde", "verdict", "note", "tier", "p_eq_adj"}
    return ClaimRecord(id=c.id, statement=c.claim, page=c.page, href=c.href, family=c.family_name, unit=c.unit,
                       expected_sign=int(c.expected_sign), estimate=est, ci_lo=lo if usable else math.nan,
                       ci_hi=hi if usable else math.nan, n=n, n_counts=c.n_counts, p_value=p, p_adj=p_adj, m=m,
                       mde=mde, verdict=v, tier=str(e.get("tier") or ""), paper=_paper_value(c.paper),
                       note=str(e.get("note") or ""), source=c.source, measured=c.measured,
                       same_runs_as=c.same_runs_as, margin=c.margin_value(), p_eq_adj=p_eq_adj,
                       paper_range=paper_range_of(paper_values), paper_size_text=paper_text,
                       reading=reading(c, v, lo, hi, c.margin_value()), added=c.added, rule_verdict=rule,
                       extra={k: x for k, x in e.items() if k not in known})


def with_tier(records: Sequence[ClaimRecord], tier: str) -> list[ClaimRecord]:
    return [replace(r, tier=tier) for r in records]


def anchor(claim_id: str) -> str:
    """The id of a claim's row on the claims page."""
    return f"claim-{claim_id}"


def badge(r: ClaimRecord, claims_page: str = "claims.html") -> str:
    """The claim's id and verdict as a link to its row on the claims page; the one way a page states a
    claim's verdict (``data-claim`` / ``data-verdict`` let a test check every page against the others)."""
    v = _html.escape(r.verdict)
    extra = ""
    if getattr(r, "reading", ""):                  # which way a no-change claim failed
        extra += f" ({_html.escape(r.reading)})"
    if getattr(r, "rule_verdict", ""):             # a registered family the written rule reads differently
        extra += f" (registered; under the family rule, this row alone: {_html.escape(r.rule_verdict)})"
    return (f'<a class="claim-ref verdict-{r.verdict.replace(" ", "-")}" href="{claims_page}#{anchor(r.id)}" '
            f'data-claim="{_html.escape(r.id)}" data-verdict="{v}">{_html.escape(r.id)}: <b>{v}</b>{extra}</a>')


#: How a built page marks a verdict it states (:func:`badge`, the claims page's rows).
VERDICT_MARK = re.compile(r'data-claim="([^"]+)"[^>]*?data-verdict="([^"]+)"')


def stated_verdicts(pages: dict) -> dict[str, dict[str, list[str]]]:
    """``{claim id: {verdict: [pages]}}`` for every verdict marked on ``pages`` (``{page name: html}``)."""
    seen: dict[str, dict[str, list[str]]] = {}
    for page, text in pages.items():
        for cid, v in VERDICT_MARK.findall(text):
            where = seen.setdefault(_html.unescape(cid), {}).setdefault(_html.unescape(v), [])
            if page not in where:
                where.append(page)
    return seen


def split_verdicts(pages: dict) -> dict[str, dict[str, list[str]]]:
    """The claims that ``pages`` state with more than one verdict (``{}`` when every id has one)."""
    return {c: vs for c, vs in stated_verdicts(pages).items() if len(vs) > 1}


def check_built_book(html_dir) -> int:
    """Every page of a built book (``_build/html``) states each claim with one verdict: raises ValueError naming
    each split claim, its verdicts and the pages; returns how many claim ids the book marks."""
    root = Path(html_dir)
    if not root.is_dir():
        raise ValueError(f"{root} is not a built book (no such folder)")
    pages = {str(p.relative_to(root)): p.read_text(encoding="utf-8", errors="replace")
             for p in sorted(root.rglob("*.html"))}
    split = split_verdicts(pages)
    if split:
        lines = "; ".join(f"{c}: " + ", ".join(f"{v!r} on {', '.join(pg)}" for v, pg in vs.items())
                          for c, vs in sorted(split.items()))
        raise ValueError(f"the built book states {len(split)} claim(s) with more than one verdict: {lines}")
    return len(stated_verdicts(pages))


def _p_text(p) -> str:
    return "" if p is None or not np.isfinite(p) else f"{p:.2g}"


def p_words(p_adj, m, family: str = "") -> str:
    """The adjusted p in words, the one wording of the book: 'Holm-adjusted p = 0.012 over 7 comparisons', or where
    the family holds one comparison 'p = 0.04 (the only comparison of its family)'; given ``family`` (already
    escaped for HTML where it goes into HTML), 'Holm-adjusted p = 0.012 over 7 in the family F' and 'p = 0.04, the
    only comparison of the family F'. '' without a p-value."""
    if p_adj is None or not np.isfinite(p_adj):
        return ""
    if int(m) == 1:
        return (f"p = {_p_text(p_adj)}, the only comparison of the family {family}" if family else
                f"p = {_p_text(p_adj)} (the only comparison of its family)")
    return f"Holm-adjusted p = {_p_text(p_adj)} over {int(m)}" + (f" in the family {family}" if family else
                                                                 " comparisons")


def box(records: Sequence[ClaimRecord], claims_page: str = "claims.html") -> str:
    """The claims a page decides, one line each: badge, statement, estimate [interval] with unit,
    adjusted p over the family, the smallest effect the design could detect, n, tier."""
    if not records:
        return "<p>This page decides no claim.</p>"
    items = []
    for r in records:
        det = f"; could detect {r.detectable}" if r.detectable else ""
        p = p_words(r.p_adj, r.m, f"<i>{_html.escape(r.family)}</i>")
        p = f"; {p}" if p else ""
        n = f"; n = {r.n} {r.n_counts}" if r.n else ""
        tier = f"; {r.tier} tier" if r.tier else ""
        note = f"<br><small>{_html.escape(r.note)}</small>" if r.note else ""
        items.append(f"<li>{badge(r, claims_page)}: {_html.escape(r.statement)}. Ours: "
                     f"{_html.escape(r.evidence)} {_html.escape(r.unit)}{p}{det}{n}{tier}.{note}</li>")
    return f'<ul class="claims-box">{"".join(items)}</ul>'


def answer(records: Sequence[ClaimRecord], claims_page: str = "claims.html") -> str:
    """The page's answer, for its opening: each claim it decides in one clause (badge, statement, ours with its unit
    and what it measures, the first clause of the record's ``measured``, so that a signed difference says which
    side it subtracts; for an inconclusive claim the smallest effect the design could detect), from the same records
    as its claims box (:func:`box`), so the opening and the box cannot disagree; one bullet a claim where the page
    decides several. '' for a page that decides no claim."""
    if not records:
        return ""
    parts = []
    for r in records:
        det = f", could detect {r.detectable}" if r.verdict == "inconclusive" and r.detectable else ""
        what = r.measured.split(";")[0].strip()
        what = f" ({_html.escape(what)})" if what else ""
        parts.append(f"{badge(r, claims_page)}: {_html.escape(r.statement)}: ours {_html.escape(r.evidence)} "
                     f"{_html.escape(r.unit)}{what}{det}")
    lead = ('<b>The answer on these runs</b>, claim by claim as the scorecard decides it (the claims box at the end '
            'gives each one\'s test)')
    # a statistic without an interval (a count of η decades) says so, so the page checker does not ask for one
    bare = "" if any(np.isfinite(r.ci_lo) and np.isfinite(r.ci_hi) for r in records) else ' data-interval="none"'
    if len(parts) == 1:
        return f'<p class="page-answer"{bare}>{lead}: {parts[0]}.</p>'
    return (f'<div class="page-answer"{bare}><p>{lead}:</p><ul>' + "".join(f"<li>{x}.</li>" for x in parts)
            + "</ul></div>")


def sign_word(expected_sign: int) -> str:
    return _SIGN_WORD[int(expected_sign)]
