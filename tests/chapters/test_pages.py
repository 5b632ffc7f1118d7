"""The page list lives once (sec_lib.chapters.PAGES): every page has its notebook and its chapter
module, and the notebook's parameters cell declares exactly the chapter's PARAMS."""
import ast
import importlib
from pathlib import Path

import nbformat
import pytest

from sec_lib import chapters
from sec_lib.chapters import evidence
from sec_lib.runs import experiments as ex

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", chapters.PAGE_NAMES)
def test_every_page_has_a_notebook_and_a_chapter_with_its_params(name):
    module = importlib.import_module(f"sec_lib.chapters.{name}")
    nb = nbformat.read(REPO / "notebooks" / f"{name}.ipynb", as_version=4)
    cells = [c for c in nb.cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(cells) == 1, f"{name}.ipynb needs one cell tagged 'parameters'"
    body = ast.parse(cells[0].source).body
    declared = {t.id for node in body if isinstance(node, ast.Assign) for t in node.targets}
    declared |= {node.target.id for node in body if isinstance(node, ast.AnnAssign)}
    assert declared == set(module.PARAMS)
    assert module.PARAMS["profile"].values == tuple(ex.PROFILE_NAMES)


def test_pages_read_known_sweeps_and_notebooks_call_their_chapter():
    for page in chapters.PAGES:
        assert set(page.sweeps) <= set(ex.SWEEPS), page
    for name in chapters.PAGE_NAMES:
        code = "\n".join(c.source for c in nbformat.read(REPO / "notebooks" / f"{name}.ipynb", as_version=4).cells
                         if c.cell_type == "code")
        assert f"sec_lib.chapters.{name}" in code or f"chapters import {name}" in code or \
            f"from sec_lib.chapters import common, {name}" in code, name


#: Pages that open with their own marked answer instead of the answer box: the compare page states the primary test
#: as the landing page does.
OWN_ANSWER = {"compare": "home.answer_block("}


@pytest.mark.parametrize("page", [p for p in evidence.claim_pages() if p != "claims"])
def test_every_page_that_decides_a_claim_opens_with_its_answer(page):
    """Each page is an argument: the answer comes before the evidence, and the claims box closes the page."""
    nb = nbformat.read(REPO / "notebooks" / f"{page}.ipynb", as_version=4)
    code = [c.source for c in nb.cells if c.cell_type == "code"]
    opening = OWN_ANSWER.get(page, f'evidence.answer_box("{page}"')
    first = next((i for i, s in enumerate(code) if opening in s), None)
    assert first is not None, f"{page}.ipynb does not open with {opening}…"
    assert first <= 3, f"{page}.ipynb gives its answer only in code cell {first}"
    box = [i for i, s in enumerate(code) if f'evidence.claims_box("{page}"' in s]
    assert box and box[-1] > first


def test_table1_gives_its_answer_before_its_tables():
    """Table 1 decides no claim, but it is an argument too: how often SEC is the best row comes before the blocks."""
    code = [c.source for c in nbformat.read(REPO / "notebooks" / "table1.ipynb", as_version=4).cells
            if c.cell_type == "code"]
    said = next(i for i, s in enumerate(code) if "table1.answer(" in s)
    assert said <= 3 and said < min(i for i, s in enumerate(code) if "show_table(" in s)
