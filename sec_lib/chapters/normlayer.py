"""The normalize-layer page: SEC on the pre-normalization features of a head that ends in an explicit
normalize layer."""
from __future__ import annotations

from typing import Sequence

import pandas as pd

from ..report import one_family, summary_table, values_ci, with_verdict
from . import profile_param
from ..report.claims import Claim, derived_family, family_row
from .common import beside_cv, measures_text, name_means, paired, run_slopes, verdict_row_of, with_norm_cv

#: The notebook's parameters (checked by ``sec_lib.params.notebook_params``).
PARAMS = profile_param()

NORMLAYER_METRICS = ("R@1", "NMI", "train_norm_var", "test_norm_var", "grad_slope")


def normlayer_table(runs: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """Per head × variant: retrieval, prenorm norm variances, each with its CV (std / mean, scale-free;
    :func:`~sec_lib.chapters.common.with_norm_cv`) beside it, and each run's median log-log slope of the
    per-sample gradient norm wrt the prenorm features against their norm
    (:func:`~sec_lib.chapters.common.run_slopes`)."""
    r = with_norm_cv(run_slopes(runs, steps))
    return summary_table(r, ["head", "variant"], beside_cv(NORMLAYER_METRICS, r.columns), digits=3)


def normlayer_diffs(runs: pd.DataFrame, metrics: Sequence[str] = ("R@1", "NMI")) -> pd.DataFrame:
    """Four paired comparisons: normalize − paper head (without and with SEC; expected: no change,
    since every loss already normalizes) and SEC − none (per head; expected: a gain), Holm-adjusted
    together (:func:`sec_lib.report.with_verdict`); the page's one family adds the prenorm
    slope (:func:`normlayer_family`)."""
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
        return pd.DataFrame(columns=["comparison", "metric", "estimate", "ci_lo", "ci_hi", "p_value", "n", "verdict"])
    out = name_means(with_verdict(pd.concat(parts, ignore_index=True), "_sign").drop(columns="_sign"),
                     "baseline", "compared")
    return out[["comparison", *[c for c in out.columns if c != "comparison"]]]


#: The Holm family of the normalize-layer page (see :func:`normlayer_family`).
FAMILY = "normlayer page"


def prenorm_slope(runs: pd.DataFrame, steps: pd.DataFrame) -> dict:
    """The normalize head's per-batch log-log slope of ‖∂L/∂z_i‖ against ‖z_i‖ (median over each run's steps,
    :func:`~sec_lib.chapters.common.run_slopes`), averaged per seed over the runs without and with SEC: mean,
    95% interval and t-test over seeds (:func:`sec_lib.report.values_ci`), plus ``n_runs`` (the runs behind
    the seeds' means)."""
    slopes = run_slopes(runs, steps)
    s = slopes[(slopes["head"] == "normalize") & slopes["grad_slope"].notna()]
    out = values_ci(s.groupby("seed")["grad_slope"].mean().to_numpy() if len(s) else [])
    out["n_runs"] = int(len(s))
    return out


def normlayer_family(runs: pd.DataFrame, steps: pd.DataFrame, metrics: Sequence[str] = ("R@1", "NMI")) -> dict:
    """Every verdict of the page as ONE Holm family: the paired comparisons of
    :func:`normlayer_diffs` and the prenorm slope of :func:`prenorm_slope` (expected sign −1: the
    gradient falls with the norm). Returns ``{"diffs": ..., "slope": one-row table}``, each row with
    ``p_adj`` and ``m`` of the whole family, ``mde``, ``n`` and ``n_counts``."""
    diffs = normlayer_diffs(runs, metrics)
    sl = prenorm_slope(runs, steps)
    slope = pd.DataFrame([{"comparison": "prenorm gradient slope (normalize head)", "metric": "grad_slope",
                           **verdict_row_of(sl, -1), "n_runs": sl["n_runs"]}])
    diffs, slope = one_family(diffs, slope, family=FAMILY)
    return {"diffs": diffs, "slope": slope}


def page_reading(runs: pd.DataFrame, steps: pd.DataFrame, family: dict | None = None) -> str:
    """The page's closing bullets from the page's one Holm family (:func:`normlayer_family`, computed
    from ``runs`` and ``steps`` unless given): does the normalize layer change R@1, does SEC on the
    prenorm still help, and does the prenorm gradient still fall with its norm."""
    fam = normlayer_family(runs, steps) if family is None else family
    if not isinstance(fam, dict) or not {"diffs", "slope"} <= set(fam):
        raise ValueError("family must be the dict of normlayer_family(runs, steps) (keys diffs, slope), "
                         f"got {type(fam).__name__}")
    diffs, sl = fam["diffs"], fam["slope"].iloc[0]
    eq = diffs[(diffs.comparison == "normalize − paper head (none)") & (diffs.metric == "R@1")]
    gain = diffs[(diffs.comparison == "SEC − none (normalize head)") & (diffs.metric == "R@1")]
    out = []
    if len(eq):
        r = eq.iloc[0]
        out.append(f"- Without SEC, normalize − paper head = {measures_text(r, 3, 'R@1 points', test='paired t-test')}: "
                   f"*the normalize layer changes nothing* (equivalence within ±{r['margin']:g} points): "
                   f"**{r['verdict']}**.")
    if len(gain):
        r = gain.iloc[0]
        out.append(f"- With the normalize layer, SEC on the prenorm changes R@1 by "
                   f"{measures_text(r, 2, 'points', test='paired t-test')}: *SEC still helps with a normalize layer*: "
                   f"**{r['verdict']}**.")
    runs_note = f"each seed the mean of its runs without and with SEC, {int(sl['n_runs'])} runs"
    out.append(f"- The per-batch log-log slope of ‖∂L/∂z_i‖ against ‖z_i‖ for the normalize head is "
               f"{measures_text(sl, 3, detail=runs_note, test='t-test against 0')} (theory −1): *the gradient wrt the "
               f"prenorm still falls with its norm*: **{sl['verdict']}**.")
    m = int(diffs["m"].iloc[0]) if len(diffs) else int(sl["m"])
    out.append(f"\nEvery verdict on this page comes from one Holm family of {m} comparisons (the paired table "
               "and the slope).")
    return "\n".join(out)


# ------------------------------------------------------------------------------ the claims this page decides

#: :func:`normlayer_family` on the page's evidence, exactly as the page computes it.
page_family = derived_family(__name__, "normlayer_family",
                             lambda ev: normlayer_family(ev.runs("normlayer"), ev.table("normlayer", "steps")))


_est_normalize_gain = family_row(lambda ev: page_family(ev)["diffs"], comparison="SEC − none (normalize head)",
                                metric="R@1")


CLAIMS = [
    Claim(id="Q3", claim="SEC still helps when the network ends in a normalize layer", source="review Q3 (Reviewer 4)",
          measured="R@1 SEC (on the pre-normalization features) − none, head 'normalize' (its own runs)",
          expected_sign=+1, page="normlayer", estimate=_est_normalize_gain),
]
