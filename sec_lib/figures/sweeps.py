"""Figures of the review chapters' sweeps: η, μ, BatchNorm / WeightNorm heads, the normalize layer,
optimizers, convergence, instability (the claims page's forest plot is in :mod:`sec_lib.figures.claims`). Built from the tables of
:mod:`sec_lib.chapters` (each figure takes frames, never loads or trains)."""
from __future__ import annotations

import math
import textwrap
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib import ticker
from matplotlib.figure import Figure

from .. import report
from ..report import loglog_fit
from .palette import (LOSS_COLORS, LOSS_MARKERS, METRIC_LABELS, OPTIM_COLORS, REF_COLOR, STEP_LABELS,
                      VARIANT_COLORS, color_of, setting_color, variant_color)
from .style import (BOOK_WIDTH, err_bars, figure, legend_handles, log_ticks, need, plain_log_ticks, styled,
                    subplots)


@styled
def eta_figure(summary: pd.DataFrame, metrics: Sequence[str] = ("R@1", "train_norm_var", "train_norm_cv")) -> Figure:
    """R@1, norm variance and, beside it, the norms' scale-free CV (std / mean) against η per loss, mean ±
    95% CI over seeds (a metric the summary lacks is left out). The η > 0 grid is on a
    log axis; η = 0 (no SEC), which a log axis cannot show, gets its own narrow panel on the left
    (same y axis), and its mean is continued as a dashed line across the log panel."""
    metrics = [m for m in metrics if m in set(summary["metric"])] or list(metrics)
    n = len(metrics)
    fig = figure(min(BOOK_WIDTH * 1.25, 4.8 * n), 3.5)
    outer = fig.add_gridspec(1, n)
    losses = list(dict.fromkeys(summary["loss"]))
    first = None
    for k, m in enumerate(metrics):
        gs = outer[0, k].subgridspec(1, 2, width_ratios=[1, 5], wspace=0.04)
        ax0 = fig.add_subplot(gs[0, 0])
        ax = fig.add_subplot(gs[0, 1], sharey=ax0)
        s = summary[summary["metric"] == m]
        for i, loss in enumerate(losses):
            sub = s[s["loss"] == loss]
            c = color_of(loss, LOSS_COLORS, i)
            pos = sub[sub["eta"] > 0].sort_values("eta")
            ax.errorbar(pos["eta"], pos["mean"], yerr=err_bars(pos), color=c, marker="o", ms=4, capsize=3, label=loss)
            zero = sub[sub["eta"] == 0]
            if len(zero):
                x0 = (i - (len(losses) - 1) / 2) * 0.12
                ax0.errorbar([x0], zero["mean"], yerr=err_bars(zero), color=c, marker="s", ms=4, capsize=3)
                ax.axhline(float(zero["mean"].iloc[0]), color=c, ls="--", lw=0.8, alpha=0.8)
        ax0.set_xlim(-0.5, 0.5)
        ax0.set_xticks([0], ["0"])
        ax0.set_xlabel("η")
        ax0.set_ylabel(METRIC_LABELS.get(m, m))
        ax.set_xscale("log")
        if m.endswith("norm_var") and (s["mean"] > 0).all():
            ax0.set_yscale("log")
        ax.tick_params(labelleft=False)
        ax.set_xlabel("η (log scale)")
        ax.set_title(f"{METRIC_LABELS.get(m, m).split(' (')[0].split(',')[0]} (dashed: η = 0)")   # a name, not the column
        first = first or ax
    # one legend below the panels: inside the R@1 panel it covered the curves
    fig.legend(*first.get_legend_handles_labels(), loc="outside lower center", ncols=len(losses), fontsize=9)
    return fig


@styled
def mu_figure(runs: pd.DataFrame, order: Sequence[str] | None = None, metric: str = "R@1") -> Figure:
    """Per loss: ``metric`` per μ setting, mean ± 95% CI, seeds as dots; the batch-mean value as a line."""
    losses = list(dict.fromkeys(runs["loss"]))
    fig, axes = subplots(1, len(losses), w=4.4, h=3.6)
    order = list(order) if order is not None else list(dict.fromkeys(runs["setting"].dropna()))
    for ax, loss in zip(axes[0], losses):
        sub = runs[runs["loss"] == loss]
        s = report.summarize(sub, ["setting"], [metric]).set_index("setting")
        ys = [o for o in order if o in s.index]
        for y, name in enumerate(ys):
            r = s.loc[name]
            c = setting_color(name)
            err = [[max(r["mean"] - r["ci_lo"], 0) if np.isfinite(r["ci_lo"]) else 0],
                   [max(r["ci_hi"] - r["mean"], 0) if np.isfinite(r["ci_hi"]) else 0]]
            ax.errorbar([r["mean"]], [y], xerr=err, fmt="o", color=c, capsize=3)
            pts = sub.loc[sub["setting"] == name, metric].astype(float)
            ax.scatter(pts, [y] * len(pts), s=10, color=c, alpha=0.4, lw=0)
        if "batch mean" in s.index:
            ax.axvline(s.loc["batch mean", "mean"], color=VARIANT_COLORS["sec"], ls=":", lw=1)
        ax.set_yticks(range(len(ys)), ys)
        ax.invert_yaxis()
        ax.set_xlabel(METRIC_LABELS.get(metric, metric))
        ax.set_title(loss)
    return fig


