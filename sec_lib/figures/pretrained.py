"""Figures of the pretrained page: the regime interaction in R@1 with its intervals (:func:`interaction_figure`),
and the batch's norm, CV and gradient-vs-norm slope over training, fine-tuned beside from scratch. Built from
:func:`sec_lib.chapters.pretrained.interaction_rows` and :func:`~sec_lib.chapters.pretrained.trajectories` (they
take frames, never load)."""
from __future__ import annotations

from typing import Sequence

import pandas as pd
import numpy as np
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


#: Marker and colour of each part of :func:`interaction_figure` (the interaction drawn filled and darkest).
PART_STYLES = {"SEC − none, fine-tuned": ("o", "#1f77b4"), "SEC − none, from scratch": ("s", "#9ecae1"),
               "interaction": ("D", "#d62728")}


@styled
def interaction_figure(rows: pd.DataFrame, unit: str = "R@1 points") -> Figure:
    """The regime interaction as paired differences around 0: one band per loss (and the mean over the losses, last
    and bold), with SEC − none fine-tuned, SEC − none from scratch and their difference, each a mean over seeds with
    its 95% interval. The axis fits the intervals and always holds 0."""
    need(rows, ["loss", "part", "estimate", "ci_lo", "ci_hi"], "interaction rows")
    losses = list(dict.fromkeys(rows["loss"]))
    parts = [p for p in PART_STYLES if p in set(rows["part"])]
    fig = Figure(figsize=(7.0, 0.75 + 0.62 * len(losses)), layout="constrained")
    ax = fig.add_subplot()
    step = 0.24
    for j, part in enumerate(parts):
        marker, colour = PART_STYLES[part]
        sub = rows[rows["part"] == part].set_index("loss").reindex(losses)
        y = np.arange(len(losses))[::-1] + (1 - j) * step
        err = np.vstack([sub["estimate"] - sub["ci_lo"], sub["ci_hi"] - sub["estimate"]])
        ax.errorbar(sub["estimate"], y, xerr=np.where(np.isfinite(err), err, 0), fmt=marker, color=colour,
                    ms=6 if part == "interaction" else 5, capsize=2.5, lw=1.4, label=part)
    ax.axvline(0, color="#555555", lw=0.9)
    ax.set_yticks(np.arange(len(losses))[::-1], losses)
    for tick, loss in zip(ax.get_yticklabels(), losses):
        tick.set_fontweight("bold" if loss == losses[-1] else "normal")
    lo = np.nanmin(rows["ci_lo"].to_numpy(float), initial=0.0)
    hi = np.nanmax(rows["ci_hi"].to_numpy(float), initial=0.0)
    pad = 0.08 * max(hi - lo, 1e-9)
    ax.set_xlim(min(lo, 0.0) - pad, max(hi, 0.0) + pad)
    ax.set_ylim(-0.6, len(losses) - 0.4)
    ax.set_xlabel(f"difference in {unit} (mean over seeds, 95% interval)")
    fig.legend(*ax.get_legend_handles_labels(), loc="outside upper center", ncols=len(parts), fontsize=9, frameon=False)
    return fig
