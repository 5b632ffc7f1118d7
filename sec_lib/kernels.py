"""The CPU kernels a run uses, pinned before torch starts, and the CPU kind they define.

This module carries the book's reproducibility contract (README, "Numbers that mean the same on every
machine"; the tiers page):

- **Level 1, the same CPU kind:** with the pinned kernel settings, a run retrains bit-for-bit, in this
  process, in pool and submitit workers, in notebooks, at any number of parallel jobs.
- **Level 2, another CPU kind:** a rerun is a fresh draw from the same distribution of runs; no verdict of
  the book may change because of it (``python -m sec_lib.book portability`` checks that).

A **CPU kind** is ``(vendor, ATen capability in force, pin)``, e.g. ``AMD/AVX2/avx2``. The evidence for that
definition is in ``data/crosscpu/`` (the weight hashes of a 60-step CNN under six kernel settings, and the
hash of every kind of operation a run uses, on four x86-64 machines with torch 2.13.0):

- two Intel Xeons, one with AMX and one without, gave the same bits under every setting: a model name or a
  single ISA flag does not make a kind;
- an AMD EPYC with AVX-512 (Zen 4) and one with AVX2 only (Zen 3) gave the same bits under every setting that
  pins ATen to AVX2 (and the Zen 3's default *is* that setting): with the pin, the AVX-512 units do not split
  a vendor;
- AMD against Intel: no stock setting gives the same weights. Under the ``avx2`` pin every operation of a run
  matches except the vectorized ``exp``, ``log`` and ``sqrt`` and the foreach/loop Adam step (the fused Adam
  step and ``exp`` computed in float64 match). The pin therefore also steps Adam with the fused kernel
  (:data:`FUSED_ADAM`): the probe CNN then trains to the same bits on an AMD EPYC (AVX2) as on both Intel
  Xeons. The glyph runs also use ``logsumexp``/``softplus`` (multi-similarity, tuplet margin, the contrastive
  losses), not yet shown portable, so until a golden run matches on both vendors the vendor stays part of the
  kind. The opt-in ``portable`` pin computes those (and the losses' other MKL vector-math ops) in float64 and
  rounds them back (:data:`PORTABLE_MATH`); ``data/reference/crosscpu/golden-matrix-*.txt`` hold the golden runs
  of every main loss under it and under ``avx2``, to be compared line by line with Intel's.
- numpy dispatches its own SIMD kernels (``np.log``, ``np.exp``, sorting) by the CPU it finds, whatever ATen
  was told: on an AVX-512 EPYC (Zen 4) the golden semihard run's step table (its log-log gradient slope,
  computed with ``np.log``) differed in the last bits from the AVX2-only EPYC (Zen 3) that recorded it, while
  its weights and evaluations matched. The pin therefore also stops numpy at its AVX2 level (``X86_V3``):
  with it the Zen 4 reproduces the Zen 3's golden hashes (tests/golden/short_runs.json).

The pin is chosen by ``$SEC_KERNELS`` (default ``avx2``; ``native`` leaves every library to pick its own
kernels, as the runs committed before the contract did; ``portable``, opt-in, is ``avx2`` plus the losses'
``exp``/``log`` family computed in float64 and rounded back, see :data:`PORTABLE_MATH`). :func:`apply` writes the
pin's variables into the process environment; ``sec_lib/__init__.py`` calls it on import, which is before torch is
imported in every process that trains (pool workers and submitit jobs import ``sec_lib`` to unpickle their work;
papermill kernels inherit the runner's environment). :func:`check` asserts at the start of every run that the ATen
capability in force is the pinned one: a process that imported torch before ``sec_lib`` under another
setting fails with a clear error instead of training under unrecorded kernels.
"""
from __future__ import annotations

import json
import os
import platform
import re
import sys

