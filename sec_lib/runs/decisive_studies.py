"""The decisive tier as studies (:class:`~sec_lib.runs.study.Study`), in training order: the schedule pilot, the
held-out selection of the four main losses, the main comparison, then the stages of
:data:`sec_lib.runs.decisive.STAGES` (each a held-out selection that records its choices, or the runs of chapters
that no earlier stage named). :func:`studies` lists them; :func:`sec_lib.runs.study.run` trains them.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from . import decisive, finetune, mainstage, pilot, selection, study
from . import experiments as ex
from .store import run_key

#: The tier's folder, under which each study of it has its own.
FOLDER = ("data", "reference", decisive.TIER)


def train_pilot(session, study_):
    """The schedule pilot (:mod:`sec_lib.runs.pilot`), one length pair at a time: the next pair only when no shape
    converged at the last, then the registered fallback. Returns (shape, length), or False while the last pair is
    incomplete."""
    store, out = session.store, study_.path()
    for n, pair in enumerate(pilot.LENGTH_PAIRS, start=1):
        cfgs = pilot.configs(session.profile, n)
        study.train_named(store, cfgs, out, session.jobs, f"schedule pilot ({pilot.rule(pair)})")
        table = pilot.table(store.get(c, tables=("evals",)) for c in cfgs)
        conv = pilot.convergence(table, pair)
        print(conv.to_string(index=False))
        shape = pilot.choice(conv, pair)
        print(f"chosen schedule at T = {pair[0]}: {shape or 'none (see the rule)'}", flush=True)
        if shape is not None:
            return shape, pair[0]
    last = pilot.LENGTH_PAIRS[-1]
    shape = pilot.fallback(pilot.convergence(table, last), last)
    if shape is None:
        print("the pilot's last length pair is incomplete: the selection waits")
        return False
    print(f"no shape converged at any length pair of the pilot: by the registered fallback the tier trains "
          f"{shape} at {last[0]} iterations (not converged by the rule; see the tiers page)", flush=True)
    return shape, last[0]


def train_selection(session, study_) -> dict:
    """The held-out selection of the four main losses (η and L2 grids, 3 seeds a point, grown at an edge) under the
    pilot's schedule and length: {(loss, kind): (Choice, held-out runs)}."""
    shape, length = session.results["pilot"]
    return select_stage(ex.MAIN_LOSSES, ("sec", "l2reg"), shape, length, session.store, session.jobs, study_.path(),
                        session.profile)


def train_main(session, study_):
    """The main comparison (:mod:`sec_lib.runs.mainstage`): the plan computed from the final selection is written to
    ``plan.json`` once, before anything trains on the test classes, then its runs train in chunks and export."""
    store, final = session.store, session.results["selection"]
    shape, length = session.results["pilot"]
    sec = {loss: c for (loss, kind), (c, _) in final.items() if kind == "sec"}
    l2 = {loss: c for (loss, kind), (c, _) in final.items() if kind == "l2reg"}
    diffs = pd.concat([selection.paired_diffs(runs, mainstage.tested_weight(c)).assign(loss=loss)
                       for (loss, kind), (c, runs) in final.items() if kind == "sec"], ignore_index=True)
    path = decisive.plan_path()
    plan = mainstage.write_plan(mainstage.make_plan(sec, l2, diffs, shape, length), path)
    print(f"main comparison plan ({path}): {plan.seeds} seeds for the primary arms (SD {plan.sd:.3f} of the "
          f"per-seed mean paired difference, detectable effect {plan.mde:.2f} R@1 points); η "
          + ", ".join(f"{l} {w:g}" for l, w in plan.eta.items()), flush=True)
    cfgs = mainstage.configs(plan, session.profile)
    session.named |= {run_key(c) for c in cfgs}
    study.train_named(store, cfgs, study_.path(), session.jobs, "main comparison")
    print("the main comparison is complete", flush=True)


def eta_selection(stage: str, losses: str, kinds: tuple):
    """A stage's held-out η (and L2) selection of the loss list ``losses`` (a name in
    :mod:`~sec_lib.runs.experiments`), each loss's choice recorded in ``choices.json`` once."""
    def train(session, study_):
        plan, names = decisive.read_plan(), getattr(ex, losses)
        final = select_stage(names, kinds, plan.shape, plan.length, session.store, session.jobs, study_.path(),
                             session.profile, decisive.selection_grid(stage, "sec"), stage)
        for loss in names:
            got = decisive.record_choice(loss, final[(loss, "sec")][0], final.get((loss, "l2reg"), (None,))[0])
            print(f"  {loss}: η {got['sec']:g}" + ("" if got["l2reg"] is None else f", L2 {got['l2reg']:g}")
                  + "".join(f"; {f}" for f in got["flags"]) + f" (recorded in {decisive.choices_path()})", flush=True)
    return train


