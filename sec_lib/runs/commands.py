"""The runner's training commands: ``train``, ``export`` and ``rerun`` (``python -m sec_lib.book CMD``).

``python -m sec_lib.book`` (:mod:`sec_lib.site.runner`) parses the command line and calls these; the
``run`` command (train, then execute the notebooks) shares :class:`Summary`, :func:`train_stages` and
:func:`prepare_data` with them. Nothing here knows about notebooks or the site.
"""
from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import torch
from tqdm import tqdm

from .. import kernels
from ..data import get_dataset
from ..params import ParameterError
from ..tempfiles import atomic_write_bytes
from . import experiments as ex
from . import study, tier
from .launch import LaunchError, as_launcher
from .launch import train_stages as waves
from .store import ResultStore


@dataclass
class Summary:
    trained: int = 0
    reused: int = 0
    quarantined: int = 0          # corrupt stored runs moved aside (and trained again)
    cleared: tuple = (0, 0)       # (partial run folders, partial notebooks) removed at the start
    failed_runs: list = field(default_factory=list)
    executed: list = field(default_factory=list)
    failed_pages: list = field(default_factory=list)
    times: dict = field(default_factory=dict)

    def print(self, out=None):
        out = sys.stdout if out is None else out      # looked up now: a captured or redirected stdout
        print("\n=== sec-book summary ===", file=out)
        print(f"runs: {self.trained} trained, {self.reused} reused from the store, {len(self.failed_runs)} failed", file=out)
        for key, err in self.failed_runs:
            print(f"  failed run {key}: {err}", file=out)
        print(f"store: {self.quarantined} corrupt records quarantined and retrained; cleared {self.cleared[0]} partial "
              f"run folders and {self.cleared[1]} partial notebooks left by interrupted runs", file=out)
        print(f"notebooks: {len(self.executed)} executed, {len(self.failed_pages)} failed", file=out)
        for name, err in self.failed_pages:
            print(f"  failed notebook {name}: {err}", file=out)
        for what, sec in self.times.items():
            print(f"time {what}: {sec / 60:.1f} min ({sec:.0f} s)", file=out)


def progress_bar(desc: str, total: int, unit: str = "run"):
    """A tqdm bar on the terminal (stderr); the rendered pages never see it. ``unit``: what it counts (runs for a
    sweep; training steps where a few long runs would leave a bar of runs still for minutes: ``rerun``,
    ``portability``)."""
    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, dynamic_ncols=True)


def step_bar(desc: str, total: int):
    """:func:`progress_bar` counting training steps, with the callbacks that move it: ``(bar, on_steps, on_step)``,
    ``on_steps(n)`` for n more steps (:func:`sec_lib.runs.tier.retrain`'s ``progress``) and ``on_step(step,
    iterations)`` for one run's step count (:func:`sec_lib.runs.train.train`'s)."""
    bar = progress_bar(desc, total, unit="step")
    return bar, bar.update, tier.step_counter(bar.update)


def train_sweep(desc: str, configs, launcher, summary: Summary) -> None:
    """Train one wave with ``launcher`` (or a job count for the local pool), with a progress bar."""
    bar = progress_bar(desc, len(configs))     # the launcher reports the number of distinct runs

    def report(event, n, total):
        bar.total = total
        if event == "quarantined":
            summary.quarantined += n
            return
        if event == "reused":
            summary.reused += n
        else:
            summary.trained += n
        bar.update(n)
        bar.refresh()

    store = ResultStore()
    try:
        as_launcher(launcher).run(configs, store.root, progress=report)
    finally:
        bar.close()
    failed = {k for k, _ in summary.failed_runs}
    for c in configs:
        r = store.get(c)
        key = store.path(c).name
        if key not in failed and (r is None or r.status != "done"):
            summary.failed_runs.append((key, r.failure if r is not None else "not in the store"))
            failed.add(key)


def train_stages(p: ex.Profile, chapters, launcher, summary: Summary, store=None) -> None:
    """Train in dependent waves (pilot, η selection, chapters) with ``launcher`` (or a job count
    for the local pool); see :func:`sec_lib.runs.launch.train_stages`."""
    waves(p, chapters, launcher, store, sweep=lambda desc, configs, lau: train_sweep(desc, configs, lau, summary))


def prepare_data(p: ex.Profile) -> None:
    """Render / load the dataset caches once, before worker processes start."""
    size = p.base.get("image_size", 32)
    for split in ("train", "test"):
        get_dataset("glyphs", split, image_size=size)


