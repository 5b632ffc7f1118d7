"""Does any verdict depend on the CPU? The portability check of the reproducibility contract (Level 2).

``python -m sec_lib.book portability --sample N`` retrains a stratified sample of the decisive tier's committed
runs of the primary comparison (SEC at the η chosen on held-out classes against no regularizer, the four main
losses: the ``tuned`` chapter) on this machine, and asks:

- how far do retrained runs land from the committed ones (mean and SD of retrained − committed R@1)?
- recomputed with the retrained runs swapped in, does each per-loss estimate and the pooled estimate stay
  inside its committed interval, and does each keep its verdict?

The report is written to ``data/reference/<tier>/portability/<cpu kind>.json`` and the tiers page shows
every report committed there: the decisive tier's, and the one report of the retired reference tier (made before
the kernel pin, on its own primary comparison), kept as the measurement the contract was built on. The sample is
one seed from each arm (loss × {none, SEC}) first, then the next seed of each arm, round-robin, so any ``N``
spreads over the arms.
"""
from __future__ import annotations

import datetime
import json
import re
from pathlib import Path

import pandas as pd

from .. import kernels
from ..report import verdict
from ..runs import experiments as ex
from ..runs import tier as tier_mod
from .common import load, runs_frame
from .compare import sec_gain
from .home import primary_estimate

#: The primary comparison: SEC at the held-out-chosen η against none, on the four main losses.
PRIMARY_CHAPTER = "tuned"
ARMS = ("none", "sec")
METRIC = "R@1"
REPORT_DIR = "portability"


def primary_runs(profile: str = "decisive", root=None) -> pd.DataFrame:
    """The committed runs of the primary comparison: key, loss, variant, seed, R@1."""
    runs = runs_frame(load(PRIMARY_CHAPTER, profile, tables=(), root=root))
    runs = runs[runs["loss"].isin(ex.MAIN_LOSSES) & runs["variant"].isin(ARMS) & (runs["status"] == "done")]
    return runs[["key", "loss", "variant", "seed", METRIC]].reset_index(drop=True)


def stratified_sample(runs: pd.DataFrame, n: int) -> list[str]:
    """``n`` keys: the lowest seed of every arm (loss × variant), then the next seed of each, and so on."""
    if n < 1:
        raise ValueError(f"sample = {n} is not valid; expected an integer >= 1")
    arms = [g.sort_values("seed")["key"].tolist() for _, g in runs.groupby(["loss", "variant"], sort=True)]
    out, depth = [], 0
    while len(out) < n and any(depth < len(a) for a in arms):
        out += [a[depth] for a in arms if depth < len(a)][: n - len(out)]
        depth += 1
    return out


def estimates(runs: pd.DataFrame) -> dict:
    """The primary comparison's estimates from ``runs``: per loss (paired SEC − none, Holm over the four
    losses, with its verdict) and pooled over the losses (:func:`sec_lib.report.pooled_diff`)."""
    g = sec_gain(runs, variants=("sec",), metrics=(METRIC,))
    per_loss = {r.loss: {"estimate": float(r.estimate), "ci_lo": float(r.ci_lo), "ci_hi": float(r.ci_hi),
                         "verdict": r.verdict} for r in g.itertuples()}
    e = primary_estimate(runs)
    pooled = {"estimate": float(e["estimate"]), "ci_lo": float(e["ci_lo"]), "ci_hi": float(e["ci_hi"]),
              "verdict": verdict(e["estimate"], e["ci_lo"], e["ci_hi"], +1, n=e["n"], p_adj=e["p_value"])}
    return {"per_loss": per_loss, "pooled": pooled}


