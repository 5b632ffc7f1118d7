"""What warm kernels save when the book's pages are executed, measured in one run.

    python bench/warm_kernels.py [--pages data theory table1 norms tiers] [--profile smoke] [--rounds 2]

The same pages, one at a time, two ways, alternating which goes first in each round so that machine load falls on
both alike:

- **fresh**: a ``python -m papermill`` process and a fresh kernel per page (how ``sec-book run`` executed pages
  before sec_lib.site.warmkernel);
- **warm**: one :class:`sec_lib.site.warmkernel.WarmKernel`, reset before each page (how it executes them now).

It prints each way's wall time and CPU time (this process's children: papermill, the kernels), their ratios, and
whether every page's outputs are the same both ways (widget model ids, random in every run, masked). The pages read
the quick store (``$SEC_RUNS_DIR``, default ``data/runs``): train the profile first (``python -m sec_lib.book train
--profile smoke``).

One run of this script (AMD EPYC, 2 cores, both also busy with the decisive tier's training; the smoke profile's
237 runs in the store), printed:

    5 pages (data, theory, table1, norms, tiers) at profile smoke, 2 rounds, one page at a time
      fresh    9.07 s wall and   7.75 CPU-s per page
      warm     5.24 s wall and   3.98 CPU-s per page
    warm / fresh: wall 0.58, CPU 0.51
    every page's outputs the same both ways (widget ids masked): True
"""
import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from sec_lib.chapters.explore import RENDER_ENV  # noqa: E402
from sec_lib.site.warmkernel import WarmKernel  # noqa: E402


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def outputs(path: Path) -> list:
    nb = json.loads(path.read_text())
    return [re.sub(r"[0-9a-f]{32}", "ID", json.dumps([{k: v for k, v in o.items() if k != "metadata"}
                                                      for o in c.get("outputs", [])], sort_keys=True))
            for c in nb["cells"] if c["cell_type"] == "code"]


def fresh(pages, profile, out: Path, env) -> None:
    for page in pages:
        subprocess.run([sys.executable, "-m", "papermill", str(REPO / "notebooks" / f"{page}.ipynb"),
                        str(out / f"{page}.ipynb"), "--kernel", "python3", "--cwd", str(REPO), "--no-progress-bar",
                        "-p", "profile", profile], env=env, check=True,
                       capture_output=True)


def warm(pages, profile, out: Path, env) -> None:
    k = WarmKernel(REPO, env)
    try:
        for page in pages:
            k.execute(REPO / "notebooks" / f"{page}.ipynb", out / f"{page}.ipynb", {"profile": profile})
    finally:
        k.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pages", nargs="+", default=["data", "theory", "table1", "norms", "tiers"])
    ap.add_argument("--profile", default="smoke")
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    env = dict(os.environ, PYTHONHASHSEED="0", **{RENDER_ENV: "1"})
    times = {"fresh": [0.0, 0.0], "warm": [0.0, 0.0]}
    same = True
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(a.rounds):
            got = {}
            for way in (("fresh", "warm") if r % 2 == 0 else ("warm", "fresh")):
                out = Path(tmp) / f"{way}{r}"
                out.mkdir()
                t, c = time.perf_counter(), children_cpu()
                (fresh if way == "fresh" else warm)(a.pages, a.profile, out, env)
                times[way][0] += time.perf_counter() - t
                times[way][1] += children_cpu() - c
                got[way] = {p: outputs(out / f"{p}.ipynb") for p in a.pages}
            same &= got["fresh"] == got["warm"]
    n = a.rounds * len(a.pages)
    print(f"{len(a.pages)} pages ({', '.join(a.pages)}) at profile {a.profile}, {a.rounds} rounds, one page at a time")
    for way, (wall, cpu) in times.items():
        print(f"  {way:6s} {wall / n:6.2f} s wall and {cpu / n:6.2f} CPU-s per page")
    print(f"warm / fresh: wall {times['warm'][0] / times['fresh'][0]:.2f}, CPU {times['warm'][1] / times['fresh'][1]:.2f}")
    print(f"every page's outputs the same both ways (widget ids masked): {same}")


if __name__ == "__main__":
    main()
