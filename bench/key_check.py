"""Print the store key of every run each chapter names, per profile, with a stand-in store whose
pilot and selection runs 'exist' (interior choices); and the key of every run each registered study names, read
from the committed tiers (``data/reference/``) and follow-ups (``data/followups/``): the decisive tier's pilot,
selections and stages, every follow-up, and the gpu tier. Used to check that a change to the sweeps or the studies
leaves the keys of existing runs unchanged:

    python bench/key_check.py > before.json   # on the old code
    python bench/key_check.py --compare before.json
"""
import argparse
import contextlib
import io
import json
import math
import shutil
import sys
import tempfile
from pathlib import Path

import pandas as pd

from sec_lib.runs import experiments as ex
from sec_lib.runs.store import run_key
from sec_lib.runs.train import RunResult


class FakeStore:
    """Every run is done; R@1 peaks inside each grid (adam 1e-3, sgd 0.03, η 0.5) so no edge refusal; every run's
    test norms have median 10 (the fixed-scale control's radius, ``experiments.fixed_scale_mu``)."""
    root = "(fake)"

    def get(self, cfg, tables=()):
        target = {"adam": 1e-3, "sgd": 0.03}.get(cfg.optimizer, 1e-3)
        score = -abs(math.log(cfg.lr / target)) - abs(math.log((cfg.eta + 1e-6) / 0.5))
        e = pd.DataFrame()
        norms = pd.DataFrame({"label": [0, 1, 2], "norm": [9.0, 10.0, 11.0], "hit@1": [1, 0, 1]})  # the scale chapter's radius
        return RunResult(cfg, "done", {"R@1": score}, e, e, e, norms, e, e)


class Pending(Exception):
    """Raised where a study would train: what it named so far is recorded, the rest of it waits for those runs."""


class CommittedStore:
    """The committed runs of every stage folder under ``root`` (a copy of the repository's data), read-only; every
    config asked for is recorded (the runs a study reads are keys it depends on)."""

    def __init__(self, root: Path):
        from sec_lib.runs import tier
        self.root = "(committed)"
        self.parts = [tier.TierStore(p.parent) for p in sorted(root.rglob("runs.parquet"))]
        self.asked: set = set()

    def _find(self, cfg):
        key = cfg if isinstance(cfg, str) else run_key(cfg)
        self.asked.add(key)
        return next((t for t in self.parts if t.has_key(key)), None)

    def has(self, cfg) -> bool:
        return self._find(cfg) is not None

    def get(self, cfg, tables=("evals", "steps", "test_norms")):
        t = self._find(cfg)
        return None if t is None else t.get(cfg, tables=tables)


def study_runs() -> dict:
    """{study/folder: sorted keys}: every run each registered study names or reads, driven on a copy of the committed
    data with training replaced by a recorder (a study stops where it would train)."""
    from sec_lib.runs import commands, gpu_tier, study, tier
    from sec_lib.runs import store as store_mod
    from sec_lib.runs import densecurves, longruns, regimeseeds, sgdeta, sgdrates, weightdecay
    tmp = Path(tempfile.mkdtemp(prefix="keycheck-"))
    for part in ("reference", "followups"):
        shutil.copytree(tier.REPO / "data" / part, tmp / "data" / part)
    out: dict = {}
    saved = (tier.REPO, tier.restore, study.train_exporting, commands.ResultStore, store_mod.ResultStore)
    try:
        tier.REPO = tmp
        tier.restore = lambda *a, **k: 0
        followups = {"sgd-rates": sgdrates, "sgd-eta": sgdeta, "dense-curves": densecurves, "longer-runs": longruns,
                     "weight-decay": weightdecay, "regime-seeds": regimeseeds}
        drives = [("decisive", lambda store: commands.decisive_command(jobs=1))]
        drives += [(name, lambda store, m=m: study.run([m.STUDY], jobs=1, store=store)) for name, m in followups.items()]
        for name, drive in drives:
            store = CommittedStore(tmp / "data")

            def record(todo, named, where, *a, **k):
                got = out.setdefault(f"study/{name}/{Path(where).relative_to(tmp)}", set())
                got |= {run_key(c) for c in [*named, *todo]}
                if todo:
                    raise Pending(where)
                return True
            study.train_exporting = record
            commands.ResultStore = store_mod.ResultStore = lambda *a, _s=store, **k: _s
            with contextlib.redirect_stdout(io.StringIO()):
                try:
                    drive(store)
                except Pending:
                    pass
            out[f"study/{name}/read"] = store.asked
        gpu = CommittedStore(tmp / "data" / "reference" / "gpu")
        out["study/gpu"] = {run_key(c) for c in gpu_tier.configs(ex.get_profile("gpu"), gpu)} | gpu.asked
    finally:
        tier.REPO, tier.restore, study.train_exporting, commands.ResultStore, store_mod.ResultStore = saved
        shutil.rmtree(tmp, ignore_errors=True)
    return {k: sorted(v) for k, v in out.items()}


def keys(profiles=("smoke", "cpu")) -> dict:
    out = {}
    for name in profiles:
        for ch in ex.SWEEPS:
            out[f"{name}/{ch}"] = sorted(run_key(c) for c in ex.sweep_configs(ch, name, FakeStore()))
        out[f"{name}/pilot"] = sorted(run_key(c) for c in ex.lr_pilot(ex.get_profile(name)))
    out.update(study_runs())
    return out


def by_study(keys: dict) -> dict:
    """``keys`` with every study's folders and reads as one set (``study/<name>``): a study may read a run where it
    once named it, and the reverse."""
    out: dict = {}
    for k, v in keys.items():
        name = "/".join(k.split("/")[:2]) if k.startswith("study/") else k
        out[name] = sorted({*out.get(name, ()), *v})
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--compare", default=None)
    args = ap.parse_args(argv)
    now = keys()
    if not args.compare:
        json.dump(now, sys.stdout, indent=1)
        return 0
    before, now = by_study(json.load(open(args.compare))), by_study(now)
    bad = 0
    for k, v in before.items():
        lost = set(v) - set(now.get(k, []))
        if lost:
            bad += 1
            print(f"{k}: {len(lost)} of {len(v)} keys changed or gone")
        elif k == k and "selection" in k:
            print(f"{k}: all {len(v)} keys kept ({len(set(now[k]) - set(v))} new)")
    print("keys unchanged" if not bad else f"{bad} chapters changed")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
