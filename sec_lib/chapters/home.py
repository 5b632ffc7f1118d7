"""The landing page: the answer first.

Per loss, SEC − none in R@1 (paired by seed, 95% interval) at the η chosen on held-out classes (the
``tuned`` runs) and at the paper's η (the main table, ``experiments.ETA_SEC``), beside the paper's own
gain on each of its datasets (:func:`sec_lib.reference.paper_gains`); three sentences computed from
those numbers and from the claims page's verdict tally.
"""
from __future__ import annotations

import html
import re

import numpy as np
import pandas as pd

from .. import reference, report
from ..analysis.primary import primary_estimate  # noqa: F401 (the page's API)
from ..reference import PAPER_DATASETS
from ..report import fmt_metric
from ..report.claims import badge
from ..runs import benchmarks
from ..runs import experiments as ex
from . import compare_weightdecay, convergence_length, evidence, pretrained_seeds, profile_param, scorecard
from .common import MAIN_SWEEP, equivalence_words, inconclusive_words, load, loss_noun, mde_text, order_rows
from .gains import sec_gain, selected_eta_rows
from .scorecard import count_words, followup_status, tiers_phrase

#: The notebook's parameters (checked by ``sec_lib.params.notebook_params``).
PARAMS = profile_param()

PAPER_URL = "https://arxiv.org/abs/2011.02785"
CODE_URL = "https://github.com/Dyfine/SphericalEmbedding"
#: How the headline names the two η settings.
ETA_SETTINGS = {"selected": "η chosen on held-out classes", "paper": "the paper's η"}


def headline_gains(profile, root=None, metric: str = "R@1") -> pd.DataFrame:
    """SEC − none in ``metric`` per loss at both η settings (tidy).

    Columns: loss, setting ('selected' | 'paper'), eta, estimate, ci_lo, ci_hi, p_value, n (paired seeds), verdict.
    The 'selected' rows pair the ``tuned`` runs (SEC at the held-out-chosen η) with the none runs of
    the same seeds; the 'paper' rows are the main table's (SEC at ``experiments.ETA_SEC``). The setting is the
    ``eta_arm`` label the runs were made with (:func:`sec_lib.runs.experiments.main_table_runs`,
    ``tuned_sec_runs``), and η the runs' own.
    """
    parts = []
    for sweep in ("tuned", MAIN_SWEEP):
        frames = load(sweep, profile, tables=(), root=root)
        g = sec_gain(frames, variants=("sec",), metrics=(metric,))
        runs = frames.runs
        etas = runs[runs["variant"] == "sec"].groupby("loss")["eta"].first()
        g = g.assign(setting=g["eta_arm"], eta=g["loss"].map(etas).astype(float))
        parts.append(g)
    out = pd.concat(parts, ignore_index=True)
    cols = ["loss", "setting", "eta", "estimate", "ci_lo", "ci_hi", "p_value", "n", "verdict"]
    out = order_rows(out[cols], cols=("loss",))
    out.attrs["source"] = "ours"
    out.attrs["metric"] = metric
    return out


def primary(profile, root=None) -> dict:
    """The primary test as the compare page decides it (claim C4v, :func:`primary_estimate` on that page's
    evidence): ``estimate, ci_lo, ci_hi, n, p_value`` and the ``record``; beside it the records the answer sets it
    against: ``versus_l2`` (C5v, SEC − L2-reg at the held-out arms, on the same page) and ``relative`` (S1, relative
    SEC − none, the scale page's; None where that page has no evidence)."""
    recs = {r.id: r for r in evidence.page_records("compare", evidence.page_evidence("compare", profile, root))}
    rec = recs["C4v"]
    return {"estimate": rec.estimate, "ci_lo": rec.ci_lo, "ci_hi": rec.ci_hi, "n": rec.n, "p_value": rec.p_value,
            "record": rec, "versus_l2": recs.get("C5v"), "relative": mechanism_record(profile, root)}


