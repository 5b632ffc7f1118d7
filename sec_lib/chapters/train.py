"""The train page: one run of the main table (or any run the parameters name), read from the store,
with a computed sentence per instrument."""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd

from ..runs import experiments as ex
from ..losses import LOSS_NAMES, LOSS_SPECS
from ..params import Choice, Device, Mu, Number, OptionalParam, ParameterError
from ..report import loglog_fit
from ..runs.store import ResultStore, run_key
from ..runs.config import OPTIMIZERS, TrainConfig
from . import profile_param
from .common import LOSS_TITLES, runs_frame, var_cv_text, with_batch_cv, with_norm_cv
from .evidence import evidence_profile, page_of

#: The notebook's parameters (checked by ``sec_lib.params.notebook_params``).
PARAMS = {**profile_param(), "dataset": Choice(("glyphs", "toy")), "loss": Choice(tuple(LOSS_NAMES)),
          "variant": Choice(ex.VARIANTS), "eta": OptionalParam(Number(0, 1e6)), "mu": OptionalParam(Mu()),
          "optimizer": Choice(tuple(OPTIMIZERS)), "iterations": OptionalParam(Number(1, 10**8, True)),
          "seed": Number(0, 2**31 - 1, True), "device": OptionalParam(Device())}


def lr_profile(profile: ex.Profile, optimizer: str, store: ResultStore) -> ex.Profile:
    """The profile with the learning-rate pilot's choice for ``optimizer``, exactly as the sweeps
    build it (so a page's run has the same store key as the sweep's run). The pilot is read from
    ``store``; when it is missing the KeyError names the runner command that trains it."""
    pilot_opt = optimizer if optimizer in profile.lr_pilot else "adam"   # adamw: Adam's rate
    q = ex.tuned(profile, pilot_opt, store)
    if pilot_opt != optimizer:
        q = dataclasses.replace(q, base=dict(q.base, optimizer=optimizer))
    return q


def train_page_config(profile: str, dataset: str = "glyphs", loss: str = "semihard", variant: str = "none",
                      eta=None, mu=None, optimizer: str = "adam", iterations=None, seed: int = 0, device=None,
                      root=None):
    """The TrainConfig of the train page.

    Glyph runs are built with :func:`sec_lib.runs.experiments.config` on the pilot-tuned profile, as the
    main table's sweep builds them, so with the defaults (eta, mu, iterations, device = None,
    optimizer 'adam') the page shows *the same run* as the main table (same store key). Toy runs use
    the profile's ``toy`` settings. ``eta`` / ``mu`` override the variant's regulariser (variant
    'none' takes neither); ``iterations`` / ``device`` override the profile's.
    ``root``: the result store holding the learning-rate pilot (default: ``$SEC_RUNS_DIR`` or
    ``data/runs``); without the pilot this raises a KeyError naming the runner command.
    """
    p = ex.get_profile(profile)
    Choice(("glyphs", "toy")).check("dataset", dataset)
    Choice(ex.VARIANTS).check("variant", variant)
    Choice(OPTIMIZERS).check("optimizer", optimizer)
    if variant == "none" and ((eta is not None and eta != 0) or mu is not None):
        raise ParameterError(f"variant 'none' has no regulariser: eta must be None or 0 and mu None "
                             f"(got eta={eta!r}, mu={mu!r}); choose variant 'sec' or 'l2reg' to set them")
    if variant == "l2reg" and mu is not None and mu != "zero":
        raise ParameterError(f"parameter 'mu' = {mu!r} is not valid with variant 'l2reg' (μ = 0); "
                             "valid values: None or 'zero' (use variant 'sec' for other targets)")
    changes = {}
    if eta is not None:
        changes["eta"] = Number(0, math.inf).check("eta", eta)
    if mu is not None:
        changes["mu"] = Mu().check("mu", mu)
    if iterations is not None:
        changes["iterations"] = Number(1, 10**8, True).check("iterations", iterations)
    if device is not None:
        changes["device"] = Device().check("device", device)      # before the pilot trains anything
    if dataset == "glyphs":
        q = lr_profile(p, optimizer, ResultStore(root))
        cfg = ex.config(q, loss, variant, seed, **changes)
    else:
        base = ex.with_variant(dict(p.toy, loss=loss, seed=seed, optimizer=optimizer), loss, variant, **changes)
        base["batch_size"] = base["batch_size"] // LOSS_SPECS[loss].k * LOSS_SPECS[loss].k   # P x K for this loss
        cfg = TrainConfig(**base)
    return cfg.validate()


