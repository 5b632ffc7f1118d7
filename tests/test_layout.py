"""The library's layout rules: module size, and the names a package re-exports from its modules."""
from __future__ import annotations

import ast
import importlib
import sys
from pathlib import Path

import pytest

from sec_lib import losses
from sec_lib.losses import LOSS_SPECS

SEC_LIB = Path(__file__).resolve().parents[1] / "sec_lib"
TOOLS = Path(__file__).resolve().parents[1] / "tools"
sys.path.insert(0, str(TOOLS))
import import_graph as ig  # noqa: E402

MAX_LINES = 650
#: Imports that run late, inside a function: only where one breaks a real cost, each saying which.
MAX_LOCAL_IMPORTS = 20


def test_no_module_is_over_650_lines():
    assert ig.long_modules(MAX_LINES) == {}, "split them by concept (README, Architecture)"


def test_at_most_20_function_local_imports_each_with_its_reason():
    late = ig.local_imports()
    assert len(late) <= MAX_LOCAL_IMPORTS, late
    unexplained = [f"{f}:{line}" for f, line, text in late if "#" not in text]
    assert not unexplained, f"a function-local import says why it is local, in a comment on its line: {unexplained}"


def test_the_measures_count_what_they_say(tmp_path):
    pkg = tmp_path / "sec_lib"
    pkg.mkdir()
    (pkg / "a.py").write_text("import os\n\ndef f():\n    import json  # local: a reason\n    return json\n")
    (pkg / "b.py").write_text("x = 1\n" * 700)
    assert ig.local_imports(pkg) == [("sec_lib/a.py", 4, "import json  # local: a reason")]
    assert ig.long_modules(650, pkg) == {"sec_lib/b.py": 700}


@pytest.mark.parametrize("module", ["sec_lib.losses", "sec_lib.models", "sec_lib.chapters.explore",
                                    "sec_lib.site.pagecheck"])
def test_a_module_defines_every_name_of_its_all(module):
    mod = importlib.import_module(module)
    missing = [name for name in mod.__all__ if not hasattr(mod, name)]
    assert not missing, f"{module}.__all__ names {missing}, which it does not define"


def test_the_optim_page_exports_its_helper_modules_names_and_neither_imports_the_page():
    """sec_lib.chapters.optim_followups and optim_stats hold parts of the optim page, whose notebook and claims read
    their names as ``optim.<name>``; neither imports the page back (no cycle), at its top or inside a function."""
    import ast
    import inspect
    from sec_lib.chapters import optim, optim_followups, optim_stats
    for mod in (optim_followups, optim_stats):
        assert all(getattr(optim, name) is getattr(mod, name) for name in mod.__all__), mod.__name__
        back = [node.lineno for node in ast.walk(ast.parse(inspect.getsource(mod)))
                if isinstance(node, ast.ImportFrom)
                and (node.module in ("optim", "sec_lib.chapters.optim")
                     or (node.module in (None, "sec_lib.chapters") and any(a.name == "optim" for a in node.names)))]
        assert not back, f"{mod.__name__} imports the optim page at lines {back}"


def test_every_loss_class_lives_in_a_family_module_and_imports_from_the_package():
    families = {"sec_lib.losses.pair", "sec_lib.losses.npair", "sec_lib.losses.contrastive", "sec_lib.losses.proxy"}
    for name, spec in LOSS_SPECS.items():
        assert spec.cls.__module__ in families, (name, spec.cls.__module__)
        assert getattr(losses, spec.cls.__name__) is spec.cls and spec.cls.__name__ in losses.__all__, name