def primary_badge(e: dict) -> str:
    """HTML: the primary test's claim id and verdict (its record's badge), its estimate with its interval, and the
    tier it was read from (:func:`answer_block` puts it under the answer sentence)."""
    r = e["record"]
    detect = f"could detect {r.detectable} points" if r.detectable else "no detectable effect without a spread"
    flag = (f"; the losses differ (loss × arm test p = {r.extra['groups_p']:.2g}): {r.extra['apart']}"
            if r.extra.get("groups_differ") else "")
    return (f'<p>The primary test is claim {badge(r)}{equivalence_words(r)}: '
            f"{r.evidence} {r.unit} (family: {r.family}, alone; {r.tier or 'no'} tier; {detect}{flag}).</p>")


#: How the answer reads each verdict word of the primary test (the book's words, DESIGN.md).
ANSWER_WORDS = {"reproduced": "as large as the paper reports",
                "larger than claimed": "larger than the paper reports",
                "smaller than claimed": "real but smaller than the paper reports",
                "negligible": "real but negligible",
                "not reproduced": "not reproduced",
                "inconclusive": "inconclusive",
                "not testable offline": "not testable offline"}


def _versus(rec, what: str) -> str:
    """'SEC − L2-reg at the held-out arms: +0.05 [−0.11, +0.20] (*not reproduced*: no effect larger than 0.5 points)'."""
    if rec is None or not rec.has_estimate:
        return ""
    num = lambda x: fmt_metric(x, "R@1", 2, True)       # noqa: E731
    return (f"{what}: {num(rec.estimate)} [{num(rec.ci_lo)}, {num(rec.ci_hi)}] (claim {rec.id}, "
            f"*{rec.verdict}*{equivalence_words(rec)})")


_BOLD, _ITALIC = re.compile(r"\*\*(.+?)\*\*"), re.compile(r"(?<![*\w])\*(?!\s)(.+?)(?<!\s)\*(?![*\w])")
_LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")


def inline_html(text: str) -> str:
    """The inline markdown the answer sentences use (``**bold**``, ``*italic*``, ``[text](url)``) as HTML, the rest
    escaped: a notebook's HTML output is not parsed as markdown."""
    out = html.escape(text, quote=False)
    out = _BOLD.sub(r"<b>\1</b>", out)
    out = _ITALIC.sub(r"<i>\1</i>", out)
    return _LINK.sub(lambda m: f'<a href="{html.escape(m.group(2))}">{m.group(1)}</a>', out)


#: What "glyphs" are, where the landing page's first word of its answer links to the data page.
GLYPHS_TITLE = ("the book's benchmark: characters rendered from many fonts, tested on classes never seen in "
                "training, as the paper's benchmarks are")


def answer_block(e: dict, paper: pd.DataFrame, data: str = "glyphs", details: bool = True) -> str:
    """HTML: the page's answer as one marked block (``page-answer``, which the page checker finds and measures):
    :func:`answer_sentence`, then the primary test's badge (:func:`primary_badge`). ``details=False`` (the landing
    page's first screen): :func:`plain_answer_text` only, in plain words without claim ids or tiers; the page shows
    :func:`answer_details` below its figure."""
    if not details:
        text = inline_html(plain_answer_text(e, paper, data))
        rec = e.get("record")
        words = ANSWER_WORDS.get(rec.verdict, "") if rec is not None else ""
        if words and f"is {words}:" in text:     # the verdict, marked for the page checker as a badge is
            marked = f'<span data-verdict="{html.escape(rec.verdict)}">{words}</span>'
            text = text.replace(f"is {words}:", f"is {marked}:", 1)
        if data == "glyphs":                      # the one word a newcomer cannot know yet: linked to its page
            text = text.replace("On glyphs,", f'On <a href="data.html" title="{GLYPHS_TITLE}">glyphs</a>,', 1)
        return f'<div class="page-answer" data-figure="first-screen"><p>{text}</p></div>'
    return (f'<div class="page-answer"><p>{inline_html(answer_sentence(e, paper, data))}</p>'
            f"{primary_badge(e)}</div>")


