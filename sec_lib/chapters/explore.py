"""The η/μ explorer: what do the SEC weight η and the target norm μ do to training?

Two ways to look at the same toy grid (``experiments.toy_grid``: η ∈ {0, toy_etas} × μ mode ∈
{batch mean, EMA, zero (L2-reg), fixed radius} × loss ∈ {semihard, npair} on the ``toy`` data
with an MLP):

* **static** (the rendered book, no kernel): every grid cell is one precomputed composite figure
  (tracked norms, batch mean norm ± std with μ, batch norm variance, gradient magnitude against
  norm on log-log axes with fitted slopes, and R@1 / NMI and final norm variance against η with
  the cell marked). :func:`explorer_widget` puts them in nested ``ipywidgets.Stack`` s switched by
  an η slider, a μ dropdown and a loss dropdown through client-side ``jslink`` s
  (:func:`sec_lib.figures.widgets.linked_explorer`), so the page needs no Python. Cells whose run is not in
  the store are shown as a placeholder ("not computed in this profile").
* **live** (a running Jupyter kernel): :func:`live_panel` adds an optimizer dropdown and a *Train*
  button; pressing it trains the setting the same three controls select (:func:`live_config`,
  :func:`run_live`: ``sec_lib.train.train`` with a progress callback) and shows the same composite
  figure for the fresh run. In the static page :func:`live_section` shows a note instead
  (:func:`sec_lib.figures.widgets.live_note`).

Which of the two a notebook shows is decided by :func:`detect_mode`: papermill (the book's runner)
gets ``static``, a kernel under Jupyter gets ``live``.

The figures are drawn by :mod:`sec_lib.figures.explore` (which reuses the train page's panels);
this module picks the data of a cell and hands it over.

``load_grid(missing="train")`` trains the grid's missing runs through the store (``store.run_all``),
and the live panel trains one run in the kernel: both only on the reader's explicit request (the
notebook's ``missing`` parameter, the *Train* button); the book's runner has trained the grid before
the page runs, so a built page finds every run stored.

The page is one feature read top to bottom (the grid, its summary and reading, the cell figures and
the widget, the live panel), hence longer than the other chapters.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

import ipywidgets as widgets
import numpy as np
import pandas as pd

from .. import experiments as ex
from ..figures import explore as fig_explore
from ..figures.palette import eta_label, mu_label
from ..figures.widgets import fig_to_image, linked_explorer, live_note
from ..params import Choice, Mu, Number
from ..store import ResultStore, load_runs, results_to_frames, run_all, run_key
from ..threads import torch_threads
from ..train import TrainConfig, train
from . import profile_param

#: Values of the notebook's ``mode`` parameter.
MODES = ("auto", "static", "live")
#: What to do with grid runs missing from the store: train them (through the store) or show placeholders.
MISSING = ("train", "skip")
#: Optimizers the live panel offers.
LIVE_OPTIMIZERS = ("adam", "adamw", "sgd")
#: Learning rate per live optimizer (None: the profile's toy ``lr``, tuned for Adam). SGD (momentum 0.9):
#: 0.01, the best of {0.01, 0.02, 0.05, 0.1} for semihard without SEC on the cpu toy grid (larger rates
#: lose R@1 and make large η diverge).
LIVE_LR: dict = {"adam": None, "adamw": None, "sgd": 0.01}
#: The explore notebook's parameters (validated with ``sec_lib.params.notebook_params``).
PARAMS = {
    **profile_param(),
    "mode": Choice(MODES),
    "missing": Choice(MISSING),
}


def _read_cmdline(pid: int, proc: Path) -> str | None:
    try:
        raw = (proc / str(pid) / "cmdline").read_bytes()
    except OSError:
        return None
    return raw.replace(b"\0", b" ").decode("utf-8", "replace").strip()


def _read_ppid(pid: int, proc: Path) -> int | None:
    try:
        stat = (proc / str(pid) / "stat").read_text()
    except OSError:
        return None
    # "pid (comm) state ppid ...": comm may contain spaces and parentheses, so split after the last ')'
    try:
        return int(stat[stat.rindex(")") + 1:].split()[1])
    except (ValueError, IndexError):
        return None


def parent_cmdlines(ppid: int | None = None, proc: str | Path = "/proc", depth: int = 3) -> list[str] | None:
    """Command lines of the parent process and up to ``depth - 1`` of its ancestors (Linux ``/proc``).

    Returns None when the parent's command line cannot be read (no ``/proc``: macOS, Windows).
    """
    proc = Path(proc)
    pid = os.getppid() if ppid is None else int(ppid)
    first = _read_cmdline(pid, proc)
    if first is None:
        return None
    out = [first]
    for _ in range(depth - 1):
        nxt = _read_ppid(pid, proc)
        if not nxt or nxt <= 1 or nxt == pid:
            break
        pid = nxt
        line = _read_cmdline(pid, proc)
        if line is None:
            break
        out.append(line)
    return out


def _papermill_env(environ: Mapping) -> bool:
    """A hint in the environment that papermill started us (used only when ``/proc`` is unreadable):
    a ``PAPERMILL*`` variable, or a shell's ``$_`` naming the papermill executable."""
    return any(k.upper().startswith("PAPERMILL") for k in environ) or "papermill" in str(environ.get("_", ""))


