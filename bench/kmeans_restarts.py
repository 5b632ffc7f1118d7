"""k-means for NMI/F1 with its restarts at once against one after the other, measured in one run.

    python bench/kmeans_restarts.py [--classes 1392] [--per-class 12] [--workers 2 4] [--processes 1] [--out F.json]

Every run ends with NMI/F1 from k-means (10 restarts) on the test classes' embeddings; the gpu profile's 1,392 classes
took 55 s on one thread while the lent GPU idled. ``metrics.kmeans_labels(..., workers=w)`` runs the restarts on
``w`` threads and gives the same labels; this script times both on synthetic clustered embeddings of the profile's
shape (``--per-class`` x ``--classes`` points in 128 dimensions, l2-normalized, as ``nmi_f1`` clusters them) and checks
that the labels are identical. ``--processes`` P > 1 runs P copies at once (a chunk's processes end together and
cluster together), each in its own process: the time is then the slowest copy's. Prints seconds, the ratio to one
thread, and whether the labels were identical; ``--out`` writes the same as JSON.
"""
import argparse
import json
import multiprocessing
import os
import platform
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import sec_lib  # noqa: E402,F401  (the kernel pin, before numpy)
import numpy as np  # noqa: E402


def embeddings(classes: int, per_class: int, dim: int = 128, spread: float = 1.2, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(classes, dim))[np.repeat(np.arange(classes), per_class)]
    x = x + spread * rng.normal(size=x.shape)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def timed(args) -> tuple[float, list]:
    """(seconds, labels) of one clustering with ``workers`` restarts at once, BLAS on one thread."""
    classes, per_class, workers, seed = args
    import sklearn.cluster  # noqa: F401  (imported before the clock starts: about 3 s the first time)
    from sec_lib.metrics import kmeans_labels
    from sec_lib.threads import torch_threads
    x = embeddings(classes, per_class)
    with torch_threads(1):
        t = time.perf_counter()
        labels = kmeans_labels(x, classes, 10, seed, workers=workers)
        return time.perf_counter() - t, labels.tolist()


def measure(classes: int, per_class: int, workers: int, processes: int) -> tuple[float, list]:
    if processes == 1:
        return timed((classes, per_class, workers, 0))
    with ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("spawn")) as pool:
        out = list(pool.map(timed, [(classes, per_class, workers, 0)] * processes))
    return max(s for s, _ in out), out[0][1]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--classes", type=int, default=1392, help="clusters = classes (default 1392, the glyph test split)")
    ap.add_argument("--per-class", type=int, default=12, help="points per class (default 12: 16,704 points)")
    ap.add_argument("--workers", type=int, nargs="+", default=[2], help="restarts at once to time against 1")
    ap.add_argument("--processes", type=int, default=1, help="copies clustering at once (default 1)")
    ap.add_argument("--out", help="also write the numbers as JSON here")
    a = ap.parse_args(argv)
    for name in ("per_class", "processes"):
        if getattr(a, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(a, name)}")
    if a.classes < 2 or min(a.workers) < 1:
        ap.error("--classes must be >= 2 and every --workers >= 1")
    print(f"{a.classes} classes x {a.per_class} points, 10 restarts, {a.processes} process(es) at once; "
          f"{os.cpu_count()} cores ({platform.processor() or platform.machine()})", flush=True)
    base, ref = measure(a.classes, a.per_class, 1, a.processes)
    rows = [{"workers": 1, "seconds": round(base, 2), "speedup": 1.0, "identical": True}]
    print(f"  1 restart at a time: {base:.1f} s", flush=True)
    for w in a.workers:
        s, labels = measure(a.classes, a.per_class, w, a.processes)
        rows.append({"workers": w, "seconds": round(s, 2), "speedup": round(base / s, 2), "identical": labels == ref})
        print(f"  {w} restarts at once: {s:.1f} s, {base / s:.2f}x, labels identical: {labels == ref}", flush=True)
    if a.out:
        Path(a.out).write_text(json.dumps({"classes": a.classes, "per_class": a.per_class, "processes": a.processes,
                                           "cores": os.cpu_count(), "rows": rows}, indent=1))
    return 0 if all(r["identical"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
