"""What each sweep trains, sweep by sweep: a run of a profile (:func:`config`, the one rule from a
variant to η and μ in :func:`with_variant`), the selections that fix a profile's learning rate, run length and η
(:func:`chosen_lr`, :func:`chosen_iterations`, :func:`chosen_eta`), and one function per sweep that names its runs.

Nothing here opens a default store or trains; a missing pilot or selection run is a KeyError that says which runner
command makes it. The registry that maps a chapter to its sweep (``SWEEPS``), and every profile by name
(``get_profile``), are in :mod:`sec_lib.runs.experiments`, which re-exports this module: the modules of
``sec_lib.runs`` below the registry (the staged decisive tier, its pilot, selection and main stage, the fine-tuning
and scale arms) import this one, so that none of them imports the registry back.
"""
from __future__ import annotations

import dataclasses

import pandas as pd

from ..losses import LOSS_SPECS
from ..params import Choice
from .config import RunResult, TrainConfig, run_key
from .profiles import (  # noqa: F401 - re-exported: the modules below the registry read them here
    MAIN_LOSSES, VARIANTS, GLYPH_PROFILES, BENCHMARK_PROFILES, PROFILE_NAMES, ETA_SEC, EXTRA_LOSSES, ETA_L2,
    SSL_LOSSES, NPAIR_VARIANTS, FACE_LOSSES, REVIEW_LOSSES, LOSS_SETTINGS, Profile, PROFILES, glyph_profile)


def with_variant(base: dict, loss: str, variant: str = "none", **changes) -> dict:
    """The one rule from a variant to (η, μ, momentum): ``base`` (TrainConfig fields) with the
    variant's regulariser for ``loss`` (sec: η = ETA_SEC[loss], μ = batch mean; l2reg: η = ETA_L2,
    μ = 0; none: no regulariser), then ``changes``. Without SEC (η = 0) the μ settings are
    irrelevant and are reset, so a run has one store key."""
    Choice(VARIANTS).check("variant", variant)
    out = dict(base)
    if variant == "sec":
        out.update(eta=ETA_SEC.get(loss, 1.0), mu="batch")
    elif variant == "l2reg":
        out.update(eta=ETA_L2, mu="zero")
    out.update(changes)
    if out.get("eta", 0) == 0:
        out.update(eta=0.0, mu="batch", momentum=1.0)
        out.pop("relative", None)
        out.pop("penalty", None)
    return out


def config(profile: Profile, loss: str, variant: str = "none", seed: int = 0, **changes) -> TrainConfig:
    """A run of ``profile`` for ``loss`` in one of the paper's variants (none / l2reg / sec),
    with the loss's :data:`LOSS_SETTINGS` (NT-Xent: two views). A run under the profile's
    ``fixed_optimizer`` takes that loss's ``loss_base`` settings (the paper's rates per loss) over ``base``."""
    settings = dict(profile.base, loss=loss, seed=seed)
    if profile.loss_base and changes.get("optimizer", settings.get("optimizer", "adam")) == profile.fixed_optimizer:
        settings.update(profile.loss_base.get(loss, {}))
    base = with_variant(settings, loss, variant, **{**LOSS_SETTINGS.get(loss, {}), **changes})
    if not base.get("views"):             # P x K: the profile's batch rounded down to this loss's K
        k = base.get("batch_k") or LOSS_SPECS[loss].k
        base["batch_size"] = base.get("batch_size", 60) // k * k
    return TrainConfig(**base)


def stored_runs(store, configs, what: str, profile: Profile) -> list:
    """The stored results of ``configs``; KeyError naming the runner command when one is missing."""
    runs = [store.get(c, tables=("evals",)) for c in configs]     # metrics and evaluations only
    missing = sum(r is None for r in runs)
    if missing:
        raise KeyError(f"{what} of profile {profile.name!r} is not in the result store {store.root} "
                       f"({missing} of {len(runs)} runs missing); run `python -m sec_lib.book run --profile "
                       f"{profile.name} --only PAGE` first (PAGE: the page you are building, e.g. compare)")
    return runs