@styled
def mu_trajectory_figure(traj: pd.DataFrame) -> Figure:
    """Per loss: the μ SEC used at each step (batch mean, EMA) and, for the run without SEC, the batch
    mean norm it would have used. Constant targets (μ = 0, fixed radii) are not drawn."""
    losses = list(dict.fromkeys(traj["loss"]))
    # the EMAs share their colour (the μ palette's): each momentum gets a line style of its own
    emas = [s for s in dict.fromkeys(traj["setting"]) if str(s).startswith("EMA")]
    style = {"none": "--", **{s: ("-", ":", "-.")[i % 3] for i, s in enumerate(emas)}}
    fig, axes = subplots(1, len(losses), w=4.6, h=3.3)
    for ax, loss in zip(axes[0], losses):
        sub = traj[traj["loss"] == loss]
        for setting, t in sub.groupby("setting", sort=False):
            if str(setting).startswith(("zero", "fixed")):      # μ = 0 and fixed radii are constants
                continue
            y = t["norm_mean"] if setting == "none" else t["mu"]
            ax.plot(t["step"], y, color=setting_color(setting), lw=1.3, ls=style.get(setting, "-"),
                    label=("none (batch mean ‖f‖)" if setting == "none" else setting))
        ax.set_xlabel("iteration")
        ax.set_ylabel("μ")
        ax.set_title(loss)
    axes[0][0].legend(fontsize=9)
    return fig


@styled
def bnwn_figure(table_runs: pd.DataFrame, table: pd.DataFrame | None = None, metric: str = "R@1") -> Figure:
    """``metric`` per head without / with SEC (mean ± 95% CI over seeds, seeds as dots); with
    ``table`` (:func:`sec_lib.chapters.bnwn.bnwn_table`), the rebuttal's numbers (Cars, a different scale)
    in a second panel for the shape of the effect."""
    heads = list(dict.fromkeys(table_runs["head"]))
    rebuttal = None
    if table is not None and f"rebuttal {metric}" in table.columns:
        rebuttal = {(r["head"], r["variant"]): float(r[f"rebuttal {metric}"]) for r in table.to_dict("records")
                    if pd.notna(r[f"rebuttal {metric}"])}
    fig, axes = subplots(1, 2 if rebuttal else 1, w=4.8, h=3.4)
    ax = axes[0][0]
    s = report.summarize(table_runs, ["head", "variant"], [metric])
    for j, v in enumerate(("none", "sec")):
        for i, h in enumerate(heads):
            r = s[(s["head"] == h) & (s["variant"] == v)]
            if not len(r):
                continue
            x = i + (j - 0.5) * 0.3
            ax.errorbar([x], r["mean"], yerr=err_bars(r), fmt="o", color=VARIANT_COLORS[v], capsize=3,
                        label=v if i == 0 else None)
            pts = table_runs[(table_runs["head"] == h) & (table_runs["variant"] == v)][metric].astype(float)
            ax.scatter([x] * len(pts), pts, s=10, color=VARIANT_COLORS[v], alpha=0.4, lw=0)
    ax.set_xticks(range(len(heads)), heads, rotation=15)
    ax.set_ylabel(METRIC_LABELS.get(metric, metric))
    ax.set_title("ours (glyphs)")
    ax.legend(fontsize=9)
    if rebuttal:
        ax2 = axes[0][1]
        for j, v in enumerate(("none", "sec")):
            xs = [i + (j - 0.5) * 0.3 for i, h in enumerate(heads) if (h, v) in rebuttal]
            ys = [rebuttal[(h, v)] for h in heads if (h, v) in rebuttal]
            ax2.scatter(xs, ys, color=VARIANT_COLORS[v], marker="s", label=v)
        ax2.set_xticks(range(len(heads)), heads, rotation=15)
        ax2.set_ylabel(METRIC_LABELS.get(metric, metric))
        ax2.set_title("rebuttal Table 5 (Cars)")
        ax2.legend(fontsize=9)
    return fig


