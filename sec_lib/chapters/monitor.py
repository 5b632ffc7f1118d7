"""The "Check your own model" page: a plain PyTorch loop with a pytorch-metric-learning loss on glyphs, the norm-health
monitor (:mod:`sec_lib.monitor`) attached in three lines, its curves and its diagnosis; then the same loop with SEC
as the loss's embedding regularizer, the monitor keeping SEC's gradient out of its slope.

Nothing here reads the result store: the page trains its own two short runs (a few seconds at ``smoke``, about
half a minute of one core at ``cpu``). The network is a small ``nn.Sequential`` CNN, the data the book's glyphs
(:func:`sec_lib.data.get_dataset`, the training classes of the profile), the batches P classes x K instances
(:class:`sec_lib.data.PKSampler`).
"""
from __future__ import annotations

import math
from typing import Iterator, Mapping

import numpy as np
import pandas as pd
import torch
from pytorch_metric_learning import losses as pml_losses
from torch import nn

from ..data import PKSampler, get_dataset
from ..figures.palette import REF_COLOR, VARIANT_COLORS
from ..figures.style import plain_log_ticks, styled, subplots
from ..params import Choice, Number
from ..report import loglog_fit
from ..runs import experiments as ex
from ..sec import SECRegularizer

#: The pytorch-metric-learning losses the page offers (each on l2-normalized embeddings, PML's defaults otherwise).
LOSSES = {
    "triplet": lambda **kw: pml_losses.TripletMarginLoss(margin=0.1, **kw),
    "contrastive": lambda **kw: pml_losses.ContrastiveLoss(pos_margin=0.0, neg_margin=0.5, **kw),
    "multisimilarity": lambda **kw: pml_losses.MultiSimilarityLoss(alpha=2, beta=50, base=0.5, **kw),
    "supcon": lambda **kw: pml_losses.SupConLoss(temperature=0.1, **kw),
}
#: The page's papermill parameters (validated by ``sec_lib.params.notebook_params``).
PARAMS = {
    "profile": Choice(tuple(ex.PROFILE_NAMES)),
    "loss": Choice(tuple(LOSSES)),
    "eta": Number(lo=0.0, hi=1e6, open_lo=True),
    "seed": Number(lo=0, hi=2**31 - 1, integer=True),
}
#: Sizes per profile; a profile without its own sizes gets the ``cpu`` ones.
PROFILES: dict[str, dict] = {
    "smoke": dict(p=4, k=4, steps=12, every=2, width=8, embed_dim=16, lr=1e-3),
    "cpu": dict(p=15, k=4, steps=160, every=5, width=16, embed_dim=64, lr=1e-3),
}
#: The labels of the page's two runs.
RUNS = {"none": "your loop", "sec": "with SEC"}


def profile_sizes(profile: str) -> dict:
    """The sizes of ``profile`` plus the glyphs the profile's runs train on (so their cache is already there):
    ``classes``, its number of training classes (None: all), and ``image_size``."""
    Choice(tuple(ex.PROFILE_NAMES)).check("profile", profile)
    sizes = dict(PROFILES.get(profile, PROFILES["cpu"]))
    base = ex.get_profile(profile).base
    sizes.update(classes=base.get("train_classes"), image_size=base.get("image_size", 32))
    return sizes


def _glyphs(sizes: Mapping):
    extra = {"max_classes": sizes["classes"]} if sizes["classes"] else {}
    return get_dataset("glyphs", "train", image_size=sizes["image_size"], **extra)


def make_loss(name: str, eta: float = 0.0) -> nn.Module:
    """The loss ``name`` of :data:`LOSSES`; with ``eta > 0``, SEC (``SECRegularizer(eta)``) as its embedding
    regularizer."""
    make = LOSSES[Choice(tuple(LOSSES)).check("loss", name)]
    return make(embedding_regularizer=SECRegularizer(eta=eta)) if eta > 0 else make()


def make_model(sizes: Mapping) -> nn.Module:
    """A small CNN for one-channel images whose output is the raw embedding (no normalisation): three conv blocks
    (conv, BatchNorm, ReLU, 2x2 max-pool), global average pooling, a linear layer."""
    w = sizes["width"]
    blocks = []
    for c_in, c_out in ((1, w), (w, 2 * w), (2 * w, 4 * w)):
        blocks += [nn.Conv2d(c_in, c_out, 3, padding=1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU(), nn.MaxPool2d(2)]
    return nn.Sequential(*blocks, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4 * w, sizes["embed_dim"]))