def run_header(result, stored: bool, profile: str, root=None) -> str:
    """A computed opening line for the train page: what ran, whether it was loaded or trained, and
    whether it is one of the main table's runs."""
    cfg = result.config
    reg = {"none": "no regulariser", "l2reg": f"L2-reg, η = {cfg.eta:g} (μ = 0)",
           "sec": f"SEC, η = {cfg.eta:g}, μ = batch mean"}.get(cfg.variant, f"η = {cfg.eta:g}, μ = {cfg.mu}")
    how = "loaded from the result store" if stored else "trained just now and stored"
    main = is_main_table_run(cfg, profile, root)
    return (f"**{cfg.loss} loss, {reg}**, {cfg.optimizer} (lr {cfg.lr:g}), {cfg.iterations} iterations, seed "
            f"{cfg.seed}, on {cfg.dataset} ({cfg.model}, {cfg.embed_dim}-d embedding). The run was {how}; it took "
            f"{result.wall_s:.0f} s and its status is **{result.failure or result.status}**. It "
            + ("is" if main else "is not") + f" one of the {profile} profile's main-table runs"
            + (f" (the quick tier that `make book` trains; the compare page shows the {_shown(profile, root)} tier's "
               "runs, which may be longer and have more seeds)." if _shown(profile, root) != profile else ")."))


def _shown(profile: str, root=None) -> str:
    """The tier the compare page shows for ``profile``."""
    try:
        return evidence_profile(profile, page_of("compare").evidence_sweeps, root)
    except (KeyError, ValueError):
        return profile


def run_title(cfg) -> str:
    """The page title of one run: loss, variant (with its η) and seed, e.g.
    'Run: Semihard triplet, SEC (η = 0.5), seed 0'."""
    variant = {"none": "no regularizer", "l2reg": f"L2-reg (η = {cfg.eta:g}, μ = 0)",
               "sec": f"SEC (η = {cfg.eta:g})"}.get(cfg.variant, f"{cfg.variant} (η = {cfg.eta:g})")
    return f"Run: {LOSS_TITLES.get(cfg.loss, cfg.loss)}, {variant}, seed {cfg.seed}"


def is_main_table_run(cfg, profile: str, root=None) -> bool:
    """Whether ``cfg`` is one of the main table's runs of ``profile`` (the label the main table's configs are
    made with, :func:`sec_lib.runs.experiments.is_main_table_run`)."""
    return ex.is_main_table_run(cfg, profile, ResultStore(root))


def config_table(cfg) -> pd.DataFrame:
    """The run's configuration as a two-column table (setting, value)."""
    d = cfg.to_dict()
    rows = [{"setting": k, "value": str(v)} for k, v in d.items()]
    rows.append({"setting": "variant", "value": cfg.variant})
    rows.append({"setting": "store key", "value": run_key(cfg)})
    return pd.DataFrame(rows)


def _factor(a: float, b: float) -> str:
    if not (np.isfinite(a) and np.isfinite(b)) or min(abs(a), abs(b)) == 0:
        return "n/a"
    return f"{max(a, b) / min(a, b):.3g}×"


