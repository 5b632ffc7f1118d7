"""The compare page: our main table (four losses × none / L2-reg / SEC, mean and 95% CI over seeds),
paired gains against the no-regulariser baseline, our gains against the paper's, the η chosen on
held-out classes, and the losses beyond the paper's four.

Statistics: Student-t intervals over seeds and paired t-tests that pair runs on their seed
(:mod:`sec_lib.report`); every verdict comes from :func:`sec_lib.report.verdict`.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from .. import reference, report
from ..analysis.primary import pooled_gain
from ..analysis.source import run_source
from ..reference import RETRIEVAL_METRICS, SOURCES, comparison_label
from ..report.claims import Claim, family_row
from ..runs import decisive
from ..runs import experiments as ex
from ..runs.decisive import ETA_SELECTION_STAGES
from . import common, compare_weightdecay, profile_param
from .common import LOSS_ABBR, loss_noun, order_rows, runs_frame
from .evidence import ETA_ARM_NAMES
from .gain_words import (ARM_WORDS, LOSS_CLAIMS, fmt_p, gain_sentences, gains_paragraph,  # noqa: F401
                         overall_sentence)
# The main comparison's tables and gains, which other pages read too; their names are this page's as well.
from .gains import (SIZE_RULE_CAPTION, beyond_gains, beyond_selected, eta_arms_apart, family_of, main_table,  # noqa: F401
                    main_table_display, other_tier_sentence, paper_gain_cell, sec_gain, sec_gain_display,
                    selected_eta_rows)

#: The notebook's parameters (checked by ``sec_lib.params.notebook_params``).
PARAMS = profile_param()


def setup_sentence(runs: pd.DataFrame) -> str:
    """A computed description of the runs a page reads (counts, data, model, iterations, failures)."""
    runs = runs_frame(runs)
    n = len(runs)
    nf = int((runs["status"] != "done").sum()) if "status" in runs.columns else 0
    parts = [f"This page reads **{n} runs** from the result store"]
    dims = []
    for col, what in (("loss", "losses"), ("variant", "variants"), ("seed", "seeds")):
        if col in runs.columns:
            vals = list(dict.fromkeys(runs[col].astype(str)))
            dims.append(f"{len(vals)} {what} ({', '.join(vals)})")
    if dims:
        parts.append(": " + " × ".join(dims))
    det = []
    for col, fmt in (("dataset", "data: {}"), ("model", "model: {}"), ("iterations", "{} iterations"),
                     ("batch_size", "batch {}"), ("embed_dim", "{}-d embedding"), ("device", "device: {}")):
        if col in runs.columns and len(runs):
            vals = sorted(set(runs[col].astype(str)))
            det.append(fmt.format("/".join(vals)))
    text = "".join(parts) + (f" ({', '.join(det)})" if det else "") + "."
    text += (f" **{nf} of them failed** (non-finite loss); they count in no mean." if nf else " All of them finished.")
    return text


def beyond_paragraph(gains: pd.DataFrame, frames, metric: str = "R@1") -> str:
    """The R@1 bullets of :func:`beyond_gains`, one block per arm, each arm's weights named from its runs."""
    runs = runs_frame(eta_arms_apart(frames))
    blocks = []
    for v in (ETA_ARM_NAMES["selected"], ETA_ARM_NAMES["paper"], "sec", "l2reg"):
        if not (gains["variant"].eq(v) & gains["metric"].eq(metric)).any():
            continue
        w = runs[runs["variant"] == v].groupby("loss", sort=False)["eta"].first()
        weights = ", ".join(f"{loss} {w[loss]:g}" for loss in (*ex.EXTRA_LOSSES, *ex.MAIN_LOSSES) if loss in w.index)
        title = f"{comparison_label(v)}, {metric} (weights: {weights})"
        blocks.append(gains_paragraph(gains, metric, v, title=title, closing=False))
    return "\n\n".join(blocks)


