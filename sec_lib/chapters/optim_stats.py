"""The optim page's statistics on SEC − none, shared by the page (:mod:`sec_lib.chapters.optim`) and its registered
follow-ups (:mod:`sec_lib.chapters.optim_followups`): the paired difference per optimizer × loss, the average over the
losses per seed, and the sentence for what that average spans. Both modules import from here, so the follow-ups do
not import the page."""
from __future__ import annotations

import numpy as np
import pandas as pd

from .. import report
from ..report import one_family, pooled_diff, with_verdict
from .common import name_means, paired, verdict_row_of

__all__ = ["optim_diffs", "optim_pooled", "pooled_over", "left_out"]


def optim_diffs(runs: pd.DataFrame, metric: str = "R@1") -> pd.DataFrame:
    """Paired SEC − none per optimizer × loss with its verdict (expected sign +1). A loss whose runs of one arm all
    failed has no pair and no row (:func:`sec_lib.chapters.optim.failures_sentence` says so)."""
    d = paired(runs, ["optimizer", "loss"], "variant", "none", "sec", [metric])
    if len(d) and "status" in runs.columns:
        bad = runs[runs["status"].astype(str) != "done"]
        failed = set(zip(bad["optimizer"], bad["loss"]))
        hit = np.array([(o, lo) in failed for o, lo in zip(d["optimizer"], d["loss"])], dtype=bool)
        d = d[~((d["n"] == 0).to_numpy() & hit)]
    return name_means(with_verdict(d.reset_index(drop=True), +1), "none", "sec")


def pooled_over(row) -> str:
    """What a pooled row (:func:`optim_pooled`'s) averages, for the page's verdict bullets: 'each the mean over N
    losses', and the losses it left out because a run failed."""
    left = row.get("left out") or ""
    return f"each the mean over {int(row['n_losses'])} losses" + (f"; {left} left out: a run failed" if left else "")


def left_out(estimate: dict) -> str:
    """The losses a pooled estimate left out because a run failed (:func:`~sec_lib.report.pooled_diff`)."""
    return ", ".join(str(g) for g in estimate.get("excluded", []))


def optim_pooled(runs: pd.DataFrame, metric: str = "R@1") -> pd.DataFrame:
    """Per optimizer: SEC − none averaged over the losses per seed, mean ± CI over seeds (n = seeds),
    as verdict rows (expected sign +1) taken as a family of their own; the page's one family is
    :func:`sec_lib.chapters.optim.optim_family`."""
    rows = []
    for opt, sub in runs.groupby("optimizer", sort=False):
        e = pooled_diff(sub, "variant", "none", "sec", metric)
        rows.append({"optimizer": opt, "metric": metric,
                     **verdict_row_of(e, +1, report.MARGINS.get(metric)), "n_losses": e.get("n_groups", 0),
                     "left out": left_out(e)})
    return one_family(pd.DataFrame(rows))[0] if rows else pd.DataFrame(rows)
