"""The claims page: every claim of the paper and question of the review as one line of a scorecard,
collected from the pages that decide them, tallied by tier, and shown; the page opens with the tally in plain words
(:func:`answer_html`).

Nothing here computes an estimate. Each page module holds the claims it owns (``CLAIMS``, a list of
:class:`sec_lib.report.claims.Claim`) and decides them on its own evidence
(:func:`sec_lib.chapters.evidence.page_records`); this page collects those records
(:func:`records`), counts them (the long tiers only; quick-tier-only rows apart) and displays them (:func:`decided`:
no quick-tier row where the decisive tier is committed; the quick tier is set beside the decisive one on the tiers
page, which compares them on purpose: :func:`tier_agreement`).
Its own claims are question 10 with the class as the attribute (:mod:`.normclass`).
"""
from __future__ import annotations

import html as _html
from typing import Sequence

import numpy as np
import pandas as pd

from .. import report
from ..figures.tables import csv_link, fold_columns
from ..report.claims import FAMILY_RULE, anchor, estimate_source, sign_word
from ..runs import longruns
from . import convergence_length, evidence, profile_param
# The scorecard's records, tally and questions; their names are this page's too.
from .scorecard import (FOLLOWUPS, GROUP_WORDS, GROUPS, QUESTIONS, QUICK_ONLY, answer_counts,  # noqa: F401
                        claims_frame, count_words, counted, counted_tiers, counts_sentence, decided, decisive_stands_in,
                        followup_status, group_of,
                        is_long_tier, p_cell, question_counts, questions, questions_sentence, records, rows_beneath,
                        tiers_phrase,
                        verdict_counts, waiting_sentence)
from .normclass import (CLAIMS, HIT_COLUMNS, class_association, class_association_summary,  # noqa: F401 (the page's API)
                        difficulty_association, difficulty_sentence)

#: The notebook's parameters (checked by ``sec_lib.params.notebook_params``).
PARAMS = profile_param()


def claim_definitions(claims: Sequence | None = None) -> pd.DataFrame:
    """The claim definitions of every page as a table: id, claim, source, how measured, unit, expected
    sign, the function computing the estimate, the page that decides it and its Holm family."""
    claims = claims if claims is not None else [c for p in evidence.claim_pages() for c in evidence.page_claims(p)]
    rows = [{"id": c.id, "claim": c.claim, "source": c.source, "measured": c.measured, "unit": c.unit,
             "expected": sign_word(c.expected_sign), "function": estimate_source(c.estimate),
             "page": c.href, "family": c.family_name} for c in claims]
    out = pd.DataFrame(rows).sort_values("id", key=lambda s: s.map(evidence.claim_sort_key)).reset_index(drop=True)
    # on the page: id, claim, unit, expected, page; how it is measured and decided folded under it
    return fold_columns(out, ["id"], {"How each claim is measured and decided (source, measure, function, family)":
                                      ["source", "measured", "function", "family"]})


def _row_html(r: dict, head: bool) -> str:
    """One claim's line of the scorecard: id, the claim's words, evidence, adjusted p, verdict (with the paper's
    size, the loss × arm flag, the family rule's word and the reading where they apply), tier and page."""
    link = _text(r.get("link"))
    page = f'<a href="{_html.escape(link)}">{_html.escape(link.split("#")[0].removesuffix(".html"))}</a>'
    notes = []
    if _text(r.get("paper_size_text")):
        notes.append("sized against " + _html.escape(r["paper_size_text"]))
    if _text(r.get("reading")):
        notes.append(_html.escape(r["reading"]))
    if r.get("groups_differ") == True:  # noqa: E712 (a numpy bool, or NaN where the row has no test)
        notes.append(f"⚑ the losses differ (loss × arm test p = {r['groups_p']:.2g}): {_html.escape(r['apart'])}")
    if _text(r.get("rule_verdict")):
        notes.append(f"registered: <b>{_html.escape(r['verdict'])}</b>; under the family rule (this row alone): "
                     f"<b>{_html.escape(r['rule_verdict'])}</b>")
    if _text(r.get("added")):
        notes.append(_html.escape(r["added"]))
    detail = _detail(r)
    v = _html.escape(r["verdict"])
    text = _html.escape(str(r["text"]))
    cls = ' class="question-head"' if head else ""
    notes_html = '<br><em class="claim-notes">' + "; ".join(notes) + "</em>" if notes else ""
    return (f'<tr id="{anchor(r["claim"])}" data-claim="{_html.escape(r["claim"])}" data-verdict="{v}"{cls}>'
            f'<td><b>{_html.escape(r["claim"])}</b></td><td>{text}'
            f'{notes_html}</td>'
            f'<td>{_html.escape(r["evidence"])} {_html.escape(_text(r.get("unit")))}</td><td>{_html.escape(r["p"])}</td>'
            f'<td class="verdict verdict-{r["verdict"].replace(" ", "-")}"><b>{v}</b></td>'
            f'<td>{_html.escape(_text(r.get("tier")) or "—")}</td><td>{page}</td></tr>'
            f'<tr class="claim-detail"><td></td><td colspan="6"><details><summary>how it is measured and decided'
            f'</summary>{detail}</details></td></tr>')


