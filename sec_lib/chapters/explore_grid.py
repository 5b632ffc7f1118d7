"""The η/μ explorer's toy-grid analysis (no widgets): the grid's axes and cells, loading (and training) its
runs, the per-cell summary table, the cell and overview figures, and the computed sentences of the page
(:func:`describe`, :func:`reading`). The page API is :mod:`sec_lib.chapters.explore`; the widgets that show
this analysis are in :mod:`sec_lib.chapters.explore_widgets`.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from ..runs import experiments as ex
from ..figures import explore as fig_explore
from ..figures.palette import eta_label, mu_label
from ..params import Choice
from ..runs.pool import run_all
from ..runs.store import ResultStore, load_runs, run_key
from .common import var_cv_text, with_batch_cv, with_norm_cv

#: What to do with grid runs missing from the store: train them (through the store) or show placeholders.
MISSING = ("train", "skip")


def mu_key(cfg) -> str:
    """The μ mode of a config as a string key: 'batch', 'ema', 'zero' or the fixed radius ('4.0')."""
    return str(cfg.mu)


def mu_value(key: str):
    """Inverse of :func:`mu_key`: 'batch' / 'ema' / 'zero' stay strings, a radius becomes a float."""
    return key if key in ("batch", "ema", "zero") else float(key)


@dataclass(frozen=True)
class GridAxes:
    """The explorer's axes, in display order: η values (0 first), μ keys, losses."""
    etas: tuple
    mus: tuple
    losses: tuple

    @property
    def eta_labels(self) -> tuple:
        return tuple(eta_label(e) for e in self.etas)

    @property
    def mu_labels(self) -> tuple:
        return tuple(mu_label(m) for m in self.mus)

    def eta_of(self, label: str) -> float:
        return self.etas[self.eta_labels.index(label)]

    def mu_of(self, label: str) -> str:
        return self.mus[self.mu_labels.index(label)]


def grid_axes(configs: Sequence) -> GridAxes:
    """The axes a list of toy-grid configs spans. η = 0 runs (no SEC) belong to every μ mode."""
    configs = list(configs)
    if not configs:
        raise ValueError("configs: needs at least one TrainConfig (e.g. experiments.sweep_configs('explore', p))")
    etas = tuple(sorted({float(c.eta) for c in configs} | {0.0}))
    mus = tuple(dict.fromkeys(mu_key(c) for c in configs if c.eta > 0)) or ("batch",)
    losses = tuple(dict.fromkeys(c.loss for c in configs))
    return GridAxes(etas, mus, losses)


def cell_keys(configs: Sequence, axes: GridAxes | None = None) -> dict:
    """``(eta, mu_key, loss) -> [run keys]`` (one per seed, in config order)."""
    axes = axes or grid_axes(configs)
    cells: dict = {}
    for c in configs:
        mus = axes.mus if c.eta == 0 else (mu_key(c),)
        for m in mus:
            keys = cells.setdefault((float(c.eta), m, c.loss), [])
            k = run_key(c)
            if k not in keys:
                keys.append(k)
    return cells


@dataclass
class Grid:
    """A toy grid with its runs: axes, cell -> run keys, and the stored runs' tidy frames."""
    profile: str
    axes: GridAxes
    cells: dict                 # (eta, mu_key, loss) -> list of run keys
    frames: object              # sec_lib.runs.store.Frames of the runs found in the store
    configs: list = field(default_factory=list)
    train_seconds: float = 0.0  # time spent training missing runs (0 when all were stored)
    trained: int = 0            # how many runs were trained by load_grid

    def runs_of(self, eta: float, mu: str, loss: str) -> pd.DataFrame:
        """The rows of ``frames.runs`` of one cell (empty when not computed)."""
        keys = self.cells.get((float(eta), mu, loss), [])
        r = self.frames.runs
        if not len(r) or not keys:
            return r.iloc[0:0]
        return r[r["key"].isin(keys)]


def build_grid(configs: Sequence, frames, profile: str = "?") -> Grid:
    """A :class:`Grid` from the grid's configs and the frames of (some of) their runs."""
    configs = list(configs)
    axes = grid_axes(configs)
    return Grid(profile=str(profile), axes=axes, cells=cell_keys(configs, axes), frames=frames, configs=configs)


