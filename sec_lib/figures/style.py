"""The one figure factory of the book: its matplotlib style, figure sizes and shared drawing helpers.

Every figure is a ``matplotlib.figure.Figure`` built without pyplot (no global state, nothing shown
twice), made by :func:`figure` or :func:`subplots` inside :func:`style`. Colours are in
:mod:`sec_lib.figures.palette`.
"""
from __future__ import annotations

import contextlib
import functools
from typing import Mapping, Sequence

import matplotlib
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib import ticker
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, LogLocator

from .palette import LOSS_MARKERS, VARIANT_LABELS, variant_color

#: Figure width that fits the book's text column (inches): 780 px at :data:`DPI`, no wider than the
#: column at a 1,400 px window, so a figure is shown at its own size and 9 pt stays 9 pt.
BOOK_WIDTH = 7.8
DPI = 100
#: The book's text sizes: nothing below 9 pt at the figure's own size (figures are drawn at most one
#: column wide, so this is also their size on the page).
MIN_FONT_PT = 9
_RC = {
    "font.size": 10, "axes.titlesize": 10.5, "axes.labelsize": 10, "legend.fontsize": 9,
    "legend.title_fontsize": 9, "xtick.labelsize": 9, "ytick.labelsize": 9, "figure.titlesize": 11,
    "axes.spines.top": False, "axes.spines.right": False, "axes.grid": True, "grid.alpha": 0.3,
    "grid.linewidth": 0.6, "lines.linewidth": 1.3, "legend.frameon": False, "image.interpolation": "nearest",
    # titles sit just above their axes, where matplotlib would put them: no figure has x tick labels on top, and
    # without this matplotlib measures every axis's tick labels on every draw to check (the same pixels, about a
    # tenth faster: the explorer draws two dozen eight-panel figures)
    "axes.titley": 1.0,
}


def rc() -> dict:
    """The book's matplotlib settings: seaborn's "whitegrid" theme at its "paper" scale, then the
    book's own sizes and details (:data:`_RC`). Colours stay the book's (:mod:`.palette`)."""
    return {**sns.axes_style("whitegrid"), **sns.plotting_context("paper"), **_RC}


@contextlib.contextmanager
def style():
    """The book's style (seaborn's theme + :data:`_RC`), for the duration of a ``with`` block only."""
    with matplotlib.rc_context(rc()):
        yield


def figure(w: float, h: float, layout: str | None = "constrained") -> Figure:
    """A new Figure of ``w`` × ``h`` inches at the book's resolution (the one figure factory).

    No figure is wider than :data:`BOOK_WIDTH`: a wider request is narrowed to it (the height is
    kept), so the page never shrinks a figure and its text below :data:`MIN_FONT_PT`."""
    return Figure(figsize=(min(float(w), BOOK_WIDTH), h), dpi=DPI, layout=layout)


def fig_ax(ax, size=(BOOK_WIDTH * 0.62, 3.0)):
    if ax is not None:
        return ax.figure, ax
    fig = figure(*size)
    return fig, fig.subplots()


def fig_axes(axes, n, size):
    if axes is not None:
        axes = list(np.ravel(axes))
        if len(axes) != n:
            raise ValueError(f"axes must hold {n} Axes, got {len(axes)}")
        return axes[0].figure, axes
    fig = figure(*size)
    return fig, list(np.ravel(fig.subplots(1, n)))


def need(df: pd.DataFrame, cols: Sequence[str], name: str) -> pd.DataFrame:
    if not isinstance(df, pd.DataFrame):
        raise ValueError(f"{name} must be a pandas DataFrame, got {type(df).__name__}")
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise ValueError(f"{name} lacks column(s) {missing}; it has {list(df.columns)}")
    return df


def by_key(df: pd.DataFrame, labels: Mapping | None):
    """(label, sub-frame sorted by step) per run key; the label is '' for a single run."""
    if "key" not in df.columns:
        yield "", df.sort_values("step") if "step" in df.columns else df
        return
    keys = list(dict.fromkeys(df["key"]))
    for k in keys:
        sub = df[df["key"] == k]
        if "step" in sub.columns:
            sub = sub.sort_values("step")
        lab = (labels or {}).get(k, str(k) if len(keys) > 1 else "")
        yield lab, sub


