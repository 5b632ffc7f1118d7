"""The compare page's sentences about SEC − none (or another arm against its baseline), loss by loss and overall:
each computed from a gains table (:func:`sec_lib.chapters.gains.sec_gain`), and each count naming the η arm it
counts. The compare page re-exports them; the landing and tiers pages read them through it.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .. import report
from ..reference import comparison_label
from ..report import fmt_metric
from ..runs import experiments as ex
from .common import TEST_NAME


def fmt_p(p) -> str:
    if p is None or not np.isfinite(p):
        return "p n/a"
    return f"p = {p:.2g}" if p >= 0.001 else "p < 0.001"


#: The per-loss claims this page decides: SEC − none in R@1 on the main table's runs.
LOSS_CLAIMS = {loss: f"C4{c}" for c, loss in zip("abcd", ex.MAIN_LOSSES)}


def gain_sentences(gains: pd.DataFrame, metric: str = "R@1", variant: str = "sec",
                   paper: pd.DataFrame | None = None, baseline: str = "none", claims: dict | None = None) -> list[str]:
    """One computed sentence per loss: our paired difference with its CI, the test, the verdict (with the
    claim id from ``claims``, {loss: id}, where the row is a claim) and, if ``paper`` (a
    :func:`gains_vs_paper` frame) is given, the paper's gains on its datasets."""
    g = gains[(gains["metric"] == metric) & (gains["variant"] == variant) & (gains["baseline"] == baseline)]
    out = []
    for r in g.itertuples(index=False):
        if r.n == 0:
            out.append(f"**{r.loss}**: no paired seeds, so {r.comparison} cannot be tested (verdict: {r.verdict}).")
            continue
        ci = (f"95% CI [{fmt_metric(r.ci_lo, metric, 2, True)}, {fmt_metric(r.ci_hi, metric, 2, True)}]"
              if np.isfinite(r.ci_lo) else "no CI with one seed")
        s = (f"**{r.loss}**: {r.comparison} on {metric} = {fmt_metric(r.estimate, metric, 2, True)} points ({ci}, "
             f"{r.n} paired seeds, {TEST_NAME}, Holm-adjusted {fmt_p(r.p_adj)}, could detect effects of ≥ "
             f"{fmt_metric(r.mde, metric, 2, False)} points) → verdict: **{r.verdict}**"
             + (f" (claim {claims[r.loss]})" if claims and r.loss in claims else ""))
        if paper is not None:
            pp = paper[(paper["loss"] == r.loss) & (paper["variant"] == variant) & (paper["metric"] == metric)]
            if len(pp):
                s += "; the paper reports " + ", ".join(f"{x.paper:+.2f} on {x.dataset}" for x in pp.itertuples())
        out.append(s + ".")
    return out


#: How a sentence names the η arm it counts (the ``eta_arm`` label of the runs).
ARM_WORDS = {"selected": "SEC at the η chosen on held-out classes", "paper": "SEC at the paper's η"}


def overall_sentence(gains: pd.DataFrame, metric: str = "R@1", variant: str = "sec", baseline: str = "none") -> str:
    """A computed closing sentence: for how many losses the gain is supported by the CIs, and for
    which losses the variant is worse with an interval entirely below zero (a finding where the
    Holm-adjusted p is below 0.05 too, a hint where it is not)."""
    g = gains[(gains["metric"] == metric) & (gains["variant"] == variant) & (gains["baseline"] == baseline)]
    comp = comparison_label(variant, baseline)
    if not len(g):
        return f"No {comp} comparison on {metric} could be computed."
    arms = g["eta_arm"].dropna().unique() if "eta_arm" in g.columns else []
    if len(arms) == 1 and arms[0] in ARM_WORDS:           # every count names the arm it counts
        comp = f"{comp} ({ARM_WORDS[arms[0]]})"
    n = len(g)
    signal = g["verdict"].isin(report.SIGNAL_WORDS) & (g["verdict"] != "negligible")
    counts = g["verdict"].value_counts()
    rep, part, notr = int(signal.sum()), int(counts.get("inconclusive", 0)), int(len(g) - signal.sum()
                                                                                 - counts.get("inconclusive", 0))
    below = g["ci_hi"] < 0
    held = below & (g["p_adj"] < report.VERDICT_RULES.alpha) if "p_adj" in g.columns else below
    worse, hint = list(g.loc[held, "loss"]), list(g.loc[below & ~held, "loss"])
    tail = (f" For {', '.join(worse)} the difference is negative with a 95% interval entirely below zero and "
            f"Holm-adjusted p < 0.05: there the regulariser hurts." if worse else "")
    tail += (f" For {', '.join(hint)} the 95% interval lies below zero, but the Holm-adjusted p does not reach "
             f"0.05 over the page's comparisons: a hint that it hurts, not a finding." if hint else "")
    if rep == n:
        return (f"{comp} improves {metric} for all {n} losses with 95% intervals that exclude zero and Holm-adjusted "
                "p < 0.05: the paper's "
                "main claim holds on this benchmark.")
    if rep == 0 and part == 0:
        return (f"{comp} does not improve {metric} here for any of the {n} losses (every point estimate is zero "
                "or negative): on this benchmark the paper's main claim is not reproduced." + tail)
    if rep == 0:
        return (f"{comp} does not give a gain in {metric} that the 95% intervals support for any of the {n} losses "
                f"({part} inconclusive, {notr} not reproduced): loss by loss, the data here do not confirm the "
                "paper's claim (the mean over the losses is a test of its own)." + tail)
    return (f"{comp} improves {metric} with intervals that exclude zero and Holm-adjusted p < 0.05 for {rep} of {n} "
            f"losses; of the others, {part} inconclusive and {notr} not reproduced, so the claim holds only for some "
            "losses." + tail)


def gains_paragraph(gains: pd.DataFrame, metric: str = "R@1", variant: str = "sec", baseline: str = "none",
                    paper: pd.DataFrame | None = None, title: str | None = None, closing: bool = True,
                    claims: dict | None = None) -> str:
    """A Markdown paragraph: an optional bold ``title``, one bullet per loss (:func:`gain_sentences`)
    and, with ``closing``, the closing sentence (:func:`overall_sentence`)."""
    bullets = "\n".join("- " + s for s in gain_sentences(gains, metric, variant, paper, baseline=baseline,
                                                         claims=claims))
    head = f"**{title}:**\n\n" if title else ""
    tail = "\n\n" + overall_sentence(gains, metric, variant, baseline=baseline) if closing else ""
    return head + bullets + tail
