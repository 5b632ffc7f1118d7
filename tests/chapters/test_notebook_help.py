"""`papermill --help-notebook notebooks/X.ipynb` documents every notebook: each parameter of the cell tagged
``parameters`` is written ``name: type = value  # help``, so papermill's inspection gives it a type and a
help text; the help names every value a choice accepts and the type agrees with the chapter's PARAMS."""
import importlib
from pathlib import Path

import papermill
import pytest

from sec_lib import chapters
from sec_lib.params import Choice, Number, OptionalParam

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", chapters.PAGE_NAMES)
def test_every_parameter_has_a_type_and_a_help_that_names_its_values(name):
    params = importlib.import_module(f"sec_lib.chapters.{name}").PARAMS
    inspected = papermill.inspect_notebook(str(REPO / "notebooks" / f"{name}.ipynb"))
    assert set(inspected) == set(params), f"{name}.ipynb: papermill infers {sorted(inspected)}, PARAMS has {sorted(params)}"
    for key, spec in params.items():
        p = inspected[key]
        assert p["inferred_type_name"] not in ("", "None"), f"{name}.ipynb: {key} has no type annotation"
        assert p["help"].strip(), f"{name}.ipynb: {key} has no help comment"
        optional = isinstance(spec, OptionalParam)
        inner = spec.spec if optional else spec
        assert p["inferred_type_name"].startswith("Optional[") == optional, (name, key, p["inferred_type_name"])
        if optional:
            assert "None" in p["help"], f"{name}.ipynb: {key}'s help must say what None means"
        if isinstance(inner, Choice):
            missing = [v for v in inner.values if f'"{v}"' not in p["help"]]
            assert not missing, f"{name}.ipynb: the help of {key} does not name {missing}"
            assert "str" in p["inferred_type_name"]
        if isinstance(inner, Number):
            assert ("int" if inner.integer else "float") in p["inferred_type_name"], (name, key, p["inferred_type_name"])


def test_the_cli_prints_the_help():
    """The command the README shows: the types and help texts reach the terminal."""
    from click.testing import CliRunner
    from papermill.cli import papermill as cli

    out = CliRunner().invoke(cli, ["--help-notebook", str(REPO / "notebooks" / "train.ipynb")])
    assert out.exit_code == 0, out.output
    assert 'loss: str (default "semihard")' in out.output and "Optional[float]" in out.output
    assert '"npair_ip_l2"' in out.output
