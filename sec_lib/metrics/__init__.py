"""Retrieval and clustering metrics for deep metric learning, in PERCENT (0-100) like the paper's tables.

Definitions follow the SEC paper's protocol (Zhang, Li, Zhang, "Deep Metric Learning with Spherical
Embedding", NeurIPS 2020, Sec. 5 and the authors' ``evaluation.py`` in Dyfine/SphericalEmbedding):

* embeddings are l2-normalized here and compared by cosine similarity (a zero row stays zero, i.e.
  it has similarity 0 to everything);
* Recall@K (Song et al., "Deep Metric Learning via Lifted Structured Feature Embedding", CVPR 2016):
  the fraction of queries with at least one same-class item among their K nearest neighbours,
  averaged over **all** queries (a query whose class has no other member counts as a miss, as in
  the authors' code);
* NMI = 2 I / (H_cluster + H_class) of a k-means clustering with k = number of classes;
* F1 = pairwise precision/recall F-measure of that clustering;
* MAP@R (Musgrave, Belongie, Lim, "A Metric Learning Reality Check", ECCV 2020).

Backends (``backend=`` of every retrieval function; the results are the same):

* ``"torch"``: queries in chunks of ``chunk_size`` rows; each chunk holds one float32
  ``chunk_size x n_candidates`` similarity block (with ``chunk_size=None`` at most
  :data:`BLOCK_ELEMENTS` = 2**25 entries, 128 MB). Recall@K needs no sorting: a query's first-hit
  rank is the number of candidates more similar than its most similar positive (plus those exactly
  as similar with a lower index). MAP@R takes ``torch.topk`` of R + 1 entries per query. Runs on
  any torch device.
* ``"faiss"`` (optional, ``pip install 'sec_lib[fast]'``): exact k-NN search with faiss's
  ``IndexFlatIP`` on the l2-normalized float32 embeddings (inner product = cosine), k = max(K, R)
  + 1 per query, in chunks of at most :data:`FAISS_QUERY_CHUNK` queries. CPU only. A row whose
  k-th and (k+1)-th neighbours tie is ranked in full from one float32 matrix-multiply row.
* ``"auto"`` (default): faiss on the CPU when faiss-cpu is installed and a query needs at most
  :data:`AUTO_FAISS_MAX_DEPTH` ranked neighbours (K and R), torch otherwise (e.g. for R@1000).

The N x N similarity matrix is never built; 60k x 512 float32 embeddings (SOP size) are evaluated
in about 1 GB of RAM or less (see ``bench/metrics_bench.py``).

Ties: neighbours are ranked by float32 cosine similarity (descending) and, among exactly equal
similarities, by candidate index (ascending) -- the order of a stable sort of ``-similarity``.
This is exact and independent of ``chunk_size``: top-k searches fetch k+1 entries, re-order them
by (similarity, index), and rank the full row in the rare case that a tie crosses the k-th place.
The two backends compute the float32 similarities with different matrix-multiply kernels, which
may differ in the last bit; so where two candidates are within one float32 rounding of each other
they may swap places between backends (exact ties, as in the tests, rank identically). (The
authors' code counts only negatives *strictly* more similar than the best positive, i.e. it breaks
ties in the query's favour; with continuous embeddings exact ties do not occur and both rules agree.)

Modules (every name is re-exported here; ``from sec_lib.metrics import X`` is the API):
:mod:`.retrieval` (Recall@K, MAP@R, the ranking kernel and its backends), :mod:`.clustering`
(k-means NMI and F1), :mod:`._inputs` (argument checks); :func:`evaluate`, which computes both, is here.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .inputs import check_chunk_size, check_device, check_ks
from .clustering import KMEANS_N_INIT, check_workers, clustering_scores, kmeans_labels, nmi_f1
from .retrieval import (
    AUTO_FAISS_MAX_DEPTH, BACKENDS, BLOCK_ELEMENTS, FAISS_QUERY_CHUNK, check_backend, loo_inputs, map_r_of, run_tasks, SearchTask,
    faiss_available, map_at_r, nearest_neighbor_hits, recall_at_k,
)

__all__ = [
    "recall_at_k",
    "map_at_r",
    "nmi_f1",
    "kmeans_labels",
    "clustering_scores",
    "evaluate",
    "KMEANS_N_INIT",
    "BLOCK_ELEMENTS",
    "BACKENDS",
    "FAISS_QUERY_CHUNK",
    "AUTO_FAISS_MAX_DEPTH",
    "faiss_available",
]


def evaluate(
    emb,
    labels,
    ks: Sequence[int] = (1, 2, 4, 8),
    seed: int = 0,
    clustering: bool = True,
    n_init: int = KMEANS_N_INIT,
    chunk_size: int | None = None,
    device="cpu",
    backend: str = "auto",
    kmeans_workers: int = 1,
) -> dict[str, float]:
    """All leave-one-out metrics in percent: ``{"R@1":.., "R@2":.., ..., "NMI":.., "F1":.., "MAP@R":..}``.

    Recall@K and MAP@R share one chunked pass over the similarities; results equal
    :func:`recall_at_k` and :func:`map_at_r` with the same backend. NMI/F1 come from :func:`nmi_f1`
    (k-means seeded with ``seed``, its restarts on ``kmeans_workers`` threads) and are left out when
    ``clustering=False``.
    """
    chunk_size = check_chunk_size(chunk_size)
    dev = check_device(device)
    backend = check_backend(backend, dev)
    if not isinstance(clustering, (bool, np.bool_)):
        raise ValueError(f"clustering must be True or False, got {clustering!r}")
    check_workers(kmeans_workers)
    e, codes = loo_inputs(emb, labels)
    ks = check_ks(ks, e.shape[0] - 1)
    r = map_r_of(codes)
    scores = run_tasks(e, e, SearchTask(codes, codes, True, kmax=max(ks), r=r), chunk_size, dev, backend)
    out = {f"R@{k}": float(100.0 * np.mean(scores.first < k)) for k in ks}
    if clustering:
        nmi, f1 = nmi_f1(e, codes, seed=seed, n_init=n_init, workers=kmeans_workers)
        out["NMI"] = nmi
        out["F1"] = f1
    valid = r >= 1
    out["MAP@R"] = float(100.0 * scores.ap[valid].mean()) if valid.any() else float("nan")
    return out