def plain_answer_text(e: dict, paper: pd.DataFrame, data: str = "glyphs") -> str:
    """The answer in plain words for a first screen: the bold sentence of :func:`answer_sentence` (the verdict, the
    estimate and its interval against the paper's gains), its sentence on L2-reg with SEC − L2-reg's interval, the
    one on equalizing the norms (relative SEC − none) and whether the four losses agree, with no claim id, tier or
    family (those follow in :func:`answer_details`)."""
    text = answer_sentence(e, paper, data)
    if e.get("record") is None or not np.isfinite(e.get("ci_hi", np.nan)):
        return text
    bold = text.partition(".**")[0] + ".**"
    num = lambda x: fmt_metric(x, "R@1", 2, True)       # noqa: E731
    iv = lambda r: f"{num(r.estimate)} [{num(r.ci_lo)}, {num(r.ci_hi)}]"   # noqa: E731
    l2, rel, rec = e.get("versus_l2"), e.get("relative"), e["record"]
    out = bold
    said = versus_l2_sentence(l2)
    if said:
        out += said[:-1] + f" (SEC − L2: {iv(l2)} points)."
    if rel is not None and rel.has_estimate:
        how = "also gains" if rel.verdict in report.SIGNAL_WORDS else "does not detectably gain"
        out += (f" Equalizing the norms without shrinking them {how}: {iv(rel)} points over no regularizer.")
    if rec.extra.get("groups_differ"):
        out += f" The four losses do not agree ({rec.extra['apart']})."
    return out


def answer_details(e: dict) -> str:
    """HTML, below the landing page's figure: the answer's numbers with their claim ids and verdict words
    (:func:`answer_sentence`'s "In R@1 points" part) and the primary test's badge (:func:`primary_badge`)."""
    parts = [_versus(e.get("record"), "SEC − none"),
             _versus(e.get("versus_l2"), "SEC − L2-reg at the held-out arms"),
             _versus(e.get("relative"), "relative SEC − none")]
    parts = [p for p in parts if p]
    lines = f"<p>{inline_html('Each number with its claim on the scorecard: ' + '; '.join(parts) + '.')}</p>" \
        if parts else ""
    return lines + (primary_badge(e) if e.get("record") is not None else "")


def answer_sentence(e: dict, paper: pd.DataFrame, data: str = "glyphs") -> str:
    """The page's answer: how large SEC's effect is on this benchmark, in the book's verdict words, against the
    paper's gains and against L2-reg; then three numbers with their intervals: SEC − none (the primary test),
    SEC − L2-reg at the held-out arms and relative SEC − none. ``paper``: :func:`paper_headline`; ``data`` names
    what our runs trained on (:func:`sec_lib.runs.benchmarks.data_name`)."""
    g = paper.loc[paper["loss"].isin(ex.MAIN_LOSSES), "paper_gain"]
    lo_p, hi_p = float(g.min()), float(g.max())
    rec = e.get("record")
    if not np.isfinite(e.get("ci_hi", np.nan)):
        return (f"**On {data}, the change SEC makes to R@1, averaged over the four losses, cannot be computed yet: "
                f"no loss has paired seeds with an interval (the paper's gains: {lo_p:.1f}–{hi_p:.1f} points).**")
    num = lambda x: fmt_metric(x, "R@1", 2, True)       # noqa: E731
    if rec is None:                                      # an estimate without its claim's record: no verdict word
        head = (f"**On {data}, SEC changes R@1 by {num(e['estimate'])} [{num(e['ci_lo'])}, {num(e['ci_hi'])}] points, "
                f"averaged over the four losses ({e['n']} seeds, 95% interval): the paper's gains of "
                f"{lo_p:.1f}–{hi_p:.1f} points are ")
        if e["ci_hi"] < lo_p:
            return head + "excluded.**"
        return head + f"not all excluded (gains up to {e['ci_hi']:.2f} points lie inside the interval).**"
    sized = rec.paper_size_text or f"the paper's gains of {lo_p:+.1f} to {hi_p:+.1f} R@1 points"
    head = (f"**On {data}, SEC's effect on R@1 is {ANSWER_WORDS.get(rec.verdict, rec.verdict)}: "
            f"{num(e['estimate'])} [{num(e['ci_lo'])}, {num(e['ci_hi'])}] points over no regularizer, averaged over "
            f"the four losses ({e['n']} seeds, 95% interval), against {sized}.**")
    l2, rel = e.get("versus_l2"), e.get("relative")
    head += versus_l2_sentence(l2)
    parts = [_versus(rec, "SEC − none"), _versus(l2, "SEC − L2-reg at the held-out arms"),
             _versus(rel, "relative SEC (equalizes the norms without shrinking them) − none")]
    parts = [p for p in parts if p]
    if len(parts) > 1:
        head += " In R@1 points: " + "; ".join(parts) + "."
    flag = rec.extra.get("apart") if rec.extra.get("groups_differ") else ""
    if flag:
        head += f" The four losses do not agree (loss × arm test p = {rec.extra['groups_p']:.2g}): {flag}."
    return head


