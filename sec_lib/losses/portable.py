"""The losses' transcendental ops, routed by the kernel pin (:data:`sec_lib.kernels.PORTABLE_MATH`): the one place
that reads it.

Under ``SEC_KERNELS=portable`` an op on a float32 CPU tensor is computed in float64 and its result rounded back to
float32 (its backward too: autograd runs it in float64 and rounds the gradient when it leaves). Under every other pin
(``avx2``, the default, and ``native``), on a GPU, and on a float64 input, each function is exactly the torch call it
names, with the same arguments, and gives its bits.

Why: torch computes ``exp``, ``log``, ``sqrt``, ``acos``, ``cos`` (and ``logsumexp``, which is ``exp``, a sum and a
``log``) with MKL's vector math, whose float32 results differ in the last bits between AMD and Intel CPUs even under
the avx2 pin; the same op in float64 rounded to float32 gave identical bits on both (``exp-via-f64`` in the op tables,
``data/reference/crosscpu/``). A float64 result can still differ between vendors in its last float64 bits; rounding
hides that unless the value lies within a few float64 ulps of a float32 rounding boundary (about 2**-29 of values), so
this makes a vendor difference rare, not impossible: the golden matrix (``golden-matrix-*-portable.txt``) is the test.

What is routed (CPU, float32): ``logsumexp`` and ``softplus`` in the multi-similarity, tuplet margin, NT-Xent and
SupCon losses; ``acos``/``cos`` in the tuplet margin loss and ArcFace; the Euclidean distance (``cdist``, whose
``sqrt`` is elementwise) of the contrastive loss. Not routed, because already portable or absent: ``F.normalize`` and
``Tensor.norm`` (a reduction whose ``sqrt`` is taken on the scalar result: the op tables' ``normalize`` and
``sum-mean-norm`` rows match on both vendors), ``F.cross_entropy`` (its ``log_softmax`` matches), the triplet and
semihard losses (no transcendental op), the normalized N-pair loss (cross-entropy; its ``logsumexp`` form runs on
GPUs only) and the SEC and L2 penalties (norms and squares).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from .. import kernels


def routed(t: torch.Tensor) -> bool:
    """Whether an op on ``t`` takes the float64 route: the pin asks for it, ``t`` is on the CPU and in a floating
    dtype below float64."""
    return t.device.type == "cpu" and t.is_floating_point() and t.dtype != torch.float64 and kernels.portable_math()


def in_float64(fn, x: torch.Tensor, *args, **kwargs) -> torch.Tensor:
    """``fn(x, *args, **kwargs)``: as is, or (when :func:`routed`) computed on ``x`` in float64 and rounded back to
    ``x``'s dtype."""
    if not routed(x):
        return fn(x, *args, **kwargs)
    return fn(x.double(), *args, **kwargs).to(x.dtype)


def portable_logsumexp(x: torch.Tensor, dim, keepdim: bool = False) -> torch.Tensor:
    """``torch.logsumexp(x, dim, keepdim)``, routed."""
    return in_float64(torch.logsumexp, x, dim=dim, keepdim=keepdim)


def portable_softplus(x: torch.Tensor) -> torch.Tensor:
    """``F.softplus(x)``, routed."""
    return in_float64(F.softplus, x)


def portable_acos(x: torch.Tensor) -> torch.Tensor:
    """``torch.acos(x)``, routed."""
    return in_float64(torch.acos, x)


def portable_cos(x: torch.Tensor) -> torch.Tensor:
    """``torch.cos(x)``, routed."""
    return in_float64(torch.cos, x)


def portable_cdist(x: torch.Tensor, y: torch.Tensor, p: float = 2.0) -> torch.Tensor:
    """``torch.cdist(x, y, p)``, routed (both inputs in float64 when ``x`` is)."""
    if not routed(x):
        return torch.cdist(x, y, p=p)
    return torch.cdist(x.double(), y.double(), p=p).to(x.dtype)
