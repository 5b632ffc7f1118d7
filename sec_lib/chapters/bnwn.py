"""The BatchNorm / WeightNorm page: SEC with the paper's head, without BN, with BN right before the
normalization, and with WeightNorm; ours against the rebuttal's Table 5."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from .. import reference, report
from ..report import fmt_estimate, summary_table, values_ci
from . import profile_param
from .common import mde_from_ci, name_means, paired

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
    """Ours per head × variant next to the rebuttal's Table 5 (Cars, semihard)."""
    reb = reference.rebuttal_all() if rebuttal is None else rebuttal
    ours = summary_table(runs, ["head", "variant"], list(BNWN_METRICS))
    rows = []
    for r in ours.to_dict("records"):
        k = BNWN_REBUTTAL.get((r["head"], r["variant"]))
        hit = reb[(reb["table"] == k[0]) & (reb["setting"] == k[1])] if k else pd.DataFrame()
        h = hit.iloc[0] if len(hit) else None
        rows.append({**{c: r[c] for c in ("head", "variant", *BNWN_METRICS, "runs", "failed")},
                     "rebuttal R@1": float(h["R@1"]) if h is not None else np.nan,
                     "rebuttal NMI": float(h["NMI"]) if h is not None else np.nan,
                     "rebuttal F1": float(h["F1"]) if h is not None else np.nan,
                     "rebuttal norm var": float(h["mean_norm_var"]) if h is not None else np.nan})
    return pd.DataFrame(rows).rename(columns={"train_norm_var": "norm var (train)"})


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
        out = {"estimate": float(r["diff"]), "ci_lo": float(r["ci_lo"]), "ci_hi": float(r["ci_hi"]),
               "n": int(r["n_pairs"]), "p_value": float(r["p_value"]), "rebuttal": float(r["rebuttal_diff"]),
               "mean_none": float(r["mean none"]), "mean_sec": float(r["mean sec"])}
    out["verdict"] = report.verdict(out["estimate"], out["ci_lo"], out["ci_hi"], expected_sign, n=out["n"])
    return out


def page_reading(runs: pd.DataFrame) -> str:
    """The page's closing bullets: SEC with BatchNorm right before the normalization and with
    WeightNorm (:func:`head_effect`, against the rebuttal), and whether BN there lowers the norm variance."""
    bn = head_effect(runs, "bn_before_norm", -1)
    wn = head_effect(runs, "weightnorm", +1)
    fam = report.adjust_family([{**bn, "expected_sign": -1, "margin": report.MARGINS["R@1"]},
                                {**wn, "expected_sign": +1, "margin": report.MARGINS["R@1"]}])
    for d, (p_adj, v) in zip((bn, wn), zip(fam["p_adj"], fam["verdict"])):   # the chapter is one Holm family
        d["p_adj"], d["verdict"] = p_adj, v
        d["mde"] = mde_from_ci(d["ci_lo"], d["ci_hi"], d["n"])
    var = runs.groupby(["head", "variant"])["train_norm_var"].mean()
    return (
        f"- **BN before the normalization**: SEC changes R@1 by {fmt_estimate(bn)} points here "
        f"(paired t-test, Holm-adjusted p = {bn['p_adj']:.2g}, could detect ≥ {bn['mde']:.2f}, n = {bn['n']} seeds); in the rebuttal it changed by {bn['rebuttal']:+.2f}. "
        f"Verdict for *SEC hurts with BN before the normalization*: **{bn['verdict']}**"
        + (f" (a drop of {abs(bn['estimate']):.2f} points against the rebuttal's {abs(bn['rebuttal']):.2f})."
           if bn['estimate'] < 0 else ".")
        + f"\n- **WeightNorm**: SEC changes R@1 by {fmt_estimate(wn)} points (Holm-adjusted p = {wn['p_adj']:.2g}, could detect ≥ {wn['mde']:.2f}; rebuttal "
        f"{wn['rebuttal']:+.2f}). Verdict for *SEC still helps with WeightNorm*: **{wn['verdict']}**."
        + (f"\n- Without SEC, the training norm variance with BatchNorm right before the normalization is "
           f"{var[('bn_before_norm', 'none')]:.3g}, against {var[('paper', 'none')]:.3g} with the paper's head "
           f"({'lower' if var[('bn_before_norm', 'none')] < var[('paper', 'none')] else 'not lower'})."
           if ('bn_before_norm', 'none') in var and ('paper', 'none') in var else ""))
