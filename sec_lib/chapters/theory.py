"""The numbers behind the theory chapter: gradient facts of l2-normalized losses, measured with autograd.

Follows Sec. 3 of Zhang, Li & Zhang, "Deep Metric Learning with Spherical Embedding" (NeurIPS 2020,
arXiv 2011.02785). For any loss that sees ``f`` only through ``f_hat = f / ||f||``::

    dL/df = (1/||f||) (I - f_hat f_hat^T) dL/df_hat                        (chain rule)

which gives the four facts this module measures on the library's own losses (``sec_lib.losses``):

1. ``<dL/df, f> = 0``: the gradient is perpendicular to ``f`` (the paper's Proposition 1);
2. ``||dL/df|| ∝ 1/||f||`` at a fixed direction (Proposition 2; Eq. (1) for a single cosine:
   ``d<f_hat_i, f_hat_j>/df_i = (1/||f_i||)(f_hat_j - cos θ_ij f_hat_i)``);
3. a plain SGD step on ``f`` only grows the norm: ``||f'||^2 = ||f||^2 + α^2 ||dL/df||^2``;
4. the angle of one step obeys ``tan Δθ = α ||dL/df|| / ||f|| ∝ 1/||f||^2``.

Every gradient here comes from ``torch.autograd`` on ``get_loss(name)(f, labels)``. The only
hand-written gradient is Eq. (1) in :func:`eq1_check`, whose point is to compare it with autograd.

"Free embeddings": in :func:`sgd_norm_growth`, :func:`angle_change` and :func:`simulate_2d` the
embeddings themselves are the parameters, updated by ``f <- f - lr * dL/df``. That isolates the
geometry from any network.

Sections 6 and 7 of the page turn to SEC itself: its derivative along a rescaling ``f -> s f`` is
``2 eta Var(||f||)/s``, so it shrinks the embedding as well as equalizing the norms; the scale-free variant
(``SphericalEmbeddingConstraint(relative=True)``) has derivative 0 there; pytorch-metric-learning's
``CenterInvariantRegularizer`` is ``mu^2`` times SEC to leading order and pulls along the scale twice as hard.

The measurements are in :mod:`sec_lib.toylab` (the free-embedding lab) and :mod:`sec_lib.scalelab` (sections 6
and 7); the page's figures are in :mod:`sec_lib.figures.theory`, except :func:`plot_linear_scale` (below), the
one figure of section 6.
The short notes under the figures (:func:`profile_note` ... :func:`angle_note`) are Markdown, so the page
prints nothing to stdout.
"""
from __future__ import annotations

from typing import Mapping


import numpy as np
import pandas as pd

from ..figures.palette import VARIANT_COLORS
from ..figures.style import figure
from ..runs import experiments as ex
from .common import cv_from_var
from ..params import Choice, Number
from ..scalelab import (  # noqa: F401  (sections 6 and 7: the page's names for the lab's)
    LINEAR_VARIANTS, SCALE_FORMULAS, SCALE_PENALTIES, cir_relation, cir_table, linear_scale_runs,
    linear_scale_summary, scale_derivative_autograd, scale_derivative_closed_form, scale_derivative_table,
    scale_derivatives, scale_penalty)
from ..toylab import (  # noqa: F401  (the page's names for the free-embedding lab's)
    THEORY_LOSSES, Toy2D, angle_change, eq1_check, fixed_direction_slopes, gradient_facts, make_batch, sgd_norm_growth,
    simulate_2d, slope_spread, slope_summary, split_gradients, toy_2d)
from ..figures.tables import fold_columns

