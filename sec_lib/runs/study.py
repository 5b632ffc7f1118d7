"""A registered study, and what every study shares: committed runs restored before anything trains, training in
chunks through the :class:`~sec_lib.runs.launch.Launcher` with an export after each chunk, and the held-out grid
grown at an edge.

- :class:`Study`: one registered design (the schedule pilot, a held-out selection, the main comparison, a stage, a
  follow-up): its name, folder, title, the committed folders it reads, and how it trains; :func:`run` trains any
  list of studies in order, resuming;
- :func:`restore_committed`: the committed runs of a study's folders (and of the studies it reuses) into the store,
  so that no committed run trains again;
- :func:`train_exporting`: train runs in chunks, exporting the named ones to the study's folder after each chunk;
- :func:`grid_choice`: one held-out grid by a choice rule (:func:`sec_lib.runs.selection.choose`), grown at an
  edge while the rule asks for a point; :func:`select` trains every grid of a selection until each is final.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..tempfiles import atomic_write_bytes
from . import selection, tier
from .launch import PoolLauncher
from .many import process_groups
from .store import ResultStore


#: Where a study's folder is when it is not a follow-up's (``data/followups/<name>/``).
FOLDERS = {"decisive": ("data", "reference", "decisive")}


def folder_of(name: str, root=None) -> Path:
    """The folder of the study (or tier) ``name`` in the repository (or in ``root``): the decisive tier's under
    ``data/reference/``, a follow-up's under ``data/followups/``."""
    return Path(root or tier.REPO).joinpath(*FOLDERS.get(name, ("data", "followups", name)))


@dataclass
class Session:
    """What the studies of one :func:`run` share: the store, the runs trained at once, the profile their held-out
    runs take their settings from, each study's result by name, and the keys of the runs named so far."""
    store: object
    jobs: int = 2
    profile: str = "reference"
    results: dict = field(default_factory=dict)
    named: set = field(default_factory=set)


@dataclass(frozen=True)
class Study:
    """A registered design. ``folder``: its folder under the repository; ``stages``: its subfolders of committed
    runs ("" for the folder itself); ``reads``: the committed folders of studies before it that it reuses, as
    (study name, stage) pairs, resolved by :func:`folder_of`; ``train(session, study)`` trains what is missing of it
    (resumably) and returns its result (its choices, or None); False: it cannot finish yet, and the studies after
    it wait."""
    name: str
    folder: tuple
    title: str
    train: Callable
    stages: tuple = ("",)
    reads: tuple = ()

    def path(self, root=None) -> Path:
        return Path(root or tier.REPO).joinpath(*self.folder)

    def committed(self) -> list:
        """(what, folder) of every committed folder it reads or writes, for :func:`restore_committed`."""
        theirs = [(f"{name} {stage}", folder_of(name) / stage) for name, stage in self.reads]
        return theirs + [(f"{self.name} {stage}".strip(), self.path() / stage) for stage in self.stages]


def run(studies, jobs: int = 2, store=None, session: Session | None = None) -> dict:
    """Train ``studies`` in order, each resuming from the store and its committed folders (restored first); stops at
    a study that cannot finish yet. Returns {name: result}."""
    session = session or Session(store if store is not None else ResultStore(), jobs)
    for s in studies:
        restore_committed(session.store, s.committed())
        got = s.train(session, s)
        session.results[s.name] = got
        if got is False:
            break
    return session.results


def restore_committed(store, places) -> None:
    """Restore into ``store`` every committed folder of ``places`` ((what, folder) pairs; a folder without runs is
    skipped), so that no run committed there trains again."""
    for what, where in places:
        if (Path(where) / "runs.parquet").exists():
            print(f"restored {tier.restore(where, store)} committed {what} runs of {where} into {store.root}",
                  flush=True)


def train_exporting(todo, named, out, store, jobs: int, what: str, together: int = 1,
                    deadline: float | None = None, pace: dict | None = None, pace_file=None,
                    kind: str | None = None, unit: int = 1) -> bool:
    """Train ``todo`` in chunks of ``jobs`` x ``together`` runs (a :class:`~sec_lib.runs.launch.PoolLauncher`),
    exporting every run of ``named`` that is in ``store`` to the tier folder ``out`` after each chunk (so a stopped
    session loses at most one chunk).

    With ``deadline`` (a ``time.monotonic()`` value) no chunk starts that the last chunk's pace says would end after
    it; where a whole chunk would not, the largest smaller one that would trains instead. The prediction
    (:func:`chunk_seconds`) uses the seconds per run that one process trained, and, for a chunk on more processes than
    the last one, also the seconds per run of the whole chunk (processes that share one GPU slow each other down:
    8 processes did not train 8 runs in the time 4 trained 4). ``pace`` (a dict) carries the pace from one call to
    the next; ``pace_file`` (JSON) keeps it for the next process, e.g. a second command on a warm GPU machine.
    ``kind`` names the runs' kind (the gpu tier's stage): a pace measured on another kind predicts this kind's first
    chunk times :data:`OTHER_KIND_MARGIN` (:func:`chunk_seconds`). ``unit`` > 1: ``todo`` comes in consecutive groups
    of ``unit`` runs (the gpu tier's pairs of arms) that a chunk does not split, except a chunk smaller than a group
    (``jobs`` x ``together`` < ``unit``) or the last runs of ``todo``. Returns False when it stopped early."""
    pace = {} if pace is None else pace
    launcher = PoolLauncher(jobs, together)
    try:
        i = 0
        while i < len(todo):
            n = min(jobs * together, len(todo) - i)
            if unit <= n < len(todo) - i:
                n -= n % unit                              # whole groups
            if deadline is not None:
                while n and time.monotonic() + chunk_seconds(n, jobs, together, pace, kind) > deadline:
                    n -= n % unit or unit                  # down to whole groups, then a group at a time
                if not n:
                    print(f"  stopped before the deadline: {len(todo) - i} {what} runs left for the next call",
                          flush=True)
                    return False
            t0 = time.perf_counter()
            launcher.run(todo[i:i + n], store.root)
            seconds = time.perf_counter() - t0
            groups = process_groups(list(range(n)), jobs, together)
            pace.update(s=seconds / max(map(len, groups)), run=seconds / n, processes=len(groups), kind=kind)
            if pace_file is not None:
                atomic_write_bytes(Path(pace_file), json.dumps(pace).encode())
            counts = tier.export(store, named, out)
            print(f"  {counts['exported']} of {len(named)} {what} runs exported to {out} "
                  f"({seconds:.0f} s for the last {n}, {len(groups)} processes)", flush=True)
            i += n
    finally:
        launcher.close()
    return True


