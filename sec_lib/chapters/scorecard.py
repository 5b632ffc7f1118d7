"""The scorecard's records and tally: every claim's record as a table (:func:`claims_frame`), the bodies of evidence
each verdict counts (:func:`verdict_counts`), the questions they answer (:func:`questions`), the rows the scorecard
shows (:func:`decided`: no quick-tier row where the decisive tier is committed) and the registered follow-ups'
progress (:func:`followup_status`). The claims page shows them; the landing page states the tally.
"""
from __future__ import annotations

import importlib
from typing import Sequence

import numpy as np
import pandas as pd

from .. import report
from ..report.verdicts import equivalence_p_words
from ..runs.tier import STAGED_TIERS, TIER_PROFILES, has_tier
from . import evidence


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


def counted(table: pd.DataFrame) -> pd.DataFrame:
    """The rows that count: each body of evidence once (rows marked ``same_runs_as`` left out)."""
    if "same_runs_as" not in table.columns:
        return table
    return table[table["same_runs_as"].fillna("").astype(str) == ""]


def is_long_tier(tier) -> bool:
    """Whether a row's tier is a committed long tier (decisive, gpu): the only evidence the tally counts."""
    parts = [t for t in str(tier or "").split("/") if t]
    return bool(parts) and all(t in (*STAGED_TIERS, *TIER_PROFILES) for t in parts)


def decisive_stands_in(profile: str) -> bool:
    """Whether a book of ``profile`` reads the decisive tier (:data:`~sec_lib.chapters.evidence.MAIN_TIERS`' first)
    where it holds a page's runs: it is committed, and ``profile`` is not one whose pages show their own runs (the
    smoke book, a real-benchmark book: :data:`~sec_lib.chapters.evidence.PIPELINE_PROFILES`)."""
    return profile not in evidence.PIPELINE_PROFILES and has_tier(evidence.MAIN_TIERS[0])


def decided(table: pd.DataFrame, profile: str = "cpu", decisive_present: bool | None = None) -> pd.DataFrame:
    """The rows the scorecard shows: where the decisive tier is present (``decisive_present``; by default
    :func:`decisive_stands_in` for ``profile``), only the rows read from a long tier (:func:`is_long_tier`), so that
    no quick-tier number or verdict stands among the verdicts; every row where it is not (the smoke book, a
    real-benchmark book, a checkout with no committed tier: each shows its own runs, each row's tier named)."""
    if decisive_present is None:
        decisive_present = decisive_stands_in(profile)
    if not decisive_present or not len(table):
        return table
    return table[table["tier"].map(is_long_tier)]


def waiting_sentence(table: pd.DataFrame, shown: pd.DataFrame) -> str:
    """The rows of ``table`` that :func:`decided` left out of ``shown``, named: they wait for their runs on a long
    tier. '' where none is left out."""
    left = [c for c in table.get("claim", []) if c not in set(shown.get("claim", []))]
    if not left:
        return ""
    return (f"{len(left)} {'row waits' if len(left) == 1 else 'rows wait'} for {tiers_phrase(())}'s runs "
            f"({', '.join(left)}): {'it gets' if len(left) == 1 else 'they get'} a verdict once those runs are "
            "committed, and until then no number of theirs is shown here.")


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


