"""The figures a reader found hard to read at 1,400 px.

* the compare page's paired differences (:func:`sec_lib.figures.results.paired_differences`): dots and
  intervals around a line at 0, an x axis that spans the intervals and 0 and never starts at 0, η of every
  arm in the labels and in the caption (read from the runs, :func:`~sec_lib.figures.results.paired_rows`);
  the review pages' families as its rows (:func:`~sec_lib.figures.results.family_paired_rows`);
* the fairness figure: its three panel labels (long sentences) do not run into each other;
* the explorer's cell figure and its two parts (a run's four panels, the grid's row against η): one text column
  wide at the book's resolution, every label inside the image (the widget image is not cropped, so a label
  outside it is cut off) and no two labels overlapping, the right-hand CV axes included; the frames small.

Labels are compared by their drawn boxes (``Text.get_window_extent`` with the figure's renderer).
"""
from __future__ import annotations

import io
import itertools

import numpy as np
import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from PIL import Image

from sec_lib.figures import explore as explore_fig
from sec_lib.figures import results as results_fig
from sec_lib.figures import sweeps
from sec_lib.figures.style import BOOK_WIDTH, DPI
from sec_lib.chapters.common import with_batch_cv
from sec_lib.figures.widgets import _png_bytes

LOSSES = ("triplet", "semihard", "npair", "ms")
ETA_SEC = {"triplet": 0.05, "semihard": 0.1, "npair": 0.5, "ms": 1.0}
ETA_L2 = {"triplet": 0.01, "semihard": 0.005, "npair": 0.001, "ms": 0.005}


# ------------------------------------------------------------------------------------ helpers

def renderer(fig):
    if not isinstance(fig.canvas, FigureCanvasAgg):
        FigureCanvasAgg(fig)
    fig.canvas.draw()
    return fig.canvas.get_renderer()


def _in_view(ax, text, axis):
    lo, hi = sorted(ax.get_xlim() if axis == "x" else ax.get_ylim())
    pos = text.get_position()[0 if axis == "x" else 1]
    return lo - 1e-9 <= pos <= hi + 1e-9


def drawn_texts(fig):
    """(name, Text) of every label drawn on the figure: tick labels in view, axis labels, titles, legend
    texts, the suptitle and free texts."""
    out = []
    for i, ax in enumerate(fig.axes):
        for axis, labels in (("x", ax.get_xticklabels()), ("y", ax.get_yticklabels())):
            if not getattr(ax, f"{axis}axis").get_visible():    # a twin's hidden axis draws nothing
                continue
            out += [(f"ax{i} {axis}tick {t.get_text()!r}", t) for t in labels
                    if t.get_visible() and t.get_text() and _in_view(ax, t, axis)]
        for name, t, shown in (("xlabel", ax.xaxis.label, ax.xaxis.get_visible()),
                               ("ylabel", ax.yaxis.label, ax.yaxis.get_visible()), ("title", ax.title, True),
                               ("left title", ax._left_title, True), ("right title", ax._right_title, True)):
            if shown and t.get_visible() and t.get_text():
                out.append((f"ax{i} {name} {t.get_text()!r}", t))
        leg = ax.get_legend()
        if leg is not None:
            out += [(f"ax{i} legend {t.get_text()!r}", t) for t in leg.get_texts()]
    for leg in fig.legends:
        out += [(f"figure legend {t.get_text()!r}", t) for t in leg.get_texts()]
    if fig._suptitle is not None and fig._suptitle.get_text():
        out.append(("suptitle", fig._suptitle))
    return out


def overlaps(fig, tol: float = 1.0):
    """Pairs of drawn labels whose boxes overlap by more than ``tol`` px in both directions."""
    r = renderer(fig)
    boxes = [(n, t.get_window_extent(r)) for n, t in drawn_texts(fig)]
    bad = []
    for (n1, b1), (n2, b2) in itertools.combinations(boxes, 2):
        dx = min(b1.x1, b2.x1) - max(b1.x0, b2.x0)
        dy = min(b1.y1, b2.y1) - max(b1.y0, b2.y0)
        if dx > tol and dy > tol:
            bad.append((n1, n2))
    return bad


