"""sec_lib.metrics against brute force (full N x N numpy), pytorch-metric-learning's AccuracyCalculator,
scikit-learn and hand-computed examples; every retrieval check runs on both backends (torch, faiss)."""
import math
from itertools import combinations

import numpy as np
import pytest
import torch
from sklearn.cluster import KMeans
from pytorch_metric_learning.distances import CosineSimilarity
from pytorch_metric_learning.utils.accuracy_calculator import AccuracyCalculator
from pytorch_metric_learning.utils.inference import CustomKNN
from sklearn.metrics import normalized_mutual_info_score

from sec_lib import metrics as M
from sec_lib.metrics import retrieval as MR  # the ranking kernel and its backends (private names, patch points)

BACKENDS = ["torch", pytest.param("faiss", marks=pytest.mark.skipif(not M.faiss_available(), reason="faiss-cpu not installed"))]

# ----------------------------------------------------------------------------------------- data


def planted(n_classes=12, per_class=15, dim=16, spread=0.9, seed=0):
    """Gaussian clusters around random centres (overlapping, so metrics are not all 100)."""
    rng = np.random.default_rng(seed)
    labels = np.repeat(np.arange(n_classes), per_class)
    centres = rng.normal(size=(n_classes, dim))
    emb = centres[labels] + spread * rng.normal(size=(labels.size, dim))
    perm = rng.permutation(labels.size)
    return emb[perm].astype(np.float32), labels[perm]


