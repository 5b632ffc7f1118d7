"""The decisive tier as a profile, and its stages after the main comparison.

Pre-registered with the plan (``data/reference/decisive/README.md``; the cost plan's stage list,
:func:`sec_lib.runs.plan.stages`):

- **One profile for every chapter.** :func:`profile` is the reference tier's network and data under the design the
  pilot and the plan fixed: the pilot's schedule and length, Adam at 3e-3, :data:`~sec_lib.runs.mainstage.EVALS`
  evaluations a run, batch statistics every 20 steps. Its weights are the held-out choices, never selection runs
  read again: the four main losses' η and L2 weight from ``plan.json``, the other losses' from ``choices.json``
  (:func:`record_choice`, each loss written once). Seeds: the plan's count for no regularizer and SEC at the
  selected η of the four main losses; :data:`~sec_lib.runs.plan.FLOOR` (5) for every other arm and chapter; 3
  per point for the η sweep on the test classes. The chapters' configs come from
  :func:`sec_lib.runs.experiments.sweep_configs` with this profile, so the pages read exactly the runs trained.
- **Stages after the main comparison** (:data:`STAGES`, in training order): tuplet margin and CosFace's held-out
  η and L2 selection (as the main losses') and their four arms; the scale chapter's selection and arms; the
  fine-tuning chapter's rates and runs; the η sweep; μ; BN/WN; the normalize layer; SGD's held-out rates and Adam
  against SGD; the convergence chapter's early curves; the review losses' held-out η selection
  (:data:`REVIEW_GRID`, η only) and ssl, N-pair and the face losses.
  Each stage exports to its own folder under ``data/reference/decisive/``; a run an earlier stage named is not
  named again.
- SGD's learning rates (the Adam-vs-SGD chapter), without and with SEC, are chosen the same way on held-out
  classes (:data:`~sec_lib.runs.selection.LR_GRID`, semihard, 3 seeds a rate, grown at an edge).
- The convergence chapter's dense early curves are exact prefixes of the main comparison's runs: the first 2,000
  iterations, evaluated every 100, on the full run's cosine horizon (:func:`sec_lib.runs.experiments.early_twin`).
- The scale chapter: relative SEC's η on held-out classes (:data:`~sec_lib.runs.selection.RELATIVE_GRID`,
  3 seeds, grown at an edge) and the fixed-scale radius (the median norm of the η = 0 held-out runs,
  :func:`radius_of`), then its two new arms at 5 seeds (none, L2-reg and SEC are the main comparison's runs).
- The fine-tuning chapter: from the committed glyph backbone (frozen BN, a new head) under the tier's
  own schedule and length, so that each fine-tuned run differs from its from-scratch twin (the main comparison's
  run of the same loss, arm and seed) only in its start and the paper's protocol. Trunk and head rates on held-out
  classes: every trunk rate of :data:`~sec_lib.runs.finetune.TRUNK_LRS` × head ratio of
  :data:`~sec_lib.runs.finetune.HEAD_RATIOS`, 3 seeds a pair; the best pair by mean held-out R@1 (ties: the smaller
  rates); the trunk grid grows ×/÷ 3 while the best pair's trunk rate sits at its edge (twice a side at most). Then
  none, L2-reg and SEC at their held-out weights and relative SEC at its held-out η, 5 seeds (the registered arms);
  their twins are runs of the main comparison and of the scale chapter. The issue asks for a step schedule, the
  paper's; this tier keeps its own cosine one, the shape its pilot found converged (step did not converge at 13,500),
  so that the regime interaction compares runs that differ only in their start and the protocol.
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np

from ..tempfiles import atomic_write_json
from . import finetune, selection, tier
from . import sweeps as sw
from .mainstage import EVALS, Plan, tested_weight
from .pilot import TIER
from .plan import FLOOR
from .schedules import schedule
from .selection import RELATIVE_GRID

#: Adam's rate in every decisive run (the reference tier's held-out choice; the pilot kept it).
LR = 3e-3
#: Seeds per point of the η sweep on the test classes.
SWEEP_SEEDS = 3
#: The review losses' held-out η grid (η = 0 is a point of its own; grown at an edge like the others).
REVIEW_GRID = (0.1, 0.5, 1.0)
#: The chapters the decisive profile trains and its pages read.
SWEEPS = ("compare", "tuned", "main", "beyond", "norms", "instability", "convergence", "eta", "mu", "bnwn",
            "normlayer", "optim", "scale", "pretrained", "ssl", "npair", "face")
#: The stages after the main comparison, in training order: (stage = export folder, what it is, how). Tuplet margin
#: and CosFace come first: with them the compare page, and so the primary test and the landing page, read this tier.
#: Then the scale and fine-tuning chapters before the rest (this order was set on 2026-11-26,
#: while the main comparison trained and before any later stage had trained a run). How:
#: ("select", the name of a loss list in :mod:`~sec_lib.runs.experiments`, kinds): a held-out η / L2 selection;
#: ("select-lr", arms): SGD's rates; ("select-scale", loss list): relative SEC's η and the fixed-scale radius;
#: ("select-finetune",): the fine-tuning rates; ("train", chapters): the chapters' runs that no earlier stage named
#: (:func:`sec_lib.runs.decisive_studies.later_studies` declares them as studies).
STAGES = (
    ("extra-selection", "tuplet margin and CosFace: held-out η and L2 grids", ("select", "EXTRA_LOSSES",
                                                                               ("sec", "l2reg"))),
    ("extra", "tuplet margin and CosFace: none, L2-reg, SEC at the selected and the paper's η", ("train", ("main",))),
    ("scale-selection", "relative SEC's held-out η, and the fixed-scale radius", ("select-scale", "MAIN_LOSSES")),
    ("scale", "shrink or equalize: relative SEC and the fixed-scale control", ("train", ("scale",))),
    ("finetune-selection", "fine-tuning from the glyph backbone: trunk and head rates on held-out classes",
     ("select-finetune",)),
    ("pretrained", "fine-tuned runs: none, L2-reg, SEC and relative SEC at their held-out weights",
     ("train", ("pretrained",))),
    ("eta", "the η sweep on the test classes", ("train", ("eta",))),
    ("mu", "which μ", ("train", ("mu",))),
    ("bnwn", "BN and WN heads", ("train", ("bnwn",))),
    ("normlayer", "a normalize layer", ("train", ("normlayer",))),
    ("sgd-selection", "SGD's held-out learning rates, without and with SEC", ("select-lr", ("sgd", "sgd+sec"))),
    ("optim", "Adam against SGD", ("train", ("optim",))),
    ("convergence", "the first 2,000 iterations of none and SEC at the paper's η, evaluated every 100",
     ("train", ("convergence",))),
    ("review-selection", "the review losses: held-out η grid", ("select", "REVIEW_LOSSES", ("sec",))),
    ("review", "SimCLR and SupCon, the N-pair readings, CosFace and ArcFace", ("train", ("ssl", "npair", "face"))),
)
#: The stage folders of the held-out η selections, in training order: the four main losses' (``selection``, which the
#: main stage writes), then each "select" stage of :data:`STAGES` (tuplet margin and CosFace's, the review losses').
ETA_SELECTION_STAGES = ("selection", *(name for name, _, how in STAGES if how[0] == "select"))
#: What the tier does not train yet, and why (nothing, now).
LATER: dict = {}


#: The keys of ``choices.json`` that hold SGD's held-out learning rates (:func:`record_rate`), the scale chapter's
#: relative η and radius (:func:`record_scale`) and the fine-tuning rates (:func:`record_finetune`); every other key
#: is a loss (:func:`record_choice`).
RATES, SCALE, FINETUNE = "rates", "scale", "finetune"


def plan_path(root=None) -> Path:
    return tier.tier_dir(TIER, root) / "plan.json"


#: The file of the tier's held-out choices, in its folder.
CHOICES_FILE = "choices.json"


def choices_path(root=None) -> Path:
    return tier.tier_dir(TIER, root) / CHOICES_FILE


def read_plan(root=None) -> Plan:
    """The frozen plan (``plan.json``); KeyError while the selection of the four main losses is not final."""
    path = plan_path(root)
    if not path.exists():
        raise KeyError(f"the decisive tier has no plan yet ({path}): `make decisive` writes it when the held-out "
                       "selection of the four main losses is final")
    return Plan.from_json(path.read_text())


def read_choices(root=None) -> dict:
    """``choices.json`` ({} before any choice): ``{loss: {"sec": η, "l2reg": weight or None, "flags": [...]}}``, and
    under :data:`RATES`, :data:`SCALE` and :data:`FINETUNE` the rates, the scale chapter's and the fine-tuning choices."""
    return choices_in(tier.tier_dir(TIER, root))


