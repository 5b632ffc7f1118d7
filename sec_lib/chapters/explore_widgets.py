"""The η/μ explorer's widgets: the kernel-free explorer (nested ``ipywidgets.Stack`` s of the cells' figures,
switched by client-side ``jslink`` s, :func:`explorer_widget`) and the live panel that trains one setting in a
running kernel (:func:`live_config`, :func:`run_live`, :func:`live_figure`, :class:`LivePanel`,
:func:`live_section`). The grid they show comes from :mod:`sec_lib.chapters.explore_grid`; the page API is
:mod:`sec_lib.chapters.explore`.
"""

from __future__ import annotations

import math
import time
from typing import Callable, Mapping

import ipywidgets as widgets
import pandas as pd

from ..runs import experiments as ex
from ..figures import explore as fig_explore
from ..figures.palette import eta_label, mu_label
from ..figures.widgets import fig_to_image, linked_explorer, linked_stacks, live_note
from ..params import Choice, Mu, Number, ParameterError
from ..runs.store import results_to_frames
from ..threads import torch_threads
from ..runs.train import TrainConfig, train
from .common import with_batch_cv, with_norm_cv
from .explore_grid import Grid, grid_row_figure, mu_key, mu_value, run_figure, summary_table

#: Optimizers the live panel offers.
LIVE_OPTIMIZERS = ("adam", "adamw", "sgd")
#: Learning rate per live optimizer (None: the profile's toy ``lr``, tuned for Adam). SGD (momentum 0.9):
#: 0.01, the best of {0.01, 0.02, 0.05, 0.1} for semihard without SEC on the cpu toy grid (larger rates
#: lose R@1 and make large η diverge).
LIVE_LR: dict = {"adam": None, "adamw": None, "sgd": 0.01}


#: The explorer's figures never shrink below this width, so their 9 pt labels and legends stay readable (at least
#: 7 pt) on a phone; where the text column is narrower, the two figures scroll sideways in their box.
FRAME_MIN_WIDTH = "600px"


class _LazyFigures(Mapping):
    """A key -> Figure mapping of the grid that draws each figure on access: ``_args`` maps each key to the
    arguments ``_draw(grid, *args, summary=...)`` takes after the grid."""
    _args: dict

    def __getitem__(self, key):
        return type(self)._draw(self.grid, *self._args[key], summary=self.summary)

    def __iter__(self):
        return iter(self._args)

    def __len__(self) -> int:
        return len(self._args)


class CellFigures(_LazyFigures):
    """``(eta_label, mu_label, loss) -> Figure`` of each computed cell's run (its four panels, the upper part of the
    explorer), built on access.

    Lazy on purpose: :func:`sec_lib.figures.widgets.linked_explorer` renders each Figure to one Image (and
    closes it) as it builds the Stacks, so at most one figure is alive at a time, and no throw-away
    Image widget is created (papermill saves every widget a kernel ever opened into the page).
    """
    def __init__(self, grid: Grid, summary: pd.DataFrame | None = None):
        self.grid = grid
        self.summary = summary_table(grid) if summary is None else summary
        ax = grid.axes
        self._args = {(eta_label(e), mu_label(m), loss): (e, m, loss)
                      for loss in ax.losses for m in ax.mus for e in ax.etas if len(grid.runs_of(e, m, loss))}

    _draw = staticmethod(run_figure)


class RowFigures(_LazyFigures):
    """``(mu_label, loss) -> Figure`` of the grid's row of each μ and loss with a finished run (the lower part of
    the explorer: every η at once, so the η slider leaves it in place), built on access like :class:`CellFigures`."""
    def __init__(self, grid: Grid, summary: pd.DataFrame | None = None):
        self.grid = grid
        self.summary = summary_table(grid) if summary is None else summary
        s, ax = self.summary, grid.axes
        done = set(zip(s.loc[s["status"] == "done", "mu"], s.loc[s["status"] == "done", "loss"])) if len(s) else set()
        self._args = {(mu_label(m), loss): (m, loss) for m in ax.mus for loss in ax.losses if (m, loss) in done}

    _draw = staticmethod(grid_row_figure)


def grid_figures(grid: Grid, summary: pd.DataFrame | None = None) -> CellFigures:
    """The cells' run figures, keyed by the controls' labels (a lazy :class:`CellFigures` mapping)."""
    return CellFigures(grid, summary)


