"""One function per figure of the book. Each takes tidy frames (from :func:`sec_lib.store.load_runs`,
:mod:`sec_lib.report` or :mod:`sec_lib.paper`) and returns a :class:`matplotlib.figure.Figure`.

Nothing here trains or reads the store. Figures are built without pyplot (no global figure
registry, nothing to close); the house style is applied inside each call with
:func:`style` (an ``rc_context``), so importing this module changes no setting. In a notebook,
``%matplotlib inline`` makes a returned Figure display as an image.

Colours: one per variant everywhere (:data:`VARIANT_COLORS`): none grey, L2-reg blue, SEC orange
(Okabe-Ito palette, readable for colour-blind readers); one marker per loss (:data:`LOSS_MARKERS`).

Run-level figures (one run; a frame with several run keys draws one line per key) follow the
instruments of :mod:`sec_lib.train`: :func:`loss_parts`, :func:`tracked_norms` (rebuttal Fig. 1),
:func:`batch_mean_norm` (rebuttal Fig. 2), :func:`norm_variance`, :func:`grad_vs_norm`,
:func:`grad_slope_curve`, :func:`angle_spread`, :func:`cosine_hist`, :func:`violations`,
:func:`eval_curves`; :func:`run_dashboard` composes them. Most accept ``ax=`` (or ``axes=``) to
draw into an existing figure.

Across-run figures: :func:`metric_bars`, :func:`gains_vs_paper`, :func:`norm_distributions`,
:func:`norm_trajectories`, :func:`variance_vs_gain`, :func:`grad_slope_stats`; the data page's
:func:`glyph_grid`.
"""
from __future__ import annotations

import contextlib
import math
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

__all__ = [
    "VARIANT_COLORS", "VARIANT_LABELS", "LOSS_MARKERS", "BOOK_WIDTH", "style", "variant_color",
    "loss_parts", "tracked_norms", "batch_mean_norm", "norm_variance", "grad_vs_norm", "grad_slope_curve",
    "angle_spread", "cosine_hist", "violations", "eval_curves", "run_dashboard",
    "metric_bars", "gains_vs_paper", "norm_distributions", "norm_trajectories", "variance_vs_gain",
    "grad_slope_stats", "glyph_grid", "loglog_line",
]

#: Okabe-Ito colours per variant (the same on every page); the order is the book's variant order.
VARIANT_COLORS = {"none": "#4d4d4d", "l2reg": "#0072B2", "sec": "#D55E00", "sec-ema": "#009E73",
                  "sec-fixed": "#CC79A7"}
VARIANT_LABELS = {"none": "none", "l2reg": "L2-reg (μ = 0)", "sec": "SEC (μ = batch mean)",
                  "sec-ema": "SEC (μ = EMA)", "sec-fixed": "SEC (fixed μ)"}
#: Marker per loss; the order is the book's loss order (the paper's four losses first).
LOSS_MARKERS = {"triplet": "o", "semihard": "s", "npair": "^", "ms": "D", "tml": "v", "ntxent": "P"}
POS_COLOR, NEG_COLOR = "#009E73", "#CC79A7"
#: Axis labels of the steps table's columns.
STEP_LABELS = {"norm_var": "Var(‖f‖) in the batch", "norm_mean": "mean ‖f‖ in the batch", "mu": "μ",
               "grad_slope": "gradient-vs-norm slope", "dtheta_cv": "CV of Δθ", "dtheta_mean": "mean Δθ [rad]",
               "violations": "violating triplets", "loss_metric": "metric loss", "pos_cos": "mean positive cosine",
               "neg_cos": "mean negative cosine", "grad_norm_cv": "CV of ‖∂L/∂f‖"}
#: Figure width that fits the book's text column (inches).
BOOK_WIDTH = 8.0
DPI = 100

_RC = {
    "font.size": 9, "axes.titlesize": 9.5, "axes.labelsize": 9, "legend.fontsize": 7.5,
    "xtick.labelsize": 8, "ytick.labelsize": 8, "figure.titlesize": 10.5,
    "axes.spines.top": False, "axes.spines.right": False, "axes.grid": True, "grid.alpha": 0.3,
    "grid.linewidth": 0.6, "lines.linewidth": 1.3, "legend.frameon": False, "image.interpolation": "nearest",
}


@contextlib.contextmanager
def style():
    """The book's matplotlib style, for the duration of a ``with`` block only."""
    import matplotlib
    with matplotlib.rc_context(_RC):
        yield


def variant_color(variant: str) -> str:
    """The colour of a variant (grey-black for unknown ones)."""
    return VARIANT_COLORS.get(str(variant), "#000000")


def _figure(w: float, h: float):
    from matplotlib.figure import Figure
    return Figure(figsize=(w, h), dpi=DPI, layout="constrained")


def _fig_ax(ax, size=(BOOK_WIDTH * 0.62, 3.0)):
    if ax is not None:
        return ax.figure, ax
    fig = _figure(*size)
    return fig, fig.subplots()