#: numpy's dispatch targets above AVX2 (numpy 2.4 names; a name numpy does not know is ignored by it).
NUMPY_ABOVE_AVX2 = ("X86_V4", "AVX512_ICL", "AVX512_SPR")
#: The pins: environment variables read by ATen (CPU dispatch), oneDNN (convolutions), MKL (BLAS,
#: conditional numerical reproducibility) and numpy (its own SIMD dispatch) when they first run, so they must
#: be set before torch and numpy start.
PINS: dict[str, dict[str, str]] = {
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_CBWR": "AVX2,STRICT",
             "NPY_DISABLE_CPU_FEATURES": " ".join(NUMPY_ABOVE_AVX2)},
    "native": {},
}
#: ``portable`` (opt-in, never the default): the library variables of ``avx2``, plus :data:`PORTABLE_MATH`.
PINS["portable"] = dict(PINS["avx2"])
#: Whether a pin steps Adam/AdamW with the fused CPU kernel. The op tables show the fused step bit-identical on
#: AMD and Intel under the avx2 pin, where the default (foreach) step is not (its sqrt is vectorized per vendor);
#: with it the probe CNN trains to the same bits on both vendors (data/reference/crosscpu/README.md).
FUSED_ADAM = {"avx2": True, "native": False, "portable": True}
#: Whether a pin routes the losses' transcendental ops (``logsumexp``, ``softplus``, ``acos``/``cos``, the contrastive
#: loss's ``sqrt``) through float64 and rounds the result back to float32, on CPU tensors
#: (:mod:`sec_lib.losses.portable`, the one place that reads this). Those ops go through MKL's vector math (VML),
#: whose float32 ``exp``/``log``/``sqrt`` give other bits on AMD than on Intel under the avx2 pin; the same ops in
#: float64 rounded to float32 gave the same bits on both (the op tables' ``exp-via-f64`` row). Under ``avx2`` and
#: ``native`` every op is exactly torch's float32 one.
PORTABLE_MATH = {"avx2": False, "native": False, "portable": True}
#: Every variable any pin sets (``native`` removes them, so that the libraries choose).
KERNEL_VARS = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "MKL_CBWR", "NPY_DISABLE_CPU_FEATURES")
PIN_ENV = "SEC_KERNELS"
DEFAULT_PIN = "avx2"
#: The pin recorded for runs trained before the contract (no variable set, each library's own choice).
LEGACY_PIN = "native"
#: The pins whose runs share their store keys (no pin field in :func:`sec_lib.runs.store.run_key`); every other
#: pin's runs are keyed apart (:func:`key_fields`).
UNKEYED_PINS = (DEFAULT_PIN, LEGACY_PIN)
#: The ISA flags recorded in a run's provenance (from /proc/cpuinfo).
ISA_FLAGS = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile")
_VENDORS = {"GenuineIntel": "Intel", "AuthenticAMD": "AMD"}


class KernelPinError(RuntimeError):
    """The kernels in force are not the pinned ones (torch was initialized before the pin)."""


def pin_name(env=None) -> str:
    """The pin this process uses: ``$SEC_KERNELS``, default :data:`DEFAULT_PIN`; an unknown name is an
    error that lists the valid ones."""
    name = (os.environ if env is None else env).get(PIN_ENV, DEFAULT_PIN) or DEFAULT_PIN
    if name not in PINS:
        raise ValueError(f"${PIN_ENV} = {name!r} is not valid; valid values: {', '.join(PINS)}")
    return name


def pin_env(name: str) -> dict[str, str | None]:
    """The environment of pin ``name``: each kernel variable's value, None for one to remove."""
    if name not in PINS:
        raise ValueError(f"kernel pin {name!r} is not valid; valid values: {', '.join(PINS)}")
    return {k: PINS[name].get(k) for k in KERNEL_VARS}


def child_env(name: str, base=None) -> dict[str, str]:
    """A copy of ``base`` (default: this process's environment) set up for a child process that trains
    under pin ``name``."""
    env = dict(os.environ if base is None else base)
    env[PIN_ENV] = name
    for k, v in pin_env(name).items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    return env


def apply(name: str | None = None) -> str:
    """Write pin ``name`` (default: :func:`pin_name`) into this process's environment and return its
    name. Effective only before torch runs its first kernel; :func:`check` tells whether it took."""
    name = pin_name() if name is None else name
    os.environ[PIN_ENV] = name
    for k, v in pin_env(name).items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    return name


def expected_capability(name: str) -> str | None:
    """The ATen capability pin ``name`` forces (upper case, as torch reports it), or None (``native``)."""
    cap = PINS[name].get("ATEN_CPU_CAPABILITY")
    return cap.upper() if cap else None


def _torch():
    """The torch module, imported on first use: this module sets the pin that torch reads when it starts."""
    import torch  # local: the kernel pin must be in the environment before torch is imported
    return torch


def capability() -> str:
    """The ATen CPU capability in force in this process (``AVX2``, ``AVX512``, ``DEFAULT``, ...)."""
    return _torch().backends.cpu.get_cpu_capability()


def numpy_above_avx2() -> list[str]:
    """numpy's dispatch targets above AVX2 that are in force in this process (empty where the machine lacks
    them or the pin disabled them before numpy started)."""
    from numpy._core._multiarray_umath import __cpu_features__  # local: the pin must be set before numpy starts
    return [f for f in NUMPY_ABOVE_AVX2 if __cpu_features__.get(f)]


