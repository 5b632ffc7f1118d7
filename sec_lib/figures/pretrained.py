"""Figures of the pretrained page: the batch's norm, CV and gradient-vs-norm slope over training, fine-tuned
beside from scratch. Built from :func:`sec_lib.chapters.pretrained.trajectories` (takes frames, never loads)."""
from __future__ import annotations

from typing import Sequence

import pandas as pd
from matplotlib.figure import Figure

from .palette import STEP_LABELS, VARIANT_COLORS, VARIANT_LABELS
from .style import loss_measure_grid, need, styled

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

    def draw(ax, sub, col):
        for (regime, variant), t in sub.groupby(["regime", "variant"], sort=False):
            t = t.sort_values("step").dropna(subset=[col])
            ax.plot(t["step"], t[col].rolling(window, min_periods=1).mean(),
                    color=VARIANT_COLORS.get(variant, "#000000"), ls=REGIME_STYLES.get(regime, "--"), lw=1.2,
                    label=f"{VARIANT_LABELS.get(variant, variant)}, {regime}")
    fig, axes = loss_measure_grid(traj, rows, draw, lambda col: ROW_LABELS.get(col, STEP_LABELS.get(col, col)))
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=3, fontsize=9)
    return fig
