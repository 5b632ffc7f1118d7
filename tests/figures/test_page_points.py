"""Four figures that carry their page's point: what each draws equals what it is given, and no two of its labels
overlap.

* the landing figure (:func:`sec_lib.figures.results.headline_figure`): our intervals and the paper's gains, each of
  the paper's datasets with its own marker (shape and fill), no two paper marks on top of each other, and a legend
  below the axes that stays legible on a phone;
* the claims figure (:func:`sec_lib.figures.claims.claims_figure`): each row labelled with its claim's id and words,
  an axis that fits our intervals, and a paper number beyond it drawn at the edge with its value;
* the scale page's R@1 per arm (:func:`sec_lib.figures.scale.arm_figure`): each panel's axis fits its own arms; an
  arm far off the others is an arrow at the edge with its mean;
* the convergence figure (:func:`sec_lib.figures.sweeps.convergence_figure`): R@1 per arm, SEC and none, and SEC −
  none paired on seed with its 95% interval (:func:`sec_lib.figures.sweeps.paired_curve`).

Labels are compared by their drawn boxes (``Text.get_window_extent`` with the figure's renderer), free texts and
annotations included.
"""
from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from matplotlib.colors import to_rgba
from scipy import stats

from sec_lib.figures import claims as claims_fig
from sec_lib.figures import results
from sec_lib.figures import scale as scale_fig
from sec_lib.figures import sweeps
from sec_lib.figures.palette import VARIANT_COLORS, VERDICT_COLORS
from sec_lib.figures.style import BOOK_WIDTH
from test_readable import _in_view, renderer  # the same measures as the readability tests (tests/figures/)

LOSSES = ("triplet", "semihard", "npair", "ms")
#: How wide a figure is shown on a 420 px phone screen (the text column's width there).
PHONE_PX = 365


# ------------------------------------------------------------------------------------------------ helpers

def texts(fig):
    """(name, Text) of every label drawn: tick labels in view, axis labels, titles, legend texts, free texts and
    annotations."""
    out = []
    for i, ax in enumerate(fig.axes):
        if not ax.get_visible():
            continue
        for axis, labels in (("x", ax.get_xticklabels()), ("y", ax.get_yticklabels())):
            out += [(f"ax{i} {axis}tick {t.get_text()!r}", t) for t in labels
                    if t.get_visible() and t.get_text() and _in_view(ax, t, axis)]
        for name, t in (("xlabel", ax.xaxis.label), ("ylabel", ax.yaxis.label), ("title", ax.title)):
            if t.get_visible() and t.get_text():
                out.append((f"ax{i} {name} {t.get_text()!r}", t))
        out += [(f"ax{i} text {t.get_text()!r}", t) for t in ax.texts if t.get_visible() and t.get_text()]
        leg = ax.get_legend()
        if leg is not None:
            out += [(f"ax{i} legend {t.get_text()!r}", t) for t in leg.get_texts()]
    for leg in fig.legends:
        out += [(f"figure legend {t.get_text()!r}", t) for t in leg.get_texts()]
    return out


def overlaps(fig, tol: float = 1.0):
    """Pairs of drawn labels whose boxes overlap by more than ``tol`` px in both directions."""
    r = renderer(fig)
    boxes = [(n, t.get_window_extent(r)) for n, t in texts(fig)]
    return [(n1, n2) for (n1, b1), (n2, b2) in itertools.combinations(boxes, 2)
            if min(b1.x1, b2.x1) - max(b1.x0, b2.x0) > tol and min(b1.y1, b2.y1) - max(b1.y0, b2.y0) > tol]


def outside(fig, tol: float = 1.0):
    """Labels drawn (partly) outside the figure: cut off in the page's image."""
    r = renderer(fig)
    W, H = fig.bbox.width, fig.bbox.height
    return [n for n, t in texts(fig) for b in [t.get_window_extent(r)]
            if b.x0 < -tol or b.y0 < -tol or b.x1 > W + tol or b.y1 > H + tol]


def errorbars(ax):
    """(x, y, (lo, hi) of the horizontal whisker or None) per errorbar container."""
    out = []
    for c in ax.containers:
        x, y = float(c.lines[0].get_xdata()[0]), float(c.lines[0].get_ydata()[0])
        segs = c.lines[2][0].get_segments() if c.lines[2] else []
        out.append((x, y, (float(segs[0][0][0]), float(segs[0][1][0])) if segs else None))
    return out


# -------------------------------------------------------------------------------------- the landing figure

