"""Golden tables of the training loop's instrumentation: every table of three short glyph runs, hashed per CPU kind
in ``instrument_runs.json``, recorded before the instrumentation moved into :mod:`sec_lib.monitor`.

    python tests/golden/instrument_runs.py            # print this machine's kind and hashes
    python tests/golden/instrument_runs.py --record   # add (or replace) this kind's entry in instrument_runs.json

The runs cover what ``short_runs.py`` does not: batch statistics thinned (``stats_every=3``) beside Δθ at another
interval (``dtheta_every=2``), the grad-scatter table, a loss that reads the raw embedding (``npair_ip``) and a
self-supervised run (two views). Every table is hashed (``step_time`` and ``wall_s`` left out) together with its
column order, so a moved column fails as a changed value would. tests/monitor/test_monitor.py retrains them: on a CPU kind
with an entry the hashes must match exactly; on another kind the test is skipped and says why.
"""
import hashlib
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
GOLDEN = HERE / "instrument_runs.json"
TABLES = ("steps", "tracked", "evals", "grad_scatter", "test_norms", "cosines")


def configs() -> dict:
    from sec_lib.runs import experiments as ex
    p = ex.get_profile("smoke")
    return {"semihard-sec-thin": ex.config(p, "semihard", "sec", 0, iterations=12, eval_every=6, stats_every=3,
                                           dtheta_every=2),
            "npair_ip-none": ex.config(p, "npair_ip", "none", 1, iterations=8, eval_every=0, dtheta_every=3),
            "ntxent-views": ex.config(p, "ntxent", "sec", 0, iterations=6, eval_every=0)}


def table_hash(df) -> str:
    import pandas as pd
    cols = [c for c in df.columns if c not in ("step_time", "wall_s")]
    h = hashlib.sha256(json.dumps(cols).encode())
    h.update(pd.util.hash_pandas_object(df[cols].reset_index(drop=True), index=True).to_numpy().tobytes())
    return h.hexdigest()[:16]


def hashes(result) -> dict:
    return {name: table_hash(getattr(result, name)) for name in TABLES}


def main():
    from golden import report          # the script's folder is on sys.path, run or imported
    from sec_lib.runs.train import train
    got = {name: hashes(train(cfg)) for name, cfg in configs().items()}
    report(GOLDEN, got)


if __name__ == "__main__":
    main()
