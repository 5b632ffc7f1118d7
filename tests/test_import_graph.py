"""The house, measured (tools/import_graph.py): sec_lib's rooms import one way, in fewer than 9 levels, with no
cycle and no upward import; no page module imports another or asks what kind of store it reads."""
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


def test_no_room_holds_a_circle_of_modules():
    """Inside each room too, modules import one way, counting the imports inside functions."""
    rooms = ig.package_rooms()
    assert {"runs", "chapters", "site", "report"} <= set(rooms)
    for room in rooms:
        assert ig.cycles(ig.module_graph(room)) == [], room


def test_the_training_side_has_at_most_eight_levels():
    """Inside ``runs/``, each module sits one level above everything it imports, and the chain is at most 8 long:
    storing sits below pooling, the sweeps below the store's training, the commands at the top."""
    lv = ig.levels(ig.module_graph("runs"))
    assert max(lv.values()) <= 8, sorted(lv.items(), key=lambda kv: -kv[1])[:4]
    assert lv["sec_lib.runs.store"] < lv["sec_lib.runs.pool"] < lv["sec_lib.runs.launch"] < lv["sec_lib.runs.commands"]
    assert lv["sec_lib.runs.sweeps"] < lv["sec_lib.runs.store"]


def test_the_module_measure_sees_a_late_import(tmp_path, monkeypatch):
    """A circle closed only by an import inside a function is still a circle, and ``from .x import name`` is an
    import of module x."""
    pkg = tmp_path / "sec_lib" / "room"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .b import thing\n")
    (pkg / "b.py").write_text("thing = 1\n\ndef late():\n    from . import a\n    return a\n")
    (pkg / "c.py").write_text("from . import b\n")
    monkeypatch.setattr(ig, "ROOT", tmp_path / "sec_lib")
    edges = ig.module_graph("room")
    assert edges["sec_lib.room.a"] == {"sec_lib.room.b"}
    assert edges["sec_lib.room.c"] == {"sec_lib.room.b", "sec_lib.room"}      # `from . import b` runs the package too
    assert ig.cycles(edges) == [["sec_lib.room.a", "sec_lib.room.b"]]
    # a package's __init__ is a module too: one that imports c late joins b and c (`from . import` runs it) in a circle
    (pkg / "__init__.py").write_text("def f():\n    from . import c\n    return c\n")
    assert ig.cycles(ig.module_graph("room")) == [["sec_lib.room", "sec_lib.room.a", "sec_lib.room.b", "sec_lib.room.c"]]


def test_the_measure_sees_cycles_upward_imports_and_relative_imports():
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}
    assert ig.cycles(edges) == [["a", "b", "c"]]
    assert ig.levels({"x": {"y"}, "y": {"z"}, "z": set()}) == {"x": 3, "y": 2, "z": 1}
    assert ig.upward({"runs": {"chapters"}, "chapters": {"runs"}}) == [("runs", "chapters")]
    with pytest.raises(KeyError, match="no layer"):
        ig.layer_of("attic")
    imports = ig._imports(ig.ROOT / "chapters" / "theory.py", "sec_lib.chapters.theory")
    assert "sec_lib.runs" in imports and "sec_lib.toylab" in imports       # relative imports resolved


def test_no_module_imports_a_private_name_from_another():
    """A name another module needs is public. Every ``from .x import name`` inside sec_lib (relative or
    absolute) imports no ``_name`` (renaming a public name to a private alias, ``import x as _x``, is fine), and no
    module reads ``other._name`` of an imported sec_lib module."""
    import ast
    bad = []
    for path in sorted(ig.ROOT.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        mods = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names
                if n.module is None or n.level > 0 or (n.module or "").startswith("sec_lib")}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.level > 0 or (node.module or "").startswith("sec_lib")):
                bad += [f"{path.relative_to(ig.ROOT)}: from {'.' * node.level}{node.module or ''} import {a.name}"
                        for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
            elif (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                  and isinstance(node.value, ast.Name) and node.value.id in mods):
                bad.append(f"{path.relative_to(ig.ROOT)}:{node.lineno}: {node.value.id}.{node.attr}")
    assert not bad, "\n".join(bad)


def test_page_modules_are_one_per_notebook_and_import_no_other_page():
    """A page module (``sec_lib/chapters/<name>.py`` of ``notebooks/<name>.ipynb``) imports no other page module: what
    pages share lives in ``sec_lib/analysis/``, ``sec_lib/report/`` or a module of ``chapters/`` that is no page."""
    pages = ig.page_modules()
    assert {"sec_lib.chapters.compare", "sec_lib.chapters.home", "sec_lib.chapters.tiers"} <= set(pages)
    others = {m.rsplit(".", 1)[1] for m in ig.module_graph("chapters")} - {p.rsplit(".", 1)[1] for p in pages}
    assert others == {"chapters", *SHARED_MODULES}, others ^ {"chapters", *SHARED_MODULES}
    assert ig.page_imports() == []


#: The modules of ``chapters/`` that are no page: what several pages share (common, evidence, gains, scorecard, reach),
#: or one page's part split off (dense_curves, gain_words, optim_*, explore_*, tiers_*, normclass, review, portability,
#: pretrained_seeds).
SHARED_MODULES = {"common", "evidence", "gains", "scorecard", "reach", "dense_curves", "gain_words", "review",
                  "normclass", "optim_stats", "optim_followups", "explore_grid", "explore_widgets", "tiers_gpu",
                  "tiers_prediction", "portability", "pretrained_seeds"}


def test_no_page_module_asks_what_kind_of_store_it_reads():
    """Pages read a :class:`~sec_lib.analysis.source.RunSource`; the kind of store is asked once, in
    :func:`~sec_lib.analysis.source.run_source`."""
    assert ig.store_kind_checks() == []
    assert len(ig.store_kind_checks(["sec_lib.analysis.source"])) == 1    # the measure sees the one place it is asked