def train_command(profile: str, chapters, launcher) -> int:
    """Train (or reuse) the runs of ``chapters`` of ``profile`` in dependent waves, without notebooks.
    A committed tier's runs are restored into the store first, so a fresh machine resumes. A real-benchmark
    profile trains only the chapters it has (default: all of them, in their order), after its folders and
    weights pass :func:`sec_lib.runs.benchmarks.preflight`; its data is read from disk, not rendered."""
    p = ex.get_profile(profile)
    benchmark = profile in ex.BENCHMARK_PROFILES
    default = ex.profile_chapters(p) if benchmark else \
        ["main", *[c for c in ex.CHAPTERS if c not in ("main", "selection")]]
    chapters = list(chapters or default)
    summary = Summary()
    t0 = time.perf_counter()
    try:
        skipped = sorted(set(chapters) - set(ex.profile_chapters(p)))
        if skipped:
            raise ParameterError(f"profile {profile!r} does not train the chapter(s) {skipped}: they do not apply to "
                                 f"its data; its chapters: {', '.join(ex.profile_chapters(p))}")
        ex.check_sweeps(p, chapters)      # every config (device included) before anything trains
        if benchmark:
            from .benchmarks import preflight
            preflight(p)                  # folders, every image, the weights: before anything trains
        summary.cleared = (ResultStore().clean_partial(), 0)
        if p.name in tier.TIER_PROFILES:       # resume from the committed runs on a fresh machine
            restored = tier.restore(tier.tier_dir(p.name), ResultStore())
            print(f"restored {restored} committed runs of {tier.tier_dir(p.name)} into {ResultStore().root}")
        if not benchmark:
            prepare_data(p)
        train_stages(p, chapters, launcher, summary)
    except (ParameterError, ex.SelectionError, LaunchError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    summary.times["training"] = time.perf_counter() - t0
    summary.print()
    return 0


def export_command(profile: str) -> int:
    """Copy the profile's finished runs into its committed tier ``data/reference/<profile>/`` (refused for a
    retired tier, whose folder keeps its history)."""
    if profile in tier.RETIRED_TIERS:
        print(f"error: the {profile} tier was retired on {tier.RETIRED_ON[profile]} and is no longer exported (its folder keeps "
              f"runs.parquet, evals.parquet, kinds.csv and its portability report; commit {tier.RETIRED_AT[profile]} "
              f"holds it whole); the {tier.REPLACED_BY[profile]} tier replaced it: `make {tier.REPLACED_BY[profile]}` "
              "trains and exports it", file=sys.stderr)
        return 2
    store = ResultStore()
    counts = tier.export(store, ex.profile_configs(profile, store), tier.tier_dir(profile))
    print(f"{tier.tier_dir(profile)}: {counts['exported']} runs exported, "
          f"{counts['missing']} of the runs named so far not trained yet")
    return 0


def rerun_command(key: str, profile: str, tier_root=None) -> int:
    """Retrain one committed run from its row and compare its final R@1 with the committed one, as the
    reproducibility contract says (:mod:`sec_lib.kernels`).

    The run retrains under the kernel pin it was trained with (in a child process started under that pin
    when this one has another). On the same CPU kind the numbers must be identical: a difference exits 1.
    A GPU run (its kind: :func:`~sec_lib.runs.tier.gpu_kind`) cannot be retrained without a GPU (exit 2); on one,
    a difference is reported as on another kind (GPU kernels are not deterministic).
    On another kind, or where the committed kind is unknown, it reports the difference in units of that
    arm's seed SD, says that bit-identity is not expected there, and exits 0."""
    if tier_root is None and profile in tier.REPLACED_BY:     # the reference profile's committed runs: the decisive tier
        tier_root = tier.tier_dir(tier.REPLACED_BY[profile])
    root = Path(tier_root) if tier_root is not None else tier.tier_dir(profile)
    if not (root / "runs.parquet").exists():       # a staged tier (data/reference/decisive): the stage holding the run
        stages = tier.stage_dirs(root)
        found = next((d for d in stages if tier.TierStore(d).has_key(key)), None)
        if stages and found is None:
            print(f"error: run {key!r} is in no stage of the tier {root} (its stages: "
                  f"{', '.join(d.name for d in stages)}; see each stage's runs.parquet)", file=sys.stderr)
            return 2
        root = found or root
    try:
        t = tier.TierStore(root)
        t.config(key)                      # an unknown key: a clear error before anything trains
    except (ParameterError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    cfg = t.config(key)
    if not cfg.device.startswith("cpu"):           # a GPU run: its kind is its GPU's (tier.gpu_kind)
        from .provenance import provenance
        if not torch.cuda.is_available():
            print(f"error: run {key} was trained on a GPU ({tier.committed_kind(t, key)}); this machine has none, "
                  f"so it cannot retrain it (its config asks for device {cfg.device!r})", file=sys.stderr)
            return 2
        theirs, here = tier.committed_kind(t, key), tier.gpu_kind(cfg, provenance(cfg))
    pin = tier.committed_pin(t, key)
    if pin != kernels.pin_name():
        print(f"run {key} was trained under the kernel pin {pin!r} (this process: {kernels.pin_name()!r}); "
              f"retraining it in a process started under {pin!r}", flush=True)
        return subprocess.call([sys.executable, "-m", "sec_lib.book", "rerun", key, "--profile", profile,
                                "--tier", str(root)], env=kernels.child_env(pin))
    if cfg.device.startswith("cpu"):
        theirs, here = tier.committed_kind(t, key), kernels.this_kind()
    print(f"run {key}: committed on {'CPU' if cfg.device.startswith('cpu') else 'GPU'} kind {theirs}; this machine is "
          f"{here}", flush=True)
    bar, _, on_step = step_bar(f"rerun {key} ({cfg.loss} {cfg.variant} seed {cfg.seed})", cfg.iterations)
    try:
        committed, retrained, result = tier.rerun(key, root, progress=on_step)
    finally:
        bar.close()
    same = committed == retrained or (math.isnan(committed) and math.isnan(retrained))
    head = f"run {key}: committed R@1 {committed:.4f}, retrained R@1 {retrained:.4f}"
    if same:
        print(f"{head} (identical); stored in {ResultStore().root}")
        return 0
    diff = retrained - committed
    if theirs == here and cfg.device.startswith("cpu"):
        print(f"{head}: differs by {diff:+.4f} on the same CPU kind {here}. The contract promises identity "
              f"here (Level 1); this is a reproducibility failure.")
        return 1
    sd, what = tier.seed_sd(t, key)
    units = f"{diff / sd:+.2f} seed SDs ({what}: {sd:.3f})" if sd == sd and sd > 0 else f"no seed SD ({what})"
    why = ("it ran on a GPU, whose kernels are not deterministic (cuDNN's choices, atomic additions), so even the "
           "same GPU kind gives a fresh draw" if not cfg.device.startswith("cpu") else
           "the committed run's CPU kind is unknown (committed before the contract recorded it)"
           if theirs == tier.UNKNOWN_KIND else f"it was trained on another CPU kind ({theirs})")
    print(f"{head}: differs by {diff:+.4f} R@1 = {units}. Bit-identity is not expected: {why}, so this rerun "
          f"is a fresh draw from the same distribution of runs (Level 2 of the contract). "
          f"`python -m sec_lib.book portability` checks that no verdict depends on it.")
    return 0


def pilot_command(jobs: int = 2, profile: str = "reference", pairs: int = 1) -> int:
    """Train the schedule pilot (:mod:`sec_lib.runs.pilot`) in chunks of ``jobs`` runs, exporting the finished
    runs to ``data/reference/decisive/pilot/`` after each chunk (commit it as it grows; a rerun resumes from
    the store and the committed folder), then print the convergence table and the choice."""
    from . import pilot
    if jobs < 1:
        print(f"error: jobs = {jobs} is not valid; expected an integer >= 1", file=sys.stderr)
        return 2
    out = tier.tier_dir(pilot.TIER) / "pilot"
    store = ResultStore()
    study.restore_committed(store, (("pilot", out),))
    cfgs = pilot.configs(profile, pairs)
    todo = [c for c in cfgs if not store.has(c)]
    print(f"schedule pilot: {len(cfgs)} runs, {len(cfgs) - len(todo)} done; rule: "
          f"{pilot.rule(pilot.LENGTH_PAIRS[pairs - 1])}", flush=True)
    study.train_exporting(todo, cfgs, out, store, jobs, "pilot")
    table = pilot.table(store.get(c, tables=("evals",)) for c in cfgs)
    for pair in pilot.LENGTH_PAIRS[:pairs]:
        conv = pilot.convergence(table, pair)
        print(conv.to_string(index=False))
        print(f"chosen schedule at T = {pair[0]}: {pilot.choice(conv, pair) or 'none (see the rule)'}")
    return 0


def decisive_command(jobs: int = 2, profile: str = "reference") -> int:
    """The decisive tier, stage by stage, resumable: the schedule pilot (:func:`pilot_command`), extended to its
    next length pair when no shape converged; then, once it has chosen a schedule, the held-out selection of the
    four main losses (:mod:`sec_lib.runs.selection`: η and L2 grids, 3 seeds a point, grown at an edge),
    exported to ``data/reference/decisive/selection/`` after every ``jobs`` runs, printing each loss's choice with
    its flags (:func:`select_stage`); then the main comparison (:func:`main_stage`) and the stages after it
    (:func:`later_stages`)."""
    from . import pilot
    store = ResultStore()
    shape = length = None
    for n, pair in enumerate(pilot.LENGTH_PAIRS, start=1):     # the next pair only when none converged
        rc = pilot_command(jobs, profile, pairs=n)
        if rc:
            return rc
        table = pilot.table(store.get(c, tables=("evals",)) for c in pilot.configs(profile, n))
        shape = pilot.choice(pilot.convergence(table, pair), pair)
        if shape is not None:
            length = pair[0]
            break
    if shape is None:
        last = pilot.LENGTH_PAIRS[-1]
        shape = pilot.fallback(pilot.convergence(table, last), last)
        if shape is None:
            print("the pilot's last length pair is incomplete: the selection waits")
            return 0
        length = last[0]
        print(f"no shape converged at any length pair of the pilot: by the registered fallback the tier trains "
              f"{shape} at {length} iterations (not converged by the rule; see the tiers page)", flush=True)
    final = select_stage(ex.MAIN_LOSSES, ("sec", "l2reg"), shape, length, store, jobs,
                         tier.tier_dir(pilot.TIER) / "selection", profile)
    rc = main_stage(final, shape, length, store, jobs, profile)
    return rc or later_stages(store, jobs, profile)


def select_stage(losses, kinds, shape: str, length: int, store, jobs: int, out: Path, profile: str = "reference",
                 eta_grid: tuple | None = None, label: str = "selection") -> dict:
    """A held-out selection of the decisive tier (:mod:`sec_lib.runs.selection`) for ``losses`` and ``kinds``
    ('sec': the η grid ``eta_grid``, default :data:`~sec_lib.runs.selection.ETA_GRID`, with η = 0; 'l2reg': the L2
    grid), 3 seeds a point, each grid grown while its choice sits at an edge (:func:`sec_lib.runs.study.grid_choice`);
    its runs export to ``out`` after every ``jobs`` runs, committed runs there are restored first. Prints each choice
    with its flags and returns ``{(loss, kind): (Choice, held-out runs)}``."""
    from . import selection
    base = {"sec": tuple(eta_grid or selection.ETA_GRID), "l2reg": selection.L2_GRID, "relative": selection.RELATIVE_GRID}
    study.restore_committed(store, ((label, out),))

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
    from . import selection
    study.restore_committed(store, (("rate-selection", out),))
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
    from . import selection
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
    from . import finetune, selection
    study.restore_committed(store, (("fine-tuning selection", out),))
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


def later_stages(store, jobs: int, profile: str = "reference") -> int:
    """The decisive tier's stages after the main comparison (:data:`sec_lib.runs.decisive.STAGES`, in order): a
    held-out selection records each loss's choice in ``choices.json`` once; a training stage trains the runs its
    chapters name under :func:`sec_lib.runs.decisive.profile` that no earlier stage named, seed by seed, and
    exports them to its own folder. Resumable like the rest: committed runs are restored first."""
    from . import decisive, mainstage
    from .store import run_key
    plan = decisive.read_plan()
    earlier = {run_key(c) for c in mainstage.configs(plan, profile)}
    for stage, what, (kind, *args) in decisive.STAGES:
        out = tier.tier_dir(decisive.TIER) / stage
        if kind == "select":
            losses, kinds = getattr(ex, args[0]), args[1]
            final = select_stage(losses, kinds, plan.shape, plan.length, store, jobs, out, profile,
                                 decisive.selection_grid(stage, "sec"), stage)
            for loss in losses:
                got = decisive.record_choice(loss, final[(loss, "sec")][0], final.get((loss, "l2reg"), (None,))[0])
                print(f"  {loss}: η {got['sec']:g}" + ("" if got["l2reg"] is None else f", L2 {got['l2reg']:g}")
                      + "".join(f"; {f}" for f in got["flags"]) + f" (recorded in {decisive.choices_path()})",
                      flush=True)
            continue
        if kind == "select-scale":        # relative SEC's η, and the fixed-scale radius from the η = 0 runs
            from . import selection
            losses = getattr(ex, args[0])
            final = select_stage(losses, ("relative",), plan.shape, plan.length, store, jobs, out, profile, label=stage)
            for loss in losses:
                zero = [store.get(c, tables=("test_norms",))
                        for c in selection.configs(loss, (0.0,), plan.shape, plan.length, "sec", profile)]
                got = decisive.record_scale(loss, final[(loss, "relative")][0], decisive.radius_of(zero))
                print(f"  {loss}: relative η {got['relative']:g}, radius {got['radius']:g}"
                      + "".join(f"; {f}" for f in got["flags"]), flush=True)
            continue
        if kind == "select-finetune":
            lr, lr_head, flags = select_finetune(decisive.profile(), store, jobs, out)
            got = decisive.record_finetune(lr, lr_head, flags)
            print(f"  fine-tuning: trunk lr {got['lr']:g}, head lr {got['lr_head']:g}"
                  + "".join(f"; {f}" for f in got["flags"]), flush=True)
            continue
        if kind == "select-lr":
            for arm, c in select_rates(args[0], plan.shape, plan.length, store, jobs, out, profile).items():
                got = decisive.record_rate(arm, c)
                print(f"  {arm}: lr {got['lr']:g}" + "".join(f"; {f}" for f in got["flags"])
                      + f" (recorded in {decisive.choices_path()})", flush=True)
            continue
        study.restore_committed(store, ((stage, out),))
        cfgs = [c for c in ex.stage_configs(decisive.profile(), args[0], store) if run_key(c) not in earlier]
        cfgs.sort(key=lambda c: c.seed)                  # seed by seed: a stopped stage is usable
        earlier |= {run_key(c) for c in cfgs}
        todo = [c for c in cfgs if not store.has(c)]
        print(f"{stage} ({what}): {len(cfgs)} runs, {len(cfgs) - len(todo)} done", flush=True)
        study.train_exporting(todo, cfgs, out, store, jobs, stage)
    print("the decisive tier's stages are complete" + (
        "; not written yet: " + "; ".join(f"{k} ({v})" for k, v in decisive.LATER.items()) if decisive.LATER else ""),
        flush=True)
    return 0


def main_stage(final: dict, shape: str, length: int, store, jobs: int, profile: str = "reference") -> int:
    """The main comparison (:mod:`sec_lib.runs.mainstage`): the plan computed from the final selection
    (``final``: {(loss, kind): (Choice, held-out runs)}) is written to ``data/reference/decisive/plan.json``
    once, before anything trains on the test classes, then its runs train in chunks of ``jobs`` and export to
    ``data/reference/decisive/main/`` after each chunk."""
    from . import mainstage, pilot, selection
    sec = {loss: c for (loss, kind), (c, _) in final.items() if kind == "sec"}
    l2 = {loss: c for (loss, kind), (c, _) in final.items() if kind == "l2reg"}
    diffs = pd.concat([selection.paired_diffs(runs, mainstage.tested_weight(c)).assign(loss=loss)
                       for (loss, kind), (c, runs) in final.items() if kind == "sec"], ignore_index=True)
    path = tier.tier_dir(pilot.TIER) / "plan.json"
    plan = mainstage.write_plan(mainstage.make_plan(sec, l2, diffs, shape, length), path)
    print(f"main comparison plan ({path}): {plan.seeds} seeds for the primary arms (SD {plan.sd:.3f} of the "
          f"per-seed mean paired difference, detectable effect {plan.mde:.2f} R@1 points); η "
          + ", ".join(f"{l} {w:g}" for l, w in plan.eta.items()), flush=True)
    out = tier.tier_dir(pilot.TIER) / "main"
    study.restore_committed(store, (("main-comparison", out),))
    cfgs = mainstage.configs(plan, profile)
    todo = [c for c in cfgs if not store.has(c)]
    print(f"main comparison: {len(cfgs)} runs, {len(cfgs) - len(todo)} done", flush=True)
    study.train_exporting(todo, cfgs, out, store, jobs, "main-comparison")
    print("the main comparison is complete", flush=True)
    return 0
