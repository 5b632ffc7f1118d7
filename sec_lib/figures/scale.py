"""Figures of the scale page ("Shrink or equalize?"): the arms' scale, CV and step-size trajectories,
and R@1 per arm. Built from the tables of :mod:`sec_lib.chapters.scale` (each figure takes frames, never loads)."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd
from matplotlib import ticker
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


#: An arm is drawn beside a panel's axis, not on it, when taking it in would make the axis this many times wider
#: than the other arms need.
OFF_AXIS_STRETCH = 4.0


def arm_extents(sub: pd.DataFrame, s: pd.DataFrame, metric: str) -> dict:
    """{arm: (lo, hi)}: what each arm of one loss puts on the axis, its 95% interval and its seeds."""
    out = {}
    for arm, r in s.iterrows():
        vals = [r["mean"], r["ci_lo"], r["ci_hi"], *sub.loc[sub["arm"] == arm, metric].astype(float)]
        vals = [v for v in vals if np.isfinite(v)]
        if vals:
            out[arm] = (min(vals), max(vals))
    return out


def _span(ext: dict) -> float:
    return max(h for _, h in ext.values()) - min(l for l, _ in ext.values())


def off_axis_arms(extents: dict, stretch: float = OFF_AXIS_STRETCH) -> list:
    """The arms to draw beside the axis, from ``extents`` ({arm: (lo, hi)}): repeatedly the lowest arm, the highest,
    or both, whichever leaves the narrowest range, where each one taken out would widen the range of the arms left
    more than ``stretch`` times. At least two arms stay on the axis."""
    ext = dict(extents)
    out: list = []
    while len(ext) > 2:
        lowest = min(ext, key=lambda a: ext[a][0])
        highest = max(ext, key=lambda a: ext[a][1])
        options = [(lowest,), (highest,)] + ([(lowest, highest)] if len(ext) > 3 and lowest != highest else [])

        def far(arms):
            rest = {k: v for k, v in ext.items() if k not in arms}
            return all(_span({**rest, a: ext[a]}) > stretch * max(_span(rest), 1e-9) for a in arms)
        good = [o for o in options if far(o)]
        if not good:
            break
        best = min(good, key=lambda o: _span({k: v for k, v in ext.items() if k not in o}))
        out += list(best)
        ext = {k: v for k, v in ext.items() if k not in best}
    return out


@styled
def arm_figure(runs: pd.DataFrame, order: Sequence[str], metric: str = "R@1") -> Figure:
    """Per loss: ``metric`` per arm (rows in ``order``, the page's arm names), mean ± 95% CI over seeds, the seeds
    as dots; the dotted line marks the run without a regularizer. Each panel's axis fits its own arms; an arm so far
    from the others that it would flatten them (:func:`off_axis_arms`) is drawn as an arrow at the panel's edge,
    pointing its way, with its mean."""
    need(runs, ["loss", "arm", "variant", metric], "runs")
    losses = list(dict.fromkeys(runs["loss"]))
    fig, axes = subplots(1, len(losses), w=3.2, h=2.8, sharey=True)
    colors = dict(zip(runs["arm"], runs["variant"].map(lambda v: VARIANT_COLORS.get(v, "#000000"))))
    for ax, loss in zip(axes[0], losses):
        sub = runs[runs["loss"] == loss]
        s = report.summarize(sub, ["arm"], [metric]).set_index("arm")
        s = s[s.index.isin(order)]
        ext = arm_extents(sub, s, metric)
        away = off_axis_arms(ext)
        kept = [ext[a] for a in ext if a not in away]
        lo, hi = min(l for l, _ in kept), max(h for _, h in kept)
        pad = 0.08 * (hi - lo or 1.0)
        ax.set_xlim(lo - pad, hi + pad)
        for y, arm in enumerate(order):
            if arm not in s.index:
                continue
            r = s.loc[arm]
            if arm in away:
                _arrow_at_edge(ax, r["mean"], y, colors[arm], left=r["mean"] < lo)
                continue
            err = [[max(r["mean"] - r["ci_lo"], 0) if np.isfinite(r["ci_lo"]) else 0],
                   [max(r["ci_hi"] - r["mean"], 0) if np.isfinite(r["ci_hi"]) else 0]]
            ax.errorbar([r["mean"]], [y], xerr=err, fmt="o", color=colors[arm], capsize=3)
            pts = sub.loc[sub["arm"] == arm, metric].astype(float)
            ax.scatter(pts, [y] * len(pts), s=10, color=colors[arm], alpha=0.4, lw=0)
        if "none" in s.index and "none" not in away:
            ax.axvline(s.loc["none", "mean"], color=VARIANT_COLORS["none"], ls=":", lw=1)
        ax.xaxis.set_major_locator(ticker.MaxNLocator(nbins=4))
        ax.set_yticks(range(len(order)), list(order))
        ax.set_xlabel(METRIC_LABELS.get(metric, metric))
        ax.set_title(loss)
    axes[0][0].set_ylim(len(order) - 0.5, -0.5)
    return fig


def _arrow_at_edge(ax, value: float, y: float, color: str, left: bool) -> None:
    """An arm off the axis: an arrow to the panel's left (or right) edge at row ``y``, with the arm's mean beside it."""
    edge = ax.get_xlim()[0 if left else 1]
    ax.annotate(f"mean {value:.1f}", (edge, y), xytext=(24 if left else -24, 0), textcoords="offset points",
                ha="left" if left else "right", va="center", fontsize=9, color=color,
                bbox=dict(fc="white", ec="none", pad=1.0),
                arrowprops=dict(arrowstyle="-|>", color=color, lw=1.2, shrinkA=2, shrinkB=0))
