"""Time SOP-size retrieval evaluation on each backend and report peak memory against the goals.

Usage:  python bench/metrics_bench.py [N] [D] [n_classes]    (defaults: 60000 512 11222, SOP-sized)
(from the repository root; sec_lib is imported from the installed package or, failing that, from
the checkout that holds this file.)

Random Gaussian float32 embeddings with random labels (about 5.4 per class, as SOP's test split:
60,502 images of 11,316 products). Each backend ("torch", and "faiss" when faiss-cpu is installed)
runs in its own fresh subprocess, one after the other, so that its peak memory is its own:
``sec_lib.metrics.evaluate(emb, labels, ks=(1, 10, 100, 1000), clustering=False, backend=...)``,
which computes R@{1,10,100,1000} and MAP@R in one pass. For each backend the bench prints the wall
and CPU time of that call, the process's peak resident memory (``resource.getrusage`` max RSS: the
embeddings, the Python/torch runtime and the evaluation's working memory together) and the resident
memory before the call, then the torch/faiss ratios, whether both backends gave the same numbers,
and each figure against the goals (60 s wall, 1 GB peak). The load average before and after is
printed too: the machine may be shared, and wall times grow with what else runs (the CPU time
moves much less with the load; with 2 cores a quiet machine's wall time is at least half of it).
Nothing here runs in the test suite.
"""
from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

GOAL_WALL_S = 60.0
GOAL_PEAK_MB = 1024.0
KS = (1, 10, 100, 1000)


def _peak_rss_mb() -> float:
    # Linux reports ru_maxrss in kilobytes (macOS: bytes)
    ru = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return ru / 1024.0 if sys.platform != "darwin" else ru / 2**20


def _rss_mb() -> float:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:  # not Linux
        return float("nan")


def _cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _import_metrics():
    try:
        from sec_lib import metrics
    except ModuleNotFoundError:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from sec_lib import metrics
    return metrics


def worker(backend: str, n: int, d: int, n_classes: int) -> dict:
    """One backend's run, in this (fresh) process: returns its figures."""
    import numpy as np
    import torch

    metrics = _import_metrics()
    gen = torch.Generator().manual_seed(0)
    emb = torch.randn(n, d, generator=gen)
    labels = torch.from_numpy(np.random.default_rng(0).integers(0, n_classes, n))
    ks = tuple(k for k in KS if k < n - 1)
    rss_before = _rss_mb()
    t, c = time.perf_counter(), _cpu_s()
    scores = metrics.evaluate(emb, labels, ks=ks, clustering=False, backend=backend)
    wall = time.perf_counter() - t
    return {"backend": backend, "wall_s": wall, "cpu_s": _cpu_s() - c, "peak_mb": _peak_rss_mb(),
            "rss_before_mb": rss_before, "scores": scores, "torch_threads": torch.get_num_threads()}


def _verdict(value: float, goal: float) -> str:
    return "meets" if value <= goal else "misses"


def main(argv: list[str]) -> None:
    if len(argv) > 1 and argv[1] == "--worker":
        print(json.dumps(worker(argv[2], int(argv[3]), int(argv[4]), int(argv[5]))))
        return
    n = int(argv[1]) if len(argv) > 1 else 60000
    d = int(argv[2]) if len(argv) > 2 else 512
    n_classes = int(argv[3]) if len(argv) > 3 else max(2, round(n * 11316 / 60502))
    if n < 3 or d < 1 or not (1 <= n_classes <= n):
        raise ValueError(f"need N >= 3, D >= 1, 1 <= n_classes <= N; got N={n}, D={d}, n_classes={n_classes}")

    metrics = _import_metrics()
    backends = ["torch"] + (["faiss"] if metrics.faiss_available() else [])
    print(f"N={n} D={d} classes={n_classes} ks={tuple(k for k in KS if k < n - 1)} + MAP@R; "
          f"{os.cpu_count()} CPUs; load average before: {os.getloadavg()[0]:.2f}")
    if len(backends) == 1:
        print("faiss-cpu is not installed: only the torch backend runs (pip install 'sec_lib[fast]')")
    runs = {}
    for b in backends:
        cmd = [sys.executable, __file__, "--worker", b, str(n), str(d), str(n_classes)]
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode != 0:
            raise SystemExit(f"backend {b} failed (exit {out.returncode}):\n{out.stderr}")
        r = runs[b] = json.loads(out.stdout.strip().splitlines()[-1])
        sc = "  ".join(f"{k} {v:.3f}" for k, v in r["scores"].items())
        print(f"{b:>5}: {r['wall_s']:6.1f} s wall, {r['cpu_s']:6.1f} s CPU ({r['torch_threads']} torch threads), "
              f"peak RSS {r['peak_mb']:5.0f} MB ({r['rss_before_mb']:.0f} MB before the call)  |  {sc}")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    if "faiss" in runs:
        t, f = runs["torch"], runs["faiss"]
        same = t["scores"] == f["scores"]
        print(f"torch / faiss: wall {t['wall_s'] / f['wall_s']:.2f}x, peak memory {t['peak_mb'] / f['peak_mb']:.2f}x; "
              f"same numbers: {'yes' if same else 'NO'}")
        if not same:
            diff = {k: (t["scores"][k], f["scores"][k]) for k in t["scores"] if t["scores"][k] != f["scores"][k]}
            print(f"  differing (torch, faiss): {diff}")
    print(f"goals: <= {GOAL_WALL_S:.0f} s wall and <= {GOAL_PEAK_MB:.0f} MB peak for R@{{1,10,100,1000}} + MAP@R")
    for b, r in runs.items():
        print(f"  {b:>5}: {r['wall_s']:.1f} s ({_verdict(r['wall_s'], GOAL_WALL_S)} the time goal), "
              f"{r['peak_mb']:.0f} MB ({_verdict(r['peak_mb'], GOAL_PEAK_MB)} the memory goal)")


if __name__ == "__main__":
    main(sys.argv)