# -- chapter sweeps -------------------------------------------------------------------------------

class SelectionError(ValueError):
    """A pre-registered choice cannot be made from its pilot (it would not be a fair choice)."""


def held_out(profile: Profile, **changes) -> dict:
    """Settings of a selection run: held-out training classes and the pilot seed, never the test classes."""
    return dict(holdout_classes=profile.holdout_classes, **changes)


def lr_pilot(profile: Profile) -> list[TrainConfig]:
    """Learning-rate pilot on held-out training classes, with a seed that no reported run uses:
    semihard without SEC for every optimizer of the grid, and SGD with SEC at the paper's η (the
    Adam-vs-SGD chapter trains SGD with and without SEC, each at its own rate). Profiles with a
    ``pilot_iterations`` train the pilot that long and choose the run length from its curve."""
    long = dict(iterations=profile.pilot_iterations, eval_every=profile.pilot_eval_every) \
        if profile.pilot_iterations else {}
    out = [config(profile, "semihard", "none", profile.pilot_seed, **held_out(profile, optimizer=opt, lr=lr, **long))
           for opt, lrs in profile.lr_pilot.items() for lr in lrs]
    out += [config(profile, "semihard", "sec", profile.pilot_seed, **held_out(profile, optimizer="sgd", lr=lr, **long))
            for lr in profile.lr_pilot.get("sgd", ())]
    return out


def pilot_configs(profile: Profile, sweeps) -> list[TrainConfig]:
    """The pilot runs ``sweeps`` need: all of :func:`lr_pilot`; for a profile with a ``fixed_optimizer``
    (the paper's Adam rates) only when the optimizer chapter, whose SGD arm uses the pilot, is among them."""
    return lr_pilot(profile) if not profile.fixed_optimizer or "optim" in sweeps else []


def best_setting(cands):
    """The candidate with the best score; ties go to the smaller setting. ``cands``: (score, setting)."""
    return max(cands, key=lambda c: (c[0], -c[1]))[1]


def run_score(r, metric: str = "R@1") -> float:
    return r.metrics.get(metric, float("-inf")) if r.status == "done" else float("-inf")


def chosen_lr(profile: Profile, optimizer: str, pilot_runs, sec: bool = False) -> float:
    """The pilot's learning rate with the best held-out R@1 for ``optimizer`` (ties: the smaller rate);
    ``sec``: the SGD-with-SEC arm of the pilot. ``pilot_runs``: RunResults of :func:`lr_pilot`.

    Raises :class:`SelectionError` when the best rate sits at either edge of a grid of 3 or more
    rates (the grid does not bracket the optimum), unless the profile turns that check off."""
    runs = [r for r in pilot_runs if r is not None and r.config.optimizer == optimizer
            and (r.config.eta > 0) == sec]
    if not runs:
        raise ValueError(f"no pilot runs for optimizer {optimizer!r}" + (" with SEC" if sec else ""))
    lr = best_setting([(run_score(r), r.config.lr) for r in runs])
    grid = sorted(r.config.lr for r in runs)
    if profile.check_grid_edges and len(grid) >= 3 and lr in (grid[0], grid[-1]):
        edge = "smallest" if lr == grid[0] else "largest"
        raise SelectionError(
            f"profile {profile.name!r}: the learning-rate pilot for {optimizer}{' + SEC' if sec else ''} chose "
            f"lr = {lr:g}, the {edge} rate of its grid {tuple(grid)}; the grid does not bracket the optimum. "
            f"Widen Profile.lr_pilot[{optimizer!r}] in sec_lib/runs/experiments.py and run again.")
    return lr


def curve(run, metric: str = "R@1") -> "list[tuple[int, float]]":
    """(step, value) of a run's periodic evaluations."""
    ev = run.evals
    return [(int(s), float(v)) for s, v in zip(ev["step"], ev[metric])] if metric in ev else []