def load_grid(profile: str = "cpu", missing: str = "train", root=None, jobs: int | None = None) -> Grid:
    """The explorer grid of ``profile`` (``experiments.sweep_configs('explore', profile)``).

    ``missing='train'`` first trains every run that is not in the store (``pool.run_all``, with the
    profile's ``jobs``; a smoke run takes about a second); ``'skip'`` leaves those cells as
    placeholders. ``root``: the store folder (default ``$SEC_RUNS_DIR`` or ``data/runs``).
    """
    Choice(ex.PROFILE_NAMES).check("profile", profile)
    Choice(MISSING).check("missing", missing)
    p = ex.get_profile(profile)
    store = ResultStore(root)
    configs = ex.sweep_configs("explore", p, store)
    seconds, trained = 0.0, 0
    if missing == "train":
        todo = {store.path(c).name for c in configs if not store.has(c)}
        if todo:
            t0 = time.perf_counter()
            run_all(configs, root=root, jobs=p.jobs if jobs is None else jobs)
            seconds, trained = time.perf_counter() - t0, len(todo)
    unique = list({run_key(c): c for c in configs}.values())     # the η = 0 run is listed once per μ mode
    frames = load_runs(unique, root=root, missing="skip",
                       tables=("steps", "tracked", "evals", "grad_scatter"))
    g = build_grid(configs, frames, profile)
    g.train_seconds, g.trained = seconds, trained
    return g