#: Sizes per profile. ``smoke`` runs the whole notebook in seconds.
#: ``scale_seeds``: random batches of the scale-derivative check (section 6); ``lin_steps``, ``lin_lr``: plain
#: SGD on the linear last layer (section 6); ``cir_seeds``: batches per width of the CIR comparison (section 7).
PROFILES: dict[str, dict] = {
    "smoke": dict(n_classes=3, dim=8, scales=(0.5, 1.0, 2.0, 4.0), n_seeds=4, frames=4, toy_classes=3, dpi=60,
                  scale_seeds=2, lin_steps=60, lin_lr=0.01, cir_seeds=2),
    "cpu": dict(n_classes=6, dim=32, scales=(0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0), n_seeds=30, frames=12,
                toy_classes=3, dpi=72, scale_seeds=5, lin_steps=300, lin_lr=0.01, cir_seeds=5),
    "gpu": dict(n_classes=8, dim=64, scales=(0.0625, 0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0), n_seeds=100,
                frames=24, toy_classes=4, dpi=72, scale_seeds=20, lin_steps=600, lin_lr=0.01, cir_seeds=20),
}
#: Colour of relative SEC in :func:`plot_linear_scale` (Okabe-Ito sky blue, unused by the variant palette).
RELATIVE_COLOR = "#56B4E9"
#: The theory notebook's parameters (validated with ``sec_lib.params.notebook_params``).
PARAMS = {
    "profile": Choice(tuple(ex.PROFILE_NAMES)),
    "loss": Choice(THEORY_LOSSES),
    "seed": Number(lo=0, hi=2**31 - 1, integer=True),
    "steps": Number(lo=1, hi=100_000, integer=True),
    "lr": Number(lo=1e-12, hi=1e6),
    "eta": Number(lo=0.0, hi=1e6),
    "device": Choice(("cpu", "cuda")),
}


def profile_sizes(profile: str) -> dict:
    """The sizes of ``profile`` (a copy of ``PROFILES[profile]``); a profile of
    :data:`sec_lib.runs.experiments.PROFILE_NAMES` without its own sizes gets the ``cpu`` sizes."""
    Choice(tuple(ex.PROFILE_NAMES)).check("profile", profile)
    return dict(PROFILES.get(profile, PROFILES["cpu"]))


# ------------------------------------------------------------------------------- the notes under the figures

def profile_note(p: Mapping, sizes: Mapping) -> str:
    """Markdown: the sizes this page runs at."""
    return (f"Profile `{p['profile']}`: {sizes['n_classes']} classes × K of the `{p['loss']}` loss in "
            f"{sizes['dim']} dimensions; rescaling factors {', '.join(f'{c:g}' for c in sizes['scales'])}.")


def perp_note(facts: pd.DataFrame, eq1: pd.DataFrame) -> str:
    """Markdown: the largest |cos(dL/df, f)| and the Eq. (1) check."""
    return (f"Largest $\\lvert\\cos(\\partial L/\\partial f, f)\\rvert$ over {len(facts)} gradients: "
            f"**{facts['cos_grad_f'].abs().max():.1e}**. Eq. (1) against autograd on {len(eq1)} random pairs: "
            f"largest difference **{eq1['max_abs_diff'].max():.1e}**.")


def prop2_note(facts: pd.DataFrame) -> str:
    """Markdown: the fixed-direction and across-sample slopes of the gradient norm on the norm."""
    g = slope_summary(facts)
    return (f"At a fixed direction the log-log slope is **{g['fixed_slope_mean']:.6f}** (from "
            f"{g['fixed_slope_min']:.6f} to {g['fixed_slope_max']:.6f} over {g['n_fixed']} samples). Across the "
            f"{g['n_random']} samples of one batch with random directions it is {g['random_slope']:.3f} "
            f"(R² {g['random_r2']:.3f}). The vector form $\\lVert g(f)\\rVert\\,\\lVert f\\rVert / "
            f"\\lVert g(\\hat f)\\rVert = 1$ holds to {(facts['prop2_ratio'] - 1).abs().max():.1e}.")


def spread_note(spread: pd.DataFrame) -> str:
    """Markdown: the across-sample slope over many batches."""
    r = spread["random_slope"]
    return (f"Across-sample slope over {len(spread)} random batches: mean **{r.mean():.3f}**, sd {r.std():.3f}, "
            f"from {r.min():.3f} to {r.max():.3f}.")


def growth_note(growth: pd.DataFrame) -> str:
    """Markdown: the per-step norm changes without SEC and the Pythagoras identity."""
    none = growth[growth["variant"] == "none"].sort_values(["sample", "step"])
    inc = none.groupby("sample")["norm"].diff().dropna()
    return (f"Without SEC the smallest per-step change of a norm is **{inc.min():.2e}** and the largest "
            f"{inc.max():.2e}; $\\lVert f'\\rVert^2 = \\lVert f\\rVert^2 + \\alpha^2\\lVert g\\rVert^2$ holds to a "
            f"relative error of {none['identity_rel_err'].max():.1e}.")