@styled
def grad_scatter_figure(runs: pd.DataFrame, grad_scatter: pd.DataFrame, facet: str = "variant",
                        step: str = "last", title: str = "") -> Figure:
    """Per facet value: per-sample ‖∂L_metric/∂f_i‖ against ‖f_i‖ (log-log) at the last (or first) logged step of
    every run at which some sample of the batch has a nonzero gradient, with the least-squares slope and a slope −1
    reference. A converged run's last batch may have none (semihard: no semihard triplet left); the panel then shows
    that run's latest step that has one, and its title says how many runs moved and to which steps."""
    vals = list(dict.fromkeys(runs[facet]))
    fig, axes = subplots(1, len(vals), w=4.0, h=3.4)
    agg = "max" if step == "last" else "min"
    for ax, v in zip(axes[0], vals):
        keys = runs.loc[runs[facet] == v, "key"]
        g = grad_scatter[grad_scatter["key"].isin(keys)]
        if not len(g):
            ax.set_title(f"{v}: no data")
            continue
        natural = g.groupby("key")["step"].agg(agg)
        g = g[(g["norm"] > 0) & (g["grad_norm"] > 0)]
        if not len(g):
            ax.set_title(f"{title}{facet} = {v}:\nno sample with a nonzero gradient", fontsize=10)
            ax.set_axis_off()
            continue
        used = g.groupby("key")["step"].agg(agg)
        g = g[g["step"] == g["key"].map(used)]
        moved = used[used != natural.reindex(used.index)]
        gone = len(natural) - len(used)                 # runs with no nonzero gradient at any logged step
        x, y = np.log10(g["norm"].to_numpy(float)), np.log10(g["grad_norm"].to_numpy(float))
        ax.scatter(10 ** x, 10 ** y, s=6, alpha=0.35, color=VARIANT_COLORS.get(v, "k"), lw=0)
        fit = loglog_fit(10 ** x, 10 ** y)
        if np.isfinite(fit.slope):
            b, a = fit.slope, fit.intercept / np.log(10)
            xx = np.linspace(x.min(), x.max(), 20)
            ax.plot(10 ** xx, 10 ** (a + b * xx), color="k", lw=1.2, label=f"fit: slope {b:+.2f}")
            ax.plot(10 ** xx, 10 ** (a + b * x.mean() + -1 * (xx - x.mean())), color="k", ls=":", lw=1,
                    label="slope −1 (theory)")
            ax.legend(fontsize=9)
        ax.set_xscale("log")
        ax.set_yscale("log")
        plain_log_ticks(ax, "xy")
        ax.set_xlabel("‖f_i‖ (pre-normalization)")
        ax.set_ylabel("‖∂L_metric/∂f_i‖")
        note = [f"{len(moved)} of {len(natural)} runs shown at step " + ", ".join(f"{t:,}" for t in sorted(set(moved)))
                + f": no nonzero gradient at their {step} step"] if len(moved) else []
        note += [f"{gone} of {len(natural)} runs: no nonzero gradient"] if gone else []
        chars = max(20, int(ax.get_position().width * fig.get_figwidth() * 72 / (10 * 0.62)))   # 10-pt text
        note = [textwrap.fill(n, chars) for n in note]   # as wide as its panel: a long line runs into the next
        ax.set_title(f"{title}{facet} = {v}" + "".join(f"\n{n}" for n in note), **({"fontsize": 10} if note else {}))
    return fig