def detect_mode(mode: str = "auto", ppid: int | None = None, proc: str | Path = "/proc",
                environ: Mapping | None = None) -> str:
    """``"static"`` or ``"live"``: whether this kernel renders the book or serves a person.

    ``mode`` other than ``"auto"`` is returned as is. ``"auto"`` reads the command line of the
    kernel's parent process and of two more ancestors (``/proc/<ppid>/cmdline``, Linux): if any
    contains ``papermill`` (the book's runner executes notebooks with ``python -m papermill``), the
    notebook is being rendered: ``"static"``; otherwise (a Jupyter server, VS Code, ...) ``"live"``.
    Where ``/proc`` cannot be read, it falls back to ``"static"`` when the environment hints at
    papermill (see :func:`_papermill_env`) and to ``"live"`` otherwise.

    Note: ``papermill.execute_notebook`` called from another program (e.g. pytest) is not detected
    (the parent is that program); pass ``mode="static"`` there.
    """
    Choice(MODES).check("mode", mode)
    if mode != "auto":
        return mode
    lines = parent_cmdlines(ppid, proc)
    if lines is None:
        return "static" if _papermill_env(os.environ if environ is None else environ) else "live"
    return "static" if any("papermill" in line for line in lines) else "live"


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
        raise ValueError("configs: needs at least one TrainConfig (e.g. experiments.chapter_configs('explore', p))")
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
    frames: object              # sec_lib.store.Frames of the runs found in the store
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
    """The explorer grid of ``profile`` (``experiments.chapter_configs('explore', profile)``).

    ``missing='train'`` first trains every run that is not in the store (``store.run_all``, with the
    profile's ``jobs``; a smoke run takes about a second); ``'skip'`` leaves those cells as
    placeholders. ``root``: the store folder (default ``$SEC_RUNS_DIR`` or ``data/runs``).
    """
    Choice(ex.PROFILE_NAMES).check("profile", profile)
    Choice(MISSING).check("missing", missing)
    p = ex.get_profile(profile)
    store = ResultStore(root)
    configs = ex.chapter_configs("explore", p, store)
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


