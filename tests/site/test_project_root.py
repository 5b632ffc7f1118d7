"""The runner finds its project: --root, the current folder or one above it, else a clear error."""
import pytest

from sec_lib.params import ParameterError
from sec_lib.site import runner


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
