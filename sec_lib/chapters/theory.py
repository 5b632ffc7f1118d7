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

The measurements are in :mod:`sec_lib.toylab` (the free-embedding lab); the page's figures are in
:mod:`sec_lib.figures.theory`.
"""
from __future__ import annotations

from typing import Mapping

import pandas as pd

from ..runs import experiments as ex
from ..params import Choice, Number
from ..toylab import (  # noqa: F401  (the lab moved out of the page; theory.X keeps working)
    THEORY_LOSSES, Toy2D, angle_change, eq1_check, fixed_direction_slopes, gradient_facts, make_batch, sgd_norm_growth,
    simulate_2d, slope_spread, slope_summary, split_gradients, toy_2d)

#: Sizes per profile. ``smoke`` runs the whole notebook in seconds.
PROFILES: dict[str, dict] = {
    "smoke": dict(n_classes=3, dim=8, scales=(0.5, 1.0, 2.0, 4.0), n_seeds=4, frames=4, toy_classes=3, dpi=60),
    "cpu": dict(n_classes=6, dim=32, scales=(0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0), n_seeds=30, frames=12,
                toy_classes=3, dpi=72),
    "gpu": dict(n_classes=8, dim=64, scales=(0.0625, 0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0), n_seeds=100,
                frames=24, toy_classes=4, dpi=72),
}
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


def summary(facts: pd.DataFrame, growth: pd.DataFrame, angles: pd.DataFrame,
            toys: Mapping[str, Toy2D]) -> dict:
    """The measured numbers the chapter's closing verdict states (all computed, none typed)."""
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
        out[f"toy_norm_var_mean_{key}"] = float(t.norm_var().mean())
        out[f"toy_loss_end_{key}"] = float(t.loss_values[-1])
        out[f"toy_steps_{key}"] = int(t.steps)
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
                    f"to sample."))
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
        out.append((ok, f"2-D toy after {s['toy_steps_none']} steps: norm variance {vn:.3g} without SEC vs "
                        f"{vs:.3g} with SEC ({'lower' if ok else 'NOT lower'} with SEC); final metric loss "
                        f"{s['toy_loss_end_none']:.3g} without vs {s['toy_loss_end_sec']:.3g} with SEC."))
    return out