def angle_note(angles: pd.DataFrame) -> str:
    """Markdown: the slope of tan(dtheta) on the norm, the formula check, and the spread of angles in one batch."""
    a = slope_summary(angles, "tan_dtheta")
    rel = ((angles["tan_dtheta"] - angles["pred_tan"]).abs() / angles["pred_tan"]).max()
    b = angles[angles["scale"] == 1.0]
    moving = b["dtheta"][b["dtheta"] > 0]
    spread = (f" In the unscaled batch the angle per step ranges over a factor "
              f"**{b['dtheta'].max() / moving.min():.0f}** while the norms range over a factor "
              f"{b['norm'].max() / b['norm'].min():.0f}." if len(moving) else "")
    return (f"At a fixed direction the slope of $\\tan\\Delta\\theta$ on $\\lVert f\\rVert$ is "
            f"**{a['fixed_slope_mean']:.6f}**; across one batch {a['random_slope']:.3f} (R² {a['random_r2']:.3f}). "
            f"Measured $\\tan\\Delta\\theta$ against $\\alpha\\lVert g\\rVert/\\lVert f\\rVert$: largest relative "
            f"difference {rel:.1e}.{spread}")


# ------------------------------------------------------------------------------- section 6: SEC and the scale

#: Reader-facing headers of :func:`scale_derivative_table`, :func:`linear_table` and :func:`cir_table`.
SCALE_COLUMNS = {"penalty": "penalty P", "closed_form": "d/ds P(sf), derived", "checks": "checks",
                 "max_abs_diff": "max |autograd − derived|", "max_rel_diff": "max relative difference",
                 "cos_min": "cos(∇P, f) min", "cos_max": "cos(∇P, f) max",
                 "pull_min": "s·P′/P min", "pull_max": "s·P′/P max"}
LINEAR_COLUMNS = {"variant": "variant", "w_norm_start": "‖W‖ start", "w_norm_end": "‖W‖ end",
                  "cv_start": "CV start", "cv_end": "CV end", "sum_first_order": "Σ −2α⟨W,g⟩ (first order)",
                  "sum_second_order": "Σ α²‖g‖² (second order)", "sum_delta_w_norm2": "Σ Δ‖W‖² measured"}
CIR_COLUMNS = {"width": "width w", "batches": "batches", "cv_median": "CV (median)",
               "rel_err_max": "max |CIR/(μ²·SEC) − 1|", "rel_err_per_cv_max": "max of that / CV",
               "d_ratio_min": "CIR′/(μ²·SEC′) min", "d_ratio_max": "CIR′/(μ²·SEC′) max",
               "identity_dev_max": "moment identity residual", "d_ratio_pred_dev_max": "2·CIR/(μ²·SEC) residual",
               "scaling_dev_max": "c⁴ law residual"}


def cir_display(cir: pd.DataFrame) -> pd.DataFrame:
    """:func:`cir_table` with the reader's headers, the residual checks of the derivation folded under it (so
    the table fits the text column)."""
    t = cir.rename(columns=CIR_COLUMNS)
    return fold_columns(t, [CIR_COLUMNS["width"]], {"Checks of the derivation (largest residuals)": [
        CIR_COLUMNS[c] for c in ("identity_dev_max", "d_ratio_pred_dev_max", "scaling_dev_max")]})


def linear_table(summary_df: pd.DataFrame) -> pd.DataFrame:
    """The reader's columns of :func:`linear_scale_summary` (scale and CV at both ends, the change of ``||W||^2``
    split into its first- and second-order parts and measured), with readable headers."""
    return summary_df[list(LINEAR_COLUMNS)].rename(columns=LINEAR_COLUMNS)

def scale_note(table: pd.DataFrame) -> str:
    """Markdown under the scale-derivative table: the worst agreement and what each penalty does to the scale."""
    t = table.set_index("penalty")
    rel = SCALE_PENALTIES["relative"]
    return (f"Over {int(t['checks'].sum())} checks the closed forms match autograd to a relative difference of at "
            f"most **{t['max_rel_diff'].max():.1e}** (relative to $\\lVert\\nabla P\\rVert\\,\\lVert f\\rVert$, the "
            f"largest the derivative can be). Relative SEC's gradient makes a cosine of at most "
            f"**{max(abs(t.loc[rel, 'cos_min']), abs(t.loc[rel, 'cos_max'])):.1e}** with the rescaling direction; "
            f"plain SEC's makes {t.loc[SCALE_PENALTIES['sec'], 'cos_min']:.2f} to "
            f"{t.loc[SCALE_PENALTIES['sec'], 'cos_max']:.2f}.")


