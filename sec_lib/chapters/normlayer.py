"""The normalize-layer page: SEC on the pre-normalization features of a head that ends in an explicit
normalize layer."""
from __future__ import annotations

from typing import Sequence

import pandas as pd

from ..report import summary_table
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
    since every loss already normalizes) and SEC − none (per head; expected: a gain)."""
    parts = []
    for variant in ("none", "sec"):
        d = paired(runs[runs["variant"] == variant], [], "head", "paper", "normalize", metrics)
        if len(d):
            parts.append(name_means(with_verdict(d, 0), "baseline", "compared")
                         .assign(comparison=f"normalize − paper head ({variant})"))
    for head in ("paper", "normalize"):
        d = paired(runs[runs["head"] == head], [], "variant", "none", "sec", metrics)
        if len(d):
            parts.append(name_means(with_verdict(d, +1), "baseline", "compared")
                         .assign(comparison=f"SEC − none ({head} head)"))
    if not parts:
        return pd.DataFrame(columns=["comparison", "metric", "diff", "ci_lo", "ci_hi", "p_value", "n_pairs", "verdict"])
    out = pd.concat(parts, ignore_index=True)
    return out[["comparison", *[c for c in out.columns if c != "comparison"]]]
