"""The train page's figures: one run's instruments (losses, norms, gradients, angles, cosines, evaluations).

Each function takes tidy frames (:class:`sec_lib.runs.store.Frames` parts of one or more runs) and returns a
Figure; with ``ax=`` it draws into a given Axes instead.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import matplotlib
import numpy as np
import pandas as pd

from ..report import loglog_fit
from .palette import METRIC_STYLES, NEG_COLOR, POS_COLOR, REF_COLOR
from .style import (BOOK_WIDTH, by_key, draw_line, empty_panel, fig_ax,
                    fig_axes, figure, finish_legend, log_ticks, need, smooth, style)


def loss_parts(steps: pd.DataFrame, ax=None, labels: Mapping | None = None):
    """The two parts of the objective per step: the metric loss and the weighted SEC term η·L_sec."""
    need(steps, ["step", "loss_metric"], "steps")
    with style():
        fig, ax = fig_ax(ax)
        for lab, s in by_key(steps, labels):
            pre = f"{lab}: " if lab else ""
            draw_line(ax, s["step"], s["loss_metric"], f"{pre}metric loss")
            if "loss_sec" in s and (s["loss_sec"].fillna(0) != 0).any():
                draw_line(ax, s["step"], s["loss_sec"], f"{pre}η·L_sec (regulariser)")
        ys = np.concatenate([l.get_ydata() for l in ax.lines]) if ax.lines else np.array([])
        if len(ys) and np.all(np.isfinite(ys)) and (ys > 0).all():
            ax.set_yscale("log")          # the regulariser is often orders of magnitude below the metric loss
            log_ticks(ax)
        ax.set_xlabel("iteration")
        ax.set_ylabel("loss")
        ax.set_title("Loss parts per iteration (raw, and rolling mean)")
        finish_legend(ax)
    return fig


def tracked_norms(tracked: pd.DataFrame, ax=None, max_samples: int = 64):
    """Norm ‖f_i‖ of a fixed set of training samples over training (one line each; rebuttal Fig. 1)."""
    need(tracked, ["step", "sample", "norm"], "tracked")
    with style():
        fig, ax = fig_ax(ax)
        if len(tracked) == 0:
            empty_panel(ax, "no tracked samples in this run")
        t = tracked[tracked["key"] == tracked["key"].iloc[0]] if "key" in tracked and len(tracked) else tracked
        samples = list(dict.fromkeys(t["sample"]))[:max_samples]
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
    need(steps, ["step", "norm_mean", "norm_var"], "steps")
    with style():
        fig, ax = fig_ax(ax)
        for lab, s in by_key(steps, labels):
            pre = f"{lab}: " if lab else ""
            sd = np.sqrt(s["norm_var"].clip(lower=0))
            line = draw_line(ax, s["step"], s["norm_mean"], f"{pre}batch mean ‖f‖")
            ax.fill_between(s["step"], s["norm_mean"] - sd, s["norm_mean"] + sd, color=line.get_color(), alpha=0.15,
                            lw=0, label=f"{pre}± 1 std within the batch")
            if "mu" in s and s["mu"].notna().any():
                ax.plot(s["step"], s["mu"], ls="--", color="k", lw=1.0, label=f"{pre}μ used by the regulariser")
        ax.set_xlabel("iteration")
        ax.set_ylabel("‖f‖")
        ax.set_title("Batch mean norm per iteration (cf. rebuttal Fig. 2)")
        finish_legend(ax)
    return fig


def norm_variance(steps: pd.DataFrame, ax=None, labels: Mapping | None = None, log: bool = True):
    """Variance of ‖f_i‖ within each training batch, per iteration; where ``steps`` has ``norm_cv`` (the
    batch CV = std / mean, :func:`sec_lib.chapters.common.with_batch_cv`), that scale-free spread beside it,
    dashed, on a right-hand axis (the variance also falls when the norms merely shrink)."""
    need(steps, ["step", "norm_var"], "steps")
    with style():
        fig, ax = fig_ax(ax)
        colors = {}
        for lab, s in by_key(steps, labels):
            colors[lab] = draw_line(ax, s["step"], s["norm_var"], lab or None).get_color()
        if log and (steps["norm_var"] > 0).any():
            ax.set_yscale("log")
            log_ticks(ax)
        ax.set_xlabel("iteration")
        ax.set_ylabel("Var(‖f_i‖) in the batch")
        ax.set_title("Norm variance within the batch per iteration")
        with_cv = "norm_cv" in steps.columns and steps["norm_cv"].notna().any()
        if with_cv:
            right = ax.twinx()
            for lab, s in by_key(steps, labels):
                cv = pd.Series(s["norm_cv"].to_numpy(float))
                right.plot(s["step"], smooth(cv) if len(cv) > 50 else cv, ls="--", lw=1.1,
                           color=colors.get(lab, REF_COLOR), label=f"{lab + ': ' if lab else ''}CV = std / mean")
            right.set_ylim(bottom=0)
            right.set_ylabel("CV of ‖f_i‖ in the batch (dashed)")
            ax.set_title("Norm variance (solid, left) and CV (dashed, right) within the batch")
            finish_legend(right, loc="upper right", fontsize=8)
        finish_legend(ax, **({"loc": "upper left"} if with_cv else {}))
    return fig


def grad_vs_norm(grad_scatter: pd.DataFrame, ax=None):
    """Per-sample ‖∂L_metric/∂f_i‖ against ‖f_i‖ (log-log) at a few steps, each with its fitted slope.

    The theory (Prop. 2) predicts slope −1 at a fixed direction; across a batch the directions
    differ, so the fitted slope shows how much of the spread in gradient size the norms explain.
    """
    need(grad_scatter, ["step", "norm", "grad_norm"], "grad_scatter")
    with style():
        fig, ax = fig_ax(ax)
        g = grad_scatter[grad_scatter["key"] == grad_scatter["key"].iloc[0]] if "key" in grad_scatter and len(
            grad_scatter) else grad_scatter
        steps = sorted(g["step"].unique())
        cmap = matplotlib.colormaps["plasma"]
        for i, st in enumerate(steps):
            d = g[(g["step"] == st) & (g["norm"] > 0) & (g["grad_norm"] > 0)]
            c = cmap(0.1 + 0.7 * i / max(1, len(steps) - 1))
            slope, icpt, r2 = loglog_fit(d["norm"], d["grad_norm"])
            ax.scatter(d["norm"], d["grad_norm"], s=9, color=c, alpha=0.6,
                       label=f"step {st}: slope {slope:.2f} (r² {r2:.2f})" if len(d) else
                       f"step {st}: no sample with a nonzero gradient")
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
            empty_panel(ax, "no gradient samples")
        log_ticks(ax)
        ax.set_xlabel("‖f_i‖")
        ax.set_ylabel("‖∂L_metric/∂f_i‖")
        ax.set_title("Gradient magnitude vs norm, per sample (log-log)")
        finish_legend(ax, loc="best")
    return fig


def grad_slope_curve(steps: pd.DataFrame, ax=None, labels: Mapping | None = None):
    """The per-step log-log slope of ‖∂L/∂f_i‖ against ‖f_i‖ within the batch, with the −1 reference."""
    need(steps, ["step", "grad_slope"], "steps")
    with style():
        fig, ax = fig_ax(ax)
        for lab, s in by_key(steps, labels):
            draw_line(ax, s["step"], s["grad_slope"], lab or "fitted slope")
        ax.axhline(-1, ls=":", color="k", lw=1, label="−1 (theory, fixed direction)")
        ax.axhline(0, color="0.6", lw=0.8)
        ax.set_xlabel("iteration")
        ax.set_ylabel("slope of log‖∂L/∂f‖ vs log‖f‖")
        ax.set_title("Gradient-vs-norm slope within each batch")
        finish_legend(ax)
    return fig


def angle_spread(steps: pd.DataFrame, axes=None, labels: Mapping | None = None):
    """How unevenly samples turn: mean ± std of the per-sample angle Δθ moved in one update, and
    its coefficient of variation (std / mean). Two panels."""
    need(steps, ["step", "dtheta_mean", "dtheta_std", "dtheta_cv"], "steps")
    with style():
        fig, (a1, a2) = fig_axes(axes, 2, (BOOK_WIDTH, 2.9))
        for lab, s in by_key(steps, labels):
            s = s.dropna(subset=["dtheta_mean"])
            deg_m, deg_s = np.degrees(s["dtheta_mean"]), np.degrees(s["dtheta_std"])
            line = draw_line(a1, s["step"], deg_m, lab or "mean Δθ")
            a1.fill_between(s["step"], deg_m - deg_s, deg_m + deg_s, color=line.get_color(), alpha=0.15, lw=0,
                            label=(f"{lab}: " if lab else "") + "± 1 std across the batch")
            draw_line(a2, s["step"], s["dtheta_cv"], lab or None)
        a1.set_xlabel("iteration")
        a1.set_ylabel("Δθ per update [degrees]")
        a1.set_title("Angle each sample turned in one update")
        a2.set_xlabel("iteration")
        a2.set_ylabel("std(Δθ) / mean(Δθ)")
        a2.set_title("Spread of the turning angles (CV)")
        finish_legend(a1)
        finish_legend(a2)
    return fig


def cosine_hist(cosines: pd.DataFrame, ax=None, bins: int = 40):
    """Histograms of the cosine similarity of sampled positive and negative test pairs."""
    need(cosines, ["kind", "cos"], "cosines")
    with style():
        fig, ax = fig_ax(ax)
        edges = np.linspace(-1, 1, bins + 1)
        for kind, color, name in (("pos", POS_COLOR, "positive pairs"), ("neg", NEG_COLOR, "negative pairs")):
            v = cosines.loc[cosines["kind"] == kind, "cos"].to_numpy(float)
            if len(v):
                ax.hist(v, bins=edges, density=True, histtype="stepfilled", alpha=0.35, color=color,
                        label=f"{name} (mean {v.mean():.2f}, n={len(v)})")
                ax.axvline(v.mean(), color=color, lw=1.2, ls="--")
        if len(cosines) == 0:
            empty_panel(ax, "no cosine samples")
        ax.set_xlim(-1, 1)
        ax.set_xlabel("cos(f̂_i, f̂_j)")
        ax.set_ylabel("density")
        ax.set_title("Cosine similarity of test pairs")
        finish_legend(ax, loc="upper left")
    return fig


def violations(steps: pd.DataFrame, ax=None, labels: Mapping | None = None):
    """Fraction of the batch's (a, p, n) triplets with d_an ≤ d_ap, per iteration."""
    need(steps, ["step", "violations"], "steps")
    with style():
        fig, ax = fig_ax(ax)
        for lab, s in by_key(steps, labels):
            draw_line(ax, s["step"], s["violations"], lab or None)
        ax.set_ylim(bottom=0)
        ax.set_xlabel("iteration")
        ax.set_ylabel("violating triplets (fraction)")
        ax.set_title("Triplet violations in the training batch")
        finish_legend(ax)
    return fig


