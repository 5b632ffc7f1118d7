"""Figures of the compare and norms pages: the main table's bars, our gains against the paper's,
norm distributions and trajectories, variance reduction against gain, gradient-slope statistics."""
from __future__ import annotations

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.lines import Line2D

from .palette import (LOSS_MARKERS, STEP_LABELS, VARIANT_COLORS,
                      VARIANT_LABELS, variant_color)
from .style import (BOOK_WIDTH, empty_panel, fig_ax, fig_axes, figure,
                    legend_handles, log_ticks, need, smooth, style)


def _variants_in(df):
    present = list(dict.fromkeys(df["variant"]))
    return [v for v in VARIANT_COLORS if v in present] + [v for v in present if v not in VARIANT_COLORS]


def _losses_in(df):
    present = list(dict.fromkeys(df["loss"]))
    return [v for v in LOSS_MARKERS if v in present] + [v for v in present if v not in LOSS_MARKERS]


def metric_bars(table: pd.DataFrame, metric: str = "R@1", ax=None):
    """Grouped bars of one metric per loss (groups) × variant (colours) with 95% CI error bars.

    ``table``: the tidy output of :func:`sec_lib.chapters.compare.main_table` (or :func:`sec_lib.report.summarize`
    by loss and variant).
    """
    need(table, ["loss", "variant", "metric", "mean", "ci_lo", "ci_hi"], "table")
    t = table[table["metric"] == metric]
    if not len(t):
        raise ValueError(f"metric = {metric!r} is not in the table; valid: {sorted(table['metric'].unique())}")
    with style():
        fig, ax = fig_ax(ax, (BOOK_WIDTH, 3.2))
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
        hi = np.nanmax(t["ci_hi"].fillna(t["mean"]))
        ax.set_ylim(0, hi * 1.08 if hi > 0 else 1.0)      # bars start at 0: their length is the value
        n = int(t["n"].max()) if "n" in t else 0
        ax.set_ylabel(metric)
        ax.set_title(f"{metric} per loss and variant: mean and 95% CI over {n} seeds")
        ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5))
    return fig


def gains_vs_paper(gvp: pd.DataFrame, metric: str = "R@1", axes=None):
    """Our gain (SEC − none, L2-reg − none; with 95% CI) against the paper's gain, one panel per paper dataset.

    ``gvp``: :func:`sec_lib.chapters.compare.gains_vs_paper`. Both axes are in percentage points; points above
    the diagonal mean a larger gain here than in the paper, points below zero a loss here.
    """
    need(gvp, ["dataset", "loss", "variant", "metric", "ours", "ours_ci_lo", "ours_ci_hi", "paper"], "gvp")
    g = gvp[gvp["metric"] == metric]
    if not len(g):
        raise ValueError(f"metric = {metric!r} is not in the frame; valid: {sorted(gvp['metric'].unique())}")
    datasets = list(dict.fromkeys(g["dataset"]))
    with style():
        fig, axes = fig_axes(axes, len(datasets), (BOOK_WIDTH, 3.4))
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
        diag = [Line2D([], [], ls=":", color="k", lw=0.8, label="ours = paper's")]
        axes[-1].legend(handles=legend_handles(_variants_in(g), _losses_in(g)) + diag, loc="center left",
                        bbox_to_anchor=(1.0, 0.5), fontsize=9)
        fig.suptitle("Gain over the no-regulariser baseline: ours (mean, 95% CI over seeds) vs the paper's single runs")
    return fig