def explorer_widget(grid: Grid, dpi: int = fig_explore.CELL_DPI, summary: pd.DataFrame | None = None,
                    image: Mapping | None = None):
    """η slider + μ dropdown + loss dropdown, jslinked to nested Stacks of the cells' figures, in two parts.

    Above, the run of the selected cell (its four panels, :class:`CellFigures`: one image per cell); below, the
    grid's final metrics against η for the selected μ and loss (:class:`RowFigures`: one image per μ and loss,
    switched by the μ and loss controls only). Together they are the cell's six-panel figure
    (:func:`sec_lib.figures.explore.cell_figure`) without the cell's marks on the lower row, which would take one
    image of it per cell. Works without a kernel (the links live in the saved widget state). Cells that were not
    computed show a placeholder. The images are drawn at the book's resolution (``dpi``, default
    :data:`sec_lib.figures.explore.CELL_DPI`: the figure at its own size, one text column wide) and stored as
    ``image`` says (:func:`sec_lib.figures.widgets.fig_to_image` options, default
    :data:`sec_lib.figures.explore.CELL_IMAGE`). Besides ``.controls``, ``.stacks`` and ``.links`` (from
    ``linked_explorer``, the lower part's links added) the box carries ``.grid``, ``.cells``:
    ``(eta_label, mu_label, loss) -> Image`` for every cell, ``.rows``: ``(mu_label, loss) -> Image``,
    ``.row_stacks`` (the lower part's Stacks per level) and the two outer Stacks, ``.cell_stack`` and ``.row_stack``.
    The box is ``VBox([HBox(controls), VBox([cell_stack, row_stack])])``; the figures are never narrower than
    :data:`FRAME_MIN_WIDTH`: on a narrower screen they scroll sideways, together.
    """
    ax = grid.axes
    summary = summary_table(grid) if summary is None else summary
    image = fig_explore.CELL_IMAGE if image is None else image
    box = linked_explorer(grid_figures(grid, summary), [("η", ax.eta_labels, "slider"),
                                                        ("μ", ax.mu_labels, "dropdown"),
                                                        ("loss", ax.losses, "dropdown")], dpi=dpi, image=image)
    rows = linked_stacks(RowFigures(grid, summary), box.controls[1:], dpi=dpi, image=image)
    controls, outer = box.children
    for stack in (outer, rows):
        stack.layout.min_width = FRAME_MIN_WIDTH
    box.children = (controls, widgets.VBox([outer, rows], layout=widgets.Layout(overflow="auto")))
    box.cell_stack, box.row_stack = outer, rows
    box.links = box.links + rows.links
    box.row_stacks = rows.stacks
    box.grid = grid
    box.cells = {(e, m, loss): outer.children[i].children[j].children[k]
                 for i, e in enumerate(ax.eta_labels) for j, m in enumerate(ax.mu_labels)
                 for k, loss in enumerate(ax.losses)}
    box.rows = {(m, loss): rows.children[j].children[k]
                for j, m in enumerate(ax.mu_labels) for k, loss in enumerate(ax.losses)}
    return box


def live_config(profile: str, eta: float, mu, loss: str, optimizer: str = "adam", iterations: int | None = None,
                seed: int = 0, relative: bool = False):
    """The toy config of ``profile`` for one live run (same data, model and length as the grid;
    evaluation only at the end, so a cpu-profile run takes a few seconds).

    ``mu``: a μ key ('batch', 'ema', 'zero', '4.0') or value; 'ema' uses momentum 0.1 as in the grid.
    ``optimizer``: one of :data:`LIVE_OPTIMIZERS` (learning rate from :data:`LIVE_LR`).
    ``relative``: the scale-free SEC (``TrainConfig.relative``: η·mean((‖f_i‖/μ − 1)²), μ the live batch mean;
    the scale page); it needs μ = 'batch' and η > 0, and is ignored at η = 0 (no SEC).
    """
    if not isinstance(relative, bool):
        raise ParameterError(f"parameter 'relative' = {relative!r} must be True or False")
    Choice(ex.PROFILE_NAMES).check("profile", profile)
    Choice(LIVE_OPTIMIZERS).check("optimizer", optimizer)
    eta = Number(0, 1e6).check("eta", eta)
    mu = Mu().check("mu", mu)
    p = ex.get_profile(profile)
    base = ex.with_variant(dict(p.toy, loss=loss, seed=seed, optimizer=optimizer, eval_every=0,
                                eval_clustering="final"), loss, "none", eta=eta, mu=mu,
                           momentum=0.1 if mu == "ema" else 1.0, relative=relative)
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
    cv = with_norm_cv(pd.DataFrame([dict(result.metrics)])) if result.metrics else pd.DataFrame()
    return {"eta": result.config.eta, "R@1": result.metrics.get("R@1", math.nan),
            "NMI": result.metrics.get("NMI", math.nan), "train_norm_var": result.metrics.get("train_norm_var", 0),
            "train_norm_cv": float(cv["train_norm_cv"].iloc[0]) if "train_norm_cv" in cv.columns else math.nan}


