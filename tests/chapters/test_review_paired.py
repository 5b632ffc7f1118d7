"""The face, N-pair and SimCLR pages' figure: each page's family drawn as paired differences around 0.

On a small hand-made runs frame, the rows the figure draws (``paired``) equal an independent computation:
SEC − none per seed (a failed run leaves its seed unpaired), the mean and its 95% Student-t interval from
``scipy.stats``, the η of the loss's SEC runs. The drawn dots and whiskers are those rows, and the x axis
holds every interval and 0 without starting at 0.
"""
from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from scipy import stats

from sec_lib.chapters import face, npair, ssl
from sec_lib.chapters.common import LOSS_TITLES
from sec_lib.figures.style import BOOK_WIDTH

SEEDS = range(5)
#: (page module, the metrics of its family per loss, the name each loss is drawn under)
PAGES = {
    "face": (face, {l: ("R@1",) for l in face.LOSSES}, {l: LOSS_TITLES[l] for l in face.LOSSES}),
    "npair": (npair, {l: ("R@1",) for l in npair.LOSSES}, {l: l for l in npair.LOSSES}),
    "ssl": (ssl, {"ntxent": ("R@1", "probe_top1"), "supcon": ("R@1",)}, ssl.NAMES),
}


def hand_runs(losses, seed=0):
    """none and SEC runs per loss and seed with R@1 and probe top-1 drawn at random around a per-loss gain
    (one of them about 1 point), η per loss; seed 4's SEC run of the first loss failed."""
    rng = np.random.default_rng(seed)
    rows = []
    for i, loss in enumerate(losses):
        gain, eta = (1.0, -0.6, 0.3, 2.0)[i % 4], (0.1, 0.5, 1.0, 0.05)[i % 4]
        for s in SEEDS:
            base = 70 + rng.normal(0, 1)
            for v in ("none", "sec"):
                up = gain + rng.normal(0, 0.5) if v == "sec" else 0.0
                failed = i == 0 and s == 4 and v == "sec"
                rows.append(dict(key=f"{loss}-{v}-{s}", loss=loss, variant=v, seed=s, eta=eta if v == "sec" else 0.0,
                                 status="failed" if failed else "done", **{"R@1": base + up,
                                                                             "probe_top1": base - 10 + 1.5 * up}))
    return pd.DataFrame(rows)


def expected(runs, loss, metric):
    """SEC − none of ``metric`` for ``loss``, paired on seed by hand: (mean, lo, hi, n, η text)."""
    ok = runs[(runs["loss"] == loss) & (runs["status"] == "done")]
    none = ok[ok["variant"] == "none"].set_index("seed")[metric]
    sec = ok[ok["variant"] == "sec"].set_index("seed")[metric]
    seeds = sorted(set(none.index) & set(sec.index))
    d = np.array([sec[s] - none[s] for s in seeds])
    lo, hi = stats.t.interval(0.95, len(d) - 1, loc=d.mean(), scale=stats.sem(d))
    eta = runs[(runs["loss"] == loss) & (runs["variant"] == "sec")]["eta"].iloc[0]
    return d.mean(), lo, hi, len(d), f"{eta:g}"


def renderer(fig):
    if not isinstance(fig.canvas, FigureCanvasAgg):
        FigureCanvasAgg(fig)
    fig.canvas.draw()
    return fig.canvas.get_renderer()


def texts(fig):
    ax = fig.axes[0]
    lo, hi = ax.get_ylim()
    out = [t for t in ax.get_yticklabels() if t.get_text() and min(lo, hi) <= t.get_position()[1] <= max(lo, hi)]
    out += [t for t in ax.get_xticklabels() if t.get_text() and ax.get_xlim()[0] <= t.get_position()[0] <= ax.get_xlim()[1]]
    return out + [ax.xaxis.label, fig._suptitle]