def outside(fig, tol: float = 1.0):
    """Labels drawn (partly) outside the figure: cut off in an image saved without cropping."""
    r = renderer(fig)
    W, H = fig.bbox.width, fig.bbox.height
    return [n for n, t in drawn_texts(fig) for b in [t.get_window_extent(r)]
            if b.x0 < -tol or b.y0 < -tol or b.x1 > W + tol or b.y1 > H + tol]


# ------------------------------------------------------------------------- compare: paired differences

def gains_and_runs(ci=True):
    """A sec_gain-shaped frame (R@1 and NMI) and the runs it came from (η per loss and variant)."""
    rows, runs = [], []
    for i, loss in enumerate(LOSSES):
        for v, comp, d in (("l2reg", "L2-reg − none", 0.6 + 0.1 * i), ("sec", "SEC − none", 1.0 + 0.2 * i)):
            for metric in ("R@1", "NMI"):
                rows.append(dict(loss=loss, variant=v, baseline="none", comparison=comp, metric=metric, estimate=d,
                                 ci_lo=d - 0.5 if ci else np.nan, ci_hi=d + 0.6 if ci else np.nan, n=5))
        for seed in range(5):
            runs += [dict(loss=loss, variant="none", seed=seed, eta=0.0),
                     dict(loss=loss, variant="sec", seed=seed, eta=ETA_SEC[loss]),
                     dict(loss=loss, variant="l2reg", seed=seed, eta=ETA_L2[loss])]
    return pd.DataFrame(rows), pd.DataFrame(runs)


def test_paired_rows_read_eta_from_the_runs():
    gains, runs = gains_and_runs()
    rows = results_fig.paired_rows(gains, runs, "R@1")
    assert list(rows.columns[:4]) == ["loss", "arm", "variant", "baseline"]
    assert set(results_fig.PAIRED_COLUMNS) <= set(rows.columns) and len(rows) == 2 * len(LOSSES)
    got = {(r.loss, r.variant): r.eta for r in rows.itertuples()}
    assert got == {**{(l, "sec"): f"{e:g}" for l, e in ETA_SEC.items()}, **{(l, "l2reg"): f"{e:g}" for l, e in ETA_L2.items()}}
    # a cell whose runs differ in η says so, rather than picking one
    mixed = runs.copy()
    mixed.loc[(mixed["loss"] == "ms") & (mixed["variant"] == "sec") & (mixed["seed"] == 0), "eta"] = 0.5
    assert results_fig.paired_rows(gains, mixed).set_index(["loss", "variant"]).loc[("ms", "sec"), "eta"] == "0.5/1"
    with pytest.raises(ValueError, match="F1"):
        results_fig.paired_rows(gains, runs, "F1")
    with pytest.raises(ValueError, match="eta"):
        results_fig.paired_rows(gains, runs.drop(columns="eta"))


def _errorbars(ax):
    """(x of the dot, (lo, hi) of the whisker or None) per errorbar container."""
    out = []
    for c in ax.containers:
        x = float(c.lines[0].get_xdata()[0])
        segs = c.lines[2][0].get_segments() if c.lines[2] else []
        out.append((x, (float(segs[0][0][0]), float(segs[0][1][0])) if segs else None))
    return out