def followup_state(f: dict, ids: set, root=None) -> str:
    """A registered follow-up's state on the scorecard, as HTML (``f``: a row of :func:`followup_status`; ``ids``: the
    scorecard's claim ids): while it trains, how many runs are committed; once all are, the row of the scorecard that
    holds its verdict, or, for C4L (its verdict words are its own: stable, still moving, undecided), its primary's Δ
    and verdict with a link to the convergence page."""
    if not 0 < f["runs"] <= f["committed"]:
        return f'{f["committed"]} of {f["runs"] or "its"} runs committed, no verdict until all are.'
    done = f'all {f["runs"]} runs committed'
    if f["id"] in ids:
        return f'{done}; its verdict is its own row, <a href="#{anchor(f["id"])}">{f["id"]}</a>.'
    if f["id"] == longruns.ID:
        row = convergence_length.results(root=root)["family"].iloc[0]
        return (f'{done}: {_html.escape(row["comparison"])} changes by Δ = {row["delta"]:+.2f} R@1 points from '
                f'{longruns.BASE_LENGTH:,} to {longruns.LENGTH:,} iterations (95% CI [{row["lo"]:+.2f}, '
                f'{row["hi"]:+.2f}]) → <b>{_html.escape(row["verdict"])}</b> (<a href="convergence.html">the '
                f'convergence page</a>).')
    return f'{done}; its verdict is on the page that owns its question.'


def then(question: str, state: str) -> str:
    """A follow-up's question, then its state: a new sentence after a question mark, else after a semicolon."""
    if question.rstrip().endswith("?"):
        return f"{question.rstrip()} {state[:1].upper()}{state[1:]}"
    return f"{question}; {state}"


def scorecard_html(table: pd.DataFrame, qs: pd.DataFrame | None = None, name: str = "claims", root=None) -> str:
    """The scorecard grouped by question: for each group of :data:`GROUPS` (holds, smaller, fails, undecided), its
    questions, each with the row that decides it (the claim's words visible) and the other rows folded beneath it,
    and the registered follow-ups listed under the question they follow up (:func:`followup_state`); a CSV of every
    row."""
    qs = questions(table) if qs is None else qs
    rows = {r["claim"]: r for r in table.to_dict("records")}
    follow = {}
    for f in followup_status(root):
        follow.setdefault(f["question"], []).append(f)
    cols = ["claim", "the claim", "estimate [95% CI]", "adj. p", "verdict", "tier", "page"]
    head = "".join(f"<th>{c}</th>" for c in cols)
    out = []
    for group, _ in GROUPS:
        sub = qs[qs["group"] == group]
        if not len(sub):
            continue
        body = []
        for q in sub.to_dict("records"):
            apart = " (the meta-review’s question; the paper made no claim on it)" if q["beyond"] else ""
            body.append(f'<tr class="question"><td colspan="{len(cols)}"><b>{_html.escape(q["question"])}</b>'
                        f'{apart}</td></tr>')
            body.append(_row_html(rows[q["decides"]], True))
            if q["beneath"]:
                inner = "".join(_row_html(rows[i], False) for i in q["beneath"])
                rows_word = "rows" if len(q["beneath"]) > 1 else "row"
                body.append(f'<tr><td></td><td colspan="{len(cols) - 1}"><details><summary>{len(q["beneath"])} more '
                            f'{rows_word} on this question</summary><table class="sec-table">{inner}</table>'
                            f'</details></td></tr>')
            for f in follow.get(q["key"], []):
                said = then(_html.escape(f["readme"]), followup_state(f, set(rows), root))
                body.append(f'<tr><td></td><td colspan="{len(cols) - 1}"><small>Registered follow-up <b>{f["id"]}</b> '
                            f'({_html.escape(f["folder"])}): {said}</small></td></tr>')
        out.append(f'<h3 class="scorecard-group">{_html.escape(group[0].upper() + group[1:])} ({_group_count(sub)})'
                   '</h3>'
                   f'<table class="sec-table claims-scorecard"><thead><tr>{head}</tr></thead>'
                   f'<tbody>{"".join(body)}</tbody></table>')
    csv_cols = ["claim", "estimate", "ci_lo", "ci_hi", "p_value", "p_adj", "m", "family", "verdict", "rule_verdict",
                "paper_size_text", "groups_p", "apart", "reading", "added", "mde", "n", "n_counts", "tier",
                "same_runs_as", "text", "source", "measured", "unit", "paper", "expected_sign", "margin", "link",
                "note"]
    csv = table[[c for c in csv_cols if c in table.columns]]
    return "".join(out) + f"<p>{csv_link(csv, name)}</p>"


