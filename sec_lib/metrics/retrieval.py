"""Recall@K, MAP@R and nearest-neighbour hits: the chunked ranking kernel and its torch and faiss
backends (definitions, ties and backends: see :mod:`sec_lib.metrics`)."""
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

from .inputs import check_chunk_size, check_device, check_ks, to_codes, to_float_tensor, to_label_array

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


def check_backend(backend, device: torch.device) -> str:
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
class SearchTask:
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


def _store(out: _Scores, task: SearchTask, rows: np.ndarray, nbr: np.ndarray, first_known: bool) -> None:
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


def _run_torch(query, gallery, task: SearchTask, chunk_size, device) -> _Scores:
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


def _run_faiss(query, gallery, task: SearchTask, chunk_size) -> _Scores:
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


def run_tasks(query, gallery, task: SearchTask, chunk_size, device, backend) -> _Scores:
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
    chunk_size = check_chunk_size(chunk_size)
    dev = check_device(device)
    backend = check_backend(backend, dev)

    q = to_float_tensor(query, "query" if gallery is not None else "emb")
    if gallery is None:
        codes = to_codes(q_labels, "labels", q.shape[0], "emb")
        if q.shape[0] < 2:
            raise ValueError(f"leave-one-out recall needs at least 2 samples, got {q.shape[0]}")
        ks = check_ks(ks, q.shape[0] - 1)
        g, q_codes, g_codes, loo = q, codes, codes, True
    else:
        g = to_float_tensor(gallery, "gallery")
        if g.shape[1] != q.shape[1]:
            raise ValueError(
                f"query has dimension {q.shape[1]} but gallery has {g.shape[1]}; they must match"
            )
        q_raw = to_label_array(q_labels, "query_labels", q.shape[0], "query")
        g_raw = to_label_array(gallery_labels, "gallery_labels", g.shape[0], "gallery")
        _, inv = np.unique(np.concatenate([q_raw, g_raw]), return_inverse=True)
        inv = inv.reshape(-1).astype(np.int64)
        q_codes, g_codes = inv[: q.shape[0]], inv[q.shape[0] :]
        ks = check_ks(ks, g.shape[0])
        loo = False

    task = SearchTask(q_codes, g_codes, loo, kmax=max(ks))
    first = run_tasks(q, g, task, chunk_size, dev, backend).first
    return {k: float(100.0 * np.mean(first < k)) for k in ks}


def loo_inputs(emb, labels) -> tuple[torch.Tensor, np.ndarray]:
    e = to_float_tensor(emb, "emb")
    codes = to_codes(labels, "labels", e.shape[0], "emb")
    if e.shape[0] < 2:
        raise ValueError(f"leave-one-out metrics need at least 2 samples, got {e.shape[0]}")
    return e, codes


def map_r_of(codes: np.ndarray) -> np.ndarray:
    """R per query: the number of other samples of its class."""
    return np.bincount(codes)[codes] - 1


def nearest_neighbor_hits(emb, labels, chunk_size: int | None = None, device="cpu", backend: str = "auto") -> np.ndarray:
    """Per sample, whether its nearest other sample (cosine, query left out) has the same label.

    A boolean array of length N whose mean times 100 is Recall@1; used to relate a sample's
    retrieval success to its embedding norm.
    """
    chunk_size = check_chunk_size(chunk_size)
    dev = check_device(device)
    backend = check_backend(backend, dev)
    e, codes = loo_inputs(emb, labels)
    nn = run_tasks(e, e, SearchTask(codes, codes, True, nn=True), chunk_size, dev, backend).nn
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
    chunk_size = check_chunk_size(chunk_size)
    dev = check_device(device)
    backend = check_backend(backend, dev)
    e, codes = loo_inputs(emb, labels)
    r = map_r_of(codes)
    if not (r >= 1).any():
        return float("nan")
    ap = run_tasks(e, e, SearchTask(codes, codes, True, r=r), chunk_size, dev, backend).ap
    return float(100.0 * ap[r >= 1].mean())  # mean in index order, as in evaluate()
