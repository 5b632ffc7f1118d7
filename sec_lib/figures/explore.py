"""Figures of the explore page: the six-panel figure of one grid cell (or a live run), its two parts the static
explorer shows apart (the run's four panels, :func:`run_figure`, and the grid's row of its μ and loss,
:func:`grid_row_figure`), and the overview of R@1 and norm variance against η per μ mode."""
from __future__ import annotations

import textwrap
from typing import Sequence

import numpy as np
import pandas as pd

from .palette import eta_label, mu_color, mu_label
from .run import batch_mean_norm, grad_vs_norm, norm_variance, tracked_norms
from .style import BOOK_WIDTH, DPI, empty_panel, figure, style

#: The panels' grid, in inches: each row of two panels is ``PANEL_H`` high, ``ROW_GAP`` apart (a row's x label
#: and the next row's title); ``TOP_IN`` above the first row (the figure's title, one line; each more line adds
#: ``TITLE_LINE_IN``) and ``BOTTOM_IN`` under the last (its x label). Fixed margins, not a layout engine: 2x
#: faster to render, and the panels stay in place while the reader moves the controls.
PANEL_H, ROW_GAP, TOP_IN, BOTTOM_IN, TITLE_LINE_IN = 1.55, 0.86, 0.56, 0.48, 0.18
#: The columns: one text column wide (no page shrinks the figure, so 9 pt stays 9 pt), room on the left for the
#: y labels of the log axes, between the columns for the left column's right-hand CV axis (ticks and label)
#: beside the right column's log ticks and y label, and on the right for the right column's CV axis.
PANEL_COLUMNS = dict(left=0.09, right=0.925, wspace=0.45)
#: The figure's title is wrapped at this many characters (a longer one would run past the figure's edges).
TITLE_CHARS = 100
#: The label of the right-hand CV axes (short: it stays within a panel's height).
CV_LABEL = "CV = std / mean (dashed)"
#: Resolution of the explorer's images: the book's own, so the figure is shown at its size (780 px wide).
CELL_DPI = DPI
#: How the explorer stores its images (:func:`sec_lib.figures.widgets.fig_to_image` options): lossless WebP of
#: a 48-colour palette, which keeps every frequent colour of these figures (a palette of 40 loses the light
#: bands) at about 60 % of the bytes of a 256-colour PNG.
CELL_IMAGE = dict(format="webp", colors=48)
#: Legends inside the panels sit on a white box, so their text stays readable over the data; their rows are
#: packed close (short handles, little spacing) so they hide as little of the data as a 9 pt text allows.
_LEGEND = dict(fontsize=9, loc="best", frameon=True, framealpha=0.85, edgecolor="none", borderpad=0.3,
               labelspacing=0.25, handlelength=1.4, handletextpad=0.4)


def panel_grid(rows: int, title: str = "") -> tuple[tuple, dict, list]:
    """The figure size, the subplots' ``gridspec_kw`` and the wrapped title lines of a figure of ``rows`` rows
    of two panels under ``title``: every such figure has panels of the same size in the same columns, so the
    explorer's parts stacked read as one figure."""
    if not (isinstance(rows, int) and rows >= 1):
        raise ValueError(f"rows = {rows!r} is not valid; expected an integer >= 1")
    lines = textwrap.wrap(title, TITLE_CHARS) if title else []
    top = TOP_IN + TITLE_LINE_IN * max(0, len(lines) - 1)
    height = top + rows * PANEL_H + (rows - 1) * ROW_GAP + BOTTOM_IN
    grid = dict(PANEL_COLUMNS, top=1 - top / height, bottom=BOTTOM_IN / height, hspace=ROW_GAP / PANEL_H)
    return (BOOK_WIDTH, height), grid, lines


