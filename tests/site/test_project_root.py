"""The runner finds its project: --root, the current folder or one above it, the checkout, else (an
installed package) ./sec-book made from the packaged sources; a clear error when there is none."""
import os

import pytest

from sec_lib.params import ParameterError
from sec_lib.site import runner, sitejs


def test_root_given_or_found_above_the_current_folder(tmp_path, monkeypatch):
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "_config.yml").write_text("title: x\n")
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    assert runner.find_project(tmp_path) == tmp_path.resolve()
    monkeypatch.chdir(deep)
    assert runner.find_project() == tmp_path.resolve()


def test_a_site_folder_beside_the_checkout_takes_the_checkouts_notebooks(tmp_path):
    (tmp_path / "_config.yml").write_text("title: x\n")
    assert runner.find_project(tmp_path) == tmp_path.resolve()
    assert runner.notebook_dir(tmp_path) == runner.REPO / "notebooks"


def test_no_project_is_a_clear_error_before_any_work(tmp_path, monkeypatch, capsys):
    with pytest.raises(ParameterError, match="no sec-book project.*--root"):
        runner.find_project(tmp_path)
    monkeypatch.setattr(runner, "prepare_data", lambda p: pytest.fail("nothing may start"))
    assert runner.main(["run", "--profile", "smoke", "--root", str(tmp_path)]) == 2
    assert "no sec-book project" in capsys.readouterr().err
    assert runner.main(["build", "--root", str(tmp_path)]) == 2


# ------------------------------------------------------------- an installed package, outside a checkout


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """This sec_lib as if installed from a wheel: no checkout around it, the book's sources packaged
    (a small stand-in for sec_lib/site/project/), and the current folder an empty one elsewhere."""
    packaged = tmp_path / "site-packages" / "sec_lib" / "site" / "project"
    (packaged / "notebooks").mkdir(parents=True)
    (packaged / "notebooks" / "data.ipynb").write_text("{}")
    (packaged / "book" / "_static").mkdir(parents=True)
    (packaged / "book" / "_static" / "sec.css").write_text("a {}\n")
    for name in ("_config.yml", "_toc.yml", "package.json", "package-lock.json"):
        (packaged / name).write_text(f"{name}\n")
    monkeypatch.setattr(runner, "REPO", tmp_path / "site-packages")
    monkeypatch.setattr(runner, "PACKAGED", packaged)
    monkeypatch.setenv("SEC_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("SEC_DATA_DIR", str(tmp_path / "data"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    return packaged, elsewhere


def test_installed_run_creates_a_project_folder_here_and_reuses_it(installed, capsys):
    packaged, here = installed
    with pytest.raises(ParameterError, match="no sec-book project.*`sec-book run` makes one"):
        runner.find_project()                 # build (no create) never makes one
    site = runner.find_project(create=True)
    assert site == (here / runner.PROJECT_NAME).resolve()
    assert f"created the project folder {site}" in capsys.readouterr().out
    for name in ("_config.yml", "_toc.yml", "package.json", "package-lock.json", "book/_static/sec.css"):
        assert (site / name).read_text() == (packaged / name).read_text()
    assert not (site / "notebooks").exists(), "the notebooks are read from the package, not copied"
    assert runner.notebook_dir(site) == packaged / "notebooks"
    assert runner.notebook_cwd(site) == site, "outside a checkout the notebooks run in the project folder"
    (site / "_toc.yml").write_text("edited\n")
    assert runner.find_project(create=True) == site           # found again, not recreated
    assert f"using the project folder {site}" in capsys.readouterr().out
    assert (site / "_toc.yml").read_text() == "edited\n"
    sub = site / "book"
    os.chdir(sub)                             # inside the project: found above the current folder
    assert runner.find_project() == site


@pytest.mark.parametrize("what", ["file", "nonempty"])
def test_installed_run_cannot_create_the_project_folder_is_a_clear_error(installed, what):
    _, here = installed
    if what == "file":
        (here / runner.PROJECT_NAME).write_text("not a folder")
    else:
        (here / runner.PROJECT_NAME).mkdir()
        (here / runner.PROJECT_NAME / "mine.txt").write_text("x")
    with pytest.raises(ParameterError, match="cannot create the sec-book project folder .*--root"):
        runner.find_project(create=True)


def test_installed_without_packaged_sources_is_a_clear_error(installed, monkeypatch):
    _, here = installed
    monkeypatch.setattr(runner, "PACKAGED", here / "nowhere")
    with pytest.raises(ParameterError, match="no packaged book sources"):
        runner.find_project(create=True)
    with pytest.raises(ParameterError, match="has no book sources"):
        runner.sources()


def test_installed_run_says_where_before_any_work(installed, monkeypatch, capsys):
    _, here = installed

    def stop(p):
        raise ParameterError("stopped after finding the project")
    monkeypatch.setattr(runner, "prepare_data", stop)
    assert runner.main(["run", "--profile", "smoke", "--only", "data"]) == 2
    out = capsys.readouterr()
    assert "created the project folder" in out.out and "stopped after finding the project" in out.err
    assert (here / runner.PROJECT_NAME / "_config.yml").is_file()


def test_kernels_get_the_runners_store_and_data_folders_as_absolute_paths(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SEC_RUNS_DIR", "rel-runs")
    monkeypatch.setenv("SEC_DATA_DIR", "rel-data")
    assert runner.kernel_env() == {"SEC_RUNS_DIR": str(tmp_path.resolve() / "rel-runs"),
                                   "SEC_DATA_DIR": str(tmp_path.resolve() / "rel-data")}


def test_build_without_node_modules_names_npm_ci_before_jupyter_book(installed, monkeypatch, capsys):
    monkeypatch.delenv(sitejs.ENV_NODE_MODULES, raising=False)
    monkeypatch.setattr(sitejs, "__file__", str(installed[1] / "a" / "b" / "sitejs.py"))   # no checkout's node_modules
    site = runner.find_project(create=True)
    monkeypatch.setattr(runner.subprocess, "run", lambda *a, **k: pytest.fail("jupyter-book must not start"))
    assert runner.main(["build"]) == 2
    err = capsys.readouterr().err
    assert f"cd {site} && npm ci" in err and "node_modules" in err
    nm = installed[1] / "nm"
    for src, _ in sitejs.WIDGET_FILES:
        (nm / src).parent.mkdir(parents=True, exist_ok=True)
        (nm / src).write_text("//")
    (nm / sitejs.MATHJAX_SRC).mkdir(parents=True)
    (nm / sitejs.MATHJAX_SRC / sitejs.MATHJAX_ENTRY).write_text("//")
    monkeypatch.setenv(sitejs.ENV_NODE_MODULES, str(nm))
    assert runner.check_node_modules(site) == nm


def test_build_without_node_modules_in_a_checkout_names_make_js(tmp_path, monkeypatch):
    monkeypatch.delenv(sitejs.ENV_NODE_MODULES, raising=False)
    monkeypatch.setattr(sitejs, "__file__", str(tmp_path / "a" / "b" / "sitejs.py"))
    monkeypatch.setattr(runner, "REPO", tmp_path / "checkout")
    (tmp_path / "checkout" / "notebooks").mkdir(parents=True)
    (tmp_path / "checkout" / "_config.yml").write_text("title: x\n")
    with pytest.raises(ParameterError, match=r"`make js` \(npm ci\) in the checkout"):
        runner.check_node_modules(tmp_path / "checkout")