@styled
def slope_figure(curve: pd.DataFrame, facet: str = "loss", hue: str = "variant", col: str = "grad_slope") -> Figure:
    """Per facet: the smoothed per-batch log-log slope over training per hue (mean over seeds with
    its 95% CI band), with the theory's −1 as a reference. The y axis spans the means, −1 and 0, and the bands
    up to that span again beyond them: a band of a few seeds can reach much further (a batch with few nonzero
    gradients fits a wild slope), and a panel whose band is cut at the axis says so in its title."""
    vals = list(dict.fromkeys(curve[facet]))
    fig, axes = subplots(1, len(vals), w=3.8, h=3.2, sharey=True)
    means = curve["mean"].to_numpy(float)
    means = means[np.isfinite(means)]
    lo = min(-1.0, means.min()) if len(means) else -1.0
    hi = max(0.0, means.max()) if len(means) else 0.0
    width = hi - lo                    # the bands are shown up to one such width beyond the means, -1 and 0
    band_lo, band_hi = curve["ci_lo"].min(), curve["ci_hi"].max()
    lo = max(min(lo, band_lo if np.isfinite(band_lo) else lo), lo - width)
    hi = min(max(hi, band_hi if np.isfinite(band_hi) else hi), hi + width)
    ylim = (lo - 0.05 * (hi - lo), hi + 0.05 * (hi - lo))
    for ax, v in zip(axes[0], vals):
        sub = curve[curve[facet] == v]
        for i, (h, t) in enumerate(sub.groupby(hue, sort=False)):
            c = color_of(h, VARIANT_COLORS, i)
            t = t.sort_values("step")       # steps some seeds lack a slope at come after the others' in the table
            ax.plot(t["step"], t["mean"], color=c, lw=1.4, label=str(h))
            ok = t["ci_lo"].notna()
            ax.fill_between(t["step"][ok], t["ci_lo"][ok], t["ci_hi"][ok], color=c, alpha=0.15, lw=0)
        ax.axhline(-1, color="k", ls=":", lw=1)
        ax.axhline(0, color="k", lw=0.5)
        ax.set_xlabel("iteration")
        cut = (sub["ci_lo"] < ylim[0]).any() or (sub["ci_hi"] > ylim[1]).any()
        ax.set_title(str(v) + ("\n(95% band cut at the axis)" if cut else ""))
    axes[0][0].set_ylim(*ylim)
    axes[0][0].set_ylabel(METRIC_LABELS.get(col, col))
    axes[0][0].legend(fontsize=9)
    return fig


