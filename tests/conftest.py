"""Shared by the tests: a tiny toy-data training config, the parameter check of a notebook's first cells,
and two books made in the background while the other tests run, once per session, into temporary sites: the smoke
sweep (every notebook executed at smoke parameters; the pages' tests read its outputs and run last) and the whole
cub-smoke book on fixture folders (run and built: the real-benchmark books' end-to-end test). The smoke sweep's site is built in the
background too, once its notebooks ran.

The smoke sweep runs the book as a user of the wheel does (README, "Without a checkout"): a wheel built from a clean
copy of the checkout, installed apart from it (``pip install --no-deps --target``; this environment serves the
dependencies), and ``sec-book run --profile smoke`` from an empty folder, with the checkout not on ``sys.path``. The
wheel does not carry the committed tiers and follow-ups (``data/reference/<tier>/``, ``data/followups/``): they are
linked beside the installed package, where the library looks for them, so that the pages show what a checkout's do;
the glyph backbone (``data/reference/pretrained/``) is the wheel's own.

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

sys.path.insert(0, str(Path(__file__).resolve().parent))     # tests/kinds.py, for the test folders that mirror sec_lib


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
    for name in committed_book_files():                                    # what pages include from data/
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / name, site / name)
    return site


def committed_book_files() -> list:
    """The committed files under ``data/`` that the book's pages include (setup.py's PROJECT_FILES there: the
    decisive tier's registered README, which the pre-registration page includes)."""
    return [f.relative_to(REPO).as_posix() for pat in setup_py().PROJECT_FILES if pat.startswith("data/")
            for f in sorted(REPO.glob(pat))]


def _launch(name: str, tmp: Path, site: Path, cmd: list, env: dict, cwd: Path = REPO, **extra) -> None:
    out, err = open(tmp / "sweep.stdout", "w+", encoding="utf-8"), open(tmp / "sweep.stderr", "w+", encoding="utf-8")
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=err, text=True, start_new_session=True)
    _SWEEPS[name] = dict(tmp=tmp, site=site, proc=proc, out=out, err=err, **extra)


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


def setup_py():
    """The checkout's setup.py as a module (its PROJECT_FILES, REPO_FILES), without running setup() (it does so only
    as ``__main__``)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("sec_setup", REPO / "setup.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def wheel_source(tmp: Path) -> Path:
    """A clean copy of the checkout at ``tmp/src`` to build a wheel from: without its caches, outputs, tests and
    git-ignored folders (``sec_lib/data`` stays; of ``data/``, only the committed files the wheel ships, setup.py's
    REPO_FILES and the book's committed pages, :func:`committed_book_files`: where one is missing, building the wheel
    names it)."""
    src = tmp / "src"
    top = {".git", ".venv", "node_modules", "data", "_build", "build", "dist", "tests", "bench", ".pytest_cache"}

    def ignore(folder, names):              # the checkout's caches and outputs; sec_lib/data stays
        skip = {n for n in names if n == "__pycache__" or n.endswith(".egg-info")}
        if Path(folder).resolve() == REPO.resolve():
            skip |= top & set(names)
        if Path(folder).resolve() == (REPO / "book").resolve():
            skip |= {"nb"} & set(names)
        return skip
    shutil.copytree(REPO, src, ignore=ignore)
    for name in (*setup_py().REPO_FILES, *committed_book_files()):
        if (REPO / name).is_file():
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, src / name)
    return src


def wheel_command(src: Path, out: Path) -> list:
    """``pip wheel`` of ``src`` into ``out`` (no dependencies, no build isolation: this environment's setuptools)."""
    return [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out), str(src)]