def _fig_axes(axes, n, size):
    if axes is not None:
        axes = list(np.ravel(axes))
        if len(axes) != n:
            raise ValueError(f"axes must hold {n} Axes, got {len(axes)}")
        return axes[0].figure, axes
    fig = _figure(*size)
    return fig, list(np.ravel(fig.subplots(1, n)))


def _need(df: pd.DataFrame, cols: Sequence[str], name: str) -> pd.DataFrame:
    if not isinstance(df, pd.DataFrame):
        raise ValueError(f"{name} must be a pandas DataFrame, got {type(df).__name__}")
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise ValueError(f"{name} lacks column(s) {missing}; it has {list(df.columns)}")
    return df


def _by_key(df: pd.DataFrame, labels: Mapping | None):
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


def _smooth(y: pd.Series) -> pd.Series:
    w = max(1, len(y) // 25)
    return y.rolling(w, center=True, min_periods=1).mean() if w > 1 else y


def _line(ax, x, y, label, color=None, smooth=True):
    """A thin raw line plus its rolling mean (when there are many steps)."""
    y = pd.Series(np.asarray(y, float))
    if smooth and len(y) > 50:
        base = ax.plot(x, y, lw=0.6, alpha=0.35, color=color)[0]
        return ax.plot(x, _smooth(y), color=base.get_color(), label=label)[0]
    return ax.plot(x, y, color=color, label=label, marker="." if len(y) <= 12 else None)[0]


def _log_ticks(ax):
    """Readable tick labels on log axes: plain numbers, and linear-spaced ticks when the data
    span less than a decade (the default labels every minor tick there and they overlap)."""
    from matplotlib import ticker
    for axis, lim in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
        if axis.get_scale() != "log":
            continue
        lo, hi = sorted(lim)
        if lo > 0 and hi / lo < 10:
            axis.set_major_locator(ticker.MaxNLocator(nbins=4))
            axis.set_minor_locator(ticker.NullLocator())
            axis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:.3g}"))
        axis.set_minor_formatter(ticker.NullFormatter())


def _empty(ax, text: str):
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, fontsize=8, color="0.4")


def _finish_legend(ax, **kw):
    handles, labels = ax.get_legend_handles_labels()
    if any(lab and not lab.startswith("_") for lab in labels):
        ax.legend(**kw)


# =============================================================================================
# Run-level figures (the train page)
# =============================================================================================

def loss_parts(steps: pd.DataFrame, ax=None, labels: Mapping | None = None):
    """The two parts of the objective per step: the metric loss and the weighted SEC term η·L_sec."""
    _need(steps, ["step", "loss_metric"], "steps")
    with style():
        fig, ax = _fig_ax(ax)
        for lab, s in _by_key(steps, labels):
            pre = f"{lab}: " if lab else ""
            _line(ax, s["step"], s["loss_metric"], f"{pre}metric loss")
            if "loss_sec" in s and (s["loss_sec"].fillna(0) != 0).any():
                _line(ax, s["step"], s["loss_sec"], f"{pre}η·L_sec (regulariser)")
        ys = np.concatenate([l.get_ydata() for l in ax.lines]) if ax.lines else np.array([])
        if len(ys) and np.all(np.isfinite(ys)) and (ys > 0).all():
            ax.set_yscale("log")          # the regulariser is often orders of magnitude below the metric loss
            _log_ticks(ax)
        ax.set_xlabel("iteration")
        ax.set_ylabel("loss")
        ax.set_title("Loss parts per iteration (raw, and rolling mean)")
        _finish_legend(ax)
    return fig


def tracked_norms(tracked: pd.DataFrame, ax=None, max_samples: int = 64):
    """Norm ‖f_i‖ of a fixed set of training samples over training (one line each; rebuttal Fig. 1)."""
    _need(tracked, ["step", "sample", "norm"], "tracked")
    with style():
        fig, ax = _fig_ax(ax)
        if len(tracked) == 0:
            _empty(ax, "no tracked samples in this run")
        t = tracked[tracked["key"] == tracked["key"].iloc[0]] if "key" in tracked and len(tracked) else tracked
        samples = list(dict.fromkeys(t["sample"]))[:max_samples]
        import matplotlib
        cmap = matplotlib.colormaps["viridis"]
        first = t[t["step"] == t["step"].min()].set_index("sample")["norm"] if len(t) else pd.Series(dtype=float)
        order = first.reindex(samples).rank(method="first").fillna(1).to_dict()
        for s in samples:
            d = t[t["sample"] == s].sort_values("step")
            c = cmap(0.1 + 0.8 * (order.get(s, 1) - 1) / max(1, len(samples) - 1))
            ax.plot(d["step"], d["norm"], color=c, lw=0.9, alpha=0.85)
        ax.set_xlabel("iteration")
        ax.set_ylabel("‖f_i‖ (raw embedding norm)")
        ax.set_title(f"Norms of {len(samples)} tracked training samples (cf. rebuttal Fig. 1)")
    return fig