def scale_selection(stage: str, losses: str):
    """Relative SEC's held-out η, and the fixed-scale radius from the η = 0 runs, of the loss list ``losses``."""
    def train(session, study_):
        plan, names, store = decisive.read_plan(), getattr(ex, losses), session.store
        final = select_stage(names, ("relative",), plan.shape, plan.length, store, session.jobs, study_.path(),
                             session.profile, label=stage)
        for loss in names:
            zero = [store.get(c, tables=("test_norms",))
                    for c in selection.configs(loss, (0.0,), plan.shape, plan.length, "sec", session.profile)]
            got = decisive.record_scale(loss, final[(loss, "relative")][0], decisive.radius_of(zero))
            print(f"  {loss}: relative η {got['relative']:g}, radius {got['radius']:g}"
                  + "".join(f"; {f}" for f in got["flags"]), flush=True)
    return train


def finetune_selection(stage: str):
    """The fine-tuning arm's held-out trunk and head rates, recorded once."""
    def train(session, study_):
        lr, lr_head, flags = select_finetune(decisive.profile(), session.store, session.jobs, study_.path())
        got = decisive.record_finetune(lr, lr_head, flags)
        print(f"  fine-tuning: trunk lr {got['lr']:g}, head lr {got['lr_head']:g}"
              + "".join(f"; {f}" for f in got["flags"]), flush=True)
    return train


def rate_selection(stage: str, arms: tuple):
    """SGD's held-out learning rates of ``arms``, each recorded once."""
    def train(session, study_):
        plan = decisive.read_plan()
        for arm, c in select_rates(arms, plan.shape, plan.length, session.store, session.jobs, study_.path(),
                                   session.profile).items():
            got = decisive.record_rate(arm, c)
            print(f"  {arm}: lr {got['lr']:g}" + "".join(f"; {f}" for f in got["flags"])
                  + f" (recorded in {decisive.choices_path()})", flush=True)
    return train


def sweep_stage(stage: str, sweeps: tuple):
    """The runs ``sweeps`` name under :func:`sec_lib.runs.decisive.profile` that no earlier study of the session
    named, seed by seed (a stopped stage is usable)."""
    def train(session, study_):
        store = session.store
        if not session.named:                  # run on its own: the main comparison's runs are named before it
            session.named |= {run_key(c) for c in mainstage.configs(decisive.read_plan(), session.profile)}
        cfgs = [c for c in ex.stage_configs(decisive.profile(), sweeps, store) if run_key(c) not in session.named]
        cfgs.sort(key=lambda c: c.seed)
        session.named |= {run_key(c) for c in cfgs}
        study.train_named(store, cfgs, study_.path(), session.jobs, f"{stage} ({study_.title})")
    return train


#: How each kind of stage of :data:`sec_lib.runs.decisive.STAGES` trains: (stage, *its arguments) -> train.
KINDS = {"select": eta_selection, "select-scale": scale_selection, "select-finetune": finetune_selection,
         "select-lr": rate_selection, "train": sweep_stage}


def later_studies() -> list:
    """The stages after the main comparison (:data:`sec_lib.runs.decisive.STAGES`), as studies, in order."""
    return [study.Study(stage, (*FOLDER, stage), what, KINDS[kind](stage, *args))
            for stage, what, (kind, *args) in decisive.STAGES]


def studies() -> list:
    """The decisive tier's studies in training order: pilot, selection, main comparison, the later stages."""
    return [study.Study("pilot", (*FOLDER, "pilot"), "the schedule pilot on held-out classes", train_pilot),
            study.Study("selection", (*FOLDER, "selection"), "the four main losses' held-out η and L2 selection",
                        train_selection),
            study.Study("main", (*FOLDER, "main"), "the main comparison", train_main),
            *later_studies()]


def train(studies_: list, jobs: int = 2, profile: str = "reference", store=None) -> int:
    """Train ``studies_`` (of :func:`studies`) in order through :func:`sec_lib.runs.study.run`, and say whether they
    are complete."""
    session = study.Session(store if store is not None else study.ResultStore(), jobs, profile)
    results = study.run(studies_, session=session)
    if len(results) == len(studies_) and all(got is not False for got in results.values()):
        print("the decisive tier's stages are complete" + (
            "; not written yet: " + "; ".join(f"{k} ({v})" for k, v in decisive.LATER.items())
            if decisive.LATER else ""), flush=True)
    return 0


