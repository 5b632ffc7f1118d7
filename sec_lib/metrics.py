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
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F

try:  # optional exact k-NN backend: pip install 'sec_lib[fast]'
    import faiss
except ImportError:  # pragma: no cover - depends on the environment
    faiss = None

__all__ = [
    "recall_at_k",
    "map_at_r",
    "nmi_f1",
    "clustering_scores",
    "evaluate",
    "KMEANS_N_INIT",
    "BLOCK_ELEMENTS",
    "BACKENDS",
    "FAISS_QUERY_CHUNK",
    "AUTO_FAISS_MAX_DEPTH",
    "faiss_available",
]

#: k-means restarts, pinned (scikit-learn's default changed to "auto" = 1 restart for k-means++ in 1.4;
#: the authors' code ran with the old default of 10).
KMEANS_N_INIT = 10

#: With ``chunk_size=None``: at most this many similarity entries per query chunk.
BLOCK_ELEMENTS = 2**25

#: Retrieval backends: "torch" (chunked similarity blocks), "faiss" (exact ``IndexFlatIP`` search,
#: CPU only, needs faiss-cpu) and "auto" (faiss on the CPU when it is installed, torch otherwise).
BACKENDS = ("auto", "torch", "faiss")

#: With ``chunk_size=None``: at most this many queries per faiss search (faiss's own query block).
FAISS_QUERY_CHUNK = 4096

#: ``backend="auto"`` uses faiss only up to this many ranked neighbours per query (max K, max R).
#: faiss keeps a k-heap per query, while the torch path counts ranks for Recall@K whatever K is;
#: on 2 CPU cores (bench/metrics_bench.py) faiss took about 30% less CPU time at CUB/Cars size
#: (R@{1,2,4,8} + MAP@R, R ~ 60-80), the two were even at 20,000 x 512 with K = 30, and torch took
#: 40% less for R@{1,10,100,1000} + MAP@R.
AUTO_FAISS_MAX_DEPTH = 128


def faiss_available() -> bool:
    """Whether the optional faiss backend can run (faiss-cpu is importable)."""
    return faiss is not None



# ----------------------------------------------------------------------------------------- validation


def _to_float_tensor(x, name: str) -> torch.Tensor:
    if isinstance(x, torch.Tensor):
        t = x.detach()
    else:
        try:
            t = torch.as_tensor(np.asarray(x))
        except (TypeError, ValueError) as err:  # pragma: no cover - exotic inputs
            raise ValueError(f"{name} must be a 2-D float array or tensor, got {type(x).__name__}") from err
    if t.ndim != 2:
        raise ValueError(f"{name} must be 2-D (N x D), got shape {tuple(t.shape)}")
    if t.shape[0] == 0 or t.shape[1] == 0:
        raise ValueError(f"{name} must be non-empty (N >= 1 rows, D >= 1 columns), got shape {tuple(t.shape)}")
    if not (t.is_floating_point() or t.dtype in (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8)):
        raise ValueError(f"{name} must hold real numbers, got dtype {t.dtype}")
    t = t.to(device="cpu", dtype=torch.float32)
    if not torch.isfinite(t).all():
        raise ValueError(f"{name} contains NaN or inf; valid embeddings are finite")
    return t


def _to_label_array(labels, name: str, n: int | None, embedding_name: str) -> np.ndarray:
    """1-D label array (numpy) of length n (unchecked when n is None)."""
    if isinstance(labels, torch.Tensor):
        arr = labels.detach().cpu().numpy()
    else:
        arr = np.asarray(labels)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D (N,), got shape {arr.shape}")
    if n is not None and arr.shape[0] != n:
        raise ValueError(f"{name} has length {arr.shape[0]} but {embedding_name} has {n} rows; they must match")
    return arr


def _to_codes(labels, name: str, n: int, embedding_name: str) -> np.ndarray:
    """Labels of any hashable dtype -> np.int64 codes (order-preserving); length must be n."""
    arr = _to_label_array(labels, name, n, embedding_name)
    _, codes = np.unique(arr, return_inverse=True)
    return codes.astype(np.int64).reshape(-1)


