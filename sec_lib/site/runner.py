"""The book's runner: train the sweep, execute every notebook with papermill, build the site.

    python -m sec_lib.book run --profile {smoke,cpu,gpu} [--only PAGE ...] [--jobs N] [--site DIR]
        [--launcher {pool,submitit} --slurm-partition P --gpus-per-job N --runs-per-job R ...]
    python -m sec_lib.book run --profile {cub,cars,sop,inshop} --data-root DIR --pretrained FILE
        [--backbone {bninception,resnet50}]      (the book from a real benchmark: sec_lib.runs.benchmarks)
    python -m sec_lib.book train --profile P [--sweeps ...]   (train in stages, no notebooks)
    python -m sec_lib.book export --profile P                  (finished runs -> data/reference/P/)
    python -m sec_lib.book rerun KEY --profile P               (retrain a committed row, compare R@1 as the
                                                               reproducibility contract says)
    python -m sec_lib.book portability --sample N   (does a verdict depend on the CPU? the decisive tier)
    python -m sec_lib.book pilot|decisive [--jobs N]           (the decisive tier, study by study)
    python -m sec_lib.book study NAME ... [--jobs N]           (registered follow-ups, in the order given)
    python -m sec_lib.book gpu-tier [--minutes M]              (the gpu tier on a lent GPU)
    python -m sec_lib.book pretrain|finetune|benchmarks ...    (the module's own options: ``CMD --help``)
    python -m sec_lib.book build [--site DIR]
    python -m sec_lib.book toc [--check]                       (_toc.yml from the list of pages: sec_lib.site.toc)

``run`` first trains (or reuses from the result store) every run the chosen chapters need, with a
progress bar per sweep in the terminal, then executes the notebooks from ``notebooks/`` into
``<site>/book/nb/`` (each written atomically), and prints a summary of what ran, what was reused
and what failed, with the measured times. ``build`` calls ``jupyter-book build`` with ``-W``.

The project (``--root``, default: the current folder or one above it, else the checkout holding this
package) is a folder with ``_config.yml``. An installed package (``pip install .``) carries the book's
sources (:data:`PACKAGED`), so ``sec-book run`` works from any folder: outside a project it creates
``./sec-book/`` and runs there. ``build`` needs the JavaScript the site serves itself: ``npm ci`` in
the project folder (or the checkout: ``make js``), else a clear error.
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
from pathlib import Path

import nbformat
from tqdm import tqdm

from ..runs import experiments as ex
from ..chapters import PAGE_NAMES, PAGES, Page
from ..chapters.explore import RENDER_ENV
from ..data.glyphs import default_data_dir
from ..figures.tables import DOWNLOADS_ENV
from ..params import Choice, ParameterError
from ..report.claims import check_built_book
from ..runs.store import ResultStore
from ..tempfiles import clear_partial_notebooks, temp_prefix
from ..runs import benchmarks as bench
from ..runs import commands
from ..runs import gpu_tier, pretrain, studies, study
from ..runs import tier
from ..runs.commands import Summary, train_stages
from ..runs.pool import prepare_data
from ..runs.launch import LaunchError, make_launcher
from . import sitejs
from . import toc
from . import warmkernel
from .nbstyle import style_notebook
from .. import kernels
from ..chapters import portability as pt

REPO = Path(__file__).resolve().parents[2]
#: The book's sources inside an installed wheel (setup.py copies the checkout's notebooks/, _config.yml,
#: _toc.yml, book/, CITATION.cff, CHANGELOG.md, package.json and package-lock.json there).
PACKAGED = Path(__file__).resolve().parent / "project"
#: The project folder ``run`` creates in the current directory when no project is found (installed package).
PROJECT_NAME = "sec-book"


def is_checkout(path: Path) -> bool:
    """A checkout of sec-book (or the packaged copy of its sources): ``_config.yml`` and ``notebooks/``."""
    return (path / "_config.yml").is_file() and (path / "notebooks").is_dir()


def sources() -> Path:
    """Where the book's unexecuted sources are: the checkout holding this package, else the copy inside
    the installed package (:data:`PACKAGED`); a clear error when neither has them."""
    for c in (REPO, PACKAGED):
        if is_checkout(c):
            return c
    raise ParameterError(f"sec_lib at {REPO} has no book sources: neither a checkout around it nor {PACKAGED} "
                         "holds _config.yml and notebooks/; install sec_lib from a wheel (pip install .) or run "
                         "from a checkout of sec-book")


def _is_project(c: Path) -> bool:
    return (c / "_config.yml").is_file() and notebook_dir(c).is_dir()


def find_project(root: str | Path | None = None, create: bool = False) -> Path:
    """The sec-book site to run: ``root`` if given, else the current directory or the nearest
    folder above it, else the checkout holding this package, else ``./sec-book`` (:data:`PROJECT_NAME`);
    a site is a folder with ``_config.yml`` (its notebooks come from its own ``notebooks/`` when it
    has one, else from the checkout's or the installed package's: :func:`notebook_dir`).

    With ``create`` (``run`` of an installed package, outside any project), ``./sec-book`` is made
    from the packaged sources, saying so on stdout. A clear error when there is no project (and,
    with ``create``, when it cannot be made)."""
    if root is not None:
        if _is_project(Path(root)):
            return Path(root).resolve()
        raise ParameterError(f"no sec-book project at {root}: a project folder holds _config.yml (and notebooks/, "
                             "or takes them from the checkout or the installed package); pass --root DIR with a "
                             "checkout of sec-book or a folder made by `sec-book run`")
    here = Path.cwd()
    for c in [here, *here.parents, REPO]:
        if _is_project(c):
            return c.resolve()
    local = here / PROJECT_NAME
    if _is_project(local):
        print(f"sec-book: using the project folder {local.resolve()}")
        return local.resolve()
    if create:
        return create_project(local)
    raise ParameterError(f"no sec-book project at {here} (or any folder above it, or {local}): a project folder "
                         "holds _config.yml; `sec-book run` makes one here, or pass --root DIR with a checkout "
                         "of sec-book, or run from inside one")


def create_project(dest: Path) -> Path:
    """Make a project folder at ``dest`` from the installed package's sources (all but the notebooks,
    which are read from the package on each run, so an upgrade brings its notebooks); print where."""
    if not is_checkout(PACKAGED):
        raise ParameterError(f"no sec-book project here and none to create: this sec_lib ({REPO}) holds no "
                             f"packaged book sources ({PACKAGED}); pass --root DIR with a checkout of sec-book")
    dest = Path(dest)
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise ParameterError(f"cannot create the sec-book project folder {dest}: it exists and is not an empty "
                             "folder (it lacks _config.yml); move it away or pass --root DIR")
    try:
        shutil.copytree(PACKAGED, dest, ignore=shutil.ignore_patterns("notebooks", "__pycache__"),
                        dirs_exist_ok=True)
    except OSError as e:
        raise ParameterError(f"cannot create the sec-book project folder {dest}: {e}; run from a folder you can "
                             "write to, or pass --root DIR") from None
    print(f"sec-book: created the project folder {dest.resolve()} (executed notebooks go to {dest.resolve()}/book/nb; "
          f"the notebooks themselves are read from {PACKAGED / 'notebooks'})")
    return dest.resolve()


def notebook_dir(site: Path) -> Path:
    """The unexecuted notebooks of ``site``: its own ``notebooks/``, else the checkout's (or the
    installed package's)."""
    own = Path(site) / "notebooks"
    if own.is_dir():
        return own
    try:
        return sources() / "notebooks"
    except ParameterError:
        return own                          # missing: find_project says what is wrong