def batch_mean_norm(steps: pd.DataFrame, ax=None, labels: Mapping | None = None):
    """Mean ‖f‖ of each training batch with a ±1 std band, and the μ SEC used (cf. rebuttal Fig. 2)."""
    _need(steps, ["step", "norm_mean", "norm_var"], "steps")
    with style():
        fig, ax = _fig_ax(ax)
        for lab, s in _by_key(steps, labels):
            pre = f"{lab}: " if lab else ""
            sd = np.sqrt(s["norm_var"].clip(lower=0))
            line = _line(ax, s["step"], s["norm_mean"], f"{pre}batch mean ‖f‖")
            ax.fill_between(s["step"], s["norm_mean"] - sd, s["norm_mean"] + sd, color=line.get_color(), alpha=0.15,
                            lw=0, label=f"{pre}± 1 std within the batch")
            if "mu" in s and s["mu"].notna().any():
                ax.plot(s["step"], s["mu"], ls="--", color="k", lw=1.0, label=f"{pre}μ used by the regulariser")
        ax.set_xlabel("iteration")
        ax.set_ylabel("‖f‖")
        ax.set_title("Batch mean norm per iteration (cf. rebuttal Fig. 2)")
        _finish_legend(ax)
    return fig


def norm_variance(steps: pd.DataFrame, ax=None, labels: Mapping | None = None, log: bool = True):
    """Variance of ‖f_i‖ within each training batch, per iteration."""
    _need(steps, ["step", "norm_var"], "steps")
    with style():
        fig, ax = _fig_ax(ax)
        for lab, s in _by_key(steps, labels):
            _line(ax, s["step"], s["norm_var"], lab or None)
        if log and (steps["norm_var"] > 0).any():
            ax.set_yscale("log")
            _log_ticks(ax)
        ax.set_xlabel("iteration")
        ax.set_ylabel("Var(‖f_i‖) in the batch")
        ax.set_title("Norm variance within the batch per iteration")
        _finish_legend(ax)
    return fig


