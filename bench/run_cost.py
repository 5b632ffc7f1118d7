"""Where a reference run's time goes: training steps, instrumentation, periodic evaluations, set-up and the
final evaluation, measured in one process, and what a 5,000-iteration run costs at each evaluation spacing.

    python bench/run_cost.py [--profile reference] [--loss ms] [--steps 300] [--rounds 3]

Trains the same config five ways, interleaved over rounds so that machine load affects them alike:

    plain:       N steps, no instrumentation, no periodic evaluation (the final one only)
    long:        2N steps, otherwise as plain          -> one training step = (long - plain) / N
    instrumented: N steps with the instrumentation     -> instrumentation per step = (instrumented - plain) / N
    stats every 20: the same, batch statistics every 20 steps (stats_every=20) -> the thinned instrumentation
    evaluated:   N steps, evaluated every N/2 as well  -> one periodic evaluation = (evaluated - instrumented) / 2
    one step:    1 step                                -> set-up + final evaluation (+ one step)

after one warm-up run (the first run in a process loads the data set), and prints each median wall time, the derived costs, and the projected wall time of one run of 5,000
iterations with the instrumentation and a periodic evaluation every 250, 500 or 1,000 iterations.
"""
import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sec_lib import kernels  # noqa: E402
from sec_lib.runs import experiments as ex  # noqa: E402
from sec_lib.runs.train import train  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default="reference")
    ap.add_argument("--loss", default="ms")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    n = args.steps
    p = ex.get_profile(args.profile)
    base = ex.config(p, args.loss, "sec", 0, iterations=n, eval_every=0, num_threads=1)
    plain = base.replace(instrument=False, track_samples=0)
    variants = {"plain": plain, "long": plain.replace(iterations=2 * n), "instrumented": base,
                "stats every 20": base.replace(stats_every=20),
                "evaluated": base.replace(eval_every=n // 2), "one step": plain.replace(iterations=1)}
    walls = {k: [] for k in variants}
    train(variants["one step"])            # warm-up: the first run in a process loads and caches the data set
    for _ in range(args.rounds):
        for name, cfg in variants.items():
            t0 = time.perf_counter()
            r = train(cfg)
            assert r.status == "done", r.error
            walls[name].append(time.perf_counter() - t0)
    w = {k: statistics.median(v) for k, v in walls.items()}
    step = (w["long"] - w["plain"]) / n
    instr = (w["instrumented"] - w["plain"]) / n
    thin = (w["stats every 20"] - w["plain"]) / n
    evals = (w["evaluated"] - w["instrumented"]) / 2
    fixed = w["one step"] - step
    print(f"cpu kind {kernels.this_kind()}; profile={args.profile} loss={args.loss} (SEC) batch={base.batch_size} "
          f"N={n} steps, {args.rounds} rounds, one thread")
    for k, v in w.items():
        print(f"  {k:13s} median wall {v:7.1f} s")
    print(f"one training step            {step * 1000:7.1f} ms")
    print(f"instrumentation per step     {instr * 1000:7.1f} ms ({instr / step:.0%} of a step)")
    print(f"  ... with stats_every=20    {thin * 1000:7.1f} ms ({thin / step:.0%} of a step)")
    print(f"one periodic evaluation      {evals:7.2f} s")
    print(f"set-up + final evaluation    {fixed:7.1f} s")
    for label, per in (("stats every step", instr), ("stats every 20", thin)):
        for every in (250, 500, 1000):
            total = fixed + 5000 * (step + per) + (5000 // every) * evals
            print(f"5,000 iterations, {label:16s}, evaluated every {every:4d}: {total:6.0f} s "
                  f"(steps {5000 * step / total:.0%}, instrumentation {5000 * per / total:.0%}, "
                  f"evaluations {(5000 // every) * evals / total:.0%}, set-up and final {fixed / total:.0%})")


if __name__ == "__main__":
    main()
