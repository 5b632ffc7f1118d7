"""The golden pretraining prefix: the first PREFIX_STEPS steps of the committed pretraining config
(sec_lib.runs.pretrain), its trunk's weights hash per CPU kind in ``pretrain_prefix.json``.

    python tests/golden/pretrain_prefix.py            # print this machine's kind and hash
    python tests/golden/pretrain_prefix.py --record   # add (or replace) this kind's entry

tests/runs/test_pretrain.py retrains the prefix: on a CPU kind that has an entry the hash must match exactly (Level 1
of the reproducibility contract, sec_lib.kernels); on another kind the test is skipped and says why. The full run
is checked by ``python -m sec_lib.runs.pretrain --check`` (about 6 minutes of one core).
"""
from pathlib import Path

HERE = Path(__file__).resolve().parent
GOLDEN = HERE / "pretrain_prefix.json"


def prefix_hash() -> dict:
    from sec_lib.runs import pretrain as pt
    res = pt.pretrain(pt.committed_config(), steps=pt.PREFIX_STEPS)
    return {"steps": res["steps"], "weights_hash": pt.weights_hash(res["trunk"])}


def main():
    from golden import report          # the script's folder is on sys.path, run or imported
    got = prefix_hash()
    report(GOLDEN, got)


if __name__ == "__main__":
    main()
