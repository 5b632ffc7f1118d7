"""Sections 6 and 7 of the theory page: SEC's derivative along a rescaling, the scale-free SEC on a
linear last layer, PML's CenterInvariantRegularizer against mu^2 SEC, and the page printing nothing to stdout."""
from __future__ import annotations

import math
import pathlib

import nbformat
import numpy as np
import pytest

from sec_lib.chapters import theory as T
from sec_lib.params import ParameterError

NOTEBOOK = pathlib.Path(__file__).resolve().parents[2] / "notebooks" / "theory.ipynb"


@pytest.fixture(scope="module")
def scale():
    return T.scale_derivatives(seeds=range(2), scales=(0.3, 1.0, 5.0), eta=0.7, n_classes=4, per_class=3, dim=6)


@pytest.fixture(scope="module")
def linear():
    return T.linear_scale_runs("triplet", steps=40, lr=0.01, eta=1.0, seed=1)


@pytest.fixture(scope="module")
def cir():
    return T.cir_relation(widths=(1.0, 0.1, 0.003), seeds=range(3))


# ------------------------------------------------------------------------------- section 6: derivative along s

def test_scale_derivatives_match_their_closed_forms(scale):
    assert set(scale["penalty"]) == set(T.SCALE_PENALTIES)
    assert scale["rel_diff"].max() < 1e-12
    pull = scale.groupby("penalty")["pull"]
    for name, expected in {"sec": 2, "l2": 2, "relative_detached": 2, "cir": 4}.items():
        assert np.allclose(pull.get_group(name), expected, rtol=1e-10)
    rel = scale[scale["penalty"] == "relative"]
    assert rel["closed_form"].eq(0).all() and rel["cos_grad_f"].abs().max() < 1e-12
    assert rel["value"].max() > 0.05                                    # the penalty is not trivially zero
    sec = scale[scale["penalty"] == "sec"]
    assert (sec["cos_grad_f"] > 0.1).all()                              # a real pull along the scale
    # SEC's value scales as s^2, relative SEC's not at all
    v = scale.pivot_table(index=["seed", "scale"], columns="penalty", values="value")
    for seed in range(2):
        assert v.loc[(seed, 5.0), "sec"] == pytest.approx(25 * v.loc[(seed, 1.0), "sec"], rel=1e-12)
        assert v.loc[(seed, 5.0), "relative"] == pytest.approx(v.loc[(seed, 0.3), "relative"], rel=1e-12)
    table = T.scale_derivative_table(scale)
    assert len(table) == len(T.SCALE_PENALTIES) and table["checks"].eq(6).all()
    assert set(T.SCALE_COLUMNS) == set(table.columns)


def test_closed_form_is_a_formula_not_autograd():
    """The closed forms are computed from the norms alone; check one by hand."""
    f, _ = T.make_batch(3, 3, 5, seed=4)
    n = (2.0 * f).norm(dim=1)
    assert T.scale_derivative_closed_form("sec", f, 2.0, eta=0.5) == pytest.approx(
        2 * 0.5 * float(n.var(unbiased=False)) / 2.0, rel=1e-14)
    assert T.scale_derivative_closed_form("relative", f, 2.0) == 0.0


# ------------------------------------------------------------------------------- section 6: linear layer

def test_linear_layer_scale_follows_the_exact_identity(linear):
    assert set(linear["variant"]) == set(T.LINEAR_VARIANTS)
    assert np.allclose(linear["rms_norm"] ** 2, linear["w_norm2"], rtol=1e-12)     # whitened inputs
    moved = linear.dropna(subset=["delta_w_norm2"])
    assert moved["identity_rel_err"].max() < 1e-12
    assert (linear["scale_grad"] - linear["scale_grad_pred"]).abs().max() < 1e-12
    # the change of ||W||^2 is first order + second order, exactly
    assert np.allclose(moved["delta_w_norm2"], moved["first_order"] + moved["second_order"], rtol=0, atol=1e-12)
    sec = moved[moved["variant"] == "sec"]
    assert np.allclose(sec["scale_grad_pred"], 2 * sec["var_norm"], rtol=1e-12)      # 2 eta Var, eta = 1
    assert (sec["first_order"] < 0).all()
    for v in ("none", "relative"):
        m = moved[moved["variant"] == v]
        assert m["first_order"].eq(0).all() and (m["delta_w_norm2"] >= 0).all()
    s = T.linear_scale_summary(linear).set_index("variant")
    assert s.loc[T.LINEAR_VARIANTS["sec"], "w_norm_end"] < 1.0 < s.loc[T.LINEAR_VARIANTS["relative"], "w_norm_end"]
    assert list(T.linear_table(T.linear_scale_summary(linear)).columns) == list(T.LINEAR_COLUMNS.values())


