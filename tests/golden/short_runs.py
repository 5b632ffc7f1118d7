"""The golden short runs: two short glyph runs (the small CNN, BatchNorm, the ms and semihard losses with SEC,
Adam) whose step and evaluation tables are hashed per CPU kind in ``short_runs.json``.

    python tests/golden/short_runs.py            # print this machine's kind and hashes
    python tests/golden/short_runs.py --record   # add (or replace) this kind's entry in short_runs.json

tests/runs/test_reproducibility.py retrains them: on a CPU kind that has an entry the hashes must match exactly
(Level 1 of the reproducibility contract); on another kind the test is skipped and says why.
"""
import hashlib
from pathlib import Path

HERE = Path(__file__).resolve().parent
GOLDEN = HERE / "short_runs.json"
RUNS = {"ms-sec": ("ms", "sec"), "semihard-none": ("semihard", "none")}


def configs() -> dict:
    from sec_lib.runs import experiments as ex
    p = ex.get_profile("smoke")
    return {name: ex.config(p, loss, variant, 0, iterations=20, eval_every=10) for name, (loss, variant) in RUNS.items()}


def table_hash(df) -> str:
    cols = sorted(c for c in df.columns if c not in ("step_time", "wall_s"))
    return hashlib.sha256(df[cols].to_numpy().tobytes()).hexdigest()[:16]


def hashes(result) -> dict:
    return {"steps": table_hash(result.steps), "evals": table_hash(result.evals), "R@1": result.metrics["R@1"]}


def main():
    from golden import report          # the script's folder is on sys.path, run or imported
    from sec_lib.runs.train import train
    got = {name: hashes(train(cfg)) for name, cfg in configs().items()}
    report(GOLDEN, got)


if __name__ == "__main__":
    main()
