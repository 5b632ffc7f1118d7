"""The normalize-layer page: SEC on the pre-normalization features of a head that ends in an explicit
normalize layer."""
from __future__ import annotations

from typing import Sequence

import pandas as pd

from .. import report
from ..report import fmt_estimate, summary_table, values_ci
from . import profile_param
from .common import name_means, paired, run_step_means, with_verdict

#: The notebook's parameters (checked by ``sec_lib.params.notebook_params``).
PARAMS = profile_param()

NORMLAYER_METRICS = ("R@1", "NMI", "train_norm_var", "test_norm_var", "grad_slope")


def normlayer_table(runs: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """Per head × variant: retrieval, prenorm norm variances and the mean log-log slope of the
    per-sample gradient norm wrt the prenorm features against their norm."""
    r = run_step_means(runs, steps, ["grad_slope"])
    return summary_table(r, ["head", "variant"], list(NORMLAYER_METRICS), digits=3)


def normlayer_diffs(runs: pd.DataFrame, metrics: Sequence[str] = ("R@1", "NMI")) -> pd.DataFrame:
    """Four paired comparisons: normalize − paper head (without and with SEC; expected: no change,
    since every loss already normalizes) and SEC − none (per head; expected: a gain). The chapter's
    comparisons are one Holm family (:func:`~sec_lib.chapters.common.with_verdict`)."""
    parts = []
    for variant in ("none", "sec"):
        d = paired(runs[runs["variant"] == variant], [], "head", "paper", "normalize", metrics)
        if len(d):
            parts.append(d.assign(comparison=f"normalize − paper head ({variant})", _sign=0))
    for head in ("paper", "normalize"):
        d = paired(runs[runs["head"] == head], [], "variant", "none", "sec", metrics)
        if len(d):
            parts.append(d.assign(comparison=f"SEC − none ({head} head)", _sign=+1))
    if not parts:
        return pd.DataFrame(columns=["comparison", "metric", "diff", "ci_lo", "ci_hi", "p_value", "n_pairs", "verdict"])
    out = name_means(with_verdict(pd.concat(parts, ignore_index=True), "_sign").drop(columns="_sign"),
                     "baseline", "compared")
    return out[["comparison", *[c for c in out.columns if c != "comparison"]]]


def page_reading(runs: pd.DataFrame, steps: pd.DataFrame, diffs: pd.DataFrame) -> str:
    """The page's closing bullets: does the normalize layer change R@1, does SEC on the prenorm still
    help (from :func:`normlayer_diffs`), and does the prenorm gradient still fall with its norm."""
    eq = diffs[(diffs.comparison == "normalize − paper head (none)") & (diffs.metric == "R@1")]
    gain = diffs[(diffs.comparison == "SEC − none (normalize head)") & (diffs.metric == "R@1")]
    slopes = run_step_means(runs, steps, ["grad_slope"])
    sl = values_ci(slopes.loc[slopes["head"] == "normalize", "grad_slope"])
    v_sl = report.verdict(sl["estimate"], sl["ci_lo"], sl["ci_hi"], -1, n=sl["n"])
    out = []
    if len(eq):
        r = eq.iloc[0]
        out.append(f"- Without SEC, normalize − paper head = {r['diff']:+.3f} R@1 points (95% CI [{r['ci_lo']:+.3f}, "
                   f"{r['ci_hi']:+.3f}]): *the normalize layer changes nothing*: **{r['verdict']}**.")
    if len(gain):
        r = gain.iloc[0]
        out.append(f"- With the normalize layer, SEC on the prenorm changes R@1 by {r['diff']:+.2f} points "
                   f"(95% CI [{r['ci_lo']:+.2f}, {r['ci_hi']:+.2f}], paired t-test p = {r['p_value']:.2g}): "
                   f"*SEC still helps with a normalize layer*: **{r['verdict']}**.")
    out.append(f"- The per-batch log-log slope of ‖∂L/∂z_i‖ against ‖z_i‖ for the normalize head is {fmt_estimate(sl)} "
               f"(theory −1): *the gradient wrt the prenorm still falls with its norm*: **{v_sl}**.")
    return "\n".join(out)