def smoothed(points: "dict[int, float]", window: int) -> "dict[int, float]":
    """Trailing mean over the last ``window`` evaluations (fewer at the start of the curve)."""
    steps = sorted(points)
    return {s: sum(points[t] for t in steps[max(0, i - window + 1):i + 1]) / len(steps[max(0, i - window + 1):i + 1])
            for i, s in enumerate(steps)}


def chosen_iterations(profile: Profile, pilot_runs) -> int:
    """The run length: the shortest candidate T of ``iteration_grid`` at which the chosen-rate Adam
    pilot's held-out R@1 curve has flattened, i.e. gained less than ``plateau_gain`` points from
    0.75·T to T. The curve is first smoothed by a trailing mean over ``plateau_window``
    evaluations: a single noisy evaluation must not decide the length. Profiles without an
    iteration grid keep their base length."""
    if not profile.iteration_grid:
        return profile.base["iterations"]
    lr = chosen_lr(profile, "adam", pilot_runs)
    run = next(r for r in pilot_runs if r is not None and r.config.optimizer == "adam"
               and r.config.eta == 0 and r.config.lr == lr)
    pts = smoothed(dict(curve(run)), profile.plateau_window)
    for t in sorted(profile.iteration_grid):
        before = max((s for s in pts if s <= 0.75 * t), default=None)
        if t in pts and before is not None and pts[t] - pts[before] < profile.plateau_gain:
            return t
    raise SelectionError(
        f"profile {profile.name!r}: the pilot's held-out R@1 (lr {lr:g}) still gains {profile.plateau_gain} points "
        f"or more over the last quarter at every candidate length {profile.iteration_grid}; lengthen the pilot")


def pilot_runs(profile: Profile, store, optimizer: str, sec: bool = False) -> list:
    """The pilot's runs a choice for ``optimizer`` needs (that arm, and Adam's for the run length)."""
    need = [c for c in lr_pilot(profile) if (c.optimizer, c.eta > 0) in {(optimizer, sec), ("adam", False)}]
    what = f"the learning-rate pilot ({optimizer}{' + SEC' if sec else ''})"
    return stored_runs(store, need, what, profile)


def tuned(profile: Profile, optimizer: str, store, sec: bool = False) -> Profile:
    """The profile with the pilot's choices in its base config: the learning rate for ``optimizer``
    (with SEC: the SGD + SEC arm) and the run length. ``store`` holds the pilot's runs. The profile's
    ``fixed_optimizer`` has no pilot: its settings are the profile's own (the paper's), unchanged."""
    if optimizer == profile.fixed_optimizer:
        return profile
    if profile.fixed_choices:                  # a rate chosen by a selection of its own (the decisive tier)
        lr = fixed_choice(profile, "lr", f"{optimizer}+sec" if sec else optimizer)
        return dataclasses.replace(profile, base=dict(profile.base, optimizer=optimizer, lr=lr))
    runs = pilot_runs(profile, store, optimizer, sec)
    base = dict(profile.base, optimizer=optimizer, lr=chosen_lr(profile, optimizer, runs, sec),
                iterations=chosen_iterations(profile, runs))
    return dataclasses.replace(profile, base=base)


def eta_selection(p: Profile, store=None) -> list[TrainConfig]:
    """Choosing η and the L2-reg weight without the test classes: every loss at every η of the
    grid (and every L2 weight), trained on the training classes minus ``holdout_classes`` and
    evaluated on those held-out classes, with the pilot seed. ``p``: the tuned profile."""
    etas = [config(p, loss, "sec", p.pilot_seed, **held_out(p, eta=eta))
            for loss in (*MAIN_LOSSES, *EXTRA_LOSSES) for eta in (0.0, *p.eta_grid)]
    l2 = [config(p, loss, "l2reg", p.pilot_seed, **held_out(p, eta=w))
          for loss in (*MAIN_LOSSES, *EXTRA_LOSSES) for w in p.l2_etas] if p.main_seeds else []
    review = [config(p, loss, "sec", p.pilot_seed, **held_out(p, eta=eta))
              for loss in REVIEW_LOSSES for eta in (p.review_eta_grid or p.eta_grid)]
    return [c for c in etas + l2 + review + relative_selection(p) if c.loss not in p.excluded_losses]


