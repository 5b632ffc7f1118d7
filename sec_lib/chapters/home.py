"""The landing page: the answer first.

Per loss, SEC − none in R@1 (paired by seed, 95% interval) at the η chosen on held-out classes (the
``tuned`` runs) and at the paper's η (the main table, ``experiments.ETA_SEC``), beside the paper's own
gain on each of its datasets (:func:`sec_lib.reference.paper_gains`); three sentences computed from
those numbers and from the claims page's verdict tally.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..runs import experiments as ex
from .. import reference, report
from ..reference import PAPER_DATASETS
from . import profile_param
from .common import MAIN_CHAPTER, equivalence_words, inconclusive_words, load, order_rows
from ..report import fmt_metric
from .compare import sec_gain

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
    for chapter in ("tuned", MAIN_CHAPTER):
        frames = load(chapter, profile, tables=(), root=root)
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


def primary_estimate(runs: pd.DataFrame) -> dict:
    """The primary test on ``runs`` (a ``tuned`` chapter's runs frame): SEC at the η chosen on held-out classes
    minus no regularizer, in R@1, pooled over the four main losses. Per seed the four paired differences are
    averaged, and the per-seed means are t-tested against 0 (:func:`sec_lib.report.pooled_diff`): ``estimate,
    ci_lo, ci_hi, n`` (seeds), ``p_value``, ``n_groups`` (losses)."""
    r = runs[runs["loss"].isin(ex.MAIN_LOSSES) & runs["variant"].isin(("none", "sec"))]
    return report.pooled_diff(r, "variant", "none", "sec", "R@1")


def primary(profile, root=None) -> dict:
    """The primary test as the compare page decides it (claim C4v, :func:`primary_estimate` on that page's
    evidence): ``estimate, ci_lo, ci_hi, n, p_value`` and the ``record``."""
    from .evidence import page_evidence, page_records
    rec = next(r for r in page_records("compare", page_evidence("compare", profile, root)) if r.id == "C4v")
    return {"estimate": rec.estimate, "ci_lo": rec.ci_lo, "ci_hi": rec.ci_hi, "n": rec.n, "p_value": rec.p_value,
            "record": rec}


def primary_badge(e: dict) -> str:
    """HTML: the primary test's claim id and verdict (its record's badge), with the tier it was read from."""
    from ..report.claims import badge
    r = e["record"]
    detect = f"could detect {r.detectable} points" if r.detectable else "no detectable effect without a spread"
    return (f"<p>The primary test is claim {badge(r)}{equivalence_words(r)} (Holm family: {r.family}; "
            f"{r.tier or 'no'} tier; {detect}).</p>")


def answer_sentence(e: dict, paper: pd.DataFrame, data: str = "glyphs") -> str:
    """The page's first sentence: the primary estimate with its interval, and whether it excludes the gains the
    paper reports for the four losses on its datasets (``paper``: :func:`paper_headline`); ``data`` names what our
    runs trained on (:func:`sec_lib.runs.benchmarks.data_name`)."""
    g = paper.loc[paper["loss"].isin(ex.MAIN_LOSSES), "paper_gain"]
    lo_p, hi_p = float(g.min()), float(g.max())
    if not np.isfinite(e.get("ci_hi", np.nan)):
        return (f"**On {data}, the change SEC makes to R@1, averaged over the four losses, cannot be computed yet: "
                f"no loss has paired seeds with an interval (the paper's gains: {lo_p:.1f}–{hi_p:.1f} points).**")
    num = lambda x: fmt_metric(x, "R@1", 2, True)       # noqa: E731
    head = (f"**On {data}, SEC changes R@1 by {num(e['estimate'])} [{num(e['ci_lo'])}, {num(e['ci_hi'])}] points, "
            f"averaged over the four losses ({e['n']} seeds, 95% interval): the paper's gains of {lo_p:.1f}–{hi_p:.1f} "
            f"points are ")
    if e["ci_hi"] < lo_p:
        return head + "excluded.**"
    return head + f"not all excluded (gains up to {e['ci_hi']:.2f} points lie inside the interval).**"


def paper_sets(profile: str) -> tuple:
    """The paper's datasets whose gains the landing page sets beside ours: all four of its Table 1 for a glyph
    book, the book's own dataset for a real-benchmark one (:data:`sec_lib.runs.benchmarks.PAPER_DATASET`)."""
    from ..runs import benchmarks
    return (benchmarks.PAPER_DATASET[profile],) if profile in benchmarks.PAPER_DATASET else PAPER_DATASETS