def eval_curves(evals: pd.DataFrame, axes=None, ks: Sequence[str] = ("R@1", "R@2", "R@4", "R@8")):
    """Test metrics during training: Recall@K (left) and NMI / F1 of k-means (right), in percent."""
    need(evals, ["step"], "evals")
    with style():
        fig, (a1, a2) = fig_axes(axes, 2, (BOOK_WIDTH, 2.9))
        e = evals.sort_values("step")
        ks = [k for k in ks if k in e.columns]
        for k in ks:
            ls, mk = METRIC_STYLES.get(k, ("-", "o"))
            a1.plot(e["step"], e[k], ls=ls, marker=mk, ms=3, color=REF_COLOR, label=k)
        n_clust = 0
        for m in ("NMI", "F1"):
            ls, mk = METRIC_STYLES[m]
            if m in e.columns:
                d = e.dropna(subset=[m])                 # k-means may run only at the end of training
                n_clust = max(n_clust, len(d))
                a2.plot(d["step"], d[m], ls=ls, marker=mk, ms=3 if len(d) > 1 else 6, color=REF_COLOR,
                        label=f"{m}" if len(d) > 1 else f"{m} = {d[m].iloc[-1]:.1f}" if len(d) else m)
        if len(e):
            a2.set_xlim(a1.get_xlim())
        a1.set_title("Recall@K on the test classes")
        a2.set_title("Clustering quality on the test classes" if n_clust > 1 else
                     "Clustering quality (k-means at the end only)")
        for a in (a1, a2):
            a.set_xlabel("iteration")
            a.set_ylabel("%")
            finish_legend(a)
    return fig


def run_dashboard(frames, title: str | None = None):
    """Every instrument of one run on one page-wide figure (12 panels).

    ``frames``: a :class:`~sec_lib.runs.store.Frames` holding one run (``steps``, ``tracked``, ``evals``,
    ``cosines``, ``grad_scatter``).
    """
    for t in ("steps", "tracked", "evals", "cosines", "grad_scatter"):
        if not hasattr(frames, t):
            raise ValueError(f"frames lacks the table {t!r}; pass a store.Frames (load_runs) of one run")
    with style():
        fig = figure(BOOK_WIDTH, 16)
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