def test_paired_differences_dots_intervals_and_a_line_at_zero():
    gains, runs = gains_and_runs()
    rows = results_fig.paired_rows(gains, runs, "R@1")
    fig = results_fig.paired_differences(rows)
    (ax,) = fig.axes
    bars = _errorbars(ax)
    assert len(bars) == len(rows)
    assert sorted(x for x, _ in bars) == pytest.approx(sorted(rows["estimate"]))
    whiskers = np.array(sorted(w for _, w in bars))
    assert whiskers == pytest.approx(np.array(sorted(zip(rows["ci_lo"], rows["ci_hi"]))))
    # a vertical line at 0
    assert any(list(l.get_xdata()) == [0, 0] and l.get_transform().contains_branch_seperately(ax.transData)[0]
               for l in ax.lines), "no vertical line at 0"
    assert rows["ci_lo"].min() > 0
    # every value here is positive: the axis still shows 0 and the intervals, with a margin, so it does not start at 0
    lo, hi = ax.get_xlim()
    assert lo < 0 < hi and lo < rows["ci_lo"].min() and hi > rows["ci_hi"].max()
    assert hi - lo < 1.3 * (rows["ci_hi"].max() - 0)          # the differences fill the axis: 1 point is visible
    # η of each arm in its label, the loss named above its arms
    labels = [t.get_text() for t in ax.get_yticklabels()]
    for loss in LOSSES:
        assert loss in labels
        assert f"SEC − none, η = {ETA_SEC[loss]:g}" in labels and f"L2-reg − none, η = {ETA_L2[loss]:g}" in labels
    assert "0" in ax.get_xlabel() and "R@1" in ax.get_xlabel()
    assert overlaps(fig) == [] and fig.get_size_inches()[0] <= BOOK_WIDTH + 1e-9


def test_paired_differences_negative_effects_and_missing_intervals():
    gains, runs = gains_and_runs(ci=False)
    gains["estimate"] = -gains["estimate"]
    rows = results_fig.paired_rows(gains, runs)
    fig = results_fig.paired_differences(rows)
    ax = fig.axes[0]
    assert all(w is None for _, w in _errorbars(ax))          # no interval: no whisker
    lo, hi = ax.get_xlim()
    assert lo < rows["estimate"].min() and hi > 0
    cap = results_fig.paired_caption(rows)
    assert "Hollow markers have no interval" in cap
    with pytest.raises(ValueError, match="empty"):
        results_fig.paired_differences(rows.iloc[0:0])
    with pytest.raises(ValueError, match="ci_hi"):
        results_fig.paired_differences(rows.drop(columns="ci_hi"))


def test_paired_caption_states_eta_of_every_loss():
    gains, runs = gains_and_runs()
    rows = results_fig.paired_rows(gains, runs)
    cap = results_fig.paired_caption(rows, level=0.95)
    assert cap.startswith("**Figure.**") and "95%" in cap and "5 paired seeds" in cap and "0" in cap
    for loss in LOSSES:
        part = cap[cap.index(f"{loss}:"):]
        part = part[:part.index(";") if ";" in part else len(part)]
        assert f"SEC η = {ETA_SEC[loss]:g}" in part and f"L2-reg η = {ETA_L2[loss]:g}" in part, part
    assert "Hollow" not in cap


def test_paired_differences_keeps_the_compare_title_unless_given_another():
    gains, runs = gains_and_runs()
    rows = results_fig.paired_rows(gains, runs, "R@1")
    ax = results_fig.paired_differences(rows).axes[0]
    assert ax.get_title() == "R@1: each regulariser − none, mean over seeds and 95% interval"
    assert ax.get_xlabel() == "paired difference in R@1 [points]; right of 0: the regulariser helps"
    assert ax.figure.get_size_inches()[0] == pytest.approx(BOOK_WIDTH)
    fig = results_fig.paired_differences(rows, title="", xlabel="right of 0: SEC helps", width=5.0)
    assert fig.axes[0].get_title() == "" and fig.axes[0].get_xlabel() == "right of 0: SEC helps"
    assert fig.get_size_inches()[0] == pytest.approx(5.0)