def one_run(frames, key: str | None):
    """The steps/tracked/grad_scatter rows of one run key (empty frames when None)."""
    def sel(df):
        if key is None or not len(df) or "key" not in df.columns:
            return df.iloc[0:0] if len(df) else df
        return df[df["key"] == key]
    return sel(frames.steps), sel(frames.tracked), sel(frames.grad_scatter)


def _curve_panel(ax, curve: pd.DataFrame, etas: Sequence[float], eta: float | None, mu: str, live_point=None):
    """R@1 (solid) and NMI (dashed) against η at categorical positions (η = 0 first); the cell ``eta`` marked
    (none marked when None)."""
    pos = {float(e): i for i, e in enumerate(etas)}
    c = mu_color(mu)
    if len(curve):
        d = curve.sort_values("eta")
        x = [pos[float(e)] for e in d["eta"]]
        ax.plot(x, d["R@1"], "-o", color=c, ms=3, label="R@1")
        ax.plot(x, d["NMI"], "--s", color=c, ms=3, alpha=0.7, label="NMI")
        here = d[d["eta"] == float(eta)] if eta is not None else d.iloc[:0]
        if len(here) and here["R@1"].notna().any():
            ax.plot([pos[float(eta)]], here["R@1"], "o", ms=11, mfc="none", mec="k", mew=1.6,
                    label="this cell" if live_point is None else "grid run, same η")
            ax.plot([pos[float(eta)]], here["NMI"], "s", ms=10, mfc="none", mec="k", mew=1.2)
    if live_point is not None:
        x = pos[float(live_point["eta"])]           # live_figure puts the live η on the axis
        ax.plot([x], [live_point["R@1"]], "*", ms=13, color="k", label="live run R@1")
        ax.plot([x], [live_point["NMI"]], "*", ms=10, color="0.45", label="live run NMI")
    _eta_axis(ax, etas, eta)
    ax.set_ylabel("final test metric (%)")
    ax.set_title("R@1 and NMI against η (this μ, loss)")
    if ax.get_legend_handles_labels()[1]:
        ax.legend(**_LEGEND)


def _eta_axis(ax, etas: Sequence[float], eta: float | None) -> None:
    """The categorical η axis (one tick per grid η), with a dotted line at ``eta`` (none when None)."""
    if eta is not None:
        ax.axvline({float(e): i for i, e in enumerate(etas)}.get(float(eta), 0), color="0.6", lw=0.8, ls=":")
    ax.set_xticks(range(len(etas)))
    ax.set_xticklabels([eta_label(e) for e in etas], rotation=0, fontsize=9)
    ax.set_xlabel("η (SEC weight)")


def _var_panel(ax, curve: pd.DataFrame, etas: Sequence[float], eta: float | None, mu: str, live_point=None):
    """The final norm variance (solid, log, left axis) and CV (dashed, right axis) against η; the cell ``eta``
    marked (none marked when None)."""
    pos = {float(e): i for i, e in enumerate(etas)}
    d = curve.sort_values("eta") if len(curve) else curve
    ok = d[d["train_norm_var"] > 0] if len(d) else d
    if len(ok):
        ax.plot([pos[float(e)] for e in ok["eta"]], ok["train_norm_var"], "-o", ms=3, color=mu_color(mu))
        here = ok[ok["eta"] == float(eta)] if eta is not None else ok.iloc[:0]
        if len(here):
            ax.plot([pos[float(eta)]], here["train_norm_var"], "o", ms=11, mfc="none", mec="k", mew=1.6)
        ax.set_yscale("log")
    if live_point is not None and live_point.get("train_norm_var", 0) > 0 and float(live_point["eta"]) in pos:
        ax.plot([pos[float(live_point["eta"])]], [live_point["train_norm_var"]], "*", ms=13, color="k")
        ax.set_yscale("log")
    _eta_axis(ax, etas, eta)
    ax.set_ylabel("Var(‖f‖), train, end")
    ax.set_title("Final norm variance against η")
    cv = ok[ok["train_norm_cv"].notna()] if len(ok) and "train_norm_cv" in ok.columns else ok.iloc[:0]
    live_cv = live_point is not None and np.isfinite(live_point.get("train_norm_cv", np.nan)) and float(live_point["eta"]) in pos
    if len(cv) or live_cv:                      # the scale-free spread beside the variance, dashed, right axis
        right = ax.twinx()
        if len(cv):
            right.plot([pos[float(e)] for e in cv["eta"]], cv["train_norm_cv"], "--s", ms=3, color=mu_color(mu),
                       alpha=0.8)
        if live_cv:
            right.plot([pos[float(live_point["eta"])]], [live_point["train_norm_cv"]], "P", ms=10, color="k")
        right.set_ylim(bottom=0)
        right.set_ylabel(CV_LABEL, fontsize=9)
        ax.set_title("final Var(‖f‖) (solid) and CV (dashed)")