#: A pace measured on runs of another kind (the gpu tier's stage before) predicts a chunk of this kind times this
#: margin, until a chunk of this kind has set its own pace: the same 3,000 steps of a held-out selection run and of
#: a main-comparison run differ by the last evaluation, which clusters 400 held-out classes in one and the 1,392
#: test classes in the other (k-means with 10 starts on one thread: 55 s on an AMD EPYC).
OTHER_KIND_MARGIN = 1.5


def chunk_seconds(n: int, jobs: int, together: int, pace: dict, kind: str | None = None) -> float:
    """Predicted wall seconds of a chunk of ``n`` runs of ``kind`` from the last chunk's ``pace`` (0 before any
    chunk): the seconds per run a process trains times the runs per process; for more processes than the last chunk
    had, at least the last chunk's seconds per run times ``n`` (the GPU they share does not get faster); times
    :data:`OTHER_KIND_MARGIN` where the last chunk's runs were of another kind."""
    if not pace:
        return 0.0
    groups = process_groups(list(range(n)), jobs, together)
    seconds = pace["s"] * max(map(len, groups))
    if len(groups) > pace.get("processes", len(groups)):
        seconds = max(seconds, pace["run"] * n)
    if pace.get("kind") != kind:
        seconds *= OTHER_KIND_MARGIN
    return seconds


def rule(base: tuple, by: str = "eta", zero: bool = True, factor: float = selection.FACTOR):
    """The held-out choice rule on the grid ``base`` as a function of a grid's runs (RunResults): the mean R@1 of each
    point over :data:`~sec_lib.runs.selection.SEEDS` (a run that did not finish scores −∞), then
    :func:`sec_lib.runs.selection.choose` (``zero``: the point 0 may win; ``by``: the config field the grid varies;
    ``factor``: how far a grid grows at an edge)."""
    def choose(results):
        runs = selection.held_out_frame(results, by=by)
        return selection.choose(selection.scores_of(runs, by=by), base, zero=zero, factor=factor)
    return choose


def grid_choice(store, configs_of, points: tuple, choose):
    """One held-out grid, grown at an edge: (the Choice once final, else None; every run of the grid so far, grown
    points included; the runs of it still to train). ``configs_of(points)`` names the runs of ``points``;
    ``choose(results)`` (e.g. :func:`rule`) scores them once all are in ``store``, and while its Choice ``needs`` a
    point, the grid grows by it."""
    while True:
        cfgs = configs_of(points)
        todo = [c for c in cfgs if not store.has(c)]
        if todo:
            return None, cfgs, todo
        c = choose([store.get(x, tables=()) for x in cfgs])
        if c.needs is None:
            return c, cfgs, []
        points = (*points, c.needs)


def select(store, choosers: dict, out: Path, jobs: int, label: str) -> dict:
    """{key: Choice} once every grid of ``choosers`` ({key: () -> :func:`grid_choice`'s triple}, in training order)
    is final: each round trains what the grids still need, exporting every run of every grid so far (grown points
    included) to ``out`` after each chunk of ``jobs``."""
    named: list = []
    while True:
        todo, final = [], {}
        for key, choose in choosers.items():
            c, grid, need = choose()
            named += [x for x in grid if x not in named]
            todo += [x for x in need if x not in todo]
            if c is not None:
                final[key] = c
        if not todo:
            return final
        print(f"{label}: {len(todo)} held-out runs to train", flush=True)
        train_exporting(todo, named, Path(out), store, jobs, label)


def fixed_runs(configs_of: Callable, label: str, stage: str = "test") -> Callable:
    """How a study that trains one list of runs, fixed when it was registered, trains: the runs of ``configs_of()``
    that the store lacks, exported to its ``stage`` folder after every chunk (a :class:`Study`'s ``train``)."""
    def train(session: Session, s: Study) -> None:
        train_named(session.store, configs_of(), s.path() / stage, session.jobs, label)
    return train


def train_named(store, configs: list, out: Path, jobs: int, label: str) -> None:
    """Train the runs of ``configs`` that ``store`` lacks and export them all to ``out``."""
    todo = [c for c in configs if not store.has(c)]
    print(f"{label}: {len(configs)} runs, {len(configs) - len(todo)} done", flush=True)
    train_exporting(todo, configs, Path(out), store, jobs, label)