def notebook_cwd(site: Path) -> Path:
    """The folder the notebooks run in: the site when it has its own notebooks or sits outside any
    checkout (an installed package), else the checkout."""
    return REPO if not (Path(site) / "notebooks").is_dir() and is_checkout(REPO) else Path(site)


def select_pages(only) -> list[Page]:
    if not only:
        return list(PAGES)
    for name in only:
        Choice(PAGE_NAMES).check("only", name)
    return [p for p in PAGES if p.source in only]


def execute_page(page: Page, profile: str, site: Path, workers) -> None:
    """Execute one notebook into ``<site>/book/nb/<output>.ipynb`` atomically, in one of ``workers``' warm kernels
    (:func:`sec_lib.site.warmkernel.pool`: papermill's parameter cell, a kernel reset to a fresh one's state)."""
    out = site / "book" / "nb" / f"{page.output}.ipynb"
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".ipynb", dir=out.parent, prefix=temp_prefix())
    os.close(fd)
    try:
        warmkernel.execute_in(workers, notebook_dir(site) / f"{page.source}.ipynb", tmp,
                              {"profile": profile, **page.params})
        style_notebook(tmp)         # code folded behind toggles, the parameters in a box
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def kernel_env() -> dict:
    """The result store and data folders as absolute paths, for the notebook kernels: they run in
    :func:`notebook_cwd`, which need not be the runner's folder (an installed package, where both
    default to ``./data`` of the current directory)."""
    return {"SEC_RUNS_DIR": str(ResultStore().root.resolve()), "SEC_DATA_DIR": str(default_data_dir().resolve())}


