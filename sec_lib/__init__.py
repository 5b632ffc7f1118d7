"""sec_lib: the library under sec-book, a runnable reproduction of
"Deep Metric Learning with Spherical Embedding" (Zhang, Li, Zhang, NeurIPS 2020).

Public surface: :class:`SphericalEmbeddingConstraint`, :class:`SECRegularizer`, :func:`get_loss`,
and the packages of the layers above the core (see README, "Architecture"): ``data``, ``chapters``,
``figures``, ``site``. The top-level names are imported lazily, so tools such as
``sec_lib.site.pagecheck`` or the Sphinx extension ``sec_lib.site.sitejs`` do not pay for importing
torch (about 3 s, measured).
"""
import importlib

from . import kernels as _kernels

# The reproducibility contract: pin the CPU kernels (ATen dispatch, oneDNN, MKL) before torch runs its first
# kernel, in every process that imports sec_lib ($SEC_KERNELS chooses the pin; see sec_lib.kernels).
_kernels.apply()

__all__ = ["SphericalEmbeddingConstraint", "SECRegularizer", "get_loss", "LOSS_NAMES"]
__version__ = "0.1.0"

_LAZY = {"SphericalEmbeddingConstraint": "sec", "SECRegularizer": "sec", "get_loss": "losses", "LOSS_NAMES": "losses"}


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module 'sec_lib' has no attribute {name!r}")
