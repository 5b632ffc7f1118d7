"""The host's work per training step, counted: the torch operations one step of the gpu profile's run dispatches
(top-level ATen calls, from torch.profiler), with the monitor's statistics every step (the profile's setting), every
10 steps, and without the monitor. On a GPU every operation is a kernel launch the host must issue, so where the
step is bound by the host (bench/reports/gpu_step_h100_2026-11-26.md: bf16 + channels-last) this count is what
there is to cut. Counted on any machine (the network is made small here, width 8 at 32 px: the count depends on the
network's structure, not its size); the ratios are what to read.

    python bench/step_ops.py [--steps 20]
"""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sec_lib.runs.train import TrainConfig, training_steps  # noqa: E402  (sec_lib first: it pins the CPU kernels)

from torch.profiler import ProfilerActivity, profile  # noqa: E402


def ops_per_step(steps: int, **settings) -> float:
    cfg = TrainConfig(dataset="glyphs", model="resnet18s", width=8, image_size=32, batch_size=120, loss="semihard",
                      eta=0.5, iterations=10 * steps, eval_every=0, train_classes=200, test_classes=20,
                      track_every=20, track_samples=64, dtheta_every=10, **settings)
    run = training_steps(cfg)
    for _ in range(steps):                  # warm up (and pass the first step's extra measures)
        next(run)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            next(run)
    run.close()
    return sum(1 for e in prof.events() if e.name.startswith("aten::") and e.cpu_parent is None) / steps


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=20, help="steps counted (a multiple of 10 covers every measure)")
    args = ap.parse_args(argv)
    rows = [("monitor every step (the gpu profile)", dict(stats_every=1)), ("monitor every 10 steps", dict(stats_every=10)),
            ("no monitor", dict(instrument=False))]
    counts = [(name, ops_per_step(args.steps, **kw)) for name, kw in rows]
    base = counts[0][1]
    print(f"{'setting':40s} {'ops/step':>9s} {'x first':>8s}")
    for name, n in counts:
        print(f"{name:40s} {n:9.1f} {n / base:8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