def _group_count(sub: pd.DataFrame) -> str:
    """How many questions a scorecard group holds, the way the answer counts them: the paper's and the reviewers'
    questions, and the one the paper made no claim on apart ("8, and the meta-review's question")."""
    own = int(sub["beyond"].sum())
    n = len(sub) - own
    return (f"{n}, and the meta-review’s question" if own == 1 else f"{n}, and {own} the paper made no claim on"
            if own else str(n))


def family_rule_sentence(table: pd.DataFrame) -> str:
    """The written family rule (:data:`sec_lib.report.claims.FAMILY_RULE`) and the rows where it reads differently
    from the registered family: each with both words, labelled."""
    differ = table[table["rule_verdict"].fillna("").astype(str) != ""] if "rule_verdict" in table.columns else table[:0]
    text = f"**The rule.** {FAMILY_RULE}"
    if not len(differ):
        return text + " No registered row reads differently under it."
    each = "; ".join(f"{r.claim} ({r.evidence}): registered *{r.verdict}* (Holm over the {int(r.m)} rows of its "
                     f"family, adjusted p = {r.p_adj:.2g}), under the rule *{r.rule_verdict}* (raw p = "
                     f"{r.p_value:.2g})" for r in differ.itertuples(index=False))
    return text + f" Where it would read differently: {each}."


def tier_sentence(table: pd.DataFrame) -> str:
    """Which tier each row's evidence was read from (the ``tier`` column), as a page's tier sentence ("**Evidence on
    this page: the decisive tier** ..."), which the site folds into the box at the page's end."""
    tiers = table.get("tier", pd.Series([""] * len(table))).fillna("").astype(str)
    have = tiers[tiers != ""].value_counts()
    if not len(have):
        return "No row has runs behind it."
    return (f"**Evidence on this page: {tiers_phrase(have.index)}**: "
            + ", ".join(f"{n} rows from the **{t}** tier" for t, n in have.items())
            + ". Each page reads the decisive tier where it holds all of the page's runs, and the quick tier until "
              "it does.")


