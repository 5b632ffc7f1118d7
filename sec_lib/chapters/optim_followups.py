"""The optimizer page's registered follow-ups (Q6c, Q6d): each one's family on its committed test runs, what produced
it, its selection's table, sentence and figure columns, its bullet in the page's verdict, and the page's answer for
SGD, which groups the SGD claims by the η SEC trained at. :mod:`sec_lib.chapters.optim` re-exports
every name here (the notebook and the claims read them as ``optim.<name>``). It does not import that module: the
statistics both use are in :mod:`sec_lib.chapters.optim_stats`, and the page's claims are read through
:func:`sec_lib.chapters.evidence.page_claims`."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..report import one_family
from ..runs import followup, sgdeta, sgdrates
from ..runs.pilot import TIER
from .common import and_list, loss_noun, measures_text, record_row
from .evidence import page_claims, page_records, runs_sentence
from .optim_stats import optim_diffs, optim_pooled, pooled_over

__all__ = ["FOLLOWUPS", "followup_family", "followups_apply", "followup_absent", "followup_evidence",
           "followup_or_note", "followup_evidence_sentence", "followup_reading", "SGD_ETA", "sgd_answer",
           "sgd_reading", "followup_readings", "q6c_rates_sentence", "q6c_selection_curves", "q6d_eta_sentence",
           "q6d_selection_curves"]


#: The registered follow-ups this page shows, each decided in a Holm family of its own: {claim id: (its module under
#: :mod:`sec_lib.runs`, which trains it and reads its committed folder; how the page's verdict names its design)}.
#: A follow-up's claim joins :data:`sec_lib.chapters.optim.CLAIMS` (the scorecard) with its committed test runs, not
#: before (``tests/runs/test_sgdeta.py`` fails once they are all committed and the claim is still missing).
FOLLOWUPS = {
    "Q6c": (sgdrates, "sgd, each loss and arm at its own held-out rate"),
    "Q6d": (sgdeta, "sgd, SEC's η chosen on held-out classes at the rate without SEC"),
}


def _followup(fid: str):
    if fid not in FOLLOWUPS:
        raise ValueError(f"follow-up {fid!r} is not on this page; valid values: {', '.join(FOLLOWUPS)}")
    return FOLLOWUPS[fid][0]


def followup_family(runs: pd.DataFrame, fid: str, metric: str = "R@1") -> dict:
    """A follow-up's one Holm family (its module's ``FAMILY``, registered: 5 comparisons) on its test runs: SEC − none
    per loss (:func:`optim_diffs`) and averaged over the losses per seed (:func:`optim_pooled`), the primary.
    Returns ``{"diffs", "pooled"}``."""
    family = _followup(fid).FAMILY                      # a bad id is refused before any work
    diffs, pooled = one_family(optim_diffs(runs, metric), optim_pooled(runs, metric), family=family)
    return {"diffs": diffs, "pooled": pooled}


def followups_apply(ev) -> bool:
    """Whether this page shows the registered follow-ups: only where it shows the decisive tier, whose runs they
    retrain (a real-benchmark book, or a quick book without the committed tier, has none of them)."""
    ev.frames("optim")
    return ev.profile_of("optim") == TIER


def followup_absent(ev, fid: str) -> str:
    """What the page says in a follow-up's place where :func:`followups_apply` is False."""
    _followup(fid)
    return (f"{fid} is a follow-up on the {TIER} tier's runs; this page shows the {ev.profile_of('optim')} tier, which "
            "has none, so it shows no part of it.")


def followup_evidence(ev, fid: str) -> dict:
    """A follow-up's family (:func:`followup_family`) where this page shows the decisive tier, whose follow-up it is
    (its runs are Q6b's with the rate or η changed): its committed ``test/`` read once per evidence. KeyError (no
    evidence) on another tier, or while the follow-up's runs are not all committed."""
    fu = _followup(fid)
    if not followups_apply(ev):
        raise KeyError(f"{fid} is a follow-up on the {TIER} tier's runs; the {ev.profile_of('optim')} tier has none")
    return ev.derived(f"{fid.lower()}_family", lambda: followup_family(fu.test_runs(), fid))