def versus_l2_sentence(l2) -> str:
    """The answer's sentence on L2-reg, from SEC − L2-reg at the held-out arms (claim C5v's record; "" without one)."""
    if l2 is None or not l2.has_estimate:
        return ""
    if l2.verdict in report.SIGNAL_WORDS and l2.verdict != "negligible":
        return " SEC beats a plain L2 penalty toward zero at the same arms."
    if l2.verdict == "not reproduced" and l2.ci_lo <= 0 <= l2.ci_hi:
        return " A plain L2 penalty toward zero does as well."
    return " Whether SEC beats a plain L2 penalty toward zero, the data here cannot tell."


def plain_answer(profile: str = "cpu", root=None) -> str:
    """The landing page's answer as the README's first screen shows it: the bold part of :func:`answer_sentence`
    (on the tier the landing page reads), then its sentence on L2-reg, without the markup."""
    tier = evidence.page_evidence("home", profile, root).profile
    e = primary(profile, root)
    sentence = answer_sentence(e, paper_headline(datasets=paper_sets(tier)), benchmarks.data_name(tier))
    bold = sentence.removeprefix("**").partition("**")[0]
    return bold + versus_l2_sentence(e["versus_l2"])


def longer_runs_sentence(tier: str, root=None) -> str:
    """Below the landing page's figure, where it reads the decisive tier: once the registered follow-up on the gap's
    convergence is complete, what it found (:func:`sec_lib.chapters.convergence_length.landing_sentence`: the
    20,250-iteration gap beside the answer's, and whether the answer is the converged one); '' otherwise, and on any
    other tier (its runs are not the ones retrained)."""
    return convergence_length.landing_sentence(root) if tier == convergence_length.TIER else ""


def weight_decay_sentence(tier: str, root=None) -> str:
    """Below the landing page's figure, where it reads the decisive tier: once the registered follow-up on the
    authors' weight decay is complete, SEC − none over that baseline
    (:func:`sec_lib.chapters.compare_weightdecay.landing_sentence`); '' otherwise."""
    return compare_weightdecay.landing_sentence(tier, root)


def followup_brief(tier: str, root=None) -> str:
    """One short paragraph under the landing page's answer, on its first screen: what each complete follow-up that
    tests the answer's estimate found, in a line each (:func:`sec_lib.chapters.convergence_length.landing_brief`,
    :func:`sec_lib.chapters.compare_weightdecay.landing_brief`; their whole sentences sit below the figure). '' while
    neither is complete, and on another tier than the decisive one."""
    longer = convergence_length.landing_brief(root) if tier == convergence_length.TIER else ""
    return " ".join(s for s in (longer, compare_weightdecay.landing_brief(tier, root)) if s)


#: The README's words for each follow-up that tests the answer, while it trains.
README_TRAINING = {"C4L": "the longer runs", "C4W": "the weight-decay runs"}