def relative_selection(p: Profile) -> list[TrainConfig]:
    """Relative SEC's own η selection (the scale chapter): every main loss at every η of
    ``relative_eta_grid``, on the held-out classes with the pilot seed, like :func:`eta_selection`, whose η = 0
    runs are its baseline. Trained in the selection wave; :func:`stored_selection` leaves these runs out, so the
    pages of the plain η selection never wait for them."""
    return [config(p, loss, "sec", p.pilot_seed, **held_out(p, eta=eta, relative=True))
            for loss in MAIN_LOSSES for eta in p.relative_eta_grid]


def selection_runs(p: Profile, store, losses=None) -> list:
    """The stored η / L2-weight selection runs (:func:`eta_selection` at the pilot's choices);
    ``losses``: only those losses' runs (None: every loss of the selection)."""
    return stored_selection(tuned(p, "adam", store), store, losses)


def stored_selection(q: Profile, store, losses=(*MAIN_LOSSES, *EXTRA_LOSSES)) -> list:
    """The selection runs of the already tuned profile ``q`` for ``losses`` (default: the paper's
    four, tuplet margin and CosFace, so the pages of those runs never wait for the review losses'
    selection; None: all). A profile with ``fixed_choices`` (its weights chosen by a selection of its own) reads
    none."""
    if q.fixed_choices:
        return []
    need = [c for c in eta_selection(q) if (losses is None or c.loss in losses) and not c.relative]
    return stored_runs(store, need, "the η selection", q)


#: What a profile's ``fixed_choices`` hold, by kind.
FIXED_KINDS = {"sec": "η", "zero": "L2 weight", "relative": "relative SEC's η", "radius": "fixed-scale radius",
               "lr": "learning rate"}


def fixed_choice(profile: Profile, kind: str, name: str) -> float:
    """The weight (or rate, or radius) ``profile`` fixed for ``(kind, name)`` (:data:`FIXED_KINDS`); KeyError while
    that choice has not been made (its held-out selection has not trained yet)."""
    if (kind, name) not in profile.fixed_choices:
        raise KeyError(f"profile {profile.name!r} has no held-out choice of the {FIXED_KINDS[kind]} for {name!r} yet "
                       "(`make decisive` makes it after the main comparison)")
    return float(profile.fixed_choices[(kind, name)])


def chosen_eta(profile: Profile, loss: str, selection_runs, mu: str = "batch") -> float:
    """The nonzero weight of the grid with the best held-out R@1 for ``loss`` (ties: the smaller);
    ``mu='zero'``: the L2-reg weight. ``selection_runs``: RunResults of :func:`eta_selection`. A profile with
    ``fixed_choices`` gives its fixed weight (KeyError while that loss's selection has not been made)."""
    if profile.fixed_choices:
        return fixed_choice(profile, "zero" if mu == "zero" else "sec", loss)
    cands = [(run_score(r), r.config.eta) for r in selection_runs
             if r is not None and r.config.loss == loss and r.config.eta > 0 and r.config.mu == mu
             and not r.config.relative]
    if not cands:
        raise ValueError(f"no η selection runs for loss {loss!r} (mu={mu!r})")
    return best_setting(cands)


def tuned_sec_runs(p: Profile, store) -> list[tuple[TrainConfig, dict]]:
    """The main table's SEC cells again, at the η chosen on held-out classes (plus the none baseline), each with
    its ``eta_arm`` label: 'selected' for SEC, '' for the baseline."""
    sel = stored_selection(p, store)
    seeds = table_seeds(p)
    return [(config(p, loss, "sec", s, eta=chosen_eta(p, loss, sel)), {"eta_arm": "selected"})
            for loss in MAIN_LOSSES for s in seeds] + \
        [(config(p, loss, "none", s), {"eta_arm": ""}) for loss in MAIN_LOSSES for s in seeds]


