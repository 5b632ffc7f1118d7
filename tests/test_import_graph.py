"""The house, measured (tools/import_graph.py): sec_lib's rooms import one way, in fewer levels than the 9 before
the runs wing, with no cycle and no upward import."""
import subprocess
import sys
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parents[1] / "tools"
sys.path.insert(0, str(TOOLS))
import import_graph as ig  # noqa: E402


def test_the_import_graph_has_no_cycle_no_upward_import_and_fewer_than_9_levels():
    edges = ig.graph()
    assert ig.cycles(edges) == []
    assert ig.upward(edges) == []
    lv = ig.levels(edges)
    assert max(lv.values()) < 9, lv
    assert lv["runs"] < lv["chapters"] < lv["site"] and lv["report"] == 1     # report imports nothing of sec_lib
    out = subprocess.run([sys.executable, str(TOOLS / "import_graph.py")], capture_output=True, text=True)
    assert out.returncode == 0 and "upward imports: none" in out.stdout


def test_the_measure_sees_cycles_upward_imports_and_old_paths():
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}
    assert ig.cycles(edges) == [["a", "b", "c"]]
    assert ig.levels({"x": {"y"}, "y": {"z"}, "z": set()}) == {"x": 3, "y": 2, "z": 1}
    assert ig.upward({"runs": {"chapters"}, "chapters": {"runs"}}) == [("runs", "chapters")]
    with pytest.raises(KeyError, match="no layer"):
        ig.layer_of("attic")
    imports = ig._imports(ig.ROOT / "chapters" / "theory.py", "sec_lib.chapters.theory")
    assert "sec_lib.runs" in imports and "sec_lib.toylab" in imports       # relative imports resolved
