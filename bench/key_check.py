"""Print the store key of every run each chapter names, per profile, with a stand-in store whose
pilot and selection runs 'exist' (interior choices). Used to check that a change to
the sweeps (sec_lib/runs/sweeps.py, experiments.py) leaves the keys of existing runs unchanged:

    python bench/key_check.py > before.json   # on the old code
    python bench/key_check.py --compare before.json
"""
import argparse
import json
import math
import sys

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


def keys(profiles=("smoke", "cpu")) -> dict:
    out = {}
    for name in profiles:
        for ch in ex.CHAPTERS:
            out[f"{name}/{ch}"] = sorted(run_key(c) for c in ex.chapter_configs(ch, name, FakeStore()))
        out[f"{name}/pilot"] = sorted(run_key(c) for c in ex.lr_pilot(ex.get_profile(name)))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--compare", default=None)
    args = ap.parse_args(argv)
    now = keys()
    if not args.compare:
        json.dump(now, sys.stdout, indent=1)
        return 0
    before = json.load(open(args.compare))
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