def family_and_runs():
    """A review page's family (SEC − none per loss and metric, as review.family_rows gives it) and its runs."""
    fam = pd.DataFrame([dict(loss="ntxent", metric="R@1", estimate=1.8, ci_lo=0.9, ci_hi=2.7, n=5),
                        dict(loss="supcon", metric="R@1", estimate=0.8, ci_lo=0.4, ci_hi=1.3, n=4),
                        dict(loss="ntxent", metric="probe_top1", estimate=1.9, ci_lo=1.5, ci_hi=2.2, n=5),
                        dict(loss="supcon", metric="probe_top1", estimate=np.nan, ci_lo=np.nan, ci_hi=np.nan, n=0)])
    runs = pd.DataFrame([dict(loss=l, variant=v, seed=s, eta=(0.5 if l == "ntxent" else 0.1) if v == "sec" else 0.0)
                         for l in ("ntxent", "supcon") for v in ("none", "sec") for s in range(5)])
    return fam, runs


def test_family_paired_rows_name_each_arm_by_its_measure_and_read_eta_from_the_runs():
    fam, runs = family_and_runs()
    rows = results_fig.family_paired_rows(fam, runs, names={"ntxent": "SimCLR"}, metric_names={"probe_top1": "probe"})
    assert set(results_fig.PAIRED_COLUMNS) <= set(rows.columns)
    assert len(rows) == 3                                       # the row without an estimate has nothing to draw
    assert list(rows["loss"]) == ["SimCLR", "supcon", "SimCLR"] and list(rows["key"]) == ["ntxent", "supcon", "ntxent"]
    assert list(rows["arm"]) == ["R@1", "R@1", "probe"] and rows.attrs["comparison"] == "SEC − none"
    assert list(rows["eta"]) == ["0.5", "0.1", "0.5"] and list(rows["n"]) == [5, 4, 5]
    assert rows[["estimate", "ci_lo", "ci_hi"]].to_numpy() == pytest.approx(fam.iloc[:3][["estimate", "ci_lo", "ci_hi"]].to_numpy())
    assert rows.attrs["metric"] == "R@1 or probe"
    # SEC runs that differ in η say so
    mixed = runs.copy()
    mixed.loc[(mixed["loss"] == "supcon") & (mixed["variant"] == "sec") & (mixed["seed"] == 0), "eta"] = 1.0
    one = results_fig.family_paired_rows(fam[fam["metric"] == "R@1"], mixed)
    assert list(one["arm"]) == ["R@1"] * 2 and one.attrs["metric"] == "R@1"
    assert list(one["eta"]) == ["0.5", "0.1/1"]
    # the groups in the book's loss order (supcon is one of its losses, SimCLR is not), or in the order given
    labels = [t.get_text() for t in results_fig.paired_differences(rows, title="").axes[0].get_yticklabels()]
    assert labels.index("supcon") < labels.index("SimCLR")
    order = list(dict.fromkeys(rows["loss"]))
    labels = [t.get_text() for t in results_fig.paired_differences(rows, losses=order).axes[0].get_yticklabels()]
    assert labels.index("SimCLR") < labels.index("supcon")
    with pytest.raises(ValueError, match="losses must order"):
        results_fig.paired_differences(rows, losses=["SimCLR"])
    with pytest.raises(ValueError, match="ci_lo"):
        results_fig.family_paired_rows(fam.drop(columns="ci_lo"), runs)
    with pytest.raises(ValueError, match="eta"):
        results_fig.family_paired_rows(fam, runs.drop(columns="eta"))


# ------------------------------------------------------------------------------------- fairness

