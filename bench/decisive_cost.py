"""The decisive tier's cost plan at a run length, from the seconds its committed pilot runs took.

    python bench/decisive_cost.py [--length 13500] [--n-main 9] [--out data/reference/decisive/COST_PLAN.txt]

Reads ``data/reference/decisive/pilot/runs.parquet``: each run's wall time (``wall_s``, two runs training at
once on the machine's two cores) over its iterations gives seconds per 1,000 iterations; their median per CPU
model (the ISA flags tell the AVX2-only EPYC from the AVX-512 one) prices the stages of
``sec_lib.runs.plan.stages`` (``plan.cost_plan``): runs, core-hours, wall hours on 2 cores, cumulated in
training order. Runs that trained beside other work (tests, builds) were slower, so the median, not the mean.
``--n-main`` is the primary arms' seed count until the plan (``plan.json``) fixes it. Prints the tables and,
with ``--out``, writes them there too.
"""
import argparse
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sec_lib.runs import pilot, plan  # noqa: E402
from sec_lib.runs.store import run_key  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
PILOT = REPO / "data" / "reference" / "decisive" / "pilot" / "runs.parquet"


def seconds_per_kiter(runs: pd.DataFrame) -> pd.DataFrame:
    """Per CPU (vendor, ISA flags): runs, median and IQR of wall seconds per 1,000 iterations."""
    r = runs.assign(s_per_kiter=runs["wall_s"] / runs["iterations"] * 1000,
                    cpu=runs["cpu_vendor"] + " " + runs["cpu_isa"].str.contains("avx512f").map(
                        {True: "AVX-512", False: "AVX2 only"}))
    g = r.groupby("cpu")["s_per_kiter"]
    return pd.DataFrame({"runs": g.size(), "median": g.median(), "q25": g.quantile(0.25),
                         "q75": g.quantile(0.75)}).reset_index()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--length", type=int, default=13500, help="iterations per run of the tier (default 13500)")
    ap.add_argument("--n-main", type=int, default=9, help="seeds of the primary arms (default 9, the README's estimate)")
    ap.add_argument("--out", type=Path, default=None, help="also write the output to this file")
    a = ap.parse_args(argv)
    if a.length < 1 or a.n_main < 2:
        ap.error(f"--length must be >= 1 and --n-main >= 2; got {a.length} and {a.n_main}")
    if not PILOT.exists():
        ap.error(f"{PILOT} does not exist: the pilot has no committed runs yet")
    runs = pd.read_parquet(PILOT)
    speed = seconds_per_kiter(runs[runs["status"] == "done"])
    every = pilot.configs(pairs=len(pilot.LENGTH_PAIRS))          # the whole registered pilot, four pairs
    done = set(runs["key"])
    todo = [c.iterations for c in every if run_key(c) not in done]
    lines = [f"decisive tier cost plan: {a.length:,} iterations a run, {a.n_main} seeds in the primary arms "
             f"(from {PILOT.relative_to(REPO)}: {len(runs)} of the pilot's {len(every)} runs committed; the "
             f"pilot's core-seconds are theirs plus the {len(todo)} runs to go at each CPU's median)", "",
             "wall seconds per 1,000 iterations (two runs at once on 2 cores):", speed.round(1).to_string(index=False)]
    for row in speed.itertuples(index=False):
        pilot_s = float(runs["wall_s"].sum()) + sum(todo) / 1000 * float(row.median)   # one core per run
        df = plan.cost_plan(a.n_main, a.length, float(row.median), pilot_s, pilot_runs=len(every))
        lines += ["", f"at the median of the {row.cpu} EPYC ({row.median:.1f} s per 1,000 iterations):",
                  df.round(1).to_string(index=False),
                  f"total: {int(df['runs'].sum())} runs, {df['core_hours'].sum():,.0f} core-hours, "
                  f"{df['wall_hours_2_cores'].sum():,.0f} wall hours on 2 cores"]
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if a.out is not None:
        tmp = a.out.with_suffix(a.out.suffix + ".tmp")
        tmp.write_text(text)
        tmp.replace(a.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
