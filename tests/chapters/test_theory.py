"""Tests for sec_lib.chapters.theory: the gradient facts of Sec. 3 of the SEC paper, checked against autograd,
independent formulas (Pythagoras, Eq. (1)) and scipy's regression, plus the theory notebook."""
from __future__ import annotations

import pathlib

import numpy as np
import pytest

from sec_lib.chapters import theory as T
from sec_lib.figures import theory as theory_fig
from sec_lib.params import ParameterError, notebook_params

ROOT = pathlib.Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "notebooks" / "theory.ipynb"
SMALL = dict(n_classes=3, dim=6, seed=1)


# ------------------------------------------------------------------------------- facts 1 and 2

@pytest.mark.parametrize("loss_name", T.THEORY_LOSSES)
def test_gradient_perpendicular_and_inverse_norm(loss_name):
    df = T.gradient_facts(loss_name, scales=(0.5, 1.0, 3.0), **SMALL)
    active = df[df["grad_norm"] > 0]
    assert len(active) >= len(df) // 2, "most samples should have a non-zero gradient"
    # Prop. 1: <g, f> = 0 relative to |g||f|
    rel = (active["grad_dot_f"].abs() / (active["grad_norm"] * active["norm"])).max()
    assert rel < 1e-5
    assert np.allclose(active["angle_deg"], 90.0, atol=1e-3)
    # Prop. 2, vector form: g(f) = g(f_hat)/||f|| (autograd at two points), and the 1/c scaling
    assert active["prop2_rel_err"].max() < 1e-9
    assert np.allclose(active["scale_ratio"], 1.0, rtol=1e-9)
    slopes = T.fixed_direction_slopes(active)["slope"]
    assert np.all(np.abs(slopes + 1.0) < 1e-3)


def test_scaled_batch_really_rescales_norms_only():
    df = T.gradient_facts("triplet", scales=(0.25, 1.0, 4.0), **SMALL)
    base = df[df["scale"] == 1.0].set_index("sample")
    big = df[df["scale"] == 4.0].set_index("sample")
    assert np.allclose(big["norm"], 4.0 * base["norm"], rtol=1e-12)
    assert np.allclose(big["grad_norm"], base["grad_norm"] / 4.0, rtol=1e-9)
    assert np.allclose(big["loss_value"], base["loss_value"], rtol=1e-12)  # loss sees directions only


def test_random_direction_slope_is_noisy_but_near_minus_one():
    spread = T.slope_spread("triplet", seeds=range(6), scales=(0.5, 1.0, 2.0), n_classes=4, dim=8)
    assert np.all(np.abs(spread["fixed_slope_mean"] + 1) < 1e-6)
    assert spread["random_slope"].std() > 1e-3  # honestly noisy across batches
    assert abs(spread["random_slope"].mean() + 1) < 0.4


def test_eq1_matches_autograd():
    eq1 = T.eq1_check(dim=5, n_pairs=30, seed=3)
    assert eq1["max_abs_diff"].max() < 1e-12
    # and the magnitude is sin(theta)/||f_i||, i.e. inversely proportional to the norm
    assert np.allclose(eq1["grad_norm"], np.sqrt(1 - eq1["cos"] ** 2) / eq1["norm_i"], rtol=1e-9)


# ------------------------------------------------------------------------------- facts 3 and 4

def test_sgd_norms_never_decrease_and_sec_equalizes():
    g = T.sgd_norm_growth("npair", steps=40, lr=0.3, n_classes=4, dim=6, seed=2, etas=(0.0, 1.0))
    none = g[g["variant"] == "none"].sort_values(["sample", "step"])
    inc = none.groupby("sample")["norm"].diff().dropna()
    assert inc.min() >= -1e-12
    assert inc.max() > 1e-3  # they do grow
    assert none["identity_rel_err"].max() < 1e-10  # ||f'||^2 = ||f||^2 + lr^2 ||g||^2
    sec = g[g["variant"] == "sec"]
    assert (sec.groupby("sample")["norm"].diff().dropna() < -1e-6).any()  # SEC can shrink norms
    end = g["step"].max()
    var_none = none[none["step"] == end]["norm"].var()
    var_sec = sec[sec["step"] == end]["norm"].var()
    assert var_sec < 1e-2 * var_none
    # the SEC target is the batch mean norm
    for step in (0, end):
        at = sec[sec["step"] == step]
        assert at["mu"].iloc[0] == pytest.approx(at["norm"].mean(), rel=1e-12)
    # same start for both variants
    assert np.allclose(none[none["step"] == 0]["norm"].values,
                       sec[sec["step"] == 0].sort_values("sample")["norm"].values)


