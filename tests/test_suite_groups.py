"""How `make test` shares its two cores (tests/conftest.py): two xdist workers, each test file on one of them, and
the background books started once per session, whichever worker asks first, and read by any."""
import os
import sys
import time
import tomllib
from pathlib import Path

import conftest

REPO = Path(__file__).resolve().parents[1]


def test_make_test_runs_two_workers_each_file_on_one():
    opts = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["addopts"].split()
    assert opts[opts.index("-n") + 1] == "2" and opts[opts.index("--dist") + 1] == "loadfile"


def _factory(base: Path):
    return type("Factory", (), {"getbasetemp": staticmethod(lambda: base)})()


def test_the_books_start_once_whichever_worker_asks_first(tmp_path, monkeypatch):
    """Each xdist worker collects the same tests and so asks for the same books: the first to create the books'
    folder in the session's temporary root starts them (in order); the other only records where they are."""
    calls = []
    monkeypatch.setattr(conftest, "STARTERS", {n: (lambda tmp, launch, n=n: calls.append((n, tmp, launch)))
                                               for n in ("smoke_site", "cub_smoke_book")})
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    conftest._start_books(["smoke_site", "cub_smoke_book"], _factory(tmp_path / "popen-gw1"))
    conftest._start_books(["smoke_site", "cub_smoke_book"], _factory(tmp_path / "popen-gw0"))
    books = tmp_path / "books"
    assert calls == [("smoke_site", books / "smoke_site", True), ("cub_smoke_book", books / "cub_smoke_book", True),
                     ("smoke_site", books / "smoke_site", False), ("cub_smoke_book", books / "cub_smoke_book", False)]
    monkeypatch.delenv("PYTEST_XDIST_WORKER")              # one process, no workers: its own basetemp
    conftest._start_books(["smoke_site"], _factory(tmp_path / "alone"))
    assert calls[-1] == ("smoke_site", tmp_path / "alone" / "books" / "smoke_site", True)


def test_a_book_started_by_another_process_is_waited_for_by_its_exit_file(tmp_path, monkeypatch):
    """The process that starts a book writes its exit status to a file when it ends; any other reads it (None while
    it runs), with its output."""
    monkeypatch.setattr(conftest, "_SWEEPS", {})
    gate = tmp_path / "go"
    cmd = [sys.executable, "-c", f"import os, time\nwhile not os.path.exists({str(gate)!r}): time.sleep(0.05)\n"
                                 "print('ran'); raise SystemExit(3)"]
    conftest._launch("demo", tmp_path, tmp_path, cmd, dict(os.environ))
    assert conftest._exit_status(tmp_path) is None                  # running: no status yet
    gate.touch()
    for _ in range(600):
        if conftest._exit_status(tmp_path) is not None:
            break
        time.sleep(0.1)
    assert conftest._exit_status(tmp_path) == 3
    assert (tmp_path / "sweep.stdout").read_text() == "ran\n"
    assert int((tmp_path / "pgid").read_text()) == conftest._SWEEPS["demo"]["proc"].pid
    conftest._SWEEPS["demo"]["proc"].wait(timeout=60)