def live_figure(result, grid: Grid | None = None, summary: pd.DataFrame | None = None):
    """The composite figure of a live run; the grid's R@1/NMI/variance curves of the same (loss, μ)
    are drawn for context (the live run is the star)."""
    cfg = result.config
    mu = mu_key(cfg) if cfg.eta > 0 else (grid.axes.mus[0] if grid else "batch")
    fr = results_to_frames([result], tables=("steps", "tracked", "grad_scatter"))
    key = fr.runs["key"].iloc[0]
    steps, tracked, scatter = fig_explore.one_run(fr, key)
    steps = with_batch_cv(steps) if len(steps) else steps        # the batch CV beside the batch variance
    if grid is not None:
        s = summary_table(grid) if summary is None else summary
        curve = s[(s["loss"] == cfg.loss) & (s["mu"] == mu) & (s["status"] == "done")]
        etas = grid.axes.etas
    else:
        curve, etas = pd.DataFrame(columns=["eta", "R@1", "NMI", "train_norm_var", "train_norm_cv"]), (float(cfg.eta),)
    if float(cfg.eta) not in etas:
        etas = tuple(sorted({*etas, float(cfg.eta)}))
    head = (f"live run: {cfg.loss}, {'relative SEC, ' if cfg.relative else ''}μ = {mu_label(mu)}, "
            f"η = {eta_label(cfg.eta)}, {cfg.optimizer} (lr {cfg.lr:g})")
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
                 dpi: int = fig_explore.CELL_DPI):
        Choice(ex.PROFILE_NAMES).check("profile", profile)
        self.grid, self.profile, self.every, self.iterations, self.dpi = grid, profile, every, iterations, dpi
        self.eta_control, self.mu_control, self.loss_control = explorer.controls[:3]
        self.optimizer = widgets.Dropdown(options=list(LIVE_OPTIMIZERS), value="adam", description="optimizer")
        # the scale page's relative (scale-free) SEC: η·CV² of the batch's norms, with μ = batch mean only
        self.relative = widgets.Checkbox(value=False, description="relative SEC (scale-free; μ = batch mean)",
                                         indent=False)
        self.button = widgets.Button(description="Train this setting", button_style="primary", icon="play")
        self.progress = widgets.FloatProgress(value=0.0, min=0.0, max=1.0, description="progress",
                                              layout=widgets.Layout(width="min(100%, 30em)"))
        self.status = widgets.HTML(value="Pick η, μ and the loss above, an optimizer here, then press <b>Train</b>.")
        self.figure_box = widgets.Box()
        self.button.on_click(lambda _b: self.train_selected())
        self.box = widgets.VBox([widgets.HBox([self.optimizer, self.relative, self.button]), self.progress, self.status,
                                 self.figure_box])
        self.result = None

    def selected(self) -> dict:
        """The setting the controls show now: eta, mu (key), loss, optimizer, relative."""
        ax = self.grid.axes
        return {"eta": ax.eta_of(self.eta_control.value), "mu": ax.mu_of(self.mu_control.value),
                "loss": self.loss_control.value, "optimizer": self.optimizer.value, "relative": self.relative.value}

    def train_selected(self):
        """Train the selected setting, updating the progress bar; then show its figure. Returns the RunResult."""
        sel = self.selected()
        try:
            cfg = live_config(self.profile, sel["eta"], mu_value(sel["mu"]), sel["loss"], sel["optimizer"],
                              iterations=self.iterations, relative=sel["relative"])
        except ParameterError as e:               # e.g. relative SEC with a μ other than the batch mean
            self.status.value = f"<span style='color:#b00'>{e}</span>"
            raise
        self.button.disabled = True
        self.progress.value, self.progress.bar_style = 0.0, ""
        t0 = time.perf_counter()

        def on_progress(step, total):
            self.progress.value = step / total
            self.status.value = (f"training {sel['loss']}, {'relative SEC, ' if cfg.relative else ''}"
                                 f"μ = {mu_label(sel['mu'])}, η = {eta_label(sel['eta'])}, "
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
             "<i>Train</i> button then appears here that trains the selected η, μ, loss and optimizer (optionally "
             "relative SEC, the scale-free SEC of the scale page) on the toy data in a few seconds and plots the run "
             "as it finishes.")


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
