"""The claims page: every claim of the paper and question of the review as one line of a scorecard,
collected from the pages that decide them, tallied by tier, and shown.

Nothing here computes an estimate. Each page module holds the claims it owns (``CLAIMS``, a list of
:class:`sec_lib.report.claims.Claim`) and decides them on its own evidence
(:func:`sec_lib.chapters.evidence.page_records`); this page collects those records
(:func:`records`), counts them (the long tiers only; quick-tier-only rows apart) and displays them.
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
from ..runs.tier import STAGED_TIERS, TIER_PROFILES
from . import evidence, profile_param
from ..report.verdicts import equivalence_p_words
from .normclass import (CLAIMS, HIT_COLUMNS, class_association, class_association_summary,  # noqa: F401 (the page's API)
                        difficulty_association, difficulty_sentence)

#: The notebook's parameters (checked by ``sec_lib.params.notebook_params``).
PARAMS = profile_param()
#: Where a count is kept apart: rows whose evidence is only the quick tier.
QUICK_ONLY = "quick tier only"


def records(profile: str, root=None, pages: Sequence[str] | None = None, tier: str | None = None) -> list:
    """Every claim's record, each decided by the page that owns it (sorted by id); ``tier``: every page
    read from that tier (the quick tier beside the decisive one)."""
    return evidence.claim_records(profile, root, pages, tier)


def p_cell(r) -> str:
    """A record's adjusted p as the scorecard shows it; where its verdict comes from the equivalence test (the
    interval inside ±margin), that test's adjusted p beside it, since the difference test's p alone (0.66, say)
    would not explain a 'not reproduced'."""
    if r.p_adj is None or not np.isfinite(r.p_adj):
        return ""
    return f"{r.p_adj:.2g}{equivalence_p_words(r)}"


def claims_frame(recs: Sequence) -> pd.DataFrame:
    """The records as a table (one row per claim; ``claim`` = id), with display cells: ``evidence``
    "estimate [lo, hi]", ``p`` (adjusted), ``detectable`` ("≥ X"), ``n (counts)``, ``paper``."""
    t = pd.DataFrame([{"claim": r.id, "text": r.statement, **{k: v for k, v in r.as_dict().items()
                                                              if k not in ("id", "statement")}} for r in recs])
    if not len(t):
        return t
    t["evidence"] = [r.evidence for r in recs]
    t["p"] = [p_cell(r) for r in recs]
    t["detectable"] = [r.detectable for r in recs]
    t["n (counts)"] = [("" if not r.n else f"{r.n} {r.n_counts}") for r in recs]
    t["paper_value"] = [float(p) if isinstance(p, (int, float)) and not isinstance(p, bool) else np.nan
                        for p in t["paper"]]
    t["paper"] = [("" if p is None else (f"{p:+.3g}" if isinstance(p, float) else str(p))) for p in t["paper"]]
    t["link"] = t["href"]
    return t


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


# ------------------------------------------------------------------------------------------- tally

def counted(table: pd.DataFrame) -> pd.DataFrame:
    """The rows that count: each body of evidence once (rows marked ``same_runs_as`` left out)."""
    if "same_runs_as" not in table.columns:
        return table
    return table[table["same_runs_as"].fillna("").astype(str) == ""]


def is_long_tier(tier) -> bool:
    """Whether a row's tier is a committed long tier (decisive, gpu): the only evidence the tally counts."""
    parts = [t for t in str(tier or "").split("/") if t]
    return bool(parts) and all(t in (*STAGED_TIERS, *TIER_PROFILES) for t in parts)


def verdict_counts(table: pd.DataFrame) -> dict:
    """The tally: how many bodies of evidence (:func:`counted`) read from a long tier got each verdict
    (every verdict of report.VERDICTS, zeros included), and apart, under :data:`QUICK_ONLY`, how many
    have only quick-tier evidence. Tiers never mix in a count."""
    c = counted(table)
    long = c["tier"].map(is_long_tier) if len(c) else pd.Series(dtype=bool)
    v = c.loc[long, "verdict"].value_counts() if len(c) else pd.Series(dtype=int)
    out = {k: int(v.get(k, 0)) for k in report.VERDICTS}
    out[QUICK_ONLY] = int((~long).sum()) if len(c) else 0
    return out


