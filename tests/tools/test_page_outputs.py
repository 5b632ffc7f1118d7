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
    path = folder / "nb" / f"{name}.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(nb))


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


def html(s):
    return {"output_type": "display_data", "data": {"text/html": s}, "metadata": {}}


def run_page(step_time: float, wall: float, hours: float, day: str, r1: float) -> dict:
    import base64
    csv = f"metric,value\nR@1,{r1}\nmean_step_time,{step_time}\nwall_s,{wall}\n"
    table = (f'<table><tr><td>R@1</td><td class="sec-num">{r1}</td></tr><tr><td>mean_<wbr>step_<wbr>time</td>'
             f'<td class="sec-num">{step_time}</td></tr><tr><td>wall_<wbr>s</td><td class="sec-num">{wall}</td></tr>'
             f'</table><a href="data:text/csv;base64,{base64.b64encode(csv.encode()).decode()}">csv</a>')
    return notebook([text(f"the quick tier: 129 runs, {hours} run-hours of wall time, trained {day}; it took "
                          f"{round(wall)} s; its steps (cpu_steps.parquet, {1693 + int(wall > 7)} KB)")], [html(table)])


def test_a_cold_build_differs_only_in_its_wall_clock_facts_which_mask_times_masks(tmp_path):
    """A cold build trains the quick tier again: its run-hours, seconds, seconds per step and dates differ, and only
    ``--mask-times`` masks them; a metric that differs is still reported with it."""
    write(tmp_path / "warm", "runs/train_ms_none", run_page(0.037, 6.858, 0.23, "2026-11-28", 69.54))
    write(tmp_path / "cold", "runs/train_ms_none", run_page(0.05, 9.843, 0.40, "2026-11-29 to 2026-11-30", 69.54))
    write(tmp_path / "other", "runs/train_ms_none", run_page(0.05, 9.843, 0.40, "2026-11-29", 69.55))
    assert len(po.compare(tmp_path / "warm", tmp_path / "cold")) == 2           # both cells differ unmasked
    assert po.compare(tmp_path / "warm", tmp_path / "cold", times=True) == []
    assert po.main(["compare", str(tmp_path / "warm"), str(tmp_path / "cold"), "--mask-times"]) == 0
    diffs = po.compare(tmp_path / "warm", tmp_path / "other", times=True)
    assert [d.split(":")[0] + ":" + d.split(":")[1] for d in diffs] == ["runs/train_ms_none: code cell 1 differs"]


def test_mask_times_masks_a_tables_run_hours_column_and_its_csv_and_nothing_beside_it(tmp_path):
    """The tiers page's run-hours per tier are wall-clock facts; the runs and the stage counts beside them are not."""
    import base64

    def tiers(hours, runs):
        csv = f"tier,runs,run-hours\nquick (cpu),{runs},{hours}\n"
        return notebook([html('<table class="dataframe"><thead><tr><th>tier</th><th>runs</th><th>run-hours</th></tr>'
                              f'</thead><tbody><tr><td>quick (cpu)</td><td class="sec-num">{runs}</td>'
                              f'<td class="sec-num">{hours}</td></tr></tbody></table>'
                              f'<a href="data:text/csv;base64,{base64.b64encode(csv.encode()).decode()}">csv</a>')])
    write(tmp_path / "a", "tiers", tiers(2.48, 448))
    write(tmp_path / "b", "tiers", tiers(1.37, 448))
    write(tmp_path / "c", "tiers", tiers(1.37, 449))
    assert po.compare(tmp_path / "a", tmp_path / "b") != []
    assert po.compare(tmp_path / "a", tmp_path / "b", times=True) == []
    assert po.compare(tmp_path / "a", tmp_path / "c", times=True) != []