def headline_frames():
    """Our gains at two settings per loss, and the paper's on four datasets, two of them 0.1 point apart (ms)."""
    g = pd.DataFrame([dict(loss=l, setting=s, estimate=e, ci_lo=e - 0.4, ci_hi=e + 0.5)
                      for l, base in zip(LOSSES, (0.6, 0.7, 0.68, -0.01))
                      for s, e in (("selected", base), ("paper", base - 0.2))])
    gains = {"triplet": (7.48, 7.10, 6.17, 3.17), "semihard": (2.04, 5.02, 3.13, 2.52),
             "npair": (4.64, 3.70, 2.59, 2.20), "ms": (2.65, 1.66, 2.38, 1.76)}
    paper = pd.DataFrame([dict(dataset=d, loss=l, paper_gain=v[k])
                          for l, v in gains.items() for k, d in enumerate(("CUB", "Cars", "SOP", "InShop"))])
    return g, paper


def paper_lines(ax):
    return [ln for ln in ax.lines if ln.get_linestyle() in ("None", "") and to_rgba(ln.get_color()) ==
            to_rgba(results.PAPER_COLOR)]


def test_headline_draws_our_intervals_and_every_paper_gain_with_a_marker_of_its_own():
    g, paper = headline_frames()
    fig = results.headline_figure(g, paper)
    ax = fig.axes[0]
    bars = errorbars(ax)
    assert sorted(x for x, _, _ in bars) == pytest.approx(sorted(g["estimate"]))
    assert np.array(sorted(w for _, _, w in bars)) == pytest.approx(np.array(sorted(zip(g["ci_lo"], g["ci_hi"]))))
    lines = paper_lines(ax)
    assert len(lines) == 4
    # each dataset's marks: its gains, one per loss, and a look (shape, fill) no other dataset has
    for ln, ds in zip(lines, ("CUB", "Cars", "SOP", "InShop")):
        assert list(ln.get_xdata()) == pytest.approx(list(paper.loc[paper["dataset"] == ds, "paper_gain"]))
    looks = {(ln.get_marker(), to_rgba(ln.get_markerfacecolor()) == to_rgba("white")) for ln in lines}
    assert len(looks) == 4 and len({m for m, _ in looks}) == 4          # four shapes, and the fill alternates
    assert {f for _, f in looks} == {True, False}
    # every loss's marks stay inside its row: the row of loss i spans i ± 0.5
    for ln in lines:
        for x, y in zip(ln.get_xdata(), ln.get_ydata()):
            loss = paper.loc[np.isclose(paper["paper_gain"], x), "loss"].iloc[0]
            assert abs(y - LOSSES.index(loss)) < 0.5
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend[:2] == ["ours, η chosen on held-out classes", "ours, the paper's η"]
    assert legend[2:] == ["paper, CUB", "paper, Cars", "paper, SOP", "paper, In-Shop"]


def test_headline_paper_marks_never_cover_each_other():
    g, paper = headline_frames()
    fig = results.headline_figure(g, paper)
    ax = fig.axes[0]
    renderer(fig)
    pts = np.vstack([ax.transData.transform(np.column_stack([ln.get_xdata(), ln.get_ydata()]))
                     for ln in paper_lines(ax)])
    size = max(ln.get_markersize() for ln in paper_lines(ax)) * fig.dpi / 72      # a marker's width in px
    for (x1, y1), (x2, y2) in itertools.combinations(pts, 2):
        assert abs(x1 - x2) >= 0.9 * size or abs(y1 - y2) >= 0.9 * size, ((x1, y1), (x2, y2))
    # the two ms marks 0.1 point apart sit on different lines
    ms = [tuple(p) for ln in paper_lines(ax) for p in zip(ln.get_xdata(), ln.get_ydata()) if p[0] in (1.66, 1.76)]
    assert len(ms) == 2 and ms[0][1] != ms[1][1]


def test_headline_legend_sits_below_the_axes_and_is_legible_on_a_phone():
    g, paper = headline_frames()
    fig = results.headline_figure(g, paper)
    ax = fig.axes[0]
    r = renderer(fig)
    leg = ax.get_legend().get_window_extent(r)
    xlabel = ax.xaxis.label.get_window_extent(r)
    assert leg.y1 <= xlabel.y0 + 1                                   # below the x label, not beside the axes
    assert 0 <= leg.x0 and leg.x1 <= fig.bbox.width
    scale = PHONE_PX / fig.bbox.width                                # how much smaller a phone shows the image
    for t in ax.get_legend().get_texts():
        assert t.get_window_extent(r).height * scale >= 10, t.get_text()
    assert overlaps(fig) == [] and outside(fig) == []
    assert fig.get_size_inches()[0] <= BOOK_WIDTH