def counted_tiers(table: pd.DataFrame) -> tuple:
    """The long tiers the counted rows (:func:`counted`) were read from, sorted."""
    c = counted(table)
    return tuple(sorted({t for t in c["tier"] if is_long_tier(t)})) if len(c) else ()


def tiers_phrase(tiers) -> str:
    """'the decisive tier', 'the decisive and gpu tiers' (the first main tier where ``tiers`` is empty)."""
    tiers = list(tiers) or [evidence.MAIN_TIERS[0]]
    return f"the {tiers[0]} tier" if len(tiers) == 1 else f"the {', '.join(tiers[:-1])} and {tiers[-1]} tiers"


def counts_sentence(table: pd.DataFrame) -> str:
    """'Of N bodies of evidence on the decisive tier: **a** reproduced, …; M more have quick-tier
    evidence only, and are not counted', naming the rows left out because they reuse another row's runs."""
    counts = verdict_counts(table)
    quick = counts.pop(QUICK_ONLY)
    dup = table[~table.index.isin(counted(table).index)]
    extra = (" (" + ", ".join(f"{r.claim} uses the same runs as {r.same_runs_as}" for r in dup.itertuples(index=False))
             + ", counted once)") if len(dup) else ""
    text = (f"Of {sum(counts.values())} bodies of evidence on {tiers_phrase(counted_tiers(table))}{extra}: "
            + ", ".join(f"**{n}** {v}" for v, n in counts.items()) + ".")
    if quick:
        names = ", ".join(counted(table).loc[~counted(table)["tier"].map(is_long_tier), "claim"])
        text += f" **{quick}** more ({names}) have quick-tier evidence only: they are shown, not counted."
    return text


# ------------------------------------------------------------------------------------------- questions

#: The questions the scorecard counts: (key, the question, the claim ids that answer it, the one that decides it
#: first). A registered follow-up decides in place of the row it follows up; the other rows fold beneath. A claim in
#: no question here is a question of its own. ``beyond`` marks questions the paper never claimed (counted apart).
QUESTIONS = (
    ("C4", "Does SEC improve R@1?", ("C4v", "C4", "C4a", "C4b", "C4c", "C4d", "Q6a"), False),
    ("C5", "Does SEC beat L2-reg, the same penalty toward zero?", ("C5", "C5v", "Q2"), False),
    ("C3", "Does SEC converge faster?", ("C3b", "C3"), False),
    ("Q6", "Does SEC help under SGD?", ("Q6d", "Q6c", "Q6b"), False),
    ("Q8a", "Does SEC help SimCLR?", ("Q8a", "Q8a-r"), False),
    ("Q10", "Do the norms, and SEC's effect on them, depend on the class or the font design?",
     ("Q10a", "Q10b", "Q10c", "Q10d", "Q10e", "Q10f", "Q10g"), True),
)
#: How the scorecard groups the questions, by the word of the row that decides each (in this order).
GROUPS = (("holds", ("reproduced", "larger than claimed")),
          ("holds in direction, smaller than the paper's", ("smaller than claimed", "negligible")),
          ("fails", ("not reproduced",)),
          ("undecided", ("inconclusive", "not testable offline")))
#: The registered follow-ups not yet committed, under the question they follow up: (question key, id, module).
FOLLOWUPS = (("C4", "C4L", "longruns"), ("C4", "C4W", "weightdecay"), ("P1", "P1c", "regimeseeds"))


#: How a sentence counts each group: (one, several).
GROUP_WORDS = {"holds": ("holds", "hold"),
               "holds in direction, smaller than the paper's": ("holds in direction but is smaller than the paper's",
                                                                "hold in direction but are smaller than the paper's"),
               "fails": ("fails", "fail"), "undecided": ("is undecided", "are undecided")}


def count_words(counts: dict) -> str:
    """'**8** hold, **1** holds in direction but is smaller than the paper's, **8** fail, **7** are undecided'."""
    return ", ".join(f"**{k}** {GROUP_WORDS[g][k != 1]}" for g, k in counts.items() if g in GROUP_WORDS)