def linear_note(summary_df: pd.DataFrame, lr: float, eta: float) -> str:
    """Markdown under the linear-layer figure: scale, first-order prediction and CV of each variant."""
    s = summary_df.set_index("variant")
    sec, rel, none = s.loc[LINEAR_VARIANTS["sec"]], s.loc[LINEAR_VARIANTS["relative"]], s.loc[LINEAR_VARIANTS["none"]]
    return (f"After {int(sec['steps'])} steps (α = {lr:g}, η = {eta:g}) SEC took the layer's scale "
            f"$\\lVert W\\rVert$ from {sec['w_norm_start']:.3f} to **{sec['w_norm_end']:.3f}**: the first-order "
            f"prediction $\\sum_t -4\\alpha\\eta\\,\\mathrm{{Var}}_t$ is {sec['sum_first_order']:.4f} for a measured "
            f"change of $\\lVert W\\rVert^2$ of {sec['sum_delta_w_norm2']:.4f} (the rest is the second-order "
            f"$\\alpha^2\\sum\\lVert g\\rVert^2$ = {sec['sum_second_order']:.4f}). Relative SEC left it at "
            f"**{rel['w_norm_end']:.3f}** (no first-order term; its smallest single-step change is "
            f"{rel['min_delta_w_norm2']:.1e}), the loss alone at {none['w_norm_end']:.3f}. The coefficient of "
            f"variation went from {sec['cv_start']:.3f} to {none['cv_end']:.3f} with the loss alone, "
            f"**{sec['cv_end']:.3f}** with SEC and **{rel['cv_end']:.3f}** with relative SEC. The identity "
            f"$\\lVert W'\\rVert^2 = \\lVert W\\rVert^2 - 2\\alpha\\langle W, g\\rangle + \\alpha^2\\lVert g\\rVert^2$ "
            f"held to {s['max_identity_rel_err'].max():.1e} and $\\langle W, g\\rangle$ matched its closed form to "
            f"{s['max_scale_grad_err'].max():.1e}.")


def plot_linear_scale(runs: pd.DataFrame):
    """Three panels over the SGD steps of :func:`linear_scale_runs`: the layer's scale ``||W||`` (= the RMS norm
    of the embeddings) with SEC's first-order prediction dashed, the variance of the norms, and their coefficient
    of variation; one line per variant."""
    colors = {"none": VARIANT_COLORS["none"], "sec": VARIANT_COLORS["sec"], "relative": RELATIVE_COLOR}
    fig = figure(9.6, 3.6)
    axes = fig.subplots(1, 3)
    for v, g in runs.groupby("variant", sort=False):
        g = g.sort_values("step")
        c = colors.get(v, "k")
        axes[0].plot(g["step"], np.sqrt(g["w_norm2"]), color=c, lw=1.6, label=g["label"].iloc[0])
        axes[1].plot(g["step"], g["var_norm"], color=c, lw=1.6)
        axes[2].plot(g["step"], g["cv"], color=c, lw=1.6)
        if v == "sec":
            first = g["w_norm2"].iloc[0] + np.concatenate([[0.0], g["first_order"].iloc[:-1].cumsum().to_numpy()])
            axes[0].plot(g["step"], np.sqrt(np.clip(first, 0, None)), color="k", ls="--", lw=1,
                         label="SEC, first order: −4αη·Var per step")
    axes[0].set_ylabel("‖W‖ = RMS of ‖f_i‖")
    axes[1].set_ylabel("Var(‖f‖)")
    axes[1].set_yscale("log")
    axes[2].set_ylabel("CV(‖f‖) = sd / mean")
    for ax in axes:
        ax.set_xlabel("SGD step")
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncol=4, fontsize=9, frameon=False)
    eta, lr = runs["eta"].iloc[0], runs["lr"].iloc[0]
    fig.suptitle(f"linear last layer, {runs['loss'].iloc[0]} loss + penalty (η = {eta:g}), plain SGD α = {lr:g}",
                 fontsize=10)
    return fig


