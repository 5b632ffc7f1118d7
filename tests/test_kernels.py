"""The kernel pin and the CPU kind (sec_lib.kernels): set before torch runs, checked at every run, recorded."""
import json
import os
import subprocess
import sys

import pytest

from kinds import OTHER_VENDOR, other_kind, other_vendor
from kinds import as_other_vendor, each_vendor  # noqa: F401  (fixtures: tests/kinds.py)
from sec_lib import kernels


def test_this_process_runs_under_the_default_pin():
    assert os.environ["SEC_KERNELS"] == kernels.DEFAULT_PIN == "avx2"
    assert os.environ["ATEN_CPU_CAPABILITY"] == "avx2" and os.environ["MKL_CBWR"] == "AVX2,STRICT"
    if "avx2" not in kernels.cpu_info()["cpu_isa"].split():
        pytest.skip("this CPU has no AVX2: the avx2 pin cannot hold here")
    assert kernels.check() == "AVX2"


def test_a_bad_pin_name_is_a_clear_error():
    with pytest.raises(ValueError, match="'avx9' is not valid; valid values: avx2, native"):
        kernels.pin_name({"SEC_KERNELS": "avx9"})
    out = subprocess.run([sys.executable, "-c", "import sec_lib"], capture_output=True, text=True,
                         env={**os.environ, "SEC_KERNELS": "avx9"})
    assert out.returncode != 0 and "valid values: avx2, native" in out.stderr