def group_of(word: str) -> str:
    """The scorecard group of a verdict word (:data:`GROUPS`)."""
    for name, words in GROUPS:
        if word in words:
            return name
    raise ValueError(f"verdict {word!r} is not valid; expected one of {list(report.VERDICTS)}")


def questions(table: pd.DataFrame) -> pd.DataFrame:
    """One row per question (:data:`QUESTIONS`; every other claim is its own): ``question``, its ``key``, the claim
    that ``decides`` it (the first of its ids with evidence on a long tier, else its first), that claim's
    ``verdict`` and ``group``, the ``beneath`` ids folded under it, ``beyond`` (not a claim of the paper) and
    ``n_rows``; in the order of the table's claims."""
    have = table.set_index("claim") if len(table) else pd.DataFrame()
    listed = {i for _, _, ids, _ in QUESTIONS for i in ids}
    qs = [(k, q, tuple(i for i in ids if i in have.index), beyond) for k, q, ids, beyond in QUESTIONS]
    qs += [(c, t, (c,), False) for c, t in zip(table.get("claim", []), table.get("text", [])) if c not in listed]
    rows = []
    for key, text, ids, beyond in qs:
        if not ids:
            continue
        long = [i for i in ids if is_long_tier(have.loc[i, "tier"])]
        decides = long[0] if long else ids[0]
        v = have.loc[decides, "verdict"]
        rows.append({"key": key, "question": text, "decides": decides, "verdict": v, "group": group_of(v),
                     "beneath": [i for i in ids if i != decides], "beyond": beyond, "n_rows": len(ids),
                     "long": bool(long)})
    order = {c: i for i, c in enumerate(table.get("claim", []))}
    out = pd.DataFrame(rows)
    return out.sort_values("decides", key=lambda c: c.map(order)).reset_index(drop=True) if len(out) else out


def question_counts(qs: pd.DataFrame) -> dict:
    """{group: questions} over the paper's and the reviewers' questions decided on a long tier (the questions the
    paper never claimed, and those with quick-tier evidence only, apart)."""
    main = qs[~qs["beyond"] & qs["long"]] if len(qs) else qs
    out = {name: int((main["group"] == name).sum()) if len(main) else 0 for name, _ in GROUPS}
    return out


def questions_sentence(qs: pd.DataFrame, table: pd.DataFrame) -> str:
    """'Of the paper's and the reviewers' 30 questions: **8** hold, …; 44 rows of evidence lie beneath them.'"""
    counts = question_counts(qs)
    n = sum(counts.values())
    beyond = qs[qs["beyond"]] if len(qs) else qs
    quick = qs[~qs["beyond"] & ~qs["long"]] if len(qs) else qs
    text = (f"Of the paper's claims and the reviewers' questions decided on {tiers_phrase(counted_tiers(table))}, "
            f"{n} in all: " + count_words(counts) +
            f". Each question counts once, decided by one row of evidence; {len(table)} rows lie beneath them.")
    if len(beyond):
        b = beyond.iloc[0]
        text += (f" Apart: the book's own question, “{b['question']}” ({b['n_rows']} rows, decided by "
                 f"{b['decides']}: {b['verdict']}), which the paper never claimed.")
    if len(quick):
        text += f" {len(quick)} more have quick-tier evidence only and are not counted."
    return text


def followup_status(root=None) -> list[dict]:
    """The registered follow-ups (:data:`FOLLOWUPS`): id, the question they follow up, their folder, and how many of
    their runs are committed (training resumes with their ``make`` target)."""
    import importlib
    out = []
    for key, fid, mod in FOLLOWUPS:
        m = importlib.import_module(f"sec_lib.runs.{mod}")
        path = m.folder(root) / "test" / "runs.parquet"
        have = len(pd.read_parquet(path, columns=["key"])) if path.exists() else 0
        try:
            want = len(m.test_configs(root)) if mod != "weightdecay" else 8 * len(m.SEEDS)
        except (KeyError, FileNotFoundError):
            want = 0
        out.append({"question": key, "id": fid, "folder": m.FOLDER_TEXT, "committed": have, "runs": want,
                    "readme": m.QUESTION})
    return out


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


