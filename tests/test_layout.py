"""The library's layout rules: module size, and the names a package re-exports from its modules."""
from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from sec_lib import losses
from sec_lib.losses import LOSS_SPECS

SEC_LIB = Path(__file__).resolve().parents[1] / "sec_lib"
#: "about 600 lines": a longer module must say that it is one feature read top to bottom.
MAX_LINES = 600
LONG_MODULE_NOTE = "reads top to bottom"


def test_a_long_module_says_it_reads_top_to_bottom():
    too_long = []
    for path in sorted(SEC_LIB.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if len(text.splitlines()) > MAX_LINES:
            doc = ast.get_docstring(ast.parse(text)) or ""
            if LONG_MODULE_NOTE not in " ".join(doc.split()):
                too_long.append(f"{path.relative_to(SEC_LIB.parent)} ({len(text.splitlines())} lines)")
    assert not too_long, (f"modules over {MAX_LINES} lines whose docstring does not say it is one feature that "
                          f"{LONG_MODULE_NOTE}: {too_long}; split them (see README, Architecture)")


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
