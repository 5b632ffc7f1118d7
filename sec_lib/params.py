"""Validation of notebook (papermill) parameters.

Every notebook's first code cell after the ``parameters`` cell calls :func:`check_params`,
so a bad ``-p name value`` fails at once, before any work, with a message that names the
parameter and the values it accepts.
"""
from __future__ import annotations

import math
import numbers
import re
import dataclasses
from dataclasses import dataclass
from typing import Any, Iterable

import torch


class ParameterError(ValueError):
    """A notebook or config parameter has a value outside its valid set."""


@dataclass(frozen=True)
class Choice:
    """One of a fixed set of values."""
    values: tuple

    def check(self, name: str, value: Any) -> Any:
        if value not in self.values:
            raise ParameterError(
                f"parameter {name!r} = {value!r} is not valid; valid values: "
                + ", ".join(repr(v) for v in self.values))
        return value


@dataclass(frozen=True)
class Number:
    """An int or float in [lo, hi] (in (lo, hi] with ``open_lo``); ``integer=True`` also requires an
    integral value. NumPy scalars count as numbers."""
    lo: float = -math.inf
    hi: float = math.inf
    integer: bool = False
    open_lo: bool = False

    def describe(self) -> str:
        kind = "an integer" if self.integer else "a number"
        return f"{kind} in {'(' if self.open_lo else '['}{self.lo}, {self.hi}]"

    def check(self, name: str, value: Any) -> Any:
        ok_type = isinstance(value, numbers.Real) and not isinstance(value, bool)
        if ok_type and self.integer and not isinstance(value, numbers.Integral):
            ok_type = float(value).is_integer()
        if not ok_type or not math.isfinite(value) or not self._in_range(value):
            raise ParameterError(f"parameter {name!r} = {value!r} is not valid; expected {self.describe()}")
        return int(value) if self.integer else float(value)

    def _in_range(self, value) -> bool:
        return (value > self.lo if self.open_lo else value >= self.lo) and value <= self.hi


@dataclass(frozen=True)
class Mu:
    """SEC target norm: 'batch', 'ema', 'zero' or a positive number."""
    MODES = ("batch", "ema", "zero")

    def check(self, name: str, value: Any) -> Any:
        if isinstance(value, str) and value in self.MODES:
            return value
        number = value
        if isinstance(value, str):
            try:
                number = float(value)
            except ValueError:
                number = None
        if isinstance(number, (int, float)) and not isinstance(number, bool) and math.isfinite(number) and number > 0:
            return float(number)
        raise ParameterError(f"parameter {name!r} = {value!r} is not valid; valid values: "
                             "'batch', 'ema', 'zero' or a positive number (a fixed radius)")


@dataclass(frozen=True)
class Device:
    """A torch device this machine has: 'cpu', 'cuda', 'cuda:N' (N below the GPU count) or 'mps'."""

    def check(self, name: str, value: Any) -> Any:
        valid = "valid values: 'cpu', 'cuda', 'cuda:N', 'mps'"
        ok = isinstance(value, str) and (value in ("cpu", "cuda", "mps") or re.fullmatch(r"cuda:\d+", value))
        if not ok:
            raise ParameterError(f"parameter {name!r} = {value!r} is not valid; {valid}")
        if value.startswith("cuda"):
            if not torch.cuda.is_available():
                raise ParameterError(f"parameter {name!r} = {value!r}: CUDA is not available on this machine; use 'cpu'")
            n = torch.cuda.device_count()
            if ":" in value and int(value.split(":")[1]) >= n:
                raise ParameterError(f"parameter {name!r} = {value!r}: this machine has {n} CUDA device(s); "
                                     f"valid values: 'cuda', " + ", ".join(f"'cuda:{i}'" for i in range(n)))
        if value == "mps" and not torch.backends.mps.is_available():
            raise ParameterError(f"parameter {name!r} = {value!r}: MPS is not available on this machine; use 'cpu'")
        return value


