"""tools/preview_stage.py (a developer's check of a page on a decisive stage still training): its bad input is
refused before anything runs, its patch is valid Python that forces only the named chapters' pages, and it keeps
the text of an executed notebook."""
import importlib.util
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parents[2] / "tools" / "preview_stage.py"


@pytest.fixture(scope="module")
def tool():
    spec = importlib.util.spec_from_file_location("preview_stage", TOOL)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_bad_input_is_refused_naming_the_valid_choices(tool, tmp_path, capsys):
    with pytest.raises(SystemExit):
        tool.main(["pretrained", "--sweeps", "pretrianed", "--out", str(tmp_path / "a")])
    assert "unknown sweep(s) ['pretrianed']; valid: " in capsys.readouterr().err
    with pytest.raises(SystemExit):
        tool.main(["pretraind", "--sweeps", "pretrained", "--out", str(tmp_path / "b")])
    err = capsys.readouterr().err
    assert "no notebook for ['pretraind']" in err and "pretrained" in err
    with pytest.raises(SystemExit):
        tool.main(["home", "--sweeps", "pretrained", "--out", str(TOOL.parents[1] / "book" / "preview")])
    assert "must not be under book/" in capsys.readouterr().err
    assert not (tmp_path / "a").exists() and not (TOOL.parents[1] / "book" / "preview").exists()


def test_the_patch_forces_only_the_pages_of_the_named_chapters(tool, monkeypatch):
    import sec_lib.chapters.common as cm
    import sec_lib.chapters.evidence as ev
    monkeypatch.setattr(ev, "evidence_profile", lambda profile, sweeps, root=None: "cpu")
    monkeypatch.setattr(cm, "load_runs", cm.load_runs)
    exec(tool.PATCH.format(forced={"pretrained", "ftrates"}), {})
    assert ev.evidence_profile("cpu", ("ftrates", "pretrained")) == "decisive"
    assert ev.evidence_profile("cpu", ("eta",)) == "cpu"
    assert cm.load_runs.keywords == {"missing": "skip"}


def test_an_executed_notebooks_text(tool):
    nb = {"cells": [{"cell_type": "markdown", "source": ["# Title\n", "text"]},
                    {"cell_type": "code", "outputs": [
                        {"output_type": "display_data", "data": {"text/markdown": "**answer**"}},
                        {"output_type": "display_data", "data": {"image/png": "xx", "text/plain": "<Figure>"}},
                        {"output_type": "error", "ename": "ValueError", "evalue": "bad variant"}]}]}
    assert tool.page_text(nb) == "# Title\ntext\n\n**answer**\n\n[figure]\n\nERROR ValueError: bad variant\n"
