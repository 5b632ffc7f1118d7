"""Notebook parameter validation names the parameter and the valid values."""
import pytest

from sec_lib.params import Choice, Mu, Number, ParameterError, Text, check_params, notebook_params

SPEC = {"profile": Choice(("smoke", "cpu", "gpu")), "seed": Number(0, 100, integer=True),
        "eta": Number(0, float("inf")), "mu": Mu(), "note": Text(optional=True)}
GOOD = {"profile": "cpu", "seed": 3, "eta": 0.5, "mu": "batch", "note": None}


def test_good_values_are_normalised():
    out = check_params(dict(GOOD, seed=3.0, eta=1, mu="2.5"), SPEC)
    assert out["seed"] == 3 and isinstance(out["seed"], int)
    assert out["eta"] == 1.0 and out["mu"] == 2.5


@pytest.mark.parametrize("name,value,fragment", [
    ("profile", "fast", "'smoke', 'cpu', 'gpu'"), ("seed", 1.5, "integer"), ("seed", -1, "[0, 100]"),
    ("eta", -0.1, "eta"), ("eta", float("nan"), "eta"), ("mu", "median", "'batch', 'ema', 'zero'"),
    ("mu", -2.0, "positive"), ("note", "", "non-empty"), ("seed", True, "integer"),
])
def test_bad_values_name_the_parameter_and_the_valid_values(name, value, fragment):
    with pytest.raises(ParameterError) as e:
        check_params(dict(GOOD, **{name: value}), SPEC)
    assert repr(name) in str(e.value) and fragment in str(e.value)


def test_unknown_papermill_parameter_is_reported():
    ns = dict(GOOD, In=[], Out={}, _i1="", get_ipython=None, etta=0.5)
    with pytest.raises(ParameterError, match=r"unknown parameter\(s\) \['etta'\].*valid parameters"):
        notebook_params(ns, SPEC)
    ns.pop("etta")
    assert notebook_params(ns, SPEC)["profile"] == "cpu"