def test_sgd_zero_eta_is_deduplicated():
    g = T.sgd_norm_growth("triplet", steps=2, lr=0.1, etas=(0.0, 0.0), **SMALL)
    assert set(g["variant"]) == {"none"}


def test_angle_change_measured_matches_formula_and_slope_minus_two():
    a = T.angle_change("ms", lr=0.7, scales=(0.5, 1.0, 2.0, 5.0), n_classes=3, dim=6, seed=0)
    act = a[a["grad_norm"] > 0]
    assert np.allclose(act["tan_dtheta"], act["pred_tan"], rtol=1e-9)
    slopes = T.fixed_direction_slopes(act, "tan_dtheta")["slope"]
    assert np.all(np.abs(slopes + 2.0) < 1e-3)
    # Pythagoras on the same step
    assert np.allclose(act["norm_after"] ** 2, act["norm"] ** 2 + (0.7 * act["grad_norm"]) ** 2, rtol=1e-10)


# ------------------------------------------------------------------------------- the 2-D toy

def test_toy_sec_keeps_norm_variance_lower():
    toys = T.toy_2d(eta=1.0, steps=60, lr=0.5, seed=0, loss_name="triplet", n_classes=3)
    none, sec = toys["none"], toys["sec"]
    assert none.positions.shape == sec.positions.shape == (61, 9, 2)
    assert np.array_equal(none.positions[0], sec.positions[0])
    assert sec.norm_var()[-1] < 0.01 * none.norm_var()[-1]
    assert sec.norm_var()[1:].mean() < none.norm_var()[1:].mean()
    # without SEC: the metric gradient is tangential and norms never shrink
    dots = np.abs((none.metric_grads * none.positions).sum(-1))
    scale = np.linalg.norm(none.metric_grads, axis=-1) * none.norms()
    assert np.all(dots <= 1e-9 * np.maximum(scale, 1e-300))
    assert np.all(np.diff(none.norms(), axis=0) >= -1e-12)
    # SEC's gradient is radial: parallel to f
    gs, p = sec.sec_grads[0], sec.positions[0]
    cross = gs[:, 0] * p[:, 1] - gs[:, 1] * p[:, 0]
    assert np.allclose(cross, 0.0, atol=1e-12)
    f = none.frame()
    assert len(f) == 61 * 9 and {"x", "y", "norm", "metric_grad_norm"} <= set(f.columns)


def test_toy_frames_and_animation():
    import ipywidgets as widgets
    from matplotlib.figure import Figure

    toys = T.toy_2d(eta=0.5, steps=20, lr=0.5, seed=1, loss_name="npair", n_classes=3)
    assert toys["none"].positions.shape[1] == 6  # npair default K = 2
    steps = theory_fig.frame_steps(20, 4, active=theory_fig.active_steps(toys))
    assert steps[0] == 0 and steps[-1] == 20 and steps == sorted(set(steps))
    figs = theory_fig.toy_frames(toys, steps[:2])
    assert len(figs) == 2 and all(isinstance(f, Figure) for f in figs)
    assert len(figs[0].axes) == 2
    box = theory_fig.toy_animation(toys, n_frames=3, dpi=40)
    stack = box.children[1]
    assert isinstance(stack, widgets.Stack) and len(stack.children) == len(box.children[0].options)
    with pytest.raises(ValueError, match="valid steps"):
        theory_fig.toy_frames(toys, [21])