def _run_panels(p, steps, tracked, scatter, note=None) -> None:
    """The four panels of one run on ``p`` (four Axes, in reading order): its tracked norms, its batch mean norm
    with μ, the norm variance (and CV) within the batch, and the gradient against the norm."""
    small = dict(fontsize=9)
    if len(tracked):
        tracked_norms(tracked, ax=p[0])
        p[0].set_title(f"‖f_i‖ of {tracked['sample'].nunique()} tracked samples", **small)
    else:
        empty_panel(p[0], "no tracked samples")
    if len(steps) and {"norm_mean", "norm_var"} <= set(steps.columns):
        batch_mean_norm(steps, ax=p[1])
        p[1].set_title("batch mean ‖f‖ ± 1 std, and μ", **small)
        if p[1].get_legend() is not None:
            p[1].legend(**_LEGEND)
        norm_variance(steps, ax=p[2])
        _short_cv_axis(p[2])
        p[2].set_title("batch Var(‖f‖) (solid) and CV (dashed)" if _twins(p[2])
                       else "Var(‖f‖) within the batch", **small)
    else:
        empty_panel(p[1], "no steps recorded")
        empty_panel(p[2], "no steps recorded")
    if len(scatter):
        grad_vs_norm(scatter, ax=p[3])
        p[3].set_title("‖∂L/∂f_i‖ vs ‖f_i‖ (log-log, slope)", **small)
        if p[3].get_legend() is not None:
            p[3].legend(**_LEGEND)
    else:
        empty_panel(p[3], "no gradient samples")
    if note:
        p[0].text(0.03, 0.97, textwrap.fill(note, 42), transform=p[0].transAxes, va="top", fontsize=9,
                  color="#b00", bbox=dict(facecolor="white", edgecolor="#b00", alpha=0.9))


def _panels_figure(rows: int, title: str):
    """A figure of ``rows`` rows of two panels (:func:`panel_grid`) under ``title``, and its Axes in reading order."""
    size, grid, lines = panel_grid(rows, title)
    fig = figure(*size, layout=None)
    p = fig.subplots(rows, 2, gridspec_kw=grid).ravel()
    if lines:
        fig.suptitle("\n".join(lines), fontsize=10)
    return fig, p


def _small_titles(fig) -> None:
    for a in fig.axes:
        a.title.set_fontsize(9)


def cell_figure(steps, tracked, scatter, curve, etas, eta, mu, loss, title, live_point=None, note=None):
    """The six-panel figure of one grid cell (or of a live run), in reading order (three rows of two): the
    run's tracked norms and its batch mean norm with μ; the norm variance within the batch and the gradient
    against the norm (from ``steps``, ``tracked``, ``scatter``); the grid's final metrics and final norm
    variance against η (``curve``: summary rows of this μ and loss), the cell's η marked."""
    with style():
        fig, p = _panels_figure(3, title)
        _run_panels(p[:4], steps, tracked, scatter, note)
        _curve_panel(p[4], curve, etas, eta, mu, live_point)
        _var_panel(p[5], curve, etas, eta, mu, live_point)
        _small_titles(fig)
    return fig