def test_headline_without_the_paper_and_with_one_dataset():
    g, paper = headline_frames()
    fig = results.headline_figure(g)
    assert paper_lines(fig.axes[0]) == [] and len(fig.axes[0].get_legend().get_texts()) == 2
    one = results.headline_figure(g, paper[paper["dataset"] == "SOP"])
    assert [t.get_text() for t in one.axes[0].get_legend().get_texts()][2:] == ["paper, SOP"]
    with pytest.raises(ValueError, match="paper_gain"):
        results.headline_figure(g, paper.drop(columns="paper_gain"))


def test_pack_lines_keeps_close_values_apart():
    assert results.pack_lines([1.0, 5.0, 9.0], 1.0) == [0, 0, 0]
    assert results.pack_lines([1.66, 1.76, 2.38, 2.65], 0.2) == [0, 1, 0, 0]
    assert results.pack_lines([1.0, 1.05, 1.1], 0.2) == [0, 1, 2]
    assert results.pack_lines([2.0, float("nan")], 0.2) == [0, 0]


# ---------------------------------------------------------------------------------------- the claims figure

def claims_table(n: int = 12):
    rng = np.random.default_rng(0)
    verdicts = list(VERDICT_COLORS)
    rows = []
    for i in range(n):
        e = float(rng.normal(0, 1.5))
        rows.append(dict(claim=f"Q{i}", unit="pp", estimate=e, ci_lo=e - 0.6, ci_hi=e + 0.5,
                         verdict=verdicts[i % len(verdicts)], expected_sign=1, paper_value=np.nan,
                         text=f"SEC helps loss number {i} (a short aside)" if i % 3 else
                         "SEC improves R@1 on average over the losses, with η chosen on held-out classes (the "
                         "primary test), and a long tail of words that cannot fit in two lines of the column"))
    t = pd.DataFrame(rows)
    t.loc[1, "paper_value"] = 1.2                        # inside the axis: a diamond
    t.loc[2, "paper_value"] = -40.0                      # far beyond it: an arrow at the edge with the value
    extra = dict(claim="N1", unit="norm", estimate=3.0, ci_lo=2.0, ci_hi=4.0, verdict="reproduced", expected_sign=1,
                 paper_value=np.nan, text="another unit")
    return pd.concat([t, pd.DataFrame([extra])], ignore_index=True)


def test_claims_rows_carry_id_and_words_and_draw_the_intervals():
    t = claims_table()
    fig = claims_fig.claims_figure(t, "pp")
    ax = fig.axes[0]
    pp = t[t["unit"] == "pp"]
    labels = [x.get_text() for x in ax.get_yticklabels()]
    assert len(labels) == len(pp)
    for lab, (_, r) in zip(labels, pp.iterrows()):
        flat = " ".join(lab.split())
        assert flat.startswith(f"{r['claim']}: ") and "SEC" in flat
        assert lab.count("\n") < claims_fig.CLAIM_LABEL_LINES
        assert all(len(line) <= claims_fig.CLAIM_LABEL_CHARS for line in lab.split("\n"))
    ys = [y for y in ax.get_yticks()]
    # one interval line and one dot per row, at the row's height, in its verdict's colour
    segs = {round(float(ln.get_ydata()[0]), 6): ln for ln in ax.lines
            if len(ln.get_xdata()) == 2 and ln.get_ydata()[0] == ln.get_ydata()[1]}
    for y, (_, r) in zip(ys, pp.iterrows()):
        ln = segs[round(float(y), 6)]
        assert sorted(ln.get_xdata()) == pytest.approx([r["ci_lo"], r["ci_hi"]])
        assert to_rgba(ln.get_color()) == to_rgba(VERDICT_COLORS[r["verdict"]])
    lo, hi = ax.get_xlim()
    assert lo < pp["ci_lo"].min() and hi > pp["ci_hi"].max() and lo < 0 < hi
    # the paper's number inside the axis is a diamond at its value; the one far beyond it an arrow with its value
    diamonds = [ln for ln in ax.lines if ln.get_marker() == "D"]
    assert [float(d.get_xdata()[0]) for d in diamonds] == [1.2]
    assert lo > -40 and any(a.get_text() == "−40" for a in ax.texts)
    verdicts = [a.get_text() for a in ax.texts if a.get_text() in VERDICT_COLORS]
    assert verdicts == list(pp["verdict"])
    assert overlaps(fig) == [] and outside(fig) == []