def downloads_dir(site: Path) -> Path:
    """Where the pages write their download files (``$SEC_DOWNLOADS_DIR`` of their kernels): under the
    site's static folder, which the build copies to ``_static/downloads/`` (see ``figures.tables.file_link``)."""
    return (Path(site) / "book" / "_static" / "downloads").resolve()


def run(profile: str, only=None, jobs: int | None = None, site: Path | None = None, launcher=None) -> Summary:
    """Train what the chosen pages need (with ``launcher``, default: the local pool of ``jobs``
    processes), then execute them. Returns the summary (also printed).

    A real-benchmark profile (:mod:`sec_lib.runs.benchmarks`) first checks its folders, images and weights
    (:func:`~sec_lib.runs.benchmarks.preflight`), trains only the chapters it has, and writes each page that
    does not apply to its data as a note saying why (:func:`write_note_page`) instead of executing it."""
    p = ex.get_profile(profile)
    site = find_project(site, create=True)
    pages = select_pages(only)
    jobs = p.jobs if jobs is None else jobs
    if jobs < 1:
        raise ParameterError(f"parameter 'jobs' = {jobs} is not valid; expected an integer >= 1")
    summary = Summary()
    notes = {page.output: bench.page_note(profile, page.source) for page in pages}
    sweeps = sorted({ch for page in pages if not notes[page.output] for ch in page.sweeps}
                      & set(ex.profile_sweeps(p)))
    if sweeps:
        ex.check_sweeps(p, sweeps)      # every config (device included) before anything trains
    is_benchmark = profile in ex.BENCHMARK_PROFILES
    if is_benchmark and (sweeps or not all(notes.values())):
        bench.preflight(p)                # folders, every image, the weights: before anything trains
    summary.cleared = clear_litter(site)
    t0 = time.perf_counter()
    if not is_benchmark:
        prepare_data(p)
    summary.times["data"] = time.perf_counter() - t0
    if sweeps:
        t1 = time.perf_counter()
        train_stages(p, sweeps, launcher or jobs, summary)
        summary.times["training"] = time.perf_counter() - t1
    t2 = time.perf_counter()
    if any(page.output == "runs" for page in pages):      # the page that writes the downloads: no stale files
        shutil.rmtree(downloads_dir(site), ignore_errors=True)
    bar = tqdm(total=len(pages), desc=f"[{profile}] notebooks", unit="nb", file=sys.stderr, dynamic_ncols=True)

    kernels = [page for page in pages if not notes[page.output]]
    env = dict(os.environ, **kernel_env(), **{DOWNLOADS_ENV: str(downloads_dir(site)), RENDER_ENV: "1"},
               PYTHONHASHSEED="0")
    workers = warmkernel.pool(min(jobs, len(kernels)), notebook_cwd(site), env) if kernels else None

    def one(page):
        try:
            if notes[page.output]:
                write_note_page(page, site, notes[page.output])
            else:
                execute_page(page, profile, site, workers)
            summary.executed.append(page.output)
        except Exception as e:              # keep going; reported in the summary
            summary.failed_pages.append((page.output, str(e)))
        bar.update(1)

    try:
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            list(pool.map(one, pages))
    finally:
        if workers is not None:
            workers.shutdown()
    bar.close()
    summary.times["notebooks"] = time.perf_counter() - t2
    summary.times["total"] = time.perf_counter() - t0
    summary.print()
    return summary