def test_fairness_figure_labels_do_not_overlap_at_the_book_width():
    from sec_lib.chapters.fairness import STATS
    rng = np.random.default_rng(0)
    stats = pd.DataFrame([dict(loss=l, variant=v, seed=s, eta2_excess=-0.01 * rng.random(),
                               difficulty_r=-0.3 * rng.random(), hit_gap=10 * rng.random())
                          for l in LOSSES for v in ("none", "l2reg", "sec") for s in range(3)])
    fig = sweeps.fairness_figure(stats, list(STATS), STATS)
    assert fig.get_size_inches()[0] <= BOOK_WIDTH + 1e-9
    assert overlaps(fig) == []
    # the whole label is there (wrapped, not cut), at 9 pt, the losses named once
    for ax, col in zip(fig.axes, STATS):
        assert " ".join(ax.get_xlabel().split()) == STATS[col] and ax.xaxis.label.get_fontsize() >= 9
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == list(LOSSES)
    assert not any(t.get_visible() and t.get_text() for ax in fig.axes[1:]
                   for t in ax.get_yticklabels() if ax.yaxis.get_tick_params()["labelleft"])


# ------------------------------------------------------------------------------------- explore

def _cell_frames(n_steps=150):
    """One run's tables and its grid row, shaped like the cpu toy grid's (150 steps, 24 tracked samples, the batch
    CV beside the batch variance, the final CV beside the final variance)."""
    rng = np.random.default_rng(1)
    st = np.arange(1, n_steps + 1)
    steps = pd.DataFrame(dict(key="k", step=st, norm_mean=1 + 0.01 * st,
                              norm_var=0.2 * np.exp(-st / 40) + 0.01 * rng.random(n_steps),
                              mu=1 + 0.01 * st, loss_metric=1 / st, loss_sec=0.01 * np.ones(n_steps)))
    steps = with_batch_cv(steps)
    tracked = pd.DataFrame([dict(key="k", step=t, sample=s, norm=0.3 + 0.05 * s * (1 + 0.01 * t) + 0.05 * rng.random())
                            for t in range(0, n_steps + 1, 5) for s in range(24)])
    scatter = pd.concat([pd.DataFrame(dict(key="k", step=t, norm=np.exp(rng.normal(0, 0.5, 40)),
                                           grad_norm=np.exp(rng.normal(-2, 0.5, 40)))) for t in (1, 75, 150)])
    etas = (0.0, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0)
    curve = pd.DataFrame(dict(eta=etas, **{"R@1": np.linspace(60, 70, 8), "NMI": np.linspace(50, 55, 8),
                                         "train_norm_var": np.geomspace(0.5, 0.001, 8),
                                         "train_norm_cv": np.linspace(0.6, 0.1, 8)}))
    return steps, tracked, scatter, curve, etas


TITLE = "semihard, μ = zero (L2-reg), η = 0.03:  R@1 65.4%, NMI 52.1%, final Var(‖f‖) 0.00298 (CV 0.12)"
LONG_TITLE = TITLE + "  (mean of 3 seeds; plots: seed of the first)"


def _readable(fig):
    """Every label inside the image (it is not cropped), no two labels overlapping, none under 9 pt."""
    assert outside(fig) == [] and overlaps(fig) == []
    assert min(t.get_fontsize() for _, t in drawn_texts(fig)) >= 9


@pytest.mark.parametrize("title", [TITLE, LONG_TITLE])
def test_explore_cell_figure_is_one_column_wide_and_nothing_is_cut_off(title):
    steps, tracked, scatter, curve, etas = _cell_frames()
    fig = explore_fig.cell_figure(steps, tracked, scatter, curve, etas, 0.03, "zero", "semihard", title)
    assert len(fig.axes) == 8                                  # six panels, two of them with a CV axis on the right
    assert sum(a.get_ylabel() == explore_fig.CV_LABEL for a in fig.axes) == 2
    # the PNG the explorer stores: one text column wide at the book's resolution (shown at its own size)
    png = Image.open(io.BytesIO(_png_bytes(fig, explore_fig.CELL_DPI, True)))
    assert explore_fig.CELL_DPI == DPI and png.size[0] == round(BOOK_WIDTH * DPI)
    assert png.size[1] >= 0.8 * png.size[0]                   # three rows of two panels, not squeezed
    # a title longer than a line is wrapped, not cut
    assert fig._suptitle.get_text().split() == title.split()
    assert (fig._suptitle.get_text().count("\n") > 0) is (len(title) > explore_fig.TITLE_CHARS)
    _readable(fig)


