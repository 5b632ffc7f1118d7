"""Shared by the chapter tests: run a notebook's first cells the way papermill would."""
import pytest
from papermill.iorw import load_notebook_node
from papermill.parameterize import parameterize_notebook


def run_first_cells(notebook, params: dict) -> None:
    """Inject ``params`` the way papermill does, then run the cells up to the parameter check."""
    nb = parameterize_notebook(load_notebook_node(str(notebook)), params)
    ns: dict = {}
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        exec(compile(cell.source, "<cell>", "exec"), ns)  # noqa: S102 - the notebook's own cells
        if "notebook_params" in cell.source:
            return


@pytest.fixture
def first_cells():
    """``first_cells(notebook, params)``: see :func:`run_first_cells`."""
    return run_first_cells
