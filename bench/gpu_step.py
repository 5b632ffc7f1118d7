"""How busy the GPU path keeps a GPU: ms per step, steps per second summed over runs, and the share of time the GPU
is busy, for the gpu profile's run (ResNet-18 for small inputs, 64 px glyphs, batch 120, SEC, instrumented as the
profile says), measured in one process in one call:

* ``read every step``: the host reads the step's values at every step (what the loop did before the device path);
* ``read every 50``: the profile's setting (the tables are the same: tests/test_device_path.py);
* ``read every 50, bf16 + channels_last``: the two options (a different run: part of the key);
* ``..., monitor every 10 steps``: the same with the monitor's batch statistics every 10 steps instead of every step
  (how much of the host's time per step is the monitor's);
* ``N together``: the profile's ``together`` runs in one process, interleaved on their own CUDA streams;
* ``J processes x N together``: the profile's jobs, each a process of N runs (steps summed over all), in float32 and
  in bf16 + channels_last (several processes can cover a host-bound step: each has a Python thread of its own),
  and in bf16 also as the profile's jobs of one run each and as twice the jobs with half the runs each;
* ``evaluation_cost``: a 100-step run evaluated at steps 0, 50 and 100, with NMI/F1 (k-means on the host) at every
  evaluation and at the last only: one clustering's seconds.

ms per step is the wall time of the timed steps divided by their number (per run; runs together share it);
steps/s is summed over the runs. The busy share is the union of the GPU's kernel intervals over the wall time of a
separate profiled window (torch.profiler; one process), and ``nvidia-smi``'s utilization sampled during the timed
window (every configuration; it counts a sample period busy when any kernel ran in it, so it reads higher).
Also checks, on the GPU, that runs trained together give the same tables as the same runs alone.

On a machine without a CUDA device it says so and exits 0. ``--out FILE`` writes the report as JSON.

    python bench/gpu_step.py [--steps 100] [--out report.json]
"""
import argparse
import json
import math
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sec_lib.runs import experiments as ex  # noqa: E402  (sec_lib first: it pins the CPU kernels)
from sec_lib.runs.many import Together  # noqa: E402
from sec_lib.runs.train import TrainConfig  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402


#: The timed runs' length: never reached (the bench stops them), but every batch's indices are drawn up front, so it
#: stays short (the first windows used 100,000: drawing them took longer than the bench's time limit with 4 runs).
ITERATIONS = 1000


def bench_config(p, **changes) -> TrainConfig:
    """The profile's run in float32 (the rows that measure bf16 + channels-last say so), without evaluations."""
    base = {**p.base, "loss": "semihard", "eta": 0.5, "optimizer": "adam", "lr": 1e-3, "holdout_classes": p.holdout_classes,
            "eval_every": 0, "iterations": ITERATIONS, "autocast": "none", "channels_last": False}
    base.update(changes)
    return TrainConfig(**base)


class Utilization:
    """nvidia-smi's utilization.gpu, sampled every 100 ms in a thread while the block runs."""

    def __init__(self):
        self.samples, self._stop = [], threading.Event()

    def _run(self):
        try:
            proc = subprocess.Popen(["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits",
                                     "-lms", "100"], stdout=subprocess.PIPE, text=True)
        except OSError:
            return
        for line in proc.stdout:
            if self._stop.is_set():
                break
            try:
                self.samples.append(float(line.strip()))
            except ValueError:
                pass
        proc.terminate()

    def __enter__(self):
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join(timeout=2)

    @property
    def mean(self):
        s = self.samples[2:] or self.samples          # the first samples can predate the window
        return sum(s) / len(s) if s else math.nan


def busy_share(prof, wall_us: float) -> float:
    """Union of the GPU kernel intervals recorded by ``prof`` over ``wall_us``."""
    spans = sorted((e.time_range.start, e.time_range.end) for e in prof.events()
                   if e.device_type == torch.autograd.DeviceType.CUDA and e.time_range.end > e.time_range.start)
    if not spans:
        return math.nan
    busy, (lo, hi) = 0.0, spans[0]
    for a, b in spans[1:]:
        if a > hi:
            busy, lo, hi = busy + hi - lo, a, b
        else:
            hi = max(hi, b)
    busy += hi - lo
    first, last = spans[0][0], max(b for _, b in spans)
    return busy / max(wall_us, last - first)


