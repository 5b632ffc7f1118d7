"""Does any verdict depend on the CPU? The portability check of the reproducibility contract (Level 2).

``python -m sec_lib.book portability --sample N`` retrains a stratified sample of the decisive tier's committed
runs of the primary comparison (SEC at the η chosen on held-out classes against no regularizer, the four main
losses: the ``tuned`` chapter) on this machine, and asks:

- how far do retrained runs land from the committed ones (mean and SD of retrained − committed R@1)?
- recomputed with the retrained runs swapped in, does each per-loss estimate and the pooled estimate stay
  inside its committed interval, and does each keep its verdict?
- which retrained runs are the committed ones bit for bit: the same final R@1, and (reports made since the table
  hashes, :data:`TABLES_KEY`) the same step and evaluation tables, hashed as the tier keeps them
  (:func:`sec_lib.runs.tier.table_hash`)? A report made before them compared the final R@1 only, and says so.

The report is written to ``data/reference/<tier>/portability/<cpu kind>.json`` and the tiers page shows
every report committed there (:func:`page`): the decisive tier's (``Intel-AVX2-avx2.json``: an Intel Xeon, from a
fresh clone of ``c38b8f1``, on 2026-11-29; its README), and the one report of the retired reference tier (made
before the kernel pin, on its own primary comparison), kept as the measurement the contract was built on.
:func:`findings` states what both tiers' reports found for the verdicts in one paragraph, each tier named, for the
pages where a reader meets the verdicts. The sample is one seed from each arm (loss × {none, SEC}) first, then the
next seed of each arm, round-robin, so any ``N`` spreads over the arms.
"""
from __future__ import annotations

import datetime
import json
import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from .. import kernels
from ..figures.tables import fold_columns
from .. import reference
from ..report import refine, verdict
from ..runs import experiments as ex
from ..runs import tier as tier_mod
from ..analysis.primary import primary_estimate
from ..analysis.tiers import tier_label
from .common import load, runs_frame
from .gains import paper_sizes, sec_gain

#: The primary comparison: SEC at the held-out-chosen η against none, on the four main losses.
PRIMARY_CHAPTER = "tuned"
ARMS = ("none", "sec")
METRIC = "R@1"
REPORT_DIR = "portability"
#: A report's per-run table comparison: ``{key: {steps_hash, committed_steps_hash, steps_identical, steps_differ,
#: evals_hash, ..., evals_differ}}`` (``*_differ``: the columns whose values differ; absent from reports made before
#: the hashes).
TABLES_KEY = "tables"


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
              "verdict": verdict(e["estimate"], e["ci_lo"], e["ci_hi"], +1, n=e["n"], p_adj=e["p_value"],
                                 paper=paper_values("pooled"))}
    return {"per_loss": per_loss, "pooled": pooled}


def paper_values(estimate: str) -> list:
    """The paper's Table 1 R@1 gains of SEC over none that an estimate's verdict is sized against, as the scorecard
    sizes the same estimate (C4v pooled over every main loss's, C4a-d each loss's own): [] where the reference is
    absent (the words then keep the signal alone)."""
    try:
        if estimate == "pooled":
            return reference.paper_gain_values("none", "sec")
        return paper_sizes(estimate, "sec")
    except (FileNotFoundError, KeyError):
        return []


def table_comparison(retrained: dict[str, dict], committed: dict[str, dict]) -> dict[str, dict]:
    """Per run, the retrained and the committed tables' hashes (each ``{key: {"steps_hash", "steps_columns",
    "evals_hash", "evals_columns"}}``: :func:`sec_lib.runs.tier.result_hashes`), whether each table is identical,
    and the columns whose values differ (a column only one side has among them): the report's :data:`TABLES_KEY`.
    A committed table the tier does not hold (hash None) is not identical to anything."""
    out = {}
    for k, got in retrained.items():
        c = committed.get(k, {})
        row = {}
        for name in tier_mod.HASHED_TABLES:
            mine, theirs = got.get(f"{name}_hash"), c.get(f"{name}_hash")
            a, b = got.get(f"{name}_columns") or {}, c.get(f"{name}_columns") or {}
            row.update({f"{name}_hash": mine, f"committed_{name}_hash": theirs,
                        f"{name}_identical": bool(mine is not None and mine == theirs),
                        f"{name}_differ": sorted(col for col in set(a) | set(b) if a.get(col) != b.get(col))})
        out[k] = row
    return out