def _final_batch_var(steps: pd.DataFrame) -> pd.Series:
    """Mean batch norm variance over the last 10% of steps, per run key."""
    if not len(steps) or "norm_var" not in steps.columns:
        return pd.Series(dtype=float)
    out = {}
    for k, s in steps.groupby("key"):
        n = max(1, len(s) // 10)
        out[k] = float(s.sort_values("step")["norm_var"].tail(n).mean())
    return pd.Series(out, dtype=float)


SUMMARY_METRICS = ("R@1", "NMI", "train_norm_var", "test_norm_var", "batch_norm_var")


def summary_table(grid: Grid) -> pd.DataFrame:
    """One row per grid cell: loss, μ, η, status ('done' / 'diverged' / 'not computed'), runs, and the
    mean over its finished seeds of final R@1, NMI (percent), train/test norm variance and the batch
    norm variance over the last 10% of steps."""
    runs = grid.frames.runs
    if len(runs):
        runs = runs.copy()
        for m in ("R@1", "NMI", "train_norm_var", "test_norm_var"):
            if m not in runs.columns:
                runs[m] = np.nan
        runs["batch_norm_var"] = runs["key"].map(_final_batch_var(grid.frames.steps))
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
        return (f"{head}:  R@1 {row['R@1']:.1f}%, NMI {row['NMI']:.1f}%, final Var(‖f‖) {row['train_norm_var']:.3g}"
                + (f"  (mean of {row['done']} seeds; plots: seed of the first)" if row.get("done", 1) > 1 else ""))
    return f"{head}:  {row.get('status', 'not computed')}"


def cell_figure(grid: Grid, eta: float, mu: str, loss: str, summary: pd.DataFrame | None = None):
    """The composite figure of one grid cell, or None when the cell was not computed."""
    summary = summary_table(grid) if summary is None else summary
    r = grid.runs_of(eta, mu, loss)
    if not len(r):
        return None
    done = r[r["status"] == "done"]
    key = (done if len(done) else r)["key"].iloc[0]
    steps, tracked, scatter = fig_explore.one_run(grid.frames, key)
    curve = summary[(summary["loss"] == loss) & (summary["mu"] == mu) & (summary["status"] == "done")]
    row = summary[(summary["loss"] == loss) & (summary["mu"] == mu) & (summary["eta"] == float(eta))]
    row = row.iloc[0].to_dict() if len(row) else {}
    note = None
    if not len(done):
        err = r["error"].iloc[0] if "error" in r.columns else None
        note = f"run failed: {str(err)[:120]}" if err else "run failed"
    return fig_explore.cell_figure(steps, tracked, scatter, curve, grid.axes.etas, eta, mu, loss,
                      _cell_title(row, loss, mu, eta), note=note)


class CellFigures(Mapping):
    """``(eta_label, mu_label, loss) -> Figure`` for every computed cell of a grid, built on access.

    Lazy on purpose: :func:`sec_lib.figures.widgets.linked_explorer` renders each Figure to one Image (and
    closes it) as it builds the Stacks, so at most one figure is alive at a time, and no throw-away
    Image widget is created (papermill saves every widget a kernel ever opened into the page).
    """
    def __init__(self, grid: Grid, summary: pd.DataFrame | None = None):
        self.grid = grid
        self.summary = summary_table(grid) if summary is None else summary
        ax = grid.axes
        self._cells = {(eta_label(e), mu_label(m), loss): (e, m, loss)
                       for loss in ax.losses for m in ax.mus for e in ax.etas if len(grid.runs_of(e, m, loss))}

    def __getitem__(self, key):
        return cell_figure(self.grid, *self._cells[key], summary=self.summary)

    def __iter__(self):
        return iter(self._cells)

    def __len__(self) -> int:
        return len(self._cells)


def grid_figures(grid: Grid, summary: pd.DataFrame | None = None) -> CellFigures:
    """The cells' figures, keyed by the controls' labels (a lazy :class:`CellFigures` mapping)."""
    return CellFigures(grid, summary)


def overview_figure(grid: Grid, summary: pd.DataFrame | None = None):
    """R@1 (top) and final norm variance (bottom) against η, one line per μ mode, one column per loss."""
    return fig_explore.overview_figure(summary_table(grid) if summary is None else summary, grid.axes)


def explorer_widget(grid: Grid, dpi: int = 72, summary: pd.DataFrame | None = None):
    """η slider + μ dropdown + loss dropdown, jslinked to nested Stacks of the cells' figures.

    Works without a kernel (the links live in the saved widget state). Cells that were not computed
    show a placeholder. Besides ``.controls``, ``.stacks`` and ``.links`` (from ``linked_explorer``) the
    box carries ``.grid`` and ``.cells``: ``(eta_label, mu_label, loss) -> Image`` for every cell.
    """
    ax = grid.axes
    box = linked_explorer(grid_figures(grid, summary), [("η", ax.eta_labels, "slider"),
                                                        ("μ", ax.mu_labels, "dropdown"),
                                                        ("loss", ax.losses, "dropdown")], dpi=dpi)
    box.grid = grid
    outer = box.children[1]
    box.cells = {(e, m, loss): outer.children[i].children[j].children[k]
                 for i, e in enumerate(ax.eta_labels) for j, m in enumerate(ax.mu_labels)
                 for k, loss in enumerate(ax.losses)}
    return box


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
                             "rho_var": d["eta"].corr(d["train_norm_var"], method="spearman")})
    return pd.DataFrame(rows).dropna() if rows else pd.DataFrame(columns=["loss", "mu", "rho_R@1", "rho_var"])


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
    wins, settings, var_down = 0, 0, 0
    best_mu = {}
    for loss in grid.axes.losses:
        base = done[(done["loss"] == loss) & (done["eta"] == 0)]
        base_r1 = float(base["R@1"].mean()) if len(base) else math.nan
        base_var = float(base["train_norm_var"].mean()) if len(base) else math.nan
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
            if best_of_loss is None or b["R@1"] > best_of_loss[1]:
                best_of_loss = (mu, float(b["R@1"]), float(b["eta"]))
            parts.append(f"μ = {mu_label(mu)}: best R@1 {b['R@1']:.1f}% at η = {eta_label(b['eta'])} "
                         f"({gain:+.1f} points vs η = 0); smallest final norm variance {v['train_norm_var']:.3g} "
                         f"at η = {eta_label(v['eta'])} ({v['train_norm_var'] / base_var:.2g}× that of η = 0)"
                         if np.isfinite(base_var) and base_var > 0 else
                         f"μ = {mu_label(mu)}: best R@1 {b['R@1']:.1f}% at η = {eta_label(b['eta'])}; smallest "
                         f"final norm variance {v['train_norm_var']:.3g} at η = {eta_label(v['eta'])}")
        if best_of_loss:
            best_mu[loss] = best_of_loss
        head = (f"**{loss}** (η = 0: R@1 {base_r1:.1f}%, final norm variance {base_var:.3g})"
                if np.isfinite(base_r1) else f"**{loss}** (the η = 0 run is missing)")
        lines.append(f"- {head}:\n" + "\n".join(f"  - {p}" for p in parts))
    n_div = int((s["status"] == "diverged").sum())
    summary_lines = []
    if settings:
        summary_lines.append(f"In {wins} of {settings} (loss, μ) settings the best η > 0 on this grid beats η = 0 "
                             f"on R@1, and in {var_down} of {settings} some η > 0 ends with a smaller norm "
                             f"variance than η = 0.")
    trends = _trends(done, grid.axes)
    if len(trends):
        r1_down = int((trends["rho_R@1"] < 0).sum())
        var_falls = int((trends["rho_var"] < 0).sum())
        summary_lines.append(
            f"Across η (η = 0 included) R@1 falls as η grows in {r1_down} of {len(trends)} settings (Spearman ρ "
            f"from {trends['rho_R@1'].min():+.2f} to {trends['rho_R@1'].max():+.2f}), while the final norm variance "
            f"falls in {var_falls} of {len(trends)} (ρ from {trends['rho_var'].min():+.2f} to "
            f"{trends['rho_var'].max():+.2f}). " + _trend_words(r1_down, var_falls, len(trends)))
    for loss, (mu, r1, eta) in best_mu.items():
        summary_lines.append(f"For {loss} the highest R@1 with SEC on (η > 0) is {r1:.1f}%, with μ = "
                             f"{mu_label(mu)} at η = {eta_label(eta)}.")
    if n_div:
        summary_lines.append(f"{n_div} of {len(s)} cells diverged (a non-finite loss), which marks where η is too large "
                             f"for this learning rate.")
    seeds = sorted(grid.frames.runs["seed"].unique()) if len(grid.frames.runs) else []
    summary_lines.append(f"Caveat: {len(seeds)} seed(s) per cell and the best η is picked on the test classes "
                         f"themselves, so these maxima are optimistic: read them as where to look, not as results.")
    return "\n".join(lines) + "\n\n" + " ".join(summary_lines)


