"""tools/page_outputs.py: two folders of executed pages compared cell by cell, with what changes between two runs of
the same code masked and every real difference reported."""
import json
import sys
from pathlib import Path

TOOLS = Path(__file__).resolve().parents[2] / "tools"
sys.path.insert(0, str(TOOLS))
import page_outputs as po  # noqa: E402


def notebook(*cells) -> dict:
    return {"cells": [{"cell_type": "markdown", "source": "# A page"}]
            + [{"cell_type": "code", "source": "", "outputs": outs} for outs in cells],
            "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def write(folder: Path, name: str, nb: dict) -> None:
    (folder / "nb").mkdir(parents=True, exist_ok=True)
    (folder / "nb" / f"{name}.ipynb").write_text(json.dumps(nb))


def text(s):
    return {"output_type": "execute_result", "data": {"text/plain": s}, "metadata": {}}


def test_the_same_outputs_with_other_ids_and_addresses_compare_equal(tmp_path):
    write(tmp_path / "a", "home", notebook([text("<Figure at 0x7f3a2b1c4d50>")],
                                           [{"output_type": "stream", "name": "stdout", "text": ["R@1 77.1\n"]}]))
    write(tmp_path / "b", "home", notebook([text("<Figure at 0x7f99aa00bb11>")],
                                           [{"output_type": "stream", "name": "stdout", "text": ["R@1 77.1\n"]}]))
    assert po.compare(tmp_path / "a", tmp_path / "b") == []
    assert po.main(["compare", str(tmp_path / "a"), str(tmp_path / "b")]) == 0


def test_a_changed_number_a_missing_cell_and_a_missing_page_are_each_reported(tmp_path, capsys):
    write(tmp_path / "a", "home", notebook([text("+0.49 [+0.34, +0.65]")], [text("x")]))
    write(tmp_path / "b", "home", notebook([text("+0.50 [+0.34, +0.65]")], [text("x")]))
    write(tmp_path / "a", "compare", notebook([text("y")], [text("z")]))
    write(tmp_path / "b", "compare", notebook([text("y")]))
    write(tmp_path / "a", "theory", notebook([text("t")]))
    diffs = po.compare(tmp_path / "a", tmp_path / "b")
    assert diffs == ["theory: only in " + str(tmp_path / "a"),
                     "compare: 2 code cells before, 1 after",
                     "home: code cell 0 differs: -execute_result:text/plain:+0.49 [+0.34, +0.65]"]
    assert po.main(["compare", str(tmp_path / "a"), str(tmp_path / "b")]) == 1
    assert "3 page(s) differ" in capsys.readouterr().out
    assert po.main(["compare", str(tmp_path / "a"), str(tmp_path / "nowhere")]) == 2