def compare(runs: pd.DataFrame, retrained: dict[str, float], tables: dict[str, dict] | None = None) -> dict:
    """Committed against retrained: the differences, and the estimates with the retrained runs swapped in; with
    ``tables`` (:func:`table_comparison`), each run's table hashes and how many runs are the committed ones bit for
    bit (``identical_tables``: the same R@1, step table and evaluation table)."""
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
    rep = {"n": int(len(d)), "mean_diff": float(d.mean()),
           "sd_diff": float(d.std(ddof=1)) if len(d) > 1 else float("nan"), "max_abs_diff": float(d.abs().max()),
           "identical": int((d == 0).sum()), "diffs": d.round(6).to_dict(), "estimates": rows}
    if tables is not None:
        rep[TABLES_KEY] = {k: tables[k] for k in d.index if k in tables}
        rep["identical_tables"] = int(sum(d[k] == 0 and all(tables.get(k, {}).get(f"{t}_identical", False)
                                                           for t in tier_mod.HASHED_TABLES) for k in d.index))
    return rep


def slug(kind: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", kind).strip("-")


def report_path(profile: str, kind: str, root=None) -> Path:
    return tier_mod.tier_dir(profile, root) / REPORT_DIR / f"{slug(kind)}.json"


def run_check(profile: str = "decisive", sample: int = 8, jobs: int = 2, root=None, progress=None) -> dict:
    """Retrain ``sample`` runs of the primary comparison here and write the report (returned). ``progress(n)``:
    called with the steps trained since its last call (:func:`sec_lib.runs.tier.retrain`), for a progress bar."""
    runs = primary_runs(profile)
    keys = stratified_sample(runs, sample)
    d = tier_mod.tier_dir(profile, root)
    got = tier_mod.retrain(keys, d, jobs, progress=progress)
    t = tier_mod.open_tier(d)
    tables = table_comparison({k: v._asdict() for k, v in got.items()},
                              {k: tier_mod.committed_hashes(t, k) for k in keys})
    here = kernels.this_kind()
    rep = {"profile": profile, "cpu_kind": here, "cpu": kernels.cpu_info(),
           "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "keys": keys, **compare(runs, {k: v.r1 for k, v in got.items()}, tables)}
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


def run_names(profile: str, keys, root=None) -> dict[str, str]:
    """``{key: "loss variant seed N"}`` of committed runs, from their tier's rows (the key itself where the tier or
    the row is missing)."""
    try:
        rows = tier_mod.open_tier(tier_mod.tier_dir(profile, root)).runs.set_index("key")
    except FileNotFoundError:
        rows = pd.DataFrame()
    return {k: f"{rows.at[k, 'loss']} {rows.at[k, 'variant']} seed {int(rows.at[k, 'seed'])}" if k in rows.index
            else k for k in keys}


def tables_words(rep: dict, root=None) -> str:
    """What a report says of the retrained runs' tables: how many gave the committed step and evaluation tables bit
    for bit (by hash), or, for a report made before the hashes, that it compared the final R@1 only."""
    if TABLES_KEY not in rep:
        return ("The report predates the table hashes: it compared the final R@1 only, not the step and evaluation "
                "tables.")
    tables, diffs = rep[TABLES_KEY], rep["diffs"]
    same_r1 = [k for k, d in diffs.items() if d == 0]
    other = [k for k in same_r1 if not all(tables.get(k, {}).get(f"{t}_identical", False)
                                           for t in tier_mod.HASHED_TABLES)]
    s = (f"Compared by hash, {rep['identical_tables']} of {rep['n']} also gave the committed step and evaluation "
         "tables bit for bit")
    if other:
        names = run_names(rep.get("profile", "decisive"), other, root)
        s += f"; {len(other)} with the committed R@1 did not ({', '.join(names[k] for k in other)})"
    return s + "." + differ_words(tables)


def differ_words(tables: dict) -> str:
    """Where retrained tables differed from the committed ones: for each table, the columns that differed and in how
    many runs (empty where none did, or where the report has no per-column hashes)."""
    parts = []
    for name, label in (("steps", "step"), ("evals", "evaluation")):
        rows = [t for t in tables.values() if not t.get(f"{name}_identical", True)]
        cols = pd.Series([c for t in rows for c in t.get(f"{name}_differ", [])], dtype=object).value_counts()
        parts += [f"{c} of the {label} table ({n} run{'s' if n > 1 else ''})" for c, n in cols.items()]
    return f" The columns that differed: {', '.join(parts)}." if parts else ""


def sentence(rep: dict, root=None) -> str:
    """The computed sentences on a report: the shift of the final R@1 (mean, SD, largest), how many runs gave the
    committed R@1 exactly (and which did not, where some did), their tables (:func:`tables_words`), and whether
    any verdict changed or any estimate left its committed interval."""
    changed = [f"{r['estimate']} ({r['verdict']} → {r['swapped_verdict']})" for r in rep["estimates"]
               if not r["same_verdict"]]
    outside = [r["estimate"] for r in rep["estimates"] if not r["inside"]]
    kinds = rep["committed_kinds"]
    kinds = ", ".join(f"{v} on {k}" for k, v in kinds.items()) if isinstance(kinds, dict) else ", ".join(kinds)
    n, sd = rep["n"], rep["sd_diff"]
    spread = f"SD {sd:.2f}, " if sd == sd else ""
    s = (f"On {rep['cpu_kind']}, {n} retrained runs of the primary comparison (committed: {kinds}) landed "
         f"{rep['mean_diff']:+.2f} R@1 from the committed ones on average ({spread}largest {rep['max_abs_diff']:.2f}); "
         f"{rep['identical']} of {n} gave the committed final R@1 exactly")
    differ = {k: d for k, d in rep["diffs"].items() if d != 0}
    if 0 < rep["identical"] < n:
        names = run_names(rep.get("profile", "decisive"), differ, root)
        s += f", the other {len(differ)} did not: " + ", ".join(f"{names[k]} ({d:+.2f})" for k, d in differ.items())
    s += ". " + tables_words(rep, root) + " "
    s += ("No verdict changed" if not changed else f"The verdict changed for {'; '.join(changed)}")
    s += ((", and" if not changed else ", though") + " every estimate stayed inside its committed interval." if not outside
          else f"; outside the committed interval: {', '.join(outside)}.")
    return s


def reports(profile: str = "decisive", root=None) -> list[dict]:
    """Every committed portability report of ``profile``, its verdict words as the book decides them now
    (:func:`in_todays_words`)."""
    d = tier_mod.tier_dir(profile, root) / REPORT_DIR
    raw = [json.loads(p.read_text()) for p in sorted(d.glob("*.json"))] if d.is_dir() else []
    if not raw:
        return []
    try:                      # the committed tier's runs; a report whose keys they do not hold is sized on its own
        runs = primary_runs(profile)
    except KeyError:          # the retired tier: its learning-rate pilot is not in the store
        runs = None
    return [in_todays_words(rep, runs) for rep in raw]


def in_todays_words(rep: dict, runs: pd.DataFrame | None) -> dict:
    """``rep`` with its estimates' verdict words decided by today's rule, the words every other page uses: a report
    keeps the words of the day it was written, and the reports predate the sizing against the paper's gains (a
    signal whose whole interval lies below the paper's smallest gain reads *smaller than claimed*).

    With the tier's primary ``runs``, every estimate is recomputed (:func:`compare`) from the committed runs and the
    report's shifts (retrained = committed + shift; the report keeps each shift to 6 decimals). Without them (the
    retired tier, whose learning-rate pilot the store does not hold), each word is sized on the report's own
    numbers (:func:`sec_lib.report.refine`): the committed word on its committed interval. A retrained word needs
    no sizing unless it reads *reproduced*, and then its interval, which no report keeps, would be needed: such a
    report is refused (ValueError) rather than shown in a word that may not be today's."""
    if runs is not None and set(rep["diffs"]) <= set(runs["key"]):
        r1 = dict(zip(runs["key"], runs[METRIC]))
        return {**rep, "estimates": compare(runs, {k: r1[k] + d for k, d in rep["diffs"].items()})["estimates"]}
    rows = []
    for e in rep["estimates"]:
        if e["swapped_verdict"] == "reproduced":
            raise ValueError(f"the {e['estimate']} estimate of the {rep.get('profile')} report on {rep['cpu_kind']} "
                             "reads reproduced with the retrained runs, and its retrained interval is not kept: it "
                             "cannot be sized without the tier's runs")
        word = refine(e["verdict"], e["ci_lo"], e["ci_hi"], +1, paper_values(e["estimate"]) or None)
        rows.append({**e, "verdict": word, "same_verdict": word == e["swapped_verdict"]})
    return {**rep, "estimates": rows}


def reports_table(reps: list[dict]) -> pd.DataFrame:
    """One row per report and estimate: committed and swapped-in estimate, interval, verdicts."""
    cols = ["estimate", "committed", "ci_lo", "ci_hi", "verdict", "swapped", "swapped_verdict", "inside", "same_verdict"]
    rows = [{"cpu kind": r["cpu_kind"], "runs retrained": r["n"], **{c: e[c] for c in cols}}
            for r in reps for e in r["estimates"]]
    return pd.DataFrame(rows, columns=["cpu kind", "runs retrained", *cols])


#: The columns of :func:`overview_table`.
OVERVIEW_COLUMNS = ("tier", "CPU kind", "date", "committed on", "runs retrained", "R@1 identical", "mean R@1 shift",
                    "SD of the shift", "largest |shift|", "tables identical", "verdicts changed",
                    "estimates outside their interval")
#: :func:`overview_table`'s "tables identical" for a report made before the table hashes.
NOT_COMPARED = "not compared (R@1 only)"


def overview_table(reps: list[dict]) -> pd.DataFrame:
    """One row per report, side by side: the tier and CPU kind, how many runs it retrained and how many gave the
    committed final R@1 exactly, the mean, SD and largest absolute shift of the R@1 (retrained − committed, points),
    how many gave identical step and evaluation tables (:data:`NOT_COMPARED` for a report made before the hashes),
    and how many estimates changed verdict or left their committed interval."""
    rows = []
    for r in reps:
        kinds = r["committed_kinds"]
        rows.append({"tier": tier_label(r.get("profile", "reference")), "CPU kind": r["cpu_kind"],
                     "date": str(r.get("date", ""))[:10],
                     "committed on": ", ".join(f"{k} ({v})" for k, v in kinds.items()) if isinstance(kinds, dict)
                     else ", ".join(kinds),
                     "runs retrained": int(r["n"]), "R@1 identical": int(r["identical"]),
                     "mean R@1 shift": float(r["mean_diff"]), "SD of the shift": float(r["sd_diff"]),
                     "largest |shift|": float(r["max_abs_diff"]),
                     "tables identical": (f"{r['identical_tables']} of {r['n']}" if TABLES_KEY in r else NOT_COMPARED),
                     "verdicts changed": int(sum(not e["same_verdict"] for e in r["estimates"])),
                     "estimates outside their interval": int(sum(not e["inside"] for e in r["estimates"]))})
    return pd.DataFrame(rows, columns=list(OVERVIEW_COLUMNS))


def runs_table(rep: dict, root=None) -> pd.DataFrame:
    """One row per retrained run of a report: which run, its R@1 shift, whether its final R@1 and (reports made
    since the hashes) its step and evaluation tables are the committed ones exactly (None: not compared), and the
    columns that differ."""
    names = run_names(rep.get("profile", "decisive"), rep["diffs"], root)
    tables = rep.get(TABLES_KEY, {})
    rows = [{"key": k, "run": names[k], "R@1 shift": float(d), "R@1 identical": d == 0,
             **{f"{t} identical": (tables[k][f"{t}_identical"] if k in tables else None)
                for t in tier_mod.HASHED_TABLES},
             "columns that differ": "; ".join(f"{t}: {', '.join(tables[k].get(f'{t}_differ', []))}"
                                              for t in tier_mod.HASHED_TABLES
                                              if k in tables and tables[k].get(f"{t}_differ"))}
            for k, d in rep["diffs"].items()]
    return pd.DataFrame(rows, columns=["key", "run", "R@1 shift", "R@1 identical",
                                       *[f"{t} identical" for t in tier_mod.HASHED_TABLES], "columns that differ"])


@dataclass(frozen=True)
class Section:
    """One report on the page: its sentences, its estimates table, the table's name and caption."""
    sentence: str
    table: pd.DataFrame
    name: str
    caption: str


@dataclass(frozen=True)
class Reports:
    """The tiers page's portability section (:func:`page`)."""
    sentence: str
    overview: pd.DataFrame
    caption: str
    sections: tuple


def summary_sentence(decisive: list[dict]) -> str:
    """The section's first sentence: the decisive tier's reports, whether any verdict changed, how many runs gave
    the committed final R@1 exactly."""
    if not decisive:
        return ("No portability report of the decisive tier is committed yet (`python -m sec_lib.book portability` "
                "on a machine of another CPU kind makes one).")
    kinds = sorted({r["cpu_kind"] for r in decisive})
    changed = sum(not e["same_verdict"] for r in decisive for e in r["estimates"])
    n, same = sum(r["n"] for r in decisive), sum(r["identical"] for r in decisive)
    return (f"The decisive tier's primary comparison was retrained on {len(kinds)} CPU "
            f"kind{'s' if len(kinds) > 1 else ''} ({', '.join(kinds)}) in {len(decisive)} "
            f"report{'s' if len(decisive) > 1 else ''}: "
            + ("no verdict changed" if not changed else f"{changed} verdict{'s' if changed > 1 else ''} changed")
            + f", and {same} of its {n} retrained runs gave the committed final R@1 exactly.")


def page(profiles=("decisive", *tier_mod.RETIRED_TIERS), root=None) -> Reports:
    """Every committed report of ``profiles`` (the decisive tier's first, the retired tier's last): the section's
    first sentence, the reports side by side (:func:`overview_table`), and per report its sentences and its
    estimates recomputed with the retrained runs swapped in."""
    by_profile = {p: reports(p, root) for p in profiles}
    reps = [r for p in profiles for r in by_profile[p]]
    sections = []
    for rep in reps:
        name = rep.get("profile", "reference")
        label = tier_label(name)
        # the CPU kind and the count are the same on every row (the caption says them): folded under the table
        table = fold_columns(reports_table([rep]), ["estimate"],
                             {"The report's CPU kind and runs retrained": ["cpu kind", "runs retrained"]})
        sections.append(Section(f"*The {label} tier.* " + sentence(rep, root), table,
                                f"portability_{name}_{slug(rep['cpu_kind'])}",
                                f"The {label} tier's primary comparison recomputed with {rep['n']} runs "
                                f"retrained on {rep['cpu_kind']}"))
    caption = ("Every committed portability report, one row per report (the retired tier's, made before the kernel "
               "pin, last). R@1 shift: retrained − committed final R@1, points; tables identical: runs whose step and "
               f"evaluation tables hash as the committed ones do, or \"{NOT_COMPARED}\" for a report made before the "
               "hashes")
    # the report's provenance and the spread of the shift: folded under the table, so that it fits the text column
    overview = fold_columns(overview_table(reps), ["tier", "CPU kind"],
                            {"When, and against which committed runs": ["date", "committed on"],
                             "The spread of the shift, and the estimates": ["SD of the shift", "largest |shift|",
                                                                            "estimates outside their interval"]})
    return Reports(summary_sentence(by_profile.get("decisive", [])), overview, caption, tuple(sections))


# -- the findings, where the reader meets the verdicts ------------------------------------------------------------

def vendor(kind: str) -> str:
    """The vendor of a CPU kind: ``"AMD/AVX2/avx2"`` -> ``"AMD"``."""
    return str(kind).split("/")[0]


def machine_words(rep: dict) -> str:
    """The CPU a report retrained on, in words: its model without trademarks and without a bare "Processor"
    ("an Intel Xeon", "an AMD EPYC"), else its vendor ("an Intel CPU")."""
    model = re.sub(r"\((?:R|TM)\)|\bProcessor\b|\bCPU\b", " ", str(rep.get("cpu", {}).get("cpu_model") or ""))
    model = " ".join(model.split()) or f"{vendor(rep['cpu_kind'])} CPU"
    return ("an " if model[0].lower() in "aeiou" else "a ") + model


def committed_vendors(rep: dict) -> list[str]:
    """The vendors of the CPUs the retrained runs were committed from (:func:`with_committed_kinds`), sorted."""
    kinds = rep["committed_kinds"]
    return sorted({vendor(k) for k in (kinds if isinstance(kinds, (dict, list)) else [kinds])})


def where_words(rep: dict) -> str:
    """Where a report's runs were retrained: "on an Intel Xeon", or "on another AMD CPU (an AMD EPYC)" where its
    vendor is the one the runs were trained on."""
    here = vendor(rep["cpu_kind"])
    if committed_vendors(rep) == [here]:
        return f"on another {here} CPU ({machine_words(rep)})"
    return f"on {machine_words(rep)}"


def estimate_words(name: str) -> str:
    """A report's estimate in words: "the pooled estimate over the losses", or "the triplet loss's estimate"."""
    return "the pooled estimate over the losses" if name == "pooled" else f"the {name} loss's estimate"


def changed_verdicts(reps: list[dict]) -> list[dict]:
    """The estimates of ``reps`` whose verdict changed with the retrained runs swapped in."""
    return [e for r in reps for e in r["estimates"] if not e["same_verdict"]]


def outcome_words(reps: list[dict]) -> str:
    """What the reports found for the verdicts: "no verdict changed, and every estimate stayed inside its committed
    interval", or which verdicts changed ("the verdict of the pooled estimate over the losses changed from reproduced
    to inconclusive (1 of 5 verdicts), though every estimate stayed inside its committed interval")."""
    estimates = [e for r in reps for e in r["estimates"]]
    changed = changed_verdicts(reps)
    outside = sum(not e["inside"] for e in estimates)
    inside = ("every estimate stayed inside its committed interval" if not outside else
              f"{outside} of {len(estimates)} estimates left their committed interval")
    if not changed:
        return f"no verdict changed, and {inside}"
    each = "; ".join(f"the verdict of {estimate_words(e['estimate'])} changed from {e['verdict']} to "
                     f"{e['swapped_verdict']}" for e in changed)
    return f"{each} ({len(changed)} of {len(estimates)} verdicts), {'though' if not outside else 'and'} {inside}"


def tier_finding(profile: str, reps: list[dict], role: str) -> str:
    """One sentence on one tier's portability reports: the tier named (with ``role``, what the verdicts make of
    it), whether its verdicts held, how many of its runs of the main comparison were retrained where, and what
    happened to the verdicts; where none is committed, that nothing is measured."""
    label = tier_label(profile)
    if not reps:
        return (f"The **{label} tier**, {role}: no portability report of it is committed, so whether its verdicts "
                "hold on another CPU is not measured here.")
    trained = sorted({v for r in reps for v in committed_vendors(r)})
    first, *more = reps
    where = f"{first['n']} of its runs of the main comparison (SEC against no regularizer), trained on " \
            f"{' and '.join(trained)} CPUs, were retrained {where_words(first)}" \
            + "".join(f", and {r['n']} {where_words(r)}" for r in more)
    held = "did not hold" if changed_verdicts(reps) else "held"
    return f"The **{label} tier**, {role}, {held}: {where}; {outcome_words(reps)}."


#: How :func:`findings` opens where it stands as a paragraph of its own.
FINDINGS_QUESTION = "**Do the verdicts depend on the computer?**"


def findings(root=None, question: bool = True) -> str:
    """The portability findings in one short paragraph, for the pages where a reader meets the verdicts: the
    decisive tier's (every verdict reads it) and the retired reference tier's (trained before the kernel pin; no
    verdict reads it), each named, each computed from its committed reports (:func:`reports`); ``question``: opened
    by :data:`FINDINGS_QUESTION`."""
    decisive, retired = tier_mod.STAGED_TIERS[0], tier_mod.RETIRED_TIERS[0]
    return ((FINDINGS_QUESTION + " " if question else "")
            + tier_finding(decisive, reports(decisive, root), "which every verdict of the book reads") + " "
            + tier_finding(retired, reports(retired, root),
                           "trained before the kernel settings were pinned and read by no verdict"))