def loglog_line(x, y) -> tuple[float, float, float]:
    """Least-squares line of log y on log x over the positive finite pairs: (slope, intercept, r²)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    keep = (x > 0) & (y > 0) & np.isfinite(x) & np.isfinite(y)
    if keep.sum() < 3:
        return math.nan, math.nan, math.nan
    lx, ly = np.log(x[keep]), np.log(y[keep])
    slope, icpt = np.polyfit(lx, ly, 1)
    ss = ((ly - ly.mean()) ** 2).sum()
    r2 = 1 - ((ly - (slope * lx + icpt)) ** 2).sum() / ss if ss > 0 else math.nan
    return float(slope), float(icpt), float(r2)


def grad_vs_norm(grad_scatter: pd.DataFrame, ax=None):
    """Per-sample ‖∂L_metric/∂f_i‖ against ‖f_i‖ (log-log) at a few steps, each with its fitted slope.

    The theory (Prop. 2) predicts slope −1 at a fixed direction; across a batch the directions
    differ, so the fitted slope shows how much of the spread in gradient size the norms explain.
    """
    _need(grad_scatter, ["step", "norm", "grad_norm"], "grad_scatter")
    with style():
        fig, ax = _fig_ax(ax)
        g = grad_scatter[grad_scatter["key"] == grad_scatter["key"].iloc[0]] if "key" in grad_scatter and len(
            grad_scatter) else grad_scatter
        steps = sorted(g["step"].unique())
        import matplotlib
        cmap = matplotlib.colormaps["plasma"]
        for i, st in enumerate(steps):
            d = g[(g["step"] == st) & (g["norm"] > 0) & (g["grad_norm"] > 0)]
            c = cmap(0.1 + 0.7 * i / max(1, len(steps) - 1))
            slope, icpt, r2 = loglog_line(d["norm"], d["grad_norm"])
            ax.scatter(d["norm"], d["grad_norm"], s=9, color=c, alpha=0.6,
                       label=f"step {st}: slope {slope:.2f} (r² {r2:.2f})")
            if np.isfinite(slope):
                xs = np.geomspace(d["norm"].min(), d["norm"].max(), 20)
                ax.plot(xs, np.exp(icpt) * xs ** slope, color=c, lw=1.2)
        if len(g) and (g["norm"] > 0).any() and (g["grad_norm"] > 0).any():
            ax.set_xscale("log")
            ax.set_yscale("log")
            d0 = g[(g["step"] == steps[0]) & (g["norm"] > 0) & (g["grad_norm"] > 0)]
            if len(d0):
                x0, y0 = np.exp(np.log(d0["norm"]).mean()), np.exp(np.log(d0["grad_norm"]).mean())
                xs = np.geomspace(d0["norm"].min(), d0["norm"].max(), 10)
                ax.plot(xs, y0 * x0 / xs, ls=":", color="k", lw=1, label="slope −1 (fixed direction)")
        else:
            _empty(ax, "no gradient samples")
        _log_ticks(ax)
        ax.set_xlabel("‖f_i‖")
        ax.set_ylabel("‖∂L_metric/∂f_i‖")
        ax.set_title("Gradient magnitude vs norm, per sample (log-log)")
        _finish_legend(ax, loc="best")
    return fig


def grad_slope_curve(steps: pd.DataFrame, ax=None, labels: Mapping | None = None):
    """The per-step log-log slope of ‖∂L/∂f_i‖ against ‖f_i‖ within the batch, with the −1 reference."""
    _need(steps, ["step", "grad_slope"], "steps")
    with style():
        fig, ax = _fig_ax(ax)
        for lab, s in _by_key(steps, labels):
            _line(ax, s["step"], s["grad_slope"], lab or "fitted slope")
        ax.axhline(-1, ls=":", color="k", lw=1, label="−1 (theory, fixed direction)")
        ax.axhline(0, color="0.6", lw=0.8)
        ax.set_xlabel("iteration")
        ax.set_ylabel("slope of log‖∂L/∂f‖ vs log‖f‖")
        ax.set_title("Gradient-vs-norm slope within each batch")
        _finish_legend(ax)
    return fig


def angle_spread(steps: pd.DataFrame, axes=None, labels: Mapping | None = None):
    """How unevenly samples turn: mean ± std of the per-sample angle Δθ moved in one update, and
    its coefficient of variation (std / mean). Two panels."""
    _need(steps, ["step", "dtheta_mean", "dtheta_std", "dtheta_cv"], "steps")
    with style():
        fig, (a1, a2) = _fig_axes(axes, 2, (BOOK_WIDTH, 2.9))
        for lab, s in _by_key(steps, labels):
            s = s.dropna(subset=["dtheta_mean"])
            deg_m, deg_s = np.degrees(s["dtheta_mean"]), np.degrees(s["dtheta_std"])
            line = _line(a1, s["step"], deg_m, lab or "mean Δθ")
            a1.fill_between(s["step"], deg_m - deg_s, deg_m + deg_s, color=line.get_color(), alpha=0.15, lw=0,
                            label=(f"{lab}: " if lab else "") + "± 1 std across the batch")
            _line(a2, s["step"], s["dtheta_cv"], lab or None)
        a1.set_xlabel("iteration")
        a1.set_ylabel("Δθ per update [degrees]")
        a1.set_title("Angle each sample turned in one update")
        a2.set_xlabel("iteration")
        a2.set_ylabel("std(Δθ) / mean(Δθ)")
        a2.set_title("Spread of the turning angles (CV)")
        _finish_legend(a1)
        _finish_legend(a2)
    return fig


def cosine_hist(cosines: pd.DataFrame, ax=None, bins: int = 40):
    """Histograms of the cosine similarity of sampled positive and negative test pairs."""
    _need(cosines, ["kind", "cos"], "cosines")
    with style():
        fig, ax = _fig_ax(ax)
        edges = np.linspace(-1, 1, bins + 1)
        for kind, color, name in (("pos", POS_COLOR, "positive pairs"), ("neg", NEG_COLOR, "negative pairs")):
            v = cosines.loc[cosines["kind"] == kind, "cos"].to_numpy(float)
            if len(v):
                ax.hist(v, bins=edges, density=True, histtype="stepfilled", alpha=0.35, color=color,
                        label=f"{name} (mean {v.mean():.2f}, n={len(v)})")
                ax.axvline(v.mean(), color=color, lw=1.2, ls="--")
        if len(cosines) == 0:
            _empty(ax, "no cosine samples")
        ax.set_xlim(-1, 1)
        ax.set_xlabel("cos(f̂_i, f̂_j)")
        ax.set_ylabel("density")
        ax.set_title("Cosine similarity of test pairs")
        _finish_legend(ax, loc="upper left")
    return fig


def violations(steps: pd.DataFrame, ax=None, labels: Mapping | None = None):
    """Fraction of the batch's (a, p, n) triplets with d_an ≤ d_ap, per iteration."""
    _need(steps, ["step", "violations"], "steps")
    with style():
        fig, ax = _fig_ax(ax)
        for lab, s in _by_key(steps, labels):
            _line(ax, s["step"], s["violations"], lab or None)
        ax.set_ylim(bottom=0)
        ax.set_xlabel("iteration")
        ax.set_ylabel("violating triplets (fraction)")
        ax.set_title("Triplet violations in the training batch")
        _finish_legend(ax)
    return fig


def eval_curves(evals: pd.DataFrame, axes=None, ks: Sequence[str] = ("R@1", "R@2", "R@4", "R@8")):
    """Test metrics during training: Recall@K (left) and NMI / F1 of k-means (right), in percent."""
    _need(evals, ["step"], "evals")
    with style():
        fig, (a1, a2) = _fig_axes(axes, 2, (BOOK_WIDTH, 2.9))
        import matplotlib
        cmap = matplotlib.colormaps["Blues"]
        e = evals.sort_values("step")
        ks = [k for k in ks if k in e.columns]
        for i, k in enumerate(ks):
            a1.plot(e["step"], e[k], marker="o", ms=3, color=cmap(0.95 - 0.5 * i / max(1, len(ks) - 1)), label=k)
        n_clust = 0
        for m, c in (("NMI", "#E69F00"), ("F1", "#56B4E9")):
            if m in e.columns:
                d = e.dropna(subset=[m])                 # k-means may run only at the end of training
                n_clust = max(n_clust, len(d))
                a2.plot(d["step"], d[m], marker="o", ms=3 if len(d) > 1 else 6, color=c,
                        label=f"{m}" if len(d) > 1 else f"{m} = {d[m].iloc[-1]:.1f}" if len(d) else m)
        if len(e):
            a2.set_xlim(a1.get_xlim())
        a1.set_title("Recall@K on the test classes")
        a2.set_title("Clustering quality on the test classes" if n_clust > 1 else
                     "Clustering quality (k-means at the end only)")
        for a in (a1, a2):
            a.set_xlabel("iteration")
            a.set_ylabel("%")
            _finish_legend(a)
    return fig