def page_title(page: Page, site: Path) -> str:
    """The title of ``page``: the first heading of its notebook's first markdown cell (else its name)."""
    try:
        nb = nbformat.read(str(notebook_dir(site) / f"{page.source}.ipynb"), as_version=4)
    except (OSError, ValueError):
        return page.source
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("# "):
                    return line[2:].strip()
    return page.source


def write_note_page(page: Page, site: Path, reason: str) -> Path:
    """Write ``<site>/book/nb/<output>.ipynb`` as the page's title and a note that it does not apply to this
    book, and why (a real-benchmark book's glyph-only pages); atomically, like an executed page."""
    out = site / "book" / "nb" / f"{page.output}.ipynb"
    out.parent.mkdir(parents=True, exist_ok=True)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(f"# {page_title(page, site)}\n\n```{{note}}\nThis chapter does not "
                                              f"apply to this book: {reason}\n```\n")]
    fd, tmp = tempfile.mkstemp(suffix=".ipynb", dir=out.parent, prefix=temp_prefix())
    os.close(fd)
    try:
        nbformat.write(nb, tmp)
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return out


def clear_litter(site: Path | None) -> tuple[int, int]:
    """Remove the partial run folders and (with a ``site``) notebooks that interrupted runs left
    (only this project's ``.tmp-`` names, never one a live process is writing); return both counts."""
    return ResultStore().clean_partial(), clear_partial_notebooks(site / "book" / "nb") if site else 0


def build(site: Path | None = None, strict: bool = True) -> Path:
    """``jupyter-book build`` the site (warnings are errors) into ``<site>/_build/html``."""
    site = find_project(site)
    check_node_modules(site)
    t0 = time.perf_counter()
    jb = Path(sys.executable).with_name("jupyter-book")
    cmd = [str(jb) if jb.exists() else "jupyter-book", "build", str(site), "--path-output", str(site)]
    if strict:
        cmd += ["-W", "-n", "--keep-going"]
    proc = subprocess.run(cmd, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"jupyter-book build failed (exit {proc.returncode})")
    html = site / "_build" / "html"
    try:                                  # one claim, one verdict: checked on every book built
        n_claims = check_built_book(html)
    except ValueError as e:
        raise SystemExit(f"jupyter-book build: {e}") from None
    print(f"book built into {html} in {time.perf_counter() - t0:.0f} s ({n_claims} claims, each stated with one "
          f"verdict on every page); open {html / 'index.html'}")
    return html


def toc_command(site: Path, check: bool) -> int:
    """``toc``: write ``<site>/_toc.yml`` from the list of pages (:mod:`sec_lib.site.toc`); with ``check``, say
    whether it is current (exit 1 if not) and write nothing."""
    path = site / "_toc.yml"
    if check:
        current = path.exists() and path.read_text(encoding="utf-8") == toc.render()
        print(f"{path}: {'current' if current else 'differs from sec_lib.chapters.PAGES; run python -m sec_lib.book toc'}")
        return 0 if current else 1
    print(f"{path}: {'written' if toc.write(site) else 'already current'}")
    return 0


def check_node_modules(site: Path) -> Path:
    """The ``node_modules`` the build copies require.js, the widget manager and MathJax from (the site
    serves its own copies; no CDN): ``$SEC_NODE_MODULES``, ``<site>/node_modules`` or the checkout's.
    Without it there is no fallback: a clear error naming ``npm ci`` where ``package.json`` is, before
    jupyter-book starts."""
    try:
        return sitejs.find_node_modules(site)
    except FileNotFoundError:
        pass
    looked = [p for p in (os.environ.get(sitejs.ENV_NODE_MODULES), site / "node_modules", REPO / "node_modules") if p]
    where = site if (site / "package-lock.json").is_file() else REPO
    fix = "`make js` (npm ci) in the checkout" if where == REPO and is_checkout(REPO) else f"`cd {where} && npm ci`"
    raise ParameterError(f"cannot build the book: the JavaScript it serves itself (require.js, the widget manager, "
                         f"MathJax; no CDN) is not installed: no node_modules with them at {', '.join(map(str, looked))}. "
                         f"Fix: {fix} (needs Node.js; package.json and package-lock.json pin the versions), or set "
                         f"${sitejs.ENV_NODE_MODULES} to a node_modules folder that has them.")


