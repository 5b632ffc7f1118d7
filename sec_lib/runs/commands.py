"""The runner's training commands: ``train``, ``export``, ``rerun`` and ``finetune`` (``python -m sec_lib.book CMD``).

``python -m sec_lib.book`` (:mod:`sec_lib.site.runner`) parses the command line and calls these; the
``run`` command (train, then execute the notebooks) shares :class:`Summary`, :func:`train_stages` and
:func:`prepare_data` with them. Nothing here knows about notebooks or the site.
"""
from __future__ import annotations

import argparse
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
from ..params import ParameterError
from . import decisive_studies, tier
from . import experiments as ex
from .benchmarks import preflight
from .launch import LaunchError, as_launcher
from . import finetune
from .pool import prepare_data, run_all
from .waves import train_stages as waves
from .provenance import provenance
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


def train_stages(p: ex.Profile, sweeps, launcher, summary: Summary, store=None) -> None:
    """Train in dependent waves (pilot, η selection, chapters) with ``launcher`` (or a job count
    for the local pool); see :func:`sec_lib.runs.waves.train_stages`."""
    waves(p, sweeps, launcher, store, sweep=lambda desc, configs, lau: train_sweep(desc, configs, lau, summary))


def train_command(profile: str, sweeps, launcher) -> int:
    """Train (or reuse) the runs of ``sweeps`` of ``profile`` in dependent waves, without notebooks.
    A committed tier's runs are restored into the store first, so a fresh machine resumes. A real-benchmark
    profile trains only the sweeps it has (default: all of them, in their order), after its folders and
    weights pass :func:`sec_lib.runs.benchmarks.preflight`; its data is read from disk, not rendered."""
    p = ex.get_profile(profile)
    benchmark = profile in ex.BENCHMARK_PROFILES
    default = ex.profile_sweeps(p) if benchmark else \
        ["main", *[c for c in ex.SWEEPS if c not in ("main", "selection")]]
    sweeps = list(sweeps or default)
    summary = Summary()
    t0 = time.perf_counter()
    try:
        skipped = sorted(set(sweeps) - set(ex.profile_sweeps(p)))
        if skipped:
            raise ParameterError(f"profile {profile!r} does not train the sweep(s) {skipped}: they do not apply to "
                                 f"its data; its sweeps: {', '.join(ex.profile_sweeps(p))}")
        ex.check_sweeps(p, sweeps)      # every config (device included) before anything trains
        if benchmark:
            preflight(p)                  # folders, every image, the weights: before anything trains
        summary.cleared = (ResultStore().clean_partial(), 0)
        if p.name in tier.TIER_PROFILES:       # resume from the committed runs on a fresh machine
            restored = tier.restore(tier.tier_dir(p.name), ResultStore())
            print(f"restored {restored} committed runs of {tier.tier_dir(p.name)} into {ResultStore().root}")
        if not benchmark:
            prepare_data(p)
        train_stages(p, sweeps, launcher, summary)
    except (ParameterError, ex.SelectionError, LaunchError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    summary.times["training"] = time.perf_counter() - t0
    summary.print()
    return 0


def export_command(profile: str) -> int:
    """Copy the profile's finished runs into its committed tier ``data/reference/<profile>/`` (refused for a
    retired tier, whose folder keeps its history)."""
    if profile in tier.RETIRED:
        r = tier.RETIRED[profile]
        print(f"error: the {profile} tier was retired on {r.on} and is no longer exported (its folder keeps "
              f"runs.parquet, evals.parquet, kinds.csv and its portability report; commit {r.at} holds it whole); the "
              f"{r.replaced_by} tier replaced it: `make {r.replaced_by}` trains and exports it", file=sys.stderr)
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
    if tier_root is None and profile in tier.RETIRED:     # the reference profile's committed runs: the decisive tier
        tier_root = tier.tier_dir(tier.RETIRED[profile].replaced_by)
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


def pilot_command(jobs: int = 2, profile: str = "reference") -> int:
    """Train the decisive tier's schedule pilot (:func:`sec_lib.runs.decisive_studies.train_pilot`), resumably, and
    print its convergence tables and its choice."""
    return decisive_studies.train(decisive_studies.studies()[:1], jobs, profile, ResultStore())


def decisive_command(jobs: int = 2, profile: str = "reference") -> int:
    """The decisive tier, study by study (:func:`sec_lib.runs.decisive_studies.studies`), resumable: the schedule
    pilot, the held-out selection of the four main losses, the main comparison, then the stages after it."""
    return decisive_studies.train(decisive_studies.studies(), jobs, profile, ResultStore())


def finetune_main(argv=None) -> int:
    """``python -m sec_lib.book finetune``: train the rate selection, then the fine-tuning runs (:mod:`.finetune`)."""
    ap = argparse.ArgumentParser(prog="python -m sec_lib.book finetune", description=finetune.__doc__.split("\n")[0])
    ap.add_argument("--profile", default="cpu", help=f"one of {', '.join(finetune.FINETUNE_PROFILES)}")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--root", default=None, help="result store folder (default: $SEC_RUNS_DIR or data/runs)")
    ap.add_argument("--scratch", action="store_true",
                    help="also train the from-scratch twins (the main table, after the Adam arm of its rate pilot)")
    args = ap.parse_args(argv)
    p = finetune.profile_of(args.profile)
    store = ResultStore(args.root) if args.root else ResultStore()
    run_all(finetune.selection(p), root=store.root, jobs=args.jobs)
    lr, lr_head = finetune.chosen_rates(p, store)
    print(json.dumps({"profile": p.name, "lr": lr, "lr_head": lr_head, "ratio": lr_head / lr}), flush=True)
    todo = finetune.runs(p, store)
    if args.scratch:
        run_all(finetune.scratch_pilot(p), root=store.root, jobs=args.jobs)
        todo += [finetune.twin(p, c, store) for c in todo]
    run_all(todo, root=store.root, jobs=args.jobs)
    if args.scratch:
        out = finetune.summary(p, store)
        pd.set_option("display.width", 160)
        print(out["runs"].groupby(["regime", "variant"])[["R@1", "start_norm_mean", "start_norm_var", "start_norm_cv",
                                                         "test_norm_cv"]].mean().round(3).to_string())
        print(out["effects"].round(2).to_string(index=False))
    return 0
