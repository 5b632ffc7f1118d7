"""The test suite's time at two commits, measured in one call: each commit's suite in a fresh worktree of its own,
run in turn (A B A B ...), with wall and CPU seconds per run and the ratio A/B pair by pair.

    python bench/suite_time.py BASE [--head REV] [--pairs 1] [--keep] [-- PYTEST ARGS]

``make test`` without its install: ``python -m pytest -q`` with this checkout's interpreter (its ``.venv``) and
each worktree first on ``PYTHONPATH``, so that the processes the tests spawn import that commit's code.
``node_modules`` is linked from this checkout. Each worktree starts cold (no ``__pycache__``, no glyph data, no
pytest cache), as a fresh clone would. Stop anything else that uses the CPU first: with 2 cores, one other busy
process changes a run's wall time by half.

Prints one line per run, then the medians and the ratios A/B (A = HEAD, B = BASE): a ratio under 1 means the
suite at HEAD is faster. A run whose pytest fails is reported and its ratio left out.
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], check=True, text=True, capture_output=True).stdout.strip()


def worktree(rev: str, where: Path) -> Path:
    """A detached worktree of ``rev`` under ``where``, with this checkout's node_modules linked in."""
    d = where / rev[:12]
    git("worktree", "add", "-q", "--detach", str(d), rev)
    if (ROOT / "node_modules").is_dir():
        (d / "node_modules").symlink_to(ROOT / "node_modules")
    return d


def run_suite(d: Path, log: Path, pytest_args=()) -> tuple[float, float, int, str]:
    """(wall s, CPU s of the suite and its children, exit status, pytest's last line) of one suite in ``d``."""
    env = dict(os.environ, PYTHONPATH=str(d))
    env.pop("SEC_RUNS_DIR", None)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    with open(log, "w") as out:
        rc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *pytest_args], cwd=d, env=env,
                            stdout=out, stderr=subprocess.STDOUT).returncode
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    lines = [ln for ln in log.read_text().splitlines() if ln.strip()]
    return wall, cpu, rc, lines[-1] if lines else ""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("base", help="the commit to compare against (B)")
    ap.add_argument("--head", default="HEAD", help="the commit measured (A; default HEAD)")
    ap.add_argument("--pairs", type=int, default=1, help="runs of each, in turn (default 1)")
    ap.add_argument("--keep", action="store_true", help="keep the worktrees and the logs")
    ap.add_argument("pytest_args", nargs="*", help="after --: what pytest gets besides -q (default: the whole suite)")
    args = ap.parse_args(argv)
    if args.pairs < 1:
        ap.error(f"--pairs = {args.pairs} is not valid; expected an integer >= 1")
    revs = {}
    for name, rev in (("A", args.head), ("B", args.base)):
        try:
            revs[name] = git("rev-parse", "--verify", f"{rev}^{{commit}}")
        except subprocess.CalledProcessError:
            ap.error(f"{rev!r} is not a commit of {ROOT}")
    where = Path(tempfile.mkdtemp(prefix="suite-time-"))
    dirs = {name: worktree(rev, where) for name, rev in revs.items()}
    got = {"A": [], "B": []}
    try:
        for i in range(args.pairs):
            for name in ("A", "B"):
                wall, cpu, rc, last = run_suite(dirs[name], where / f"{name}{i}.log", args.pytest_args)
                got[name].append((wall, cpu, rc))
                print(f"{name} {revs[name][:12]} run {i + 1}: wall {wall:.0f} s, cpu {cpu:.0f} s, exit {rc}: {last}",
                      flush=True)
    finally:
        if not args.keep:
            for d in dirs.values():
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(d)], capture_output=True)
            shutil.rmtree(where, ignore_errors=True)
        else:
            print(f"worktrees and logs kept in {where}")
    ok = [(a, b) for a, b in zip(got["A"], got["B"]) if a[2] == 0 and b[2] == 0]
    for name in ("A", "B"):
        runs = got[name]
        print(f"{name} median: wall {statistics.median(r[0] for r in runs):.0f} s, "
              f"cpu {statistics.median(r[1] for r in runs):.0f} s")
    if not ok:
        print("no pair where both suites passed: no ratio")
        return 1
    print(f"A/B wall: {statistics.median(a[0] / b[0] for a, b in ok):.3f}, "
          f"A/B cpu: {statistics.median(a[1] / b[1] for a, b in ok):.3f} (median of {len(ok)} pair(s))")
    return 0


if __name__ == "__main__":
    sys.exit(main())
