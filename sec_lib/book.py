"""The book's runner: train the sweep, execute every notebook with papermill, build the site.

    python -m sec_lib.book run --profile {smoke,cpu,gpu} [--only CHAPTER ...] [--jobs N] [--site DIR]
    python -m sec_lib.book build [--site DIR]

``run`` first trains (or reuses from the result store) every run the chosen chapters need, with a
progress bar per sweep in the terminal, then executes the notebooks from ``notebooks/`` into
``<site>/book/nb/`` (each written atomically), and prints a summary of what ran, what was reused
and what failed, with the measured times. ``build`` calls ``jupyter-book build`` with ``-W``.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from . import experiments as ex
from .nbstyle import style_notebook
from .params import Choice, ParameterError

REPO = Path(__file__).resolve().parents[1]
SOURCES = REPO / "notebooks"


@dataclass(frozen=True)
class Page:
    """One executed notebook of the book: its source, its output path and its papermill parameters."""
    source: str
    output: str
    params: dict = field(default_factory=dict)
    chapters: tuple = ()          # the experiments.CHAPTERS whose runs it reads


TRAIN_PAGES = tuple(Page("train", f"runs/train_{loss}_{v}", {"loss": loss, "variant": v}, ("compare",))
                    for loss in ex.MAIN_LOSSES for v in ex.VARIANTS)

PAGES = (
    Page("data", "data"),
    Page("theory", "theory"),
    Page("compare", "compare", chapters=("compare", "tuned", "selection", "beyond")),
    Page("norms", "norms", chapters=("norms",)),
    *TRAIN_PAGES,
    Page("eta", "eta", chapters=("eta",)),
    Page("mu", "mu", chapters=("mu",)),
    Page("bnwn", "bnwn", chapters=("bnwn",)),
    Page("normlayer", "normlayer", chapters=("normlayer",)),
    Page("optim", "optim", chapters=("optim",)),
    Page("convergence", "convergence", chapters=("convergence",)),
    Page("instability", "instability", chapters=("instability",)),
    Page("claims", "claims", chapters=tuple(ex.CHAPTERS)),
    Page("explore", "explore", chapters=("explore",)),
)
PAGE_NAMES = tuple(dict.fromkeys(p.source for p in PAGES))


@dataclass
class Summary:
    trained: int = 0
    reused: int = 0
    failed_runs: list = field(default_factory=list)
    executed: list = field(default_factory=list)
    failed_pages: list = field(default_factory=list)
    times: dict = field(default_factory=dict)

    def print(self, out=sys.stdout):
        print("\n=== sec-book summary ===", file=out)
        print(f"runs: {self.trained} trained, {self.reused} reused from the store, {len(self.failed_runs)} failed", file=out)
        for key, err in self.failed_runs:
            print(f"  failed run {key}: {err}", file=out)
        print(f"notebooks: {len(self.executed)} executed, {len(self.failed_pages)} failed", file=out)
        for name, err in self.failed_pages:
            print(f"  failed notebook {name}: {err}", file=out)
        for what, sec in self.times.items():
            print(f"time {what}: {sec / 60:.1f} min ({sec:.0f} s)", file=out)


def select_pages(only) -> list[Page]:
    if not only:
        return list(PAGES)
    for name in only:
        Choice(PAGE_NAMES).check("only", name)
    return [p for p in PAGES if p.source in only]


def progress_bar(desc: str, total: int):
    """A tqdm bar on the terminal (stderr); the rendered pages never see it."""
    from tqdm import tqdm
    return tqdm(total=total, desc=desc, unit="run", file=sys.stderr, dynamic_ncols=True)


def train_sweep(desc: str, configs, jobs: int, summary: Summary) -> None:
    from .store import ResultStore, run_all
    bar = progress_bar(desc, len(configs))     # run_all reports the number of distinct runs

    def report(event, n, total):
        bar.total = total
        if event == "reused":
            summary.reused += n
        else:
            summary.trained += n
        bar.update(n)
        bar.refresh()

    results = run_all(configs, jobs=jobs, progress=report)
    bar.close()
    store = ResultStore()
    for r in results:
        if r is not None and r.status != "done":
            summary.failed_runs.append((r.key or store.path(r.config).name, r.error))


def execute_page(page: Page, profile: str, site: Path, extra_env: dict | None = None) -> None:
    """Execute one notebook with papermill into ``<site>/book/nb/<output>.ipynb`` atomically."""
    out = site / "book" / "nb" / f"{page.output}.ipynb"
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".ipynb", dir=out.parent, prefix=".tmp-")
    os.close(fd)
    cmd = [sys.executable, "-m", "papermill", str(SOURCES / f"{page.source}.ipynb"), tmp,
           "--kernel", "python3", "--cwd", str(REPO), "--no-progress-bar", "-p", "profile", profile]
    for k, v in page.params.items():
        cmd += ["-p", k, str(v)]
    env = dict(os.environ, **(extra_env or {}), PYTHONHASHSEED="0")
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            raise RuntimeError(_papermill_error(proc.stderr))
        style_notebook(tmp)         # code folded behind toggles, the parameters in a box
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def _papermill_error(stderr: str) -> str:
    lines = [l for l in stderr.strip().splitlines() if l.strip()]
    for marker in ("ParameterError", "Error:", "Exception"):
        hits = [l for l in lines if marker in l]
        if hits:
            return hits[-1].strip()
    return "\n".join(lines[-5:])


def run(profile: str, only=None, jobs: int | None = None, site: Path = REPO) -> Summary:
    """Train what the chosen pages need, then execute them. Returns the summary (also printed)."""
    p = ex.get_profile(profile)
    pages = select_pages(only)
    jobs = p.jobs if jobs is None else jobs
    if jobs < 1:
        raise ParameterError(f"parameter 'jobs' = {jobs} is not valid; expected an integer >= 1")
    summary = Summary()
    t0 = time.perf_counter()
    prepare_data(p)
    summary.times["data"] = time.perf_counter() - t0
    chapters = sorted({ch for page in pages for ch in page.chapters})
    if chapters:
        t1 = time.perf_counter()
        train_stages(p, chapters, jobs, summary)
        summary.times["training"] = time.perf_counter() - t1
    t2 = time.perf_counter()
    from tqdm import tqdm
    bar = tqdm(total=len(pages), desc=f"[{profile}] notebooks", unit="nb", file=sys.stderr, dynamic_ncols=True)

    def one(page):
        try:
            execute_page(page, profile, site)
            summary.executed.append(page.output)
        except Exception as e:              # keep going; reported in the summary
            summary.failed_pages.append((page.output, str(e)))
        bar.update(1)

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        list(pool.map(one, pages))
    bar.close()
    summary.times["notebooks"] = time.perf_counter() - t2
    summary.times["total"] = time.perf_counter() - t0
    summary.print()
    return summary


SELECTION_CHAPTERS = {"selection", "tuned", "beyond", "main"}


def train_stages(p: ex.Profile, chapters, jobs: int, summary: Summary, store=None) -> None:
    """Train in dependent stages: the learning-rate (and run-length) pilot, then the η / L2-weight
    selection on held-out classes (at the pilot's choices), then each chapter's runs in the given
    order (some use the selection). Every run is counted once; a selection that cannot be made
    fairly (a learning rate at the edge of its grid) stops here, before any test run."""
    from .store import ResultStore, run_key
    store = store or ResultStore()
    done = set()

    def sweep(desc, configs):
        todo = [c for c in configs if run_key(c) not in done]
        done.update(run_key(c) for c in todo)
        if todo:
            train_sweep(f"[{p.name}] {desc}", todo, jobs, summary)

    sweep("lr pilot", ex.lr_pilot(p))
    if SELECTION_CHAPTERS & set(chapters):
        sweep("eta selection", ex.chapter_configs("selection", p, store))
    for ch in chapters:
        sweep(f"{ch} runs", ex.chapter_configs(ch, p, store))


def prepare_data(p: ex.Profile) -> None:
    """Render / load the dataset caches once, before worker processes start."""
    from .data import get_dataset
    size = p.base.get("image_size", 32)
    for split in ("train", "test"):
        get_dataset("glyphs", split, image_size=size)


def build(site: Path = REPO, strict: bool = True) -> Path:
    """``jupyter-book build`` the site (warnings are errors) into ``<site>/_build/html``."""
    t0 = time.perf_counter()
    jb = Path(sys.executable).with_name("jupyter-book")
    cmd = [str(jb) if jb.exists() else "jupyter-book", "build", str(site), "--path-output", str(site)]
    if strict:
        cmd += ["-W", "-n", "--keep-going"]
    proc = subprocess.run(cmd, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"jupyter-book build failed (exit {proc.returncode})")
    html = site / "_build" / "html"
    print(f"book built into {html} in {time.perf_counter() - t0:.0f} s; open {html / 'index.html'}")
    return html


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sec_lib.book", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="train the sweep and execute the notebooks")
    r.add_argument("--profile", default="cpu", choices=ex.PROFILE_NAMES)
    r.add_argument("--only", nargs="*", choices=PAGE_NAMES, help="only these notebooks (and their runs)")
    r.add_argument("--jobs", type=int, default=None, help="parallel training processes / notebook kernels")
    r.add_argument("--site", type=Path, default=REPO, help="folder with _config.yml; notebooks go to <site>/book/nb")
    t = sub.add_parser("train", help="train (or reuse) the runs of some chapters, in stages, without notebooks")
    t.add_argument("--profile", default="reference", choices=ex.PROFILE_NAMES)
    t.add_argument("--chapters", nargs="*", default=None, choices=tuple(ex.CHAPTERS),
                   help="chapters in the order to train them (default: all, the main comparison first)")
    t.add_argument("--jobs", type=int, default=None, help="parallel training processes")
    b = sub.add_parser("build", help="build the HTML book with jupyter-book (-W)")
    b.add_argument("--site", type=Path, default=REPO)
    args = ap.parse_args(argv)
    if args.cmd == "run":
        t0 = time.perf_counter()
        try:
            s = run(args.profile, args.only, args.jobs, args.site)
        except (ParameterError, ex.SelectionError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        print(f"profile {args.profile} finished in {(time.perf_counter() - t0) / 60:.1f} min")
        return 1 if s.failed_pages else 0     # a diverged run is a result (shown in the book), not an error
    if args.cmd == "train":
        p = ex.get_profile(args.profile)
        chapters = args.chapters or ["main", *[c for c in ex.CHAPTERS if c not in ("main", "selection")]]
        jobs = p.jobs if args.jobs is None else args.jobs
        summary = Summary()
        t0 = time.perf_counter()
        try:
            prepare_data(p)
            train_stages(p, chapters, jobs, summary)
        except (ParameterError, ex.SelectionError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        summary.times["training"] = time.perf_counter() - t0
        summary.print()
        return 0
    build(args.site)
    return 0


if __name__ == "__main__":
    sys.exit(main())