def tied(n=120, dim=6, n_classes=5, seed=1):
    """Rows in {-1,0,1}^dim with exactly 4 non-zeros, times a random power of 2: after l2
    normalisation every entry is 0 or +-0.5, so all cosines are exact multiples of 0.25 in float32
    and float64 alike -- many exact ties; duplicated rows included."""
    rng = np.random.default_rng(seed)
    emb = np.zeros((n, dim), np.float32)
    for i in range(n):
        idx = rng.choice(dim, 4, replace=False)
        emb[i, idx] = rng.choice([-1.0, 1.0], 4)
    emb[n // 2 : n // 2 + 10] = emb[:10]  # exact duplicates
    emb *= 2.0 ** rng.integers(-3, 4, size=(n, 1))
    labels = rng.integers(0, n_classes, n)
    return emb, labels


# ------------------------------------------------------------------------------- brute force


def bf_order(q, g, leave_one_out):
    """Full similarity matrix; neighbours by similarity descending, ties by index (stable sort)."""
    qn = q.astype(np.float64) / np.linalg.norm(q.astype(np.float64), axis=1, keepdims=True)
    gn = g.astype(np.float64) / np.linalg.norm(g.astype(np.float64), axis=1, keepdims=True)
    sim = qn @ gn.T
    order = np.argsort(-sim, axis=1, kind="stable")
    if leave_one_out:
        order = np.array([row[row != i] for i, row in enumerate(order)])
    return order


def bf_recall(q, ql, g, gl, ks, leave_one_out):
    order = bf_order(q, g, leave_one_out)
    out = {}
    for k in ks:
        hits = [np.any(gl[order[i, :k]] == ql[i]) for i in range(len(q))]
        out[k] = 100.0 * np.mean(hits)
    return out


def bf_map_at_r(emb, labels):
    order = bf_order(emb, emb, True)
    aps = []
    for i in range(len(emb)):
        r = int(np.sum(labels == labels[i])) - 1
        if r == 0:
            continue
        rel = labels[order[i, :r]] == labels[i]
        s = 0.0
        for j in range(r):
            if rel[j]:
                s += rel[: j + 1].sum() / (j + 1)
        aps.append(s / r)
    return 100.0 * np.mean(aps)


def bf_pair_f1(pred, labels):
    tp = fp = fn = 0
    for i, j in combinations(range(len(pred)), 2):
        same_c, same_y = pred[i] == pred[j], labels[i] == labels[j]
        tp += same_c and same_y
        fp += same_c and not same_y
        fn += same_y and not same_c
    if tp == 0:
        return 0.0
    p, r = tp / (tp + fp), tp / (tp + fn)
    return 100.0 * 2 * p * r / (p + r)


# ----------------------------------------------------------------------------------------- recall


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("data", ["planted", "tied"])
def test_recall_loo_matches_brute_force(data, backend):
    emb, labels = planted() if data == "planted" else tied()
    ks = (1, 2, 4, 8, 16, 100)
    ours = M.recall_at_k(emb, labels, ks=ks, backend=backend)
    ref = bf_recall(emb, labels, emb, labels, ks, True)
    assert ours == pytest.approx(ref, abs=1e-12)
    assert 0 < ours[1] < 100  # the data is neither trivial nor hopeless


@pytest.mark.parametrize("backend", BACKENDS)
def test_recall_ties_break_by_index_hand_example(backend):
    # four identical embeddings: every candidate ties, so the lowest index comes first
    emb = np.ones((4, 3))
    labels = np.array([0, 1, 0, 1])
    # q0 -> 1 (miss), q1 -> 0 (miss), q2 -> 0 (hit), q3 -> 0 (miss)
    assert M.recall_at_k(emb, labels, ks=(1,), backend=backend)[1] == 25.0
    # R@2: q0 -> 1,2 hit; q1 -> 0,2 miss; q2 -> 0,1 hit; q3 -> 0,1 hit
    assert M.recall_at_k(emb, labels, ks=(2,), backend=backend)[2] == 75.0
    # AP@R (R = 1): q0 [1] miss, q1 [0] miss, q2 [0] hit, q3 [0] miss
    assert M.map_at_r(emb, labels, backend=backend) == 25.0


@pytest.mark.parametrize("backend", BACKENDS)
def test_recall_and_map_hand_example(backend):
    # points on the unit circle (degrees); classes 0,0,0,1,1
    deg = np.array([0.0, 10.0, 30.0, -20.0, 180.0])
    emb = np.stack([np.cos(np.radians(deg)), np.sin(np.radians(deg))], 1) * np.array([[1], [3], [0.5], [2], [7]])
    labels = np.array([0, 0, 0, 1, 1])
    # nearest neighbours: q0: 1,3,2,4  q1: 0,2,3,4  q2: 1,0,3,4  q3: 0,1,2,4  q4: 2,1,3? (150,170,160,180)
    r = M.recall_at_k(emb, labels, ks=(1, 2), backend=backend)
    assert r == {1: 60.0, 2: 80.0}
    # AP@R: q0 (R=2) [pos,neg] -> 1/2; q1 [pos,pos] -> 1; q2 [pos,pos] -> 1; q3 (R=1) [neg] -> 0; q4 [neg] -> 0
    assert M.map_at_r(emb, labels, backend=backend) == pytest.approx(100.0 * (0.5 + 1 + 1 + 0 + 0) / 5)


def test_recall_percent_and_torch_numpy_agree():
    emb, labels = planted(seed=3)
    a = M.recall_at_k(emb, labels)
    b = M.recall_at_k(torch.from_numpy(emb), torch.from_numpy(labels))
    c = M.recall_at_k(emb.astype(np.float64) * 5.0, labels.astype(str))  # scale-free, any label dtype
    assert a == b == c
    assert list(a) == [1, 2, 4, 8]
    assert all(0.0 <= v <= 100.0 for v in a.values())
    assert a[1] <= a[2] <= a[4] <= a[8]


def test_recall_ks_positional_third_argument():
    emb, labels = planted()
    assert M.recall_at_k(emb, labels, (1, 3)) == M.recall_at_k(emb, labels, ks=(1, 3))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("data", ["planted", "tied"])
def test_recall_query_gallery_matches_brute_force(data, backend):
    emb, labels = planted(seed=5) if data == "planted" else tied(seed=7)
    q, ql, g, gl = emb[:50], labels[:50], emb[50:], labels[50:]
    ks = (1, 10, 20, 30)
    ours = M.recall_at_k(q, ql, g, gl, ks, backend=backend)
    assert ours == pytest.approx(bf_recall(q, ql, g, gl, ks, False), abs=1e-12)
    assert M.recall_at_k(q, ql, gallery=g, gallery_labels=gl, ks=ks, backend=backend) == ours
    if data == "planted":  # (tied data has exact duplicates of lower index that come first)
        # nothing is left out: a query that also sits in the gallery finds itself first
        assert M.recall_at_k(emb, labels, emb, labels, ks=(1,), backend=backend) == {1: 100.0}


def test_query_gallery_label_codes_are_shared():
    # labels coded separately per side would wrongly match "b" with "x"
    q = np.array([[1.0, 0.0]])
    g = np.array([[1.0, 0.1], [0.0, 1.0]])
    assert M.recall_at_k(q, np.array(["b"]), g, np.array(["x", "b"]), ks=(1,)) == {1: 0.0}
    assert M.recall_at_k(q, np.array(["b"]), g, np.array(["b", "x"]), ks=(1,)) == {1: 100.0}


# ------------------------------------------------------------------------------------------ MAP@R


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("data", ["planted", "tied"])
def test_map_at_r_matches_brute_force(data, backend):
    emb, labels = planted(seed=2) if data == "planted" else tied(seed=4)
    assert M.map_at_r(emb, labels, backend=backend) == pytest.approx(bf_map_at_r(emb, labels), abs=1e-10)


def test_map_at_r_skips_singletons_and_perfect_is_100():
    emb = np.array([[1.0, 0], [0.9, 0.1], [0, 1.0], [0.1, 0.9], [-1.0, 0]])
    labels = np.array([0, 0, 1, 1, 2])  # class 2 is a singleton: no R, skipped
    assert M.map_at_r(emb, labels) == pytest.approx(100.0)
    assert math.isnan(M.map_at_r(np.eye(3), [0, 1, 2]))


# ---------------------------------------------------------------------------------------- chunking


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("data", ["planted", "tied"])
def test_chunk_size_does_not_change_results(data, backend):
    emb, labels = planted(n_classes=7, per_class=20) if data == "planted" else tied()
    kw = dict(clustering=False, backend=backend)
    ref = M.evaluate(emb, labels, ks=(1, 2, 4, 8), chunk_size=len(emb), **kw)
    for cs in (1, 3, 17, 64, 1000, None):
        assert M.evaluate(emb, labels, chunk_size=cs, **kw) == ref
        assert M.map_at_r(emb, labels, chunk_size=cs, backend=backend) == ref["MAP@R"]
        r = M.recall_at_k(emb, labels, chunk_size=cs, backend=backend)
        assert {f"R@{k}": v for k, v in r.items()} == {k: v for k, v in ref.items() if k.startswith("R@")}
    q, ql, g, gl = emb[:40], labels[:40], emb[40:], labels[40:]
    qg = M.recall_at_k(q, ql, g, gl, chunk_size=None, backend=backend)
    assert all(M.recall_at_k(q, ql, g, gl, chunk_size=cs, backend=backend) == qg for cs in (1, 7, 40))


def test_never_builds_the_full_similarity(monkeypatch):
    emb, labels = planted(n_classes=10, per_class=30)  # N = 300
    expected = M.evaluate(emb, labels, clustering=False, backend="torch")
    shapes = []
    orig = MR._similarity_block

    def spy(q, g, out=None):
        sim = orig(q, g, out=out)
        shapes.append(tuple(sim.shape))
        return sim

    monkeypatch.setattr(MR, "_similarity_block", spy)
    monkeypatch.setattr(MR, "BLOCK_ELEMENTS", 1000)
    assert M.evaluate(emb, labels, clustering=False, backend="torch") == expected
    assert len(shapes) == 100  # 300 queries, 3 rows per block
    assert max(r * c for r, c in shapes) <= 1000


def test_top_k_stable_breaks_ties_by_index():
    row = [0.5, -0.0, 0.0, -1e-30, 1e-30, -0.5, 0.5, 1.0, -1.0, 0.5, 0.0, 1.0, -0.5]
    sim = torch.tensor([row, row[::-1], [0.25] * len(row)], dtype=torch.float32)
    ref = np.argsort(-sim.numpy(), axis=1, kind="stable")
    for k in range(1, len(row) + 1):
        got = MR._top_k_stable(sim, k, n_valid=len(row))
        np.testing.assert_array_equal(got, ref[:, :k])


# ------------------------------------------------------------------------------------------ NMI, F1


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_clustering_scores_against_sklearn_and_pair_loop(seed):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 6, 90)
    pred = np.where(rng.random(90) < 0.6, labels, rng.integers(0, 8, 90))  # partly right
    nmi, f1 = M.clustering_scores(pred, labels)
    assert nmi == pytest.approx(100.0 * normalized_mutual_info_score(labels, pred), abs=1e-10)
    assert nmi == pytest.approx(
        100.0 * normalized_mutual_info_score(labels, pred, average_method="arithmetic"), abs=1e-10
    )
    assert f1 == pytest.approx(bf_pair_f1(pred, labels), abs=1e-10)
    assert 0 < f1 < 100 and 0 < nmi < 100


