"""Shared by the tests: a tiny toy-data training config, the parameter check of a notebook's first cells,
and two books made in the background while the other tests run, once per session, into temporary sites: the smoke
sweep (every notebook executed at smoke parameters; the pages' tests read its outputs and run last) and the whole
cub-smoke book on fixture folders (run and built; issue 25's end-to-end test). The smoke sweep's site is built in the
background too, once its notebooks ran.

The two books run one after the other, each in one process (``--jobs 1``), so that together they keep one core busy
and the other tests the other. Run side by side with two processes each, they shared both cores with the tests for
their first minutes and left one idle after: the whole suite took 518 s on a 2-core machine, against 408 s this
way (both measured in one session, on the same machine)."""
import os
import shlex
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


@pytest.fixture
def no_fsync(monkeypatch):
    """The result store publishes a record without waiting for its files to reach the disk (``os.fsync`` does
    nothing until the test ends): for tests that store made-up records to test what reads them (ten fsyncs a
    record, a few ms each on a CI machine's disk). The store's own writes are tested with fsync (tests/test_store*.py)."""
    import sec_lib.runs.store as store_module
    monkeypatch.setattr(store_module.os, "fsync", lambda fd: None)


REPO = Path(__file__).resolve().parents[1]


#: The background books of this session once started: fixture name -> {"tmp", "site", "proc", "out", "err"}.
_SWEEPS: dict = {}


def _new_site(tmp: Path) -> Path:
    """A site folder under ``tmp`` with the book's configuration, pages and static files (no notebooks: the runner
    executes the checkout's)."""
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
    return site


def _launch(name: str, tmp: Path, site: Path, cmd: list, env: dict) -> None:
    out, err = open(tmp / "sweep.stdout", "w+", encoding="utf-8"), open(tmp / "sweep.stderr", "w+", encoding="utf-8")
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=out, stderr=err, text=True, start_new_session=True)
    _SWEEPS[name] = dict(tmp=tmp, site=site, proc=proc, out=out, err=err)


def _step(tmp: Path, name: str, cmd: list) -> str:
    """A shell line that runs ``cmd`` with its output and exit status in ``tmp/<name>.{out,err,rc}``
    (:func:`_step_result` reads them)."""
    f = {x: shlex.quote(str(tmp / f"{name}.{x}")) for x in ("out", "err", "rc")}
    return f"{' '.join(map(shlex.quote, cmd))} > {f['out']} 2> {f['err']}; echo $? > {f['rc']}"


def _step_result(tmp: Path, name: str):
    """The finished :func:`_step` ``name`` as a CompletedProcess, or None where it did not run."""
    rc = tmp / f"{name}.rc"
    if not rc.exists() or not rc.read_text().strip():
        return None
    return subprocess.CompletedProcess(name, int(rc.read_text()), (tmp / f"{name}.out").read_text(),
                                       (tmp / f"{name}.err").read_text())


def _start_smoke_sweep(tmp_path_factory) -> None:
    """Start ``python -m sec_lib.book run --profile smoke --jobs 1`` into a fresh site and result store under
    ``tmp_path_factory`` (nothing under data/runs or book/nb is touched), then ``build`` the site when it succeeded.
    The run's output goes to files and its exit status is the process's; the build's output and exit status go to
    ``build.{out,err,rc}``. A file ``done`` marks the end of both."""
    tmp = tmp_path_factory.mktemp("smoke")
    site = _new_site(tmp)
    book = [sys.executable, "-m", "sec_lib.book"]
    run = [*book, "run", "--profile", "smoke", "--site", str(site), "--jobs", "1"]
    build = _step(tmp, "build", [*book, "build", "--site", str(site)])
    done = shlex.quote(str(tmp / "done"))       # the cub-smoke book waits for it (see _start_cub_smoke_book)
    script = f"{' '.join(map(shlex.quote, run))}; rc=$?; [ $rc = 0 ] && {{ {build}; }}; touch {done}; exit $rc"
    _launch("smoke_site", tmp, site, ["bash", "-c", script],
            dict(os.environ, SEC_RUNS_DIR=str(tmp / "runs"), PYTHONUNBUFFERED="1"))