def _with_run_attrs(df: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    need(runs, ["key", "loss", "variant"], "runs")
    cols = [c for c in ("key", "loss", "variant", "seed") if c in runs.columns]
    return df.merge(runs[cols], on="key", how="inner")


def norm_distributions(test_norms: pd.DataFrame, runs: pd.DataFrame, bins: int = 40):
    """Final test-set norm distributions per loss (columns) × variant (colours), seeds pooled.

    Top row: ‖f‖ on a log axis, one line per run (seeds and variants live on different scales).
    Bottom row: ‖f‖ divided by its run's mean norm, seeds pooled, which removes the scale and leaves
    the spread SEC targets; the legend gives the mean coefficient of variation (std / mean) per run.
    """
    need(test_norms, ["key", "norm"], "test_norms")
    d = _with_run_attrs(test_norms, runs)
    if not len(d):
        raise ValueError("no test norms match the runs frame's keys")
    d = d[d["norm"] > 0].copy()
    d["rel"] = d["norm"] / d.groupby("key")["norm"].transform("mean")
    losses, variants = _losses_in(d), _variants_in(d)
    with style():
        fig = figure(BOOK_WIDTH, 4.9)
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
            log_ticks(axes[0, j])
            axes[0, j].set_title(loss)
            axes[0, j].set_xlabel("‖f‖ (log)")
            axes[1, j].set_xlabel("‖f‖ / run's mean ‖f‖")
            axes[1, j].legend(fontsize=9, loc="upper right")
        axes[0, 0].set_ylabel("density")
        axes[1, 0].set_ylabel("density")
        fig.legend(handles=legend_handles(variants), loc="outside lower center", ncols=len(variants), fontsize=9)
        fig.suptitle("Final test-set norms. Top: each run (log axis). Bottom: relative to the run's mean")
    return fig


def norm_trajectories(steps: pd.DataFrame, runs: pd.DataFrame, y: str = "norm_var", log: bool = True):
    """A batch statistic over training per loss (panels) × variant (colours): mean over seeds with a
    min–max band. ``y``: 'norm_var', 'norm_mean', 'grad_slope', 'dtheta_cv', ... (a steps column)."""
    need(steps, ["key", "step", y], "steps")
    d = _with_run_attrs(steps[["key", "step", y]], runs).dropna(subset=[y])
    losses, variants = _losses_in(d), _variants_in(d)
    with style():
        fig = figure(BOOK_WIDTH, 2.9)
        axes = fig.subplots(1, len(losses), squeeze=False)[0]
        for ax, loss in zip(axes, losses):
            for v in variants:
                x = d[(d["loss"] == loss) & (d["variant"] == v)]
                if not len(x):
                    continue
                agg = x.groupby("step")[y].agg(["mean", "min", "max"]).reset_index()
                c = variant_color(v)
                ax.plot(agg["step"], smooth(agg["mean"]), color=c, label=VARIANT_LABELS.get(v, v))
                ax.fill_between(agg["step"], agg["min"], agg["max"], color=c, alpha=0.15, lw=0)
            if log and (d[y] > 0).all():
                ax.set_yscale("log")
                log_ticks(ax)
            ax.set_title(loss)
            ax.set_xlabel("iteration")
        axes[0].set_ylabel(STEP_LABELS.get(y, y))
        fig.legend(handles=legend_handles(variants, line=True), loc="outside lower center", ncols=len(variants),
                   fontsize=9)
        fig.suptitle(f"{STEP_LABELS.get(y, y)} over training per loss and variant (mean over seeds, band: min–max)")
    return fig


def variance_vs_gain(vvg: pd.DataFrame, axes=None):
    """Reviewer question 4: the variance reduction as log10(var none / var SEC) (x, the quantity of
    :data:`sec_lib.chapters.norms.Q4_DEFINITION`) against the gain (y), ours and the rebuttal's.

    Two panels, because the scales differ: the rebuttal's variances are of a 512-d BN-Inception
    embedding on Cars, ours of a small CNN on glyphs. Ours carry paired 95% CIs on the gain.
    ``vvg``: :func:`sec_lib.chapters.norms.variance_vs_gain`.
    """
    need(vvg, ["source", "loss", "log10_ratio", "gain"], "vvg")
    metric = vvg.attrs.get("metric", "R@1")
    ds = vvg.attrs.get("paper_dataset", "Cars")
    with style():
        fig, (a1, a2) = fig_axes(axes, 2, (BOOK_WIDTH, 3.3))
        for ax, src, title in ((a1, "ours", f"Ours (glyphs), mean over seeds"),
                               (a2, "rebuttal", f"Rebuttal (Cars train set), paper gains ({ds})")):
            d = vvg[vvg["source"] == src]
            for r in d.itertuples(index=False):
                lo, hi = getattr(r, "gain_ci_lo", np.nan), getattr(r, "gain_ci_hi", np.nan)
                yerr = [[r.gain - lo], [hi - r.gain]] if np.isfinite(lo) and np.isfinite(hi) else None
                ax.errorbar(r.log10_ratio, r.gain, yerr=yerr, fmt=LOSS_MARKERS.get(r.loss, "o"),
                            color=variant_color("sec"), ms=6, capsize=2, elinewidth=0.9)
                ax.annotate(r.loss, (r.log10_ratio, r.gain), textcoords="offset points", xytext=(5, 4), fontsize=9)
            if not len(d):
                empty_panel(ax, f"no {src} numbers")
            ax.axhline(0, color="0.5", lw=0.8)
            ax.axvline(0, color="0.5", lw=0.8)
            ax.set_xlabel("log10(Var‖f‖ none / Var‖f‖ SEC)")
            ax.set_ylabel(f"{metric} gain, SEC − none [points]")
            ax.set_title(title)
    return fig


def grad_slope_stats(per_run: pd.DataFrame, steps: pd.DataFrame | None = None, runs: pd.DataFrame | None = None):
    """Gradient-vs-norm slope across runs. Left: each run's median per-step slope, per loss × variant
    (dots; bar = mean over seeds). Right (if ``steps`` and ``runs`` are given): the slope over
    training per variant, averaged over losses and seeds.

    ``per_run``: :func:`sec_lib.chapters.norms.grad_slopes_per_run`.
    """
    need(per_run, ["loss", "variant", "slope_median"], "per_run")
    two = steps is not None and runs is not None
    losses, variants = _losses_in(per_run), _variants_in(per_run)
    with style():
        fig = figure(BOOK_WIDTH, 3.2)
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
        ax.legend(fontsize=9)
        if two:
            d = _with_run_attrs(steps[["key", "step", "grad_slope"]], runs).dropna(subset=["grad_slope"])
            for v in _variants_in(d):
                agg = d[d["variant"] == v].groupby("step")["grad_slope"].mean()
                axes[1].plot(agg.index, smooth(agg), color=variant_color(v), label=VARIANT_LABELS.get(v, v))
            axes[1].axhline(-1, ls=":", color="k", lw=1)
            axes[1].set_xlabel("iteration")
            axes[1].set_ylabel("slope (mean over losses, seeds)")
            axes[1].set_title("Slope over training")
            axes[1].legend(fontsize=9)
    return fig


#: Markers of the paper's datasets on the headline figure (drawn in grey: the paper's single runs).
DATASET_MARKERS = {"CUB": "v", "Cars": "^", "SOP": "<", "InShop": ">"}
PAPER_COLOR = "0.45"


def headline_figure(gains: pd.DataFrame, paper: pd.DataFrame | None = None, metric: str = "R@1"):
    """The landing page's figure: per loss (rows), SEC − none in ``metric`` with its 95% interval at
    the η chosen on held-out classes (filled) and at the paper's η (open), beside the paper's gain on
    each of its datasets (grey, one marker per dataset; single runs, no interval).

    ``gains``: :func:`sec_lib.chapters.home.headline_gains`; ``paper``: :func:`sec_lib.chapters.home.paper_headline`.
    """
    need(gains, ["loss", "setting", "diff", "ci_lo", "ci_hi"], "gains")
    losses = _losses_in(gains)
    settings = (("selected", "ours, η chosen on held-out classes", "o", True, -0.17),
                ("paper", "ours, the paper's η", "D", False, 0.0))
    sec = variant_color("sec")
    with style():
        fig = figure(BOOK_WIDTH, 0.75 + 0.62 * len(losses))
        ax = fig.subplots()
        handles = []
        for setting, label, marker, filled, dy in settings:
            d = gains[gains["setting"] == setting].set_index("loss")
            for i, loss in enumerate(losses):
                if loss not in d.index:
                    continue
                r = d.loc[loss]
                xerr = ([[r["diff"] - r["ci_lo"]], [r["ci_hi"] - r["diff"]]]
                        if np.isfinite(r["ci_lo"]) and np.isfinite(r["ci_hi"]) else None)
                ax.errorbar(r["diff"], i + dy, xerr=xerr, fmt=marker, color=sec, mfc=sec if filled else "white",
                            ms=6.5, capsize=3, elinewidth=1.4)
            handles.append(Line2D([], [], marker=marker, color=sec, mfc=sec if filled else "white", ls="-",
                                  label=label + " (95% CI)"))
        if paper is not None and len(paper):
            p = paper.set_index(["loss", "dataset"])["paper_gain"]
            for ds, marker in DATASET_MARKERS.items():
                ys = [(i + 0.19, p[(loss, ds)]) for i, loss in enumerate(losses) if (loss, ds) in p.index]
                if ys:
                    ax.plot([v for _, v in ys], [y for y, _ in ys], ls="", marker=marker, color=PAPER_COLOR, ms=6)
                    handles.append(Line2D([], [], ls="", marker=marker, color=PAPER_COLOR,
                                          label=f"paper, {ds} (one run)"))
        ax.axvline(0, color="k", lw=0.9)
        ax.set_yticks(range(len(losses)), losses)
        ax.set_ylim(len(losses) - 0.5, -0.5)
        ax.grid(axis="y", visible=False)
        ax.set_xlabel(f"SEC − none in {metric} [percentage points]; right of 0: SEC helps")
        ax.legend(handles=handles, loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=9)
    return fig


def norm_panel(test_norms: pd.DataFrame, steps: pd.DataFrame, runs: pd.DataFrame, loss: str, variant: str,
               y: str = "norm_var"):
    """One loss × variant for the norms page's selector: the final test-norm distribution relative
    to each run's mean (seaborn histogram, seeds pooled; the title gives the mean CV) and the batch
    statistic ``y`` over training (seaborn line: mean over seeds, band: the seeds' range)."""
    need(test_norms, ["key", "norm"], "test_norms")
    need(steps, ["key", "step", y], "steps")
    keys = runs.loc[(runs["loss"] == loss) & (runs["variant"] == variant), "key"]
    c = variant_color(variant)
    with style():
        fig = figure(BOOK_WIDTH, 2.8)
        a1, a2 = fig.subplots(1, 2)
        tn = test_norms[test_norms["key"].isin(keys) & (test_norms["norm"] > 0)].copy()
        if len(tn):
            tn["rel"] = tn["norm"] / tn.groupby("key")["norm"].transform("mean")
            cv = (tn.groupby("key")["norm"].std() / tn.groupby("key")["norm"].mean()).mean()
            sns.histplot(tn, x="rel", stat="density", bins=30, binrange=(0.0, 3.0), color=c, element="step",
                         ax=a1)
            a1.set_title(f"final test norms (CV {cv:.2f})")
        else:
            empty_panel(a1, "no test norms")
        a1.set_xlabel("‖f‖ / run's mean ‖f‖")
        st = steps[steps["key"].isin(keys)].merge(runs[["key", "seed"]], on="key").dropna(subset=[y])
        if len(st):
            sns.lineplot(st, x="step", y=y, estimator="mean", errorbar=("pi", 100), color=c, ax=a2)
            if (st[y] > 0).all():
                a2.set_yscale("log")
                log_ticks(a2)
        else:
            empty_panel(a2, "no steps")
        a2.set_xlabel("iteration")
        a2.set_ylabel(STEP_LABELS.get(y, y))
        a2.set_title("during training (band: seeds' range)")
        fig.suptitle(f"{loss}, {VARIANT_LABELS.get(variant, variant)}")
    return fig