def choices_in(folder) -> dict:
    """:func:`read_choices` of the tier in ``folder`` (a staged tier's folder, as :class:`~sec_lib.runs.tier.StagedTier`
    opens it)."""
    path = Path(folder) / CHOICES_FILE
    return json.loads(path.read_text()) if path.exists() else {}


def _write_choices(have: dict, root=None) -> None:
    atomic_write_json(choices_path(root), have)


def record_rate(arm: str, choice, root=None) -> dict:
    """Write SGD's held-out learning rate for ``arm`` ('sgd', 'sgd+sec'; a final
    :class:`~sec_lib.runs.selection.Choice` over rates) under ``choices.json``'s ``rates``, once, like
    :func:`record_choice`. Returns the arm's entry on disk."""
    if choice.needs is not None:
        raise ValueError(f"the rate selection of {arm!r} is not final (it still needs {choice.needs:g})")
    have = read_choices(root)
    rates = have.setdefault(RATES, {})
    if arm not in rates:
        rates[arm] = {"lr": float(choice.weight), "flags": [f for f in choice.flags if "SEC not selected" not in f]}
        _write_choices(have, root)
    return rates[arm]


def radius_of(runs) -> float:
    """The fixed-scale control's radius: the median raw-embedding norm on the held-out classes of the η = 0
    selection runs (``runs``: their RunResults with ``test_norms``, pooled over the seeds), to 3 significant digits.
    SEC toward it equalizes the norms at the scale the loss reaches without a regularizer, so it does not shrink
    them. SelectionError when no done run has norms."""
    norms = [n for r in runs if r is not None and r.status == "done" and "norm" in r.test_norms
             for n in r.test_norms["norm"]]
    med = float(np.median(np.asarray(norms, float))) if norms else float("nan")
    if not (np.isfinite(med) and med > 0):
        raise sw.SelectionError(f"the η = 0 selection runs give no positive median norm ({len(norms)} norms from "
                                f"{sum(r is not None for r in runs)} runs): the fixed-scale control has no radius")
    return float(f"{med:.3g}")