@styled
def pilot_figure(pilot: pd.DataFrame, panel: str = "optimizer", x: str = "lr") -> Figure:
    """Held-out R@1 of a selection per rate, one panel per value of ``panel`` (the optimizer; Q6c's selection: the
    loss), one line per arm (without SEC, with SEC); a point whose runs failed is an × on the panel's floor; the
    chosen point of each arm is circled. ``x``: 'lr', or 'eta' for an η selection (Q6d's), where η = 0, the arm
    without SEC, is a dashed line across the panel."""
    if x not in ("lr", "eta"):
        raise ValueError(f"x must be 'lr' or 'eta', got {x!r}")
    opts = list(dict.fromkeys(pilot[panel]))
    ncols = len(opts) if len(opts) <= 3 else -(-len(opts) // 2)      # four panels: two rows of two, legible
    nrows = -(-len(opts) // ncols)
    fig, axes = subplots(nrows, ncols, w=3.6, h=2.6 if nrows > 1 else 3.0)
    arms = pilot["arm"] if "arm" in pilot.columns else pd.Series("none", index=pilot.index)
    ok = pilot["status"].astype(str) == "done" if "status" in pilot.columns else pd.Series(True, index=pilot.index)
    flat = list(axes.ravel())
    for ax in flat[len(opts):]:
        ax.set_visible(False)
    handles: dict = {}                                              # one legend for the figure, each label once
    for k, (ax, o) in enumerate(zip(flat, opts)):
        sub = pilot[pilot[panel] == o]
        floor = pd.to_numeric(sub.loc[ok[sub.index], "R@1"], errors="coerce").min()
        for arm in dict.fromkeys(arms[sub.index]):
            a = sub[arms[sub.index] == arm].sort_values(x)
            good, bad = a[ok[a.index]], a[~ok[a.index]]
            colour = VARIANT_COLORS.get(arm, VARIANT_COLORS["none"])
            label = "with SEC" if arm == "sec" else "without SEC"
            if x == "eta" and arm != "sec":
                if len(good):                                   # one point: η = 0
                    ax.axhline(float(good["R@1"].iloc[0]), ls="--", color=colour, label=f"{label} (η = 0)")
                continue
            ax.plot(good[x], good["R@1"], marker="o", color=colour, label=label)
            if len(bad) and np.isfinite(floor):
                ax.scatter(bad[x], [floor] * len(bad), marker="x", s=60, color=colour, label=f"{label}: failed")
            ch = good[good["chosen"]]
            ax.scatter(ch[x], ch["R@1"], s=160, facecolors="none", edgecolors=colour, lw=2)
        ax.set_xscale("log")
        if k >= len(opts) - ncols:                              # the bottom panel of each column
            ax.set_xlabel("learning rate" if x == "lr" else "SEC's η")
        if k % ncols == 0:
            ax.set_ylabel("held-out R@1 (%)")
        ax.set_title(str(o), fontsize=10)
        for h, lab in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lab, h)
    fig.legend(list(handles.values()), list(handles), loc="outside lower center", ncol=min(len(handles), 4),
               fontsize=8, title=f"the chosen {'rates' if x == 'lr' else 'η'} circled", title_fontsize=8)
    return fig


@styled
def optim_figure(diffs: pd.DataFrame) -> Figure:
    """Paired R@1 difference SEC − none (mean ± 95% CI over seeds) per loss, one colour per optimizer."""
    fig, axes = subplots(1, 1, w=6.0, h=3.4)
    ax = axes[0][0]
    losses = list(dict.fromkeys(diffs["loss"]))
    opts = list(dict.fromkeys(diffs["optimizer"]))
    width = 0.8 / max(1, len(opts))
    for j, o in enumerate(opts):
        sub = diffs[diffs["optimizer"] == o].set_index("loss").reindex(losses)
        x = np.arange(len(losses)) + (j - (len(opts) - 1) / 2) * width
        e = np.vstack([(sub["estimate"] - sub["ci_lo"]).fillna(0).clip(lower=0),
                       (sub["ci_hi"] - sub["estimate"]).fillna(0).clip(lower=0)])
        ax.errorbar(x, sub["estimate"], yerr=e, fmt="o", capsize=3, color=OPTIM_COLORS.get(o, "k"), label=o)
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xticks(range(len(losses)), losses)
    ax.set_ylabel("R@1 SEC − none (pp)")
    ax.legend(fontsize=9, title="optimizer")
    return fig


@styled
def balance_figure(runs_with_means: pd.DataFrame, cols: Sequence[str] = ("dtheta_cv", "grad_norm_cv"),
                   facet: str = "optimizer") -> Figure:
    """Per column: the per-run mean over training by facet value and variant (mean ± 95% CI, seeds
    and losses as dots)."""
    fig, axes = subplots(1, len(cols), w=4.2, h=3.2)
    vals = list(dict.fromkeys(runs_with_means[facet]))
    for ax, col in zip(axes[0], cols):
        s = report.summarize(runs_with_means, [facet, "variant"], [col])
        for j, v in enumerate(("none", "sec")):
            for i, f in enumerate(vals):
                r = s[(s[facet] == f) & (s["variant"] == v)]
                if not len(r):
                    continue
                x = i + (j - 0.5) * 0.3
                ax.errorbar([x], r["mean"], yerr=err_bars(r), fmt="o", capsize=3, color=VARIANT_COLORS[v],
                            label=v if i == 0 else None)
                pts = runs_with_means[(runs_with_means[facet] == f) & (runs_with_means["variant"] == v)][col]
                ax.scatter([x] * len(pts), pts.astype(float), s=8, alpha=0.35, color=VARIANT_COLORS[v], lw=0)
        ax.set_xticks(range(len(vals)), vals)
        ax.set_ylabel(METRIC_LABELS.get(col, col))
        ax.legend(fontsize=9)
    return fig


def paired_curve(runs: pd.DataFrame, evals: pd.DataFrame, metric: str = "R@1", a: str = "none",
                 b: str = "sec") -> pd.DataFrame:
    """Per loss and evaluation step: ``metric`` of variant ``b`` − variant ``a``, paired on seed
    (:func:`sec_lib.report.paired_diff`: the mean difference, its 95% t-interval and n). ``runs``: key, loss,
    variant, seed; ``evals``: key, step and ``metric``. Where every seed's difference is the same (step 0, where both
    arms are the same network) the interval is NaN."""
    need(runs, ["key", "loss", "variant", "seed"], "runs")
    need(evals, ["key", "step", metric], "evals")
    m = evals[["key", "step", metric]].merge(runs[["key", "loss", "variant", "seed"]], on="key")
    m = m[m["variant"].isin([a, b])]
    if not len(m):
        raise ValueError(f"no evaluations of variants {a!r} and {b!r}; the runs have {sorted(set(runs['variant']))}")
    d = report.paired_diff(m, ["loss", "step"], "variant", a, b, pair_on="seed", metrics=[metric])
    return d[d["n"] > 0].reset_index(drop=True)


@styled
def convergence_figure(band: pd.DataFrame, reach: pd.DataFrame | None = None, metric: str = "R@1",
                       variants: Sequence[str] = ("none", "sec"), diff: pd.DataFrame | None = None) -> Figure:
    """Per loss (columns): ``metric`` against iteration per variant, the mean over seeds with the seeds' range
    (min–max) as a band; vertical dashed lines at the mean iteration to reach 90% of the final value. With ``diff``
    (:func:`paired_curve`), a second row shows the second variant minus the first, paired on seed, with its 95%
    interval, around a line at 0: above it, the second variant is ahead at that iteration. Where the curves span 20 or more times
    their first evaluation step (a dense start, then a long run), the iteration axis is linear up to that step and
    logarithmic after it, so that the early iterations, where the question lies, are not a sliver."""
    need(band, ["loss", "variant", "step", "mean", "min", "max"], "band")
    losses = list(dict.fromkeys(band["loss"]))
    pos = band.loc[band["step"] > 0, "step"]
    linthresh = float(pos.min()) if len(pos) and band["step"].max() >= 20 * pos.min() else None
    if diff is not None:
        need(diff, ["loss", "step", "estimate", "ci_lo", "ci_hi"], "diff")
        fig, axes = subplots(2, len(losses), w=BOOK_WIDTH / len(losses), h=2.3, sharex="col",
                             gridspec_kw={"height_ratios": [1.25, 1]})
        rows = [axes[0], axes[1]]
    else:
        ncols = min(4, len(losses))
        nrows = math.ceil(len(losses) / ncols)
        fig, axes = subplots(nrows, ncols, w=3.8, h=3.1)
        flat = [a for row in axes for a in row]
        for ax in flat[len(losses):]:
            ax.set_visible(False)
        rows = [flat[:len(losses)]]
    for k, loss in enumerate(losses):
        ax = rows[0][k]
        for v in variants:
            t = band[(band["loss"] == loss) & (band["variant"] == v)]
            if not len(t):
                continue
            c = VARIANT_COLORS.get(v, "k")
            ax.plot(t["step"], t["mean"], color=c, lw=1.5, label=_ARM_NAMES.get(v, v))
            ax.fill_between(t["step"], t["min"], t["max"], color=c, alpha=0.18, lw=0)
            if reach is not None:
                rr = reach[(reach["loss"] == loss) & (reach["variant"] == v)]["reach"].astype(float).dropna()
                if len(rr):
                    ax.axvline(rr.mean(), color=c, ls="--", lw=1)
        ax.set_title(loss)
        if diff is not None:
            _diff_panel(rows[1][k], diff[diff["loss"] == loss], VARIANT_COLORS.get(variants[-1], "k"))
        for a in (r[k] for r in rows):
            if linthresh:
                a.set_xscale("symlog", linthresh=linthresh)
                a.set_xlim(0, float(band["step"].max()) * 1.05)
        bottom = rows[-1][k]
        bottom.set_xlabel(f"iteration (log > {linthresh:g})" if linthresh else "iteration")
        if k == 0 or diff is None:
            ax.set_ylabel(METRIC_LABELS.get(metric, metric))
    if diff is not None:
        names = [_ARM_NAMES.get(v, v) for v in variants]
        rows[1][0].set_ylabel(f"{names[-1]} − {names[0]}\n({metric} points)")
    rows[0][0].legend(fontsize=9, loc="lower right")
    return fig


#: How the convergence figure names its arms.
_ARM_NAMES = {"none": "none", "sec": "SEC"}


def _diff_panel(ax, d: pd.DataFrame, color: str) -> None:
    """One loss's paired difference against iteration: the mean line, its 95% interval as a band (where there is
    one), a line at 0; the y axis fits the band and 0."""
    d = d.sort_values("step")
    ax.axhline(0, color=REF_COLOR, lw=0.9)
    ax.plot(d["step"], d["estimate"], color=color, lw=1.5)
    ax.fill_between(d["step"], d["ci_lo"], d["ci_hi"], color=color, alpha=0.25, lw=0)
    vals = np.concatenate([d[c].to_numpy(float) for c in ("estimate", "ci_lo", "ci_hi")] + [np.zeros(1)])
    vals = vals[np.isfinite(vals)]
    lo, hi = float(vals.min()), float(vals.max())
    pad = 0.08 * (hi - lo or 1.0)
    ax.set_ylim(lo - pad, hi + pad)
    ax.yaxis.set_major_locator(ticker.MaxNLocator(nbins=5))


@styled
def reach_pairs_figure(pairs: pd.DataFrame, coarse: str = "C3", dense: str = "C3b",
                       variants: Sequence[str] = ("none", "sec")) -> Figure:
    """One point per run: its iteration to 90% of the final R@1 read from the curve ``coarse`` (column
    ``reach_<coarse>``) against the same run's from the curve ``dense`` (``reach_<dense>``), coloured by variant and
    marked by loss, with the line y = x: how far the first reading moved each run."""
    need(pairs, ["loss", "variant", f"reach_{coarse}", f"reach_{dense}"], "pairs")
    fig, axes = subplots(1, 1, w=4.6, h=4.2)
    ax = axes[0][0]
    for v in variants:
        for loss, g in pairs[pairs["variant"] == v].groupby("loss", sort=False):
            ax.scatter(g[f"reach_{coarse}"], g[f"reach_{dense}"], color=variant_color(v),
                       marker=LOSS_MARKERS.get(loss, "o"), s=28, alpha=0.85, lw=0)
    both = pairs[[f"reach_{coarse}", f"reach_{dense}"]].to_numpy(dtype=float)
    lo, hi = np.nanmin(both), np.nanmax(both)
    pad = 0.05 * (hi - lo or 1.0)
    ax.plot([lo - pad, hi + pad], [lo - pad, hi + pad], color=REF_COLOR, lw=1, ls="--", label="y = x")
    ax.set_xlabel(f"iteration to 90% of the final R@1, {coarse}'s curve")
    ax.set_ylabel(f"the same, {dense}'s curve")
    line = ax.get_legend_handles_labels()[0]
    ax.legend(handles=legend_handles(variants, list(dict.fromkeys(pairs["loss"]))) + line, fontsize=8,
              loc="upper left")
    return fig


@styled
def tracked_figure(runs: pd.DataFrame, tracked: pd.DataFrame, seed=None, variants: Sequence[str] = ("none", "sec"),
                   logy: bool = False) -> Figure:
    """Norm trajectories of the tracked training samples (one thin line each), one row per loss and
    one column per variant, for one seed (default: the smallest)."""
    seed = runs["seed"].min() if seed is None else seed
    r = runs[(runs["seed"] == seed) & runs["variant"].isin(variants)]
    losses = list(dict.fromkeys(r["loss"]))
    fig, axes = subplots(len(losses), len(variants), w=3.6, h=2.3, sharex=True)
    for i, loss in enumerate(losses):
        for j, v in enumerate(variants):
            ax = axes[i][j]
            keys = r.loc[(r["loss"] == loss) & (r["variant"] == v), "key"]
            t = tracked[tracked["key"].isin(keys)]
            for _, s in t.groupby("sample"):
                ax.plot(s["step"], s["norm"], lw=0.7, alpha=0.6, color=VARIANT_COLORS.get(v, "k"))
            if logy and len(t) and (t["norm"] > 0).all():
                ax.set_yscale("log")
                plain_log_ticks(ax, "y")
            ax.set_title(f"{loss}, {v}", fontsize=9)
            if j == 0:
                ax.set_ylabel("‖f_i‖")
            if i == len(losses) - 1:
                ax.set_xlabel("iteration")
    # the same y range per row, so SEC and no SEC compare directly
    for i in range(len(losses)):
        lims = [axes[i][j].get_ylim() for j in range(len(variants))]
        lo, hi = min(l[0] for l in lims), max(l[1] for l in lims)
        for j in range(len(variants)):
            axes[i][j].set_ylim(lo, hi)
    return fig


@styled
def class_norm_figure(assoc: pd.DataFrame) -> Figure:
    """Excess η² (between-class share of test-norm variance above chance) per loss, without / with SEC."""
    fig, axes = subplots(1, 1, w=5.5, h=3.2)
    ax = axes[0][0]
    losses = list(dict.fromkeys(assoc["loss"]))
    s = report.summarize(assoc, ["loss", "variant"], ["excess"])
    for j, v in enumerate(dict.fromkeys(assoc["variant"])):
        for i, loss in enumerate(losses):
            r = s[(s["loss"] == loss) & (s["variant"] == v)]
            if len(r):
                ax.errorbar([i + (j - 1) * 0.2], r["mean"], yerr=err_bars(r), fmt="o", capsize=3,
                            color=VARIANT_COLORS.get(v, "k"), label=v if i == 0 else None)
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xticks(range(len(losses)), losses)
    ax.set_ylabel("η² − chance")
    ax.legend(fontsize=9)
    return fig


@styled
def eta_panel(summary: pd.DataFrame, steps: pd.DataFrame, runs: pd.DataFrame, eta: float,
              y: str = "norm_var") -> Figure:
    """One η of the sweep for the η page's slider: the batch statistic ``y`` over training per loss
    at that η (mean over seeds, band: the seeds' range; seaborn) and R@1 against η per loss (mean
    and 95% interval over seeds) with this η marked."""
    need(steps, ["key", "step", y], "steps")
    need(summary, ["loss", "eta", "metric", "mean", "ci_lo", "ci_hi"], "summary")
    fig, axes = subplots(1, 2, w=BOOK_WIDTH / 2, h=2.9)
    a1, a2 = axes[0]
    r = runs[np.isclose(runs["eta"].astype(float), eta)]
    st = steps.merge(r[["key", "loss", "seed"]], on="key").dropna(subset=[y])
    losses = [l for l in LOSS_COLORS if l in set(runs["loss"])]
    if len(st):
        sns.lineplot(st, x="step", y=y, hue="loss", hue_order=[l for l in losses if l in set(st["loss"])],
                     palette=LOSS_COLORS, estimator="mean", errorbar=("pi", 100), ax=a1, legend=False)
        if (st[y] > 0).all():
            a1.set_yscale("log")
            log_ticks(a1)
    a1.set_xlabel("iteration")
    a1.set_ylabel(STEP_LABELS.get(y, y))
    a1.set_title(f"η = {eta:g}: during training")
    if y == "norm_var" and "norm_cv" in st.columns and st["norm_cv"].notna().any():
        right = a1.twinx()                  # the scale-free spread beside the variance: mean over seeds, dashed
        m = st.groupby(["loss", "step"], sort=False)["norm_cv"].mean().reset_index()
        for loss, g in m.groupby("loss", sort=False):
            right.plot(g["step"], g["norm_cv"], ls="--", lw=1.0, color=LOSS_COLORS.get(loss, REF_COLOR))
        right.set_ylim(bottom=0)
        right.set_ylabel("CV = std / mean (dashed)")
        a1.set_title(f"η = {eta:g}: during training (solid: Var, dashed: CV)")
    s = summary[summary["metric"] == "R@1"]
    xs = {e: i for i, e in enumerate(sorted(s["eta"].unique()))}
    for loss in losses:
        d = s[s["loss"] == loss].sort_values("eta")
        a2.errorbar([xs[e] for e in d["eta"]], d["mean"], yerr=err_bars(d), color=LOSS_COLORS[loss],
                    marker=LOSS_MARKERS.get(loss, "o"), ms=4, capsize=2, label=loss)
    a2.axvline(xs.get(eta, 0), color=REF_COLOR, ls=":", lw=1.2)
    a2.set_xticks(list(xs.values()), [f"{e:g}" for e in xs])
    a2.set_xlabel("η (grid index; 0 = no SEC)")
    a2.set_ylabel("R@1 (%)")
    a2.set_title("final R@1 (mean, 95% CI)")
    a2.legend(title="loss", loc="center left", bbox_to_anchor=(1.0, 0.5))
    return fig


@styled
def fairness_figure(stats: pd.DataFrame, cols: Sequence[str], labels: Mapping | None = None) -> Figure:
    """Per-run statistics (one panel per column of ``cols``): each run a dot, per loss (rows, shared by the
    panels and named once, on the left) and variant (colours), with the mean over seeds as a bar tick; a
    dotted line at 0. Each panel's label (``labels[col]``, else the column) is wrapped to the panel's width,
    so neighbouring labels never run into each other."""
    labels = labels or {}
    losses = list(dict.fromkeys(stats["loss"]))
    variants = [v for v in VARIANT_COLORS if v in set(stats["variant"])]
    fig, axes = subplots(1, len(cols), w=BOOK_WIDTH / max(len(cols), 1), h=1.3 + 0.5 * len(losses),
                         sharey=True)
    # characters of a 9 pt label that fit one panel (about 5.3 pt per character, 80% of the panel's width)
    chars = max(16, int(0.8 * 72 * BOOK_WIDTH / max(len(cols), 1) / 5.3))
    for k, (ax, col) in enumerate(zip(axes[0], cols)):
        for j, v in enumerate(variants):
            for y, loss in enumerate(losses):
                pts = stats.loc[(stats["loss"] == loss) & (stats["variant"] == v), col].astype(float).dropna()
                yy = y + (j - (len(variants) - 1) / 2) * 0.25
                ax.scatter(pts, [yy] * len(pts), s=14, color=VARIANT_COLORS[v], alpha=0.6, lw=0)
                if len(pts):
                    ax.plot([pts.mean()] * 2, [yy - 0.1, yy + 0.1], color=VARIANT_COLORS[v], lw=2)
        ax.axvline(0, color="0.5", ls=":", lw=1)
        ax.set_yticks(range(len(losses)), losses)
        ax.tick_params(axis="y", labelleft=k == 0)
        ax.xaxis.set_major_locator(ticker.MaxNLocator(nbins=4))
        ax.set_xlabel(textwrap.fill(str(labels.get(col, col)), chars), fontsize=9)
    axes[0][0].set_ylim(len(losses) - 0.5, -0.5)
    fig.legend(handles=legend_handles(variants), loc="outside lower center", ncols=len(variants), fontsize=9)
    return fig