def measure(configs, steps: int, warmup: int, profile_steps: int) -> dict:
    runs = Together(configs)
    for _ in range(warmup):
        runs.step()
    torch.cuda.synchronize()
    with Utilization() as util:
        t0 = time.perf_counter()
        for _ in range(steps):
            runs.step()
        torch.cuda.synchronize()
        wall = time.perf_counter() - t0
    busy = math.nan
    if profile_steps:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CUDA]) as prof:      # kernels only: a CPU trace is slow to read
            t1 = time.perf_counter()
            for _ in range(profile_steps):
                runs.step()
            torch.cuda.synchronize()
            pwall = time.perf_counter() - t1
        busy = busy_share(prof, pwall * 1e6)
    runs.close()
    n = len(configs)
    return {"runs": n, "ms_per_step": 1000 * wall / steps, "steps_per_s": n * steps / wall,
            "gpu_busy_profiler": busy, "gpu_util_smi": util.mean / 100}


def child(args) -> None:
    """One process of the multi-process measure: print its JSON line."""
    p = ex.get_profile("gpu")
    bf16 = {"autocast": "bf16", "channels_last": True} if args.bf16 else {}
    cfgs = [bench_config(p, seed=s, **bf16) for s in range(args.together)]
    print(json.dumps(measure(cfgs, args.steps, args.warmup, 0)), flush=True)


def evaluation_cost(p) -> dict:
    """What NMI/F1 at every evaluation costs a run: the same 100-step run (bf16 + channels-last, evaluated at steps 0,
    50 and 100 on the held-out classes) with k-means at every evaluation and at the last only; the difference over
    the 2 evaluations that differ is one clustering's time (k-means runs on the host)."""
    from sec_lib.runs.train import train
    walls = {}
    for clustering in ("final", "all"):
        cfg = bench_config(p, autocast="bf16", channels_last=True, iterations=100, eval_every=50,
                           eval_clustering=clustering)
        t0 = time.perf_counter()
        train(cfg)
        walls[clustering] = time.perf_counter() - t0
    return {"run_s_clustering_final": walls["final"], "run_s_clustering_all": walls["all"],
            "s_per_clustering": (walls["all"] - walls["final"]) / 2}