def smooth(y: pd.Series) -> pd.Series:
    w = max(1, len(y) // 25)
    return y.rolling(w, center=True, min_periods=1).mean() if w > 1 else y


def draw_line(ax, x, y, label, color=None, smoothed=True):
    """A thin raw line plus its rolling mean (when there are many steps)."""
    y = pd.Series(np.asarray(y, float))
    if smoothed and len(y) > 50:
        base = ax.plot(x, y, lw=0.6, alpha=0.35, color=color)[0]
        return ax.plot(x, smooth(y), color=base.get_color(), label=label)[0]
    return ax.plot(x, y, color=color, label=label, marker="." if len(y) <= 12 else None)[0]


def log_ticks(ax):
    """Readable tick labels on log axes: plain numbers, and linear-spaced ticks when the data
    span less than a decade (the default labels every minor tick there and they overlap)."""
    for axis, lim in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
        if axis.get_scale() != "log":
            continue
        lo, hi = sorted(lim)
        if lo > 0 and hi / lo < 10:
            axis.set_major_locator(ticker.MaxNLocator(nbins=4))
            axis.set_minor_locator(ticker.NullLocator())
            axis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:.3g}"))
        axis.set_minor_formatter(ticker.NullFormatter())


def empty_panel(ax, text: str):
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, fontsize=9, color="0.4")


def finish_legend(ax, **kw):
    handles, labels = ax.get_legend_handles_labels()
    if any(lab and not lab.startswith("_") for lab in labels):
        ax.legend(**kw)


def legend_handles(variants=(), losses=(), line: bool = False):
    h = [Line2D([], [], ls="-" if line else "", marker=None if line else "o", color=variant_color(v),
                label=VARIANT_LABELS.get(v, v)) for v in variants]
    h += [Line2D([], [], ls="", marker=LOSS_MARKERS.get(l, "o"), color="0.3", mfc="none", label=l) for l in losses]
    return h


def styled(fn):
    """Build the figure inside the book's style context (:func:`style`)."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with style():
            return fn(*args, **kwargs)
    return wrapper


def subplots(nrows: int = 1, ncols: int = 1, w: float = 4.2, h: float = 3.2, **kw):
    """A Figure with an ``nrows`` × ``ncols`` grid of Axes (always 2-D), at most one book width wide."""
    w = min(w, BOOK_WIDTH / ncols)
    fig = figure(w * ncols, h * nrows)
    axes = fig.subplots(nrows, ncols, squeeze=False, **kw)
    return fig, axes


def plain_log_ticks(ax, which: str = "xy") -> None:
    """Tick labels like 0.4 or 2 instead of 4×10⁻¹ on log axes (minor ticks labelled only if there
    is no major tick in range)."""
    fmt = FuncFormatter(lambda v, _: f"{v:g}")
    for axis in ([ax.xaxis] if "x" in which else []) + ([ax.yaxis] if "y" in which else []):
        axis.set_major_formatter(fmt)
        axis.set_minor_locator(LogLocator(subs=(2.0, 5.0)))
        axis.set_minor_formatter(fmt)


def err_bars(sub: pd.DataFrame):
    """Asymmetric error bars from mean/ci_lo/ci_hi (0 where the CI is undefined)."""
    lo = (sub["mean"] - sub["ci_lo"]).fillna(0).clip(lower=0).to_numpy(float)
    hi = (sub["ci_hi"] - sub["mean"]).fillna(0).clip(lower=0).to_numpy(float)
    return np.vstack([lo, hi])


def loss_measure_grid(traj: pd.DataFrame, rows: Sequence[str], draw, ylabel, h: float = 2.2,
                      label_size: int = 9):
    """A grid of trajectories: one column per loss of ``traj``, one row per measure in ``rows``, a shared
    iteration axis. ``draw(ax, sub, col)`` draws one panel's lines (``sub``: the loss's rows); ``ylabel(col)``
    names a row. The batch's mean norm (``norm_mean``) goes on a log axis when positive (the arms differ by
    decades). Returns ``(fig, axes)``."""
    losses = list(dict.fromkeys(traj["loss"]))
    fig, axes = subplots(len(rows), len(losses), w=3.0, h=h, sharex=True)
    for j, loss in enumerate(losses):
        sub = traj[traj["loss"] == loss]
        for i, col in enumerate(rows):
            ax = axes[i][j]
            draw(ax, sub, col)
            if col == "norm_mean" and (sub[col].dropna() > 0).all():
                ax.set_yscale("log")
                plain_log_ticks(ax, "y")
            if i == 0:
                ax.set_title(loss)
            ax.tick_params(labelsize=label_size)
            if j == 0:
                ax.set_ylabel(ylabel(col), fontsize=label_size)
            if i == len(rows) - 1:
                ax.set_xlabel("iteration")
    return fig, axes