def _final_batch_var(steps: pd.DataFrame, col: str = "norm_var") -> pd.Series:
    """Mean batch norm variance (``col = "norm_cv"``: its CV, std / mean, :func:`~sec_lib.chapters.common.with_batch_cv`)
    over the last 10% of steps, per run key."""
    steps = with_batch_cv(steps) if len(steps) else steps
    if not len(steps) or col not in steps.columns:
        return pd.Series(dtype=float)
    out = {}
    for k, s in steps.groupby("key"):
        n = max(1, len(s) // 10)
        out[k] = float(s.sort_values("step")[col].tail(n).mean())
    return pd.Series(out, dtype=float)


#: Each norm variance is followed by its CV (std / mean), the spread without the norms' scale.
SUMMARY_METRICS = ("R@1", "NMI", "train_norm_var", "train_norm_cv", "test_norm_var", "test_norm_cv",
                   "batch_norm_var", "batch_norm_cv")


def summary_table(grid: Grid) -> pd.DataFrame:
    """One row per grid cell: loss, μ, η, status ('done' / 'diverged' / 'not computed'), runs, and the
    mean over its finished seeds of final R@1, NMI (percent), train/test norm variance and the batch
    norm variance over the last 10% of steps, each variance followed by its CV (std / mean; NaN where the
    runs store no mean norm)."""
    runs = grid.frames.runs
    if len(runs):
        runs = with_norm_cv(runs)
        for m in ("R@1", "NMI", "train_norm_var", "train_norm_cv", "test_norm_var", "test_norm_cv"):
            if m not in runs.columns:
                runs[m] = np.nan
        runs["batch_norm_var"] = runs["key"].map(_final_batch_var(grid.frames.steps))
        runs["batch_norm_cv"] = runs["key"].map(_final_batch_var(grid.frames.steps, "norm_cv"))
    rows = []
    for loss in grid.axes.losses:
        for mu in grid.axes.mus:
            for eta in grid.axes.etas:
                keys = grid.cells.get((eta, mu, loss), [])
                r = runs[runs["key"].isin(keys)] if len(runs) else pd.DataFrame()
                done = r[r["status"] == "done"] if len(r) else r
                status = ("not computed" if not len(r) else "done" if len(done) else "diverged")
                row = {"loss": loss, "mu": mu, "mu_label": mu_label(mu), "eta": eta, "status": status,
                       "runs": len(r), "done": len(done)}
                for m in SUMMARY_METRICS:
                    row[m] = float(done[m].mean()) if len(done) else math.nan
                rows.append(row)
    return pd.DataFrame(rows)


def _cell_title(row: Mapping, loss: str, mu: str, eta: float) -> str:
    head = f"{loss}, μ = {mu_label(mu)}, η = {eta_label(eta)}"
    if row.get("status") == "done":
        return (f"{head}:  R@1 {row['R@1']:.1f}%, NMI {row['NMI']:.1f}%, final Var(‖f‖) {row['train_norm_var']:.3g} "
                f"(CV {row.get('train_norm_cv', math.nan):.2g})"
                + (f"  (mean of {row['done']} seeds; plots: seed of the first)" if row.get("done", 1) > 1 else ""))
    return f"{head}:  {row.get('status', 'not computed')}"


def _cell_parts(grid: Grid, eta: float, mu: str, loss: str, summary: pd.DataFrame):
    """What the figures of one computed cell draw: its run's frames (the first seed that finished, else the
    first), its title and a note when the run failed; None when the cell was not computed."""
    r = grid.runs_of(eta, mu, loss)
    if not len(r):
        return None
    done = r[r["status"] == "done"]
    key = (done if len(done) else r)["key"].iloc[0]
    steps, tracked, scatter = fig_explore.one_run(grid.frames, key)
    steps = with_batch_cv(steps) if len(steps) else steps        # the batch CV beside the batch variance
    row = summary[(summary["loss"] == loss) & (summary["mu"] == mu) & (summary["eta"] == float(eta))]
    row = row.iloc[0].to_dict() if len(row) else {}
    note = None
    if not len(done):
        err = r["error"].iloc[0] if "error" in r.columns else None
        note = f"run failed: {str(err)[:120]}" if err else "run failed"
    return (steps, tracked, scatter), _cell_title(row, loss, mu, eta), note


def _curve(summary: pd.DataFrame, mu: str, loss: str) -> pd.DataFrame:
    """The summary rows of one μ and loss whose runs finished (the grid's row the figures draw against η)."""
    return summary[(summary["loss"] == loss) & (summary["mu"] == mu) & (summary["status"] == "done")]


def cell_figure(grid: Grid, eta: float, mu: str, loss: str, summary: pd.DataFrame | None = None):
    """The composite figure of one grid cell (its run's four panels over the grid's row of its μ and loss, the
    cell marked), or None when the cell was not computed."""
    summary = summary_table(grid) if summary is None else summary
    parts = _cell_parts(grid, eta, mu, loss, summary)
    if parts is None:
        return None
    (steps, tracked, scatter), title, note = parts
    return fig_explore.cell_figure(steps, tracked, scatter, _curve(summary, mu, loss), grid.axes.etas, eta, mu,
                                   loss, title, note=note)


def run_figure(grid: Grid, eta: float, mu: str, loss: str, summary: pd.DataFrame | None = None):
    """The four panels of one grid cell's run under the cell's title, or None when the cell was not computed."""
    summary = summary_table(grid) if summary is None else summary
    parts = _cell_parts(grid, eta, mu, loss, summary)
    if parts is None:
        return None
    frames, title, note = parts
    return fig_explore.run_figure(*frames, title, note=note)


def grid_row_title(mu: str, loss: str) -> str:
    """The title of :func:`grid_row_figure`: which row of the grid it draws, for every η."""
    return f"{loss}, μ = {mu_label(mu)}: the final metrics of every η (the run above is one of them)"


def grid_row_figure(grid: Grid, mu: str, loss: str, summary: pd.DataFrame | None = None):
    """The grid's final R@1 and NMI, and final norm variance and CV, against η for one μ and loss, or None when
    none of its cells finished."""
    summary = summary_table(grid) if summary is None else summary
    curve = _curve(summary, mu, loss)
    if not len(curve):
        return None
    return fig_explore.grid_row_figure(curve, grid.axes.etas, mu, grid_row_title(mu, loss))


def overview_figure(grid: Grid, summary: pd.DataFrame | None = None):
    """R@1 (top) and final norm variance (bottom) against η, one line per μ mode, one column per loss."""
    return fig_explore.overview_figure(summary_table(grid) if summary is None else summary, grid.axes)


def describe(grid: Grid, mode: str | None = None) -> str:
    """A computed sentence on the grid: its size, what was found, trained, failed, and the mode."""
    s = summary_table(grid)
    counts = s["status"].value_counts()
    ax = grid.axes
    runs = grid.frames.runs
    n_keys = len({k for ks in grid.cells.values() for k in ks})
    text = (f"Profile `{grid.profile}`: {len(ax.etas)} values of η ({', '.join(ax.eta_labels)}) × "
            f"{len(ax.mus)} μ modes ({', '.join(ax.mu_labels)}) × {len(ax.losses)} losses "
            f"({', '.join(ax.losses)}) = {len(s)} cells from {n_keys} distinct runs "
            f"(η = 0 is one run per loss, shared by every μ). ")
    ema = sorted({c.momentum for c in grid.configs if c.eta > 0 and mu_key(c) == "ema"})
    if ema:
        text += f"EMA: μ follows the batch mean norm with momentum {', '.join(f'{m:g}' for m in ema)}. "
    text += (f"{int(counts.get('done', 0))} cells computed, {int(counts.get('diverged', 0))} diverged, "
             f"{int(counts.get('not computed', 0))} not computed (placeholders). ")
    if len(runs) and "iterations" in runs.columns:
        text += (f"Each run: {', '.join(map(str, sorted(runs['iterations'].unique())))} iterations of "
                 f"{', '.join(sorted(runs['optimizer'].unique()))} on `{', '.join(sorted(runs['dataset'].unique()))}` "
                 f"with an {', '.join(sorted(runs['model'].unique()))}, seeds "
                 f"{{{', '.join(map(str, sorted(runs['seed'].unique())))}}}. ")
    if grid.trained:
        text += f"{grid.trained} missing runs were trained just now ({grid.train_seconds:.0f} s). "
    if mode is not None:
        text += f"Mode: **{mode}**."
    return text


def _trends(done: pd.DataFrame, axes: GridAxes) -> pd.DataFrame:
    """Spearman rank correlation of η with final R@1 and with final norm variance, per (loss, μ)
    setting with at least three finished η values (η = 0 included)."""
    rows = []
    for loss in axes.losses:
        for mu in axes.mus:
            d = done[(done["loss"] == loss) & (done["mu"] == mu)]
            if d["eta"].nunique() >= 3:
                rows.append({"loss": loss, "mu": mu,
                             "rho_R@1": d["eta"].corr(d["R@1"], method="spearman"),
                             "rho_var": d["eta"].corr(d["train_norm_var"], method="spearman"),
                             "rho_cv": (d["eta"].corr(d["train_norm_cv"], method="spearman")
                                        if "train_norm_cv" in d else math.nan)})
    return (pd.DataFrame(rows).dropna(subset=["rho_R@1", "rho_var"]) if rows
            else pd.DataFrame(columns=["loss", "mu", "rho_R@1", "rho_var", "rho_cv"]))


def _cv_trend(trends: pd.DataFrame) -> str:
    """', and its CV (std / mean) in k of n (ρ from a to b)': the scale-free trend beside the variance's."""
    cv = trends["rho_cv"].dropna() if "rho_cv" in trends.columns else pd.Series(dtype=float)
    if not len(cv):
        return ", and its CV (std / mean) cannot be given (the runs store no mean norm)"
    return (f", and its CV (std / mean, scale-free) in {int((cv < 0).sum())} of {len(cv)} (ρ from {cv.min():+.2f} "
            f"to {cv.max():+.2f})")


def _trend_words(r1_down: int, var_falls: int, n: int) -> str:
    """The sentence that interprets the two trend counts (chosen by the counts, not typed per result)."""
    most = lambda k: k >= 0.75 * n   # noqa: E731
    few = lambda k: k <= 0.25 * n    # noqa: E731
    if most(var_falls) and most(r1_down):
        return ("On this grid a stronger pull equalises the norms and costs retrieval at the same time: the "
                "regulariser's benefit, if any, is confined to small η.")
    if most(var_falls) and few(r1_down):
        return "On this grid a stronger pull equalises the norms and retrieval improves along with it."
    if most(var_falls):
        return "η controls the norm spread reliably; its effect on retrieval is mixed across settings."
    return "Neither trend is consistent across the settings of this grid."


def reading(grid: Grid, summary: pd.DataFrame | None = None) -> str:
    """The closing reading, every number computed from the grid (Markdown)."""
    s = summary_table(grid) if summary is None else summary
    done = s[s["status"] == "done"]
    lines = []
    wins, settings, var_down, cv_down, cv_known = 0, 0, 0, 0, 0
    best_mu = {}
    for loss in grid.axes.losses:
        base = done[(done["loss"] == loss) & (done["eta"] == 0)]
        base_r1 = float(base["R@1"].mean()) if len(base) else math.nan
        base_var = float(base["train_norm_var"].mean()) if len(base) else math.nan
        base_cv = float(base["train_norm_cv"].mean()) if len(base) and "train_norm_cv" in base else math.nan
        parts = []
        best_of_loss = None
        for mu in grid.axes.mus:
            d = done[(done["loss"] == loss) & (done["mu"] == mu) & (done["eta"] > 0)]
            if not len(d):
                parts.append(f"μ = {mu_label(mu)}: no run with η > 0 finished")
                continue
            settings += 1
            b = d.loc[d["R@1"].idxmax()]
            v = d.loc[d["train_norm_var"].idxmin()]
            gain = b["R@1"] - base_r1
            wins += bool(gain > 0)
            var_down += bool(v["train_norm_var"] < base_var)
            cv_min = float(d["train_norm_cv"].min()) if "train_norm_cv" in d and d["train_norm_cv"].notna().any() else math.nan
            cv_known += bool(np.isfinite(cv_min) and np.isfinite(base_cv))
            cv_down += bool(np.isfinite(cv_min) and np.isfinite(base_cv) and cv_min < base_cv)
            if best_of_loss is None or b["R@1"] > best_of_loss[1]:
                best_of_loss = (mu, float(b["R@1"]), float(b["eta"]))
            parts.append(f"μ = {mu_label(mu)}: best R@1 {b['R@1']:.1f}% at η = {eta_label(b['eta'])} "
                         f"({gain:+.1f} points vs η = 0); smallest final norm variance at η = {eta_label(v['eta'])}, "
                         f"from η = 0 {var_cv_text(base_var, v['train_norm_var'], base_cv, v.get('train_norm_cv', math.nan))}"
                         f" ({v['train_norm_var'] / base_var:.2g}× the variance of η = 0)"
                         if np.isfinite(base_var) and base_var > 0 else
                         f"μ = {mu_label(mu)}: best R@1 {b['R@1']:.1f}% at η = {eta_label(b['eta'])}; smallest "
                         f"final norm variance {v['train_norm_var']:.3g} (CV {v.get('train_norm_cv', math.nan):.3g}) "
                         f"at η = {eta_label(v['eta'])}")
        if best_of_loss:
            best_mu[loss] = best_of_loss
        head = (f"**{loss}** (η = 0: R@1 {base_r1:.1f}%, final norm variance {base_var:.3g}, CV {base_cv:.3g})"
                if np.isfinite(base_r1) else f"**{loss}** (the η = 0 run is missing)")
        lines.append(f"- {head}:\n" + "\n".join(f"  - {p}" for p in parts))
    n_div = int((s["status"] == "diverged").sum())
    summary_lines = []
    if settings:
        summary_lines.append(f"In {wins} of {settings} (loss, μ) settings the best η > 0 on this grid beats η = 0 "
                             f"on R@1, and in {var_down} of {settings} some η > 0 ends with a smaller norm "
                             f"variance than η = 0 ("
                             + (f"a smaller CV, std / mean, in {cv_down} of {cv_known})." if cv_known else
                                "no CV, std / mean, beside it: the runs store no mean norm)."))
    trends = _trends(done, grid.axes)
    if len(trends):
        r1_down = int((trends["rho_R@1"] < 0).sum())
        var_falls = int((trends["rho_var"] < 0).sum())
        summary_lines.append(
            f"Across η (η = 0 included) R@1 falls as η grows in {r1_down} of {len(trends)} settings (Spearman ρ "
            f"from {trends['rho_R@1'].min():+.2f} to {trends['rho_R@1'].max():+.2f}), while the final norm variance "
            f"falls in {var_falls} of {len(trends)} (ρ from {trends['rho_var'].min():+.2f} to "
            f"{trends['rho_var'].max():+.2f})" + _cv_trend(trends) + ". " + _trend_words(r1_down, var_falls, len(trends)))
    for loss, (mu, r1, eta) in best_mu.items():
        summary_lines.append(f"For {loss} the highest R@1 with a regularizer on (η > 0: SEC, or L2-reg where μ = zero) is {r1:.1f}%, with μ = "
                             f"{mu_label(mu)} at η = {eta_label(eta)}.")
    if n_div:
        summary_lines.append(f"{n_div} of {len(s)} cells diverged (a non-finite loss), which marks where η is too large "
                             f"for this learning rate.")
    seeds = sorted(grid.frames.runs["seed"].unique()) if len(grid.frames.runs) else []
    summary_lines.append(f"Caveat: {len(seeds)} seed{'s' if len(seeds) != 1 else ''} per cell and the best η is "
                         f"picked on the test classes "
                         f"themselves, so these maxima are optimistic: read them as where to look, not as results.")
    return "\n".join(lines) + "\n\n" + " ".join(summary_lines)