def gains_vs_paper(frames, dataset=("CUB", "Cars"), metrics: Sequence[str] = RETRIEVAL_METRICS,
                   gains: pd.DataFrame | None = None, data: str = "glyphs") -> pd.DataFrame:
    """Our gain next to the paper's, per loss, comparison (SEC − none, L2-reg − none), metric and
    paper dataset (tidy). ``gains``: a precomputed :func:`sec_gain` frame (computed when None). ``dataset``:
    the paper's datasets to set beside ours (a real-benchmark book: its own,
    :func:`sec_lib.runs.benchmarks.paper_datasets`); ``data``: what our runs trained on, for the source label.

    Columns: dataset, loss, variant, comparison, metric, ours, ours_ci_lo, ours_ci_hi, p_value,
    n (paired seeds), paper, same_sign (our estimate has the paper's sign), source.
    """
    names = reference.check_datasets(dataset, ("CUB", "Cars", "SOP", "InShop"))
    g = sec_gain(frames, metrics=metrics) if gains is None else gains
    g = g[g["metric"].isin(metrics) & (g["baseline"] == "none")]
    p = reference.paper_gains(names, metrics)
    out = g.merge(p[["dataset", "loss", "variant", "metric", "paper_gain"]], on=["loss", "variant", "metric"],
                  how="inner")
    out = out.rename(columns={"estimate": "ours", "ci_lo": "ours_ci_lo", "ci_hi": "ours_ci_hi", "paper_gain": "paper"})
    out["same_sign"] = np.sign(out["ours"]) == np.sign(out["paper"])
    out["source"] = f"ours ({data}) vs {SOURCES['table1']}"
    cols = ["dataset", "loss", "variant", "comparison", "metric", "ours", "ours_ci_lo", "ours_ci_hi", "p_value",
            "n", "paper", "same_sign", "source"]
    out = out[cols]
    out = out.assign(__d=out["dataset"].map({d: i for i, d in enumerate(names)}))
    out = order_rows(out.sort_values("__d", kind="stable").drop(columns="__d"), cols=("loss", "variant"))
    out.attrs["source"] = out["source"].iloc[0] if len(out) else "ours"
    return out


def eta_selection_table(profile, root=None, losses=None) -> pd.DataFrame:
    """Held-out R@1 of every η of the selection runs, per loss, with the chosen η marked.

    The selection runs train on the training classes minus the held-out ones and evaluate on those
    held-out training classes (``experiments.eta_selection``), so the test classes play no part.
    ``root``: the result store's folder (default: ``$SEC_RUNS_DIR`` or ``data/runs``). ``losses``: the losses to
    show (default: the four main losses, tuplet margin and CosFace, this page's; a review page passes its own).
    """
    losses = tuple(losses) if losses is not None else (*ex.MAIN_LOSSES, *ex.EXTRA_LOSSES)
    p = ex.get_profile(profile) if isinstance(profile, str) else profile
    src = run_source(p.name, root)
    if src.seeded_selection:
        return _seeded_eta_selection(p, src, losses)
    selection = [r for r in ex.selection_runs(p, src.store, losses) if r.config.mu == "batch"]   # the η rows, not L2
    out = pd.DataFrame([{"loss": r.config.loss, "eta": r.config.eta, "status": r.status,
                         "heldout_R@1": r.metrics.get("R@1", np.nan)} for r in selection])
    chosen = {loss: ex.chosen_eta(p, loss, selection) for loss in out["loss"].unique()}
    out["chosen"] = [bool(e == chosen[l]) for l, e in zip(out["loss"], out["eta"])]
    return out.sort_values(["loss", "eta"]).reset_index(drop=True)


def _seeded_eta_selection(p, src, losses) -> pd.DataFrame:
    """:func:`eta_selection_table` of the decisive tier for ``losses``: its held-out selection stages
    (:data:`sec_lib.runs.decisive.ETA_SELECTION_STAGES`), each η's held-out R@1 the mean over its seeds (``seeds``), ``chosen`` the η its
    profile fixed from that selection (``plan.json``, ``choices.json``; none while the loss's selection trains)."""
    def eta_point(c):
        keep = c.loss in losses and not c.relative and (c.eta == 0 or c.mu == "batch")
        return (("loss", c.loss), ("eta", c.eta)) if keep else None
    out = src.selection(ETA_SELECTION_STAGES, eta_point)
    if not len(out):
        return pd.DataFrame(columns=["loss", "eta", "status", "heldout_R@1", "seeds", "chosen"])
    out = out.rename(columns={"held-out R@1": "heldout_R@1"})
    out["chosen"] = [bool(e == common.fixed_or_nan(p, "sec", l)) for l, e in zip(out["loss"], out["eta"])]
    return out[["loss", "eta", "status", "heldout_R@1", "seeds", "chosen"]].sort_values(["loss", "eta"]).reset_index(
        drop=True)


