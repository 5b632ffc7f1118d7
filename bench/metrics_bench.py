"""Time the chunked retrieval metrics on random embeddings and report peak memory.

Usage:  python bench/metrics_bench.py [N] [D] [n_classes]    (defaults: 60000 512 11224, SOP-sized)
(from the repository root; sec_lib is imported from the installed package or, failing that, from
the checkout that holds this file.)

Random Gaussian float32 embeddings with random labels; times ``recall_at_k`` (ks 1, 10, 100, 1000
as for SOP) and ``map_at_r`` separately, then prints the process's peak resident memory
(``resource.getrusage``, which includes the embeddings themselves and the Python/torch runtime).
Nothing here runs in the test suite.
"""
from __future__ import annotations

import resource
import sys
import time


def _peak_rss_mb() -> float:
    # Linux reports ru_maxrss in kilobytes (macOS: bytes)
    ru = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return ru / 1024.0 if sys.platform != "darwin" else ru / 2**20


def _cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def main(argv: list[str]) -> None:
    n = int(argv[1]) if len(argv) > 1 else 60000
    d = int(argv[2]) if len(argv) > 2 else 512
    n_classes = int(argv[3]) if len(argv) > 3 else max(2, n * 11318 // 60502)
    if n < 2 or d < 1 or not (1 <= n_classes <= n):
        raise ValueError(f"need N >= 2, D >= 1, 1 <= n_classes <= N; got N={n}, D={d}, n_classes={n_classes}")

    import numpy as np
    import torch

    try:
        from sec_lib.metrics import BLOCK_ELEMENTS, map_at_r, recall_at_k
    except ModuleNotFoundError:
        from pathlib import Path

        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from sec_lib.metrics import BLOCK_ELEMENTS, map_at_r, recall_at_k

    gen = torch.Generator().manual_seed(0)
    emb = torch.randn(n, d, generator=gen)
    labels = torch.from_numpy(np.random.default_rng(0).integers(0, n_classes, n))
    ks = tuple(k for k in (1, 10, 100, 1000) if k < n - 1)
    print(f"N={n} D={d} classes={n_classes} torch_threads={torch.get_num_threads()} "
          f"block={BLOCK_ELEMENTS} entries (chunk={max(1, BLOCK_ELEMENTS // n)} queries)")
    print(f"after setup: peak RSS {_peak_rss_mb():.0f} MB")

    t, c = time.perf_counter(), _cpu_s()
    rec = recall_at_k(emb, labels, ks=ks)
    t_rec = time.perf_counter() - t
    print(f"recall_at_k{ks}: {t_rec:.1f} s wall, {_cpu_s() - c:.1f} s CPU  {{{', '.join(f'{k}: {v:.2f}' for k, v in rec.items())}}}  "
          f"peak RSS {_peak_rss_mb():.0f} MB")

    t, c = time.perf_counter(), _cpu_s()
    mapr = map_at_r(emb, labels)
    t_map = time.perf_counter() - t
    print(f"map_at_r: {t_map:.1f} s wall, {_cpu_s() - c:.1f} s CPU  MAP@R={mapr:.3f}  peak RSS {_peak_rss_mb():.0f} MB")
    print(f"total {t_rec + t_map:.1f} s, peak RSS {_peak_rss_mb():.0f} MB "
          f"(a dense float32 {n}x{n} similarity alone would be {4 * n * n / 2**20:.0f} MB)")


if __name__ == "__main__":
    main(sys.argv)
