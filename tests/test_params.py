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


# -- TrainConfig and device validation -------------------------------------------------
import dataclasses  # noqa: E402
from unittest import mock  # noqa: E402

import torch  # noqa: E402

from sec_lib.runs import experiments as ex  # noqa: E402
from sec_lib.chapters import train as train_sweep_runs  # noqa: E402
from sec_lib.params import Device  # noqa: E402
from sec_lib.runs.train import TrainConfig  # noqa: E402


def test_a_bad_mu_is_reported_with_the_value_given():
    with pytest.raises(ParameterError, match=r"'mu' = 'median' is not valid"):
        notebook_params({"profile": "cpu", "mu": "median"}, {"profile": SPEC["profile"], "mu": Mu()})
    train_page = {"profile": "smoke", "dataset": "glyphs", "loss": "semihard", "variant": "sec", "eta": None,
                  "mu": "median", "optimizer": "adam", "iterations": None, "seed": 0, "device": None}
    with pytest.raises(ParameterError, match=r"'mu' = 'median' is not valid"):
        notebook_params(train_page, train_sweep_runs.PARAMS)


def test_momentum_is_only_accepted_with_an_ema_mu():
    with pytest.raises(ParameterError, match=r"'momentum' = 0.5 is only used with mu = 'ema'.*'batch'"):
        TrainConfig(mu="batch", momentum=0.5).validate()
    TrainConfig(mu="ema", eta=0.1, momentum=0.5).validate()
    TrainConfig(mu="batch", momentum=1.0).validate()


@pytest.mark.parametrize("loss,batch,near", [("semihard", 25, "24, 27"), ("ms", 24, "20, 25"), ("npair", 61, "60, 62")])
def test_a_batch_that_k_does_not_divide_is_an_error_naming_the_nearest_sizes(loss, batch, near):
    with pytest.raises(ParameterError, match=rf"'batch_size' = {batch} .*multiple of .*nearest valid sizes: {near}$"):
        TrainConfig(loss=loss, batch_size=batch).validate()
    with pytest.raises(ParameterError, match=r"K = 4 instances \(batch_k\)"):
        TrainConfig(loss="semihard", batch_size=30, batch_k=4).validate()


@pytest.mark.parametrize("device,fragment", [("gpu", "valid values: 'cpu', 'cuda', 'cuda:N', 'mps'"),
                                             ("cuda:x", "valid values"), (3, "valid values")])
def test_a_bad_device_is_refused_with_the_value_and_the_choices(device, fragment):
    with pytest.raises(ParameterError, match=rf"'device' = {device!r} .*{fragment}"):
        TrainConfig(device=device).validate()


def test_cuda_is_checked_against_the_machine():
    with mock.patch.object(torch.cuda, "is_available", return_value=False):
        with pytest.raises(ParameterError, match="CUDA is not available"):
            Device().check("device", "cuda")
    with mock.patch.object(torch.cuda, "is_available", return_value=True), \
            mock.patch.object(torch.cuda, "device_count", return_value=2):
        assert Device().check("device", "cuda:1") == "cuda:1"
        with pytest.raises(ParameterError, match=r"'cuda:2': this machine has 2 CUDA device\(s\); valid values: 'cuda', 'cuda:0', 'cuda:1'"):
            Device().check("device", "cuda:2")


def test_the_train_page_refuses_a_bad_device_before_the_pilot_trains(monkeypatch, tmp_path):
    monkeypatch.setenv("SEC_RUNS_DIR", str(tmp_path))
    monkeypatch.setattr("sec_lib.runs.store.train", lambda *a, **k: pytest.fail("nothing may train"))
    with pytest.raises(ParameterError, match="'device' = 'gpu'"):
        train_sweep_runs.train_page_config("smoke", device="gpu")
    with pytest.raises(ParameterError, match="'device' = 'gpu'"):
        notebook_params({"profile": "smoke", "dataset": "glyphs", "loss": "semihard", "variant": "sec", "eta": None,
                         "mu": None, "optimizer": "adam", "iterations": None, "seed": 0, "device": "gpu"},
                        train_sweep_runs.PARAMS)
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("profile", ex.PROFILE_NAMES)
def test_every_run_of_every_profile_validates(profile):
    """The sweeps' configs (all chapters, every candidate rate and η) pass the stricter checks; the
    gpu profile on a machine that has CUDA."""
    with mock.patch.object(torch.cuda, "is_available", return_value=True), \
            mock.patch.object(torch.cuda, "device_count", return_value=1):
        assert ex.check_sweeps(profile) > 100
        p = ex.get_profile(profile)
        for loss in ("semihard", "ms", "npair", "tml"):          # the train page's toy runs too
            assert ex.config(p, loss).batch_size % TrainConfig(loss=loss).k == 0


def test_the_runner_checks_every_config_before_anything_trains(monkeypatch, tmp_path):
    from sec_lib.site import runner as book
    monkeypatch.setenv("SEC_RUNS_DIR", str(tmp_path / "runs"))
    gpu_smoke = dataclasses.replace(ex.get_profile("smoke"), base=dict(ex.get_profile("smoke").base, device="gpu"))
    monkeypatch.setitem(ex.PROFILES, "smoke", gpu_smoke)
    monkeypatch.setattr(book, "prepare_data", lambda p: pytest.fail("nothing may run"))
    (tmp_path / "notebooks").mkdir()                      # a project folder for the runner to find
    (tmp_path / "_config.yml").write_text("title: t\n")
    with pytest.raises(ParameterError, match="'device' = 'gpu'"):
        book.run("smoke", only=["compare"], site=tmp_path)
    assert not (tmp_path / "runs").exists()


def test_check_fields_names_the_unknown_keys_and_the_valid_fields():
    from sec_lib.params import check_fields
    from sec_lib.runs.pretrain import PretrainConfig
    from sec_lib.runs.train import TrainConfig
    d = TrainConfig().to_dict()
    assert check_fields(TrainConfig, d) is d
    for cls, base in ((TrainConfig, d), (PretrainConfig, PretrainConfig().to_dict())):
        with pytest.raises(ParameterError, match=rf"unknown {cls.__name__} field\(s\) \['lrr'\]; valid fields: \[.*'lr'"):
            cls.from_dict({**base, "lrr": 0.1})