def followup_or_note(ev, fid: str) -> tuple:
    """(:func:`followup_evidence`, '') where the follow-up decides its claim on this page's tier, else (None, why
    not)."""
    try:
        return followup_evidence(ev, fid), ""
    except KeyError as e:
        return None, f"**{fid} has no evidence here.** {e.args[0]}."


def followup_evidence_sentence(fid: str, root=None) -> str:
    """What produced a follow-up's numbers, as the evidence banner words a tier: its held-out selection and its test
    runs, with their iterations, run-hours, machine and dates, and how many of each are runs committed before it
    (its module's ``reused_from``: Q6b's, Q6c's or the tier's), reused."""
    fu = _followup(fid)
    sel, test = fu.stage_runs("selection", root), fu.stage_runs("test", root)
    if not len(sel):
        return f"{fid} has no committed runs yet."
    earlier = fu.reused_from(root)

    def reused(runs, stage):
        found = {w: runs["key"].isin(k) for (st, w), k in earlier.items() if st == stage}
        found = {w: hit for w, hit in found.items() if hit.any()}
        if not found:
            return ""
        n = int(pd.concat(found.values(), axis=1).any(axis=1).sum())
        return f" ({n} of them {and_list(found)} runs, reused)"
    out = f"**Evidence for {fid}:** the selection, {runs_sentence(sel)}{reused(sel, 'selection')}"
    if len(test):
        out += f"; the test, {runs_sentence(test)}{reused(test, 'test')}"
    return out + f"; committed under `{fu.FOLDER_TEXT}`."


def followup_reading(ev, fid: str) -> str:
    """A follow-up's bullet for the page's verdict, from its record (the claim decides it; its Holm family's size is
    the rows it holds, as computed), with the losses its average spans."""
    _followup(fid)
    head = f"- **{FOLLOWUPS[fid][1]}** ({fid}, a registered follow-up"
    if fid not in {c.id for c in page_claims("optim")}:     # registered, its runs underway: not on the scorecard yet
        why = followup_or_note(ev, fid)[1].split("** ", 1)[-1] or "its test runs are committed, the claim not yet."
        return f"{head}): its runs are underway, so it is not on the scorecard yet. {why}"
    rec = next(r for r in page_records("optim", ev) if r.id == fid)
    if not rec.has_estimate:
        return f"{head}): no evidence. {rec.note}."
    over = pooled_over(followup_evidence(ev, fid)["pooled"].iloc[0])
    return (f"{head}; Holm family: {rec.family}): SEC − none = "
            f"{measures_text(record_row(rec), 2, 'R@1 points', over, 't-test against 0')} → *{rec.statement}*: "
            f"**{rec.verdict}**.")


#: The SGD claims by the η their SEC arm trained at: the page's answer for SGD groups their verdicts by it.
SGD_ETA = {"Q6b": "the paper's η", "Q6c": "the paper's η", "Q6d": "an η chosen for SGD on held-out classes"}


def sgd_answer(records) -> str:
    """The page's answer to *does SEC help under SGD?* from its claims' records (:data:`SGD_ETA`'s, in that order;
    one without an estimate on this tier is left out): each verdict with its estimate, grouped by the η SEC trained
    at, and whether the answer depends on it. '' where none has an estimate."""
    by_id = {r.id: r for r in records}
    groups: dict = {}
    for cid, eta in SGD_ETA.items():
        r = by_id.get(cid)
        if r is not None and r.has_estimate:
            groups.setdefault(eta, []).append(r)
    if not groups:
        return ""
    said = {eta: and_list(f"{r.id} **{r.verdict}** ({r.estimate:+.2f} points)" for r in rs)
            for eta, rs in groups.items()}
    if len(said) == 1:
        eta, only = next(iter(said.items()))
        return f"And *does SEC help under SGD?* Only {eta} was tested here: {only}."
    same = len({r.verdict for rs in groups.values() for r in rs}) == 1
    lead = "The verdict is the same at every η tested:" if same else "It depends on SEC's η:"
    return f"And *does SEC help under SGD?* {lead} " + "; ".join(f"at {eta}, {x}" for eta, x in said.items()) + "."


