"""Packaging agrees with itself: pyproject.toml's pinned requirements (core and extras), environment.yml,
the Makefile's install line, and requirements.lock; torch stays at the local CPU build's version. A wheel carries
the book's sources and the committed glyph backbone, and runs the smoke book outside a checkout."""
import importlib
import importlib.util
import os
import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
PROJECT = PYPROJECT["project"]
MAKEFILE = (REPO / "Makefile").read_text()
LOCK = REPO / "requirements.lock"


def pins(lines):
    out = {}
    for line in lines:
        m = re.fullmatch(r"\s*([A-Za-z0-9_.\-]+)==([^\s;]+)\s*", line)
        if m:
            out[canonicalize_name(m.group(1))] = m.group(2)
    return out


def group_requirements():
    """{"core": [...], "book": [...], ...}: pyproject's requirement strings per group."""
    return {"core": PROJECT["dependencies"], **PROJECT["optional-dependencies"]}


def pyproject_pins(groups=None):
    reqs = [r for g, rs in group_requirements().items() if groups is None or g in groups for r in rs]
    unpinned = [r for r in reqs if "==" not in r]
    assert not unpinned, f"unpinned requirements: {unpinned}"
    return pins(reqs)


def makefile_extras():
    m = re.search(r"^EXTRAS\s*:=\s*(\S+)\s*$", MAKEFILE, re.M)
    assert m, "the Makefile must name the extras it installs (EXTRAS := ...)"
    return m.group(1).split(",")


def environment_lines():
    return [l.strip().lstrip("-").strip() for l in (REPO / "environment.yml").read_text().splitlines()]


def lock_entries():
    """{name: (version, set of 'via' sources)} from pip-compile's output."""
    out, name = {}, None
    for line in LOCK.read_text().splitlines():
        m = re.fullmatch(r"([A-Za-z0-9_.\-]+)==(\S+)", line.strip()) if not line.startswith((" ", "#")) else None
        if m:
            name = canonicalize_name(m.group(1))
            out[name] = (m.group(2), set())
        elif name and line.strip().startswith("#"):
            via = line.strip().lstrip("#").strip()
            via = via[len("via"):].strip() if via.startswith("via") else via
            if via:
                out[name][1].add(via)
    return out


# ---------------------------------------------------------------------------------- requirements


def test_every_requirement_is_pinned_and_in_one_group_only():
    seen = {}
    for group, reqs in group_requirements().items():
        for r in reqs:
            req = Requirement(r)
            assert str(req.specifier).startswith("=="), f"{r} in [{group}] must be pinned with =="
            name = canonicalize_name(req.name)
            assert name not in seen, f"{name} is in both [{seen[name]}] and [{group}]"
            seen[name] = group


def test_core_holds_what_the_library_and_training_import():
    core = pyproject_pins(["core"])
    # torch stack, the store's parquet files, the glyph data set (fonts of matplotlib, read with fontTools)
    for name in ("torch", "pytorch-metric-learning", "numpy", "pandas", "pyarrow", "matplotlib", "fonttools",
                 "pillow", "scikit-learn", "scipy"):
        assert name in core, f"{name} is imported by the core library and must be a core requirement"
    for name in ("pytest", "playwright", "jupyter-book", "papermill", "seaborn", "faiss-cpu"):
        assert name not in core, f"{name} is not needed to import sec_lib or train; it belongs in an extra"


def test_extras_split_book_test_fast():
    extras = PROJECT["optional-dependencies"]
    assert {"book", "test", "fast"} <= set(extras)
    assert {"jupyter-book", "papermill", "myst-nb", "seaborn", "ipywidgets"} <= set(pins(extras["book"]))
    assert {"pytest", "pytest-timeout", "playwright"} <= set(pins(extras["test"]))
    assert set(pins(extras["fast"])) == {"faiss-cpu"}


def test_torch_is_pinned_to_the_local_cpu_build():
    assert pyproject_pins()["torch"] == "2.13.0"


def test_book_stack_is_jupyter_book_1():
    assert pyproject_pins()["jupyter-book"].startswith("1.")


# --------------------------------------------------------------------- Makefile and environment.yml


