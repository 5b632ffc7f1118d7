"""The tiers page's figure: the learning-rate pilot's held-out curves behind the run length."""
from __future__ import annotations

import matplotlib.cm as cm
import numpy as np
import pandas as pd

from .style import BOOK_WIDTH, fig_ax, need, styled


@styled
def pilot_curves(curves: pd.DataFrame, chosen_lr: float | None = None, length: int | None = None, ax=None):
    """Held-out R@1 against step for each pilot learning rate: the raw evaluations thin, their trailing
    mean (the curve the run-length rule reads) thick; the chosen rate drawn darkest, the chosen
    length as a vertical line. The y axis is R@1 in %, linear."""
    need(curves, ["lr", "step", "R@1", "smoothed"], "pilot curves")
    fig, ax = fig_ax(ax, (BOOK_WIDTH * 0.7, 3.2))
    lrs = sorted(curves["lr"].unique())
    shades = cm.Greys(np.linspace(0.35, 0.75, max(len(lrs), 1)))
    for lr, shade in zip(lrs, shades):
        sub = curves[curves["lr"] == lr].sort_values("step")
        chosen = chosen_lr is not None and bool(np.isclose(lr, chosen_lr))
        color = "#D55E00" if chosen else shade
        ax.plot(sub["step"], sub["R@1"], color=color, lw=0.6, alpha=0.6)
        ax.plot(sub["step"], sub["smoothed"], color=color, lw=1.8, label=f"lr {lr:g}" + (" (chosen)" if chosen else ""))
    if length is not None:
        ax.axvline(length, color="#0072B2", lw=1.0, ls="--", label=f"run length {length}")
    ax.set_xlabel("training step")
    ax.set_ylabel("held-out R@1 (%)")
    ax.legend(fontsize=8, loc="lower center", ncol=2)
    return fig
