"""What the golden scripts (short_runs.py, instrument_runs.py, pretrain_prefix.py) share: print this machine's
hashes and, with ``--record``, add (or replace) its CPU kind's entry in the script's JSON table."""
import json
import sys
from pathlib import Path


def report(golden: Path, got: dict) -> None:
    """Print ``got`` under this process's CPU kind; with ``--record`` on the command line, write it with the CPU's
    description into ``golden`` (other kinds' entries kept)."""
    from sec_lib import kernels
    kind = kernels.this_kind()
    print(json.dumps({kind: got}, indent=1))
    if "--record" in sys.argv:
        table = json.loads(golden.read_text()) if golden.exists() else {}
        table[kind] = {**got, "cpu": kernels.cpu_info()}
        golden.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
        print(f"recorded {kind} in {golden}")