def test_clustering_scores_edge_cases():
    y = np.array([0, 0, 1, 1, 2, 2])
    assert M.clustering_scores(y + 5, y) == pytest.approx((100.0, 100.0))  # relabelled perfect clustering
    assert M.clustering_scores(np.arange(6), y)[1] == 0.0  # all singletons: no TP pairs
    nmi, f1 = M.clustering_scores(np.zeros(6, int), y)  # one cluster
    assert nmi == pytest.approx(0.0, abs=1e-12)
    assert f1 == pytest.approx(bf_pair_f1(np.zeros(6, int), y))
    assert M.clustering_scores([0, 0], [1, 1]) == (100.0, 100.0)  # sklearn: both entropies 0 -> 1


def test_nmi_f1_uses_pinned_kmeans():
    emb, labels = planted(n_classes=6, per_class=20, spread=1.2, seed=9)
    assert M.KMEANS_N_INIT == 10
    x = emb.astype(np.float64) / np.linalg.norm(emb.astype(np.float64), axis=1, keepdims=True)
    for seed in (0, 3):
        pred = KMeans(n_clusters=6, n_init=10, random_state=seed).fit_predict(x)
        ref = (100.0 * normalized_mutual_info_score(labels, pred), bf_pair_f1(pred, labels))
        assert M.nmi_f1(emb, labels, seed=seed) == pytest.approx(ref, abs=1e-9)
    assert M.nmi_f1(emb, labels, seed=1) == M.nmi_f1(torch.from_numpy(emb), torch.from_numpy(labels), seed=1)


