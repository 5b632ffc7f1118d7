"""Figures of the compare and norms pages: the main table's bars, our gains against the paper's,
norm distributions and trajectories, variance reduction against gain, gradient-slope statistics; and the
paired differences around 0 that the compare page and the review pages (face, N-pair, SimCLR) draw."""
from __future__ import annotations

from typing import Mapping

import matplotlib
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.lines import Line2D
from matplotlib.transforms import ScaledTranslation

from .. import report
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

    ``table``: the tidy output of :func:`sec_lib.chapters.gains.main_table` (or :func:`sec_lib.report.summarize`
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


#: The columns of :func:`paired_differences`' input (one row per loss and arm).
PAIRED_COLUMNS = ("loss", "arm", "estimate", "ci_lo", "ci_hi", "eta")


def _eta_text(eta) -> str:
    """η as a label shows it: one value (``0.05``), or every value when the runs of a cell differ (``0.05/0.1``)."""
    if isinstance(eta, str):
        return eta
    vals = np.atleast_1d(np.asarray(eta, float))
    vals = sorted({float(v) for v in vals if np.isfinite(v)})
    return "/".join(f"{v:g}" for v in vals) if vals else "?"


def paired_rows(gains: pd.DataFrame, runs: pd.DataFrame, metric: str = "R@1") -> pd.DataFrame:
    """The input of :func:`paired_differences` from the compare page's paired differences and its runs.

    ``gains``: :func:`sec_lib.chapters.gains.sec_gain` (loss, variant, baseline, comparison, metric, estimate,
    ci_lo, ci_hi, n); ``runs``: the runs frame the differences were computed from. η of each row is read
    from the runs of that loss and variant (their ``eta`` column: SEC's weight, and the L2 weight of L2-reg,
    which is SEC with μ = 0), never from a constant; the runs of one cell that differ in η give ``0.05/0.1``.

    Columns: loss, arm (the comparison, e.g. "SEC − none"), variant, baseline, estimate, ci_lo, ci_hi, eta (text),
    n (paired seeds).
    """
    need(gains, ["loss", "variant", "comparison", "metric", "estimate", "ci_lo", "ci_hi"], "gains")
    need(runs, ["loss", "variant", "eta"], "runs")
    g = gains[gains["metric"] == metric]
    if not len(g):
        raise ValueError(f"metric = {metric!r} is not in the paired differences; valid: "
                         f"{sorted(gains['metric'].unique())}")
    etas = runs.groupby(["loss", "variant"], sort=False)["eta"].agg(lambda s: _eta_text(s.to_numpy()))
    rows = []
    for r in g.itertuples(index=False):
        rows.append({"loss": r.loss, "arm": r.comparison, "variant": r.variant,
                     "baseline": getattr(r, "baseline", "none"), "estimate": float(r.estimate),
                     "ci_lo": float(r.ci_lo), "ci_hi": float(r.ci_hi),
                     "eta": etas.get((r.loss, r.variant), "?"),
                     "n": int(r.n) if hasattr(r, "n") else np.nan})
    out = pd.DataFrame(rows)
    out.attrs["metric"] = metric
    return out


def family_paired_rows(family: pd.DataFrame, runs: pd.DataFrame, names: Mapping[str, str] | None = None,
                       metric_names: Mapping[str, str] | None = None, variant: str = "sec",
                       baseline: str = "none", comparison: str = "SEC − none") -> pd.DataFrame:
    """The input of :func:`paired_differences` from a page's family of verdict rows and the runs behind them.

    ``family``: one row per loss and metric of ``variant`` − ``baseline`` paired on seed, as
    :func:`sec_lib.chapters.review.sec_rows` and :func:`~sec_lib.chapters.review.family_rows` give them (loss,
    metric, estimate, ci_lo, ci_hi, n); ``runs``: the runs they were computed from, whose ``eta`` column gives
    each row's η (that of the loss's ``variant`` runs; runs that differ give ``0.05/0.1``). ``names`` maps a loss
    to the name its group is drawn under (default: the loss itself); ``list(dict.fromkeys(out["loss"]))`` is
    the family's order of the groups, for :func:`paired_differences`' ``losses``.

    Every row is one comparison, ``comparison`` (``attrs["comparison"]``), so each arm is named by its metric
    (``metric_names`` maps a metric to the name used; default: the metric), and ``attrs["metric"]`` joins the
    metrics ("R@1 or probe top-1"), the quantity on the figure's axis. A row without an estimate (no seed with
    both runs) has nothing to draw and is left out.

    Columns: loss (the group's drawn name), key (the loss), metric, arm, variant, baseline, estimate, ci_lo,
    ci_hi, eta (text), n (paired seeds).
    """
    need(family, ["loss", "metric", "estimate", "ci_lo", "ci_hi", "n"], "family")
    need(runs, ["loss", "variant", "eta"], "runs")
    names, metric_names = dict(names or {}), dict(metric_names or {})
    etas = runs[runs["variant"] == variant].groupby("loss", sort=False)["eta"].agg(
        lambda s: _eta_text(s.to_numpy()))
    rows = [{"loss": names.get(r.loss, r.loss), "key": r.loss, "metric": r.metric,
             "arm": metric_names.get(r.metric, r.metric), "variant": variant, "baseline": baseline,
             "estimate": float(r.estimate), "ci_lo": float(r.ci_lo), "ci_hi": float(r.ci_hi),
             "eta": etas.get(r.loss, "?"), "n": int(r.n)}
            for r in family.itertuples(index=False) if np.isfinite(float(r.estimate))]
    out = pd.DataFrame(rows, columns=["loss", "key", "metric", "arm", "variant", "baseline", "estimate", "ci_lo",
                                      "ci_hi", "eta", "n"])
    out.attrs["metric"] = " or ".join(metric_names.get(m, m) for m in dict.fromkeys(family["metric"]))
    out.attrs["comparison"] = comparison
    return out


def paired_differences(rows: pd.DataFrame, metric: str | None = None, level: float = 0.95, ax=None,
                       title: str | None = None, xlabel: str | None = None, width: float = BOOK_WIDTH,
                       losses: list[str] | None = None):
    """Paired differences against the baseline (SEC − none, L2-reg − none, ...) per loss: each arm's estimate
    (dot) with its interval (whisker) around a vertical line at 0 (no effect), one row per loss and arm, η in
    each row's label. The x axis spans every interval and 0 with a margin on both sides, so it never starts at
    0 and a one-point effect is as wide as it is.

    ``rows``: one row per loss and arm with the columns :data:`PAIRED_COLUMNS` (optionally ``variant``, which
    picks the arm's colour, and ``n``); :func:`paired_rows` builds them from the compare page's paired differences.
    An arm without an interval (one seed, or the same difference on every seed) is drawn hollow, without a whisker.
    The caption to print under it is :func:`paired_caption`. ``title`` and ``xlabel`` replace the default title
    and axis label (which speak of each regulariser; ``title=""``: none); ``width`` is the figure's width in
    inches (at most :data:`BOOK_WIDTH`); ``losses`` orders the loss groups (values of ``rows["loss"]``; default:
    the book's loss order).
    """
    need(rows, list(PAIRED_COLUMNS), "rows")
    if not len(rows):
        raise ValueError("rows is empty: there is no paired difference to draw")
    metric = metric or rows.attrs.get("metric", "R@1")
    present = set(rows["loss"])
    if losses is not None and set(losses) != present:
        raise ValueError(f"losses must order exactly the losses of rows, {sorted(present)}; got {list(losses)}")
    losses = list(losses) if losses is not None else _losses_in(rows)
    arms = list(dict.fromkeys(rows["arm"]))
    variant_of = (dict(zip(rows["arm"], rows["variant"])) if "variant" in rows.columns else {})
    fallback = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#4d4d4d"]
    color = {a: (variant_color(variant_of[a]) if a in variant_of and variant_of[a] in VARIANT_COLORS
                 else fallback[i % len(fallback)]) for i, a in enumerate(arms)}
    markers = ["o", "D", "s", "^", "v"]
    # y positions: per loss a header row (the loss's name, bold), then its arms, η in each arm's label
    ys, ticks, labels, heads, y = {}, [], [], [], 0.0
    for loss in losses:
        heads.append(y)
        ticks.append(y)
        labels.append(loss)
        y += 0.85
        for a in arms:
            r = rows[(rows["loss"] == loss) & (rows["arm"] == a)]
            if not len(r):
                continue
            ys[(loss, a)] = y
            ticks.append(y)
            labels.append(f"{a}, η = {_eta_text(r['eta'].iloc[0])}")
            y += 1.0
        y += 0.25
    with style():
        fig, ax = fig_ax(ax, (width, 0.95 + 0.26 * len(ticks)))
        for (loss, a), yy in ys.items():
            r = rows[(rows["loss"] == loss) & (rows["arm"] == a)].iloc[0]
            est, lo, hi = float(r["estimate"]), float(r["ci_lo"]), float(r["ci_hi"])
            has_ci = np.isfinite(lo) and np.isfinite(hi)
            xerr = [[est - lo], [hi - est]] if has_ci else None
            c, m = color[a], markers[arms.index(a) % len(markers)]
            ax.errorbar(est, yy, xerr=xerr, fmt=m, color=c, mfc=c if has_ci else "white", mec=c, ms=6,
                        capsize=3, elinewidth=1.5, zorder=3)
        ax.axvline(0, color="k", lw=1.0, zorder=2)
        vals = rows[["estimate", "ci_lo", "ci_hi"]].to_numpy(float)
        vals = vals[np.isfinite(vals)]
        lo, hi = min(0.0, float(vals.min()) if vals.size else 0.0), max(0.0, float(vals.max()) if vals.size else 0.0)
        pad = 0.07 * ((hi - lo) or 1.0)
        ax.set_xlim(lo - pad, hi + pad)
        ax.set_yticks(ticks, labels)
        for t, yy in zip(ax.get_yticklabels(), ticks):
            if yy in heads:
                t.set_fontweight("bold")
        ax.set_ylim(y - 0.25 - 0.5, -0.6)
        ax.grid(axis="y", visible=False)
        for yy in heads[1:]:                      # a thin rule between the losses
            ax.axhline(yy - 0.6, color="0.85", lw=0.6, zorder=1)
        ax.set_xlabel(xlabel or f"paired difference in {metric} [points]; right of 0: the regulariser helps")
        ax.set_title(f"{metric}: each regulariser − none, mean over seeds and {level:.0%} interval"
                     if title is None else title)
    return fig


#: Width (inches) of a page's SEC − none figure (:func:`sec_paired_figure`): narrower than the column, so that its
#: labels shrink less on a phone.
SEC_PAIRED_WIDTH = 4.8


def sec_paired_figure(rows: pd.DataFrame, width: float = SEC_PAIRED_WIDTH):
    """A page's one comparison (SEC − none) per loss and measure around 0 with 95% intervals: :func:`paired_differences`
    of ``rows`` (:func:`family_paired_rows`) with the losses in the family's order, the title over the whole figure
    and the axis label ending at the axis's right end (long loss names narrow the axes); where no loss has a paired
    seed yet, a figure that says so."""
    title = f"{rows.attrs.get('comparison', 'SEC − none')} in {rows.attrs.get('metric', 'R@1')}: mean and 95% interval"
    if len(rows):
        fig = paired_differences(rows, title="", width=width, losses=list(dict.fromkeys(rows["loss"])),
                                 xlabel="paired difference [points]; right of 0: SEC helps")
        ax = fig.axes[0]
        with style():
            ax.set_xlabel(ax.get_xlabel(), loc="right")
    else:
        with style():
            fig = figure(width, 1.4)
            ax = fig.subplots()
            ax.set_axis_off()
            empty_panel(ax, "no loss has a seed with both runs yet: no paired difference to draw")
    with style():
        fig.suptitle(title, fontsize=matplotlib.rcParams["axes.titlesize"])
    return fig


def paired_caption(rows: pd.DataFrame, metric: str | None = None, level: float = 0.95) -> str:
    """The caption of :func:`paired_differences` (Markdown), with η of every loss and arm read from ``rows``."""
    need(rows, list(PAIRED_COLUMNS), "rows")
    metric = metric or rows.attrs.get("metric", "R@1")
    n = (f" over {int(np.nanmax(rows['n']))} paired seeds" if "n" in rows.columns and rows["n"].notna().any()
         else " over seeds")
    etas = []
    for loss in _losses_in(rows):
        d = rows[rows["loss"] == loss]
        etas.append(f"{loss}: " + ", ".join(f"{a.split(' − ')[0]} η = {_eta_text(e)}" for a, e in zip(d["arm"], d["eta"])))
    hollow = rows[~(np.isfinite(rows["ci_lo"].astype(float)) & np.isfinite(rows["ci_hi"].astype(float)))]
    text = (f"**Figure.** Paired differences in {metric} against the no-regulariser baseline (runs paired on their "
            f"seed): the mean difference{n} (dot) and its {level:.0%} Student-t interval (whisker); the vertical line "
            f"is no effect, so an interval that does not cross it excludes zero. The x axis is in percentage points "
            f"and spans the intervals and 0 (it does not start at 0). η per loss (the weight each arm trained with, "
            f"read from its runs; L2-reg is SEC with μ = 0): {'; '.join(etas)}.")
    if len(hollow):
        text += (" Hollow markers have no interval (one seed, or the same difference on every seed): "
                 + ", ".join(f"{r.loss} {r.arm}" for r in hollow.itertuples(index=False)) + ".")
    return text


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
    d = _with_run_attrs(report.shared_steps(steps[["key", "step", y]]), runs).dropna(subset=[y])
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
        for ax, src, title in ((a1, "ours", "Ours (glyphs), mean over seeds"),
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
#: The paper's datasets on the landing figure: (marker, filled) per dataset, told apart by shape and by fill.
DATASET_MARKERS = {"CUB": ("s", True), "Cars": ("^", False), "SOP": ("P", True), "InShop": ("*", False)}
DATASET_NAMES = {"InShop": "In-Shop"}
PAPER_COLOR = "0.3"
#: The landing figure's text size (pt) and width (inches): narrower than a column and with larger text than the
#: book's other figures, so that on a phone (where it is shown about 365 px wide) its labels stay about 11 px high.
HEADLINE_FONT_PT = 12
HEADLINE_WIDTH = 5.6
#: Height of one loss's row (inches) per line of marks in it, and the least distance between two paper marks on
#: one line (points): closer ones go to the next line.
_LINE_IN, _MARK_GAP_PT = 0.2, 13.0


def pack_lines(values, min_gap: float) -> list[int]:
    """A line for each of ``values`` (0, 1, …): each value, from the smallest, on the first line whose values all lie
    at least ``min_gap`` from it, so that marks drawn on one line never touch. NaN values get line 0."""
    lines: list[list[float]] = []
    out = [0] * len(values)
    for k in sorted(range(len(values)), key=lambda k: (not np.isfinite(values[k]), values[k])):
        v = float(values[k])
        if not np.isfinite(v):
            continue
        j = next((j for j, line in enumerate(lines) if all(abs(v - w) >= min_gap for w in line)), len(lines))
        if j == len(lines):
            lines.append([])
        lines[j].append(v)
        out[k] = j
    return out


def _headline_xlim(gains: pd.DataFrame, paper_values) -> tuple[float, float]:
    """The landing figure's x range: 0, every interval and estimate, and every paper value, with a 6% margin."""
    vals = np.concatenate([gains[["estimate", "ci_lo", "ci_hi"]].to_numpy(float).ravel(),
                           np.asarray(paper_values, float), [0.0]])
    vals = vals[np.isfinite(vals)]
    lo, hi = float(vals.min()), float(vals.max())
    pad = 0.06 * (hi - lo or 1.0)
    return lo - pad, hi + pad


def headline_figure(gains: pd.DataFrame, paper: pd.DataFrame | None = None, metric: str = "R@1"):
    """The landing page's figure: per loss (rows), SEC − none in ``metric`` with its 95% interval at the η chosen
    on held-out classes (filled circle) and at the paper's η (open diamond), and under them the paper's gain on each
    of its datasets (grey; single runs, no interval), one marker per dataset that differs in shape and fill. Paper
    marks closer than a marker's width go on separate lines (:func:`pack_lines`), so none hides another. The
    legend sits below the axes in two columns; the text is :data:`HEADLINE_FONT_PT` pt.

    ``gains``: :func:`sec_lib.chapters.home.headline_gains`; ``paper``: :func:`sec_lib.chapters.home.paper_headline`.
    """
    need(gains, ["loss", "setting", "estimate", "ci_lo", "ci_hi"], "gains")
    losses = _losses_in(gains)
    have_paper = paper is not None and len(paper) > 0
    if have_paper:
        need(paper, ["loss", "dataset", "paper_gain"], "paper")
        paper = paper[paper["loss"].isin(losses)]
    datasets = list(dict.fromkeys(paper["dataset"])) if have_paper else []
    datasets = [d for d in DATASET_MARKERS if d in datasets] + [d for d in datasets if d not in DATASET_MARKERS]
    xlim = _headline_xlim(gains, paper["paper_gain"] if have_paper else [])
    # the least gap between two paper marks on one line, in data units (the axes span about 80% of the width)
    gap = _MARK_GAP_PT / 72 * (xlim[1] - xlim[0]) / (0.8 * HEADLINE_WIDTH)
    line_of = {}
    if have_paper:
        for loss, sub in paper.groupby("loss", sort=False):
            for ds, j in zip(sub["dataset"], pack_lines(sub["paper_gain"].to_numpy(float), gap)):
                line_of[(loss, ds)] = j
    n_lines = 2 + (max(line_of.values()) + 1 if line_of else 0)
    step = 1.0 / (n_lines + 1)                  # the lines of one loss, with a line's space between losses
    y_ours = {"selected": -0.5 + step, "paper": -0.5 + 2 * step}
    settings = (("selected", "ours, η chosen on held-out classes", "o", True),
                ("paper", "ours, the paper's η", "D", False))
    sec = variant_color("sec")
    big = {k: HEADLINE_FONT_PT for k in ("font.size", "axes.labelsize", "legend.fontsize", "xtick.labelsize",
                                         "ytick.labelsize")}
    with style(), matplotlib.rc_context(big):
        fig = figure(HEADLINE_WIDTH, 1.45 + _LINE_IN * (n_lines + 1) * len(losses))
        ax = fig.subplots()
        handles = []
        for setting, label, marker, filled in settings:
            d = gains[gains["setting"] == setting].set_index("loss")
            for i, loss in enumerate(losses):
                if loss not in d.index:
                    continue
                r = d.loc[loss]
                xerr = ([[r["estimate"] - r["ci_lo"]], [r["ci_hi"] - r["estimate"]]]
                        if np.isfinite(r["ci_lo"]) and np.isfinite(r["ci_hi"]) else None)
                ax.errorbar(r["estimate"], i + y_ours[setting], xerr=xerr, fmt=marker, color=sec,
                            mfc=sec if filled else "white", ms=7, capsize=3, elinewidth=1.5)
            handles.append(Line2D([], [], marker=marker, color=sec, mfc=sec if filled else "white", ls="-",
                                  label=label))
        if have_paper:
            p = paper.set_index(["loss", "dataset"])["paper_gain"]
            for ds in datasets:
                marker, filled = DATASET_MARKERS.get(ds, ("o", True))
                pts = [(p[(loss, ds)], i - 0.5 + (3 + line_of[(loss, ds)]) * step)
                       for i, loss in enumerate(losses) if (loss, ds) in p.index]
                kw = dict(ls="", marker=marker, color=PAPER_COLOR, mfc=PAPER_COLOR if filled else "white", mew=1.3,
                          ms=9 if marker == "*" else 7)
                ax.plot([x for x, _ in pts], [y for _, y in pts], **kw)
                handles.append(Line2D([], [], label=f"paper, {DATASET_NAMES.get(ds, ds)}", **kw))
        ax.axvline(0, color="k", lw=0.9)
        ax.set_xlim(*xlim)
        ax.set_yticks(range(len(losses)), losses)
        ax.tick_params(axis="y", length=0)
        for i in range(1, len(losses)):              # a faint rule between the losses
            ax.axhline(i - 0.5, color="0.82", lw=0.8)
        ax.set_ylim(len(losses) - 0.5, -0.5)
        ax.grid(axis="y", visible=False)
        ax.set_xlabel(f"SEC − none in {metric} (points); right of 0: SEC helps")
        # below the axes (a fixed distance under the x label), in two columns: legible on a phone
        below = ax.transAxes + ScaledTranslation(0, -3.4 * HEADLINE_FONT_PT / 72, fig.dpi_scale_trans)
        ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 0.0), bbox_transform=below,
                  ncols=2 if len(handles) > 3 else 1, handlelength=1.6, columnspacing=1.2, borderaxespad=0)
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
        st = report.shared_steps(steps.loc[steps["key"].isin(keys), ["key", "step", y]])
        st = st.merge(runs[["key", "seed"]], on="key").dropna(subset=[y])
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