# ------------------------------------------------------------------------------- section 7: PML's CIR

def cir_note(table: pd.DataFrame) -> str:
    """Markdown under the CIR table: the gap to mu^2 SEC at the widest and narrowest spread, the derivative ratio
    and the exact laws."""
    wide, narrow = table.loc[table["cv_median"].idxmax()], table.loc[table["cv_median"].idxmin()]
    return (f"CIR differs from $\\mu^2\\cdot$SEC by up to **{wide['rel_err_max']:.3f}** (relative) when the norms "
            f"are spread (median CV {wide['cv_median']:.3f}) and by **{narrow['rel_err_max']:.1e}** when they are "
            f"concentrated (median CV {narrow['cv_median']:.1e}); the gap divided by CV stays below "
            f"{table['rel_err_per_cv_max'].max():.2f}, a first-order effect. The gap is exactly "
            f"$\\mathrm{{skew}}\\cdot\\mathrm{{CV}} + (\\mathrm{{kurt}}-1)\\,\\mathrm{{CV}}^2/4$ (to "
            f"{table['identity_dev_max'].max():.1e}). Along the scale CIR pulls "
            f"{narrow['d_ratio_min']:.3f} to {narrow['d_ratio_max']:.3f} times as hard as $\\mu^2\\cdot$SEC at the "
            f"narrowest width (the limit is 2), and $\\mathrm{{CIR}}(cf) = c^4\\,\\mathrm{{CIR}}(f)$ holds to "
            f"{table['scaling_dev_max'].max():.1e}.")


def summary(facts: pd.DataFrame, growth: pd.DataFrame, angles: pd.DataFrame,
            toys: Mapping[str, Toy2D], scale: pd.DataFrame | None = None, linear: pd.DataFrame | None = None,
            cir: pd.DataFrame | None = None) -> dict:
    """The measured numbers the chapter's closing verdict states (all computed, none typed).

    ``scale``, ``linear`` and ``cir`` (the tables of :func:`scale_derivative_table`, :func:`linear_scale_summary`
    and :func:`cir_table`) add the numbers of sections 6 and 7."""
    gs = slope_summary(facts)
    an = slope_summary(angles, "tan_dtheta")
    none = growth[growth["variant"] == "none"].sort_values(["sample", "step"])
    dn = none.groupby("sample")["norm"].diff().dropna()
    out = dict(
        max_abs_cos=gs["max_abs_cos"],
        grad_slope_fixed=gs["fixed_slope_mean"], grad_slope_fixed_min=gs["fixed_slope_min"],
        grad_slope_fixed_max=gs["fixed_slope_max"],
        grad_slope_random=gs["random_slope"], grad_r2_random=gs["random_r2"],
        prop2_ratio_maxdev=float((facts["prop2_ratio"] - 1).abs().max()),
        sgd_min_norm_increment=float(dn.min()) if len(dn) else float("nan"),
        sgd_identity_max_rel_err=float(none["identity_rel_err"].max()),
        dtheta_slope_fixed=an["fixed_slope_mean"], dtheta_slope_random=an["random_slope"],
        dtheta_r2_random=an["random_r2"],
    )
    for v in ("none", "sec"):
        g = growth[growth["variant"] == v]
        if len(g):
            last = g[g["step"] == g["step"].max()]["norm"]
            out[f"sgd_norm_var_end_{v}"] = float(last.var(ddof=0))
            out[f"sgd_norm_mean_end_{v}"] = float(last.mean())
    out["sgd_norm_var_start"] = float(growth[growth["step"] == 0]["norm"].var(ddof=0)
                                      if "none" not in set(growth["variant"])
                                      else none[none["step"] == 0]["norm"].var(ddof=0))
    for key, t in toys.items():
        out[f"toy_norm_var_start_{key}"] = float(t.norm_var()[0])
        out[f"toy_norm_var_end_{key}"] = float(t.norm_var()[-1])
        out[f"toy_norm_cv_end_{key}"] = float(cv_from_var(t.norm_var()[-1], t.norms()[-1].mean()))
        out[f"toy_norm_var_mean_{key}"] = float(t.norm_var().mean())
        out[f"toy_loss_end_{key}"] = float(t.loss_values[-1])
        out[f"toy_steps_{key}"] = int(t.steps)
    if scale is not None:
        t = scale.set_index("penalty")
        rel, sec = t.loc[SCALE_PENALTIES["relative"]], t.loc[SCALE_PENALTIES["sec"]]
        out.update(scale_max_rel_diff=float(t["max_rel_diff"].max()), scale_checks=int(t["checks"].sum()),
                   scale_rel_max_cos=float(max(abs(rel["cos_min"]), abs(rel["cos_max"]))),
                   scale_sec_pull_min=float(sec["pull_min"]), scale_sec_pull_max=float(sec["pull_max"]))
    if linear is not None:
        li = linear.set_index("variant")
        for key, label in LINEAR_VARIANTS.items():
            if label in li.index:
                r = li.loc[label]
                out.update({f"lin_{key}_{c}": float(r[c]) for c in (
                    "w_norm_start", "w_norm_end", "cv_start", "cv_end", "sum_delta_w_norm2", "sum_first_order",
                    "sum_second_order", "min_delta_w_norm2")})
                out[f"lin_{key}_steps"] = int(r["steps"])
        out["lin_max_identity_rel_err"] = float(linear["max_identity_rel_err"].max())
        out["lin_max_scale_grad_err"] = float(linear["max_scale_grad_err"].max())
    if cir is not None:
        narrow = cir.loc[cir["cv_median"].idxmin()]
        out.update(cir_narrow_cv=float(narrow["cv_median"]), cir_narrow_rel_err=float(narrow["rel_err_max"]),
                   cir_narrow_d_ratio_min=float(narrow["d_ratio_min"]),
                   cir_narrow_d_ratio_max=float(narrow["d_ratio_max"]),
                   cir_identity_dev=float(cir["identity_dev_max"].max()),
                   cir_scaling_dev=float(cir["scaling_dev_max"].max()))
    return out