def readme_followups(root=None) -> str:
    """The README's paragraph under its answer, on the tier the landing page reads (``tools/readme_answer.py``
    writes it; a test keeps it in step): which registered follow-ups test the answer, what the complete ones found
    (:func:`followup_brief`, the landing page's own line, then P1c's,
    :func:`sec_lib.chapters.pretrained_seeds.readme_brief`) and which still train. No run counts, so that committing
    a run changes it only when a follow-up completes."""
    tier = evidence.page_evidence("home", "cpu", root).profile
    out = ("Two follow-ups, registered before any of their runs, test this answer: the same runs 1.5× longer, and the "
           "authors' weight decay in the baseline; a third retests the fine-tuning regime's hint on fresh seeds "
           "(`data/followups/`).")
    found = " ".join(s for s in (followup_brief(tier, root), pretrained_seeds.readme_brief(tier, root)) if s)
    training = [README_TRAINING[f["id"]] for f in followup_status(root)
                if f["id"] in README_TRAINING and not 0 < f["runs"] <= f["committed"]]
    if not found:
        return out + (" They are training; the landing page says how far, and their verdicts join the answer once all "
                      "their runs are committed.")
    out += f" What they found: {found[:1].lower()}{found[1:]}"
    if training:
        out += (f" {' and '.join(training).capitalize()} still train; the landing page says how far, and "
                f"{'their verdicts join' if len(training) > 1 else 'its verdict joins'} the answer once all "
                f"{'their' if len(training) > 1 else 'its'} runs are committed.")
    return out


def followups_sentence(root=None) -> str:
    """The registered follow-ups that test the headline and are still training, with how far they are (until they are
    committed, the answer above stands as the registered test gives it); '' once each is complete (its line then
    sits under the answer, :func:`followup_brief`, and its sentence below the figure)."""
    rows = [f for f in followup_status(root) if f["question"] == "C4" and not 0 < f["runs"] <= f["committed"]]
    if not rows:
        return ""
    each = "; ".join(f"{f['id']} ({f['readme']}): {f['committed']} of {f['runs']} runs committed"
                     for f in rows)
    which = "Two registered follow-ups test" if len(rows) == 2 else "A registered follow-up tests"
    their = "Their verdicts join" if len(rows) == 2 else "Its verdict joins"
    return (f"{which} this estimate before the book leans on it further: {each}. {their} the answer once all "
            f"{'their' if len(rows) == 2 else 'its'} runs are committed.")


def paper_sets(profile: str) -> tuple:
    """The paper's datasets whose gains the landing page sets beside ours: all four of its Table 1 for a glyph
    book, the book's own dataset for a real-benchmark one (:data:`sec_lib.runs.benchmarks.PAPER_DATASET`)."""
    return (benchmarks.PAPER_DATASET[profile],) if profile in benchmarks.PAPER_DATASET else PAPER_DATASETS


def paper_headline(metric: str = "R@1", datasets=PAPER_DATASETS) -> pd.DataFrame:
    """The paper's SEC − none gain in ``metric`` per dataset and loss (from its Table 1)."""
    p = reference.paper_gains(list(datasets), [metric])
    p = p[p["variant"] == "sec"][["dataset", "loss", "paper_gain"]].reset_index(drop=True)
    p.attrs["source"] = reference.SOURCES["table1"]
    return p


def verdict_tally(profile, root=None) -> dict:
    """The scorecard's tally by question, as the claims page's answer gives it (:func:`scorecard.answer_counts` on
    the rows it shows, :func:`scorecard.decided`): {group: questions}, ``"rows"``: the rows of evidence beneath them,
    ``"tiers"``: the long tiers read (none where the book counts its own runs), ``"own"``: whether it does;
    ``{"error": ...}`` when a page's runs are missing."""
    try:
        table = scorecard.decided(scorecard.claims_frame(scorecard.records(profile, root)), profile)
    except (KeyError, FileNotFoundError, ValueError) as e:     # a missing chapter's runs
        return {"error": str(e)}
    own = not scorecard.decisive_stands_in(profile)
    qs = scorecard.questions(table)
    groups = scorecard.answer_counts(qs, table, own)[0]
    return {**groups, "rows": scorecard.rows_beneath(qs, own), "tiers": () if own else scorecard.counted_tiers(table),
            "own": own}


def _pp(x) -> str:
    return fmt_metric(x, "R@1", 2, True)            # as the answer and every table give R@1 points


def _interval(r) -> str:
    if not np.isfinite(r.ci_lo):
        return f"{_pp(r.estimate)} (one seed, no interval)"
    return f"{_pp(r.estimate)} [{_pp(r.ci_lo)}, {_pp(r.ci_hi)}]"


