"""CPU kinds in tests, derived from this machine's instead of named: a test that needs "another CPU kind" must not
write ``Intel/AVX2/avx2``, which is an Intel machine's own kind (two tests did, and failed only there).

    from kinds import other_kind, as_other_vendor, each_vendor

- :func:`other_kind`: a kind of the other vendor (AMD <-> Intel) than a given kind, by default this process's
  (:func:`sec_lib.kernels.this_kind`), with the same ATen capability and pin.
- ``as_other_vendor`` (fixture): this process presents itself as the other vendor's CPU for the test: its
  ``sec_lib.kernels.cpu_info`` (and so ``this_kind`` and ``provenance``) names the other vendor and one of its
  models; the ISA flags stay this CPU's (the kernels in force are this CPU's: only what the process says of itself
  changes). Child processes the test starts are not affected.
- ``each_vendor`` (fixture, parametrized): the test runs twice, as this machine (``"this machine"``) and under
  ``as_other_vendor`` (``"other vendor"``), so that an AMD machine meets what only an Intel machine would (and the
  other way round). It returns the kind the process presents.

A test module uses the fixtures by importing them (pytest finds fixtures imported into a test module), or every
test can once tests/conftest.py imports them.
"""
from __future__ import annotations

import pytest

from sec_lib import kernels

#: Each vendor's other (the vendors :func:`sec_lib.kernels.cpu_info` names).
OTHER_VENDOR = {"AMD": "Intel", "Intel": "AMD"}
#: A model name of each vendor, as /proc/cpuinfo gives it on the machines of ``data/reference/crosscpu/``.
MODEL = {"AMD": "AMD EPYC", "Intel": "Intel(R) Xeon(R) Processor"}


def other_vendor(vendor: str | None = None) -> str:
    """The other vendor than ``vendor`` (default: this process's); a vendor that is neither AMD nor Intel gets
    ``"Intel"``, which is not its own."""
    vendor = kernels.cpu_info()["cpu_vendor"] if vendor is None else vendor
    return OTHER_VENDOR.get(vendor, "Intel")


def other_kind(kind: str | None = None) -> str:
    """``kind`` (default: this process's, :func:`sec_lib.kernels.this_kind`) with the other vendor: the same ATen
    capability and pin, e.g. ``AMD/AVX2/avx2`` -> ``Intel/AVX2/avx2`` and back. Never ``kind`` itself."""
    kind = kernels.this_kind() if kind is None else kind
    vendor, _, rest = kind.partition("/")
    return f"{other_vendor(vendor)}/{rest}"


def present_as_other_vendor(monkeypatch) -> str:
    """Make this process present itself as the other vendor's CPU until ``monkeypatch`` is undone (the fixtures
    below); returns the kind it presents."""
    real = kernels.cpu_info()
    vendor = other_vendor(real["cpu_vendor"])
    monkeypatch.setattr(kernels, "cpu_info", lambda: {**real, "cpu_vendor": vendor, "cpu_model": MODEL[vendor]})
    assert kernels.this_kind() != kernels.kind(real["cpu_vendor"], kernels.capability(), kernels.pin_name())
    return kernels.this_kind()


@pytest.fixture
def as_other_vendor(monkeypatch):
    """This process presents itself as the other vendor's CPU (see the module's docstring); returns its kind."""
    return present_as_other_vendor(monkeypatch)


@pytest.fixture(params=["this machine", "other vendor"])
def each_vendor(request, monkeypatch):
    """The test once as this machine and once as the other vendor's (:func:`present_as_other_vendor`); returns the
    kind this process presents."""
    if request.param == "other vendor":
        return present_as_other_vendor(monkeypatch)
    return kernels.this_kind()
