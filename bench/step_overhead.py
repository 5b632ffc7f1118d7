"""What SEC and the instrumentation cost per training step, measured in one run.

    python bench/step_overhead.py [--profile cpu] [--loss semihard] [--steps 60] [--threads 1] [--device cpu]

Trains the same config four ways (plain, +SEC, +instrumentation, +both), interleaving the
variants over several rounds so that machine load affects them alike, and prints the median
step time of each and the ratios SEC/plain and instrumented/plain.
"""
import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sec_lib.runs import experiments as ex  # noqa: E402
from sec_lib.runs.train import train  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default="cpu", choices=ex.PROFILE_NAMES)
    ap.add_argument("--loss", default="semihard", choices=ex.MAIN_LOSSES)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default=None, help="default: the profile's device")
    args = ap.parse_args()
    p = ex.get_profile(args.profile)
    base = ex.config(p, args.loss, "none", 0, iterations=args.steps, eval_every=0, track_samples=0,
                     num_threads=args.threads, **({"device": args.device} if args.device else {}))
    variants = {
        "plain": base.replace(instrument=False),
        "sec": base.replace(instrument=False, eta=ex.ETA_SEC[args.loss]),
        "instrumented": base.replace(instrument=True),
        "sec+instrumented": base.replace(instrument=True, eta=ex.ETA_SEC[args.loss]),
    }
    times = {k: [] for k in variants}
    for _ in range(args.rounds):
        for name, cfg in variants.items():
            r = train(cfg)
            times[name].extend(r.steps["step_time"].iloc[5:].tolist())   # skip warm-up steps
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"profile={args.profile} loss={args.loss} device={base.device} threads={args.threads} "
          f"batch={base.batch_size} steps={args.steps} x {args.rounds} rounds")
    for k, v in med.items():
        print(f"  {k:18s} median step {v * 1000:7.2f} ms")
    print(f"ratio SEC / plain:              {med['sec'] / med['plain']:.3f}")
    print(f"ratio instrumented / plain:     {med['instrumented'] / med['plain']:.3f}")
    print(f"ratio SEC+instrumented / plain: {med['sec+instrumented'] / med['plain']:.3f}")


if __name__ == "__main__":
    main()