def selection_flags(profile, losses=None) -> str:
    """Markdown: what the decisive tier's held-out selection flagged for ``losses`` (default: the four main losses,
    tuplet margin and CosFace; ``plan.json`` for the four main losses, ``choices.json`` for the others): where η = 0
    scored best, SEC was not selected for that loss and its best nonzero η is tested, flagged; where a choice sits at
    an edge of its grid after every extension, it says so; a loss whose selection has not been made yet is named.
    Empty for a tier without such flags (the quick and reference tiers choose by their own rule, shown in the table
    above)."""
    if not run_source(profile).seeded_selection:
        return ""
    try:
        plan = decisive.read_plan()
    except KeyError:
        return ""
    losses = tuple(losses) if losses is not None else (*ex.MAIN_LOSSES, *ex.EXTRA_LOSSES)
    choices = decisive.read_choices()
    flags, pending = {}, []
    for loss in losses:
        if loss in plan.eta:
            fs = list(plan.flags.get(loss, ()))
        elif isinstance(choices.get(loss), dict):
            fs = list(choices[loss].get("flags", ()))
        else:
            pending.append(loss)
            continue
        if fs:
            flags[loss] = fs
    wait = (f"The held-out η of {common.and_list(pending)} is not chosen yet: "
            f"{'its' if len(pending) == 1 else 'their'} selection is still training." if pending else "")
    if not flags:
        done = [x for x in losses if x not in pending]
        if not done:
            return wait
        kinds = "η and L2 weight" if any(loss in (*ex.MAIN_LOSSES, *ex.EXTRA_LOSSES) for loss in done) else "η"
        return (f"Every {kinds} the decisive tier chose on held-out classes is interior to its grid, and SEC was "
                f"selected for every loss{'' if not pending else ' chosen so far'}." + (" " + wait if wait else ""))
    lines = []
    for loss, fs in flags.items():
        eta = plan.eta.get(loss, choices.get(loss, {}).get("sec"))
        tested = f" (η = {eta:g} is tested)" if eta is not None else ""
        lines.append(f"- **{loss}**{tested}: " + flags_text(fs))
    return "**Flagged by the held-out selection:**\n\n" + "\n".join(lines) + ("\n\n" + wait if wait else "")


def flags_text(flags) -> str:
    """A loss's selection flags as recorded (SEC's as they are, the L2 weight's prefixed 'L2: ', as
    ``plan.json`` and ``choices.json`` keep them) in words, grouped by regularizer: 'SEC's η: …. The L2 weight: …'."""
    sec = [f.replace("SEC not selected", "not selected") for f in flags if not f.startswith("L2: ")]
    l2 = [f[len("L2: "):].replace("L2-reg not selected", "not selected") for f in flags if f.startswith("L2: ")]
    parts = [*(["SEC's η: " + "; ".join(sec)] if sec else []), *(["the L2 weight: " + "; ".join(l2)] if l2 else [])]
    return ". ".join(p[0].upper() + p[1:] for p in parts) + "."


# ------------------------------------------------------------------------------ the claims this page decides

def _loss_row(loss: str):
    """C4a-d: the R@1 row of SEC − none for ``loss`` as this page's table tests it (its family: SEC − none, R@1)."""
    return family_row(lambda ev: sec_gain(ev.frames("compare"), variants=("sec",), metrics=("R@1",)), loss=loss)


def _pooled(sweep: str, a: str = "none", b: str = "sec", losses=ex.MAIN_LOSSES):
    """A pooled claim's estimate: :func:`~sec_lib.analysis.primary.pooled_gain` on ``sweep``'s runs (on the
    ``tuned`` runs with the defaults, the primary test)."""
    def estimate(ev) -> dict:
        return pooled_gain(ev.runs(sweep), a, b, losses)
    estimate.__name__ = f"pooled_{b}_minus_{a}_{sweep}"
    return estimate


def _l2_weights(ev) -> str:
    r = ev.runs("compare")
    w = r[r["variant"] == "l2reg"].groupby("loss")["eta"].first()
    return ", ".join(f"{l} {w[l]:g}" for l in ex.MAIN_LOSSES if l in w.index)


def _sec_vs_l2(ev) -> dict:
    out = _pooled("compare", "l2reg", "sec")(ev)
    out["note"] = f"L2-reg weights: {_l2_weights(ev)}"
    return out


def _sec_vs_l2_held_out(ev) -> dict:
    """C5v: SEC at the η chosen on held-out classes (the ``tuned`` runs, the headline's arm) − L2-reg at its held-out
    weight (the main comparison's L2 arm), paired on seed within each main loss, averaged over the losses per seed."""
    tuned, main = ev.runs("tuned"), ev.runs("compare")
    r = pd.concat([tuned[tuned["variant"] == "sec"], main[main["variant"] == "l2reg"]], ignore_index=True)
    out = report.pooled_diff(r[r["loss"].isin(ex.MAIN_LOSSES)], "variant", "l2reg", "sec", "R@1")
    out["note"] = f"L2-reg weights: {_l2_weights(ev)}"
    return out


def _paper_gains(a: str = "none", b: str = "sec", loss: str | None = None):
    """The paper's sizes for a claim: Table 1's R@1 of ``b`` − ``a`` per dataset (and loss) on its four datasets."""
    return lambda: reference.paper_gain_values(a, b, loss)


