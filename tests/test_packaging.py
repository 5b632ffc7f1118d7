"""pyproject.toml and environment.yml pin the same packages; torch stays at the CPU build's version."""
import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def pins(lines):
    out = {}
    for line in lines:
        m = re.fullmatch(r"\s*([A-Za-z0-9_.\-]+)==([^\s;]+)\s*", line)
        if m:
            out[m.group(1).lower().replace("_", "-")] = m.group(2)
    return out


def pyproject_pins():
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    unpinned = [d for d in deps if "==" not in d]
    assert not unpinned, f"unpinned runtime requirements: {unpinned}"
    return pins(deps)


def environment_pins():
    lines = [l.strip().lstrip("-").strip() for l in (REPO / "environment.yml").read_text().splitlines()]
    return pins(lines)


def test_environment_yml_and_pyproject_agree():
    assert pyproject_pins() == environment_pins()


def test_torch_is_pinned_to_the_local_cpu_build():
    assert pyproject_pins()["torch"] == "2.13.0"


def test_book_stack_is_jupyter_book_1():
    assert pyproject_pins()["jupyter-book"].startswith("1.")


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
