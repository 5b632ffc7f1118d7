"""What the kernel pin costs on this CPU, and whether it changes the bits here, measured in one run.

    python bench/kernel_pin.py [--profile reference] [--loss ms] [--steps 150] [--rounds 3]
    python bench/kernel_pin.py --pins avx2,portable --rounds 6     # the portable pin against the default one
    python bench/kernel_pin.py --loss-only                         # the routed losses alone, avx2 against portable

Trains the same config under each kernel pin of :data:`sec_lib.kernels.PINS` (and, for comparison, the
avx2 pin without MKL's STRICT mode), or the settings ``--pins`` names, each time in a fresh interpreter (the pin
must be set before torch starts), interleaving the settings over several rounds so that machine load affects them
alike. Prints the median step time of each setting, its ratio to ``native`` and to ``avx2`` (where they ran), the
per-round ratios to ``avx2`` (each the ratio of two medians measured one after the other: on a shared machine the
paired ratio is the fairer one), the ATen capability each ran with, and a hash of the step table (loss and norms at
every step): equal hashes mean equal bits on this CPU.

``--loss-only`` times what the ``portable`` pin adds where it differs from ``avx2`` (the library variables are the
same): the forward and backward of each routed loss on one batch, in this process, under both pins alternately.
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
cfg = ex.config(p, a["loss"], a["variant"], 0, iterations=a["steps"], eval_every=0, track_samples=0, num_threads=1)
r = train(cfg)
cols = [c for c in ("loss", "loss_metric", "norm_mean", "norm_var") if c in r.steps]
h = hashlib.sha256(r.steps[cols].to_numpy().tobytes()).hexdigest()[:12]
print(json.dumps({"times": r.steps["step_time"].iloc[5:].tolist(), "hash": h, "capability": kernels.capability(),
                  "kind": kernels.this_kind()}))
"""


NOT_STRICT = "avx2 (MKL_CBWR=AVX2, not strict)"


def settings(names=None) -> dict[str, dict]:
    """The environments to compare: every pin and the non-strict avx2 variant, or those of ``names`` (pin names, or
    ``avx2-nonstrict``)."""
    from sec_lib import kernels
    out = {name: kernels.child_env(name) for name in kernels.PINS}
    out[NOT_STRICT] = {**kernels.child_env("avx2"), "MKL_CBWR": "AVX2"}
    if names is None:
        return out
    alias = {"avx2-nonstrict": NOT_STRICT}
    unknown = [n for n in names if alias.get(n, n) not in out]
    if unknown:
        raise SystemExit(f"unknown setting(s) {', '.join(unknown)}; valid: {', '.join(kernels.PINS)}, avx2-nonstrict")
    return {alias.get(n, n): out[alias.get(n, n)] for n in names}


def loss_only(batch: int = 60, dim: int = 64, reps: int = 30, calls: int = 20) -> None:
    """Forward + backward of each routed loss on a (batch, dim) float32 batch under ``avx2`` and ``portable`` in
    turn (one thread; only ``$SEC_KERNELS`` switches: the pins' library variables are the same)."""
    import os
    import time
    import torch
    from sec_lib.losses import get_loss
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    print(f"loss forward + backward, batch {batch} x {dim}, one thread, median of {reps} x {calls} calls per pin")
    for name, k in (("ms", 5), ("tml", 4), ("ntxent", 2), ("supcon", 4), ("contrastive", 4)):
        f0, y = torch.randn(batch, dim, generator=g), torch.arange(batch // k).repeat_interleave(k)
        loss, t = get_loss(name), {"avx2": [], "portable": []}
        for rep in range(reps):
            for pin in (("avx2", "portable") if rep % 2 == 0 else ("portable", "avx2")):
                os.environ["SEC_KERNELS"] = pin
                t0 = time.perf_counter()
                for _ in range(calls):
                    f = f0.clone().requires_grad_()
                    loss(f, y).backward()
                t[pin].append((time.perf_counter() - t0) / calls)
        os.environ["SEC_KERNELS"] = "avx2"
        a, p = statistics.median(t["avx2"]), statistics.median(t["portable"])
        print(f"  {name:12s} avx2 {a * 1e3:6.3f} ms  portable {p * 1e3:6.3f} ms  "
              f"extra {(p - a) * 1e3:+6.3f} ms per step")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default="reference")
    ap.add_argument("--loss", default="ms")
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--variant", default="none", help="none, sec or l2reg (as experiments.config takes it)")
    ap.add_argument("--pins", default=None, help="comma-separated settings to compare (default: all)")
    ap.add_argument("--loss-only", action="store_true", help="time the routed losses alone, avx2 against portable")
    args = ap.parse_args()
    if args.loss_only:
        import sec_lib  # noqa: F401  (pins the kernels before torch runs one)
        return loss_only()
    envs = settings(args.pins.split(",") if args.pins else None)
    times = {k: [] for k in envs}
    rounds = {k: [] for k in envs}       # each round's median step time of each setting
    facts = {}
    for r in range(args.rounds):
        order = list(envs.items())
        for name, env in (order if r % 2 == 0 else order[::-1]):     # alternate who goes first
            out = subprocess.run([sys.executable, "-c", CHILD, json.dumps(vars(args))], env=env, cwd=REPO,
                                 capture_output=True, text=True)
            if out.returncode != 0:
                raise SystemExit(f"{name}: {out.stderr.strip().splitlines()[-1]}")
            res = json.loads(out.stdout.strip().splitlines()[-1])
            times[name].extend(res["times"])
            rounds[name].append(statistics.median(res["times"]))
            facts[name] = res
    from sec_lib import kernels
    info = kernels.cpu_info()
    print(f"cpu: {info['cpu_vendor']} {info['cpu_model']} ({info['cpu_isa']}); profile={args.profile} "
          f"loss={args.loss} variant={args.variant} steps={args.steps} x {args.rounds} rounds, one thread")
    meds = {name: statistics.median(t) for name, t in times.items()}
    for name, med in meds.items():
        f = facts[name]
        vs = "  ".join(f"x{med / meds[b]:5.3f} of {b}" for b in ("native", "avx2") if b in meds)
        paired = ""
        if "avx2" in rounds and name != "avx2":
            ratios = [a / b for a, b in zip(rounds[name], rounds["avx2"])]
            paired = (f"  per round / avx2: {' '.join(f'{x:.3f}' for x in ratios)} "
                      f"(median {statistics.median(ratios):.3f})")
        print(f"  {name:34s} median step {med * 1000:7.2f} ms  {vs}  "
              f"ATen {f['capability']:7s} kind {f['kind']:18s} step-table hash {f['hash']}{paired}")


if __name__ == "__main__":
    main()
