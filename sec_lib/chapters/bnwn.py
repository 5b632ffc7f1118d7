"""The BatchNorm / WeightNorm page: SEC with the paper's head, without BN, with BN right before the
normalization, and with WeightNorm; ours against the rebuttal's Table 5."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from .. import reference, report
from ..report import summary_table, values_ci, with_verdict
from . import profile_param
from ..report.claims import Claim, derived_family, family_row
from ..figures.tables import fold_columns
from .common import beside_cv, measures_text, name_means, paired, var_cv_text, with_norm_cv

#: The notebook's parameters (checked by ``sec_lib.params.notebook_params``).
PARAMS = profile_param()

#: (head, variant) -> (rebuttal table, rebuttal setting). The rebuttal's paper-head baseline without
#: SEC is the first row of its Table 2 (table = regularizers, setting = none); nobn was not run there.
BNWN_REBUTTAL = {
    ("paper", "none"): ("regularizers", "none"),
    ("paper", "sec"): ("bn_wn", "sec"),
    ("bn_before_norm", "none"): ("bn_wn", "bn"),
    ("bn_before_norm", "sec"): ("bn_wn", "bn+sec"),
    ("weightnorm", "none"): ("bn_wn", "wn"),
    ("weightnorm", "sec"): ("bn_wn", "wn+sec"),
}
BNWN_METRICS = ("R@1", "NMI", "F1", "train_norm_var")


def bnwn_table(runs: pd.DataFrame, rebuttal: pd.DataFrame | None = None) -> pd.DataFrame:
    """Ours per head × variant next to the rebuttal's Table 5 (Cars, semihard). On the page, R@1 and the
    norm variance, with its CV (std / mean, scale-free; :func:`~sec_lib.chapters.common.with_norm_cv`) beside it,
    stay beside the rebuttal's (variances only); NMI, F1 and the run counts are folded under the table
    (:func:`sec_lib.figures.tables.fold_columns`; the frame and its CSV keep every column)."""
    reb = reference.rebuttal_all() if rebuttal is None else rebuttal
    runs = with_norm_cv(runs)
    metrics = beside_cv(BNWN_METRICS, runs.columns)
    ours = summary_table(runs, ["head", "variant"], metrics)
    rows = []
    for r in ours.to_dict("records"):
        k = BNWN_REBUTTAL.get((r["head"], r["variant"]))
        hit = reb[(reb["table"] == k[0]) & (reb["setting"] == k[1])] if k else pd.DataFrame()
        h = hit.iloc[0] if len(hit) else None
        rows.append({**{c: r[c] for c in ("head", "variant", *metrics, "runs", "failed")},
                     "rebuttal R@1": float(h["R@1"]) if h is not None else np.nan,
                     "rebuttal NMI": float(h["NMI"]) if h is not None else np.nan,
                     "rebuttal F1": float(h["F1"]) if h is not None else np.nan,
                     "rebuttal norm var": float(h["mean_norm_var"]) if h is not None else np.nan})
    out = pd.DataFrame(rows).rename(columns={"train_norm_var": "norm var (train)", "train_norm_cv": "norm CV (train)"})
    return fold_columns(out, ["head", "variant"], {"NMI and F1, ours and the rebuttal's; runs":
                                                   ["NMI", "F1", "rebuttal NMI", "rebuttal F1", "runs", "failed"]})


def bnwn_diffs(runs: pd.DataFrame, metrics: Sequence[str] = ("R@1", "NMI", "F1"), rebuttal: pd.DataFrame | None = None) -> pd.DataFrame:
    """Paired SEC − none per head (paired t-test over seeds) and the rebuttal's difference beside."""
    reb = reference.rebuttal_all() if rebuttal is None else rebuttal
    d = paired(runs, ["head"], "variant", "none", "sec", metrics)
    paper = []
    for r in d.itertuples(index=False):
        ka, kb = BNWN_REBUTTAL.get((r.head, "none")), BNWN_REBUTTAL.get((r.head, "sec"))
        val = np.nan
        if ka and kb:
            va = reb[(reb["table"] == ka[0]) & (reb["setting"] == ka[1])][r.metric]
            vb = reb[(reb["table"] == kb[0]) & (reb["setting"] == kb[1])][r.metric]
            if len(va) and len(vb):
                val = float(vb.iloc[0]) - float(va.iloc[0])
        paper.append(val)
    return name_means(d.assign(rebuttal_diff=paper), "none", "sec")


