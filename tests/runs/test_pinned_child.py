"""No import-order trap: a process that imported torch, numpy and pandas before sec_lib, so that it cannot hold the
kernel pin, still trains, through one child process started under the pin, with the bits a pinned process gives."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sec_lib import kernels
from sec_lib.runs import pinned

GOLDEN_DIR = Path(__file__).resolve().parents[1] / "golden"

RUN = """
import sys{first}
sys.path.insert(0, sys.argv[1])
import sec_lib, short_runs
from sec_lib.runs.train import train
name, cfg = next(iter(short_runs.configs().items()))
steps = []
r = train(cfg, progress=lambda i, n: steps.append((i, n)))
print(json.dumps({{"name": name, "hashes": short_runs.hashes(r), "progress": steps[-1], "count": len(steps),
                   "iterations": cfg.iterations, "capability": sec_lib.kernels.capability()}}))
"""


def _run(first: str, env_extra: dict):
    env = {k: v for k, v in os.environ.items() if k not in kernels.KERNEL_VARS}
    env.update(env_extra, PYTHONHASHSEED="0")
    code = RUN.format(first=first)
    out = subprocess.run([sys.executable, "-c", code, str(GOLDEN_DIR)], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1]), out.stderr


@pytest.fixture(scope="module")
def both():
    """[a process that imported torch (and ran a kernel), numpy and pandas before sec_lib under another ATen
    capability; a process that imported sec_lib first]: each trains the first golden short run."""
    late = _run(", json, torch, numpy, pandas; torch.ones(3).exp()", {"ATEN_CPU_CAPABILITY": "default"})
    first = _run("\nimport sec_lib, json", {})
    return late, first


def test_a_process_that_cannot_hold_the_pin_trains_in_a_pinned_child_with_the_same_bits(both):
    (late, late_err), (first, first_err) = both
    assert late["capability"] == "DEFAULT"              # this process ran its kernels unpinned
    assert late["hashes"] == first["hashes"]             # the child gave exactly the pinned run
    notice = [l for l in late_err.splitlines() if l.startswith("sec_lib: ")]
    assert len(notice) == 1 and "child process started under the pin" in notice[0] and "'avx2'" in notice[0]
    assert not [l for l in first_err.splitlines() if l.startswith("sec_lib: ")]


def test_the_childs_progress_reaches_the_callers_callback(both):
    (late, _), (first, _) = both
    assert late["progress"] == first["progress"] == [late["iterations"], late["iterations"]]
    assert late["count"] == first["count"] == late["iterations"]


def test_a_pinned_process_holds_the_pin_and_a_failing_child_names_its_error():
    assert pinned.holds_pin() == (True, "")
    with pytest.raises(RuntimeError, match="pinned child process failed"):
        pinned.train_in_child({"not": "a config"}, why="a test")          # the child cannot train a dict