def run_readings(result) -> dict:
    """One computed sentence per instrument of a run (keys: loss, tracked, mean_norm, norm_var, grad,
    slope, dtheta, cosines, violations, evals). Sentences describe the numbers; they judge nothing."""
    st, out = result.steps, {}
    if len(st) == 0:
        note = f"No steps were recorded (the run {result.failure})." if result.failure else "No steps were recorded."
        return {k: note for k in
                ("loss", "tracked", "mean_norm", "norm_var", "grad", "slope", "dtheta", "cosines", "violations", "evals")}
    k = max(1, len(st) // 10)
    head, tail = st.iloc[:k], st.iloc[-k:]
    steps_word = "step" if k == 1 else f"{k} steps"
    l0, l1 = head["loss_metric"].mean(), tail["loss_metric"].mean()
    out["loss"] = (f"The metric loss {'fell' if l1 < l0 else 'rose'} from {l0:.3g} (first {steps_word}) to "
                   f"{l1:.3g} (last {steps_word})"
                   + (f"; the weighted regulariser ended at {tail['loss_sec'].mean():.3g}."
                      if (st['loss_sec'].fillna(0) != 0).any() else "; this run has no regulariser."))
    tr = result.tracked
    if len(tr):
        a = tr[tr["step"] == tr["step"].min()]["norm"]
        b = tr[tr["step"] == tr["step"].max()]["norm"]
        out["tracked"] = (f"At step {int(tr['step'].min())} the tracked samples' norms span {a.min():.3g}–{a.max():.3g} "
                          f"(max/min {_factor(a.min(), a.max())}); at step {int(tr['step'].max())} they span "
                          f"{b.min():.3g}–{b.max():.3g} (max/min {_factor(b.min(), b.max())}).")
    else:
        out["tracked"] = "No samples were tracked in this run."
    if "norm_mean" in st:
        mu = st["mu"].dropna() if "mu" in st else pd.Series(dtype=float)
        out["mean_norm"] = (f"The batch mean norm went from {head['norm_mean'].mean():.3g} to "
                            f"{tail['norm_mean'].mean():.3g} (first vs last {steps_word})"
                            + (f"; μ tracked it, ending at {mu.iloc[-1]:.3g}." if len(mu) else "."))
        out["norm_var"] = (f"The within-batch norm variance went from {head['norm_var'].mean():.3g} to "
                           f"{tail['norm_var'].mean():.3g} ({'down' if tail['norm_var'].mean() < head['norm_var'].mean() else 'up'}"
                           f" by {_factor(head['norm_var'].mean(), tail['norm_var'].mean())}, first vs last {steps_word}).")
        cv = with_batch_cv(st)
        if "norm_cv" in cv.columns and cv["norm_cv"].notna().any():
            c0, c1 = cv["norm_cv"].iloc[:k].mean(), cv["norm_cv"].iloc[-k:].mean()
            out["norm_var"] += (f" Beside it, the scale-free spread of the same norms, their CV (std / mean), went from "
                                f"{c0:.3g} to {c1:.3g} ({'down' if c1 < c0 else 'up'} by {_factor(c0, c1)}): the "
                                "variance also falls when the norms merely shrink, the CV does not.")
    gs = result.grad_scatter
    if len(gs):
        fits = [(int(s_), loglog_fit(d["norm"], d["grad_norm"]).slope) for s_, d in gs.groupby("step")]
        out["grad"] = ("Fitted log-log slopes of ‖∂L/∂f_i‖ on ‖f_i‖: "
                       + ", ".join(f"{sl:+.2f} at step {s_}" for s_, sl in fits)
                       + " (−1 would mean the norm alone sets the gradient size).")
    else:
        out["grad"] = "No per-sample gradients were kept in this run."
    sl = st["grad_slope"].dropna() if "grad_slope" in st else pd.Series(dtype=float)
    out["slope"] = (f"Over all steps the per-batch slope has median {sl.median():+.2f} (interquartile range "
                    f"{sl.quantile(0.25):+.2f} to {sl.quantile(0.75):+.2f})." if len(sl) else "No slopes were recorded.")
    dt = st.dropna(subset=["dtheta_mean"]) if "dtheta_mean" in st else st.iloc[:0]
    if len(dt):
        out["dtheta"] = (f"A sample turned on average {np.degrees(dt['dtheta_mean'].mean()):.3g}° per update; the "
                         f"spread across the batch (CV) averaged {dt['dtheta_cv'].mean():.2f} over the run, "
                         f"{dt['dtheta_cv'].iloc[: max(1, len(dt) // 10)].mean():.2f} at the start and "
                         f"{dt['dtheta_cv'].iloc[-max(1, len(dt) // 10):].mean():.2f} at the end.")
    else:
        out["dtheta"] = "No angle changes were recorded."
    cs = result.cosines
    if len(cs):
        pos, neg = cs[cs["kind"] == "pos"]["cos"], cs[cs["kind"] == "neg"]["cos"]
        out["cosines"] = (f"On the test classes, positive pairs have mean cosine {pos.mean():.2f} and negative pairs "
                          f"{neg.mean():.2f} (gap {pos.mean() - neg.mean():.2f}).")
    else:
        out["cosines"] = "No test cosines (the run did not finish)."
    out["violations"] = (f"Violating triplets: {head['violations'].mean():.3f} of the batch's triplets at the start, "
                         f"{tail['violations'].mean():.3f} at the end." if "violations" in st else
                         "No violations were recorded.")
    ev = result.evals
    if len(ev) and "R@1" in ev:
        best = ev.loc[ev["R@1"].idxmax()]
        out["evals"] = (f"Test R@1 went from {ev['R@1'].iloc[0]:.2f} % at step {int(ev['step'].iloc[0])} to "
                        f"{ev['R@1'].iloc[-1]:.2f} % at step {int(ev['step'].iloc[-1])} (best {best['R@1']:.2f} % "
                        f"at step {int(best['step'])}).")
    else:
        out["evals"] = "No test evaluations were recorded."
    return out


_RUN_METRICS = ("R@1", "R@2", "R@4", "R@8", "NMI", "F1", "MAP@R", "test_norm_mean", "test_norm_var", "test_norm_cv",
                "train_norm_mean", "train_norm_var", "train_norm_cv", "mean_step_time")


def final_metrics(result) -> pd.DataFrame:
    """The final numbers of one run (a RunResult, or a Frames/runs frame with one run) as a
    two-column table: metric, value; each norm variance with its CV (std / mean) in the next row
    (:func:`~sec_lib.chapters.common.with_norm_cv`)."""
    if hasattr(result, "metrics") and hasattr(result, "config"):
        metrics = dict(result.metrics)
        metrics.update(with_norm_cv(pd.DataFrame([metrics])).iloc[0].to_dict() if metrics else {})
        wall = result.wall_s
    else:
        runs_frame(result)
        runs = with_norm_cv(result)
        if len(runs) != 1:
            raise ValueError(f"final_metrics needs exactly one run, got {len(runs)}")
        metrics = runs.iloc[0].to_dict()
        wall = metrics.get("wall_s", math.nan)
    rows = [{"metric": m, "value": float(metrics[m])} for m in _RUN_METRICS if m in metrics
            and metrics[m] is not None and not (isinstance(metrics[m], float) and math.isnan(metrics[m]))]
    rows.append({"metric": "wall_s", "value": float(wall)})
    if getattr(result, "failed_step", None) is not None:        # a failed run: where it stopped
        rows.append({"metric": "failed at step", "value": float(result.failed_step)})
    return pd.DataFrame(rows)


def run_sentence(result) -> str:
    """A computed one-paragraph reading of one run (status, R@1, the norm spread, SEC's μ)."""
    cfg = result.config
    if result.status != "done":
        return (f"This run ({cfg.loss}, variant {cfg.variant}) **{result.failure}**. The failure is part of "
                "the result; the instruments below show the steps before it.")
    m, st = result.metrics, result.steps
    out = [f"After {cfg.iterations} iterations, {cfg.loss} with variant **{cfg.variant}** reaches R@1 = "
           f"{m.get('R@1', math.nan):.2f} % on the {cfg.dataset} test classes (never seen in training)."]
    if len(st) and "norm_var" in st and st["norm_var"].notna().any():
        # the same window as the page's readings (run_readings): the mean of the first and of the last tenth of the
        # logged steps, so that the two never disagree on a direction one noisy batch set
        k = max(1, len(st) // 10)
        steps_word = "step" if k == 1 else f"{k} steps"
        first, last = st["norm_var"].iloc[:k].mean(), st["norm_var"].iloc[-k:].mean()
        nm0, nm1 = st["norm_mean"].iloc[:k].mean(), st["norm_mean"].iloc[-k:].mean()
        cv = with_batch_cv(st)
        c0, c1 = ((cv["norm_cv"].iloc[:k].mean(), cv["norm_cv"].iloc[-k:].mean()) if "norm_cv" in cv.columns
                  else (math.nan, math.nan))
        out.append(f"Over the first and the last {steps_word}, the batch mean norm went from {nm0:.3g} to {nm1:.3g} "
                   f"and the batch norms' {var_cv_text(first, last, c0, c1)}, the variance "
                   f"{'down' if last < first else 'up'} by a factor {max(first, last) / max(min(first, last), 1e-12):.3g}.")
    if "grad_slope" in st and st["grad_slope"].notna().any():
        out.append(f"The median log-log slope of ‖∂L/∂f‖ against ‖f‖ within a batch is "
                   f"{st['grad_slope'].median():.2f} (theory: −1 at a fixed direction).")
    return " ".join(out)