def _and(parts: Sequence[str]) -> str:
    """'', 'a', 'a and b', 'a, b and c'."""
    parts = list(parts)
    return "" if not parts else parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def answer_html(qs: pd.DataFrame, table: pd.DataFrame, profile: str = "cpu") -> str:
    """HTML: the page's answer, marked for the page checker (``page-answer``; a tally has no interval, so it carries
    ``data-interval="none"``), in plain words: how many of the paper's claims and its reviewers' questions hold, hold
    but smaller, fail and are undecided, then the verdicts of the separate bodies of evidence, each once (zeros left
    out), each count with its verdict word in ``data-verdict`` (:func:`~sec_lib.chapters.scorecard.answer_counts`:
    where the decisive tier stands in for ``profile``, the rows with quick-tier evidence only are said apart and not
    counted)."""
    own = not decisive_stands_in(profile)
    groups, counts, quick = answer_counts(qs, table, own)
    if not sum(groups.values()):
        return ('<div class="page-answer" data-interval="none"><p>No claim of the paper has evidence in this book '
                "yet: its runs are not trained.</p></div>")
    words = dict(GROUPS)
    first = _and([f'<b data-verdict="{words[g][0]}">{k} {GROUP_WORDS[g][k != 1]}</b>' for g, k in groups.items()])
    second = _and([f'<span data-verdict="{v}">{k} {v}</span>' for v, k in counts.items() if k])
    quick_text = (f" {quick} more {'has' if quick == 1 else 'have'} only the short runs <code>make book</code> trains "
                  f"behind {'it' if quick == 1 else 'them'} and {'is' if quick == 1 else 'are'} not counted."
                  if quick else "")
    where = f" on this book’s own runs (profile <code>{_html.escape(profile)}</code>)" if own else ""
    return (f'<div class="page-answer" data-interval="none"><p>Of the paper’s claims and its reviewers’ questions, '
            f"{sum(groups.values())} in all, {first}{where}. Counted test by test instead, over "
            f"{sum(counts.values())} separate tests: {second}.{quick_text}</p></div>").replace("paper's", "paper’s")


#: :func:`tier_agreement`'s columns for the quick tier: labelled as read by no verdict.
QUICK_COLUMNS = ("quick tier (no verdict reads it)", "quick tier's verdict (not used)")


def tier_agreement(table: pd.DataFrame, quick: pd.DataFrame) -> pd.DataFrame:
    """The rows read from a long tier beside the same claims on the quick tier (for the page that compares the tiers
    on purpose, the tiers page): both estimates with their intervals, both verdicts, the quick tier's labelled as
    read by no verdict (:data:`QUICK_COLUMNS`), and whether the two estimates have the same sign."""
    q = quick.set_index("claim")
    rows = []
    for r in table.itertuples(index=False):
        if not is_long_tier(r.tier) or r.claim not in q.index:
            continue
        qr = q.loc[r.claim]
        rows.append({"claim": r.claim, f"{r.tier} tier": r.evidence, f"{r.tier} verdict": r.verdict,
                     QUICK_COLUMNS[0]: qr["evidence"], QUICK_COLUMNS[1]: qr["verdict"],
                     "same sign": evidence.same_sign(r.estimate, qr["estimate"])})
    return pd.DataFrame(rows)


# ------------------------------------------------------------------------------------------- display

def _text(x) -> str:
    return "" if x is None or (isinstance(x, float) and np.isnan(x)) else str(x)


def _detail(r: dict) -> str:
    """How a scorecard row was measured and decided (source, measure, expected sign, family, detectable effect, n,
    the paper's number, the note, and the row whose runs it reuses), as the folded small print under it."""
    same = f" · same runs as {_html.escape(r['same_runs_as'])}" if _text(r.get("same_runs_as")) else ""
    return (f"<small>{_html.escape(r['source'])}; measured: {_html.escape(r['measured'])}; expected: "
            f"{sign_word(r['expected_sign'])}; family: {_html.escape(r['family'])} (m = {int(r['m'])}); could detect "
            f"{r['detectable'] or 'n/a'}; n = {_html.escape(r['n (counts)'] or '0')}; paper: "
            f"{_html.escape(r['paper'] or '—')}{'; ' + _html.escape(r['note']) if _text(r.get('note')) else ''}"
            f"{same}</small>")