def compare(runs: pd.DataFrame, retrained: dict[str, float]) -> dict:
    """Committed against retrained: the differences, and the estimates with the retrained runs swapped in."""
    sample = runs[runs["key"].isin(retrained)]
    d = pd.Series({k: retrained[k] - float(v) for k, v in zip(sample["key"], sample[METRIC])})
    swapped = runs.assign(**{METRIC: [retrained.get(k, v) for k, v in zip(runs["key"], runs[METRIC])]})
    before, after = estimates(runs), estimates(swapped)
    rows = []
    for name, b, a in [*[(loss, before["per_loss"][loss], after["per_loss"].get(loss)) for loss in before["per_loss"]],
                       ("pooled", before["pooled"], after["pooled"])]:
        rows.append({"estimate": name, "committed": b["estimate"], "ci_lo": b["ci_lo"], "ci_hi": b["ci_hi"],
                     "verdict": b["verdict"], "swapped": a["estimate"], "swapped_verdict": a["verdict"],
                     "inside": bool(b["ci_lo"] <= a["estimate"] <= b["ci_hi"]),
                     "same_verdict": a["verdict"] == b["verdict"]})
    return {"n": int(len(d)), "mean_diff": float(d.mean()), "sd_diff": float(d.std(ddof=1)) if len(d) > 1 else float("nan"),
            "max_abs_diff": float(d.abs().max()), "identical": int((d == 0).sum()), "diffs": d.round(6).to_dict(),
            "estimates": rows}


def slug(kind: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", kind).strip("-")


def report_path(profile: str, kind: str, root=None) -> Path:
    return tier_mod.tier_dir(profile, root) / REPORT_DIR / f"{slug(kind)}.json"


def run_check(profile: str = "decisive", sample: int = 8, jobs: int = 2, root=None) -> dict:
    """Retrain ``sample`` runs of the primary comparison here and write the report (returned)."""
    runs = primary_runs(profile)
    keys = stratified_sample(runs, sample)
    got = tier_mod.retrain(keys, tier_mod.tier_dir(profile, root), jobs)
    here = kernels.this_kind()
    rep = {"profile": profile, "cpu_kind": here, "cpu": kernels.cpu_info(),
           "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "keys": keys, **compare(runs, {k: v[0] for k, v in got.items()})}
    rep = with_committed_kinds(rep, profile, root)
    path = report_path(profile, here, root)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(rep, indent=1, sort_keys=True))
    tmp.replace(path)
    return rep


def with_committed_kinds(rep: dict, profile: str = "decisive", root=None) -> dict:
    """``rep`` with ``committed_kinds``: the CPU kind of each retrained run's committed row, as the tier knows it
    now (its own column, else ``kinds.csv``), counted: ``{kind: runs}``."""
    t = tier_mod.open_tier(tier_mod.tier_dir(profile, root))
    kinds = pd.Series([tier_mod.committed_kind(t, k) for k in rep["keys"]]).value_counts()
    return {**rep, "committed_kinds": {str(k): int(v) for k, v in kinds.items()}}


def sentence(rep: dict) -> str:
    """One computed sentence on a report."""
    changed = [f"{r['estimate']} ({r['verdict']} → {r['swapped_verdict']})" for r in rep["estimates"]
               if not r["same_verdict"]]
    outside = [r["estimate"] for r in rep["estimates"] if not r["inside"]]
    kinds = rep["committed_kinds"]
    kinds = ", ".join(f"{v} on {k}" for k, v in kinds.items()) if isinstance(kinds, dict) else ", ".join(kinds)
    s = (f"On {rep['cpu_kind']}, {rep['n']} retrained runs of the primary comparison (committed: {kinds}) landed {rep['mean_diff']:+.2f} R@1 from the committed ones on average "
         f"(SD {rep['sd_diff']:.2f}, largest {rep['max_abs_diff']:.2f}; {rep['identical']} identical). ")
    s += ("No verdict changed" if not changed else f"The verdict changed for {'; '.join(changed)}")
    s += ((", and" if not changed else ", though") + " every estimate stayed inside its committed interval." if not outside
          else f"; outside the committed interval: {', '.join(outside)}.")
    return s


def reports(profile: str = "decisive", root=None) -> list[dict]:
    """Every committed portability report of ``profile``."""
    d = tier_mod.tier_dir(profile, root) / REPORT_DIR
    return [json.loads(p.read_text()) for p in sorted(d.glob("*.json"))] if d.is_dir() else []


def reports_table(reps: list[dict]) -> pd.DataFrame:
    """One row per report and estimate: committed and swapped-in estimate, interval, verdicts."""
    cols = ["estimate", "committed", "ci_lo", "ci_hi", "verdict", "swapped", "swapped_verdict", "inside", "same_verdict"]
    rows = [{"cpu kind": r["cpu_kind"], "runs retrained": r["n"], **{c: e[c] for c in cols}}
            for r in reps for e in r["estimates"]]
    return pd.DataFrame(rows, columns=["cpu kind", "runs retrained", *cols])