def head_effect(runs: pd.DataFrame, head: str, expected_sign: int, metric: str = "R@1",
                rebuttal: pd.DataFrame | None = None) -> dict:
    """SEC − none for one head: estimate dict with the rebuttal's number and the computed verdict."""
    d = bnwn_diffs(runs[runs["head"] == head], [metric], rebuttal)
    if not len(d):
        out = values_ci([])
        out.update(rebuttal=np.nan)
    else:
        r = d.iloc[0]
        out = {"estimate": float(r["estimate"]), "ci_lo": float(r["ci_lo"]), "ci_hi": float(r["ci_hi"]),
               "n": int(r["n"]), "p_value": float(r["p_value"]), "rebuttal": float(r["rebuttal_diff"]),
               "mean_none": float(r["mean none"]), "mean_sec": float(r["mean sec"])}
    out["verdict"] = report.verdict(out["estimate"], out["ci_lo"], out["ci_hi"], expected_sign, n=out["n"])
    return out


#: The Holm family of the BN / WN page (see :func:`bnwn_family`).
FAMILY = "bnwn page"
#: The direction each head's SEC − none is expected to take: SEC hurts with BatchNorm right before the
#: normalization (the rebuttal's collapse), and helps with every other head.
HEAD_SIGNS = {"bn_before_norm": -1}


def bnwn_family(runs: pd.DataFrame, metrics: Sequence[str] = ("R@1", "NMI", "F1"),
                rebuttal: pd.DataFrame | None = None) -> pd.DataFrame:
    """Every comparison of the page as ONE Holm family: SEC − none per head and metric
    (:func:`bnwn_diffs`, paired t-test over seeds), expected sign −1 for ``bn_before_norm`` and +1 for
    the other heads (:data:`HEAD_SIGNS`), each metric's margin; with ``p_adj``, ``m``, ``mde``,
    ``n_counts`` and ``verdict`` on every row."""
    d = bnwn_diffs(runs, metrics, rebuttal)
    if not len(d):
        return d.assign(expected_sign=[], margin=[], p_adj=[], m=[], mde=[], n_counts=[], verdict=[], family=[])
    d = d.assign(_sign=[HEAD_SIGNS.get(h, +1) for h in d["head"]])
    return with_verdict(d, "_sign", family=FAMILY).drop(columns="_sign")