def _start_cub_smoke_book(tmp_path_factory) -> None:
    """Start the whole ``cub-smoke`` book on fixture folders (tests/fixtures/benchmark_folders.py: CUB-200-2011's
    exact layout, random images, a tiny random ResNet-50 state dict): ``run --profile cub-smoke`` into a fresh site
    and store, then ``build`` when it succeeded. Each command's output and exit status go to files. Where the smoke
    sweep was started, this book starts when the sweep has ended (see this module's docstring)."""
    sys.path.insert(0, str(REPO / "tests" / "fixtures"))
    import benchmark_folders as bf
    tmp = tmp_path_factory.mktemp("cub_smoke")
    site = _new_site(tmp)
    data = bf.make_cub(tmp / "data")
    weights = bf.weights_file(tmp / "resnet50.pth", "resnet50")
    book = [sys.executable, "-m", "sec_lib.book"]
    run = [*book, "run", "--profile", "cub-smoke", "--site", str(site), "--data-root", str(data), "--pretrained",
           str(weights), "--jobs", "1"]
    build = [*book, "build", "--site", str(site)]
    wait, first = "", _SWEEPS.get("smoke_site")
    if first:                                     # started first: this book starts when it ends (at most 30 min)
        wait = f"for _ in $(seq 1800); do [ -e {shlex.quote(str(first['tmp'] / 'done'))} ] && break; sleep 1; done; "
    ran = shlex.quote(str(tmp / "run.rc"))
    script = wait + f"{_step(tmp, 'run', run)}; [ \"$(cat {ran})\" = 0 ] && {_step(tmp, 'build', build)}"
    from sec_lib.runs import benchmarks as B          # none of the caller's benchmark options may leak into the book
    env = {k: v for k, v in os.environ.items() if k not in (B.ROOT_ENV, B.PRETRAINED_ENV, B.BACKBONE_ENV)}
    _launch("cub_smoke_book", tmp, site, ["bash", "-c", script], dict(env, SEC_RUNS_DIR=str(tmp / "runs"),
                                                                      PYTHONUNBUFFERED="1"))


#: The background books, by the fixture that waits for each, in the order their tests run (last of all).
STARTERS = {"smoke_site": _start_smoke_sweep, "cub_smoke_book": _start_cub_smoke_book}


@pytest.hookimpl(trylast=True)          # after -k / -m deselected what will not run
def pytest_collection_modifyitems(session, config, items):
    """When some selected test reads a background book (the smoke sweep, the cub-smoke book), start it now, in the
    background, and run those tests last: the other tests run meanwhile (each book is a few minutes of training
    and notebooks), instead of all of them waiting for it at the first test that needs it."""
    if config.option.collectonly:
        return
    for name, start in STARTERS.items():
        uses = [item for item in items if name in getattr(item, "fixturenames", ())]
        if uses:
            later = set(uses)
            items[:] = [item for item in items if item not in later] + uses
            start(config._tmp_path_factory)


def pytest_sessionfinish(session):
    """A background book still running when the session ends early (an interrupt, ``-x``) is stopped, with the
    processes it started (its own process group)."""
    for sweep in _SWEEPS.values():
        proc = sweep["proc"]
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=60)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                pass
        for f in (sweep["out"], sweep["err"]):
            if not f.closed:
                f.close()


def _finished(name: str, tmp_path_factory) -> dict:
    """Wait for the background book ``name`` (start it now if collection did not) and return its sweep record."""
    if name not in _SWEEPS:
        STARTERS[name](tmp_path_factory)
    sweep = _SWEEPS[name]
    sweep["proc"].wait()
    return sweep


def _read(f) -> str:
    f.seek(0)
    text = f.read()
    f.close()
    return text


@pytest.fixture(scope="session")
def smoke_site(tmp_path_factory):
    """``python -m sec_lib.book run --profile smoke`` once per session into a temporary site and result
    store (nothing under data/runs or book/nb is touched), and the site built: {"tmp", "site", "run" (the finished
    process), "build" (the finished build; None when the run failed)}.
    Started in the background when the tests are collected (see ``pytest_collection_modifyitems``);
    this waits for it. tests/site/test_book.py checks the sweep; the pages' tests read the executed
    notebooks under ``site/book/nb`` instead of executing them again."""
    sweep = _finished("smoke_site", tmp_path_factory)
    proc = sweep["proc"]
    run = subprocess.CompletedProcess(proc.args, proc.returncode, _read(sweep["out"]), _read(sweep["err"]))
    return {"tmp": sweep["tmp"], "site": sweep["site"], "run": run, "build": _step_result(sweep["tmp"], "build")}


@pytest.fixture(scope="session")
def cub_smoke_book(tmp_path_factory):
    """The whole ``cub-smoke`` book on fixture folders, run and built once per session in the background (see
    :func:`_start_cub_smoke_book`): {"tmp", "site", "run", "build"} (each a finished process's exit status and
    output; "build" is None when the run failed)."""
    sweep = _finished("cub_smoke_book", tmp_path_factory)
    tmp = sweep["tmp"]
    for f in (sweep["out"], sweep["err"]):
        f.close()
    return {"tmp": tmp, "site": sweep["site"], "run": _step_result(tmp, "run"), "build": _step_result(tmp, "build")}