def test_makefile_installs_the_extras_the_tests_and_the_book_need_pinned_by_the_lock():
    extras = makefile_extras()
    assert {"book", "test", "fast"} <= set(extras) <= set(PROJECT["optional-dependencies"])
    assert re.search(r'pip install .*-c \$\(LOCK\) -e "\.\[\$\(EXTRAS\)\]"', MAKEFILE)
    assert re.search(r"^LOCK\s*:=\s*requirements\.lock\s*$", MAKEFILE, re.M)
    assert re.search(r"^\$\(STAMP\):.*\$\(LOCK\)", MAKEFILE, re.M), "setup must rerun when the lock changes"


def test_environment_yml_and_pyproject_agree():
    assert environment_pins() == pyproject_pins(["core", *makefile_extras()])
    editable = [l for l in environment_lines() if l.startswith("-e ")]
    assert editable == [f"-e .[{','.join(makefile_extras())}]"]


def environment_pins():
    return pins(environment_lines())


def test_ci_runs_exactly_make_test():
    body = [l for l in (REPO / ".ci" / "run").read_text().splitlines() if l.strip() and not l.startswith("#")]
    assert body[-1].strip() == "make test"


def test_the_paper_numbers_ship_as_package_data():
    """Every file of sec_lib/data/paper is matched by [tool.setuptools.package-data], so a wheel has it,
    and sec_lib.reference reads it from inside the package."""
    import fnmatch

    from sec_lib import reference

    patterns = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["sec_lib"]
    files = sorted(p.relative_to(REPO / "sec_lib").as_posix() for p in (REPO / "sec_lib" / "data" / "paper").iterdir())
    assert {"data/paper/table1.csv", "data/paper/rebuttal_tables.csv", "data/paper/README.md"} <= set(files)
    for f in files:
        assert any(fnmatch.fnmatch(f, pat) for pat in patterns), f"{f} is not package data"
    folder = Path(str(reference.paper_files()))
    assert folder.resolve() == (REPO / "sec_lib" / "data" / "paper").resolve()
    assert len(reference.paper_table()) > 0


# ------------------------------------------------------------------------------------------- lock


def test_lock_pins_every_direct_requirement_at_its_version():
    lock = lock_entries()
    for group, reqs in group_requirements().items():
        for r in reqs:
            req = Requirement(r)
            name = canonicalize_name(req.name)
            assert name in lock, f"{name} ([{group}]) is missing from requirements.lock: run `make lock`"
            assert req.specifier.contains(lock[name][0], prereleases=True), (
                f"requirements.lock has {name}=={lock[name][0]} but pyproject.toml asks {r}: run `make lock`"
            )


def test_lock_is_not_stale():
    # the packages the lock says come from pyproject.toml are exactly pyproject's requirements
    lock = lock_entries()
    from_pyproject = {n for n, (_, via) in lock.items() if any(v.endswith("(pyproject.toml)") for v in via)}
    assert from_pyproject == set(pyproject_pins()), (
        f"requirements.lock is stale (only in the lock: {sorted(from_pyproject - set(pyproject_pins()))}, "
        f"only in pyproject.toml: {sorted(set(pyproject_pins()) - from_pyproject)}): run `make lock`"
    )
    header = LOCK.read_text()
    assert "pip-compile" in header and "--all-extras" in header, "the lock covers every extra (make lock)"
    assert re.search(r"piptools compile .*--all-extras", MAKEFILE), "`make lock` regenerates it with pip-tools"


def test_lock_holds_the_cpu_build_of_torch_and_no_cuda_packages():
    lock = lock_entries()
    assert lock["torch"][0] == "2.13.0+cpu"
    cuda = [n for n in lock if n.startswith(("nvidia-", "triton"))]
    assert not cuda, f"the lock pulls CUDA packages: {cuda}"


# -------------------------------------------------------------------------------------- scripts


def test_console_script_points_at_the_runner():
    assert PROJECT["scripts"] == {"sec-book": "sec_lib.site.runner:main"}


@pytest.mark.skipif(importlib.util.find_spec("sec_lib.site") is None, reason="sec_lib.site is not in this tree yet")
def test_console_script_target_exists():
    module, func = PROJECT["scripts"]["sec-book"].split(":")
    mod = importlib.import_module(module)
    assert callable(getattr(mod, func))


# ----------------------------------------------------------------- the wheel carries the book's sources