def check(name: str | None = None) -> str:
    """Assert that the kernels in force are those of pin ``name`` (default: this process's): ATen's
    capability and, where the pin stops numpy at AVX2, numpy's dispatch; return the ATen capability. Raises
    :class:`KernelPinError` naming the fix."""
    name = pin_name() if name is None else name
    cap = capability()
    want = expected_capability(name)
    fix = (f"Import sec_lib before torch and numpy, or set {' '.join(f'{k}={v!r}' for k, v in PINS[name].items())} "
           f"in the environment before Python starts.")
    if want is not None and cap != want:
        raise KernelPinError(f"the kernel pin {name!r} needs ATen capability {want}, but {cap} is in force: torch "
                             f"started its kernels before the pin was set. {fix}")
    above = numpy_above_avx2() if "NPY_DISABLE_CPU_FEATURES" in PINS[name] else []
    if above:
        raise KernelPinError(f"the kernel pin {name!r} stops numpy at AVX2, but numpy dispatches to "
                             f"{', '.join(above)}: numpy was imported before the pin was set. {fix}")
    return cap


def portable_math(name: str | None = None) -> bool:
    """Whether pin ``name`` (default: this process's) computes the losses' transcendental ops in float64
    (:data:`PORTABLE_MATH`)."""
    return PORTABLE_MATH[pin_name() if name is None else name]


def key_fields(name: str | None = None) -> dict[str, str]:
    """What pin ``name`` (default: this process's) adds to a run's store key: nothing for the pins of
    :data:`UNKEYED_PINS` (``avx2``, ``native``: no existing key changes), ``{"kernel_pin": name}`` for any other, so
    that a ``portable`` run never stands in for an ``avx2`` one of the same config (their numbers differ)."""
    name = pin_name() if name is None else name
    if name not in PINS:
        raise ValueError(f"kernel pin {name!r} is not valid; valid values: {', '.join(PINS)}")
    return {} if name in UNKEYED_PINS else {"kernel_pin": name}


def adam_kwargs(device: str, name: str | None = None) -> dict:
    """Extra keyword arguments for ``torch.optim.Adam``/``AdamW`` under pin ``name`` on ``device``: the fused
    CPU step where the pin asks for it (CPU runs only; a GPU run keeps torch's default)."""
    name = pin_name() if name is None else name
    return {"fused": True} if FUSED_ADAM[name] and str(device) == "cpu" else {}


def cpu_info() -> dict[str, str]:
    """The CPU's vendor, model name and the ISA flags of :data:`ISA_FLAGS` it has (from /proc/cpuinfo;
    ``platform`` where that is missing)."""
    vendor, model, flags = "", "", []
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                key, _, val = line.partition(":")
                key = key.strip()
                if key == "vendor_id" and not vendor:
                    vendor = val.strip()
                elif key == "model name" and not model:
                    model = val.strip()
                elif key == "flags" and not flags:
                    flags = val.split()
                if vendor and model and flags:
                    break
    except OSError:
        model = platform.processor()
    return {"cpu_vendor": _VENDORS.get(vendor, vendor or "unknown"), "cpu_model": model or "unknown",
            "cpu_isa": " ".join(f for f in ISA_FLAGS if f in flags)}


def library_versions() -> dict[str, str]:
    """torch's MKL and oneDNN versions, as its build configuration reports them."""
    show = _torch().__config__.show()
    mkl = re.search(r"Math Kernel Library Version ([^\s]+)", show)
    dnn = re.search(r"(?:MKL-DNN|oneDNN) v([^\s]+)", show)
    return {"mkl": mkl.group(1) if mkl else "none", "onednn": dnn.group(1) if dnn else "none"}


def kind(vendor: str, capability_: str, pin: str) -> str:
    """The CPU kind's name: ``vendor/capability/pin``, e.g. ``AMD/AVX2/avx2``."""
    return f"{vendor}/{capability_}/{pin}"


def provenance() -> dict[str, str]:
    """What a run records of its kernels: the CPU (vendor, model, ISA flags), the ATen capability in force,
    the torch, MKL and oneDNN versions, the pin and its variables as set, and the CPU kind."""
    name = pin_name()
    cap = capability()
    info = cpu_info()
    return {**info, "aten_capability": cap, "torch": _torch().__version__, **library_versions(), "kernel_pin": name,
            "kernel_env": json.dumps({**{k: os.environ.get(k) for k in KERNEL_VARS},
                                      "adam": "fused" if FUSED_ADAM[name] else "default",
                                      **({"loss_math": "float64"} if PORTABLE_MATH[name] else {})}, sort_keys=True),
            "cpu_kind": kind(info["cpu_vendor"], cap, name)}


def this_kind() -> str:
    """This process's CPU kind."""
    return kind(cpu_info()["cpu_vendor"], capability(), pin_name())


if __name__ == "__main__":          # python -m sec_lib.kernels: this machine's kind and provenance
    json.dump(provenance(), sys.stdout, indent=1)
    print()
