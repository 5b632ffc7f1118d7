"""Figures of the pretrained page (issue 24): the batch's norm, CV and gradient-vs-norm slope over training, fine-tuned
beside from scratch. Built from :func:`sec_lib.chapters.pretrained.trajectories` (takes frames, never loads)."""
from __future__ import annotations

from typing import Sequence

import pandas as pd
from matplotlib.figure import Figure

from .palette import STEP_LABELS, VARIANT_COLORS, VARIANT_LABELS
from .style import need, plain_log_ticks, styled, subplots

#: The rows of :func:`trajectory_figure`: the batch's mean norm (log axis), its CV, the gradient-vs-norm slope.
ROWS = ("norm_mean", "norm_cv", "grad_slope")
#: Line style per regime (colour: the variant).
REGIME_STYLES = {"fine-tuned": "-", "from scratch": ":"}
#: Short axis labels (the caption gives the full names).
ROW_LABELS = {"norm_mean": "mean ‖f‖ in the batch", "norm_cv": "CV of ‖f‖ in the batch",
              "grad_slope": "gradient-vs-norm slope"}


@styled
def trajectory_figure(traj: pd.DataFrame, rows: Sequence[str] = ROWS, window: int = 10) -> Figure:
    """One column per loss, one row per measure of ``traj`` (mean over seeds per regime × loss × variant × step);
    colour: the variant, solid fine-tuned, dotted from scratch. Each line is a trailing mean over ``window`` logged
    steps (the per-step slope is a noisy fit)."""
    need(traj, ["regime", "loss", "variant", "step", *rows], "trajectories")
    if window < 1:
        raise ValueError(f"window = {window!r} is not valid; expected an integer >= 1")
    losses = list(dict.fromkeys(traj["loss"]))
    fig, axes = subplots(len(rows), len(losses), w=3.0, h=2.2, sharex=True)
    for j, loss in enumerate(losses):
        sub = traj[traj["loss"] == loss]
        for i, col in enumerate(rows):
            ax = axes[i][j]
            for (regime, variant), t in sub.groupby(["regime", "variant"], sort=False):
                t = t.sort_values("step").dropna(subset=[col])
                ax.plot(t["step"], t[col].rolling(window, min_periods=1).mean(),
                        color=VARIANT_COLORS.get(variant, "#000000"), ls=REGIME_STYLES.get(regime, "--"), lw=1.2,
                        label=f"{VARIANT_LABELS.get(variant, variant)}, {regime}")
            if col == "norm_mean" and (sub[col].dropna() > 0).all():
                ax.set_yscale("log")
                plain_log_ticks(ax, "y")
            if i == 0:
                ax.set_title(loss)
            ax.tick_params(labelsize=9)
            if j == 0:
                ax.set_ylabel(ROW_LABELS.get(col, STEP_LABELS.get(col, col)), fontsize=9)
            if i == len(rows) - 1:
                ax.set_xlabel("iteration")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=3, fontsize=9)
    return fig