def _start_smoke_sweep(tmp_path_factory) -> None:
    """Build a wheel from a clean copy of the checkout (``wheel.{out,err,rc}``, the wheel in ``wheel/``), install it
    apart (``pip install --no-deps --target installed/``: ``install.{out,err,rc}``), link the committed tiers and
    follow-ups beside it (see this module's docstring), then run ``sec-book run --profile smoke --jobs 1`` (the
    wheel's console script) from the empty folder ``elsewhere/``, which creates the site ``elsewhere/sec-book/``, with
    ``PYTHONPATH`` the installed folder only and a fresh result store under ``tmp_path_factory`` (nothing under
    data/runs or book/nb is touched; the glyph cache is the checkout's), then ``sec-book build`` the site when it
    succeeded (``SEC_NODE_MODULES``: the checkout's ``node_modules``). The run's output goes to files and its exit
    status is the process's (a failed wheel or install step ends it, its last line on stderr naming the step); the
    build's output and exit status go to ``build.{out,err,rc}``. A file ``done`` marks the end of all. The script is
    ``sweep.sh`` beside them."""
    from sec_lib.data.glyph_pool import default_data_dir
    tmp = tmp_path_factory.mktemp("smoke")
    src = wheel_source(tmp)                     # copied now, before any test runs
    installed, elsewhere, wheels = tmp / "installed", tmp / "elsewhere", tmp / "wheel"
    elsewhere.mkdir()
    site = elsewhere / "sec-book"               # made by `run` (runner.create_project)
    q = lambda p: shlex.quote(str(p))           # noqa: E731
    sec_book = str(installed / "bin" / "sec-book")

    def stop_unless(step: str, what: str) -> str:
        f = {x: q(tmp / f"{step}.{x}") for x in ("out", "err", "rc")}
        return (f'[ "$(cat {f["rc"]})" = 0 ] || {{ cat {f["out"]} {f["err"]} >&2; echo "smoke sweep: {what} failed '
                f'(exit $(cat {f["rc"]})); its output is above" >&2; exit 3; }}')
    reference, linked = REPO / "data" / "reference", installed / "data" / "reference"
    script = "\n".join([
        f'trap "touch {q(tmp / "done")}" EXIT',  # the cub-smoke book waits for it (see _start_cub_smoke_book)
        _step(tmp, "wheel", wheel_command(src, wheels)),
        stop_unless("wheel", "building a wheel of the checkout (pip wheel)"),
        _step(tmp, "install", [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                               "--find-links", str(wheels), "--target", str(installed), "sec_lib"]),
        stop_unless("install", "installing the wheel apart from the checkout (pip install --target)"),
        # the committed tiers and follow-ups the wheel does not carry, where the installed library looks for them
        f'mkdir -p {q(linked)}; for d in {q(reference)}/*; do [ -e {q(linked)}/"$(basename "$d")" ] || '
        f'ln -s "$d" {q(linked)}/; done',
        f"[ -e {q(REPO / 'data' / 'followups')} ] && ln -s {q(REPO / 'data' / 'followups')} {q(installed / 'data')}/",
        f"cd {q(elsewhere)} || exit 3",
        f"{q(sec_book)} run --profile smoke --jobs 1; rc=$?",
        f"[ $rc = 0 ] && {{ {_step(tmp, 'build', [sec_book, 'build'])}; }}",
        "exit $rc", ""])
    (tmp / "sweep.sh").write_text(script, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(PYTHONPATH=str(installed), SEC_RUNS_DIR=str(tmp / "runs"),
               SEC_DATA_DIR=str(default_data_dir().resolve()),
               SEC_NODE_MODULES=os.environ.get("SEC_NODE_MODULES") or str(REPO / "node_modules"), PYTHONUNBUFFERED="1")
    _launch("smoke_site", tmp, site, ["bash", str(tmp / "sweep.sh")], env, cwd=tmp, installed=installed,
            wheels=wheels, elsewhere=elsewhere)


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
    """``sec-book run --profile smoke`` once per session, from a wheel of the checkout installed apart from it, in an
    empty folder, into a temporary site and result store (nothing under data/runs or book/nb is touched), and the
    site built (see :func:`_start_smoke_sweep`): {"tmp", "site", "run" (the finished process: the wheel's build and
    install, then the run), "build" (the finished build; None when the run failed), "installed" (the folder the wheel
    was installed into), "elsewhere" (the folder the run started in)}.
    Started in the background when the tests are collected (see ``pytest_collection_modifyitems``);
    this waits for it. tests/site/test_book.py checks the sweep, tests/test_packaging.py that it ran from the wheel;
    the pages' tests read the executed notebooks under ``site/book/nb`` instead of executing them again."""
    sweep = _finished("smoke_site", tmp_path_factory)
    proc = sweep["proc"]
    run = subprocess.CompletedProcess(proc.args, proc.returncode, _read(sweep["out"]), _read(sweep["err"]))
    return {"tmp": sweep["tmp"], "site": sweep["site"], "run": run, "build": _step_result(sweep["tmp"], "build"),
            "installed": sweep["installed"], "elsewhere": sweep["elsewhere"]}


@pytest.fixture(scope="session")
def sec_wheel(tmp_path_factory) -> Path:
    """A wheel of the checkout (:func:`wheel_source`, :func:`wheel_command`): the smoke sweep's, as soon as it is built
    (without waiting for the sweep), where the sweep was started; else built here."""
    pytest.importorskip("setuptools", reason="pip wheel --no-build-isolation needs setuptools in this environment")
    sweep = _SWEEPS.get("smoke_site")
    if sweep is None:
        tmp = tmp_path_factory.mktemp("wheel")
        proc, folder = subprocess.run(wheel_command(wheel_source(tmp), tmp / "wheel"), capture_output=True,
                                      text=True), tmp / "wheel"
    else:
        import time
        folder = sweep["wheels"]
        while (proc := _step_result(sweep["tmp"], "wheel")) is None and sweep["proc"].poll() is None:
            time.sleep(0.5)
        proc = proc or _step_result(sweep["tmp"], "wheel")
        assert proc is not None, ("the smoke sweep ended without building its wheel: "
                                  + (sweep["tmp"] / "sweep.stderr").read_text()[-3000:])
    assert proc.returncode == 0, f"pip wheel of the checkout failed (exit {proc.returncode}): {proc.stderr[-3000:]}"
    (wheel,) = folder.glob("sec_lib-*.whl")
    return wheel


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
