"""Does the portable pin's float64 route hide the last bits of the float64 implementation under it?

    SEC_KERNELS=portable .venv/bin/python bench/crosscpu/float64_route.py [ITERATIONS] [VARIANT ...]

Trains the multi-similarity golden runs (smoke profile, seed 0; default 20 iterations, variants none, sec, l2reg)
under ``SEC_KERNELS=portable`` three times each, with the loss's ``logsumexp`` (forward and backward) computed

- by torch in float64, rounded to float32 (the pin's own route, ``sec_lib/losses/portable.py``);
- by numpy in long double (another implementation, a 64-bit mantissa), rounded to float32;
- by torch in float32 (the ``avx2`` pin's op: the control, which should differ),

and prints the hashes of each run's step and evaluation tables (as ``golden_matrix.py`` computes them). Equal hashes
for the first two say that the float32 results do not depend on which float64 implementation computed them, as a
vendor's MKL does on its CPU; the control shows that the runs do see a change in the last float32 bits.
"""
import hashlib
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import sec_lib  # noqa: E402,F401  (pins the kernels before torch runs one)
import numpy as np  # noqa: E402
import torch  # noqa: E402

from sec_lib import kernels  # noqa: E402
from sec_lib.losses import pair  # noqa: E402
from sec_lib.runs import experiments as ex  # noqa: E402
from sec_lib.runs.train import train  # noqa: E402


def table_hash(df) -> str:
    cols = sorted(c for c in df.columns if c not in ("step_time", "wall_s"))
    return hashlib.sha256(df[cols].to_numpy().tobytes()).hexdigest()[:16]


class LongDoubleLogSumExp(torch.autograd.Function):
    """Row-wise logsumexp of a float32 tensor in numpy long double, forward and backward, rounded to float32."""

    @staticmethod
    def forward(ctx, x, dim):
        a = x.detach().numpy().astype(np.longdouble)
        m = a.max(axis=dim, keepdims=True)
        lse = m + np.log(np.exp(a - m).sum(axis=dim, keepdims=True))
        ctx.a, ctx.lse, ctx.dim = a, lse, dim
        return torch.from_numpy(np.squeeze(lse, axis=dim).astype(np.float32))

    @staticmethod
    def backward(ctx, g):
        w = np.exp(ctx.a - ctx.lse)
        return torch.from_numpy((np.expand_dims(g.numpy().astype(np.longdouble), ctx.dim) * w).astype(np.float32)), None


def long_double(x, dim, keepdim=False):
    assert not keepdim and x.dtype == torch.float32
    return LongDoubleLogSumExp.apply(x, dim)


def float32(x, dim, keepdim=False):
    return torch.logsumexp(x, dim=dim, keepdim=keepdim)


def main(argv) -> int:
    if kernels.pin_name() != "portable":
        raise SystemExit("run it under SEC_KERNELS=portable")
    iterations = int(argv[0]) if argv else 20
    variants = argv[1:] or ("none", "sec", "l2reg")
    p = ex.get_profile("smoke")
    route = pair.portable_logsumexp
    for variant in variants:
        cfg = ex.config(p, "ms", variant, 0, iterations=iterations, eval_every=10 if iterations == 20 else iterations)
        out = {}
        for name, fn in (("torch-float64", route), ("numpy-longdouble", long_double), ("torch-float32", float32)):
            pair.portable_logsumexp = fn
            try:
                r = train(cfg)
            finally:
                pair.portable_logsumexp = route
            out[name] = (table_hash(r.steps), table_hash(r.evals), r.metrics["R@1"])
        same = out["torch-float64"] == out["numpy-longdouble"]
        print(f"ms-{variant} {iterations} iterations: " + "; ".join(
            f"{n} steps={h[0]} evals={h[1]} R@1={h[2]:.4f}" for n, h in out.items())
            + f" | float64 routes equal: {same}; float32 differs: {out['torch-float32'] != out['torch-float64']}",
            flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