def run_dashboard(frames, title: str | None = None):
    """Every instrument of one run on one page-wide figure (12 panels).

    ``frames``: a :class:`~sec_lib.store.Frames` holding one run (``steps``, ``tracked``, ``evals``,
    ``cosines``, ``grad_scatter``).
    """
    for t in ("steps", "tracked", "evals", "cosines", "grad_scatter"):
        if not hasattr(frames, t):
            raise ValueError(f"frames lacks the table {t!r}; pass a store.Frames (load_runs) of one run")
    with style():
        fig = _figure(BOOK_WIDTH, 16)
        ax = fig.subplots(6, 2)
        st = frames.steps
        loss_parts(st, ax=ax[0, 0])
        violations(st, ax=ax[0, 1])
        tracked_norms(frames.tracked, ax=ax[1, 0])
        batch_mean_norm(st, ax=ax[1, 1])
        norm_variance(st, ax=ax[2, 0])
        grad_vs_norm(frames.grad_scatter, ax=ax[2, 1])
        angle_spread(st, axes=ax[3])
        grad_slope_curve(st, ax=ax[4, 0])
        cosine_hist(frames.cosines, ax=ax[4, 1])
        eval_curves(frames.evals, axes=ax[5])
        if title:
            fig.suptitle(title)
    return fig


# =============================================================================================
# Across runs: the main table and the norms page
# =============================================================================================

def _variants_in(df):
    present = list(dict.fromkeys(df["variant"]))
    return [v for v in VARIANT_COLORS if v in present] + [v for v in present if v not in VARIANT_COLORS]


def _losses_in(df):
    present = list(dict.fromkeys(df["loss"]))
    return [v for v in LOSS_MARKERS if v in present] + [v for v in present if v not in LOSS_MARKERS]


def metric_bars(table: pd.DataFrame, metric: str = "R@1", ax=None):
    """Grouped bars of one metric per loss (groups) × variant (colours) with 95% CI error bars.

    ``table``: the tidy output of :func:`sec_lib.paper.main_table` (or :func:`sec_lib.report.summarize`
    by loss and variant).
    """
    _need(table, ["loss", "variant", "metric", "mean", "ci_lo", "ci_hi"], "table")
    t = table[table["metric"] == metric]
    if not len(t):
        raise ValueError(f"metric = {metric!r} is not in the table; valid: {sorted(table['metric'].unique())}")
    with style():
        fig, ax = _fig_ax(ax, (BOOK_WIDTH, 3.2))
        losses, variants = _losses_in(t), _variants_in(t)
        width = 0.8 / len(variants)
        for j, v in enumerate(variants):
            d = t[t["variant"] == v].set_index("loss").reindex(losses)
            x = np.arange(len(losses)) + (j - (len(variants) - 1) / 2) * width
            err = np.vstack([d["mean"] - d["ci_lo"], d["ci_hi"] - d["mean"]])
            err = np.where(np.isfinite(err), err, 0)
            ax.bar(x, d["mean"], width * 0.92, color=variant_color(v), label=VARIANT_LABELS.get(v, v))
            ax.errorbar(x, d["mean"], yerr=err, fmt="none", ecolor="k", elinewidth=1, capsize=2)
        ax.set_xticks(np.arange(len(losses)), losses)
        lo = np.nanmin(t["ci_lo"].fillna(t["mean"]))
        hi = np.nanmax(t["ci_hi"].fillna(t["mean"]))
        pad = 0.15 * max(hi - lo, 1e-9)
        ax.set_ylim(max(0, lo - 3 * pad) if metric not in ("test_norm_var", "train_norm_var") else 0, hi + pad)
        n = int(t["n"].max()) if "n" in t else 0
        ax.set_ylabel(metric)
        ax.set_title(f"{metric} per loss and variant: mean and 95% CI over {n} seeds")
        ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5))
    return fig


def _legend_handles(variants=(), losses=(), line: bool = False):
    from matplotlib.lines import Line2D
    h = [Line2D([], [], ls="-" if line else "", marker=None if line else "o", color=variant_color(v),
                label=VARIANT_LABELS.get(v, v)) for v in variants]
    h += [Line2D([], [], ls="", marker=LOSS_MARKERS.get(l, "o"), color="0.3", mfc="none", label=l) for l in losses]
    return h