def page_reading(runs: pd.DataFrame, family: pd.DataFrame | None = None) -> str:
    """The page's closing bullets from its one Holm family (:func:`bnwn_family`, computed unless given):
    SEC with BatchNorm right before the normalization and with WeightNorm, against the rebuttal, and
    whether BN there lowers the norm variance (with its CV, std / mean, beside it)."""
    fam = bnwn_family(runs) if family is None else family
    if not isinstance(fam, pd.DataFrame) or "head" not in fam.columns or "p_adj" not in fam.columns:
        raise ValueError("family must be the table of bnwn_family(runs)")
    r1 = fam[fam["metric"] == "R@1"].set_index("head")
    out = []
    if "bn_before_norm" in r1.index:
        bn = r1.loc["bn_before_norm"]
        out.append(f"- **BN before the normalization**: SEC changes R@1 by "
                   f"{measures_text(bn, 2, 'points', test='paired t-test')} here; in the rebuttal it changed by "
                   f"{bn['rebuttal_diff']:+.2f}{_rebuttal_side(bn)}. Verdict for *SEC hurts with BN before the "
                   "normalization*: "
                   f"**{bn['verdict']}**"
                   + (f" (a drop of {abs(bn['estimate']):.2f} points against the rebuttal's "
                      f"{abs(bn['rebuttal_diff']):.2f})."
                      if bn["estimate"] < 0 else "."))
    if "weightnorm" in r1.index:
        wn = r1.loc["weightnorm"]
        out.append(f"- **WeightNorm**: SEC changes R@1 by {measures_text(wn, 2, 'points', test='paired t-test')} "
                   f"(rebuttal {wn['rebuttal_diff']:+.2f}{_rebuttal_side(wn)}). Verdict for *SEC still helps with "
                   "WeightNorm*: "
                   f"**{wn['verdict']}**.")
    r = with_norm_cv(runs)
    var = r.groupby(["head", "variant"])["train_norm_var"].mean()
    cv = r.groupby(["head", "variant"])["train_norm_cv"].mean() if "train_norm_cv" in r.columns else pd.Series(dtype=float)
    bn, pa = ("bn_before_norm", "none"), ("paper", "none")
    if bn in var and pa in var:
        c_bn, c_pa = cv.get(bn, np.nan), cv.get(pa, np.nan)
        scale_free = (f"; its CV (std / mean, scale-free) is {_lower(c_bn, c_pa)}"
                      if np.isfinite(c_bn) and np.isfinite(c_pa) else "")
        out.append(f"- Without SEC, from the paper's head to BatchNorm right before the normalization, the training "
                   f"norms' {var_cv_text(var[pa], var[bn], c_pa, c_bn)}: the variance is "
                   f"{'lower' if var[bn] < var[pa] else 'not lower'} with BN there{scale_free} (means over seeds, no test).")
    if len(fam):
        out.append(f"\nEvery verdict on this page, in the paired table and here, comes from one Holm family of "
                   f"{int(fam['m'].iloc[0])} comparisons.")
    return "\n".join(out)


def _rebuttal_side(r) -> str:
    """Whether our 95% interval holds the rebuttal's single-run difference: ', which our interval excludes' or
    ', which our interval includes'; '' without an interval or a rebuttal value."""
    lo, hi, reb = (float(r.get(k, np.nan)) for k in ("ci_lo", "ci_hi", "rebuttal_diff"))
    if not (np.isfinite(lo) and np.isfinite(hi) and np.isfinite(reb)):
        return ""
    return f", which our interval {'includes' if lo <= reb <= hi else 'excludes'}"


def _lower(new: float, old: float, same: float = 0.05) -> str:
    """'lower', 'not lower' or, within ``same`` (relative) of ``old``, 'about the same': means with no test."""
    if abs(new - old) <= same * abs(old):
        return "about the same"
    return "lower" if new < old else "not lower"


# ------------------------------------------------------------------------------ the claims this page decides

#: :func:`bnwn_family` on the page's evidence, exactly as the page computes it.
page_family = derived_family(__name__, "bnwn_family", lambda ev: bnwn_family(ev.runs("bnwn")))


def _head(head: str):
    return family_row(page_family, head=head, metric="R@1")


CLAIMS = [
    Claim(id="Q5a", claim="SEC with BatchNorm right before the l2-normalization hurts (rebuttal: collapse)",
          source="review Q5; rebuttal Table 5", measured="R@1 SEC − none, head bn_before_norm, semihard",
          expected_sign=-1, page="bnwn", estimate=_head("bn_before_norm"),
          paper=lambda: reference.rebuttal_diff("bn_wn", "bn", "bn_wn", "bn+sec")),
    Claim(id="Q5b", claim="SEC still helps with WeightNorm on the last layer", source="review Q5; rebuttal Table 5",
          measured="R@1 SEC − none, head weightnorm, semihard", expected_sign=+1, page="bnwn",
          estimate=_head("weightnorm"), paper=lambda: reference.rebuttal_diff("bn_wn", "wn", "bn_wn", "wn+sec")),
]
