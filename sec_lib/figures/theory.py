"""Figures of the theory page: perpendicular gradients, gradient and angle against the norm, norm
growth under SGD, and the 2-D toy (still frames and a kernel-free animation widget)."""
from __future__ import annotations

from typing import Mapping, Sequence

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.colors import LogNorm

from ..report import cv_from_var
from ..params import Number
from ..report import loglog_fit, loglog_fits
from .palette import REF_COLOR, VARIANT_COLORS, class_color
from .style import figure
from .widgets import slider_stack


def _count(name: str, value, lo: int) -> int:
    return Number(lo, 10**9, integer=True).check(name, value)


def active_steps(toys: Mapping | Sequence, frac: float = 0.01) -> int:
    """The last step at which some point of some toy still moves by more than ``frac`` of the largest
    single-step move (after it the pictures hardly change); at least 1."""
    toys = list(toys.values()) if isinstance(toys, Mapping) else list(toys)
    last = 1
    for t in toys:
        moves = np.linalg.norm(np.diff(t.positions, axis=0), axis=2).max(axis=1)  # (steps,)
        if moves.size and moves.max() > 0:
            idx = np.nonzero(moves > frac * moves.max())[0]
            last = max(last, int(idx[-1]) + 1)
    return last


def frame_steps(steps: int, n_frames: int, active: int | None = None) -> list[int]:
    """``n_frames`` distinct step indices from 0 to ``steps``.

    With ``active`` (e.g. :func:`active_steps`), all but the last frame fall in ``0..active`` (where
    the motion is) and the last frame is ``steps``; steps are denser at the start either way.
    """
    steps = _count("steps", steps, 1)
    n_frames = _count("n_frames", n_frames, 2)
    if active is None or active >= steps:
        raw = np.round(steps * (np.linspace(0, 1, n_frames) ** 1.5)).astype(int)
    else:
        active = _count("active", active, 1)
        head = np.round(active * (np.linspace(0, 1, n_frames - 1) ** 1.5)).astype(int)
        raw = np.append(head, steps)
    return [int(s) for s in np.unique(raw)]


def _class_colors(labels) -> list:
    return [class_color(c) for c in labels]


def plot_perpendicularity(df: pd.DataFrame):
    """Left: angle between ``dL/df`` and ``f`` per sample (90°). Right: ``|cos|`` on a log axis vs machine eps."""
    d = df.dropna(subset=["cos_grad_f"])
    fig = figure(9, 3.4)
    a1, a2 = fig.subplots(1, 2)
    a1.scatter(d["norm"], d["angle_deg"], s=14, c=_class_colors(d["label"]))
    a1.set_xscale("log")
    a1.set_ylim(0, 180)
    a1.axhline(90, color="k", lw=0.8, ls="--")
    a1.set_yticks([0, 45, 90, 135, 180])
    a1.set_xlabel("‖f‖")
    a1.set_ylabel("angle(∂L/∂f, f)  [degrees]")
    a1.set_title("gradient ⊥ embedding (Prop. 1)")
    eps = np.finfo(np.float64).eps
    y = d["cos_grad_f"].abs().clip(lower=eps / 100)
    a2.scatter(d["norm"], y, s=14, c=_class_colors(d["label"]))
    a2.axhline(eps, color="k", lw=0.8, ls="--", label="float64 eps")
    a2.set_xscale("log")
    a2.set_yscale("log")
    a2.set_ylim(eps / 200, 1)
    a2.set_xlabel("‖f‖")
    a2.set_ylabel("|cos(∂L/∂f, f)|")
    a2.set_title(f"max |cos| = {d['cos_grad_f'].abs().max():.1e}")
    a2.legend(loc="upper right", fontsize=9)
    fig.suptitle(f"{df['loss'].iloc[0]} loss, {d['sample'].nunique()} samples × {d['scale'].nunique()} scales",
                 fontsize=10)
    return fig