def restart_fits(x, k, seed, n_init=10):
    """Each restart of the sequential fit alone: (labels, inertia), from the generator state it starts with."""
    from sec_lib.metrics.clustering import restart_fit, restart_states
    return [restart_fit(x, k, state) for state in restart_states(x.shape[0], k, n_init, seed)]


def test_restart_states_are_where_sklearns_sequential_seedings_start():
    from sklearn.cluster import kmeans_plusplus
    from sec_lib.metrics.clustering import restart_states
    emb, _ = planted(n_classes=9, per_class=10, seed=4)
    x = emb.astype(np.float64) - emb.astype(np.float64).mean(0)
    for k in (1, 9, 30):                              # n_local_trials = 2 + int(log k): 2, 4, 5
        rs = np.random.RandomState(7)
        for state in restart_states(len(x), k, 4, 7):
            mine = np.random.RandomState()
            mine.set_state(state)
            assert np.array_equal(rs.get_state()[1], state[1]) and rs.get_state()[2] == state[2]
            centers, _ = kmeans_plusplus(x, k, random_state=rs)          # advances rs by one seeding
            assert np.array_equal(centers, kmeans_plusplus(x, k, random_state=mine)[0])


def test_restarts_run_one_after_the_other_where_the_seeding_is_not_replayed(monkeypatch):
    from sec_lib.metrics import clustering
    clustering.seeding_replays.cache_clear()
    assert clustering.seeding_replays()                       # this scikit-learn: replayed
    real = clustering.restart_states
    monkeypatch.setattr(clustering, "restart_states", lambda n, k, n_init, seed: real(n, k, n_init, seed + 1))
    clustering.seeding_replays.cache_clear()
    try:
        with pytest.warns(RuntimeWarning, match="one after the other"):
            assert not clustering.seeding_replays()
        emb, _ = planted(n_classes=15, per_class=12, spread=1.6, seed=21)
        x = emb.astype(np.float64)
        assert np.array_equal(M.kmeans_labels(x, 15, 10, 2, workers=3),
                              KMeans(n_clusters=15, n_init=10, random_state=2).fit_predict(x))
    finally:
        clustering.seeding_replays.cache_clear()