def gains_vs_paper(gvp: pd.DataFrame, metric: str = "R@1", axes=None):
    """Our gain (SEC − none, L2-reg − none; with 95% CI) against the paper's gain, one panel per paper dataset.

    ``gvp``: :func:`sec_lib.paper.gains_vs_paper`. Both axes are in percentage points; points above
    the diagonal mean a larger gain here than in the paper, points below zero a loss here.
    """
    _need(gvp, ["dataset", "loss", "variant", "metric", "ours", "ours_ci_lo", "ours_ci_hi", "paper"], "gvp")
    g = gvp[gvp["metric"] == metric]
    if not len(g):
        raise ValueError(f"metric = {metric!r} is not in the frame; valid: {sorted(gvp['metric'].unique())}")
    datasets = list(dict.fromkeys(g["dataset"]))
    with style():
        fig, axes = _fig_axes(axes, len(datasets), (BOOK_WIDTH, 3.4))
        def _lim(cols):
            v = g[cols].to_numpy(float)
            lo, hi = min(0.0, np.nanmin(v)), max(0.0, np.nanmax(v))
            pad = 0.08 * ((hi - lo) or 1.0)
            return lo - pad, hi + pad
        xlim, ylim = _lim(["paper"]), _lim(["ours_ci_lo", "ours", "ours_ci_hi"])
        for ax, ds in zip(axes, datasets):
            d = g[g["dataset"] == ds]
            for r in d.itertuples(index=False):
                yerr = [[r.ours - r.ours_ci_lo], [r.ours_ci_hi - r.ours]] if np.isfinite(r.ours_ci_lo) else None
                ax.errorbar(r.paper, r.ours, yerr=yerr, fmt=LOSS_MARKERS.get(r.loss, "o"), color=variant_color(r.variant),
                            ms=6, capsize=2, elinewidth=1)
            ax.axhline(0, color="0.5", lw=0.8)
            ax.axvline(0, color="0.5", lw=0.8)
            both = (max(xlim[0], ylim[0]), min(xlim[1], ylim[1]))
            if both[0] < both[1]:
                ax.plot(both, both, ls=":", color="k", lw=0.8)
            ax.set_xlim(*xlim)
            ax.set_ylim(*ylim)
            ax.set_xlabel(f"paper's gain on {ds} [points]")
            ax.set_ylabel("our gain on glyphs [points]")
            ax.set_title(f"{metric}: ours vs paper Table 1 ({ds})")
        from matplotlib.lines import Line2D
        diag = [Line2D([], [], ls=":", color="k", lw=0.8, label="ours = paper's")]
        axes[-1].legend(handles=_legend_handles(_variants_in(g), _losses_in(g)) + diag, loc="center left",
                        bbox_to_anchor=(1.0, 0.5), fontsize=7)
        fig.suptitle("Gain over the no-regulariser baseline: ours (mean, 95% CI over seeds) vs the paper's single runs")
    return fig


