"""Shared by the tests: a tiny toy-data training config, and the smoke sweep (every notebook executed once
per session at smoke parameters into a temporary site; the pages' tests read its outputs)."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sec_lib.train import TrainConfig


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


@pytest.fixture(scope="session")
def smoke_site(tmp_path_factory):
    """``python -m sec_lib.book run --profile smoke`` once per session into a temporary site and result
    store (nothing under data/runs or book/nb is touched): {"tmp", "site", "run" (the finished process)}.
    tests/site/test_book.py checks the sweep; the pages' tests read the executed notebooks under
    ``site/book/nb`` instead of executing them again."""
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
    run = subprocess.run([sys.executable, "-m", "sec_lib.book", "run", "--profile", "smoke", "--site", str(site)],
                         cwd=REPO, env=dict(os.environ, SEC_RUNS_DIR=str(tmp / "runs"), PYTHONUNBUFFERED="1"),
                         capture_output=True, text=True)
    return {"tmp": tmp, "site": site, "run": run}