def tuned_sec(p: Profile, store) -> list[TrainConfig]:
    return [c for c, _ in tuned_sec_runs(p, store)]


def beyond_runs(p: Profile, store) -> list[tuple[TrainConfig, dict]]:
    """Tuplet margin and CosFace, each run with its ``eta_arm`` label: without a regularizer ('') and with SEC at
    the η chosen on held-out classes ('selected'), over ``floor_seeds`` (else the table's seeds). A profile with a
    main comparison (``main_seeds``) adds that comparison's other two arms over the same seeds: L2-reg at its
    selected weight ('') and SEC at the paper's η ('paper'; left out where it is the selected η's run)."""
    sel = stored_selection(p, store)
    seeds = p.floor_seeds or table_seeds(p)
    out = [(config(p, loss, "none", s), {"eta_arm": ""}) for loss in EXTRA_LOSSES for s in seeds]
    selected = [(config(p, loss, "sec", s, eta=chosen_eta(p, loss, sel)), {"eta_arm": "selected"})
                for loss in EXTRA_LOSSES for s in seeds]
    if p.main_seeds:
        out += [(config(p, loss, "l2reg", s, eta=chosen_eta(p, loss, sel, "zero")), {"eta_arm": ""})
                for loss in EXTRA_LOSSES for s in seeds]
        taken = {run_key(c) for c, _ in selected}
        out += [(c, {"eta_arm": "paper"}) for c in (config(p, loss, "sec", s) for loss in EXTRA_LOSSES for s in seeds)
                if run_key(c) not in taken]
    return out + selected


def beyond(p: Profile, store) -> list[TrainConfig]:
    """Tuplet margin and CosFace, without and with SEC (η chosen on held-out classes), and in a profile with a main
    comparison also L2-reg and SEC at the paper's η (:func:`beyond_runs`)."""
    return [c for c, _ in beyond_runs(p, store)]


def main_comparison(p: Profile, store) -> list[TrainConfig]:
    """The main comparison of profiles with ``main_seeds``: every main loss plus tuplet margin and
    CosFace × {none, L2-reg at its selected weight, SEC at the selected η, SEC at the paper's η}."""
    if not p.main_seeds:
        return []
    sel = stored_selection(p, store)
    floor = p.floor_seeds or p.main_seeds
    out = []
    for loss in (*MAIN_LOSSES, *EXTRA_LOSSES):
        primary = p.main_seeds if loss in MAIN_LOSSES else floor      # none and SEC at the selected η
        for s in dict.fromkeys((*primary, *floor)):
            arms = [("none", {}, primary), ("l2reg", {"eta": chosen_eta(p, loss, sel, "zero")}, floor),
                    ("sec", {"eta": chosen_eta(p, loss, sel)}, primary), ("sec", {}, floor)]
            out += [config(p, loss, v, s, **ch) for v, ch, seeds in arms if s in seeds]
    return out


def table_seeds(p: Profile) -> tuple:
    """The seeds of the main table and of the chapters that reuse its runs: ``main_seeds`` where the
    profile has a main comparison, else ``seeds``."""
    return p.main_seeds or p.seeds


def main_table_runs(p: Profile, store=None) -> list[tuple[TrainConfig, dict]]:
    """:func:`main_table`'s runs, each labelled as one of the main table's (``main_table``), with its ``eta_arm``:
    'paper' for SEC (the paper's η, :data:`ETA_SEC`), '' for the other variants."""
    return [(c, {"main_table": True, "eta_arm": "paper" if c.variant == "sec" else ""}) for c in main_table(p, store)]


