"""Shared by the tests: a tiny toy-data training config, the parameter check of a notebook's first cells,
and the smoke sweep (every notebook executed once per session at smoke parameters into a temporary site,
in the background while the other tests run; the pages' tests read its outputs and run last)."""
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from sec_lib.runs.train import TrainConfig


def toy_config(**kw) -> TrainConfig:
    """A config on the in-memory toy data with a small MLP that trains in about a second; ``kw`` overrides."""
    base = dict(dataset="toy", model="mlp", width=16, embed_dim=8, iterations=6, batch_size=24, eval_every=3,
                track_every=3, track_samples=4, dtheta_every=3, lr=3e-3, loss="npair",
                data_kwargs={"noise": 0.1, "num_classes": 60})
    base.update(kw)
    return TrainConfig(**base)


def run_first_cells(notebook, params: dict) -> None:
    """Inject ``params`` the way papermill does, then run the cells up to the parameter check (in this
    process: no kernel to start)."""
    from papermill.iorw import load_notebook_node
    from papermill.parameterize import parameterize_notebook

    nb = parameterize_notebook(load_notebook_node(str(notebook)), params)
    ns: dict = {}
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        exec(compile(cell.source, "<cell>", "exec"), ns)  # noqa: S102 - the notebook's own cells
        if "notebook_params" in cell.source:
            return


@pytest.fixture(scope="session")
def first_cells():
    """``first_cells(notebook, params)``: see :func:`run_first_cells`."""
    return run_first_cells


@pytest.fixture(scope="session")
def toy():
    """``toy(**overrides)``: see :func:`toy_config`."""
    return toy_config


REPO = Path(__file__).resolve().parents[1]


#: The smoke sweep of this session once started: {"tmp", "site", "proc", "out", "err"}.
_SMOKE: dict = {}


def _start_smoke_sweep(tmp_path_factory) -> None:
    """Start ``python -m sec_lib.book run --profile smoke`` into a fresh site and result store under
    ``tmp_path_factory`` (nothing under data/runs or book/nb is touched); its output goes to files."""
    tmp = tmp_path_factory.mktemp("smoke")
    site = tmp / "site"
    (site / "book").mkdir(parents=True)
    for name in ("_config.yml", "_toc.yml"):
        shutil.copy(REPO / name, site / name)
    for f in (REPO / "book").iterdir():
        if f.is_file():
            shutil.copy(f, site / "book" / f.name)
    shutil.copytree(REPO / "book" / "_static", site / "book" / "_static")   # sec.css
    for name in ("CITATION.cff", "CHANGELOG.md"):                          # the cite and changelog pages
        shutil.copy(REPO / name, site / name)
    out, err = open(tmp / "sweep.stdout", "w+", encoding="utf-8"), open(tmp / "sweep.stderr", "w+", encoding="utf-8")
    proc = subprocess.Popen([sys.executable, "-m", "sec_lib.book", "run", "--profile", "smoke", "--site", str(site)],
                            cwd=REPO, env=dict(os.environ, SEC_RUNS_DIR=str(tmp / "runs"), PYTHONUNBUFFERED="1"),
                            stdout=out, stderr=err, text=True, start_new_session=True)
    _SMOKE.update(tmp=tmp, site=site, proc=proc, out=out, err=err)


@pytest.hookimpl(trylast=True)          # after -k / -m deselected what will not run
def pytest_collection_modifyitems(session, config, items):
    """When some selected test reads the smoke sweep, start the sweep now, in the background, and run
    those tests last: the other tests run meanwhile (the sweep is a few minutes of training and
    notebooks), instead of all of them waiting for it at the first test that needs it."""
    if config.option.collectonly:
        return
    uses = [item for item in items if "smoke_site" in getattr(item, "fixturenames", ())]
    if not uses:
        return
    later = set(uses)
    items[:] = [item for item in items if item not in later] + uses
    _start_smoke_sweep(config._tmp_path_factory)


def pytest_sessionfinish(session):
    """A sweep still running when the session ends early (an interrupt, ``-x``) is stopped, with the
    processes it started (its own process group)."""
    proc = _SMOKE.get("proc")
    if proc is not None and proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=60)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass
    for f in (_SMOKE.get("out"), _SMOKE.get("err")):
        if f is not None:
            f.close()


@pytest.fixture(scope="session")
def smoke_site(tmp_path_factory):
    """``python -m sec_lib.book run --profile smoke`` once per session into a temporary site and result
    store (nothing under data/runs or book/nb is touched): {"tmp", "site", "run" (the finished process)}.
    Started in the background when the tests are collected (see ``pytest_collection_modifyitems``);
    this waits for it. tests/site/test_book.py checks the sweep; the pages' tests read the executed
    notebooks under ``site/book/nb`` instead of executing them again."""
    if not _SMOKE:
        _start_smoke_sweep(tmp_path_factory)
    proc = _SMOKE["proc"]
    proc.wait()
    outputs = []
    for f in (_SMOKE["out"], _SMOKE["err"]):
        f.seek(0)
        outputs.append(f.read())
        f.close()
    run = subprocess.CompletedProcess(proc.args, proc.returncode, *outputs)
    return {"tmp": _SMOKE["tmp"], "site": _SMOKE["site"], "run": run}