def add_launcher_options(parser) -> None:
    """Where the runs train: the local pool, or jobs through submitit (Slurm, or 'local' processes)."""
    g = parser.add_argument_group("launcher", "where the runs train (see the GPU page for the cluster workflow)")
    g.add_argument("--launcher", default="pool", help="pool (local processes, default) or submitit (Slurm jobs)")
    g.add_argument("--slurm-partition", default=None, help="submitit: the Slurm partition")
    g.add_argument("--gpus-per-job", type=int, default=None, help="submitit: GPUs per job (default 0: CPU runs)")
    g.add_argument("--time-min", type=int, default=None, help="submitit: time limit of one job, in minutes (default 240)")
    g.add_argument("--array-parallelism", type=int, default=None, help="submitit: jobs of a wave running at once (default 64)")
    g.add_argument("--runs-per-job", type=int, default=None, help="submitit: runs packed into one job (default 8)")
    g.add_argument("--submitit-folder", type=Path, default=None, help="submitit: job logs (default: submitit/ beside the result store)")
    g.add_argument("--cluster", default=None, help="submitit: 'slurm', or 'local' (jobs as processes here); "
                                                    "default: auto-detect")


def add_benchmark_options(parser) -> None:
    """The real-benchmark books' inputs (profiles cub, cars, sop, inshop; see the GPU page)."""
    g = parser.add_argument_group("real benchmarks", "the folders and weights of profiles cub, cars, sop, inshop "
                                                     "(nothing is downloaded)")
    g.add_argument("--data-root", type=Path, default=None,
                   help=f"the folder holding the unpacked dataset (default: ${bench.ROOT_ENV})")
    g.add_argument("--pretrained", type=Path, default=None,
                   help=f"the backbone's ImageNet weights, a state_dict file (default: ${bench.PRETRAINED_ENV})")
    g.add_argument("--backbone", default=None, choices=tuple(bench.BACKBONES),
                   help="bninception (the paper's, default) or resnet50: the network the weights are for")


def launcher_options(args) -> dict:
    return dict(partition=args.slurm_partition, gpus_per_job=args.gpus_per_job, timeout_min=args.time_min,
                array_parallelism=args.array_parallelism, runs_per_job=args.runs_per_job,
                folder=args.submitit_folder, cluster=args.cluster)


def portability_command(profile: str, sample: int, jobs: int) -> int:
    """``portability``: retrain a sample of the primary comparison under the pin it was trained with (in a
    child process started under that pin when this one has another) and write the report. It says what it retrains
    and how long the committed runs took before it starts, and shows a progress bar of the steps trained (stderr)."""
    if sample < 1 or jobs < 1:
        print(f"error: sample = {sample} and jobs = {jobs} must both be integers >= 1", file=sys.stderr)
        return 2
    t = tier.open_tier(tier.tier_dir(profile))
    keys = pt.stratified_sample(pt.primary_runs(profile), sample)
    pins = {tier.committed_pin(t, k) for k in keys}
    if len(pins) != 1:
        print(f"error: the sample mixes kernel pins {sorted(pins)}; retrain fewer runs", file=sys.stderr)
        return 2
    pin = pins.pop()
    if pin != kernels.pin_name():
        print(f"the sample was trained under the kernel pin {pin!r}; retraining it in a process started under it", flush=True)
        return subprocess.call([sys.executable, "-m", "sec_lib.book", "portability", "--profile", profile,
                                "--sample", str(sample), "--jobs", str(jobs)], env=kernels.child_env(pin))
    steps = sum(t.config(k).iterations for k in keys)
    wall = t.runs.set_index("key").loc[keys, "wall_s"].astype(float)
    print(f"retraining {len(keys)} runs of the {profile} tier's primary comparison ({steps:,} steps in all) on "
          f"{kernels.this_kind()} with {jobs} process{'es' if jobs > 1 else ''}; the committed runs took "
          f"{wall.median() / 60:.1f} min each (median) on their machine, about {wall.sum() / jobs / 60:.0f} min at "
          f"{jobs} at a time", flush=True)
    bar, on_steps, _ = commands.step_bar(f"portability: {len(keys)} runs", steps)
    try:
        rep = pt.run_check(profile, sample, jobs, progress=on_steps)
    finally:
        bar.close()
    print(pt.reports_table([rep]).to_string(index=False))
    print(pt.runs_table(rep).to_string(index=False))
    print(pt.sentence(rep))
    print(f"report written to {pt.report_path(profile, rep['cpu_kind'])}")
    return 0