def _setup_module():
    """setup.py's PROJECT_FILES without running setup() (it does so only as __main__)."""
    spec = importlib.util.spec_from_file_location("sec_setup", REPO / "setup.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_project_files_cover_what_the_book_build_reads():
    """Every file the toc names outside book/nb, the static folder, the bibliography and the files the
    pages include are matched by setup.py's PROJECT_FILES (and MANIFEST.in, for an sdist)."""
    import fnmatch

    import yaml

    patterns = _setup_module().PROJECT_FILES
    config = yaml.safe_load((REPO / "_config.yml").read_text(encoding="utf-8"))
    toc = (REPO / "_toc.yml").read_text(encoding="utf-8")
    needed = {"_config.yml", "_toc.yml", "package.json", "package-lock.json", *config["bibtex_bibfiles"]}
    needed |= {f"{m}.md" for m in re.findall(r"file:\s*(book/(?!nb/)\S+)", toc)}
    for d in config["sphinx"]["config"]["html_static_path"]:
        needed |= {p.relative_to(REPO).as_posix() for p in (REPO / d).iterdir() if p.suffix == ".css"}
    for page in (REPO / "book").glob("*.md"):       # {include} ../X, {literalinclude} ../X
        needed |= {m for m in re.findall(r"\{(?:literal)?include\}\s+\.\./(\S+)", page.read_text(encoding="utf-8"))}
    needed |= {f"notebooks/{p.name}" for p in (REPO / "notebooks").glob("*.ipynb")}
    for f in sorted(needed):
        assert (REPO / f).is_file(), f
        assert any(fnmatch.fnmatch(f, pat) for pat in patterns), f"{f} is not in setup.py's PROJECT_FILES"
    manifest = (REPO / "MANIFEST.in").read_text()
    for pat in patterns:
        assert pat in manifest.split(), f"MANIFEST.in lacks {pat} (an sdist's wheel would lack it)"


@pytest.mark.timeout(180)
def test_wheel_carries_the_book_and_runs_outside_a_checkout(tmp_path, sec_wheel):
    """A wheel built from a clean copy of the checkout (pip wheel; tests/conftest.py's ``sec_wheel``: the smoke
    sweep's), unpacked away from the checkout: the installed runner finds its notebooks from an empty folder (no
    --root needed), and the fine-tuning runs' committed glyph backbone, named by its repository-relative path, is
    the wheel's own file, read with the checkout's store key."""
    import subprocess
    import sys
    import zipfile

    from sec_lib.chapters import PAGES
    from sec_lib.runs import finetune
    from sec_lib.runs.store import run_key

    names = set(zipfile.ZipFile(sec_wheel).namelist())
    base = "sec_lib/site/project/"
    setup = _setup_module()
    for pat in setup.PROJECT_FILES:
        for f in REPO.glob(pat):
            assert base + f.relative_to(REPO).as_posix() in names, f"the wheel lacks {f.relative_to(REPO)}"
    assert {f"{base}notebooks/{p.source}.ipynb" for p in PAGES} <= names
    for name in setup.REPO_FILES:           # at its repository-relative path (see setup.py)
        assert name in names, f"the wheel lacks {name} (setup.py's REPO_FILES)"
    cfg = finetune.selection("smoke")[0]
    assert cfg.pretrained == "data/reference/pretrained/glyph_smallcnn.pt" and cfg.pretrained in setup.REPO_FILES

    site = tmp_path / "site-packages"
    zipfile.ZipFile(sec_wheel).extractall(site)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    probe = ("import sec_lib, sys; from sec_lib.site import runner as r; "
             "from sec_lib.runs import finetune, train; from sec_lib.runs.store import run_key; "
             "assert not any(p and r.Path(p).resolve() == r.Path(sys.argv[1]) for p in sys.path), sys.path; "
             "s = r.find_project(create=True); "
             "c = finetune.selection('smoke')[0]; "
             "files = sorted({m.__file__ for n, m in sys.modules.items() if n.startswith('sec_lib')}); "
             "print(r.sources(), r.notebook_dir(s), r.notebook_cwd(s), s, train.weights_path(c.pretrained), "
             "run_key(c), *files, sep='\\n')")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEC_") and k != "PYTHONPATH"}
    env.update(PYTHONPATH=str(site), SEC_RUNS_DIR=str(tmp_path / "runs"), SEC_DATA_DIR=str(tmp_path / "data"))
    proc = subprocess.run([sys.executable, "-c", probe, str(REPO.resolve())], cwd=elsewhere, env=env,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert lines[0].startswith(f"sec-book: created the project folder {(elsewhere / 'sec-book').resolve()} ")
    sources, notebooks, cwd, project, weights, key, *modules = lines[1:]
    sources, notebooks, cwd, project, weights, *modules = map(Path, (sources, notebooks, cwd, project, weights,
                                                                     *modules))
    packaged = (site / "sec_lib" / "site" / "project").resolve()
    assert len(modules) > 10
    for m in modules:                       # not the checkout's (an editable install's finder would serve it)
        assert m.resolve().is_relative_to(site.resolve()), f"{m} is not from the wheel"
    assert sources == packaged and notebooks == packaged / "notebooks"
    assert project == cwd == (elsewhere / "sec-book").resolve()
    assert (project / "_config.yml").read_bytes() == (REPO / "_config.yml").read_bytes()
    assert (project / "package-lock.json").is_file() and not (project / "notebooks").exists()
    assert weights.resolve() == (site / cfg.pretrained).resolve(), f"the backbone is read from {weights}"
    assert weights.read_bytes() == (REPO / cfg.pretrained).read_bytes()
    assert key == run_key(cfg), "a fine-tuning run's store key differs between the wheel and the checkout"


@pytest.mark.slow
def test_the_smoke_sweep_ran_from_the_installed_wheel(smoke_site):
    """The suite's smoke sweep (tests/conftest.py's ``smoke_site``) is the README's "Without a checkout" path: a
    wheel of the checkout installed apart from it, ``sec-book run --profile smoke`` from an empty folder, every page
    executed; its fine-tuning runs, started from the wheel's backbone, are in its store under the checkout's keys."""
    from sec_lib.runs import experiments as ex
    from sec_lib.runs.store import ResultStore
    from sec_lib.site import runner

    run = smoke_site["run"]
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    installed, elsewhere = smoke_site["installed"].resolve(), smoke_site["elsewhere"].resolve()
    packaged = installed / "sec_lib" / "site" / "project"
    assert (f"sec-book: created the project folder {elsewhere / 'sec-book'} (executed notebooks go to "
            f"{elsewhere / 'sec-book'}/book/nb; the notebooks themselves are read from {packaged / 'notebooks'})"
            in run.stdout), run.stdout[:2000]
    project = elsewhere / "sec-book"
    assert smoke_site["site"].resolve() == project and not (project / "notebooks").exists()
    assert "=== sec-book summary ===" in run.stdout and "0 failed" in run.stdout, run.stdout[-3000:]
    for page in runner.PAGES:
        assert (smoke_site["site"] / "book" / "nb" / f"{page.output}.ipynb").is_file(), page.output
    for name in _setup_module().REPO_FILES:     # the wheel's own file, not a link to the checkout's
        f = installed / name
        assert f.is_file() and not any(p.is_symlink() for p in (f, *f.parents) if p.is_relative_to(installed)), f
    store = ResultStore(smoke_site["tmp"] / "runs")
    tuned = ex.sweep_configs("pretrained", "smoke", store)
    fine = [c for c in tuned if c.pretrained]
    assert fine and all(c.pretrained == "data/reference/pretrained/glyph_smallcnn.pt" for c in fine)
    missing = [c for c in tuned if not store.has(c)]
    assert not missing, (f"{len(missing)} of the pretrained chapter's runs (the checkout's keys) are not in the "
                         "sweep's store")


def test_an_installed_package_without_the_backbone_says_what_is_wrong(tmp_path, monkeypatch):
    """Installed (no pyproject.toml beside the package) and without the committed backbone, the fine-tuning configs
    fail naming the wheel's missing file, not a pretraining command that would write into site-packages."""
    from sec_lib.runs import finetune, pretrain

    monkeypatch.setattr(pretrain, "REPO", tmp_path)
    with pytest.raises(FileNotFoundError) as e:
        finetune.settings("smoke")
    msg = str(e.value)
    assert "installed sec_lib lacks" in msg and "data/reference/pretrained/glyph_smallcnn.pt" in msg, msg
    assert "REPO_FILES" in msg and "python -m sec_lib.runs.pretrain" not in msg, msg
