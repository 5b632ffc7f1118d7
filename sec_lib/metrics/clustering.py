"""NMI and F1 of a k-means clustering of the embeddings (definitions: see :mod:`sec_lib.metrics`)."""
from __future__ import annotations

import functools
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch.nn.functional as F
from threadpoolctl import threadpool_limits

from .inputs import to_codes, to_float_tensor, to_label_array

#: k-means restarts, pinned (scikit-learn's default changed to "auto" = 1 restart for k-means++ in 1.4;
#: the authors' code ran with the old default of 10).
KMEANS_N_INIT = 10


def sklearn_cluster():
    """scikit-learn's ``sklearn.cluster``, imported on first use."""
    from sklearn import cluster  # local: sklearn.cluster takes seconds to import (measured), only k-means needs it
    return cluster


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
    raw = to_label_array(cluster_ids, "cluster_ids", None, "")
    n = raw.shape[0]
    if n == 0:
        raise ValueError("cluster_ids and labels must be non-empty")
    c = to_codes(raw, "cluster_ids", n, "cluster_ids")
    y = to_codes(labels, "labels", n, "cluster_ids")
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


def nmi_f1(emb, labels, seed: int = 0, n_init: int = KMEANS_N_INIT, workers: int = 1) -> tuple[float, float]:
    """(NMI, F1) in percent from k-means on the l2-normalized embeddings.

    scikit-learn ``KMeans(n_clusters=<number of distinct labels>, n_init=n_init, random_state=seed)``
    with ``n_init`` pinned to :data:`KMEANS_N_INIT` = 10 by default (the authors' code relied on the
    old scikit-learn default of 10 restarts). Scores: see :func:`clustering_scores`. ``workers`` > 1 runs
    the restarts on that many threads (:func:`kmeans_labels`): the same clustering, sooner.
    """
    if isinstance(n_init, bool) or not isinstance(n_init, (int, np.integer)) or n_init < 1:
        raise ValueError(f"n_init must be an integer >= 1, got {n_init!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
    check_workers(workers)
    e = to_float_tensor(emb, "emb")
    codes = to_codes(labels, "labels", e.shape[0], "emb")
    n_clusters = int(codes.max()) + 1
    x = F.normalize(e, p=2, dim=1).numpy().astype(np.float64)
    return clustering_scores(kmeans_labels(x, n_clusters, int(n_init), int(seed), workers), codes)


def check_workers(workers) -> int:
    if isinstance(workers, bool) or not isinstance(workers, (int, np.integer)) or workers < 1:
        raise ValueError(f"workers (k-means restarts run at once) must be an integer >= 1, got {workers!r}")
    return int(workers)


def kmeans_labels(x: np.ndarray, n_clusters: int, n_init: int, seed: int, workers: int = 1) -> np.ndarray:
    """``KMeans(n_clusters, n_init=n_init, random_state=seed).fit_predict(x)`` of scikit-learn, its restarts on
    ``workers`` threads at once: the same labels as the sequential fit (tested), sooner (1,392 clusters of 16,704
    points: 37.6 s with 2 against 61.6 s on a 2-core AMD EPYC, ``bench/kmeans_restarts.py``).

    A run's numbers depend on the thread count of k-means' OpenMP and BLAS pools (:mod:`sec_lib.threads`), so the
    restarts are not spread over those pools: each restart runs whole on one thread of its own, with one OpenMP
    thread, as the sequential fit runs it inside ``torch_threads(1)``. What makes the restarts independent: the
    sequential fit draws every restart's k-means++ seeding from one ``RandomState(seed)``, one restart after the
    other, and a seeding draws the same count of numbers whatever the data (one ``choice``, then ``n_clusters`` - 1
    times ``n_local_trials`` uniforms). :func:`restart_states` replays those draws to give each restart the
    generator state it starts from; the best restart is then chosen by scikit-learn's own rule: a later restart
    replaces the best only with a strictly lower inertia and a different clustering. With ``workers`` = 1 this is
    scikit-learn's fit itself. The caller limits the BLAS pool (``torch_threads(1)`` in training), as for that fit.
    """
    workers = check_workers(workers)
    if workers == 1 or n_init == 1 or not seeding_replays():
        return sklearn_cluster().KMeans(n_clusters=n_clusters, n_init=n_init, random_state=seed).fit_predict(x)
    with ThreadPoolExecutor(max_workers=min(workers, n_init)) as pool:
        fits = list(pool.map(lambda state: restart_fit(x, n_clusters, state),
                             restart_states(x.shape[0], n_clusters, n_init, seed)))
    best_labels, best_inertia = fits[0]
    for labels, inertia in fits[1:]:              # KMeans.fit's rule, in the restarts' order
        if inertia < best_inertia and not same_clustering(labels, best_labels):
            best_labels, best_inertia = labels, inertia
    return best_labels


def restart_fit(x: np.ndarray, n_clusters: int, state) -> tuple[np.ndarray, float]:
    """(labels, inertia) of one k-means restart (one k-means++ seeding, then Lloyd) from the generator ``state`` it
    starts from (:func:`restart_states`), on one OpenMP thread: this thread's setting, per thread in libgomp."""
    rs = np.random.RandomState()
    rs.set_state(state)
    with threadpool_limits(limits=1, user_api="openmp"):
        km = sklearn_cluster().KMeans(n_clusters=n_clusters, n_init=1, random_state=rs).fit(x)
    return km.labels_, float(km.inertia_)


def restart_states(n_samples: int, n_clusters: int, n_init: int, seed: int) -> list:
    """The state of ``RandomState(seed)`` at the start of each of ``n_init`` k-means++ seedings drawn one after
    the other (scikit-learn's ``_kmeans_plusplus`` with equal sample weights and its default ``n_local_trials``)."""
    rs = np.random.RandomState(seed)
    p = np.full(n_samples, 1.0 / n_samples)
    trials = 2 + int(np.log(n_clusters))
    states = []
    for _ in range(n_init):
        states.append(rs.get_state())
        rs.choice(n_samples, p=p)
        for _ in range(n_clusters - 1):
            rs.uniform(size=trials)
    return states


@functools.cache
def seeding_replays() -> bool:
    """Whether :func:`restart_states` replays this scikit-learn's k-means++ seeding (checked once a process, on a tiny
    problem): the draws it counts are those of scikit-learn 1.3 and later, whose first center is a weighted
    ``choice``. Where it does not (another version on a lent machine), :func:`kmeans_labels` fits one restart after
    the other, with a warning, rather than give another clustering."""
    x = np.random.default_rng(0).normal(size=(40, 3))
    rs = np.random.RandomState(3)
    for state in restart_states(len(x), 5, 3, 3):
        same = rs.get_state()
        if not (np.array_equal(same[1], state[1]) and same[2] == state[2]):
            warnings.warn("this scikit-learn's k-means++ seeding draws differently from what restart_states replays: "
                          "k-means restarts run one after the other", RuntimeWarning, stacklevel=2)
            return False
        sklearn_cluster().kmeans_plusplus(x, 5, random_state=rs)
    return True


def same_clustering(labels: np.ndarray, best: np.ndarray) -> bool:
    """scikit-learn's ``_is_same_clustering(labels, best)``: every cluster of ``labels`` maps to one cluster of
    ``best`` (the two are one clustering up to the clusters' names)."""
    width = int(max(labels.max(), best.max())) + 1
    pairs = np.unique(labels.astype(np.int64) * width + best)
    return len(pairs) == len(np.unique(labels))