def identical_together(p) -> dict:
    """Two short runs trained together and alone on the GPU: are their tables the same? Each is also trained alone a
    second time: the control (GPU kernels are not deterministic, so alone against alone can differ too, and only a
    together-vs-alone difference beyond it is the interleaving's)."""
    from sec_lib.runs.many import train_many
    from sec_lib.runs.train import train
    cfgs = [bench_config(p, seed=s, iterations=30, read_every=10, eval_every=0, train_classes=300, test_classes=100,
                         holdout_classes=0) for s in (0, 1)]
    together = train_many(cfgs)
    def compare(x, y):
        a = x.steps.drop(columns="step_time").to_numpy(dtype=float)
        b = y.steps.drop(columns="step_time").to_numpy(dtype=float)
        same = (a == b) | (np.isnan(a) & np.isnan(b))
        return bool(same.all()), float(abs(a - b)[~same].max()) if not same.all() else 0.0

    diffs = []
    for cfg, r in zip(cfgs, together):
        alone, again = train(cfg), train(cfg)
        same, diff = compare(alone, r)
        same_control, diff_control = compare(alone, again)
        diffs.append({"identical_steps": same, "max_abs_diff": diff, "control_identical_steps": same_control,
                      "control_max_abs_diff": diff_control, "R@1 alone": alone.metrics.get("R@1"),
                      "R@1 alone again": again.metrics.get("R@1"), "R@1 together": r.metrics.get("R@1")})
    return {"runs": diffs}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--profile-steps", type=int, default=50)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--together", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--bf16", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.warmup + args.steps + args.profile_steps >= ITERATIONS:
        ap.error(f"--warmup + --steps + --profile-steps must stay below {ITERATIONS} (the timed runs' length)")
    if not torch.cuda.is_available():
        print("bench/gpu_step.py: no CUDA device on this machine (torch.cuda.is_available() is False), so there is "
              "nothing to measure: it times the training loop's GPU path. Run it where there is a GPU.")
        return 0
    if args.child:
        child(args)
        return 0
    p = ex.get_profile("gpu")
    rows = []

    def row(name, configs, profile_steps=args.profile_steps):
        r = {"setting": name, **measure(configs, args.steps, args.warmup, profile_steps)}
        rows.append(r)
        print(json.dumps(r), flush=True)

    row("read every step", [bench_config(p, read_every=1)])
    row(f"read every {p.base['read_every']}", [bench_config(p)])
    row(f"read every {p.base['read_every']}, bf16 + channels_last",
        [bench_config(p, autocast="bf16", channels_last=True)])
    row(f"read every {p.base['read_every']}, bf16 + channels_last, monitor every 10 steps",
        [bench_config(p, autocast="bf16", channels_last=True, stats_every=10)])
    row(f"{p.together} together", [bench_config(p, seed=s) for s in range(p.together)])
    row(f"{p.together} together, bf16 + channels_last",
        [bench_config(p, seed=s, autocast="bf16", channels_last=True) for s in range(p.together)])
    # the profile's jobs: J processes of N runs, started together; each reports its own timed window
    # (and, in bf16, the tier's 4 processes of one run each, and twice the processes with half the runs each)
    for jobs, together, bf16 in ((p.jobs, p.together, False), (p.jobs, p.together, True), (p.jobs, 1, True),
                                 (2 * p.jobs, max(1, p.together // 2), True)):
        procs = [subprocess.Popen([sys.executable, __file__, "--child", "--together", str(together), "--steps",
                                   str(args.steps), "--warmup", str(args.warmup), *(["--bf16"] if bf16 else [])],
                                  stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
                 for _ in range(jobs)]
        with Utilization() as util:
            outs = [json.loads(pr.communicate()[0].strip().splitlines()[-1]) for pr in procs]
        r = {"setting": f"{jobs} processes x {together} together" + (", bf16 + channels_last" if bf16 else ""),
             "runs": jobs * together, "ms_per_step": max(o["ms_per_step"] for o in outs),
             "steps_per_s": sum(o["steps_per_s"] for o in outs), "gpu_busy_profiler": math.nan,
             "gpu_util_smi": util.mean / 100}
        rows.append(r)
        print(json.dumps(r), flush=True)
    evals = evaluation_cost(p)
    print(json.dumps(evals), flush=True)
    check = identical_together(p)
    print(json.dumps(check), flush=True)
    report = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda,
              "config": {k: v for k, v in bench_config(p).to_dict().items() if k in (
                  "model", "image_size", "width", "embed_dim", "batch_size", "loss", "eta", "stats_every",
                  "dtheta_every", "track_every", "read_every")},
              "steps": args.steps, "warmup": args.warmup, "profile_steps": args.profile_steps,
              "rows": rows, "evaluation_cost": evals, "together_vs_alone": check}
    base = rows[0]["steps_per_s"]
    print(f"\n{'setting':45s} {'runs':>4s} {'ms/step':>8s} {'steps/s':>8s} {'x first':>8s} {'busy':>6s} {'smi':>6s}")
    for r in rows:
        print(f"{r['setting']:45s} {r['runs']:4d} {r['ms_per_step']:8.1f} {r['steps_per_s']:8.1f} "
              f"{r['steps_per_s'] / base:8.2f} {r['gpu_busy_profiler']:6.2f} {r['gpu_util_smi']:6.2f}")
    if args.out:
        args.out.write_text(json.dumps(report, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