def paper_headline(metric: str = "R@1", datasets=PAPER_DATASETS) -> pd.DataFrame:
    """The paper's SEC − none gain in ``metric`` per dataset and loss (from its Table 1)."""
    p = reference.paper_gains(list(datasets), [metric])
    p = p[p["variant"] == "sec"][["dataset", "loss", "paper_gain"]].reset_index(drop=True)
    p.attrs["source"] = reference.SOURCES["table1"]
    return p


def verdict_tally(profile, root=None) -> dict:
    """The scorecard's tally ({verdict: count} over the committed long tiers, ``"quick tier only"``: the rows with
    quick-tier evidence only, and ``"tiers"``: the long tiers the counted rows were read from, each claim from the
    tier its page shows), from the claims page's records; ``{"error": ...}`` when a page's runs are missing."""
    from . import claims          # imported here: the claims page pulls in every chapter
    try:
        table = claims.claims_frame(claims.records(profile, root))
    except (KeyError, FileNotFoundError, ValueError) as e:     # a missing chapter's runs
        return {"error": str(e)}
    return {**claims.verdict_counts(table), "tiers": claims.counted_tiers(table)}


def _pp(x) -> str:
    return fmt_metric(x, "R@1", 1, True)


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
        quick = t.pop("quick tier only", 0)
        from .claims import tiers_phrase
        where = tiers_phrase(t.pop("tiers", None) or ())
        s = (f"On the scorecard, the {sum(t.values())} bodies of evidence read from {where} give: "
             + (", ".join(f"**{k}** {v}" for k, v in t.items() if v) or "none yet") + ".")
        if quick:
            s += f" {quick} more have quick-tier evidence only and are not counted."
        out.append(s)
    elif tally and "error" in tally:
        out.append(f"The scorecard's verdict tally could not be computed here: {tally['error']}")
    else:
        out.append("The scorecard's verdict tally is not available.")
    return out


def page_claim(page: str, claim_id: str, profile, root=None):
    """Claim ``claim_id``'s record, decided on ``page``'s own evidence (the tier that page shows); None where the page
    does not apply (a benchmark book) or its runs are missing."""
    from ..runs.benchmarks import page_note
    from . import evidence
    if page_note(profile, page) is not None:
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


def regime_sentence(record) -> str:
    """The landing page's line on the book's most direct test of the paper's setting, the pretrained page, with its
    claim's verdict ('' until that claim has an estimate)."""
    if record is None or not record.has_estimate:
        return ""
    return (f"**The paper's own regime.** The book's most direct test of the paper's setting is "
            f"[the pretrained page](pretrained.html): the glyph network fine-tuned from a backbone pretrained here, "
            f"each loss without and with SEC, beside the same runs from scratch. Whether SEC's effect is larger there "
            f"(claim {record.id}, fine-tuned − from-scratch SEC − none, mean over the losses; {record.tier or 'quick'} "
            f"tier): {record.evidence} R@1 points, **{record.verdict}**{inconclusive_words(record)}.")


def beyond_sentence(profile, root=None) -> str:
    """The landing page's line on the losses beyond the paper's four (the review's question 8): the compare page's
    rows of SEC at the held-out η − none for tuplet margin and CosFace, as its beyond table tests them
    (:func:`sec_lib.chapters.compare.selected_eta_rows`, with that table's Holm family and verdicts). '' where the
    compare page has no such runs."""
    from . import compare, evidence
    from .common import loss_noun, mde_text
    ev = evidence.page_evidence("compare", profile, root)
    try:
        rows = compare.selected_eta_rows(ev, ex.EXTRA_LOSSES)
    except (KeyError, ValueError):
        return ""
    if not len(rows):
        return ""
    each = "; ".join(f"{loss_noun(loss)} {_interval(r)} (**{r['verdict']}**{inconclusive_words(dict(r))}, "
                     f"{mde_text(r['mde'])})" for loss, r in rows.iterrows())
    return (f"**Beyond the paper's four losses** ({ev.profile} tier; the reviewers asked whether SEC helps other losses, their question 8), SEC at the η chosen "
            f"on held-out classes − none in R@1 (points, {int(rows['n'].max())} paired seeds [95% interval]) is "
            f"{each}. The compare page shows these losses' other arms too.")