def record_scale(loss: str, relative, radius: float, root=None) -> dict:
    """Write ``loss``'s relative-SEC η (a final :class:`~sec_lib.runs.selection.Choice`; the best nonzero η where
    none won) and fixed-scale radius under ``choices.json``'s ``scale``, once. Returns the entry on disk."""
    if relative.needs is not None:
        raise ValueError(f"the relative-SEC selection of {loss!r} is not final (it still needs {relative.needs:g})")
    have = read_choices(root)
    scale = have.setdefault(SCALE, {})
    if loss not in scale:
        scale[loss] = {"relative": tested_weight(relative), "radius": float(radius), "flags": list(relative.flags)}
        _write_choices(have, root)
    return scale[loss]


def record_finetune(lr: float, lr_head: float, flags=(), root=None) -> dict:
    """Write the fine-tuning arm's held-out trunk and head rates under ``choices.json``'s ``finetune``, once."""
    have = read_choices(root)
    if FINETUNE not in have:
        have[FINETUNE] = {"lr": float(lr), "lr_head": float(lr_head), "flags": list(flags)}
        _write_choices(have, root)
    return have[FINETUNE]


def record_choice(loss: str, sec, l2=None, root=None) -> dict:
    """Write ``loss``'s held-out choice (:class:`~sec_lib.runs.selection.Choice` s: SEC's η and, if given, the L2
    weight; where no regularizer won, the best nonzero weight, flagged) to ``choices.json`` atomically, unless
    the loss is already there: a choice, once written, is never rewritten. Returns the loss's entry on disk."""
    for name, c in (("sec", sec), ("l2reg", l2)):
        if c is not None and c.needs is not None:
            raise ValueError(f"the {name} selection of {loss!r} is not final (it still needs {c.needs:g})")
    if loss in (RATES, SCALE, FINETUNE):
        raise ValueError(f"{loss!r} is not a loss: choices.json keeps the rates, the scale and the fine-tuning choices "
                         "under it")
    have = read_choices(root)
    if loss not in have:
        have[loss] = {"sec": tested_weight(sec), "l2reg": None if l2 is None else tested_weight(l2),
                      "flags": [*sec.flags, *(f"L2: {f}" for f in (l2.flags_for("L2-reg") if l2 is not None else []))]}
        _write_choices(have, root)
    return have[loss]


