"""NMI and F1 of a k-means clustering of the embeddings (definitions: see :mod:`sec_lib.metrics`)."""
from __future__ import annotations

import numpy as np
import torch.nn.functional as F

from .inputs import to_codes, to_float_tensor, to_label_array

#: k-means restarts, pinned (scikit-learn's default changed to "auto" = 1 restart for k-means++ in 1.4;
#: the authors' code ran with the old default of 10).
KMEANS_N_INIT = 10


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


def nmi_f1(emb, labels, seed: int = 0, n_init: int = KMEANS_N_INIT) -> tuple[float, float]:
    """(NMI, F1) in percent from k-means on the l2-normalized embeddings.

    scikit-learn ``KMeans(n_clusters=<number of distinct labels>, n_init=n_init, random_state=seed)``
    with ``n_init`` pinned to :data:`KMEANS_N_INIT` = 10 by default (the authors' code relied on the
    old scikit-learn default of 10 restarts). Scores: see :func:`clustering_scores`.
    """
    from sklearn.cluster import KMeans  # local: sklearn.cluster takes about 3 s to import (measured), only clustering needs it

    if isinstance(n_init, bool) or not isinstance(n_init, (int, np.integer)) or n_init < 1:
        raise ValueError(f"n_init must be an integer >= 1, got {n_init!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
    e = to_float_tensor(emb, "emb")
    codes = to_codes(labels, "labels", e.shape[0], "emb")
    n_clusters = int(codes.max()) + 1
    x = F.normalize(e, p=2, dim=1).numpy().astype(np.float64)
    km = KMeans(n_clusters=n_clusters, n_init=int(n_init), random_state=int(seed))
    pred = km.fit_predict(x)
    return clustering_scores(pred, codes)