def scorecard_html(table: pd.DataFrame, qs: pd.DataFrame | None = None, name: str = "claims", root=None) -> str:
    """The scorecard grouped by question: for each group of :data:`GROUPS` (holds, smaller, fails, undecided), its
    questions, each with the row that decides it (the claim's words visible) and the other rows folded beneath it,
    and the registered follow-ups still training listed under the question they follow up; a CSV of every row."""
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
            body.append(f'<tr class="question"><td colspan="{len(cols)}"><b>{_html.escape(q["question"])}</b>'
                        f'{" (the book’s own question; the paper never claimed it)" if q["beyond"] else ""}</td></tr>')
            body.append(_row_html(rows[q["decides"]], True))
            if q["beneath"]:
                inner = "".join(_row_html(rows[i], False) for i in q["beneath"])
                body.append(f'<tr><td></td><td colspan="{len(cols) - 1}"><details><summary>{len(q["beneath"])} more '
                            f'rows on this question</summary><table class="sec-table">{inner}</table></details>'
                            f'</td></tr>')
            for f in follow.get(q["key"], []):
                body.append(f'<tr><td></td><td colspan="{len(cols) - 1}"><small>Registered follow-up <b>{f["id"]}</b> '
                            f'({_html.escape(f["folder"])}): {_html.escape(f["readme"])}; {f["committed"]} of '
                            f'{f["runs"] or "its"} runs committed, no verdict until all are.</small></td></tr>')
        out.append(f'<h3 class="scorecard-group">{_html.escape(group[0].upper() + group[1:])} ({len(sub)})</h3>'
                   f'<table class="sec-table claims-scorecard"><thead><tr>{head}</tr></thead>'
                   f'<tbody>{"".join(body)}</tbody></table>')
    csv_cols = ["claim", "estimate", "ci_lo", "ci_hi", "p_value", "p_adj", "m", "family", "verdict", "rule_verdict",
                "paper_size_text", "groups_p", "apart", "reading", "added", "mde", "n", "n_counts", "tier",
                "same_runs_as", "text", "source", "measured", "unit", "paper", "expected_sign", "margin", "link",
                "note"]
    csv = table[[c for c in csv_cols if c in table.columns]]
    return "".join(out) + f"<p>{csv_link(csv, name)}</p>"


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
    """Which tier each row's evidence was read from (the ``tier`` column)."""
    tiers = table.get("tier", pd.Series([""] * len(table))).fillna("").astype(str)
    have = tiers[tiers != ""].value_counts()
    if not len(have):
        return "No row has runs behind it."
    return ("Evidence: " + ", ".join(f"{n} rows from the **{t}** tier" for t, n in have.items())
            + ". Each page reads the decisive tier where it holds all of the page's runs, and the quick tier until "
              "it does.")


def tier_agreement(table: pd.DataFrame, quick: pd.DataFrame) -> pd.DataFrame:
    """The rows read from a long tier beside the same claims on the quick tier: both estimates with
    their intervals, both verdicts, and whether the two estimates have the same sign."""
    q = quick.set_index("claim")
    rows = []
    for r in table.itertuples(index=False):
        if not is_long_tier(r.tier) or r.claim not in q.index:
            continue
        qr = q.loc[r.claim]
        rows.append({"claim": r.claim, r.tier: r.evidence, f"{r.tier} verdict": r.verdict,
                     "quick": qr["evidence"], "quick verdict": qr["verdict"],
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
        {"rule": "inconclusive", "value": r.single_run_max,
         "meaning": "every other case, and always without a usable CI (one seed, or zero spread)"},
        {"rule": "not testable offline", "value": "", "meaning": "no evidence: no runs can measure it here"},
    ]
    return pd.DataFrame(rows)


def margins_html() -> str:
    """:func:`sec_lib.report.margin_table` as an HTML table."""
    return report.margin_table().to_html(index=False, classes="sec-table", border=0)