def sgd_reading(ev) -> str:
    """:func:`sgd_answer` from this page's records on ``ev`` (each claim decided as the scorecard decides it)."""
    return sgd_answer(page_records("optim", ev))


def followup_readings(ev) -> dict:
    """{id: :func:`followup_reading`} of every follow-up this page shows (none where :func:`followups_apply` is
    False), for :func:`page_reading`."""
    return {fid: followup_reading(ev, fid) for fid in FOLLOWUPS} if followups_apply(ev) else {}


def q6c_rates_sentence(table: pd.DataFrame, shared: dict | None = None) -> str:
    """Which rate each loss and arm chose (:func:`sec_lib.runs.sgdrates.rate_table`), and semihard's, which keeps
    Q6b's (``shared``: :func:`sec_lib.runs.followup.q6b_rates`, read from Q6b's runs by default)."""
    chosen = table[table["chosen"]]
    if not len(chosen):
        return "Q6c's held-out selection is not final yet."
    parts = []
    for loss, sub in chosen.groupby("loss", sort=False):
        r = dict(zip(sub["arm"], sub["lr"]))
        parts.append(f"{loss_noun(loss)}: {r.get('none', np.nan):g} without SEC, {r.get('sec', np.nan):g} with it")
    semi = (shared if shared is not None else followup.q6b_rates()).get("semihard", {})
    return ("Chosen on held-out classes, by the tier's rule: " + "; ".join(parts) + ". Semihard keeps the tier's own "
            f"selection ({semi.get('none', np.nan):g} without SEC, {semi.get('sec', np.nan):g} with it), so its runs "
            "are Q6b's.")


def q6c_selection_curves(table: pd.DataFrame) -> pd.DataFrame:
    """:func:`sec_lib.runs.sgdrates.rate_table` in :func:`sec_lib.figures.sweeps.pilot_figure`'s columns, one panel
    per loss: ``status`` 'done' only where no seed of the rate failed (a rate with a failed seed is never chosen: the
    figure marks it ×)."""
    out = table.assign(status=np.where(table["failed"] == 0, "done", "failed"))
    return out[["loss", "arm", "lr", "R@1", "status", "chosen"]]


def q6d_eta_sentence(table: pd.DataFrame) -> str:
    """Which η each loss chose at its rate (:func:`sec_lib.runs.sgdeta.eta_table`), and the η its test trains where
    η = 0 (no SEC) won."""
    if not len(table) or not table["chosen"].any():
        return "Q6d's held-out selection is not final yet."
    parts = []
    for loss, sub in table.groupby("loss", sort=False):
        chosen, tested = sub.loc[sub["chosen"], "eta"], sub.loc[sub["tested"], "eta"]
        at = f"{loss_noun(loss)} at lr {sub['lr'].iloc[0]:g}"
        if not len(chosen) or not len(tested):
            parts.append(f"{at}: not final yet")
        elif chosen.iloc[0] == 0:
            parts.append(f"{at}: no SEC scored best, so SEC was not selected; its best η, {tested.iloc[0]:g}, is "
                         "tested")
        else:
            parts.append(f"{at}: η {chosen.iloc[0]:g}")
    return "Chosen on held-out classes, by the tier's η rule: " + "; ".join(parts) + "."


def q6d_selection_curves(table: pd.DataFrame) -> pd.DataFrame:
    """:func:`sec_lib.runs.sgdeta.eta_table` in :func:`sec_lib.figures.sweeps.pilot_figure`'s columns with η as the
    x axis (``x``), one panel per loss; η = 0 (without SEC) is the panel's reference line, ``status`` as in
    :func:`q6c_selection_curves`; ``chosen`` marks the η the test trains."""
    out = table.assign(status=np.where(table["failed"] == 0, "done", "failed"),
                       arm=np.where(table["eta"] > 0, "sec", "none"), chosen=table["tested"])
    return out[["loss", "arm", "eta", "R@1", "status", "chosen"]]
