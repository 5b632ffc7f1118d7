"""The η/μ explorer: what do the SEC weight η and the target norm μ do to training?

Two ways to look at the same toy grid (``experiments.toy_grid``: η ∈ {0, toy_etas} × μ mode ∈
{batch mean, EMA, zero (L2-reg), fixed radius} × loss ∈ {semihard, npair} on the ``toy`` data
with an MLP):

* **static** (the rendered book, no kernel): every grid cell is one precomputed figure of its run
  (tracked norms, batch mean norm ± std with μ, batch norm variance, gradient magnitude against
  norm on log-log axes with fitted slopes), shown over one precomputed figure per μ and loss of R@1 / NMI
  and final norm variance against η. :func:`explorer_widget` puts them in nested ``ipywidgets.Stack`` s
  switched by an η slider, a μ dropdown and a loss dropdown through client-side ``jslink`` s
  (:func:`sec_lib.figures.widgets.linked_explorer`, :func:`~sec_lib.figures.widgets.linked_stacks`), so the
  page needs no Python. Cells whose run is not in the store are shown as a placeholder ("not computed in
  this profile").
* **live** (a running Jupyter kernel): :func:`live_panel` adds an optimizer dropdown and a *Train*
  button; pressing it trains the setting the same three controls select (:func:`live_config`,
  :func:`run_live`: ``sec_lib.runs.train.train`` with a progress callback) and shows the composite
  figure of the fresh run (its four panels over the grid's row, the live run starred). In the static page :func:`live_section` shows a note instead
  (:func:`sec_lib.figures.widgets.live_note`).

Which of the two a notebook shows is decided by :func:`detect_mode`: papermill (the book's runner)
gets ``static``, a kernel under Jupyter gets ``live``.

The figures are drawn by :mod:`sec_lib.figures.explore` (which reuses the train page's panels);
this module picks the data of a cell and hands it over.

``load_grid(missing="train")`` trains the grid's missing runs through the store (``pool.run_all``),
and the live panel trains one run in the kernel: both only on the reader's explicit request (the
notebook's ``missing`` parameter, the *Train* button); the book's runner has trained the grid before
the page runs, so a built page finds every run stored.

This module is the page API (``PARAMS``, :func:`detect_mode`) and re-exports every name the notebook
uses as ``sec_lib.chapters.explore.X``; the code lives in two modules: the toy-grid analysis in
:mod:`sec_lib.chapters.explore_grid` (axes, cells, loading, the summary table, the figures of a cell, the
page's computed sentences) and the widgets in :mod:`sec_lib.chapters.explore_widgets` (the kernel-free
Stack explorer and the live panel).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

from ..figures.palette import eta_label, mu_label
from ..params import Choice
from . import profile_param
from .explore_grid import (
    MISSING, SUMMARY_METRICS, Grid, GridAxes, build_grid, cell_figure, cell_keys, describe, grid_axes,
    grid_row_figure, grid_row_title, load_grid, mu_key, mu_value, overview_figure, reading, run_figure, summary_table,
)
from .explore_widgets import (
    FRAME_MIN_WIDTH, LIVE_LR, LIVE_NOTE, LIVE_OPTIMIZERS, CellFigures, LivePanel, RowFigures, explorer_widget,
    grid_figures, live_config, live_figure, live_panel, live_section, run_live,
)

__all__ = [
    "MODES", "MISSING", "PARAMS", "detect_mode", "parent_cmdlines",
    "SUMMARY_METRICS", "Grid", "GridAxes", "build_grid", "cell_figure", "cell_keys", "describe", "grid_axes",
    "grid_row_figure", "grid_row_title", "load_grid", "mu_key", "mu_value", "overview_figure", "reading",
    "run_figure", "summary_table",
    "FRAME_MIN_WIDTH", "LIVE_LR", "LIVE_NOTE", "LIVE_OPTIMIZERS", "CellFigures", "LivePanel", "RowFigures",
    "explorer_widget",
    "grid_figures",
    "live_config", "live_figure", "live_panel", "live_section", "run_live",
    "eta_label", "mu_label",
]

#: Values of the notebook's ``mode`` parameter.
MODES = ("auto", "static", "live")
#: Set (to any non-empty value) in the kernels that render the book (``sec-book run`` executes its pages in warm
#: kernels whose parents are pool workers, not papermill): ``"auto"`` is then ``"static"``.
RENDER_ENV = "SEC_BOOK_RENDERING"
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

    ``mode`` other than ``"auto"`` is returned as is. ``"auto"`` is ``"static"`` in a kernel of the book's runner
    (:data:`RENDER_ENV` set); otherwise it reads the command line of the
    kernel's parent process and of two more ancestors (``/proc/<ppid>/cmdline``, Linux): if any
    contains ``papermill`` (a reader rerunning a page with ``papermill ...``), the
    notebook is being rendered: ``"static"``; otherwise (a Jupyter server, VS Code, ...) ``"live"``.
    Where ``/proc`` cannot be read, it falls back to ``"static"`` when the environment hints at
    papermill (see :func:`_papermill_env`) and to ``"live"`` otherwise.

    Note: ``papermill.execute_notebook`` called from another program (e.g. pytest) is not detected
    (the parent is that program); pass ``mode="static"`` there.
    """
    Choice(MODES).check("mode", mode)
    if mode != "auto":
        return mode
    if (os.environ if environ is None else environ).get(RENDER_ENV):
        return "static"                 # a warm kernel of the book's runner (sec_lib.site.warmkernel)
    lines = parent_cmdlines(ppid, proc)
    if lines is None:
        return "static" if _papermill_env(os.environ if environ is None else environ) else "live"
    return "static" if any("papermill" in line for line in lines) else "live"