def run_figure(steps, tracked, scatter, title, note=None):
    """The first two rows of :func:`cell_figure` (the run's four panels) under ``title``."""
    with style():
        fig, p = _panels_figure(2, title)
        _run_panels(p, steps, tracked, scatter, note)
        _small_titles(fig)
    return fig


def grid_row_figure(curve, etas, mu, title):
    """The last row of :func:`cell_figure` for every η of one μ and loss (none marked): the grid's final R@1 and
    NMI, and final norm variance and CV, against η (``curve``: summary rows of this μ and loss)."""
    with style():
        fig, p = _panels_figure(1, title)
        _curve_panel(p[0], curve, etas, None, mu)
        _var_panel(p[1], curve, etas, None, mu)
        p[0].set_title("R@1 and NMI against η")
        _small_titles(fig)
    return fig


def _twins(ax) -> list:
    """The other Axes of ``ax``'s figure that share its x axis (a ``twinx``)."""
    return [a for a in ax.figure.axes if a is not ax and ax.get_shared_x_axes().joined(ax, a)]


def _short_cv_axis(ax) -> None:
    """The CV axis beside a panel's batch variance, labelled :data:`CV_LABEL` and without its legend (the
    label and the panel's title say which line is the CV)."""
    for right in _twins(ax):
        right.set_ylabel(CV_LABEL, fontsize=9)
        if right.get_legend() is not None:
            right.get_legend().remove()


def overview_figure(summary: pd.DataFrame, axes_of_grid):
    """R@1 (top), final norm variance (middle) and, beside it, the same norms' CV = std / mean (bottom, where
    the summary has ``train_norm_cv``) against η, one line per μ mode, one column per loss.

    ``summary``: the explore chapter's summary table; ``axes_of_grid``: its GridAxes (etas, mus, losses)."""
    s = summary
    etas = axes_of_grid.etas
    with_cv = "train_norm_cv" in s.columns and s["train_norm_cv"].notna().any()
    with style():
        n = len(axes_of_grid.losses)
        fig = figure(min(BOOK_WIDTH * 1.2, 4.6 * n), 7.6 if with_cv else 5.2)
        axes = fig.subplots(3 if with_cv else 2, n, squeeze=False)
        for j, loss in enumerate(axes_of_grid.losses):
            for mu in axes_of_grid.mus:
                d = s[(s["loss"] == loss) & (s["mu"] == mu) & (s["status"] == "done")].sort_values("eta")
                x = [etas.index(e) for e in d["eta"]]
                axes[0, j].plot(x, d["R@1"], "-o", ms=3, color=mu_color(mu), label=mu_label(mu))
                ok = d["train_norm_var"] > 0
                axes[1, j].plot(np.asarray(x)[ok.to_numpy()], d["train_norm_var"][ok], "-o", ms=3,
                                color=mu_color(mu), label=mu_label(mu))
                if with_cv:
                    axes[2, j].plot(x, d["train_norm_cv"], "-o", ms=3, color=mu_color(mu), label=mu_label(mu))
            axes[0, j].set_title(f"{loss}: final R@1 against η")
            axes[1, j].set_title(f"{loss}: final norm variance against η")
            axes[1, j].set_yscale("log")
            if with_cv:
                axes[2, j].set_title(f"{loss}: final norm CV (std / mean) against η")
                axes[2, j].set_ylabel("CV of ‖f‖, train, end")
                axes[2, j].set_ylim(bottom=0)
            for a in axes[:, j]:
                a.set_xticks(range(len(etas)))
                a.set_xticklabels([eta_label(e) for e in etas], fontsize=9)
                a.set_xlabel("η (0 = no SEC)")
            axes[0, j].set_ylabel("R@1 (%)")
            axes[1, j].set_ylabel("Var(‖f‖), train, end")
        axes[0, -1].legend(fontsize=9, title="μ mode", title_fontsize=9)
    return fig
