"""What the kernel pin costs on this CPU, and whether it changes the bits here, measured in one run.

    python bench/kernel_pin.py [--profile reference] [--loss ms] [--steps 150] [--rounds 3]

Trains the same config under each kernel pin of :data:`sec_lib.kernels.PINS` (and, for comparison, the
avx2 pin without MKL's STRICT mode), each time in a fresh interpreter (the pin must be set before torch
starts), interleaving the settings over several rounds so that machine load affects them alike. Prints
the median step time of each setting, its ratio to ``native``, the ATen capability each ran with, and a
hash of the step table (loss and norms at every step): equal hashes mean equal bits on this CPU.
"""
import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

CHILD = r"""
import hashlib, json, sys
from sec_lib import kernels
from sec_lib.runs import experiments as ex
from sec_lib.runs.train import train
a = json.loads(sys.argv[1])
p = ex.get_profile(a["profile"])
cfg = ex.config(p, a["loss"], "none", 0, iterations=a["steps"], eval_every=0, track_samples=0, num_threads=1)
r = train(cfg)
cols = [c for c in ("loss", "norm_mean", "norm_var") if c in r.steps]
h = hashlib.sha256(r.steps[cols].to_numpy().tobytes()).hexdigest()[:12]
print(json.dumps({"times": r.steps["step_time"].iloc[5:].tolist(), "hash": h, "capability": kernels.capability(),
                  "kind": kernels.this_kind()}))
"""


def settings() -> dict[str, dict]:
    from sec_lib import kernels
    out = {name: kernels.child_env(name) for name in kernels.PINS}
    out["avx2 (MKL_CBWR=AVX2, not strict)"] = {**kernels.child_env("avx2"), "MKL_CBWR": "AVX2"}
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default="reference")
    ap.add_argument("--loss", default="ms")
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    envs = settings()
    times = {k: [] for k in envs}
    facts = {}
    for _ in range(args.rounds):
        for name, env in envs.items():
            out = subprocess.run([sys.executable, "-c", CHILD, json.dumps(vars(args))], env=env, cwd=REPO,
                                 capture_output=True, text=True)
            if out.returncode != 0:
                raise SystemExit(f"{name}: {out.stderr.strip().splitlines()[-1]}")
            res = json.loads(out.stdout.strip().splitlines()[-1])
            times[name].extend(res["times"])
            facts[name] = res
    from sec_lib import kernels
    info = kernels.cpu_info()
    print(f"cpu: {info['cpu_vendor']} {info['cpu_model']} ({info['cpu_isa']}); profile={args.profile} "
          f"loss={args.loss} steps={args.steps} x {args.rounds} rounds, one thread")
    base = statistics.median(times["native"])
    for name, t in times.items():
        med = statistics.median(t)
        f = facts[name]
        print(f"  {name:34s} median step {med * 1000:7.2f} ms  x{med / base:5.3f} of native  "
              f"ATen {f['capability']:7s} kind {f['kind']:18s} step-table hash {f['hash']}")


if __name__ == "__main__":
    main()
