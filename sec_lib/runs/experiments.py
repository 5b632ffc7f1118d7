"""What each sweep trains, per profile: the single source of truth for the sweeps.

Every page asks this module for the list of :class:`~sec_lib.runs.train.TrainConfig` (:func:`sweep_configs`)
and loads the results from the store; the runner (``sec_lib.site.runner``) trains the union of all lists first, so
a run shared by two sweeps (the main table's runs are also points of the η sweep) trains once. ``SWEEPS`` maps
a sweep's name to the function that names its runs; every profile is named by :func:`get_profile`.

The sweeps themselves, and the selections they read, are in :mod:`sec_lib.runs.sweeps`, re-exported here. Selection
is explicit: :func:`chosen_lr` and :func:`chosen_eta` take the pilot / selection runs, and :func:`tuned`,
:func:`sweep_configs` and :func:`all_configs` take the :class:`~sec_lib.runs.store.ResultStore` to read them from.
Nothing here opens a default store or trains; a missing pilot or selection run is a KeyError that says which runner
command makes it.

The glyph profiles (smoke, cpu, gpu, reference) and the loss lists are in :mod:`sec_lib.runs.profiles`, re-exported
here. The real-benchmark books (:data:`BENCHMARK_PROFILES`) are profiles too, built in
:mod:`sec_lib.runs.benchmark_settings` from the paper's settings: Adam's rates fixed per loss (``fixed_optimizer``,
``loss_base``) instead of chosen by a pilot, only the sweeps that apply to photographs (``sweeps``). The
decisive tier's profile is :func:`sec_lib.runs.decisive.profile`, fixed by its committed plan.

This module is the top of the sweeps: it imports the fine-tuning and scale arms, the decisive tier and the
benchmark settings, and none of them imports it.
"""
from __future__ import annotations

import dataclasses

from ..params import Choice
from . import decisive, finetune, scalearms
from .benchmark_settings import benchmark_profile
from .store import run_key
from .config import TrainConfig
from .profiles import (  # noqa: F401 - re-exported: the chapters and the runner read them here
    MAIN_LOSSES, VARIANTS, GLYPH_PROFILES, BENCHMARK_PROFILES, PROFILE_NAMES, ETA_SEC, EXTRA_LOSSES, ETA_L2,
    SSL_LOSSES, NPAIR_VARIANTS, FACE_LOSSES, REVIEW_LOSSES, LOSS_SETTINGS, SWEEP_NAMES, Profile, PROFILES,
    glyph_profile)
from .sweeps import (  # noqa: F401 - re-exported: the chapters, the runner and the tests read them here
    with_variant, config, stored_runs, SelectionError, held_out, lr_pilot, pilot_configs, best_setting, run_score,
    chosen_lr, curve, smoothed, chosen_iterations, pilot_runs, tuned, eta_selection, relative_selection,
    selection_runs, stored_selection, FIXED_KINDS, fixed_choice, chosen_eta, tuned_sec_runs, tuned_sec, beyond_runs,
    beyond, main_comparison, table_seeds, main_table_runs, main_table, early_twin, convergence, eta_sweep,
    with_and_without_sec, ssl, npair_variants, face, MU_LOSSES, mu_settings, mu_runs, mu_ablation, BN_HEADS, bn_wn,
    norm_layer, optim, toy_grid, AnyChoice)


def get_profile(name: str) -> Profile:
    """The profile ``name``: a glyph profile (:data:`PROFILES`), the decisive tier's (fixed by its plan; KeyError
    before the plan) or a real benchmark's (:func:`~sec_lib.runs.benchmark_settings.benchmark_profile`)."""
    if name == "decisive":
        return decisive.profile()
    Choice(PROFILE_NAMES).check("profile", name)
    if name in PROFILES:
        return PROFILES[name]
    return benchmark_profile(name)


def profile_sweeps(profile: "Profile | str") -> tuple:
    """The sweeps ``profile`` trains: its ``sweeps``, or all of :data:`SWEEPS`."""
    p = get_profile(profile) if isinstance(profile, str) else profile
    return tuple(p.sweeps) or tuple(SWEEPS)
def scale(p: Profile, store) -> list[TrainConfig]:
    """Shrink or equalize? The scale chapter's arms (:func:`sec_lib.runs.scalearms.scale`)."""
    return scalearms.scale(p, store)


def finetune_rates(p: Profile, store=None) -> list[TrainConfig]:
    """The fine-tuning arm's held-out rate selection (:func:`sec_lib.runs.finetune.selection_runs`)."""
    return finetune.selection_runs(p, store)


def pretrained_runs(p: Profile, store) -> list[tuple[TrainConfig, dict]]:
    """The ``pretrained`` chapter's runs with their ``regime`` label (:func:`sec_lib.runs.finetune.sweep_runs`)."""
    return finetune.sweep_runs(p, store)


def pretrained(p: Profile, store) -> list[TrainConfig]:
    """Fine-tuned from the backbone pretrained here, and the main-table twin of each run."""
    return [c for c, _ in pretrained_runs(p, store)]


#: The function that names each sweep's runs, by the sweep's name, in the order of
#: :data:`~sec_lib.runs.profiles.SWEEP_NAMES` (the one list of names; ``tests/runs/test_experiments.py`` keeps the two equal).
SWEEPS = {"compare": main_table, "tuned": tuned_sec, "selection": eta_selection, "beyond": beyond,
          "main": main_comparison, "norms": main_table, "convergence": convergence, "instability": main_table,
          "eta": eta_sweep, "mu": mu_ablation, "bnwn": bn_wn, "normlayer": norm_layer, "optim": optim,
          "explore": toy_grid, "ssl": ssl, "npair": npair_variants, "face": face, "scale": scale,
          "ftrates": finetune_rates, "pretrained": pretrained}