def plot_grad_vs_norm(df: pd.DataFrame, max_lines: int = 8):
    """Log-log ‖∂L/∂f‖ against ‖f‖: the random batch (one fit across samples) and fixed-direction lines."""
    fig = figure(6.4, 4.4)
    ax = fig.subplots()
    base = df[(df["scale"] == 1.0) & (df["grad_norm"] > 0)]
    rs, _, rr2 = loglog_fit(base["norm"], base["grad_norm"], min_points=2)
    fixed = loglog_fits(df, "norm", "grad_norm", ["seed", "sample"])
    shown = list(base["sample"].unique()[:max_lines])
    for i, s in enumerate(shown):
        g = df[(df["sample"] == s) & (df["grad_norm"] > 0)].sort_values("norm")
        ax.plot(g["norm"], g["grad_norm"], "-", color="0.6", lw=1, alpha=0.8,
                label=(f"same direction, rescaled: slope {fixed['slope'].mean():.4f} "
                       f"(range {fixed['slope'].min():.4f}…{fixed['slope'].max():.4f})") if i == 0 else None)
    ax.scatter(base["norm"], base["grad_norm"], s=22, c=_class_colors(base["label"]), zorder=3,
               label=f"random directions, one batch: slope {rs:.2f}, R² {rr2:.2f}")
    if np.isfinite(rs):
        xs = np.geomspace(base["norm"].min(), base["norm"].max(), 20)
        icpt = np.mean(np.log(base["grad_norm"]) - rs * np.log(base["norm"]))
        ax.plot(xs, np.exp(icpt) * xs ** rs, "k--", lw=1, label="fit across samples")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("‖f‖")
    ax.set_ylabel("‖∂L/∂f‖")
    ax.set_title(f"{df['loss'].iloc[0]}: gradient magnitude ∝ 1/‖f‖ (Prop. 2)", fontsize=10)
    ax.legend(fontsize=9, loc="lower left")
    return fig