def verdict_lines(s: Mapping, tol: float = 1e-3, cos_tol: float = 1e-5) -> list[tuple[bool, str]]:
    """Sentences stating the measured numbers of :func:`summary` and whether each fact held.

    Returns ``[(held, sentence), ...]``; every number in a sentence comes from ``s``.
    ``tol`` bounds the deviation of the fixed-direction slopes from -1 and -2; ``cos_tol`` bounds
    ``|cos(grad, f)|``.
    """
    out = []
    ok = s["max_abs_cos"] < cos_tol
    out.append((ok, f"Perpendicular gradient (Prop. 1): max |cos(∂L/∂f, f)| = {s['max_abs_cos']:.1e}, "
                    f"{'below' if ok else 'NOT below'} {cos_tol:g}."))
    dev = abs(s["grad_slope_fixed"] + 1)
    ok = dev < tol
    out.append((ok, f"‖∂L/∂f‖ ∝ 1/‖f‖ (Prop. 2): at fixed directions the log-log slope is "
                    f"{s['grad_slope_fixed']:.6f}, {'within' if ok else 'NOT within'} {tol:g} of −1; across "
                    f"samples with random directions it is {s['grad_slope_random']:.2f} (R² "
                    f"{s['grad_r2_random']:.2f}), because the gradient on the unit sphere differs from sample "
                    f"to sample. This checks the law itself; whether it shows in real training, where directions "
                    f"change with the norms, is claim Q7a on the instability page."))
    inc, err = s["sgd_min_norm_increment"], s["sgd_identity_max_rel_err"]
    ok = inc >= -1e-12 and err < 1e-9
    out.append((ok, f"Plain SGD on the embeddings: the smallest per-step change of a norm is {inc:.2e} "
                    f"({'never negative' if inc >= -1e-12 else 'NEGATIVE: a norm shrank'}), and "
                    f"‖f′‖² = ‖f‖² + α²‖g‖² holds to a relative error of {err:.1e}."))
    dev = abs(s["dtheta_slope_fixed"] + 2)
    ok = dev < tol
    out.append((ok, f"Angle per step: at fixed directions tan Δθ has log-log slope {s['dtheta_slope_fixed']:.6f} "
                    f"against ‖f‖, {'within' if ok else 'NOT within'} {tol:g} of −2 (random batch: "
                    f"{s['dtheta_slope_random']:.2f}, R² {s['dtheta_r2_random']:.2f})."))
    if "toy_norm_var_end_none" in s and "toy_norm_var_end_sec" in s:
        vn, vs = s["toy_norm_var_end_none"], s["toy_norm_var_end_sec"]
        ok = vs < vn
        cvs = (f"; beside it the CV (std / mean, scale-free) {s['toy_norm_cv_end_none']:.3g} without vs "
               f"{s['toy_norm_cv_end_sec']:.3g} with SEC" if "toy_norm_cv_end_none" in s and "toy_norm_cv_end_sec" in s
               else "")
        out.append((ok, f"2-D toy after {s['toy_steps_none']} steps: norm variance {vn:.3g} without SEC vs "
                        f"{vs:.3g} with SEC ({'lower' if ok else 'NOT lower'} with SEC{cvs}); final metric loss "
                        f"{s['toy_loss_end_none']:.3g} without vs {s['toy_loss_end_sec']:.3g} with SEC."))
    if "scale_max_rel_diff" in s:
        ok = s["scale_max_rel_diff"] < 1e-9 and s["scale_rel_max_cos"] < 1e-9
        out.append((ok, f"Along a rescaling f → s f: the derived derivatives (SEC 2η·Var/s, relative SEC 0, relative "
                        f"SEC with μ detached 2η·CV²/s, L2 and CIR) match autograd in {s['scale_checks']} checks to "
                        f"{s['scale_max_rel_diff']:.1e} ({'within' if ok else 'NOT within'} 1e-9); SEC's pull "
                        f"s·P′/P is {s['scale_sec_pull_min']:.6f} (degree 2), relative SEC's gradient is at cosine "
                        f"{s['scale_rel_max_cos']:.1e} to the rescaling."))
    if "lin_sec_w_norm_end" in s and "lin_relative_w_norm_end" in s:
        sec_resid = abs(s["lin_sec_sum_delta_w_norm2"] - s["lin_sec_sum_first_order"]
                        - s["lin_sec_sum_second_order"])
        ok = (s["lin_sec_sum_first_order"] < 0 and s["lin_sec_w_norm_end"] < s["lin_relative_w_norm_end"]
              and s["lin_relative_sum_first_order"] == 0.0
              and s["lin_relative_min_delta_w_norm2"] >= -1e-12 and s["lin_max_identity_rel_err"] < 1e-9
              and s["lin_max_scale_grad_err"] < 1e-9 and sec_resid < 1e-9)
        out.append((ok, f"Linear last layer, {s['lin_sec_steps']} plain SGD steps: SEC's first-order pull on ‖W‖² "
                        f"summed to {s['lin_sec_sum_first_order']:.4f} (measured change "
                        f"{s['lin_sec_sum_delta_w_norm2']:.4f}, the rest second order) and took ‖W‖ from "
                        f"{s['lin_sec_w_norm_start']:.3f} to {s['lin_sec_w_norm_end']:.3f}; relative SEC has no "
                        f"first-order pull and took it to {s['lin_relative_w_norm_end']:.3f} "
                        f"({'never shrinking it' if s['lin_relative_min_delta_w_norm2'] >= -1e-12 else 'SHRINKING it'}); "
                        f"CV ended at {s['lin_sec_cv_end']:.3f} with SEC and {s['lin_relative_cv_end']:.3f} with "
                        f"relative SEC (start {s['lin_sec_cv_start']:.3f})."))
    if "cir_narrow_rel_err" in s:
        ok = (s["cir_identity_dev"] < 1e-9 and s["cir_scaling_dev"] < 1e-9 and s["cir_narrow_rel_err"] < 0.01
              and abs(s["cir_narrow_d_ratio_min"] - 2) < 0.02 and abs(s["cir_narrow_d_ratio_max"] - 2) < 0.02)
        out.append((ok, f"PML's CenterInvariantRegularizer is μ²·SEC to {s['cir_narrow_rel_err']:.1e} (relative) at "
                        f"CV {s['cir_narrow_cv']:.1e}, with the exact moment identity to {s['cir_identity_dev']:.1e}; "
                        f"along the scale it pulls {s['cir_narrow_d_ratio_min']:.3f}–{s['cir_narrow_d_ratio_max']:.3f} "
                        f"times as hard as μ²·SEC (limit 2) and CIR(cf) = c⁴·CIR(f) to {s['cir_scaling_dev']:.1e}."))
    return out