def select_stage(losses, kinds, shape: str, length: int, store, jobs: int, out: Path, profile: str = "reference",
                 eta_grid: tuple | None = None, label: str = "selection") -> dict:
    """A held-out selection of the decisive tier (:mod:`sec_lib.runs.selection`) for ``losses`` and ``kinds``
    ('sec': the η grid ``eta_grid``, default :data:`~sec_lib.runs.selection.ETA_GRID`, with η = 0; 'l2reg': the L2
    grid), 3 seeds a point, each grid grown while its choice sits at an edge (:func:`sec_lib.runs.study.grid_choice`);
    its runs export to ``out`` after every ``jobs`` runs. Prints each choice with its flags and returns ``{(loss, kind): (Choice, held-out runs)}``."""
    base = {"sec": tuple(eta_grid or selection.ETA_GRID), "l2reg": selection.L2_GRID, "relative": selection.RELATIVE_GRID}

    def configs_of(loss, kind):           # the η = 0 runs are shared by every kind's grid
        return lambda ws: (selection.configs(loss, (0.0,), shape, length, "sec", profile)
                           + selection.configs(loss, [w for w in ws if w], shape, length, kind, profile))
    choosers = {(loss, kind): (lambda loss=loss, kind=kind: study.grid_choice(
        store, configs_of(loss, kind), (0.0, *base[kind]), study.rule(base[kind])))
        for loss in losses for kind in kinds}
    print(f"{label} ({shape}, {length} iterations)", flush=True)
    final = {}
    for (loss, kind), c in study.select(store, choosers, out, jobs, label).items():
        runs = selection.held_out_frame([store.get(x, tables=()) for x in configs_of(loss, kind)(c.grid)])
        final[(loss, kind)] = (c, runs)
        print(f"  {loss} {kind}: chosen {c.weight:g} (best nonzero {c.best_nonzero:g})"
              + "".join(f"; {f}" for f in c.flags_for(selection.KIND_NAMES[kind])), flush=True)
    return final


def select_rates(arms, shape: str, length: int, store, jobs: int, out: Path, profile: str = "reference") -> dict:
    """SGD's held-out learning rates (:func:`sec_lib.runs.selection.rate_configs`) for ``arms``: the rate grid,
    3 seeds a rate, grown while the best rate sits at an edge (×/÷ 10, twice a side at most); its runs export to
    ``out``. Returns ``{arm: Choice}`` (no 'no optimizer' point: ``zero=False``)."""
    choosers = {arm: (lambda arm=arm: study.grid_choice(
        store, lambda rates: selection.rate_configs(arm, rates, shape, length, profile), tuple(selection.LR_GRID),
        study.rule(selection.LR_GRID, by="lr", zero=False))) for arm in arms}
    print(f"SGD rates ({shape}, {length} iterations)", flush=True)
    final = study.select(store, choosers, out, jobs, "rate-selection")
    for arm, c in final.items():
        print(f"  {arm}: chosen lr {c.weight:g}" + "".join(f"; {f}" for f in c.flags), flush=True)
    return final


def finetune_pairs(results) -> dict:
    """{(trunk lr, head ratio): mean held-out R@1} of the fine-tuning selection's complete pairs (a run that did not
    finish scores −∞)."""
    rows = pd.DataFrame([{"lr": r.config.lr, "ratio": round(r.config.lr_head / r.config.lr, 6), "seed": r.config.seed,
                          "R@1": r.metrics.get("R@1") if r.status == "done" else float("-inf")}
                         for r in results if r is not None])
    done = rows.groupby(["lr", "ratio"]).filter(lambda g: set(selection.SEEDS) <= set(g["seed"]))
    return done.groupby(["lr", "ratio"])["R@1"].mean().to_dict()


def select_finetune(p, store, jobs: int, out: Path) -> tuple[float, float, list]:
    """The fine-tuning arm's held-out rates under the decisive profile ``p``
    (:func:`sec_lib.runs.finetune.selection`: every trunk rate × head ratio, 3 seeds a pair): the pair with the best
    mean held-out R@1 (ties: the smaller trunk rate, then the smaller ratio); while its trunk rate sits at an edge of
    the trunk grid, the grid grows ×/÷ :data:`~sec_lib.runs.finetune.TRUNK_FACTOR` (twice a side at most), every ratio
    at the new rate. Returns (trunk lr, head lr, flags)."""
    base, _ = finetune.grid(p)

    def choose(results):
        pairs = finetune_pairs(results)
        by_lr = {lr: max(v for (l, _), v in pairs.items() if l == lr) for lr in {l for l, _ in pairs}}
        return selection.choose(by_lr, base, zero=False, factor=finetune.TRUNK_FACTOR)
    chooser = lambda: study.grid_choice(store, lambda lrs: finetune.selection(p, lrs), tuple(base), choose)
    c = study.select(store, {"finetune": chooser}, out, jobs, "fine-tuning selection")["finetune"]
    pairs = finetune_pairs(store.get(x, tables=()) for x in finetune.selection(p, c.grid))
    lr = c.weight
    ratio = max((r for (l, r) in pairs if l == lr), key=lambda r: (pairs[(lr, r)], -r))
    return lr, lr * ratio, c.flags
