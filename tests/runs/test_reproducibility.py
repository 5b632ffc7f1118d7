"""Level 1 of the reproducibility contract (sec_lib.kernels): on one CPU kind a run's bits do not depend on
the process, the launcher or the thread pool around it, and the golden short runs reproduce exactly."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sec_lib import kernels

GOLDEN_DIR = Path(__file__).resolve().parents[1] / "golden"
sys.path.insert(0, str(GOLDEN_DIR))
import short_runs  # noqa: E402

BOTH = """
import json, sys, torch
sys.path.insert(0, sys.argv[1])
import short_runs
from sec_lib.runs.launch import PoolLauncher
from sec_lib.runs.store import ResultStore
from sec_lib.runs.train import train
cfgs = short_runs.configs()
torch.set_num_threads(2)                     # the caller's pool; the run uses its own 1 thread
here = {n: short_runs.hashes(train(c)) for n, c in cfgs.items()}
PoolLauncher(2).run(list(cfgs.values()), sys.argv[2])     # fresh spawned workers, the local pool launcher
store = ResultStore(sys.argv[2])
print(json.dumps([here, {n: short_runs.hashes(store.get(c)) for n, c in cfgs.items()}]))
"""


def _child(code, *args):
    out = subprocess.run([sys.executable, "-c", code, str(GOLDEN_DIR), *map(str, args)], capture_output=True,
                         text=True, env={**os.environ, "PYTHONHASHSEED": "0"})
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def fresh_hashes(tmp_path_factory):
    """The golden short runs' hashes from a fresh process: [trained in it, trained by its local pool's workers]
    (one child process for both, instead of one per launcher: each costs an interpreter importing torch)."""
    return _child(BOTH, tmp_path_factory.mktemp("repro") / "store")


def test_fresh_processes_with_different_launchers_and_thread_pools_give_identical_tables(fresh_hashes):
    """A fresh process trains the runs itself (with a 2-thread pool of its own), then its local pool's
    freshly spawned workers train them again into a store: the same tables."""
    a, b = fresh_hashes
    assert a == b and set(a) == set(short_runs.RUNS)


def test_the_golden_short_runs_reproduce_exactly_on_their_cpu_kind(fresh_hashes):
    """The fresh process's runs (the same bits in its pool's workers: the test above) against the recorded
    hashes, as ``python tests/golden/short_runs.py`` records them (a fresh process)."""
    golden = json.loads(short_runs.GOLDEN.read_text())
    kind = kernels.this_kind()
    if kind not in golden:
        pytest.skip(f"no golden hashes for this CPU kind {kind} (recorded: {', '.join(sorted(golden))}); bit-identity "
                    f"is not expected across kinds (Level 2 of the contract). To add this kind: "
                    f"python tests/golden/short_runs.py --record")
    for got_in in fresh_hashes:
        assert set(got_in) == set(short_runs.RUNS)
        for name, got in got_in.items():
            want = {k: golden[kind][name][k] for k in got}
            assert got == want, f"{name} on {kind}: {got} != {want}"