def test_claims_figure_is_as_tall_as_its_labels():
    t = claims_table(29)
    fig = claims_fig.claims_figure(t, "pp")
    h = fig.get_size_inches()[1]
    assert h <= 0.4 * 29 + 0.8                            # two lines a row at most; the old figure took 0.45 a row
    assert overlaps(fig) == []
    with pytest.raises(ValueError, match="verdict"):
        claims_fig.claims_figure(t.drop(columns="verdict"))


def test_claim_label_wraps_then_drops_asides_then_shortens():
    assert claims_fig.claim_label("C1", "SEC helps") == "C1: SEC helps"
    lab = claims_fig.claim_label("C4a", "SEC improves R@1 for the triplet loss (T in the paper), at the paper's η",
                             chars=40)
    assert lab.split("\n") == ["C4a: SEC improves R@1 for the triplet", "loss (T in the paper), at the paper's η"]
    long = ("SEC improves R@1 for the normalized N-pair loss (NNP in the paper, Table 1, every dataset) when η "
            "is chosen on held-out classes")
    lab = claims_fig.claim_label("C4c", long, chars=48)
    assert "(" not in lab and lab.count("\n") == 1 and lab.endswith("held-out classes")
    lab = claims_fig.claim_label("S1", "word " * 60, chars=40)
    assert lab.count("\n") == 1 and lab.endswith("…") and all(len(x) <= 40 for x in lab.split("\n"))


# ------------------------------------------------------------------------------------------ the scale figure

ARMS = ("none", "L2-reg (μ = 0)", "SEC", "relative SEC", "fixed-scale SEC")
VARIANT_OF = {"none": "none", "L2-reg (μ = 0)": "l2reg", "SEC": "sec", "relative SEC": "sec-relative",
              "fixed-scale SEC": "sec-fixed"}


def arm_runs():
    """Five seeds per loss and arm; the fixed-scale arm is 2.5 points low for triplet and 22 points low for ms."""
    rng = np.random.default_rng(1)
    means = {"none": 77.4, "L2-reg (μ = 0)": 77.8, "SEC": 78.0, "relative SEC": 77.9, "fixed-scale SEC": 77.5}
    low = {"triplet": 75.4, "ms": 55.4}
    rows = []
    for loss in LOSSES:
        for arm in ARMS:
            m = low.get(loss, means[arm]) if arm == "fixed-scale SEC" else means[arm]
            for seed in range(5):
                rows.append(dict(loss=loss, arm=arm, variant=VARIANT_OF[arm], seed=seed,
                                 **{"R@1": m + float(rng.normal(0, 0.3))}))
    return pd.DataFrame(rows)


def test_each_scale_panel_fits_its_own_arms_and_points_to_one_far_off():
    runs = arm_runs()
    fig = scale_fig.arm_figure(runs, list(ARMS))
    for ax, loss in zip(fig.axes, LOSSES):
        sub = runs[runs["loss"] == loss]
        lo, hi = ax.get_xlim()
        bars = errorbars(ax)
        arrows = [a for a in ax.texts if a.get_text().startswith("mean ")]
        on = [a for a in ARMS if not (loss == "ms" and a == "fixed-scale SEC")]
        assert len(bars) == len(on)
        for x, y, (wlo, whi) in bars:
            arm = ARMS[int(round(y))]
            pts = sub.loc[sub["arm"] == arm, "R@1"]
            m, clo, chi, _ = stats_t(pts)
            assert x == pytest.approx(m) and [wlo, whi] == pytest.approx([clo, chi])
            assert lo <= min(clo, pts.min()) and max(chi, pts.max()) <= hi       # the interval and its seeds
        if loss == "ms":
            far = sub.loc[sub["arm"] == "fixed-scale SEC", "R@1"].mean()
            assert lo > far and [a.get_text() for a in arrows] == [f"mean {far:.1f}"]
            assert hi - lo < 5                                # the four close arms fill the axis
        else:
            assert arrows == []
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == list(ARMS)
    assert overlaps(fig) == [] and outside(fig) == []


def stats_t(x):
    x = np.asarray(x, float)
    half = stats.t.ppf(0.975, len(x) - 1) * x.std(ddof=1) / np.sqrt(len(x))
    return x.mean(), x.mean() - half, x.mean() + half, len(x)