def plot_slope_spread(spread: pd.DataFrame):
    """Distribution over seeds of the across-sample slope (noisy) vs the fixed-direction slope (-1)."""
    fig = figure(8.0, 3.2)
    ax = fig.subplots()
    ax.hist(spread["random_slope"].dropna(), bins=max(5, min(30, len(spread) // 2)), color=VARIANT_COLORS["none"], alpha=0.7,
            label=f"across samples (random directions), {len(spread)} batches")
    ax.axvline(spread["fixed_slope_mean"].mean(), color="k", lw=2,
               label=f"fixed direction: {spread['fixed_slope_mean'].mean():.4f}")
    ax.axvline(-1, color=REF_COLOR, ls=":", lw=1.2, label="theory −1")
    ax.set_xlabel("log-log slope of ‖∂L/∂f‖ on ‖f‖")
    ax.set_ylabel("batches")
    ax.legend(fontsize=9, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


def plot_norm_growth(growth: pd.DataFrame):
    """Per-sample norms over plain SGD steps, one panel per variant (no SEC, SEC), coloured by initial norm."""
    variants = list(dict.fromkeys(growth["variant"]))
    fig = figure(4.2 * len(variants) + 1.2, 3.7)
    axes = np.atleast_1d(fig.subplots(1, len(variants), sharey=True))
    first_all = growth[growth["step"] == 0]["norm"]
    cnorm = LogNorm(first_all.min(), first_all.max())
    cmap = matplotlib.colormaps["viridis"]
    for ax, v in zip(axes, variants):
        g = growth[growth["variant"] == v]
        for s, gs in g.groupby("sample"):
            ax.plot(gs["step"], gs["norm"], lw=1, color=cmap(cnorm(gs["norm"].iloc[0])), alpha=0.9)
        last = g[g["step"] == g["step"].max()]["norm"]
        first = g[g["step"] == 0]["norm"]
        eta = g["eta"].iloc[0]
        if v == "sec":
            mu = g.groupby("step")["mu"].first()
            ax.plot(mu.index, mu.values, "k--", lw=1.2, label="μ (batch mean norm)")
            ax.legend(fontsize=9, loc="upper right")
        ax.set_yscale("log")
        ax.set_title(f"{'no SEC' if v == 'none' else f'SEC η={eta:g}'}: var(‖f‖) {first.var(ddof=0):.3f} → "
                     f"{last.var(ddof=0):.3f}\n(CV = std / mean {cv_from_var(first.var(ddof=0), first.mean()):.3f} → "
                     f"{cv_from_var(last.var(ddof=0), last.mean()):.3f})", fontsize=9)
        ax.set_xscale("symlog", linthresh=1.0)
        ax.set_xlim(0, g["step"].max())
        ax.set_xlabel("SGD step on the embeddings (symlog)")
    axes[0].set_ylabel("‖f_i‖")
    sm = matplotlib.cm.ScalarMappable(norm=cnorm, cmap=cmap)
    fig.colorbar(sm, ax=list(axes), label="initial ‖f_i‖", shrink=0.9)
    fig.suptitle(f"{growth['loss'].iloc[0]} loss, plain SGD on free embeddings", fontsize=10)
    return fig


def plot_angle_change(df: pd.DataFrame, max_lines: int = 8):
    """Log-log tan Δθ of one SGD step against ‖f‖, fixed-direction lines (slope −2) and the random batch."""
    fig = figure(6.4, 4.4)
    ax = fig.subplots()
    d = df[df["tan_dtheta"] > 0]
    base = d[d["scale"] == 1.0]
    rs, _, rr2 = loglog_fit(base["norm"], base["tan_dtheta"], min_points=2)
    fixed = loglog_fits(d, "norm", "tan_dtheta", ["seed", "sample"])
    for i, s in enumerate(base["sample"].unique()[:max_lines]):
        g = d[d["sample"] == s].sort_values("norm")
        ax.plot(g["norm"], g["tan_dtheta"], "-", color="0.6", lw=1,
                label=(f"same direction, rescaled: slope {fixed['slope'].mean():.4f}") if i == 0 else None)
    ax.scatter(base["norm"], base["tan_dtheta"], s=22, c=_class_colors(base["label"]), zorder=3,
               label=f"random directions, one batch: slope {rs:.2f}, R² {rr2:.2f}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("‖f‖")
    ax.set_ylabel("tan Δθ of one SGD step")
    ax.set_title(f"{df['loss'].iloc[0]}: small norms turn fast, tan Δθ ∝ 1/‖f‖²", fontsize=10)
    ax.legend(fontsize=9, loc="lower left")
    return fig


def _toy_limits(toys: Sequence) -> float:
    return 1.08 * max(float(np.abs(t.positions).max()) for t in toys)


def _arrow_scale(toys: Sequence, lim: float) -> float:
    """One multiplier for all arrows so that the median step-0 arrow is ~20% of the axis half-width."""
    g = np.concatenate([np.linalg.norm(t.lr * t.metric_grads[0], axis=1) for t in toys])
    g = g[g > 0]
    return float(0.2 * lim / np.median(g)) if g.size else 1.0


def _draw_toy(ax, toy, step: int, lim: float, arrow_k: float, trail: int | None = None):
    pos = toy.positions[: step + 1]
    cols = _class_colors(toy.labels)
    th = np.linspace(0, 2 * np.pi, 200)
    ax.plot(np.cos(th), np.sin(th), color="0.75", lw=0.8, ls=":")
    r = toy.norms()[step].mean() if not toy.sec else toy.mu[step]
    ax.plot(r * np.cos(th), r * np.sin(th), color="0.35", lw=1, ls="--")
    start = 0 if trail is None else max(0, step - trail)
    for i in range(pos.shape[1]):
        ax.plot(pos[start:, i, 0], pos[start:, i, 1], "-", color=cols[i], lw=1, alpha=0.6)
    p = pos[-1]
    ax.scatter(p[:, 0], p[:, 1], s=30, c=cols, edgecolors="k", linewidths=0.5, zorder=4)
    gm = -toy.lr * toy.metric_grads[step] * arrow_k
    ax.quiver(p[:, 0], p[:, 1], gm[:, 0], gm[:, 1], angles="xy", scale_units="xy", scale=1, color="k",
              width=0.006, zorder=5)
    if toy.sec:
        gs = -toy.lr * toy.sec_grads[step] * arrow_k
        ax.quiver(p[:, 0], p[:, 1], gs[:, 0], gs[:, 1], angles="xy", scale_units="xy", scale=1, color=VARIANT_COLORS["sec"],
                  width=0.006, zorder=5)
    ax.set_xlim(-lim, lim)
    ax.set_ylim(-lim, lim)
    ax.set_aspect("equal")
    ax.tick_params(labelsize=9)
    n = toy.norms()[step]
    turn = np.degrees(toy.turn_angles()[min(step, toy.steps - 1)])
    small, big = int(np.argmin(n)), int(np.argmax(n))
    ax.set_title(f"{toy.name}, step {step}\nnorms {n.min():.2f}…{n.max():.2f}, var {n.var():.3f} "
                 f"(CV {cv_from_var(n.var(), n.mean()):.3f})\n"
                 f"next turn: smallest ‖f‖ {turn[small]:.2g}°, largest ‖f‖ {turn[big]:.2g}°", fontsize=9)


def plot_toy(toys: Mapping | Sequence):
    """The 2-D toy side by side (no SEC | SEC): full trajectories, plus norm variance and loss per step."""
    toys = list(toys.values()) if isinstance(toys, Mapping) else list(toys)
    fig = figure(3.9 * len(toys) + 3.6, 4.2)
    gs = fig.add_gridspec(2, len(toys) + 1, width_ratios=[1] * len(toys) + [0.9])
    lim = _toy_limits(toys)
    k = _arrow_scale(toys, lim)
    for j, t in enumerate(toys):
        _draw_toy(fig.add_subplot(gs[:, j]), t, t.steps, lim, k)
    colors = [VARIANT_COLORS["none"] if getattr(t, "eta", 0) == 0 else VARIANT_COLORS["sec"] for t in toys]
    av = fig.add_subplot(gs[0, -1])
    al = fig.add_subplot(gs[1, -1], sharex=av)
    acv = av.twinx()                          # the scale-free spread beside the variance, dashed
    for t, c in zip(toys, colors):
        av.plot(np.arange(t.steps + 1), t.norm_var(), color=c, label=t.name)
        acv.plot(np.arange(t.steps + 1), cv_from_var(t.norm_var(), t.norms().mean(axis=1)), color=c, ls="--", lw=1)
        al.plot(np.arange(t.steps + 1), t.loss_values, color=c, label=t.name)
    av.set_yscale("symlog", linthresh=1e-3)
    av.set_ylabel("var(‖f‖) (solid)", fontsize=9)
    acv.set_ylabel("CV = std / mean (dashed)", fontsize=9)
    acv.set_ylim(bottom=0)
    acv.tick_params(labelsize=9)
    al.set_ylabel("metric loss", fontsize=9)
    al.set_xlabel("step")
    av.legend(fontsize=9)
    for a in (av, al):
        a.tick_params(labelsize=9)
    fig.suptitle(f"{toys[0].loss} loss on free 2-D points (arrows: −lr·∂L/∂f ×{k:.3g}; vermilion: SEC's radial pull; "
                 "dotted: unit circle; dashed: mean norm / μ)", fontsize=9)
    return fig


def toy_frames(toys: Mapping | Sequence, steps: Sequence[int], trail: int | None = None) -> list:
    """One Figure per selected step, the toys side by side: points, their recent path, the unit circle
    (dotted), the mean-norm / μ circle (dashed), and arrows for the negative metric gradient (black,
    tangential) and SEC's pull (vermilion, radial), all with one common arrow scale."""
    toys = list(toys.values()) if isinstance(toys, Mapping) else list(toys)
    steps = [int(s) for s in steps]
    for s in steps:
        if not all(0 <= s <= t.steps for t in toys):
            raise ValueError(f"steps: {s} is not valid; valid steps are 0..{min(t.steps for t in toys)}")
    lim = _toy_limits(toys)
    k = _arrow_scale(toys, lim)
    figs = []
    for s in steps:
        fig = figure(3.6 * len(toys), 4.1)
        axes = np.atleast_1d(fig.subplots(1, len(toys)))
        for ax, t in zip(axes, toys):
            _draw_toy(ax, t, s, lim, k, trail=trail)
        fig.suptitle(f"arrows: −lr·∂L/∂f × {k:.3g} (black), SEC pull (vermilion)", fontsize=9)
        figs.append(fig)
    return figs


def toy_animation(toys: Mapping | Sequence, n_frames: int = 12, dpi: int = 72,
                  trail: int | None = None):
    """A kernel-free slider over training steps (:func:`sec_lib.figures.widgets.slider_stack` of :func:`toy_frames`)."""
    toys_l = list(toys.values()) if isinstance(toys, Mapping) else list(toys)
    steps = frame_steps(min(t.steps for t in toys_l), n_frames, active=active_steps(toys_l))
    figs = toy_frames(toys_l, steps, trail=trail)
    return slider_stack(figs, [f"step {s}" for s in steps], description="training step", dpi=dpi)