#: The commands whose options are their module's own (the rest of the command line goes to its ``main``).
OWN_OPTIONS = {"pretrain": pretrain.main, "finetune": commands.finetune_main, "benchmarks": bench.main}


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in OWN_OPTIONS:
        return OWN_OPTIONS[argv[0]](argv[1:])
    ap = argparse.ArgumentParser(prog="python -m sec_lib.book", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="train the sweep and execute the notebooks")
    r.add_argument("--profile", default="cpu", choices=ex.PROFILE_NAMES)
    r.add_argument("--only", nargs="*", choices=PAGE_NAMES, help="only these notebooks (and their runs)")
    r.add_argument("--jobs", type=int, default=None, help="parallel training processes / notebook kernels")
    r.add_argument("--root", "--site", dest="site", type=Path, default=None,
                   help="the project folder (_config.yml, notebooks/; executed pages go to <root>/book/nb); "
                        "default: the current directory or the nearest folder above it that is one, else the "
                        f"checkout, else ./{PROJECT_NAME} (created from the installed package when missing)")
    add_launcher_options(r)
    add_benchmark_options(r)
    t = sub.add_parser("train", help="train (or reuse) the runs of some chapters, in stages, without notebooks")
    t.add_argument("--profile", default="reference", choices=ex.PROFILE_NAMES)
    t.add_argument("--sweeps", nargs="*", default=None, choices=tuple(ex.SWEEPS),
                   help="chapters in the order to train them (default: all, the main comparison first)")
    t.add_argument("--jobs", type=int, default=None, help="parallel training processes")
    t.add_argument("--together", type=int, default=None,
                   help="runs per process, their steps interleaved on one GPU (default: the profile's)")
    add_launcher_options(t)
    add_benchmark_options(t)
    e = sub.add_parser("export", help="copy a profile's finished runs into its committed tier data/reference/<profile>/")
    e.add_argument("--profile", default="reference", choices=ex.PROFILE_NAMES)
    rr = sub.add_parser("rerun", help="retrain one run of a committed tier from its row and compare its final R@1")
    rr.add_argument("key", help="the run's key (the 'key' column of a committed tier's runs.parquet)")
    rr.add_argument("--profile", default="reference", choices=ex.PROFILE_NAMES)
    rr.add_argument("--tier", type=Path, default=None,
                    help="a committed tier folder (default: data/reference/<profile>; for the reference profile the "
                         "decisive tier, which replaced the retired reference tier: data/reference/reference/ "
                         "reruns one of the retired runs)")
    pt = sub.add_parser("portability", help="retrain a stratified sample of the committed primary comparison on this "
                                            "machine and report whether any estimate leaves its interval or changes verdict")
    pt.add_argument("--profile", default="decisive", choices=("decisive",),
                    help="the committed tier whose primary comparison is retrained (the retired reference tier's "
                         "report stays in data/reference/reference/portability/)")
    pt.add_argument("--sample", type=int, default=8, help="how many runs to retrain (default 8: one seed of each arm)")
    pt.add_argument("--jobs", type=int, default=2, help="parallel training processes")
    pl = sub.add_parser("pilot", help="train the decisive tier's schedule pilot on held-out classes (resumable) "
                                      "and export it to data/reference/decisive/pilot/")
    pl.add_argument("--jobs", type=int, default=2, help="parallel training processes")
    dc = sub.add_parser("decisive", help="train the decisive tier stage by stage (resumable): the schedule pilot, "
                                         "then the held-out selection of the four main losses")
    dc.add_argument("--jobs", type=int, default=2, help="parallel training processes")
    st = sub.add_parser("study", help="train registered follow-up studies in the order given (resumable; each exports "
                                      "to data/followups/<name>/ after every chunk)")
    st.add_argument("names", nargs="+", choices=tuple(studies.FOLLOWUPS), metavar="NAME",
                    help=f"one of {', '.join(studies.FOLLOWUPS)}")
    st.add_argument("--jobs", type=int, default=2, help="runs trained at once (default 2: one a core)")
    for name, what in (("pretrain", "retrain the committed glyph backbone (data/reference/pretrained/)"),
                       ("finetune", "the fine-tuning arm's rates and runs on a profile, without notebooks"),
                       ("benchmarks", "check a real benchmark's folders, images and weights")):
        x = sub.add_parser(name, help=f"{what}; `{name} --help` for its options", add_help=False)
        x.add_argument("args", nargs=argparse.REMAINDER)
    g = sub.add_parser("gpu-tier", help="train the gpu tier on a GPU (resumable, exported to data/reference/gpu/ "
                                        "after every chunk): the main losses' held-out η selection, then the main "
                                        "comparison")
    g.add_argument("--minutes", type=float, default=0.0, help="start no chunk that would end after this (0: no limit)")
    g.add_argument("--jobs", type=int, default=None, help="training processes (default: the gpu profile's)")
    g.add_argument("--together", type=int, default=None, help="runs per process (default: the gpu profile's)")
    b = sub.add_parser("build", help="build the HTML book with jupyter-book (-W)")
    b.add_argument("--root", "--site", dest="site", type=Path, default=None, help="the project folder (as for run)")
    c = sub.add_parser("toc", help="write _toc.yml from the list of pages (sec_lib.chapters.PAGES and PARTS)")
    c.add_argument("--root", "--site", dest="site", type=Path, default=None, help="the project folder (as for run)")
    c.add_argument("--check", action="store_true", help="only check: exit 1 if _toc.yml differs")
    args = ap.parse_args(argv)
    if args.cmd in ("run", "train"):
        try:                                  # every option checked before anything trains or is submitted
            bench.configure(args.profile, args.data_root, args.pretrained, args.backbone)
            jobs = ex.get_profile(args.profile).jobs if args.jobs is None else args.jobs
            together = getattr(args, "together", None) or ex.get_profile(args.profile).together
            launcher = make_launcher(args.launcher, jobs, together, **launcher_options(args))
        except ParameterError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
    if args.cmd == "run":
        t0 = time.perf_counter()
        try:
            s = run(args.profile, args.only, args.jobs, args.site, launcher)
        except (ParameterError, ex.SelectionError, LaunchError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        print(f"profile {args.profile} finished in {(time.perf_counter() - t0) / 60:.1f} min")
        return 1 if s.failed_pages else 0     # a diverged run is a result (shown in the book), not an error
    if args.cmd == "train":
        return commands.train_command(args.profile, args.sweeps, launcher)
    if args.cmd == "toc":
        return toc_command(find_project(args.site), args.check)
    if args.cmd == "export":
        return commands.export_command(args.profile)
    if args.cmd == "rerun":
        return commands.rerun_command(args.key, args.profile, args.tier)
    if args.cmd == "pilot":
        return commands.pilot_command(args.jobs)
    if args.cmd == "decisive":
        return commands.decisive_command(args.jobs)
    if args.cmd == "study":
        if args.jobs < 1:
            ap.error(f"--jobs must be at least 1, got {args.jobs}")
        study.run([studies.FOLLOWUPS[n] for n in args.names], jobs=args.jobs)
        return 0
    if args.cmd == "gpu-tier":
        return gpu_tier.command(args.minutes, args.jobs, args.together)
    if args.cmd == "portability":
        return portability_command(args.profile, args.sample, args.jobs)
    try:
        build(args.site)
    except ParameterError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