def test_linear_layer_inputs_are_checked():
    with pytest.raises(ParameterError, match="'variant'.*'relative'"):
        T.linear_scale_runs(variants=("sec", "bogus"), steps=2)
    with pytest.raises(ValueError, match="d_in"):
        T.linear_scale_runs(steps=2, n_classes=2, per_class=2, d_in=16)
    with pytest.raises(ParameterError, match="'penalty'.*'relative_detached'"):
        T.scale_penalty("bogus")
    with pytest.raises(ParameterError, match="eta"):
        T.scale_derivatives(eta=0.0)


# ------------------------------------------------------------------------------- section 7: CIR

def test_cir_is_mu_squared_sec_up_to_moments(cir):
    assert cir["identity_dev"].max() < 1e-10
    assert cir["scaling_dev"].max() < 1e-12
    assert (cir["d_ratio"] - cir["d_ratio_pred"]).abs().max() < 1e-9
    narrow = cir[cir["width"] == 0.003]
    assert narrow["rel_err"].abs().max() < 5e-3 and np.allclose(narrow["d_ratio"], 2.0, rtol=5e-3)
    wide = cir[cir["width"] == 1.0]
    assert wide["rel_err"].abs().min() > narrow["rel_err"].abs().max()            # the gap closes with the CV
    t = T.cir_table(cir)
    assert list(t["width"]) == [1.0, 0.1, 0.003] and set(T.CIR_COLUMNS) == set(t.columns)
    assert "c^4\\,\\mathrm{CIR}" in T.cir_note(t) and "\\cdot" in T.cir_note(t)          # LaTeX intact


# ------------------------------------------------------------------------------- verdict, notes, figure

def _facts():
    small = dict(n_classes=3, dim=6, seed=1)
    return (T.gradient_facts("triplet", scales=(0.5, 1.0, 2.0), **small),
            T.sgd_norm_growth("triplet", steps=5, lr=0.5, **small),
            T.angle_change("triplet", lr=0.5, scales=(0.5, 1.0, 2.0), **small), T.toy_2d(steps=5, lr=0.5))


def test_verdict_states_sections_6_and_7(scale, linear, cir):
    s = T.summary(*_facts(), T.scale_derivative_table(scale), T.linear_scale_summary(linear), T.cir_table(cir))
    lines = T.verdict_lines(s)
    assert len(lines) == 8 and all(ok for ok, _ in lines)
    assert f"{s['lin_sec_w_norm_end']:.3f}" in lines[6][1] and "never shrinking" in lines[6][1]
    assert f"{s['cir_narrow_rel_err']:.1e}" in lines[7][1]
    bad = dict(s, lin_relative_min_delta_w_norm2=-0.1, scale_rel_max_cos=0.3, cir_narrow_rel_err=0.2)
    bad_lines = T.verdict_lines(bad)
    assert not any(ok for ok, _ in bad_lines[5:]) and "SHRINKING" in bad_lines[6][1]


def test_notes_are_markdown_with_the_numbers(scale, linear):
    facts, growth, angles, _ = _facts()
    eq1 = T.eq1_check(dim=5, n_pairs=10)
    for note in (T.perp_note(facts, eq1), T.prop2_note(facts), T.growth_note(growth), T.angle_note(angles),
                 T.scale_note(T.scale_derivative_table(scale)), T.linear_note(T.linear_scale_summary(linear), 0.01, 1)):
        assert isinstance(note, str) and "\n" not in note and "\r" not in note and "\t" not in note
    assert "\\lVert" in T.growth_note(growth)                     # LaTeX survives (no stray escape characters)
    assert f"{facts['cos_grad_f'].abs().max():.1e}" in T.perp_note(facts, eq1)
    spread = T.slope_spread("triplet", seeds=range(2), scales=(1.0, 2.0), n_classes=3, dim=6)
    assert f"{spread['random_slope'].mean():.3f}" in T.spread_note(spread)
    assert "`smoke`" in T.profile_note({"profile": "smoke", "loss": "triplet"}, T.profile_sizes("smoke"))


def test_linear_figure_has_three_panels(linear):
    from matplotlib.figure import Figure

    fig = T.plot_linear_scale(linear)
    assert isinstance(fig, Figure) and len(fig.axes) == 3
    assert any("first order" in t.get_text() for t in fig.legends[0].get_texts())


@pytest.mark.parametrize("profile", ["smoke", "cpu", "gpu"])
def test_profiles_size_sections_6_and_7(profile):
    s = T.profile_sizes(profile)
    assert s["scale_seeds"] >= 1 and s["lin_steps"] >= 1 and 0 < s["lin_lr"] and s["cir_seeds"] >= 1


def test_page_prints_nothing_and_has_sections_6_and_7():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert not any("print(" in c.source for c in code), "the page shows Markdown/HTML, never stdout"
    names = [c.metadata.get("mystnb", {}).get("figure", {}).get("name") for c in code]
    assert "fig-theory-scale" in names
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert "{numref}`fig-theory-scale`" in text and "## 7." in text and "relative=True" in text
    assert "_t.summary(facts, growth, angles, toys, scale, lin_sum, cir)" in code[-1].source
    assert math.isclose(T.profile_sizes("smoke")["lin_lr"], 0.01)
