"""The runs wing moved (sec_lib.runs.*, report.fairness, metrics.probe, toylab); the old import paths keep
working and name the very same modules, so a monkeypatch through either name patches both."""
import importlib

import pytest


@pytest.mark.parametrize("old, new", [
    ("sec_lib.train", "sec_lib.runs.train"), ("sec_lib.store", "sec_lib.runs.store"),
    ("sec_lib.experiments", "sec_lib.runs.experiments"), ("sec_lib.tier", "sec_lib.runs.tier"),
    ("sec_lib.site.launch", "sec_lib.runs.launch"), ("sec_lib.fairness", "sec_lib.report.fairness"),
    ("sec_lib.probe", "sec_lib.metrics.probe"),
])
def test_an_old_module_path_is_the_moved_module(old, new):
    assert importlib.import_module(old) is importlib.import_module(new)


def test_from_imports_of_old_paths_still_work():
    from sec_lib.store import run_key
    from sec_lib.runs.store import run_key as moved
    from sec_lib.chapters.theory import Toy2D, simulate_2d
    from sec_lib.toylab import Toy2D as lab_toy
    assert run_key is moved and Toy2D is lab_toy and callable(simulate_2d)