def main_table(p: Profile, store=None) -> list[TrainConfig]:
    """The paper's four losses × {none, L2-reg, SEC at the paper's η}. In a profile with a main
    comparison (``main_seeds``), these are that comparison's runs: its seeds, and L2-reg at the weight
    selected on held-out classes (so the main table, norms, convergence and instability pages train
    nothing new); otherwise ``seeds`` and L2-reg at ``ETA_L2``. A profile with ``floor_seeds`` (the decisive tier)
    trains L2-reg and SEC at the paper's η over those, the arm without a regularizer over ``main_seeds``."""
    if not p.main_seeds:
        return [config(p, loss, v, s) for loss in MAIN_LOSSES for v in VARIANTS for s in p.seeds]
    sel = stored_selection(p, store)
    floor = p.floor_seeds or p.main_seeds                   # L2-reg and SEC at the paper's η: the secondary arms
    return [config(p, loss, v, s, **({"eta": chosen_eta(p, loss, sel, "zero")} if v == "l2reg" else {}))
            for loss in MAIN_LOSSES for v in VARIANTS for s in (p.main_seeds if v == "none" else floor)]


def early_twin(p: Profile, cfg: TrainConfig) -> TrainConfig:
    """``cfg`` stopped at ``p.early_iterations`` and evaluated every ``p.early_eval_every`` iterations.

    Under a constant learning rate the prefix retraces the first iterations of ``cfg`` exactly (evaluation
    draws no random numbers; tests/runs/test_train.py), so its dense evaluations are ``cfg``'s own early
    curve. So does a step schedule whose first milestone comes after the prefix (the rate is constant until
    then), and a cosine schedule whose horizon stays the full run's (``schedule_iterations``: the prefix follows
    the full run's rates; the decisive tier's shape, :mod:`sec_lib.runs.pilot`). Raises ValueError for a step
    schedule with a milestone inside the prefix, or a prefix not shorter than the run."""
    if cfg.schedule == "step" and cfg.lr_milestones and min(cfg.lr_milestones) <= p.early_iterations:
        raise ValueError(f"early_twin needs the first lr milestone after the prefix: {min(cfg.lr_milestones)} <= "
                         f"early_iterations = {p.early_iterations} (the prefix would be another run)")
    if not 0 < p.early_iterations < cfg.iterations:
        raise ValueError(f"early_iterations = {p.early_iterations} must be in (0, {cfg.iterations}) "
                         f"(the run's length) for profile {p.name!r}")
    horizon = {"schedule_iterations": cfg.schedule_iterations or cfg.iterations} if cfg.schedule == "cosine" else {}
    return dataclasses.replace(cfg, iterations=p.early_iterations, eval_every=p.early_eval_every, **horizon)


def convergence(p: Profile, store=None) -> list[TrainConfig]:
    """The main table's runs, and, where the profile sets ``early_iterations`` below the run length,
    the dense-early prefix (:func:`early_twin`) of each run without and with SEC over the profile's
    ``seeds`` (a run length the pilot might choose at or under ``early_iterations`` gets none)."""
    out = main_table(p, store)
    if 0 < p.early_iterations < p.base["iterations"]:
        out += [early_twin(p, config(p, loss, v, s)) for loss in MAIN_LOSSES for v in ("none", "sec")
                for s in p.seeds]
    return out


def eta_sweep(p: Profile, store=None) -> list[TrainConfig]:
    return [config(p, loss, "sec", s, eta=eta) for loss in MAIN_LOSSES for eta in (0.0, *p.eta_grid)
            for s in (p.sweep_seeds or p.seeds)]


def with_and_without_sec(p: Profile, store, losses) -> list[TrainConfig]:
    """``losses`` without SEC and with SEC at the η chosen on held-out classes, over the profile's seeds."""
    sel = stored_selection(p, store, tuple(losses))
    return [config(p, loss, "sec", s, eta=chosen_eta(p, loss, sel)) for loss in losses for s in p.seeds] + \
        [config(p, loss, "none", s) for loss in losses for s in p.seeds]