def _paper_text(what: str = "gains"):
    return lambda values: reference.paper_size_text(values, what=what)


def _beyond_row(loss: str):
    """Q8b: the R@1 row of SEC at the selected η − none for ``loss`` as this page's beyond table tests it
    (:func:`beyond_gains`; its Holm family: that arm over tuplet margin and CosFace). No runs of ``loss``: KeyError
    (the claim has no evidence)."""
    def family(ev) -> pd.DataFrame:
        if not (ev.runs("beyond")["loss"] == loss).any():
            raise KeyError(f"no {loss} runs in the beyond chapter")
        return beyond_selected(ev)
    return family_row(family, loss=loss)


#: The claims this page decides: per loss (Table 1) and pooled at the paper's η, the primary test (η chosen on
#: held-out classes), SEC against L2-reg at the paper's η and at the held-out arms, and the tuplet margin loss. The
#: family rule (the claims page): a registered pooled row is a family alone; per-loss rows form a family of their own.
#: C4W, the primary test's registered follow-up over the authors' weight decay, joined once its test runs were all
#: committed.
CLAIMS = [
    *[Claim(id=f"C4{c}", claim=f"SEC improves R@1 for the {loss_noun(l)} loss ({LOSS_ABBR[l]} in the paper), at the "
                               "paper's η", source="paper Table 1",
            measured=f"R@1 SEC at the paper's η − none, {l}, paired on seed (main-table runs); Holm over the four "
                     "losses' SEC − none R@1",
            estimate=_loss_row(l), expected_sign=+1, page="compare",
            paper=lambda l=l: reference.paper_loss_gains_text(l), paper_size=_paper_gains(loss=l),
            paper_size_text=_paper_text())
      for c, l in zip("abcd", ex.MAIN_LOSSES)],
    Claim(id="C4", claim="SEC improves R@1 on average over the losses, at the paper's η", source="paper Table 1",
          measured="R@1 SEC at the paper's η − none, mean over the 4 losses per seed; paper: mean over CUB and Cars",
          estimate=_pooled("compare"), expected_sign=+1, page="compare", family="pooled, the paper's η",
          paper=lambda: reference.paper_mean_gain(), paper_size=_paper_gains(), paper_size_text=_paper_text()),
    Claim(id="C4v", claim="SEC improves R@1 on average over the losses, with η chosen on held-out classes "
                          "(the primary test)", source="paper Table 1",
          measured="R@1 SEC (η per loss chosen on held-out training classes) − none, mean over the 4 losses per seed",
          estimate=_pooled("tuned"), expected_sign=+1, page="compare", family="primary test",
          paper=lambda: reference.paper_mean_gain(), paper_size=_paper_gains(), paper_size_text=_paper_text()),
    compare_weightdecay.CLAIM,
    Claim(id="C5", claim="SEC (μ = batch mean) beats L2-reg (μ = 0), with SEC at the paper's η",
          source="paper Table 1",
          measured="R@1 SEC at the paper's η − L2-reg at its held-out weight, mean over the 4 losses per seed (each "
                   "loss's L2 weight is in the claim's note); paper: mean over CUB and Cars",
          estimate=_sec_vs_l2, expected_sign=+1, page="compare", family="SEC − L2-reg",
          paper=lambda: reference.paper_mean_gain(None, "l2reg", "sec"), paper_size=_paper_gains("l2reg", "sec"),
          paper_size_text=_paper_text("SEC − L2-reg gains")),
    Claim(id="C5v", claim="SEC beats L2-reg at the arms the headline uses: SEC at the η chosen on held-out classes "
                          "against L2-reg at its held-out weight", source="paper Table 1; rebuttal Table 2 (review Q2)",
          measured="R@1 SEC (held-out η) − L2-reg (held-out weight), paired on seed within each loss, mean over the "
                   "4 losses per seed",
          estimate=_sec_vs_l2_held_out, expected_sign=+1, page="compare", family="SEC − L2-reg, held-out arms",
          paper=lambda: reference.paper_mean_gain(None, "l2reg", "sec"), paper_size=_paper_gains("l2reg", "sec"),
          paper_size_text=_paper_text("SEC − L2-reg gains"),
          added="added after the runs (not registered before them): the rebuttal's question asked of the arm the "
                "headline uses; a family of its own"),
    Claim(id="Q8b", claim="SEC helps the tuplet margin loss", source="review Q8; rebuttal Table 4",
          measured="R@1 SEC (η chosen on held-out classes) − none, tuplet margin loss; Holm over tml and CosFace, "
                   "as the page's table",
          estimate=_beyond_row("tml"), expected_sign=+1, page="compare",
          family="losses beyond the four", paper=reference.rebuttal_tml_text),
]