def test_child_env_sets_or_removes_the_pins_variables():
    env = kernels.child_env("native", {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2", "X": "1"})
    assert env == {"X": "1", "SEC_KERNELS": "native"}
    env = kernels.child_env("avx2", {})
    assert env == {"SEC_KERNELS": "avx2", "ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2",
                   "MKL_CBWR": "AVX2,STRICT", "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR"}


#: numpy and torch imported before sec_lib, under an environment asking ATen for its default kernels: the pin
#: still decides ATen's kernels (it is read at torch's first kernel), then a run goes to a pinned child process
#: where the CPU has AVX-512 (numpy's pin is read at its import). One child for both checks (each child imports
#: torch and the library).
IMPORTED_FIRST = """
import numpy, torch, sec_lib
from sec_lib import kernels
torch.ones(3).exp()
print(kernels.capability(), kernels.pin_name())
from sec_lib.runs.train import TrainConfig, train
train(TrainConfig(dataset='toy', model='mlp', iterations=2, batch_size=12, eval_every=0))
print('trained')
"""


@pytest.fixture(scope="module")
def imported_first():
    env = {k: v for k, v in os.environ.items() if k not in kernels.KERNEL_VARS}
    env["ATEN_CPU_CAPABILITY"] = "default"          # sec_lib's import overrides it before the first kernel
    return subprocess.run([sys.executable, "-c", IMPORTED_FIRST], capture_output=True, text=True, env=env)


def test_importing_sec_lib_pins_the_kernels_even_after_torch_is_imported(imported_first):
    """ATen's pin is read when torch runs its first kernel, not when it is imported (numpy's is read at its
    import: see test_numpy_imported_before_the_pin_on_an_avx512_cpu_sends_the_run_to_a_pinned_child, the same child)."""
    out = imported_first
    assert out.stdout.strip(), out.stderr
    cap, pin = out.stdout.splitlines()[0].split()
    assert pin == "avx2" and cap == ("AVX2" if "avx2" in kernels.cpu_info()["cpu_isa"].split() else cap)


def test_a_process_with_kernels_that_are_not_the_pinned_ones_trains_in_a_pinned_child():
    """torch ran a kernel under another capability before sec_lib was imported: this process cannot hold the pin, so
    the run trains in a child process started under it, and says so (tests/runs/test_pinned_child.py: the same bits)."""
    code = ("import torch; torch.ones(3).exp(); import sec_lib\n"
            "from sec_lib.runs.train import TrainConfig, train\n"
            "r = train(TrainConfig(dataset='toy', model='mlp', iterations=2, batch_size=12, eval_every=0))\n"
            "print('trained', r.status, sec_lib.kernels.capability())")
    env = {k: v for k, v in os.environ.items() if k not in kernels.KERNEL_VARS}
    env["ATEN_CPU_CAPABILITY"] = "default"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert "trained done DEFAULT" in out.stdout                    # this process stayed unpinned; its child trained
    assert "training in a child process started under the pin" in out.stderr and "KernelPinError" not in out.stderr


def test_numpy_runs_at_its_avx2_level_under_the_pin():
    """numpy's own SIMD dispatch is stopped at X86_V3 (AVX2): in this process no target above it is in force."""
    from numpy._core._multiarray_umath import __cpu_dispatch__
    assert set(kernels.NUMPY_ABOVE_AVX2) <= set(__cpu_dispatch__) | {"AVX512_SPR"}   # names numpy 2.4 knows
    assert kernels.numpy_above_avx2() == []


def test_numpy_imported_before_the_pin_on_an_avx512_cpu_sends_the_run_to_a_pinned_child(imported_first):
    """numpy, unlike ATen, picks its kernels when it is imported: a process that imported it before sec_lib on a
    CPU with AVX-512 would compute the step table's np.log with other bits than an AVX2-only CPU of its kind, so its
    run trains in a child process started under the pin (numpy stopped at AVX2 there). On a CPU without AVX-512
    numpy's dispatch is at most AVX2 whatever the order, and the run trains in this process."""
    out = imported_first
    assert out.returncode == 0 and "trained" in out.stdout, out.stderr
    child = "training in a child process started under the pin" in out.stderr
    assert child == ("avx512f" in kernels.cpu_info()["cpu_isa"].split())


def test_provenance_names_the_cpu_kind_and_settings(each_vendor):
    """As this machine and as the other vendor's (tests/kinds.py): the kind a run records is the one it presents."""
    p = kernels.provenance()
    assert p["cpu_kind"] == f"{p['cpu_vendor']}/{p['aten_capability']}/{p['kernel_pin']}" == kernels.this_kind()
    assert p["cpu_kind"] == each_vendor
    assert p["torch"].startswith("2.") and p["kernel_pin"] == "avx2"
    assert json.loads(p["kernel_env"]) == {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2,STRICT",
                                           "ONEDNN_MAX_CPU_ISA": "AVX2", "adam": "fused",
                                           "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR"}
    assert p["mkl"] != "" and p["onednn"] != ""


def test_the_avx2_pin_steps_adam_with_the_fused_kernel_and_it_is_the_same_update():
    """Fused and foreach Adam compute the same update (to rounding); only the pin's runs use the fused one."""
    import torch
    assert kernels.adam_kwargs("cpu", "avx2") == {"fused": True}
    assert kernels.adam_kwargs("cpu", "native") == {} and kernels.adam_kwargs("cuda", "avx2") == {}
    g = torch.Generator().manual_seed(0)
    p0 = [torch.rand(8, 4, generator=g), torch.rand(4, generator=g)]
    grads = [[torch.rand(*t.shape, generator=g) for t in p0] for _ in range(5)]
    out = []
    for kw in ({"fused": True}, {"foreach": True}):
        ps = [t.clone().requires_grad_() for t in p0]
        opt = torch.optim.Adam(ps, lr=1e-2, **kw)
        for gs in grads:
            for t, gr in zip(ps, gs):
                t.grad = gr.clone()
            opt.step()
        out.append(ps)
    for a, b in zip(*out):
        assert torch.allclose(a, b, rtol=0, atol=1e-6)


def test_another_kind_is_derived_from_this_machines_and_flips_the_vendor(each_vendor):
    """tests/kinds.py: "another CPU kind" is this process's kind with the other vendor, never a named kind (an Intel
    machine's own kind is ``Intel/AVX2/avx2``), as this machine and as the other vendor's."""
    mine, other = kernels.this_kind(), other_kind()
    assert mine == each_vendor and other != mine and other_kind(other) == mine
    assert other.split("/")[1:] == mine.split("/")[1:]                # the same capability and pin
    if mine.split("/")[0] in OTHER_VENDOR:
        assert {mine.split("/")[0], other.split("/")[0]} == {"AMD", "Intel"}
    assert other_kind("AMD/AVX2/avx2") == "Intel/AVX2/avx2" and other_kind("Intel/AVX512/native") == "AMD/AVX512/native"


def test_as_other_vendor_presents_the_other_vendors_cpu(request):
    """The fixture changes what this process says of its CPU (vendor and model: its kind and a run's provenance),
    not the ISA flags, which name the kernels in force."""
    real, mine = kernels.cpu_info(), kernels.this_kind()
    presented = request.getfixturevalue("as_other_vendor")
    info = kernels.cpu_info()
    assert presented == other_kind(mine) == kernels.this_kind() == kernels.provenance()["cpu_kind"] != mine
    assert info["cpu_vendor"] == other_vendor(real["cpu_vendor"]) and info["cpu_model"] != real["cpu_model"]
    assert info["cpu_isa"] == real["cpu_isa"]