def _with_run_attrs(df: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    _need(runs, ["key", "loss", "variant"], "runs")
    cols = [c for c in ("key", "loss", "variant", "seed") if c in runs.columns]
    return df.merge(runs[cols], on="key", how="inner")


def norm_distributions(test_norms: pd.DataFrame, runs: pd.DataFrame, bins: int = 40):
    """Final test-set norm distributions per loss (columns) × variant (colours), seeds pooled.

    Top row: ‖f‖ on a log axis, one line per run (seeds and variants live on different scales).
    Bottom row: ‖f‖ divided by its run's mean norm, seeds pooled, which removes the scale and leaves
    the spread SEC targets; the legend gives the mean coefficient of variation (std / mean) per run.
    """
    _need(test_norms, ["key", "norm"], "test_norms")
    d = _with_run_attrs(test_norms, runs)
    if not len(d):
        raise ValueError("no test norms match the runs frame's keys")
    d = d[d["norm"] > 0].copy()
    d["rel"] = d["norm"] / d.groupby("key")["norm"].transform("mean")
    losses, variants = _losses_in(d), _variants_in(d)
    with style():
        fig = _figure(BOOK_WIDTH, 4.9)
        axes = fig.subplots(2, len(losses), squeeze=False)
        abs_edges = np.geomspace(d["norm"].min(), d["norm"].max(), bins + 1)
        rel_edges = np.linspace(max(0.0, d["rel"].min()), min(3.0, d["rel"].max()), bins + 1)
        for j, loss in enumerate(losses):
            for v in variants:
                x = d[(d["loss"] == loss) & (d["variant"] == v)]
                if not len(x):
                    continue
                cv = (x.groupby("key")["norm"].std() / x.groupby("key")["norm"].mean()).mean()
                for i, (_, run) in enumerate(x.groupby("key", sort=False)):   # one line per run: scales differ
                    axes[0, j].hist(run["norm"], bins=abs_edges, density=True, histtype="step", lw=1.1, alpha=0.85,
                                    color=variant_color(v), label=VARIANT_LABELS.get(v, v) if i == 0 else None)
                axes[1, j].hist(x["rel"].clip(upper=rel_edges[-1]), bins=rel_edges, density=True, histtype="step",
                                lw=1.4, color=variant_color(v), label=f"{v}: CV {cv:.2f}")
            axes[0, j].set_xscale("log")
            _log_ticks(axes[0, j])
            axes[0, j].set_title(loss)
            axes[0, j].set_xlabel("‖f‖ (log)")
            axes[1, j].set_xlabel("‖f‖ / run's mean ‖f‖")
            axes[1, j].legend(fontsize=6.5, loc="upper right")
        axes[0, 0].set_ylabel("density")
        axes[1, 0].set_ylabel("density")
        fig.legend(handles=_legend_handles(variants), loc="outside lower center", ncols=len(variants), fontsize=7.5)
        fig.suptitle("Final test-set norms. Top: each run (log axis). Bottom: relative to the run's mean")
    return fig


def norm_trajectories(steps: pd.DataFrame, runs: pd.DataFrame, y: str = "norm_var", log: bool = True):
    """A batch statistic over training per loss (panels) × variant (colours): mean over seeds with a
    min–max band. ``y``: 'norm_var', 'norm_mean', 'grad_slope', 'dtheta_cv', ... (a steps column)."""
    _need(steps, ["key", "step", y], "steps")
    d = _with_run_attrs(steps[["key", "step", y]], runs).dropna(subset=[y])
    losses, variants = _losses_in(d), _variants_in(d)
    with style():
        fig = _figure(BOOK_WIDTH, 2.9)
        axes = fig.subplots(1, len(losses), squeeze=False)[0]
        for ax, loss in zip(axes, losses):
            for v in variants:
                x = d[(d["loss"] == loss) & (d["variant"] == v)]
                if not len(x):
                    continue
                agg = x.groupby("step")[y].agg(["mean", "min", "max"]).reset_index()
                c = variant_color(v)
                ax.plot(agg["step"], _smooth(agg["mean"]), color=c, label=VARIANT_LABELS.get(v, v))
                ax.fill_between(agg["step"], agg["min"], agg["max"], color=c, alpha=0.15, lw=0)
            if log and (d[y] > 0).all():
                ax.set_yscale("log")
                _log_ticks(ax)
            ax.set_title(loss)
            ax.set_xlabel("iteration")
        axes[0].set_ylabel(STEP_LABELS.get(y, y))
        fig.legend(handles=_legend_handles(variants, line=True), loc="outside lower center", ncols=len(variants),
                   fontsize=7.5)
        fig.suptitle(f"{STEP_LABELS.get(y, y)} over training per loss and variant (mean over seeds, band: min–max)")
    return fig


def variance_vs_gain(vvg: pd.DataFrame, axes=None):
    """Reviewer question 4: norm-variance reduction (x) against the gain (y), ours and the rebuttal's.

    Two panels, because the scales differ: the rebuttal's variances are of a 512-d BN-Inception
    embedding on Cars, ours of a small CNN on glyphs. Ours carry paired 95% CIs on both axes.
    ``vvg``: :func:`sec_lib.paper.variance_vs_gain`.
    """
    _need(vvg, ["source", "loss", "reduction", "gain"], "vvg")
    metric = vvg.attrs.get("metric", "R@1")
    ds = vvg.attrs.get("paper_dataset", "Cars")
    with style():
        fig, (a1, a2) = _fig_axes(axes, 2, (BOOK_WIDTH, 3.3))
        for ax, src, title in ((a1, "ours", f"Ours (glyphs): Var reduction vs {metric} gain"),
                               (a2, "rebuttal", f"Rebuttal (Cars train set) vs paper {metric} gain ({ds})")):
            d = vvg[vvg["source"] == src]
            for r in d.itertuples(index=False):
                def _err(v, lo, hi):
                    return [[v - lo], [hi - v]] if np.isfinite(lo) and np.isfinite(hi) else None
                ax.errorbar(r.reduction, r.gain,
                            xerr=_err(r.reduction, getattr(r, "reduction_ci_lo", np.nan), getattr(r, "reduction_ci_hi", np.nan)),
                            yerr=_err(r.gain, getattr(r, "gain_ci_lo", np.nan), getattr(r, "gain_ci_hi", np.nan)),
                            fmt=LOSS_MARKERS.get(r.loss, "o"), color=variant_color("sec"), ms=6, capsize=2,
                            elinewidth=0.9)
                ax.annotate(r.loss, (r.reduction, r.gain), textcoords="offset points", xytext=(5, 4), fontsize=7.5)
            if not len(d):
                _empty(ax, f"no {src} numbers")
            ax.axhline(0, color="0.5", lw=0.8)
            ax.set_xlabel("norm variance: none − SEC")
            ax.set_ylabel(f"{metric} gain, SEC − none [points]")
            ax.set_title(title)
        fig.suptitle("Do larger variance reductions give larger gains? (different scales: compare the ordering)")
    return fig


def grad_slope_stats(per_run: pd.DataFrame, steps: pd.DataFrame | None = None, runs: pd.DataFrame | None = None):
    """Gradient-vs-norm slope across runs. Left: each run's median per-step slope, per loss × variant
    (dots; bar = mean over seeds). Right (if ``steps`` and ``runs`` are given): the slope over
    training per variant, averaged over losses and seeds.

    ``per_run``: :func:`sec_lib.paper.grad_slopes_per_run`.
    """
    _need(per_run, ["loss", "variant", "slope_median"], "per_run")
    two = steps is not None and runs is not None
    losses, variants = _losses_in(per_run), _variants_in(per_run)
    with style():
        fig = _figure(BOOK_WIDTH, 3.2)
        axes = list(np.ravel(fig.subplots(1, 2 if two else 1, width_ratios=[1.4, 1] if two else None)))
        ax = axes[0]
        width = 0.8 / len(variants)
        rng = np.random.default_rng(0)
        for j, v in enumerate(variants):
            for i, loss in enumerate(losses):
                vals = per_run.loc[(per_run["loss"] == loss) & (per_run["variant"] == v), "slope_median"].dropna()
                x = i + (j - (len(variants) - 1) / 2) * width
                if len(vals):
                    ax.scatter(x + rng.uniform(-0.15, 0.15, len(vals)) * width, vals, s=12, color=variant_color(v),
                               alpha=0.8, label=VARIANT_LABELS.get(v, v) if i == 0 else None, zorder=3)
                    ax.hlines(vals.mean(), x - 0.4 * width, x + 0.4 * width, color=variant_color(v), lw=2)
        ax.axhline(-1, ls=":", color="k", lw=1, label="−1 (theory, fixed direction)")
        ax.axhline(0, color="0.6", lw=0.8)
        ax.set_xticks(np.arange(len(losses)), losses)
        ax.set_ylabel("median slope of log‖∂L/∂f‖ vs log‖f‖")
        ax.set_title("Per-run median gradient-vs-norm slope")
        ax.legend(fontsize=6.5)
        if two:
            d = _with_run_attrs(steps[["key", "step", "grad_slope"]], runs).dropna(subset=["grad_slope"])
            for v in _variants_in(d):
                agg = d[d["variant"] == v].groupby("step")["grad_slope"].mean()
                axes[1].plot(agg.index, _smooth(agg), color=variant_color(v), label=VARIANT_LABELS.get(v, v))
            axes[1].axhline(-1, ls=":", color="k", lw=1)
            axes[1].set_xlabel("iteration")
            axes[1].set_ylabel("slope (mean over losses, seeds)")
            axes[1].set_title("Slope over training")
            axes[1].legend(fontsize=6.5)
    return fig


# =============================================================================================
# The data page
# =============================================================================================

def _short_name(name: str, width: int = 40) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"


def glyph_grid(images, labels, class_names: Sequence[str], max_per_class: int | None = None):
    """A grid of images: one row per class (labelled with its name), its instances across the row.

    ``images``: (N, 1, S, S) or (N, S, S) array/tensor in [0, 1] (ink bright); ``labels``: N class
    indices into ``class_names``. Drawn as one mosaic (ink dark on white for print).
    """
    imgs = np.asarray(images.detach().cpu() if hasattr(images, "detach") else images, dtype=float)
    if imgs.ndim == 4:
        if imgs.shape[1] != 1:
            raise ValueError(f"images must have one channel, got shape {imgs.shape}")
        imgs = imgs[:, 0]
    if imgs.ndim != 3:
        raise ValueError(f"images must have shape (N, 1, S, S) or (N, S, S), got {imgs.shape}")
    labels = np.asarray(labels.cpu() if hasattr(labels, "cpu") else labels).astype(int)
    if len(labels) != len(imgs):
        raise ValueError(f"labels has {len(labels)} entries for {len(imgs)} images")
    if labels.min() < 0 or labels.max() >= len(class_names):
        raise ValueError(f"labels must index class_names (0..{len(class_names) - 1})")
    rows = list(dict.fromkeys(labels.tolist()))
    per = [np.flatnonzero(labels == c) for c in rows]
    ncols = max(len(p) for p in per) if max_per_class is None else min(max_per_class, max(len(p) for p in per))
    s = imgs.shape[-1]
    gap = max(1, s // 8)
    mosaic = np.full((len(rows) * (s + gap) - gap, ncols * (s + gap) - gap), np.nan)
    for i, idx in enumerate(per):
        for j, k in enumerate(idx[:ncols]):
            mosaic[i * (s + gap): i * (s + gap) + s, j * (s + gap): j * (s + gap) + s] = imgs[k]
    with style():
        cell = min(0.55, (BOOK_WIDTH - 2.6) / ncols)
        fig = _figure(BOOK_WIDTH, max(1.5, cell * len(rows) + 0.6))
        ax = fig.subplots()
        import matplotlib
        cmap = matplotlib.colormaps["gray_r"].with_extremes(bad="white")
        ax.imshow(np.ma.masked_invalid(mosaic), cmap=cmap, vmin=0, vmax=1)
        ax.set_yticks([i * (s + gap) + s / 2 for i in range(len(rows))], [_short_name(class_names[c]) for c in rows])
        ax.set_xticks([j * (s + gap) + s / 2 for j in range(ncols)], [str(j) for j in range(ncols)])
        ax.set_xlabel("instance (font design × random augmentation)")
        ax.grid(False)
        for sp in ax.spines.values():
            sp.set_visible(False)
        ax.tick_params(length=0)
        ax.set_title(f"{len(rows)} classes × {ncols} instances")
    return fig