def _check_ks(ks, n_candidates: int) -> tuple[int, ...]:
    if isinstance(ks, (int, np.integer)):
        ks = (int(ks),)
    try:
        ks = tuple(ks)
    except TypeError as err:
        raise ValueError(f"ks must be a sequence of integers >= 1, got {ks!r}") from err
    if len(ks) == 0:
        raise ValueError("ks must contain at least one k; valid values are integers 1 <= k < number of candidates")
    out = []
    for k in ks:
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
            raise ValueError(f"ks must hold integers, got {k!r}; valid values are 1 <= k < {n_candidates}")
        k = int(k)
        if k < 1 or k >= n_candidates:
            raise ValueError(
                f"k={k} is out of range: valid values are 1 <= k < number of candidates ({n_candidates})"
            )
        out.append(k)
    return tuple(out)


def _check_chunk_size(chunk_size) -> int | None:
    if chunk_size is None:
        return None
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, (int, np.integer)) or chunk_size < 1:
        raise ValueError(f"chunk_size must be None (automatic) or an integer >= 1, got {chunk_size!r}")
    return int(chunk_size)


def _check_device(device) -> torch.device:
    try:
        return torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise ValueError(f"device must be a torch device or string such as 'cpu' or 'cuda:0', got {device!r}") from err


def _check_backend(backend, device: torch.device) -> str:
    """Validate 'auto' | 'torch' | 'faiss' (and that faiss can run when asked for by name)."""
    if not isinstance(backend, str) or backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if backend == "faiss":
        if device.type != "cpu":
            raise ValueError(f"backend='faiss' runs on the CPU only, got device={str(device)!r}; "
                             "use backend='torch' for other devices")
        if faiss is None:
            raise ImportError(
                "backend='faiss' needs the optional faiss-cpu package, which is not installed: "
                "pip install 'sec_lib[fast]', or use backend='torch' (or 'auto')"
            )
    return backend


# ------------------------------------------------------------------------------------- ranking kernel


