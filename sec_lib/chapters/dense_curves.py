"""C3b, the convergence page's registered follow-up: the page's full runs without and with SEC on the decisive tier,
each with its prefix retraced at a denser evaluation interval (:mod:`sec_lib.runs.densecurves`) spliced in, and the
iteration to 90% of the final R@1 measured again on those curves (:mod:`.reach`).
"""
from __future__ import annotations

import pandas as pd

from ..runs import densecurves
from ..runs.pilot import TIER
from .common import check_cols, measures_text, record_row
from .evidence import page_claims, page_records, runs_sentence
from .reach import prefix_sentence, reach_family, reach_table, resolution_sentence, splice_early


def dense_applies(ev) -> bool:
    """Whether this page shows C3b: only where it shows the decisive tier, whose runs C3b retraces (a quick book, or a
    real-benchmark book, has none of them)."""
    ev.frames("convergence")
    return ev.profile_of("convergence") == TIER


def _committed(ev):
    """C3b's committed runs (``densecurves.test_frames``), read once per evidence; KeyError before all are there."""
    return ev.derived("c3b_committed", densecurves.test_frames)


def dense_frames(ev) -> tuple:
    """``(runs, evals, check)`` of C3b (:func:`splice_early`'s): the page's full runs without and with SEC, each with
    its prefix retraced to ``densecurves.PREFIX`` iterations (:mod:`sec_lib.runs.densecurves`) spliced in, in place of
    C3's shorter one. Read once per evidence. KeyError (no evidence) on another tier, or while C3b's runs are not all
    committed."""
    if not dense_applies(ev):
        raise KeyError(f"C3b is a follow-up on the {TIER} tier's runs; the {ev.profile_of('convergence')} tier has "
                       "none")

    return ev.derived("c3b_frames", lambda: _with_dense(ev, longer=True))


def _with_dense(ev, longer: bool) -> tuple:
    """:func:`splice_early` of C3b's prefixes with the page's runs without and with SEC that are longer than them
    (``longer``: the full runs, into whose curves they are spliced) or shorter (C3's prefixes, which they must
    retrace), each of those runs' evaluations and training logs beside C3b's."""
    f, dense = ev.frames("convergence"), _committed(ev)
    runs = f.runs[f.runs["variant"].isin(["none", "sec"])]
    runs = runs[runs["iterations"] > densecurves.PREFIX if longer else runs["iterations"] < densecurves.PREFIX]

    def both(name):
        table = getattr(f, name)
        return pd.concat([table[table["key"].isin(runs["key"])], getattr(dense, name)], ignore_index=True)
    joined = pd.concat([runs, dense.runs[[c for c in runs.columns if c in dense.runs.columns]]], ignore_index=True)
    return splice_early(joined, both("evals"), steps=both("steps"))


def dense_vs_c3(ev) -> pd.DataFrame:
    """:func:`splice_early`'s check of each C3b prefix against C3's prefix of the same run (the shorter of the two):
    the evaluations both made (``shared_steps``) and the largest R@1 difference there, 0 where C3b retraces C3's
    prefix exactly. KeyError where C3b has none."""
    dense_frames(ev)
    return _with_dense(ev, longer=False)[2]


def dense_reach(ev) -> pd.DataFrame:
    """:func:`reach_table` of the full runs' curves with C3b's prefixes spliced in, computed once per evidence;
    KeyError where C3b has none."""
    return ev.derived("c3b_reach", lambda: reach_table(*dense_frames(ev)[:2]))


def dense_ready(ev) -> bool:
    """Whether C3b has evidence on this page: the decisive tier shown and all of C3b's runs committed."""
    try:
        dense_frames(ev)
    except KeyError:
        return False
    return True


def dense_family(ev) -> dict:
    """C3b's registered Holm family (:func:`reach_family`) on :func:`dense_frames`; KeyError where it has none."""

    return ev.derived("c3b_family", lambda: reach_family(dense_reach(ev), densecurves.FAMILY))


def dense_pairs(ev, reach: pd.DataFrame) -> pd.DataFrame:
    """Per full run: ``reach_C3``, its iteration to 90% of the final R@1 on C3's curve (``reach``: the page's
    :func:`reach_table`), beside ``reach_C3b``, the same on C3b's (:func:`dense_frames`); KeyError where C3b has
    none."""
    dense = dense_reach(ev)[["key", "reach"]].rename(columns={"reach": "reach_C3b"})
    check_cols(reach, ["key", "loss", "variant", "seed", "reach"], "reach")
    return (reach[["key", "loss", "variant", "seed", "reach"]].rename(columns={"reach": "reach_C3"})
            .merge(dense, on="key", how="inner"))


def dense_sentence(ev) -> str:
    """What produced C3b's numbers (its runs, as the evidence banner words a tier, and how their prefixes were
    checked), where it crosses, or why this page has none of it."""
    if not dense_applies(ev):
        return (f"C3b is a follow-up on the decisive tier's runs; this page shows the {ev.profile_of('convergence')} "
                "tier, which has none, so it shows no part of it.")
    try:
        _, evals, check = dense_frames(ev)
    except KeyError as e:
        return f"**C3b has no evidence here yet.** {e.args[0]}."
    reach = dense_reach(ev)
    c3 = dense_vs_c3(ev)
    shared = c3["shared_steps"].str.count(",") + 1
    worst = float(c3["max |ΔR@1|"].max())
    agree = (f"R@1 agrees exactly with C3's prefix of the same run at the {shared.min()} evaluations each pair shares"
             if worst == 0 else f"R@1 differs from C3's prefix of the same run by at most {worst:.2g} points at the "
             "evaluations each pair shares") if len(c3) and shared.min() > 1 else ""
    retraced = prefix_sentence(check, evals, whose="C3's")
    return (f"**Evidence for C3b:** {runs_sentence(densecurves.stage_runs())}; committed under "
            f"`{densecurves.FOLDER_TEXT}`. {retraced}"
            f"{' And ' + agree + '.' if agree else ''} {resolution_sentence(reach, check, '')}")


def dense_reading(ev) -> str:
    """C3b's bullet for the page's verdict, from its record (the claim decides it), and its family in words."""
    head = "- **The crossing measured on dense curves** (C3b, a registered follow-up"
    if not dense_applies(ev):
        return ""
    if "C3b" not in {c.id for c in page_claims("convergence")}:    # registered, its runs underway: not scored yet
        return f"{head}): its runs are underway, so it is not on the scorecard yet."
    rec = next(r for r in page_records("convergence", ev) if r.id == "C3b")
    if not rec.has_estimate:
        return f"{head}): no evidence. {rec.note}."
    p = dense_family(ev)["pooled"].iloc[0]
    over = f"each the mean over {int(p['n_losses'])} losses"
    said = measures_text(record_row(rec), 1, 'iterations', over, 't-test against 0')
    return (f"{head}; Holm family: {rec.family}, {int(p['m'])} comparisons: this average and the per-loss rows of "
            f"C3b's table): SEC − none = {said} → *{rec.statement}*: **{rec.verdict}**. It is registered in "
            f"`{densecurves.FOLDER_TEXT}README.md`.")