def glyph_batches(sizes: Mapping, seed: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """``sizes["steps"]`` batches of P x K training glyphs (the profile's training classes)."""
    ds = _glyphs(sizes)
    sampler = iter(PKSampler(ds.labels, p=sizes["p"], k=sizes["k"], seed=seed))
    for _ in range(sizes["steps"]):
        idx = torch.as_tensor(next(sampler))
        yield ds.x[idx], ds.labels[idx]


def data_sentence(sizes: Mapping, loss: str) -> str:
    """What the page's runs train on, in one sentence (read from the data and the sizes)."""
    ds = _glyphs(sizes)
    return (f"Data: {len(ds):,} training glyphs ({sizes['image_size']} px) of {ds.num_classes:,} classes, batches of {sizes['p']} classes × "
            f"{sizes['k']} instances; {sizes['steps']} Adam steps (learning rate {sizes['lr']:g}); loss: "
            f"pytorch-metric-learning's `{type(LOSSES[loss]()).__name__}`; the monitor records every "
            f"{sizes['every']} steps.")


def summary(frames: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """One row per run: the last recorded CV of the norms and the mean over recorded steps of the gradient slope,
    the Δθ high/low-norm ratio and the CV of Δθ (every number from the monitor's frames)."""
    rows = []
    for name, f in frames.items():
        last = f.dropna(subset=["norm_cv"]).iloc[-1]
        rows.append({"run": RUNS.get(name, name), "last step": int(last["step"]), "mean ‖f‖": last["norm_mean"],
                     "CV of ‖f‖": last["norm_cv"], "gradient slope": f["grad_slope"].mean(),
                     "Δθ high / low norm": f["dtheta_high_low"].mean(), "CV of Δθ": f["dtheta_cv"].mean(),
                     "recorded steps": len(f)})
    return pd.DataFrame(rows)


def comparison_sentence(frames: Mapping[str, pd.DataFrame]) -> str:
    """What the two runs' tables say side by side, in words (computed)."""
    s = summary(frames).set_index("run")
    a, b = s.loc[RUNS["none"]], s.loc[RUNS["sec"]]
    return (f"At step {int(a['last step'])} the CV of the norms was {a['CV of ‖f‖']:.3f} in your loop and "
            f"{b['CV of ‖f‖']:.3f} with SEC; averaged over the recorded steps, high-norm samples turned "
            f"{a['Δθ high / low norm']:.2f}× as far as low-norm ones without SEC and {b['Δθ high / low norm']:.2f}× "
            f"with it, and the gradient slope was {a['gradient slope']:.2f} and {b['gradient slope']:.2f}. One seed "
            "and one short run each: a description of these two runs, not an estimate of SEC's effect.")


# -- figures --------------------------------------------------------------------------------------------------------

@styled
def curves_figure(frames: Mapping[str, pd.DataFrame]):
    """Three panels over the recorded steps, one line per run: the CV of the norms; the gradient slope with its
    per-batch interval (band) and the −1 of Proposition 2; the Δθ ratio of high- to low-norm samples (1: balanced)."""
    fig, axes = subplots(1, 3, w=2.6, h=2.9)
    ax_cv, ax_slope, ax_turn = axes[0]
    for name, f in frames.items():
        color, label = VARIANT_COLORS[name], RUNS.get(name, name)
        g = f.dropna(subset=["norm_cv"])
        ax_cv.plot(g["step"], g["norm_cv"], color=color, label=label)
        g = f.dropna(subset=["grad_slope"])
        ax_slope.fill_between(g["step"], g["grad_slope_lo"], g["grad_slope_hi"], color=color, alpha=0.15, lw=0)
        ax_slope.plot(g["step"], g["grad_slope"], color=color, label=label)
        g = f.dropna(subset=["dtheta_high_low"])
        ax_turn.plot(g["step"], g["dtheta_high_low"], color=color, label=label)
    ax_slope.axhline(-1, color=REF_COLOR, ls=":", lw=1, label="−1 (Prop. 2)")
    ax_turn.axhline(1, color=REF_COLOR, ls=":", lw=1, label="1: balanced")
    ax_cv.set_ylim(bottom=0)
    for ax, title in ((ax_cv, "CV of the norms ‖f_i‖"), (ax_slope, "slope of log‖∂L/∂f‖ on log‖f‖"),
                      (ax_turn, "Δθ: high- / low-norm samples")):
        ax.set_title(title)
        ax.set_xlabel("step")
    ax_cv.legend(loc="best")
    ax_slope.legend(loc="best", handles=ax_slope.get_lines()[-1:])
    ax_turn.legend(loc="best", handles=ax_turn.get_lines()[-1:])
    return fig


@styled
def scatter_figure(samples: Mapping[str, pd.DataFrame]):
    """Per run, the last recorded step with gradients: each sample's ‖∂L/∂f_i‖ against ‖f_i‖ (log-log), the
    least-squares line and a line of slope −1 through the same centre."""
    fig, axes = subplots(1, len(samples), w=3.9, h=3.2)
    for ax, (name, s) in zip(axes[0], samples.items()):
        s = s.dropna(subset=["grad_norm"])
        s = s[(s["step"] == s["step"].max()) & (s["norm"] > 0) & (s["grad_norm"] > 0)]
        ax.scatter(s["norm"], s["grad_norm"], s=9, alpha=0.6, lw=0, color=VARIANT_COLORS[name])
        fit = loglog_fit(s["norm"], s["grad_norm"])
        if math.isfinite(fit.slope):
            lx = np.log(s["norm"].to_numpy(float))
            xx = np.linspace(lx.min(), lx.max(), 20)
            centre = fit.intercept + fit.slope * lx.mean()
            ax.plot(np.exp(xx), np.exp(fit.intercept + fit.slope * xx), color="k", lw=1.2,
                    label=f"fit: slope {fit.slope:+.2f}")
            ax.plot(np.exp(xx), np.exp(centre - (xx - lx.mean())), color=REF_COLOR, ls=":", lw=1, label="slope −1")
            ax.legend(loc="best")
        ax.set_xscale("log")
        ax.set_yscale("log")
        plain_log_ticks(ax, "xy")
        ax.set_xlabel("‖f_i‖ (raw embedding)")
        ax.set_ylabel("‖∂L_metric/∂f_i‖")
        ax.set_title(f"{RUNS.get(name, name)}, step {int(s['step'].max()) if len(s) else '–'}")
    return fig