@pytest.mark.parametrize("workers", [2, 3, 10])
def test_kmeans_restarts_on_threads_give_sklearns_clustering(workers):
    """Restarts run at once give the sequential fit's labels exactly; the seeds cover fits whose best restart is
    not the first (so the choice among restarts is exercised, not only the first restart)."""
    emb, labels = planted(n_classes=15, per_class=12, spread=1.6, seed=21)
    x = emb.astype(np.float64) / np.linalg.norm(emb.astype(np.float64), axis=1, keepdims=True)
    best = []
    for seed in range(4):
        ref = KMeans(n_clusters=15, n_init=10, random_state=seed).fit_predict(x)
        assert np.array_equal(M.kmeans_labels(x, 15, 10, seed, workers=workers), ref)
        inertias = [i for _, i in restart_fits(x, 15, seed)]
        best.append(int(np.argmin(inertias)))
    assert any(b > 0 for b in best), best
    assert M.nmi_f1(emb, labels, seed=3, workers=workers) == M.nmi_f1(emb, labels, seed=3)


def test_same_clustering_is_sklearns_rule():
    from sklearn.cluster._k_means_common import _is_same_clustering    # scikit-learn's own rule, the reference
    from sec_lib.metrics.clustering import same_clustering
    rng = np.random.default_rng(0)
    for _ in range(200):
        a = rng.integers(0, 4, size=12).astype(np.int32)
        b = rng.permutation(4)[a].astype(np.int32) if rng.random() < 0.5 else rng.integers(0, 4, 12).astype(np.int32)
        if rng.random() < 0.2:
            b = np.where(a == a[0], 3, b).astype(np.int32)                 # merge or split one cluster
        assert same_clustering(a, b) == bool(_is_same_clustering(a, b, 4)), (a, b)


# ------------------------------------------------------------------------------------------ evaluate


def test_evaluate_combines_the_single_metrics():
    emb, labels = planted(seed=11)
    out = M.evaluate(emb, labels, seed=2)
    assert list(out) == ["R@1", "R@2", "R@4", "R@8", "NMI", "F1", "MAP@R"]
    r = M.recall_at_k(emb, labels)
    assert [out[f"R@{k}"] for k in (1, 2, 4, 8)] == [r[k] for k in (1, 2, 4, 8)]
    assert out["MAP@R"] == M.map_at_r(emb, labels)
    assert (out["NMI"], out["F1"]) == M.nmi_f1(emb, labels, seed=2)
    sop = M.evaluate(emb, labels, ks=(1, 10, 100), clustering=False)
    assert list(sop) == ["R@1", "R@10", "R@100", "MAP@R"]


# ------------------------------------------------------------------------------------------ bad input

