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
from ..report.claims import anchor, estimate_source, sign_word
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
        same = f" · same runs as {_html.escape(r['same_runs_as'])}" if _text(r.get("same_runs_as")) else ""
        detail = (f"<details><summary>{_html.escape(str(r['text']))}</summary><small>{_html.escape(r['source'])}; "
                  f"measured: {_html.escape(r['measured'])}; expected: {sign_word(r['expected_sign'])}; "
                  f"family: {_html.escape(r['family'])} (m = {int(r['m'])}); could detect {r['detectable'] or 'n/a'}; "
                  f"n = {_html.escape(r['n (counts)'] or '0')}; paper: {_html.escape(r['paper'] or '—')}"
                  f"{'; ' + _html.escape(r['note']) if _text(r.get('note')) else ''}{same}</small></details>")
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
         "meaning": "directional: CI entirely on the predicted side of 0 and adjusted p < alpha; "
                    "no change: CI inside ±margin and the equivalence test's (TOST) adjusted p < alpha"},
        {"rule": "not reproduced", "value": "",
         "meaning": "directional: CI entirely on the wrong side and adjusted p < alpha, or CI entirely inside "
                    "±margin and the equivalence test's adjusted p < alpha; no change: CI entirely outside "
                    "±margin and adjusted p < alpha"},
        {"rule": "inconclusive", "value": r.single_run_max,
         "meaning": "every other case, and always without a usable CI (one seed, or zero spread)"},
        {"rule": "not testable offline", "value": "", "meaning": "no evidence: no runs can measure it here"},
    ]
    return pd.DataFrame(rows)


def margins_html() -> str:
    """:func:`sec_lib.report.margin_table` as an HTML table."""
    return report.margin_table().to_html(index=False, classes="sec-table", border=0)
