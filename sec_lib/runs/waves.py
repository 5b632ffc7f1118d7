"""The book's training in dependent waves (the ``run`` and ``train`` commands): the learning-rate pilot, the η
selection, the fine-tuning rates, then the chapters' runs, each wave named from the stored results of the last and
trained by a :class:`~sec_lib.runs.launch.Launcher`."""
from __future__ import annotations

from typing import Callable

from . import experiments as ex
from .launch import Launcher, as_launcher
from .store import ResultStore, run_key

#: The chapters whose runs read the η selection.
SELECTION_SWEEPS = {"selection", "tuned", "beyond", "main"}


def train_stages(p: ex.Profile, sweeps, launcher: Launcher | int, store: ResultStore | None = None,
                 sweep: Callable[[str, list, Launcher], None] | None = None) -> None:
    """Train in dependent waves: the learning-rate (and run-length) pilot, then the η / L2-weight
    selection on held-out classes (at the pilot's choices), the fine-tuning rate selection where ``sweeps``
    holds ``ftrates``, then the chapters' runs (some use the
    selection). Each wave waits for the previous one: its configs are computed from the previous
    waves' stored results. Every run is counted once. A launcher with ``one_wave_per_stage``
    (submitit) submits all chapters' runs as one wave; the local pool trains chapter by chapter,
    in the given order. A selection that cannot be made fairly (a learning rate at the edge of its
    grid) raises :class:`~sec_lib.runs.experiments.SelectionError` here, before any test run.

    ``sweep(desc, configs, launcher)`` trains one wave (default: ``launcher.run`` into ``store``);
    the runner passes one that draws a progress bar and counts what ran."""
    launcher = as_launcher(launcher)
    store = store or ResultStore()
    sweep = sweep or (lambda desc, configs, lau: lau.run(configs, store.root))
    done: set[str] = set()

    def wave(desc, configs):
        todo = []
        for c in configs:
            if run_key(c) not in done:
                done.add(run_key(c))
                todo.append(c)
        if todo:
            sweep(f"[{p.name}] {desc}", todo, launcher)

    launcher.check(ex.lr_pilot(p))         # e.g. GPU runs without GPUs: stop before the first wave
    try:
        wave("lr pilot", ex.pilot_configs(p, sweeps))
        if SELECTION_SWEEPS & set(sweeps):
            wave("eta selection", ex.sweep_configs("selection", p, store))
        if "ftrates" in sweeps:          # the fine-tuning rates, chosen before the pretrained chapter's runs
            wave("fine-tuning rate selection", ex.sweep_configs("ftrates", p, store))
        if launcher.one_wave_per_stage:
            wave("chapter runs", [c for ch in sweeps for c in ex.sweep_configs(ch, p, store)])
        else:
            for ch in sweeps:
                wave(f"{ch} runs", ex.sweep_configs(ch, p, store))
    finally:
        launcher.close()