def test_off_axis_arms_takes_out_only_an_arm_that_would_flatten_the_rest():
    close = {"a": (77.0, 78.0), "b": (77.2, 78.4), "c": (77.5, 78.5)}
    assert scale_fig.off_axis_arms(close) == []
    assert scale_fig.off_axis_arms({**close, "low": (75.0, 75.9)}) == []            # 3.5 wide against 1.5
    assert scale_fig.off_axis_arms({**close, "low": (53.0, 57.0)}) == ["low"]
    assert scale_fig.off_axis_arms({**close, "low": (53.0, 57.0), "high": (99.0, 99.5)}) == ["low", "high"]
    assert scale_fig.off_axis_arms({"a": (1.0, 2.0), "b": (50.0, 51.0)}) == []      # two arms always stay


# ------------------------------------------------------------------------------------ the convergence figure

STEPS = (0, 100, 200, 400, 1000, 2000, 5000)


def conv_frames():
    """Runs without and with SEC for two losses and four seeds, and their evaluations: SEC behind early for ms."""
    rng = np.random.default_rng(2)
    runs, evals = [], []
    for loss in ("triplet", "ms"):
        for v in ("none", "sec"):
            for seed in range(4):
                key = f"{loss}-{v}-{seed}"
                runs.append(dict(key=key, loss=loss, variant=v, seed=seed))
                for t in STEPS:
                    lag = 5.0 if (loss == "ms" and v == "sec" and 0 < t < 2000) else 0.0
                    noise = 0.0 if t == 0 else float(rng.normal(0, 0.5))
                    evals.append(dict(key=key, step=t, **{"R@1": 70 * (1 - np.exp(-t / 800)) + 7 - lag + noise}))
    return pd.DataFrame(runs), pd.DataFrame(evals)


def test_paired_curve_is_the_mean_seed_difference_with_its_t_interval():
    runs, evals = conv_frames()
    d = sweeps.paired_curve(runs, evals).set_index(["loss", "step"])
    m = evals.merge(runs, on="key")
    for loss in ("triplet", "ms"):
        for t in STEPS[1:]:
            w = m[(m["loss"] == loss) & (m["step"] == t)].pivot(index="seed", columns="variant", values="R@1")
            mean, lo, hi, n = stats_t(w["sec"] - w["none"])
            r = d.loc[(loss, t)]
            assert (r["estimate"], r["ci_lo"], r["ci_hi"], r["n"]) == pytest.approx((mean, lo, hi, n))
    assert d.loc[("ms", 0), "estimate"] == 0 and np.isnan(d.loc[("ms", 0), "ci_lo"])   # one network at step 0
    with pytest.raises(ValueError, match="variants"):
        sweeps.paired_curve(runs[runs["variant"] == "none"].assign(variant="l2reg"), evals)


def test_convergence_figure_sets_sec_against_none_with_intervals():
    from sec_lib.chapters import convergence
    runs, evals = conv_frames()
    band = convergence.curve_band(runs, evals)
    diff = sweeps.paired_curve(runs, evals)
    fig = sweeps.convergence_figure(band, diff=diff)
    top, bottom = fig.axes[:2], fig.axes[2:]
    assert len(fig.axes) == 4
    for ax, loss in zip(top, ("triplet", "ms")):
        lines = {ln.get_label(): ln for ln in ax.lines if not ln.get_label().startswith("_")}
        assert sorted(lines) == ["SEC", "none"]                   # one line per arm
        for name, v in (("none", "none"), ("SEC", "sec")):
            b = band[(band["loss"] == loss) & (band["variant"] == v)]
            assert list(lines[name].get_ydata()) == pytest.approx(list(b["mean"]))
            assert to_rgba(lines[name].get_color()) == to_rgba(VARIANT_COLORS[v])
        assert ax.get_title() == loss
    for ax, loss in zip(bottom, ("triplet", "ms")):
        d = diff[diff["loss"] == loss]
        line = [ln for ln in ax.lines if len(ln.get_xdata()) == len(d)][0]
        assert list(line.get_ydata()) == pytest.approx(list(d["estimate"]))
        lo, hi = ax.get_ylim()
        assert lo < min(d["ci_lo"].min(), 0) and hi > max(d["ci_hi"].max(), 0)      # its own data and 0
        assert any(list(ln.get_ydata()) == [0, 0] for ln in ax.lines)
        assert len(ax.collections) == 1                             # the 95% band
    assert "SEC − none" in bottom[0].get_ylabel()
    assert diff.loc[diff["loss"] == "ms", "estimate"].min() < -3    # SEC behind: the lag shows
    assert overlaps(fig) == [] and outside(fig) == []
    # without a difference: one row, as before
    assert len(sweeps.convergence_figure(band).axes) == 2