def ssl(p: Profile, store) -> list[TrainConfig]:
    """SimCLR (NT-Xent, two views, no labels) and supervised contrastive, ± SEC."""
    return with_and_without_sec(p, store, SSL_LOSSES)


def npair_variants(p: Profile, store) -> list[TrainConfig]:
    """The four N-pair readings (inner product with / without the l2 regularizer, normalized, tuplet margin), ± SEC."""
    return with_and_without_sec(p, store, NPAIR_VARIANTS)


def face(p: Profile, store) -> list[TrainConfig]:
    """CosFace and ArcFace, ± SEC."""
    return with_and_without_sec(p, store, FACE_LOSSES)


MU_LOSSES = ("semihard", "ms")


def mu_settings(p: Profile, loss: str) -> list[tuple[str, dict]]:
    """(label, config changes) for the "which μ" chapter."""
    eta = ETA_SEC[loss]
    out = [("none", dict(eta=0.0)), ("batch mean", dict(eta=eta, mu="batch"))]
    out += [(f"EMA ρ={m:g}", dict(eta=eta, mu="ema", momentum=m)) for m in p.ema_momenta]
    out += [(f"zero η={e:g}", dict(eta=e, mu="zero")) for e in p.l2_etas]
    out += [(f"fixed r={r:g}", dict(eta=eta, mu=r)) for r in p.fixed_radii]
    return out


def mu_runs(p: Profile, store=None) -> list[tuple[TrainConfig, dict]]:
    """The "which μ" chapter's runs, each with its sweep label ``{"setting": label}`` (:func:`mu_settings`): the
    label is emitted here, where the run is made, so a page never has to recover it from the config."""
    return [(config(p, loss, "none", s, **ch), {"setting": label})
            for loss in MU_LOSSES for label, ch in mu_settings(p, loss) for s in p.seeds]


def mu_ablation(p: Profile, store=None) -> list[TrainConfig]:
    return [c for c, _ in mu_runs(p, store)]


BN_HEADS = ("nobn", "paper", "bn_before_norm", "weightnorm")


def bn_wn(p: Profile, store=None) -> list[TrainConfig]:
    return [config(p, "semihard", v, s, head=h) for h in BN_HEADS for v in ("none", "sec") for s in p.seeds]


def norm_layer(p: Profile, store=None) -> list[TrainConfig]:
    return [config(p, "semihard", v, s, head=h) for h in ("paper", "normalize") for v in ("none", "sec")
            for s in p.seeds]


def optim(p: Profile, store) -> list[TrainConfig]:
    """Every main loss, with and without SEC, under Adam and SGD; each optimizer, and SGD with and
    without SEC, at its own pilot-chosen rate."""
    out = []
    for opt in ("adam", "sgd"):
        for v in ("none", "sec"):
            q = tuned(p, opt, store, sec=(opt == "sgd" and v == "sec"))
            out += [config(q, loss, v, s) for loss in MAIN_LOSSES for s in p.seeds]
    return out


def toy_grid(p: Profile, store=None) -> list[TrainConfig]:
    """The explorer's dense grid on the toy data: η (0 and toy_etas) × μ mode × loss."""
    out = []
    for loss in ("semihard", "npair"):
        for mu in ("batch", "ema", "zero", 4.0):
            for eta in (0.0, *p.toy_etas):
                for s in p.toy_seeds:
                    out.append(TrainConfig(**with_variant(dict(p.toy, loss=loss, seed=s), loss, "none", eta=eta,
                                                          mu=mu, momentum=0.1 if mu == "ema" else 1.0)))
    return out


class AnyChoice:
    """A stand-in store for :func:`check_sweeps`: every selection run 'exists' (as a failed run), so
    the chapters can build their configs before the pilot and the selection have trained."""
    root = "(no store: checking configs)"

    def get(self, cfg, tables=()):
        empty = pd.DataFrame()
        return RunResult(cfg, "failed", {}, empty, empty, empty, empty, empty, empty, error="stand-in")
