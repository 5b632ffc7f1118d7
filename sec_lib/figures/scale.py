"""Figures of the scale page ("Shrink or equalize?"): the arms' scale, CV and step-size trajectories,
and R@1 per arm. Built from the tables of :mod:`sec_lib.chapters.scale` (each figure takes frames, never loads)."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from .. import report
from .palette import METRIC_LABELS, STEP_LABELS, VARIANT_COLORS
from .style import loss_measure_grid, need, styled, subplots

#: The rows of :func:`trajectory_figure`: the batch's mean norm (log axis), its CV, the mean Δθ.
ROWS = ("norm_mean", "norm_cv", "dtheta_mean")


@styled
def trajectory_figure(traj: pd.DataFrame, rows: Sequence[str] = ROWS) -> Figure:
    """One column per loss, one row per measure of ``traj`` (:func:`sec_lib.chapters.scale.trajectories`: mean
    over seeds per loss × arm × step); one line per arm in its variant colour. The mean norm is on a log axis:
    the arms differ by decades."""
    need(traj, ["loss", "variant", "arm", "step", *rows], "trajectories")

    def draw(ax, sub, col):
        for (variant, arm), t in sub.groupby(["variant", "arm"], sort=False):
            t = t.dropna(subset=[col])
            ax.plot(t["step"], t[col], color=VARIANT_COLORS.get(variant, "#000000"), lw=1.3, label=arm)
    fig, axes = loss_measure_grid(traj, rows, draw, lambda col: STEP_LABELS.get(col, col), h=2.3, label_size=8)
    handles, labels = axes[0][0].get_legend_handles_labels()     # below the grid: inside a panel it hid the lines
    fig.legend(handles, labels, loc="outside lower center", ncols=min(len(labels), 6), fontsize=8)
    return fig


@styled
def arm_figure(runs: pd.DataFrame, order: Sequence[str], metric: str = "R@1") -> Figure:
    """Per loss: ``metric`` per arm (rows in ``order``, the page's arm names), mean ± 95% CI over seeds, the seeds
    as dots; the dotted line marks the run without a regularizer."""
    need(runs, ["loss", "arm", "variant", metric], "runs")
    losses = list(dict.fromkeys(runs["loss"]))
    fig, axes = subplots(1, len(losses), w=3.2, h=2.8, sharey=True)
    colors = dict(zip(runs["arm"], runs["variant"].map(lambda v: VARIANT_COLORS.get(v, "#000000"))))
    for ax, loss in zip(axes[0], losses):
        sub = runs[runs["loss"] == loss]
        s = report.summarize(sub, ["arm"], [metric]).set_index("arm")
        for y, arm in enumerate(order):
            if arm not in s.index:
                continue
            r = s.loc[arm]
            err = [[max(r["mean"] - r["ci_lo"], 0) if np.isfinite(r["ci_lo"]) else 0],
                   [max(r["ci_hi"] - r["mean"], 0) if np.isfinite(r["ci_hi"]) else 0]]
            ax.errorbar([r["mean"]], [y], xerr=err, fmt="o", color=colors[arm], capsize=3)
            pts = sub.loc[sub["arm"] == arm, metric].astype(float)
            ax.scatter(pts, [y] * len(pts), s=10, color=colors[arm], alpha=0.4, lw=0)
        if "none" in s.index:
            ax.axvline(s.loc["none", "mean"], color=VARIANT_COLORS["none"], ls=":", lw=1)
        ax.set_yticks(range(len(order)), list(order))
        ax.set_xlabel(METRIC_LABELS.get(metric, metric))
        ax.set_title(loss)
    axes[0][0].invert_yaxis()
    return fig