def _auto_chunk(n_candidates: int, chunk_size: int | None) -> int:
    if chunk_size is not None:
        return chunk_size
    return max(1, BLOCK_ELEMENTS // max(1, n_candidates))


def _similarity_block(q: torch.Tensor, g: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """Cosine similarities of a chunk of (normalized) queries against all candidates: c x n
    (written into ``out`` when given, so one buffer serves every chunk)."""
    if out is None:
        return q @ g.T
    return torch.mm(q, g.T, out=out[: q.shape[0]])


def _stable_order(vals: np.ndarray, idx: np.ndarray, k: int, full_rows) -> np.ndarray:
    """The k best candidates per row, by similarity descending and, among exactly equal
    similarities, by candidate index ascending (a stable sort of ``-similarity``).

    ``vals``/``idx``: the best ``min(k + 1, n_valid)`` candidates per row, sorted by value, ties in
    any order (from ``torch.topk`` or faiss). Equal values inside are re-ordered by index; the
    (k+1)-th value tells whether a tie crosses the cut, and those rows (rare with real embeddings)
    are ranked in full by ``full_rows(row_positions) -> (len x k)`` indices.
    """
    tied = np.nonzero((vals[:, 1:] == vals[:, :-1]).any(axis=1))[0]  # rows with equal values inside
    if tied.size:
        order = np.lexsort((idx[tied], -vals[tied]), axis=1)
        idx[tied] = np.take_along_axis(idx[tied], order, axis=1)
    out = idx[:, :k]
    if vals.shape[1] > k:
        cut = np.nonzero(vals[:, k - 1] == vals[:, k])[0]
        if cut.size:
            out[cut] = full_rows(cut)
    return out


def _top_k_stable(sim: torch.Tensor, k: int, n_valid: int) -> np.ndarray:
    """Indices of the k best columns per row of ``sim`` (see :func:`_stable_order`); ``n_valid``:
    number of candidates that may be returned (excluded ones are -inf and come last)."""
    k1 = min(k + 1, n_valid)
    vals_t, idx_t = torch.topk(sim, k1, dim=1, largest=True, sorted=True)

    def full_rows(cut):
        rows = sim[torch.from_numpy(cut).to(sim.device)].cpu().numpy()
        return np.argsort(-rows, axis=1, kind="stable")[:, :k]

    return _stable_order(vals_t.cpu().numpy(), idx_t.cpu().numpy(), k, full_rows)


class _Positives:
    """Candidate indices grouped by label code, ascending within a class (for gathering each
    query's same-label candidates out of a similarity block)."""

    def __init__(self, g_codes: np.ndarray, n_codes: int):
        self.members = np.argsort(g_codes, kind="stable")
        self.counts = np.bincount(g_codes, minlength=n_codes)
        self.starts = np.concatenate([[0], np.cumsum(self.counts)[:-1]])

    def best(self, sim: torch.Tensor, q_codes: np.ndarray) -> tuple[torch.Tensor, np.ndarray]:
        """Per row of ``sim``, the largest similarity of a same-label candidate (-inf if none) and
        the lowest index among the candidates that reach it."""
        c = sim.shape[0]
        counts = self.counts[q_codes]
        best = torch.full((c,), -math.inf, dtype=sim.dtype, device=sim.device)
        best_idx = np.full(c, -1, dtype=np.int64)
        m = int(counts.max()) if c else 0
        width = max(1, BLOCK_ELEMENTS // (4 * max(1, c)))  # bound the gathered slice
        for s in range(0, m, width):
            pos = np.arange(s, min(m, s + width))
            valid = pos[None, :] < counts[:, None]
            flat = np.minimum(self.starts[q_codes][:, None] + pos[None, :], len(self.members) - 1)
            cols = self.members[flat]
            vals = sim.gather(1, torch.from_numpy(cols).to(sim.device))
            vals[~torch.from_numpy(valid).to(sim.device)] = -math.inf
            a = np.argmax(vals.cpu().numpy(), axis=1)  # first maximum: lowest index in the slice
            v = vals[torch.arange(c, device=sim.device), torch.from_numpy(a).to(sim.device)]
            better = (v > best).cpu().numpy()
            best = torch.where(v > best, v, best)
            best_idx[better] = cols[np.nonzero(better)[0], a[better]]
        return best, best_idx


def _first_hit_by_counting(sim: torch.Tensor, best: torch.Tensor, best_idx: np.ndarray) -> np.ndarray:
    """0-based rank of the first same-label candidate, counted without sorting. With p the best
    positive (lowest index among equals) and s its similarity, the candidates ranked before it are
    those with a lower index and similarity >= s, and those with a higher index and similarity > s.
    Rows without a positive (best = -inf) get the number of columns (a miss at every k)."""
    if sim.device.type != "cpu":
        return _first_hit_by_counting_torch(sim, best, best_idx)
    first = np.full(sim.shape[0], sim.shape[1], dtype=np.int64)
    s, b = sim.numpy(), best.numpy()
    for i in np.nonzero(best_idx >= 0)[0]:  # row by row: each row is read once, while it sits in cache
        p, row = best_idx[i], s[i]
        first[i] = np.count_nonzero(row[:p] >= b[i]) + np.count_nonzero(row[p + 1 :] > b[i])
    return first


def _first_hit_by_counting_torch(sim: torch.Tensor, best: torch.Tensor, best_idx: np.ndarray) -> np.ndarray:
    """:func:`_first_hit_by_counting` in torch operations on the whole block (for GPUs)."""
    cols = torch.arange(sim.shape[1], device=sim.device)
    p = torch.from_numpy(best_idx).to(sim.device)[:, None]
    before = torch.where(cols[None, :] < p, sim >= best[:, None], sim > best[:, None])
    first = before.sum(dim=1, dtype=torch.int64).cpu().numpy()
    first[best_idx < 0] = sim.shape[1]
    return first


def _first_hit_rank(nbr_labels: np.ndarray, q_labels: np.ndarray) -> np.ndarray:
    """0-based rank of the first same-label neighbour per row; ``width`` when there is none."""
    match = nbr_labels == q_labels[:, None]
    first = match.argmax(axis=1)
    first[~match.any(axis=1)] = nbr_labels.shape[1]
    return first


def _ap_at_r(nbr_labels: np.ndarray, q_labels: np.ndarray, r: np.ndarray) -> np.ndarray:
    """Per-row AP@R from (c x width) neighbour labels, width >= max(r); rows need r >= 1."""
    width = nbr_labels.shape[1]
    pos = np.arange(1, width + 1)
    rel = (nbr_labels == q_labels[:, None]) & (pos[None, :] <= r[:, None])
    prec = np.cumsum(rel, axis=1) / pos[None, :]
    # a sequential sum up to position R: the same float result whatever the width
    return np.cumsum(prec * rel, axis=1)[np.arange(len(r)), r - 1] / r


@dataclass
class _Task:
    """What one retrieval pass computes. ``q_codes``/``g_codes``: label codes of queries and
    candidates; ``leave_one_out``: query i is candidate i and is never returned; ``kmax``: first-hit
    ranks are needed below this k (0: none); ``r``: per query, how many neighbours AP@R needs
    (None: no MAP@R; 0: skipped); ``nn``: whether the nearest neighbour itself is needed."""

    q_codes: np.ndarray
    g_codes: np.ndarray
    leave_one_out: bool
    kmax: int = 0
    r: np.ndarray | None = None
    nn: bool = False

    def order(self) -> np.ndarray:
        """Query processing order: by R, so that a chunk needs few neighbours."""
        n = len(self.q_codes)
        return np.arange(n) if self.r is None else np.argsort(self.r, kind="stable")

    def depth(self, rows: np.ndarray) -> int:
        """How many ranked neighbours a chunk needs from a top-k search."""
        return max(self.kmax, int(self.nn), int(self.r[rows].max()) if self.r is not None else 0)


@dataclass
class _Scores:
    first: np.ndarray  # 0-based rank of the first same-label neighbour (>= kmax: a miss)
    ap: np.ndarray  # AP@R per query, NaN where not computed
    nn: np.ndarray  # index of the nearest neighbour, -1 where not computed


def _store(out: _Scores, task: _Task, rows: np.ndarray, nbr: np.ndarray, first_known: bool) -> None:
    """Fill ``out`` for ``rows`` from their ranked neighbours ``nbr`` (best first)."""
    ql = task.q_codes[rows]
    nl = task.g_codes[nbr]
    if task.kmax and not first_known:
        out.first[rows] = _first_hit_rank(nl[:, : task.kmax], ql)
    if task.r is not None:
        rr = task.r[rows]
        has = rr >= 1
        if has.any():
            out.ap[rows[has]] = _ap_at_r(nl[has], ql[has], rr[has])
    if task.nn:
        out.nn[rows] = nbr[:, 0]


def _run_torch(query, gallery, task: _Task, chunk_size, device) -> _Scores:
    """Chunked torch pass: one float32 similarity block per chunk; first-hit ranks by counting,
    top-k (k = what MAP@R / the nearest neighbour need) by ``torch.topk``."""
    n_q, n_gal = query.shape[0], gallery.shape[0]
    out = _Scores(np.full(n_q, n_gal, np.int64), np.full(n_q, np.nan), np.full(n_q, -1, np.int64))
    n_valid = n_gal - 1 if task.leave_one_out else n_gal
    step = _auto_chunk(n_gal, chunk_size)
    q_all = F.normalize(query, p=2, dim=1)
    g = (q_all if gallery is query else F.normalize(gallery, p=2, dim=1)).to(device)  # one copy when leaving one out
    positives = _Positives(task.g_codes, int(max(task.q_codes.max(), task.g_codes.max())) + 1) if task.kmax else None
    order = task.order()
    buf = torch.empty(min(step, len(order)), n_gal, dtype=g.dtype, device=device)
    for start in range(0, len(order), step):
        rows = order[start : start + step]
        rows_t = torch.from_numpy(rows)
        sim = _similarity_block(q_all[rows_t].to(device), g, out=buf)
        if task.leave_one_out:
            sim[torch.arange(len(rows), device=device), rows_t.to(device)] = -math.inf
        if positives is not None:
            best, best_idx = positives.best(sim, task.q_codes[rows])
            out.first[rows] = _first_hit_by_counting(sim, best, best_idx)
        k = max(int(task.nn), int(task.r[rows].max()) if task.r is not None else 0)
        if k >= 1:
            _store(out, task, rows, _top_k_stable(sim, k, n_valid), first_known=True)
        del sim
    return out


def _run_faiss(query, gallery, task: _Task, chunk_size) -> _Scores:
    """Exact k-NN search with a faiss ``IndexFlatIP`` on the l2-normalized float32 embeddings, in
    chunks of queries; k = max(kmax, R, 1) per chunk, plus one to see ties across the cut and one
    for the query itself when it is left out."""
    n_q, n_gal = query.shape[0], gallery.shape[0]
    out = _Scores(np.full(n_q, n_gal, np.int64), np.full(n_q, np.nan), np.full(n_q, -1, np.int64))
    n_valid = n_gal - 1 if task.leave_one_out else n_gal
    extra = 1 if task.leave_one_out else 0
    index = faiss.IndexFlatIP(gallery.shape[1])
    for lo in range(0, n_gal, FAISS_QUERY_CHUNK):  # normalized chunk by chunk: the index holds the only copy
        index.add(np.ascontiguousarray(F.normalize(gallery[lo : lo + FAISS_QUERY_CHUNK], p=2, dim=1).numpy()))
    gn = faiss.rev_swig_ptr(index.get_xb(), n_gal * gallery.shape[1]).reshape(n_gal, gallery.shape[1])
    g_t = torch.from_numpy(gn)  # a view of the index's vectors

    def queries(rows: np.ndarray) -> np.ndarray:
        if gallery is query:
            return gn[rows]
        return np.ascontiguousarray(F.normalize(query[torch.from_numpy(rows)], p=2, dim=1).numpy())

    order = task.order()
    kk_all = min(task.depth(order) + 1 + extra, n_gal)
    step = chunk_size if chunk_size is not None else max(1, min(FAISS_QUERY_CHUNK, BLOCK_ELEMENTS // (4 * kk_all)))
    for start in range(0, len(order), step):
        rows = order[start : start + step]
        k = task.depth(rows)
        kk = min(k + 1 + extra, n_gal)
        vals, idx = index.search(queries(rows), kk)
        if task.leave_one_out:  # drop the query itself (or, where it is not among them, the last)
            keep = idx != rows[:, None]
            keep[keep.all(axis=1), -1] = False
            vals = vals[keep].reshape(len(rows), kk - 1)
            idx = idx[keep].reshape(len(rows), kk - 1)
        vals, idx = vals[:, : min(k + 1, n_valid)], idx[:, : min(k + 1, n_valid)].astype(np.int64)

        def full_rows(cut, rows=rows, k=k):
            sim = torch.from_numpy(queries(rows[cut])) @ g_t.T
            if task.leave_one_out:
                sim[torch.arange(len(cut)), torch.from_numpy(rows[cut])] = -math.inf
            return np.argsort(-sim.numpy(), axis=1, kind="stable")[:, :k]

        _store(out, task, rows, _stable_order(vals, idx, k, full_rows), first_known=False)
    return out


def _pick_backend(backend: str, device: torch.device, depth: int) -> str:
    """The backend that runs: 'auto' is faiss on the CPU when it is installed and a search needs at
    most :data:`AUTO_FAISS_MAX_DEPTH` ranked neighbours, torch otherwise."""
    if backend != "auto":
        return backend
    return "faiss" if faiss is not None and device.type == "cpu" and depth <= AUTO_FAISS_MAX_DEPTH else "torch"


def _run(query, gallery, task: _Task, chunk_size, device, backend) -> _Scores:
    if _pick_backend(backend, device, task.depth(np.arange(len(task.q_codes)))) == "faiss":
        return _run_faiss(query, gallery, task, chunk_size)
    return _run_torch(query, gallery, task, chunk_size, device)


# ------------------------------------------------------------------------------------------ public API


def recall_at_k(
    *args,
    ks: Sequence[int] = (1, 2, 4, 8),
    gallery=None,
    gallery_labels=None,
    chunk_size: int | None = None,
    device="cpu",
    backend: str = "auto",
) -> dict[int, float]:
    """Recall@K in percent, as a dict ``{k: recall}``.

    Two call forms, told apart by the number of positional arguments:

    * ``recall_at_k(emb, labels[, ks])`` (2 or 3 positional): every sample is a query against all
      **other** samples (the query itself is left out; CUB/Cars/SOP protocol). Number of
      candidates = N - 1.
    * ``recall_at_k(query, query_labels, gallery, gallery_labels[, ks])`` (4 or 5 positional), or
      ``recall_at_k(query, query_labels, gallery=..., gallery_labels=...)``: queries against a
      separate gallery, nothing left out (In-Shop protocol). Number of candidates = gallery size.

    A query counts as a hit at K when at least one of its K nearest candidates (cosine similarity,
    ties by candidate index, see the module docstring) has its label; recall is averaged over all
    queries, including queries without any positive candidate (they count as misses).
    ``backend``: see the module docstring.

    Raises ValueError on empty input, non-2-D embeddings, label/embedding length mismatch,
    query/gallery dimension mismatch, non-finite values, any k outside ``1 <= k < candidates``,
    and an unknown backend (ImportError for ``backend="faiss"`` without faiss-cpu).
    """
    ks_pos = None
    if len(args) in (2, 3):
        query, q_labels = args[0], args[1]
        if len(args) == 3:
            ks_pos = args[2]
    elif len(args) in (4, 5):
        if gallery is not None or gallery_labels is not None:
            raise ValueError("pass the gallery either positionally or as gallery=/gallery_labels=, not both")
        query, q_labels, gallery, gallery_labels = args[:4]
        if len(args) == 5:
            ks_pos = args[4]
    else:
        raise ValueError(
            f"recall_at_k takes 2-3 positional arguments (emb, labels[, ks]) or 4-5 "
            f"(query, query_labels, gallery, gallery_labels[, ks]); got {len(args)}"
        )
    if ks_pos is not None:
        ks = ks_pos
    if (gallery is None) != (gallery_labels is None):
        raise ValueError("gallery and gallery_labels must be given together (both or neither)")
    chunk_size = _check_chunk_size(chunk_size)
    dev = _check_device(device)
    backend = _check_backend(backend, dev)

    q = _to_float_tensor(query, "query" if gallery is not None else "emb")
    if gallery is None:
        codes = _to_codes(q_labels, "labels", q.shape[0], "emb")
        if q.shape[0] < 2:
            raise ValueError(f"leave-one-out recall needs at least 2 samples, got {q.shape[0]}")
        ks = _check_ks(ks, q.shape[0] - 1)
        g, q_codes, g_codes, loo = q, codes, codes, True
    else:
        g = _to_float_tensor(gallery, "gallery")
        if g.shape[1] != q.shape[1]:
            raise ValueError(
                f"query has dimension {q.shape[1]} but gallery has {g.shape[1]}; they must match"
            )
        q_raw = _to_label_array(q_labels, "query_labels", q.shape[0], "query")
        g_raw = _to_label_array(gallery_labels, "gallery_labels", g.shape[0], "gallery")
        _, inv = np.unique(np.concatenate([q_raw, g_raw]), return_inverse=True)
        inv = inv.reshape(-1).astype(np.int64)
        q_codes, g_codes = inv[: q.shape[0]], inv[q.shape[0] :]
        ks = _check_ks(ks, g.shape[0])
        loo = False

    task = _Task(q_codes, g_codes, loo, kmax=max(ks))
    first = _run(q, g, task, chunk_size, dev, backend).first
    return {k: float(100.0 * np.mean(first < k)) for k in ks}


def _loo_inputs(emb, labels) -> tuple[torch.Tensor, np.ndarray]:
    e = _to_float_tensor(emb, "emb")
    codes = _to_codes(labels, "labels", e.shape[0], "emb")
    if e.shape[0] < 2:
        raise ValueError(f"leave-one-out metrics need at least 2 samples, got {e.shape[0]}")
    return e, codes


def _map_r(codes: np.ndarray) -> np.ndarray:
    """R per query: the number of other samples of its class."""
    return np.bincount(codes)[codes] - 1


def nearest_neighbor_hits(emb, labels, chunk_size: int | None = None, device="cpu", backend: str = "auto") -> np.ndarray:
    """Per sample, whether its nearest other sample (cosine, query left out) has the same label.

    A boolean array of length N whose mean times 100 is Recall@1; used to relate a sample's
    retrieval success to its embedding norm.
    """
    chunk_size = _check_chunk_size(chunk_size)
    dev = _check_device(device)
    backend = _check_backend(backend, dev)
    e, codes = _loo_inputs(emb, labels)
    nn = _run(e, e, _Task(codes, codes, True, nn=True), chunk_size, dev, backend).nn
    return codes[nn] == codes


def map_at_r(emb, labels, chunk_size: int | None = None, device="cpu", backend: str = "auto") -> float:
    """MAP@R in percent (Musgrave, Belongie, Lim, "A Metric Learning Reality Check", ECCV 2020).

    For a query with R = number of *other* samples of its class (the query is left out):
    ``AP@R = (1/R) * sum_{i=1..R} P@i * rel(i)`` over its R nearest neighbours, where rel(i) says
    whether the i-th neighbour shares the label and P@i is the precision among the first i.
    MAP@R is the mean over queries with R >= 1 (queries alone in their class are skipped, as in
    pytorch-metric-learning's AccuracyCalculator); NaN if no query has R >= 1.
    Ties are broken by index (see the module docstring). Chunks need the top max-R neighbours of
    their queries, so queries are processed in order of R.
    """
    chunk_size = _check_chunk_size(chunk_size)
    dev = _check_device(device)
    backend = _check_backend(backend, dev)
    e, codes = _loo_inputs(emb, labels)
    r = _map_r(codes)
    if not (r >= 1).any():
        return float("nan")
    ap = _run(e, e, _Task(codes, codes, True, r=r), chunk_size, dev, backend).ap
    return float(100.0 * ap[r >= 1].mean())  # mean in index order, as in evaluate()


def clustering_scores(cluster_ids, labels) -> tuple[float, float]:
    """(NMI, F1) in percent of a given clustering against the class labels.

    NMI = 2 I(cluster; class) / (H(cluster) + H(class)) with natural logs (arithmetic-mean
    normalisation, equal to scikit-learn's ``normalized_mutual_info_score`` default); defined as
    100 when both entropies are 0 (one cluster, one class), like scikit-learn.

    F1 is the pairwise F-measure (Manning et al., "Introduction to Information Retrieval", 16.3;
    the authors' ``compute_clutering_metric``): a pair of samples is a true positive when it is in
    the same cluster and the same class. From the contingency table n_ij (clusters x classes),
    TP = sum_ij C(n_ij, 2), TP + FP = sum_i C(a_i, 2), TP + FN = sum_j C(b_j, 2), P = TP/(TP+FP),
    R = TP/(TP+FN), F1 = 2PR/(P+R); 0 when TP = 0. Never forms the N x N pair matrix.
    """
    raw = _to_label_array(cluster_ids, "cluster_ids", None, "")
    n = raw.shape[0]
    if n == 0:
        raise ValueError("cluster_ids and labels must be non-empty")
    c = _to_codes(raw, "cluster_ids", n, "cluster_ids")
    y = _to_codes(labels, "labels", n, "cluster_ids")
    cont = np.zeros((c.max() + 1, y.max() + 1), dtype=np.int64)
    np.add.at(cont, (c, y), 1)
    a = cont.sum(axis=1)
    b = cont.sum(axis=0)

    nz = cont > 0
    nij = cont[nz].astype(np.float64)
    ai = np.broadcast_to(a[:, None], cont.shape)[nz].astype(np.float64)
    bj = np.broadcast_to(b[None, :], cont.shape)[nz].astype(np.float64)
    mi = float(np.sum(nij / n * (np.log(nij) + np.log(n) - np.log(ai) - np.log(bj))))
    h_c = float(-np.sum(a / n * np.log(a / n)))
    h_y = float(-np.sum(b / n * np.log(b / n)))
    if h_c + h_y == 0.0:
        nmi = 1.0
    else:
        nmi = min(1.0, max(0.0, 2.0 * mi / (h_c + h_y)))  # clip float round-off

    def pairs(x: np.ndarray) -> float:
        x = x.astype(np.float64)
        return float(np.sum(x * (x - 1.0) / 2.0))

    tp = pairs(cont[nz])
    tp_fp = pairs(a)
    tp_fn = pairs(b)
    if tp == 0.0:
        f1 = 0.0
    else:
        p, rec = tp / tp_fp, tp / tp_fn
        f1 = 2.0 * p * rec / (p + rec)
    return 100.0 * nmi, 100.0 * f1


def nmi_f1(emb, labels, seed: int = 0, n_init: int = KMEANS_N_INIT) -> tuple[float, float]:
    """(NMI, F1) in percent from k-means on the l2-normalized embeddings.

    scikit-learn ``KMeans(n_clusters=<number of distinct labels>, n_init=n_init, random_state=seed)``
    with ``n_init`` pinned to :data:`KMEANS_N_INIT` = 10 by default (the authors' code relied on the
    old scikit-learn default of 10 restarts). Scores: see :func:`clustering_scores`.
    """
    from sklearn.cluster import KMeans  # local import: sklearn is only needed for clustering

    if isinstance(n_init, bool) or not isinstance(n_init, (int, np.integer)) or n_init < 1:
        raise ValueError(f"n_init must be an integer >= 1, got {n_init!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
    e = _to_float_tensor(emb, "emb")
    codes = _to_codes(labels, "labels", e.shape[0], "emb")
    n_clusters = int(codes.max()) + 1
    x = F.normalize(e, p=2, dim=1).numpy().astype(np.float64)
    km = KMeans(n_clusters=n_clusters, n_init=int(n_init), random_state=int(seed))
    pred = km.fit_predict(x)
    return clustering_scores(pred, codes)


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
) -> dict[str, float]:
    """All leave-one-out metrics in percent: ``{"R@1":.., "R@2":.., ..., "NMI":.., "F1":.., "MAP@R":..}``.

    Recall@K and MAP@R share one chunked pass over the similarities; results equal
    :func:`recall_at_k` and :func:`map_at_r` with the same backend. NMI/F1 come from :func:`nmi_f1`
    (k-means seeded with ``seed``) and are left out when ``clustering=False``.
    """
    chunk_size = _check_chunk_size(chunk_size)
    dev = _check_device(device)
    backend = _check_backend(backend, dev)
    if not isinstance(clustering, (bool, np.bool_)):
        raise ValueError(f"clustering must be True or False, got {clustering!r}")
    e, codes = _loo_inputs(emb, labels)
    ks = _check_ks(ks, e.shape[0] - 1)
    r = _map_r(codes)
    scores = _run(e, e, _Task(codes, codes, True, kmax=max(ks), r=r), chunk_size, dev, backend)
    out = {f"R@{k}": float(100.0 * np.mean(scores.first < k)) for k in ks}
    if clustering:
        nmi, f1 = nmi_f1(e, codes, seed=seed, n_init=n_init)
        out["NMI"] = nmi
        out["F1"] = f1
    valid = r >= 1
    out["MAP@R"] = float(100.0 * scores.ap[valid].mean()) if valid.any() else float("nan")
    return out