#: The questions the scorecard counts: (key, the question, the claim ids that answer it, the one that decides it
#: first). A registered follow-up that replaces a test decides in place of the row it follows up (C3b, Q6c, Q6d); so
#: does one that asks the same question again on fresh runs (P1c: its registration, data/followups/regime-seeds, step 4,
#: says "P1 reads" its result; P1's own row keeps its registered verdict, beneath it); one that asks another question
#: beside a test folds beneath it with the other rows (C4W, over weight decay, under the primary test). A claim in no
#: question here is a question of its own. ``beyond`` marks a question the paper made no claim on
#: (the meta-review's fairness question: counted apart).
QUESTIONS = (
    ("C4", "Does SEC improve R@1?", ("C4v", "C4", "C4a", "C4b", "C4c", "C4d", "Q6a", "C4W"), False),
    ("C5", "Does SEC beat L2-reg, the same penalty toward zero?", ("C5", "C5v", "Q2"), False),
    ("C3", "Does SEC converge faster?", ("C3b", "C3"), False),
    ("Q6", "Does SEC help under SGD?", ("Q6d", "Q6c", "Q6b"), False),
    ("Q8a", "Does SEC help SimCLR?", ("Q8a", "Q8a-r"), False),
    # P1's own words as its question (as before P1c); once committed, P1c decides it, and P1's row lies beneath
    ("P1", "SEC's R@1 effect is larger when fine-tuning a pretrained backbone (the paper's regime) than when training "
           "from scratch", ("P1c", "P1"), False),
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
    paper made no claim on, and those with quick-tier evidence only, apart)."""
    main = qs[~qs["beyond"] & qs["long"]] if len(qs) else qs
    out = {name: int((main["group"] == name).sum()) if len(main) else 0 for name, _ in GROUPS}
    return out


def rows_beneath(qs: pd.DataFrame, own: bool = False) -> int:
    """The rows of evidence under the questions the tally counts (:func:`answer_counts`): the rows of the question the
    paper made no claim on, and on a long tier those of the questions with quick-tier evidence only, are apart."""
    if not len(qs):
        return 0
    main = qs[~qs["beyond"]] if own else qs[~qs["beyond"] & qs["long"]]
    return int(main["n_rows"].sum())


def answer_counts(qs: pd.DataFrame, table: pd.DataFrame, own: bool) -> tuple[dict, dict, int]:
    """The scorecard's tally, as the claims page and the landing page both give it: questions per group, bodies of
    evidence per verdict and the rows left uncounted. A book that reads the decisive tier counts the long tiers only
    (:func:`question_counts`, :func:`verdict_counts`, the quick-tier-only rows uncounted); a book that reads its own
    runs (``own``) counts them all, once each."""
    if not own:
        counts = verdict_counts(table)
        return question_counts(qs), counts, counts.pop(QUICK_ONLY)
    main = qs[~qs["beyond"]] if len(qs) else qs
    groups = {name: int((main["group"] == name).sum()) if len(main) else 0 for name, _ in GROUPS}
    v = counted(table)["verdict"].value_counts() if len(table) else pd.Series(dtype=int)
    return groups, {k: int(v.get(k, 0)) for k in report.VERDICTS}, 0


def questions_sentence(qs: pd.DataFrame, table: pd.DataFrame) -> str:
    """'Of the paper's and the reviewers' 30 questions: **8** hold, …; 44 rows of evidence lie beneath them.'"""
    counts = question_counts(qs)
    n = sum(counts.values())
    beyond = qs[qs["beyond"]] if len(qs) else qs
    quick = qs[~qs["beyond"] & ~qs["long"]] if len(qs) else qs
    text = (f"Of the paper's claims and the reviewers' questions decided on {tiers_phrase(counted_tiers(table))}, "
            f"{n} in all: " + count_words(counts) +
            f". Each question counts once, decided by one row of evidence; {rows_beneath(qs)} rows lie beneath them.")
    if len(beyond):
        b = beyond.iloc[0]
        text += (f" Apart: the meta-review's question, “{b['question']}” ({b['n_rows']} rows, decided by "
                 f"{b['decides']}: {b['verdict']}), on which the paper made no claim.")
    if len(quick):
        text += f" {len(quick)} more have quick-tier evidence only and are not counted."
    return text


def followup_status(root=None) -> list[dict]:
    """The registered follow-ups (:data:`FOLLOWUPS`): id, the question they follow up, their folder, and how many of
    their runs are committed (training resumes with their ``make`` target)."""
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
