"""The convergence page's figure of C4L (:mod:`sec_lib.runs.longruns`): per comparison, how much the gap changed
from the tier's run length to the longer one, each seed's change (dots) and their mean with its 95% interval,
around 0, with the registered margin shaded."""
from __future__ import annotations

import numpy as np
import pandas as pd

from .palette import REF_COLOR, variant_color
from .style import BOOK_WIDTH, fig_ax, need, style

__all__ = ["delta_figure", "delta_caption"]


def delta_figure(deltas: pd.DataFrame, family: pd.DataFrame, margin: float, lengths: tuple = (13500, 20250),
                 ax=None, width: float = BOOK_WIDTH * 0.8):
    """One row per comparison (``family``'s order): each seed's Δ (hollow dots, ``deltas``: columns comparison, seed,
    delta) and the mean with its 95% interval (filled dot and whisker, ``family``: columns comparison, delta, lo,
    hi, verdict), around a vertical line at 0, with the band ±``margin`` shaded and labelled. The x axis spans
    every seed, every interval, 0 and the band, with a margin. ``lengths``: the two run lengths Δ compares. Each
    comparison's artists carry gids 'seeds: <comparison>', 'mean: <comparison>' and 'interval: <comparison>'."""
    need(deltas, ["comparison", "seed", "delta"], "deltas")
    need(family, ["comparison", "delta", "lo", "hi", "verdict"], "family")
    if not np.isfinite(margin) or margin <= 0:
        raise ValueError(f"margin must be a positive number of R@1 points, got {margin!r}")
    if not len(family):
        raise ValueError("family is empty: there is no comparison to draw")
    names = list(family["comparison"])
    extra = sorted(set(deltas["comparison"]) - set(names))
    if extra:
        raise ValueError(f"deltas has comparison(s) {extra} that family lacks; valid: {', '.join(names)}")
    short, long = (f"{int(x):,}" for x in lengths)
    with style():
        fig, ax = fig_ax(ax, (width, 0.9 + 0.75 * len(names)))
        band = ax.axvspan(-margin, margin, color="0.88", zorder=0, lw=0,
                          label=f"±{margin:g} R@1 points: stable if the interval lies inside")
        ax.axvline(0, color=REF_COLOR, lw=1.0, zorder=1)
        color = variant_color("sec")
        for y, r in enumerate(family.itertuples(index=False)):
            d = deltas.loc[deltas["comparison"] == r.comparison].sort_values("seed")
            off = np.linspace(-0.18, 0.18, len(d)) if len(d) > 1 else np.zeros(len(d))
            ax.plot(d["delta"].to_numpy(float), y + 0.22 + off, ls="", marker="o", ms=5, mfc="white", mec="0.35",
                    zorder=3, label="one seed (mean over the losses)" if y == 0 else "_",
                    gid=f"seeds: {r.comparison}")
            bar = ax.errorbar([r.delta], [y - 0.12], xerr=[[r.delta - r.lo], [r.hi - r.delta]], fmt="o", color=color,
                        ms=7, capsize=4, elinewidth=1.8, zorder=4, label="mean and 95% interval" if y == 0 else "_")
            bar.lines[0].set_gid(f"mean: {r.comparison}")
            bar.lines[2][0].set_gid(f"interval: {r.comparison}")
        vals = np.concatenate([deltas["delta"].to_numpy(float), family[["delta", "lo", "hi"]].to_numpy(float).ravel(),
                               [0.0, -margin, margin]])
        vals = vals[np.isfinite(vals)]
        lo, hi = float(vals.min()), float(vals.max())
        pad = 0.08 * ((hi - lo) or 1.0)
        ax.set_xlim(lo - pad, hi + pad)
        ax.set_yticks(range(len(names)), [f"{n}\n({v})" for n, v in zip(names, family["verdict"])])
        ax.set_ylim(len(names) - 0.45, -0.65)
        ax.grid(axis="y", visible=False)
        ax.set_xlabel(f"Δ: gap at {long} − gap at {short} iterations [R@1 points]", loc="right")
        fig.suptitle(f"How much each gap moved from {short} to {long} iterations", fontsize=10.5)
        handles, labels = ax.get_legend_handles_labels()
        order = sorted(range(len(handles)), key=lambda i: handles[i] is not band)     # the band's label first
        fig.legend([handles[i] for i in order], [labels[i] for i in order], loc="outside lower center", ncol=2,
                   fontsize=9)
    return fig


def delta_caption(margin: float, lengths: tuple = (13500, 20250)) -> str:
    """The caption of :func:`delta_figure` (plain text: the notebook's figure metadata holds it)."""
    short, long = (f"{int(x):,}" for x in lengths)
    return (f"Has the gap stopped moving? For SEC − none and SEC − L2-reg, Δ is the gap at {long} iterations minus "
            f"the gap at {short}, paired by loss and seed. Hollow dots: each seed's Δ, the mean over the four losses; "
            f"filled dot and whisker: their mean and its 95% Student-t interval. The shaded band is ±{margin:g} R@1 "
            f"points: the gap counts as stable if the interval lies inside it, as still moving if the interval "
            f"excludes 0 and the mean lies outside it, and as undecided otherwise (the verdict under each name). The "
            f"axis spans the dots, the intervals, 0 and the band.")