def claims_html(table: pd.DataFrame, name: str = "claims") -> str:
    """The scorecard: one line per claim (id, estimate [interval], adjusted p, verdict, tier, page),
    the statement and its details folded under it, and a CSV of every column. Each row has the id
    ``claim-<id>`` that the pages' verdict badges link to, and carries ``data-claim`` / ``data-verdict``."""
    cols = ["claim", "estimate [95% CI]", "adj. p", "verdict", "tier", "page"]
    head = "".join(f"<th>{c}</th>" for c in cols)
    body = []
    for r in table.to_dict("records"):
        link = _text(r.get("link"))
        page = f'<a href="{_html.escape(link)}">{_html.escape(link.split("#")[0].removesuffix(".html"))}</a>'
        detail = f"<details><summary>{_html.escape(str(r['text']))}</summary>{_detail(r)}</details>"
        v = _html.escape(r["verdict"])
        tds = (f'<td><b>{_html.escape(r["claim"])}</b></td><td>{_html.escape(r["evidence"])} '
               f'{_html.escape(_text(r.get("unit")))}</td><td>{_html.escape(r["p"])}</td>'
               f'<td class="verdict verdict-{r["verdict"].replace(" ", "-")}"><b>{v}</b></td>'
               f'<td>{_html.escape(_text(r.get("tier")) or "—")}</td><td>{page}</td>')
        body.append(f'<tr id="{anchor(r["claim"])}" data-claim="{_html.escape(r["claim"])}" data-verdict="{v}">{tds}</tr>'
                    f'<tr class="claim-detail"><td></td><td colspan="{len(cols) - 1}">{detail}</td></tr>')
    csv_cols = ["claim", "estimate", "ci_lo", "ci_hi", "p_value", "p_adj", "m", "family", "verdict", "mde", "n",
                "n_counts", "tier", "same_runs_as", "text", "source", "measured", "unit", "paper", "expected_sign",
                "margin", "link", "note"]
    csv = table[[c for c in csv_cols if c in table.columns]]
    return (f'<table class="sec-table claims-scorecard"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}'
            f"</tbody></table><p>{csv_link(csv, name)}</p>")


def role_sentence() -> str:
    """Which metric is primary (:data:`sec_lib.report.PRIMARY_METRIC`) and which are secondary."""
    return (f"**{report.PRIMARY_METRIC}** is the declared primary metric; "
            f"{', '.join(report.SECONDARY_METRICS)} are secondary.")


def rules_table(rules: report.VerdictRules | None = None) -> pd.DataFrame:
    """The verdict rules in force (``sec_lib.report.VERDICT_RULES``) and what each verdict means."""
    r = rules or report.VERDICT_RULES
    rows = [
        {"rule": "CI level", "value": f"{r.level:g}", "meaning": "Student-t interval of the mean over seeds (or runs)"},
        {"rule": "alpha", "value": f"{r.alpha:g}",
         "meaning": "both decisive words need the Holm-adjusted p of their test below this, within the claim's "
                    "declared family (the page that decides it names it)"},
        {"rule": "power", "value": f"{r.power:g}", "meaning": "power at which the detectable effect is given"},
        {"rule": "margin", "value": "see the margins table",
         "meaning": "practical equivalence margin per metric; inside it an effect is negligible"},
        {"rule": "primary metric", "value": report.PRIMARY_METRIC,
         "meaning": "declared primary; " + ", ".join(report.SECONDARY_METRICS) + " are secondary"},
        {"rule": "reproduced", "value": "",
         "meaning": "a signal on the claimed side (CI entirely on the predicted side of 0, beyond ±margin, adjusted "
                    "p < alpha) whose CI reaches the paper's smallest reported value for the claim, or a claim the "
                    "paper gives no size for; no change: CI inside ±margin and the equivalence test's (TOST) "
                    "adjusted p < alpha"},
        {"rule": "smaller than claimed", "value": "",
         "meaning": "a signal on the claimed side whose whole CI lies below the paper's smallest reported value "
                    "(the record names those values and their data)"},
        {"rule": "larger than claimed", "value": "",
         "meaning": "a signal on the claimed side whose whole CI lies above the paper's largest reported value"},
        {"rule": "negligible", "value": "",
         "meaning": "directional: CI excludes 0 on the claimed side but lies inside ±margin, and the equivalence "
                    "test's adjusted p < alpha: a signal too small to matter"},
        {"rule": "not reproduced", "value": "",
         "meaning": "directional: CI entirely on the wrong side and adjusted p < alpha (opposite), or CI inside "
                    "±margin containing 0 and the equivalence test's adjusted p < alpha (no effect); no change: CI "
                    "entirely outside ±margin and adjusted p < alpha (the row says which way it failed)"},
        {"rule": "inconclusive", "value": "",
         "meaning": f"every other case; without a usable CI (one seed, or zero spread) a claim reads at best "
                    f"{r.single_run_max}"},
        {"rule": "not testable offline", "value": "", "meaning": "no evidence: no runs can measure it here"},
    ]
    return pd.DataFrame(rows)


def margins_html() -> str:
    """:func:`sec_lib.report.margin_table` as an HTML table."""
    return report.margin_table().to_html(index=False, classes="sec-table", border=0)