def live_config(profile: str, eta: float, mu, loss: str, optimizer: str = "adam", iterations: int | None = None,
                seed: int = 0):
    """The toy config of ``profile`` for one live run (same data, model and length as the grid;
    evaluation only at the end, so a cpu-profile run takes a few seconds).

    ``mu``: a μ key ('batch', 'ema', 'zero', '4.0') or value; 'ema' uses momentum 0.1 as in the grid.
    ``optimizer``: one of :data:`LIVE_OPTIMIZERS` (learning rate from :data:`LIVE_LR`).
    """
    Choice(ex.PROFILE_NAMES).check("profile", profile)
    Choice(LIVE_OPTIMIZERS).check("optimizer", optimizer)
    eta = Number(0, 1e6).check("eta", eta)
    mu = Mu().check("mu", mu)
    p = ex.get_profile(profile)
    base = ex.with_variant(dict(p.toy, loss=loss, seed=seed, optimizer=optimizer, eval_every=0,
                                eval_clustering="final"), loss, "none", eta=eta, mu=mu,
                           momentum=0.1 if mu == "ema" else 1.0)
    if LIVE_LR.get(optimizer) is not None:
        base["lr"] = LIVE_LR[optimizer]
    if iterations is not None:
        base["iterations"] = Number(1, 10**6, True).check("iterations", iterations)
    return TrainConfig(**base).validate()