def test_plots_and_verdict_run_on_small_inputs():
    from matplotlib.figure import Figure

    facts = T.gradient_facts("triplet", scales=(0.5, 1.0, 2.0), **SMALL)
    growth = T.sgd_norm_growth("triplet", steps=5, lr=0.5, **SMALL)
    angles = T.angle_change("triplet", lr=0.5, scales=(0.5, 1.0, 2.0), **SMALL)
    toys = T.toy_2d(steps=5, lr=0.5)
    spread = T.slope_spread("triplet", seeds=range(2), scales=(1.0, 2.0), **{k: v for k, v in SMALL.items()
                                                                              if k != "seed"})
    for fig in (theory_fig.plot_perpendicularity(facts), theory_fig.plot_grad_vs_norm(facts), theory_fig.plot_norm_growth(growth),
                theory_fig.plot_angle_change(angles), theory_fig.plot_toy(toys), theory_fig.plot_slope_spread(spread)):
        assert isinstance(fig, Figure) and fig.axes
    s = T.summary(facts, growth, angles, toys)
    lines = T.verdict_lines(s)
    assert len(lines) == 5 and all(ok for ok, _ in lines[:4])
    assert f"{s['grad_slope_fixed']:.6f}" in lines[1][1]
    # the verdict really depends on the numbers
    bad = dict(s, grad_slope_fixed=-0.9, max_abs_cos=0.5)
    bad_lines = T.verdict_lines(bad)
    assert not bad_lines[0][0] and not bad_lines[1][0] and "NOT" in bad_lines[1][1]


# ------------------------------------------------------------------------------- bad input

def test_bad_inputs_raise_with_valid_choices():
    with pytest.raises(ValueError, match="'loss_name' = 'nonsense'.*'triplet'"):
        T.gradient_facts("nonsense")
    with pytest.raises(ValueError, match="lr"):
        T.sgd_norm_growth("triplet", lr=0.0)
    with pytest.raises(ValueError, match="scales"):
        T.gradient_facts("triplet", scales=(1.0,))
    with pytest.raises(ValueError, match="dim"):
        T.simulate_2d(dim=5)
    with pytest.raises(ValueError, match="'profile' = 'huge'.*'smoke'"):
        T.profile_sizes("huge")


def test_params_spec_rejects_bad_values():
    good = dict(profile="smoke", loss="triplet", seed=0, steps=5, lr=0.5, eta=1.0, device="cpu")
    assert notebook_params(dict(good), T.PARAMS)["steps"] == 5
    with pytest.raises(ParameterError, match="'loss'.*'triplet'"):
        notebook_params(dict(good, loss="nonsense"), T.PARAMS)
    with pytest.raises(ParameterError, match="lr"):
        notebook_params(dict(good, lr=0), T.PARAMS)
    with pytest.raises(ParameterError, match="bogus"):
        notebook_params(dict(good, bogus=1), T.PARAMS)


# ------------------------------------------------------------------------------- the notebook


def test_notebook_structure_and_parameter_check(first_cells):
    import nbformat

    nb = nbformat.read(NOTEBOOK, as_version=4)
    assert nb.metadata["kernelspec"]["name"] == "python3"
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert "parameters" in code[0].metadata.get("tags", [])
    assert "notebook_params(globals(), _t.PARAMS)" in code[1].source
    assert all(not c.get("outputs") for c in code), "notebook source must be stored without outputs"
    first_cells(NOTEBOOK, {"profile": "smoke"})  # valid: no error
    with pytest.raises(ParameterError) as e:
        first_cells(NOTEBOOK, {"loss": "nonsense"})
    assert "'loss'" in str(e.value) and "'triplet'" in str(e.value) and "'npair'" in str(e.value)
    with pytest.raises(ParameterError) as e:
        first_cells(NOTEBOOK, {"bogus": 1})
    assert "bogus" in str(e.value) and "'profile'" in str(e.value)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_notebook_runs_at_smoke(smoke_site):
    """The page as the smoke sweep executed it (tests/conftest.py: papermill, profile smoke); a bad
    parameter is refused by the first cells (test above), and papermill reports such an error
    (tests/site/test_book.py::test_bad_papermill_parameter_fails_clearly_and_stores_nothing)."""
    import nbformat

    assert smoke_site["run"].returncode == 0, smoke_site["run"].stderr[-3000:]
    nb = nbformat.read(smoke_site["site"] / "book" / "nb" / "theory.ipynb", as_version=4)
    text = "".join(o.get("text", "") + str(o.get("data", {}).get("text/markdown", ""))
                   for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert "8 of 8 theoretical facts held" in text
    state = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    assert any(v["model_name"] == "LinkModel" for v in state.values())
