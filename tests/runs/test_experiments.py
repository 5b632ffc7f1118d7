"""sec_lib.runs.experiments: the one variant rule, and selection that takes its runs explicitly (no default store)."""
import ast
import inspect

import pandas as pd
import pytest

from sec_lib.runs import experiments as ex
from sec_lib.runs.store import ResultStore, run_key
from sec_lib.runs.train import RunResult


def test_the_variant_rule():
    base = {"lr": 1e-3}
    assert ex.with_variant(base, "semihard", "sec") == dict(base, eta=ex.ETA_SEC["semihard"], mu="batch")
    assert ex.with_variant(base, "ms", "l2reg") == dict(base, eta=ex.ETA_L2, mu="zero")
    # without SEC the μ settings are reset, so a run has one key whatever μ was asked for
    assert ex.with_variant(base, "ms", "none", mu="ema", momentum=0.1) == dict(base, eta=0.0, mu="batch", momentum=1.0)
    assert ex.with_variant(base, "ms", "sec", eta=0.0, mu=4.0) == dict(base, eta=0.0, mu="batch", momentum=1.0)
    with pytest.raises(ValueError, match="'variant'.*'none', 'l2reg', 'sec'"):
        ex.with_variant(base, "ms", "L2")
    p = ex.get_profile("smoke")
    assert ex.config(p, "ms", "sec", 1) == ex.config(p, "ms", "none", 1, eta=ex.ETA_SEC["ms"], mu="batch")
    toy = ex.toy_grid(p)
    assert all(c.mu == "batch" and c.momentum == 1.0 for c in toy if c.eta == 0)
    assert all(c.momentum == (0.1 if c.mu == "ema" else 1.0) for c in toy if c.eta > 0)


def test_no_function_opens_a_default_store():
    from sec_lib.runs import sweeps
    for module in (ex, sweeps):
        tree = ast.parse(inspect.getsource(module))
        calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "ResultStore"]
        assert not calls, module.__name__
    for fn, runs in ((ex.chosen_lr, "pilot_runs"), (ex.chosen_eta, "selection_runs")):
        assert inspect.signature(fn).parameters[runs].default is inspect.Parameter.empty
    for fn in (ex.tuned, ex.sweep_configs, ex.all_configs):
        assert inspect.signature(fn).parameters["store"].default is inspect.Parameter.empty


def test_selection_reads_the_store_it_is_given(tmp_path):
    p = ex.get_profile("smoke")
    empty_store = ResultStore(tmp_path / "empty")
    with pytest.raises(KeyError, match="pilot.*python -m sec_lib.book run --profile smoke --only"):
        ex.sweep_configs("compare", p, empty_store)
    store = ResultStore(tmp_path / "runs")
    none = pd.DataFrame({"step": []})
    pilot = ex.lr_pilot(p)
    for i, cfg in enumerate(pilot):            # the last Adam rate of the pilot wins
        store.save(RunResult(cfg, "done", {"R@1": 10.0 + i}, none, none, none, none, none, none))
    adam = [c.lr for c in pilot if c.optimizer == "adam"]
    assert ex.tuned(p, "adam", store).base["lr"] == adam[-1]
    assert ex.chosen_lr(p, "adam", [store.get(c) for c in pilot]) == adam[-1]
    main = ex.sweep_configs("compare", p, store)
    assert {c.lr for c in main} == {adam[-1]}
    with pytest.raises(KeyError, match="η selection"):
        ex.sweep_configs("tuned", p, store)
    keys = {run_key(c) for c in ex.all_configs(p, store, sweeps=("compare", "eta"))}
    assert {run_key(c) for c in main} <= keys


def test_the_chapter_registry_names_exactly_the_chapters_the_profiles_know():
    """``SWEEPS`` (a chapter -> its sweep) is built from ``profiles.SWEEP_NAMES`` (the one list of names, which the
    profiles below it read, e.g. a benchmark book's chapters), in the runner's order, and every sweep is named."""
    from sec_lib.runs import profiles
    assert tuple(ex.SWEEPS) == profiles.SWEEP_NAMES and set(ex.SWEEPS) == set(profiles.SWEEP_NAMES)
    assert ex.profile_sweeps("cpu") == profiles.SWEEP_NAMES
    assert ex.profile_sweeps("cub") == tuple(c for c in profiles.SWEEP_NAMES if c != "ssl")


def test_get_profile_names_every_profile_and_refuses_others():
    from sec_lib.params import ParameterError
    from sec_lib.runs import profiles
    for name in profiles.GLYPH_PROFILES:
        assert ex.get_profile(name) is profiles.glyph_profile(name) is ex.PROFILES[name]
    assert ex.get_profile("cub").name == "cub" and ex.get_profile("cub-smoke").base["device"] == "cpu"
    with pytest.raises(ParameterError, match="profile"):
        ex.get_profile("imagenet")
    with pytest.raises(ParameterError, match="smoke"):          # the glyph lookup names its valid choices
        profiles.glyph_profile("cub")