@pytest.mark.parametrize("page", list(PAGES))
def test_the_rows_the_figure_draws_are_the_paired_differences_of_the_runs(page):
    mod, metrics, names = PAGES[page]
    runs = hand_runs(mod.LOSSES)
    rows = mod.paired(runs)
    want = [(loss, m) for loss in mod.LOSSES for m in metrics[loss]]
    assert sorted(zip(rows["key"], rows["metric"])) == sorted(want)
    for r in rows.itertuples(index=False):
        mean, lo, hi, n, eta = expected(runs, r.key, r.metric)
        assert (r.estimate, r.ci_lo, r.ci_hi) == pytest.approx((mean, lo, hi), abs=1e-9), (r.key, r.metric)
        assert r.n == n and r.eta == eta and r.loss == names[r.key]
    assert rows.loc[rows["key"] == mod.LOSSES[0], "n"].eq(4).all()          # the failed run's seed is not paired
    # each arm is named by its measure, the axis by all of them
    assert rows.attrs["comparison"] == "SEC − none"
    if page == "ssl":
        assert list(rows["arm"]) == ["R@1", "R@1", "probe top-1"] and rows.attrs["metric"] == "R@1 or probe top-1"
    else:
        assert set(rows["arm"]) == {"R@1"} and rows.attrs["metric"] == "R@1"


def _errorbars(ax):
    """(y, x of the dot, (lo, hi) of the whisker or None) per errorbar container."""
    out = []
    for c in ax.containers:
        x, y = float(c.lines[0].get_xdata()[0]), float(c.lines[0].get_ydata()[0])
        segs = c.lines[2][0].get_segments() if c.lines[2] else []
        out.append((y, x, (float(segs[0][0][0]), float(segs[0][1][0])) if segs else None))
    return sorted(out)


@pytest.mark.parametrize("page", list(PAGES))
def test_the_figure_draws_those_rows_around_zero_on_an_axis_that_fits_them(page):
    mod, metrics, names = PAGES[page]
    runs = hand_runs(mod.LOSSES, seed=1)
    rows = mod.paired(runs)
    fig = mod.figure(runs)
    (ax,) = fig.axes
    drawn = _errorbars(ax)
    assert len(drawn) == len(rows)
    assert sorted(x for _, x, _ in drawn) == pytest.approx(sorted(rows["estimate"]))
    assert np.array(sorted(w for _, _, w in drawn)) == pytest.approx(np.array(sorted(zip(rows["ci_lo"], rows["ci_hi"]))))
    # every interval and 0 lie inside the axis, which does not start at 0 and is not much wider than they are
    lo, hi = ax.get_xlim()
    vals = np.r_[rows["ci_lo"], rows["ci_hi"], 0.0]
    assert lo < vals.min() and hi > vals.max() and lo < 0 < hi
    assert hi - lo < 1.2 * (vals.max() - vals.min())
    assert any(list(l.get_xdata()) == [0, 0] for l in ax.lines), "no line at 0"
    # the losses in the page's order, each named, each arm with its η
    labels = [t.get_text() for t in ax.get_yticklabels()]
    heads = [l for l in labels if l in names.values()]
    assert heads == [names[l] for l in mod.LOSSES]
    for r in rows.itertuples(index=False):
        assert f"{r.arm}, η = {r.eta}" in labels
    # the dots sit on their own labelled rows, under their loss
    ticks = dict(zip(labels, ax.get_yticks()))
    for r in rows.itertuples(index=False):
        y = [yy for yy, x, _ in drawn if x == pytest.approx(r.estimate)][0]
        assert ticks[names[r.key]] < y
    # a title, an axis label that says which side is better, nothing overlapping or cut off
    assert fig._suptitle.get_text().startswith(f"SEC − none in {rows.attrs['metric']}")
    assert "right of 0: SEC helps" in ax.get_xlabel()
    r = renderer(fig)
    boxes = [t.get_window_extent(r) for t in texts(fig)]
    W, H = fig.bbox.width, fig.bbox.height
    assert all(b.x0 >= -1 and b.y0 >= -1 and b.x1 <= W + 1 and b.y1 <= H + 1 for b in boxes)
    for b1, b2 in itertools.combinations(boxes, 2):
        assert not (min(b1.x1, b2.x1) - max(b1.x0, b2.x0) > 1 and min(b1.y1, b2.y1) - max(b1.y0, b2.y0) > 1)
    assert fig.get_size_inches()[0] <= BOOK_WIDTH


def test_a_page_without_paired_seeds_draws_a_note():
    runs = hand_runs(face.LOSSES)
    runs = runs[runs["variant"] == "none"]
    assert face.paired(runs).empty
    fig = face.figure(runs)
    assert "no paired difference" in " ".join(t.get_text() for t in fig.axes[0].texts)