def run_live(cfg, progress: Callable[[int, int], None] | None = None, every: int = 10, threads: int | None = 1):
    """Train ``cfg`` now (not through the store) and return its RunResult.

    ``progress(step, total)`` is called every ``every`` steps and at the last step. ``threads``: torch
    threads during the run (1 is fastest for the toy MLP; the previous setting is restored).
    """
    if not (isinstance(every, int) and every >= 1):
        raise ValueError(f"every = {every!r} is not valid; expected an integer >= 1")

    def cb(step, total):
        if progress is not None and (step % every == 0 or step == total):
            progress(step, total)

    with torch_threads(threads):
        return train(cfg, progress=cb)


def _live_point(result) -> dict | None:
    if result.status != "done":
        return None
    return {"eta": result.config.eta, "R@1": result.metrics.get("R@1", math.nan),
            "NMI": result.metrics.get("NMI", math.nan), "train_norm_var": result.metrics.get("train_norm_var", 0)}


def live_figure(result, grid: Grid | None = None, summary: pd.DataFrame | None = None):
    """The composite figure of a live run; the grid's R@1/NMI/variance curves of the same (loss, μ)
    are drawn for context (the live run is the star)."""
    cfg = result.config
    mu = mu_key(cfg) if cfg.eta > 0 else (grid.axes.mus[0] if grid else "batch")
    fr = results_to_frames([result], tables=("steps", "tracked", "grad_scatter"))
    key = fr.runs["key"].iloc[0]
    steps, tracked, scatter = fig_explore.one_run(fr, key)
    if grid is not None:
        s = summary_table(grid) if summary is None else summary
        curve = s[(s["loss"] == cfg.loss) & (s["mu"] == mu) & (s["status"] == "done")]
        etas = grid.axes.etas
    else:
        curve, etas = pd.DataFrame(columns=["eta", "R@1", "NMI", "train_norm_var"]), (float(cfg.eta),)
    if float(cfg.eta) not in etas:
        etas = tuple(sorted({*etas, float(cfg.eta)}))
    head = f"live run: {cfg.loss}, μ = {mu_label(mu)}, η = {eta_label(cfg.eta)}, {cfg.optimizer} (lr {cfg.lr:g})"
    if result.status == "done":
        title = (f"{head}:  R@1 {result.metrics['R@1']:.1f}%, NMI {result.metrics.get('NMI', math.nan):.1f}%, "
                 f"{result.wall_s:.1f} s")
        note = None
    else:
        title, note = f"{head}:  failed", f"run failed: {str(result.error)[:120]}"
    return fig_explore.cell_figure(steps, tracked, scatter, curve, etas, cfg.eta, mu, cfg.loss, title,
                      live_point=_live_point(result), note=note)