@dataclass(frozen=True)
class Text:
    """Any non-empty string (or None when ``optional``)."""
    optional: bool = False

    def check(self, name: str, value: Any) -> Any:
        if value is None and self.optional:
            return None
        if not isinstance(value, str) or not value:
            raise ParameterError(f"parameter {name!r} = {value!r} is not valid; expected a non-empty string"
                                 + (" or None" if self.optional else ""))
        return value


@dataclass(frozen=True)
class PositiveRange:
    """A pair ``(low, high)`` of finite numbers with ``0 < low <= high``."""

    def check(self, name: str, value: Any) -> tuple[float, float]:
        try:
            lo, hi = (float(value[0]), float(value[1]))
        except (TypeError, ValueError, IndexError):
            lo = hi = math.nan
        if not (0 < lo <= hi and math.isfinite(hi)):
            raise ParameterError(f"parameter {name!r} = {value!r} is not valid; expected (low, high) with 0 < low <= high")
        return lo, hi


@dataclass(frozen=True)
class PositiveSet:
    """At least ``min_len`` distinct finite positive numbers (returned as a tuple of floats, in order)."""
    min_len: int = 2

    def check(self, name: str, value: Any) -> tuple[float, ...]:
        try:
            vals = tuple(float(v) for v in value)
        except (TypeError, ValueError):
            vals = ()
        if len(vals) < self.min_len or any(not (v > 0 and math.isfinite(v)) for v in vals) or len(set(vals)) != len(vals):
            raise ParameterError(f"parameter {name!r} = {value!r} is not valid; expected at least {self.min_len} "
                                 "distinct positive numbers")
        return vals


class OptionalParam:
    """``None`` or a value accepted by ``spec`` (another spec of this module)."""

    def __init__(self, spec):
        self.spec = spec

    def check(self, name, value):
        if value is None:
            return None
        try:
            return self.spec.check(name, value)
        except ParameterError as err:
            raise ParameterError(f"{err} (or None for the default)") from None


def check_params(values: dict, spec: dict) -> dict:
    """Validate ``values`` (e.g. ``{k: globals()[k] for k in spec}``) against ``spec``.

    Returns the normalised values. Unknown keys in ``values`` are an error too, so a typo in
    ``-p`` (papermill silently adds unknown names) is caught.
    """
    unknown = sorted(set(values) - set(spec))
    if unknown:
        raise ParameterError(f"unknown parameter(s) {unknown}; valid parameters: {sorted(spec)}")
    missing = sorted(set(spec) - set(values))
    if missing:
        raise ParameterError(f"missing parameter(s) {missing}")
    return {name: spec[name].check(name, values[name]) for name in spec}


def check_fields(cls, d: dict) -> dict:
    """``d`` when every key is a field of the dataclass ``cls``; else a ParameterError naming the unknown keys
    and the valid fields (a config read from a file or a command line, checked before anything runs)."""
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(d) - known)
    if unknown:
        raise ParameterError(f"unknown {cls.__name__} field(s) {unknown}; valid fields: {sorted(known)}")
    return d


_IPYTHON_NAMES = frozenset({"In", "Out", "get_ipython", "exit", "quit", "open"})


def notebook_params(namespace: dict, spec: dict, result_name: str = "P") -> dict:
    """Validate a notebook's parameters straight from its namespace.

    Call it as the first statement after the ``parameters`` cell, importing under an underscore
    name (``import sec_lib.params as _p``): any other public global at that point was injected by
    papermill, so a ``-p`` name the notebook does not declare is reported as unknown instead of
    being silently ignored. ``result_name`` is the global the notebook assigns the result to
    (``P = _p.notebook_params(...)``); it is ignored so the cell can be re-run in a live kernel.
    """
    extra = sorted(k for k in namespace
                   if not k.startswith("_") and k not in _IPYTHON_NAMES and k not in spec and k != result_name)
    if extra:
        raise ParameterError(f"unknown parameter(s) {extra}; valid parameters: {sorted(spec)}")
    return check_params({k: namespace[k] for k in spec if k in namespace}, spec)


def choices(values: Iterable) -> Choice:
    return Choice(tuple(values))