def sweep_configs(sweep: str, profile: "Profile | str", store) -> list[TrainConfig]:
    """The runs a chapter shows. ``store`` holds the learning-rate pilot and the η selection
    (run first by the runner): the Adam runs use the pilot's rate and run length, SEC at the
    selected η uses the selection; ``optim`` and the toy grid handle rates themselves."""
    Choice(tuple(SWEEPS)).check("chapter", sweep)
    p = get_profile(profile) if isinstance(profile, str) else profile
    if sweep not in profile_sweeps(p):     # a chapter the profile does not train (a benchmark's ssl) has no runs
        return []
    fn = SWEEPS[sweep]
    if fn is toy_grid:
        return fn(p)
    if fn is optim:
        return fn(p, store)
    return fn(tuned(p, "adam", store), store)


#: The sweeps whose runs carry labels that their configs' fields do not name (the μ chapter's setting "EMA ρ=0.9",
#: main-table membership, the η arm, the fine-tuning regime): a chapter's run function -> the function of (tuned
#: profile, store) that makes the same runs as (config, labels) pairs. Every chapter showing a sweep gets its labels.
LABELED = {mu_ablation: mu_runs, pretrained: pretrained_runs, main_table: main_table_runs, tuned_sec: tuned_sec_runs,
           beyond: beyond_runs}


def sweep_labels(sweep: str, profile: "Profile | str", store) -> dict[str, dict]:
    """Run key -> the sweep labels the chapter's runs were made with ({} for a chapter without labels), from
    the same function that makes the runs; :func:`sec_lib.chapters.common.load` adds them as columns of the
    runs frame."""
    Choice(tuple(SWEEPS)).check("chapter", sweep)
    p = get_profile(profile) if isinstance(profile, str) else profile
    made = LABELED.get(SWEEPS[sweep])
    if made is None or sweep not in profile_sweeps(p):
        return {}
    return {run_key(c): labels for c, labels in made(tuned(p, "adam", store), store)}


def is_main_table_run(cfg: TrainConfig, profile: "Profile | str", store) -> bool:
    """Whether ``cfg`` is one of the main table's runs of ``profile``: its ``main_table`` label, emitted with the
    main table's configs (:func:`main_table_runs`)."""
    try:
        labels = sweep_labels("compare", profile, store)
    except KeyError:                       # the learning-rate pilot or the selection is not in the store
        return False
    return bool(labels.get(run_key(cfg), {}).get("main_table"))


def all_configs(profile: "Profile | str", store, sweeps=None) -> list[TrainConfig]:
    """The union of the chapters' runs (each run once), after the pilot and the selection have run."""
    out = {}
    for ch in sweeps or SWEEPS:
        for c in sweep_configs(ch, profile, store):
            out.setdefault(run_key(c), c)
    return list(out.values())


def check_sweeps(profile: "Profile | str", sweeps=None) -> int:
    """Validate every run the runner may train for ``sweeps`` (None: the profile's, :func:`profile_sweeps`)
    before anything trains,
    device included; return how many configs were checked.

    The chapters' runs depend on the pilot's choices (learning rate, run length) and on the η
    selection, which exist only after those runs. Every candidate rate and run length is checked on
    the pilot's config; the chapters' runs are built once per optimizer at one candidate (the choice
    changes nothing else in them), with the selection standing at a value of its grid (every η of
    the grid is checked by the selection runs themselves).
    """
    p = get_profile(profile) if isinstance(profile, str) else profile
    sweeps = (list(profile_sweeps(p)) if sweeps is None
                else [Choice(tuple(SWEEPS)).check("chapter", c) for c in sweeps])
    stand_in = AnyChoice()
    configs = lr_pilot(p)                  # every candidate rate
    lengths = p.iteration_grid or (p.base.get("iterations", 200),)
    configs += [c.replace(iterations=n) for c in configs[:1] for n in lengths]     # every candidate run length
    arms = [(opt, {"lr": lrs[0]}) for opt, lrs in p.lr_pilot.items()]
    if p.fixed_optimizer:                  # the profile's own settings (the paper's), no pilot
        arms.insert(0, (p.fixed_optimizer, {}))
    for opt, rate in arms:                 # the chapters' runs under each optimizer (rate and length
        q = dataclasses.replace(p, base=dict(p.base, optimizer=opt, **rate, iterations=lengths[0]))
        for ch in sweeps:                # were checked above; they change nothing else)
            fn = SWEEPS[ch]
            if fn is optim:                # builds its own tuned profiles: the same runs at this rate
                configs += [config(q, loss, v, s) for loss in MAIN_LOSSES for v in ("none", "sec") for s in p.seeds]
            elif fn is not toy_grid:
                configs += fn(q, stand_in)
    if "explore" in sweeps:
        configs += toy_grid(p)
    for c in {run_key(c): c for c in configs}.values():
        c.validate()
    return len(configs)


def profile_configs(profile, store) -> list[TrainConfig]:
    """Every run of ``profile`` that can be named now: the pilot, then (once the pilot is in
    ``store``) the selection, then (once the selection is in) every chapter's runs."""
    p = get_profile(profile) if isinstance(profile, str) else profile
    out = list(lr_pilot(p))
    try:
        out += sweep_configs("selection", p, store)
        for ch in SWEEPS:
            out += sweep_configs(ch, p, store)
    except (KeyError, SelectionError):
        pass
    return out


def stage_configs(p: Profile, sweeps, store=None) -> list:
    """The runs of ``sweeps`` under the decisive profile ``p``, each once, in chapter order."""
    out = {}
    for ch in sweeps:
        for c in sweep_configs(ch, p, store):
            out.setdefault(run_key(c), c)
    return list(out.values())