class LivePanel:
    """Optimizer dropdown, *Train* button, progress bar, status line and the live figure.

    The η / μ / loss values are read from the static explorer's controls (``explorer.controls``),
    so one set of controls drives both. :meth:`train_selected` does the work and can be called
    without a frontend (tests); the button calls it.
    """
    def __init__(self, explorer, grid: Grid, profile: str, every: int = 10, iterations: int | None = None,
                 dpi: int = 72):
        Choice(ex.PROFILE_NAMES).check("profile", profile)
        self.grid, self.profile, self.every, self.iterations, self.dpi = grid, profile, every, iterations, dpi
        self.eta_control, self.mu_control, self.loss_control = explorer.controls[:3]
        self.optimizer = widgets.Dropdown(options=list(LIVE_OPTIMIZERS), value="adam", description="optimizer")
        self.button = widgets.Button(description="Train this setting", button_style="primary", icon="play")
        self.progress = widgets.FloatProgress(value=0.0, min=0.0, max=1.0, description="progress",
                                              layout=widgets.Layout(width="min(100%, 30em)"))
        self.status = widgets.HTML(value="Pick η, μ and the loss above, an optimizer here, then press <b>Train</b>.")
        self.figure_box = widgets.Box()
        self.button.on_click(lambda _b: self.train_selected())
        self.box = widgets.VBox([widgets.HBox([self.optimizer, self.button]), self.progress, self.status,
                                 self.figure_box])
        self.result = None

    def selected(self) -> dict:
        """The setting the controls show now: eta, mu (key), loss, optimizer."""
        ax = self.grid.axes
        return {"eta": ax.eta_of(self.eta_control.value), "mu": ax.mu_of(self.mu_control.value),
                "loss": self.loss_control.value, "optimizer": self.optimizer.value}

    def train_selected(self):
        """Train the selected setting, updating the progress bar; then show its figure. Returns the RunResult."""
        sel = self.selected()
        cfg = live_config(self.profile, sel["eta"], mu_value(sel["mu"]), sel["loss"], sel["optimizer"],
                          iterations=self.iterations)
        self.button.disabled = True
        self.progress.value, self.progress.bar_style = 0.0, ""
        t0 = time.perf_counter()

        def on_progress(step, total):
            self.progress.value = step / total
            self.status.value = (f"training {sel['loss']}, μ = {mu_label(sel['mu'])}, η = {eta_label(sel['eta'])}, "
                                 f"{sel['optimizer']}: step {step} / {total} ({time.perf_counter() - t0:.1f} s)")

        try:
            res = run_live(cfg, on_progress, every=self.every)
            self.status.value = ("evaluated: " if res.status == "done" else "failed: ") + (
                f"R@1 {res.metrics['R@1']:.1f}%, NMI {res.metrics.get('NMI', math.nan):.1f}% after {cfg.iterations} "
                f"steps in {res.wall_s:.1f} s (the star in the lower panels; the line is the precomputed grid)"
                if res.status == "done" else str(res.error))
            self.progress.bar_style = "success" if res.status == "done" else "danger"
            self.figure_box.children = (fig_to_image(live_figure(res, self.grid), dpi=self.dpi),)
            self.result = res
            return res
        except Exception as e:  # show it in the panel, then re-raise for the kernel log
            self.status.value = f"<span style='color:#b00'>error: {type(e).__name__}: {e}</span>"
            self.progress.bar_style = "danger"
            raise
        finally:
            self.button.disabled = False


def live_panel(explorer, grid: Grid, profile: str, every: int = 10, iterations: int | None = None) -> LivePanel:
    """A :class:`LivePanel` driven by ``explorer``'s controls (display ``panel.box``)."""
    return LivePanel(explorer, grid, profile, every=every, iterations=iterations)


LIVE_NOTE = ("<b>Live training needs a running kernel.</b> In this static page the controls above switch between "
             "precomputed runs only. Open <code>notebooks/explore.ipynb</code> in Jupyter and run it: a "
             "<i>Train</i> button then appears here that trains the selected η, μ, loss and optimizer on the toy "
             "data in a few seconds and plots the run as it finishes.")


def live_section(explorer, grid: Grid, profile: str, mode: str):
    """What the live section shows: the live panel in ``"live"`` mode, a note in ``"static"`` mode."""
    Choice(("static", "live")).check("mode", mode)
    if mode == "static":
        return live_note(LIVE_NOTE)
    panel = live_panel(explorer, grid, profile)
    box = widgets.VBox([live_note("<b>Live mode</b> (a kernel is running): moving the controls above still switches "
                                   "the precomputed figures; press <i>Train</i> to train the selected setting now."),
                        panel.box])
    box.panel = panel
    return box