def headline_sentences(gains: pd.DataFrame, paper: pd.DataFrame, tally: dict | None) -> list[str]:
    """Three computed sentences: the result at the selected η, at the paper's η next to the paper's
    gains, and the claims page's tally."""
    metric = gains.attrs.get("metric", "R@1")
    out = []
    for setting in ("selected", "paper"):
        g = gains[gains["setting"] == setting]
        if not len(g):
            out.append(f"No SEC − none comparison at {ETA_SETTINGS[setting]} could be computed.")
            continue
        above = int((g["ci_lo"] > 0).sum())
        below = int((g["ci_hi"] < 0).sum())
        n_seeds = int(g["n"].max())
        each = "; ".join(f"{r.loss} {_interval(r)}" for r in g.itertuples(index=False))
        s = (f"At {ETA_SETTINGS[setting]}, SEC − none in {metric} (points, mean over {n_seeds} paired seeds "
             f"[95% interval]) is {each}: the interval lies above zero for {above} of {len(g)} losses and below "
             f"zero for {below}")
        if setting == "paper" and len(paper):
            s += (f"; the paper reports gains of {paper['paper_gain'].min():+.1f} to {paper['paper_gain'].max():+.1f} "
                  f"points over {paper['dataset'].nunique()} datasets")
        out.append(s + ".")
    if tally and "error" not in tally:
        t = dict(tally)
        tiers, own = t.pop("tiers", None) or (), t.pop("own", False)
        where = "this book's own runs" if own else tiers_phrase(tiers)
        rows = t.pop("rows", 0)
        s = (f"On the scorecard, the paper's claims and the reviewers' questions decided on {where}, "
             f"{sum(t.values())} in all, each counted once: "
             + (count_words({g: k for g, k in t.items() if k}) or "none yet")
             + f" ({rows} rows of evidence lie beneath them).")
        out.append(s)
    elif tally and "error" in tally:
        out.append(f"The scorecard's verdict tally could not be computed here: {tally['error']}")
    else:
        out.append("The scorecard's verdict tally is not available.")
    return out


def page_claim(page: str, claim_id: str, profile, root=None):
    """Claim ``claim_id``'s record, decided on ``page``'s own evidence (the tier that page shows); None where the page
    does not apply (a benchmark book) or its runs are missing."""
    if benchmarks.page_note(profile, page) is not None:
        return None
    try:
        recs = evidence.page_records(page, evidence.page_evidence(page, profile, root))
    except (KeyError, FileNotFoundError, ValueError):
        return None
    return next((r for r in recs if r.id == claim_id), None)


def regime_record(profile, root=None):
    """Claim P1's record (the pretrained page's regime interaction), decided on that page's evidence
    (:func:`page_claim`)."""
    return page_claim("pretrained", "P1", profile, root)


def mechanism_record(profile, root=None):
    """Claim S1's record (the scale page: does SEC's gain go with equalizing the norms or with shrinking them?),
    decided on that page's evidence (:func:`page_claim`)."""
    return page_claim("scale", "S1", profile, root)


def mechanism_sentence(record) -> str:
    """The landing page's line on the scale page: relative SEC (equalizes without shrinking) − none, claim S1, with
    its verdict and the mechanism the page's family reads ('' until that claim has an estimate)."""
    if record is None or not record.has_estimate:
        return ""
    which = record.note.split(": ", 1)[1] if record.note.startswith("which mechanism") else record.note
    return (f"**Shrink or equalize?** SEC lowers the norms' spread (their CV) but also shrinks their scale, as L2-reg "
            f"does. [The scale page](scale.html) separates the two with a scale-free SEC and a fixed-scale control. "
            f"Relative SEC, which equalizes without shrinking, − none (claim {record.id}, mean over the four "
            f"losses; {record.tier or 'quick'} tier): {record.evidence} R@1 points, **{record.verdict}**"
            f"{equivalence_words(record)}{inconclusive_words(record)}; the mechanism the page's declared family "
            f"finds: {which}.")