E = np.random.default_rng(0).normal(size=(10, 4))
Y = np.arange(10) % 3


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: M.recall_at_k(E, Y[:9]), "labels has length 9"),
        (lambda: M.recall_at_k(E[:0], Y[:0]), "non-empty"),
        (lambda: M.recall_at_k(E[0], Y), "2-D"),
        (lambda: M.recall_at_k(E, Y, ks=(0,)), "k=0"),
        (lambda: M.recall_at_k(E, Y, ks=(9,)), r"k=9 .*1 <= k < number of candidates \(9\)"),
        (lambda: M.recall_at_k(E, Y, ks=()), "at least one k"),
        (lambda: M.recall_at_k(E, Y, ks=(1.5,)), "integers"),
        (lambda: M.recall_at_k(E[:1], Y[:1]), "at least 2 samples"),
        (lambda: M.recall_at_k(E, Y, E[:, :3], Y), "dimension"),
        (lambda: M.recall_at_k(E, Y, E[:4], Y[:4], ks=(4,)), r"number of candidates \(4\)"),
        (lambda: M.recall_at_k(E, Y, E, Y[:5]), "gallery_labels has length 5"),
        (lambda: M.recall_at_k(E, Y, gallery=E), "together"),
        (lambda: M.recall_at_k(E), "positional"),
        (lambda: M.recall_at_k(np.where(E > 1, np.nan, E), Y), "NaN"),
        (lambda: M.recall_at_k(E, Y, chunk_size=0), "chunk_size"),
        (lambda: M.recall_at_k(E, Y, device="warp-drive"), "device"),
        (lambda: M.map_at_r(E, Y.reshape(2, 5)), "1-D"),
        (lambda: M.nmi_f1(E, Y, n_init=0), "n_init"),
        (lambda: M.nmi_f1(E, Y, workers=0), r"workers \(k-means restarts run at once\) must be an integer >= 1"),
        (lambda: M.evaluate(E, Y, kmeans_workers=1.5), "workers"),
        (lambda: M.evaluate(E, Y, ks=(10,)), "k=10"),
        (lambda: M.evaluate(E, Y, clustering="yes"), "clustering"),
        (lambda: M.recall_at_k(E, Y, backend="annoy"), r"backend must be one of \('auto', 'torch', 'faiss'\), got 'annoy'"),
        (lambda: M.map_at_r(E, Y, backend=None), "backend must be one of"),
        (lambda: M.evaluate(E, Y, backend="faiss", device="cuda"), "CPU only, got device='cuda'"),
    ],
)
def test_bad_input_raises(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize("backend", BACKENDS)
def test_nearest_neighbor_hits_match_brute_force_and_recall_at_1(backend):
    from sec_lib.metrics import nearest_neighbor_hits
    rng = np.random.default_rng(5)
    labels = rng.integers(0, 6, 90)
    emb = rng.standard_normal((6, 8))[labels] + 0.8 * rng.standard_normal((90, 8))
    hits = nearest_neighbor_hits(emb, labels, chunk_size=7, backend=backend)
    e = emb / np.linalg.norm(emb, axis=1, keepdims=True)
    sim = e @ e.T
    np.fill_diagonal(sim, -np.inf)
    brute = labels[np.argmax(sim, axis=1)] == labels
    assert (hits == brute).all()
    assert hits.mean() * 100 == pytest.approx(M.recall_at_k(emb, labels, ks=(1,))[1])


# ------------------------------------------------------------------------------------------ backends


def copies(n_base=40, n_copies=3, n_classes=6, dim=8, seed=3):
    """Continuous embeddings, each repeated ``n_copies`` times (scaled) with its label: every exact
    tie is between copies of one point, hence of one label, so any tie order gives the same labels."""
    rng = np.random.default_rng(seed)
    lab = rng.integers(0, n_classes, n_base)
    base = rng.standard_normal((n_classes, dim))[lab] + 0.9 * rng.standard_normal((n_base, dim))
    emb = np.concatenate([base * 2.0**j for j in range(n_copies)]).astype(np.float32)
    labels = np.tile(lab, n_copies)
    perm = rng.permutation(len(labels))
    return emb[perm], labels[perm]


@pytest.mark.skipif(not M.faiss_available(), reason="faiss-cpu not installed")
@pytest.mark.parametrize("data", ["planted", "tied", "copies"])
def test_backends_agree(data):
    emb, labels = {"planted": planted, "tied": tied, "copies": copies}[data]()
    ks = (1, 2, 5, 10, 50)
    for chunk_size in (None, 13):
        kw = dict(ks=ks, clustering=False, chunk_size=chunk_size)
        assert M.evaluate(emb, labels, backend="torch", **kw) == M.evaluate(emb, labels, backend="faiss", **kw)
        q, ql, g, gl = emb[:30], labels[:30], emb[30:], labels[30:]
        assert M.recall_at_k(q, ql, g, gl, ks, backend="torch") == M.recall_at_k(q, ql, g, gl, ks, backend="faiss")


def test_auto_backend_picks_faiss_on_cpu_for_shallow_searches(monkeypatch):
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    shallow, deep = M.AUTO_FAISS_MAX_DEPTH, M.AUTO_FAISS_MAX_DEPTH + 1
    assert MR._pick_backend("auto", cpu, shallow) == ("faiss" if M.faiss_available() else "torch")
    assert MR._pick_backend("auto", cpu, deep) == "torch"  # e.g. R@1000: torch counts ranks
    assert MR._pick_backend("auto", cuda, 1) == "torch"
    assert MR._pick_backend("torch", cpu, 1) == "torch"
    assert MR._pick_backend("faiss", cpu, 10**6) == "faiss"
    monkeypatch.setattr(MR, "faiss", None)
    assert not M.faiss_available()
    assert MR._pick_backend("auto", cpu, 1) == "torch"
    with pytest.raises(ImportError, match=r"faiss-cpu.*sec_lib\[fast\]"):
        M.recall_at_k(E, Y, backend="faiss")


def test_counting_on_other_devices_matches_the_cpu_loop():
    # the rank count for GPUs (torch ops on the whole block), run here on CPU tensors
    emb, labels = tied(seed=2)
    e = torch.nn.functional.normalize(torch.from_numpy(emb), dim=1)
    sim = e @ e.T  # exact multiples of 0.25: many ties
    sim.fill_diagonal_(-math.inf)
    best, best_idx = MR._Positives(labels, labels.max() + 1).best(sim, labels)
    cpu = MR._first_hit_by_counting(sim, best, best_idx)

    assert (MR._first_hit_by_counting_torch(sim, best, best_idx) == cpu).all()
    ref = bf_order(emb, emb, True)  # brute force: rank of the first same-label neighbour
    first = np.array([np.argmax(labels[o] == labels[i]) if (labels[o] == labels[i]).any() else len(o)
                      for i, o in enumerate(ref)])
    has = (np.bincount(labels)[labels] > 1)
    assert (cpu[has] == first[has]).all() and (cpu[~has] == len(labels)).all()


@pytest.mark.skipif(not M.faiss_available(), reason="faiss-cpu not installed")
def test_faiss_searches_in_bounded_chunks(monkeypatch):
    emb, labels = planted(n_classes=10, per_class=30)  # N = 300
    expected = M.evaluate(emb, labels, ks=(1, 10), clustering=False, backend="faiss")
    shapes = []
    orig = MR.faiss.IndexFlatIP

    class Spy(orig):
        def search(self, x, k, *args, **kwargs):
            shapes.append((x.shape[0], k))
            return super().search(x, k, *args, **kwargs)

    monkeypatch.setattr(MR.faiss, "IndexFlatIP", Spy)
    monkeypatch.setattr(MR, "FAISS_QUERY_CHUNK", 64)
    assert M.evaluate(emb, labels, ks=(1, 10), clustering=False, backend="faiss") == expected
    assert sum(r for r, _ in shapes) == 300 and max(r for r, _ in shapes) == 64
    # per chunk: k = max(10, R = 29) neighbours + 1 past the cut + the query itself
    assert {k for _, k in shapes} == {31}


# ------------------------------------------------------- against pytorch-metric-learning's AccuracyCalculator


def pml_calculator(k=None):
    return AccuracyCalculator(
        include=("precision_at_1", "mean_average_precision_at_r", "mean_reciprocal_rank", "r_precision"),
        k=k, device=torch.device("cpu"), knn_func=CustomKNN(CosineSimilarity()),
    )


def mrr_from_recall(recall: dict, n_candidates: int, hit_any: float) -> float:
    """Mean reciprocal rank (misses 0) over all queries, from R@k for every k < n_candidates and the
    percentage of queries that have any positive (= R@n_candidates)."""
    r = dict(recall)
    r[n_candidates] = hit_any
    r[0] = 0.0
    return sum((r[k] - r[k - 1]) / 100.0 / k for k in range(1, n_candidates + 1))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("data", ["planted", "copies"])
def test_leave_one_out_against_accuracy_calculator(data, backend):
    # "copies": exact ties, all within one label; pml's own kNN orders them arbitrarily, which
    # cannot change any label sequence. A singleton class makes lone queries.
    emb, labels = planted(n_classes=8, per_class=9, seed=4) if data == "planted" else copies()
    emb = np.concatenate([emb, np.ones((1, emb.shape[1]), np.float32)])
    labels = np.concatenate([labels, [labels.max() + 1]])
    n = len(labels)
    acc = pml_calculator().get_accuracy(torch.from_numpy(emb), torch.from_numpy(labels))
    not_lone = np.mean(np.bincount(labels)[labels] > 1)  # pml averages over these queries only

    # MAP@R: same definition, same skipped queries
    assert M.map_at_r(emb, labels, backend=backend) == pytest.approx(100.0 * acc["mean_average_precision_at_r"], abs=1e-9)
    # Recall@1 counts lone queries as misses; pml's precision_at_1 leaves them out
    ks = tuple(range(1, n - 1))
    rec = M.recall_at_k(emb, labels, ks=ks, backend=backend)
    assert rec[1] == pytest.approx(100.0 * not_lone * acc["precision_at_1"], abs=1e-9)
    # the whole first-hit rank distribution, through the mean reciprocal rank
    assert mrr_from_recall(rec, n - 1, 100.0 * not_lone) == pytest.approx(not_lone * acc["mean_reciprocal_rank"], abs=1e-6)  # pml: float32
    # Recall@K from the very k nearest neighbours that AccuracyCalculator ranks (its knn_func)
    for k in (2, 5, 10):
        _, idx = pml_calculator().knn_func(torch.from_numpy(emb), k, torch.from_numpy(emb), True)
        hit = (labels[idx.numpy()] == labels[:, None]).any(axis=1)
        assert rec[k] == pytest.approx(100.0 * hit.mean(), abs=1e-9)
    assert 0 < rec[1] < 100


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("data", ["planted", "copies"])
def test_query_gallery_against_accuracy_calculator(data, backend):
    # In-Shop protocol: queries retrieve from a separate gallery; some query labels are absent there
    emb, labels = planted(n_classes=10, per_class=8, seed=6) if data == "planted" else copies(seed=8)
    q, ql, g, gl = emb[:40], labels[:40], emb[40:], labels[40:]
    keep = gl != ql[0]  # ql[0]'s class has no gallery member: its queries are lone
    g, gl = g[keep], gl[keep]
    acc = pml_calculator().get_accuracy(torch.from_numpy(q), torch.from_numpy(ql), torch.from_numpy(g),
                                        torch.from_numpy(gl), ref_includes_query=False)
    not_lone = np.mean(np.isin(ql, gl))
    assert 0 < not_lone < 1
    ks = tuple(range(1, len(g)))
    rec = M.recall_at_k(q, ql, g, gl, ks, backend=backend)
    assert rec[1] == pytest.approx(100.0 * not_lone * acc["precision_at_1"], abs=1e-9)
    assert mrr_from_recall(rec, len(g), 100.0 * not_lone) == pytest.approx(not_lone * acc["mean_reciprocal_rank"], abs=1e-6)  # pml: float32
    for k in (3, 10):
        _, idx = pml_calculator().knn_func(torch.from_numpy(q), k, torch.from_numpy(g), False)
        assert rec[k] == pytest.approx(100.0 * (gl[idx.numpy()] == ql[:, None]).any(axis=1).mean(), abs=1e-9)