def profile(plan: Plan | None = None, choices: dict | None = None, root=None) -> sw.Profile:
    """The decisive tier's :class:`~sec_lib.runs.experiments.Profile` under ``plan`` and ``choices`` (default: the
    committed ``plan.json`` and ``choices.json``). Its runs of the main comparison are exactly
    :func:`sec_lib.runs.mainstage.configs`'s (same store keys)."""
    plan = plan if plan is not None else read_plan(root)
    choices = choices if choices is not None else read_choices(root)
    ref = sw.glyph_profile("reference")
    fixed = {**{("sec", l): float(w) for l, w in plan.eta.items()}, **{("zero", l): float(w) for l, w in plan.l2.items()}}
    for arm, r in choices.get(RATES, {}).items():
        fixed[("lr", arm)] = float(r["lr"])
    for loss, c in choices.get(SCALE, {}).items():
        fixed[("relative", loss)], fixed[("radius", loss)] = float(c["relative"]), float(c["radius"])
    if FINETUNE in choices:
        fixed[("lr", "finetune")] = float(choices[FINETUNE]["lr"])
        fixed[("lr", "finetune-head")] = float(choices[FINETUNE]["lr_head"])
    for loss, c in choices.items():
        if loss in (RATES, SCALE, FINETUNE):
            continue
        fixed.setdefault(("sec", loss), float(c["sec"]))
        if c.get("l2reg") is not None:
            fixed.setdefault(("zero", loss), float(c["l2reg"]))
    base = {**ref.base, "optimizer": "adam", "lr": LR, "eval_every": max(1, plan.length // EVALS), "stats_every": 20,
            **schedule(plan.shape, plan.length)}
    return dataclasses.replace(
        ref, name=TIER, base=base, seeds=tuple(range(FLOOR)), main_seeds=tuple(range(plan.seeds)),
        floor_seeds=tuple(range(FLOOR)), sweep_seeds=tuple(range(SWEEP_SEEDS)), fixed_optimizer="adam",
        fixed_choices=fixed, pilot_iterations=0, pilot_eval_every=0, iteration_grid=(), sweeps=SWEEPS,
        review_eta_grid=REVIEW_GRID, relative_eta_grid=RELATIVE_GRID)


def selection_grid(stage: str, kind: str) -> tuple:
    """The first grid of a held-out selection stage of :data:`STAGES` for ``kind`` ('sec', 'l2reg', 'relative'),
    without η = 0 (a point of its own): the review losses' η grid for ``review-selection``, else the main losses'."""
    if kind == "sec":
        return REVIEW_GRID if stage == "review-selection" else selection.ETA_GRID
    return {"l2reg": selection.L2_GRID, "relative": selection.RELATIVE_GRID}[kind]


def first_round(stage: str, p: sw.Profile | None = None, plan: Plan | None = None, profile_name: str = "reference") -> int:
    """The runs held-out selection ``stage`` of :data:`STAGES` names before any grid grows (its folder holds these,
    and each grid point a grown grid adds): every point of its first grids (:func:`selection_grid`, η = 0 included
    where the stage has it; SGD's rate grid; the fine-tuning rate pairs under the decisive profile ``p``) at every
    seed, each run once. ``plan``: the committed ``plan.json`` by default."""
    hows = [how for name, _, how in STAGES if name == stage]
    if not hows:
        raise ValueError(f"unknown stage {stage!r}; the stages after the main comparison: "
                         f"{', '.join(name for name, _, _ in STAGES)}")
    kind, *args = hows[0]
    if kind == "select-finetune":
        return len(finetune.selection(p if p is not None else profile()))
    plan = plan if plan is not None else read_plan()
    if kind == "select-lr":
        return len({sw.run_key(c) for arm in args[0]
                    for c in selection.rate_configs(arm, selection.LR_GRID, plan.shape, plan.length, profile_name)})
    if kind not in ("select", "select-scale"):
        raise ValueError(f"stage {stage!r} is not a held-out selection (its kind is {kind!r})")
    kinds = args[1] if kind == "select" else ("relative",)
    # η = 0 is the no-regularizer run whatever the kind: the key set counts it once per loss
    return len({sw.run_key(c) for loss in getattr(sw, args[0]) for k in kinds
                for c in selection.configs(loss, (0.0, *selection_grid(stage, k)), plan.shape, plan.length, k,
                                           profile_name)})