def _panel_boxes(fig) -> list:
    """The panels' boxes in inches (x0, x1, height), in reading order (their right-hand twins left out)."""
    w, h = fig.get_size_inches()
    main = [a for a in fig.axes if a.yaxis.get_label_position() == "left"]
    boxes = [a.get_position() for a in main]
    return sorted([(round(h * (1 - b.y1), 3), round(b.x0 * w, 3), round(b.x1 * w, 3), round(b.height * h, 3))
                   for b in boxes])


def test_the_explorer_parts_are_the_cell_figure_cut_in_two():
    """The static explorer shows a run's four panels over the grid's row of its μ and loss: each part readable on
    its own, and stacked they have the cell figure's panels (same size, same columns)."""
    steps, tracked, scatter, curve, etas = _cell_frames()
    cell = explore_fig.cell_figure(steps, tracked, scatter, curve, etas, 0.03, "zero", "semihard", TITLE)
    run = explore_fig.run_figure(steps, tracked, scatter, TITLE)
    row = explore_fig.grid_row_figure(curve, etas, "zero", "semihard: every η")
    for fig in (run, row):
        _readable(fig)
    whole, top, low = _panel_boxes(cell), _panel_boxes(run), _panel_boxes(row)
    assert len(top) == 4 and len(low) == 2
    assert [b[1:] for b in top + low] == [b[1:] for b in whole]
    # the lower row marks no cell: no ring, no dotted line at an η
    assert not [ln for a in row.axes for ln in a.lines if ln.get_linestyle() == ":" or ln.get_markersize() >= 10]


def test_explorer_frames_are_small_webp_at_the_figure_size():
    """The explorer's frames (:data:`CELL_IMAGE`): lossless WebP on a palette of at most 48 colours, decoding to the
    figure's pixel size; a run's frame under 30 KB, a grid row under 11 KB (256-colour PNGs of the same figures:
    about 38 and 12 KB)."""
    from sec_lib.figures.widgets import fig_to_image
    steps, tracked, scatter, curve, etas = _cell_frames()
    for fig, limit in ((explore_fig.run_figure(steps, tracked, scatter, TITLE), 30_000),
                       (explore_fig.grid_row_figure(curve, etas, "zero", "semihard: every η"), 11_000)):
        size = tuple(round(x * explore_fig.CELL_DPI) for x in fig.get_size_inches())
        img = fig_to_image(fig, dpi=explore_fig.CELL_DPI, **explore_fig.CELL_IMAGE)
        data = bytes(img.value)
        assert img.format == "webp" and data[:4] == b"RIFF" and data[8:12] == b"WEBP"
        decoded = Image.open(io.BytesIO(data))
        assert decoded.format == "WEBP" and decoded.size == size
        assert len(decoded.convert("RGB").getcolors(256) or []) <= explore_fig.CELL_IMAGE["colors"]
        assert len(data) < limit, len(data)


def test_titles_sit_where_matplotlib_would_put_them(monkeypatch):
    """The style fixes ``axes.titley`` (matplotlib then stops measuring every axis's tick labels on each draw to
    place the titles): the explorer's cell figure, two dozen of which the explore page draws, has the same pixels
    as with matplotlib's own title placement."""
    from sec_lib.figures import style
    steps, tracked, scatter, curve, etas = _cell_frames()

    def png():
        fig = explore_fig.cell_figure(steps, tracked, scatter, curve, etas, 0.03, "zero", "semihard", "a title")
        assert fig.axes[0]._autotitlepos is (style._RC.get("axes.titley") is None)
        return _png_bytes(fig, explore_fig.CELL_DPI, False)
    fixed = png()
    monkeypatch.setattr(style, "_RC", {k: v for k, v in style._RC.items() if k != "axes.titley"})
    assert png() == fixed