def regime_followup(record, root=None) -> str:
    """P1c's words for the landing page's regime line (:func:`sec_lib.chapters.pretrained_seeds.fresh_seeds_sentence`),
    on the tier that P1's ``record`` was decided on; '' where the record has no estimate or another tier."""
    if record is None or not record.has_estimate or not record.tier:
        return ""
    return pretrained_seeds.fresh_seeds_sentence(record.tier, root)


def regime_sentence(record, followup: str = "") -> str:
    """The landing page's line on the book's most direct test of the paper's setting, the pretrained page, with its
    claim's verdict ('' until that claim has an estimate), then ``followup``, the registered follow-up's words
    (:func:`sec_lib.chapters.pretrained_seeds.fresh_seeds_sentence`: its result once its runs are committed)."""
    if record is None or not record.has_estimate:
        return ""
    return (f"**The paper's own regime.** The book's most direct test of the paper's setting is "
            f"[the pretrained page](pretrained.html): the glyph network fine-tuned from a backbone pretrained here, "
            f"each loss without and with SEC, beside the same runs from scratch. Whether SEC's effect is larger there "
            f"(claim {record.id}, fine-tuned − from-scratch SEC − none, mean over the losses; {record.tier or 'quick'} "
            f"tier): {record.evidence} R@1 points, **{record.verdict}**{inconclusive_words(record)}"
            + (f" as registered; under the book's family rule (a pooled row alone) it reads "
               f"**{record.rule_verdict}**"
               + (": SEC gains less when fine-tuning, the opposite of the claim" if record.estimate
                  * record.expected_sign < 0 else "")
               if getattr(record, "rule_verdict", "") else "") + "." + (f" {followup}" if followup else ""))


def beyond_sentence(profile, root=None) -> str:
    """The landing page's line on the losses beyond the paper's four (the review's question 8): the compare page's
    rows of SEC at the held-out η − none for tuplet margin and CosFace, as its beyond table tests them
    (:func:`sec_lib.chapters.gains.selected_eta_rows`, with that table's Holm family and verdicts). '' where the
    compare page has no such runs."""
    ev = evidence.page_evidence("compare", profile, root)
    try:
        rows = selected_eta_rows(ev, ex.EXTRA_LOSSES)
    except (KeyError, ValueError):
        return ""
    if not len(rows):
        return ""
    each = "; ".join(f"{loss_noun(loss)} {_interval(r)} (**{r['verdict']}**{inconclusive_words(dict(r))}, "
                     f"{mde_text(r['mde'])})" for loss, r in rows.iterrows())
    others = other_losses_sentence(profile, root)
    return (f"**Beyond the paper's four losses** ({ev.profile} tier; the reviewers asked whether SEC helps other losses, their question 8), SEC at the η chosen "
            f"on held-out classes − none in R@1 (points, {int(rows['n'].max())} paired seeds [95% interval]) is "
            f"{each}. The compare page shows these losses' other arms too." + (f" {others}" if others else ""))


#: The review's question 8 on the pages of its other losses: (page, its link text, ((claim, name in the line), ...)).
OTHER_LOSSES = (("ssl", "its contrastive-learning page", (("Q8a-r", "SimCLR"), ("Q8e", "supervised contrastive"))),
                ("face", "its face-loss page", (("Q8c", "ArcFace"),)))


def other_losses_sentence(profile, root=None) -> str:
    """The same question's losses that have pages of their own, so that the landing line does not stop at the two
    losses the compare page tests: each claim's R@1 gain and verdict as its page decides it (SimCLR's retrieval row,
    in R@1 as the line's others are; its linear-probe row stays on its page). '' where no such page has evidence."""
    parts = []
    for page, link, named in OTHER_LOSSES:
        try:
            recs = {r.id: r for r in evidence.page_records(page, evidence.page_evidence(page, profile, root))}
        except (KeyError, ValueError, FileNotFoundError, AttributeError):
            continue
        items = [f"{name} {recs[i].evidence} (**{recs[i].verdict}**)" for i, name in named if i in recs]
        if items:
            parts.append(f"{' and '.join(items)} on [{link}]({page}.html)")
    return ("The same question's other losses, in R@1: " + "; ".join(parts) + ".") if parts else ""
