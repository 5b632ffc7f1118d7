"""sec_lib.losses against independent formulas (plain loops written here), hand-computed values and PML."""
import math

import numpy as np
import pytest
import torch
from pytorch_metric_learning import distances as pml_distances
from pytorch_metric_learning import losses as pml_losses
from pytorch_metric_learning import miners as pml_miners
from pytorch_metric_learning import reducers as pml_reducers

from sec_lib.losses import LOSS_NAMES, LOSS_SPECS, NORMALIZED_LOSSES, get_loss, triplet_violations

SOFTMAX = ("normface", "cosface", "arcface")


def make_batch(p=4, k=3, d=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    f = torch.randn(p * k, d, generator=g, dtype=torch.float64)
    f = f * torch.empty(p * k, 1, dtype=torch.float64).uniform_(0.3, 4.0, generator=g)  # varied norms
    labels = torch.arange(p).repeat_interleave(k)
    perm = torch.randperm(p * k, generator=g)  # classes interleaved, not contiguous
    return f[perm], labels[perm]


def unit(f):
    x = f.detach().numpy()
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def build(name, d=6, num_classes=4, **hp):
    if name in SOFTMAX:
        hp = {"num_classes": num_classes, "embedding_size": d, **hp}
    return get_loss(name, **hp).double()


# ------------------------------------------------------------------------ reference formulas
def ref_triplet(f, y, m):
    x, y = unit(f), y.tolist()
    terms = []
    for a in range(len(y)):
        for p in range(len(y)):
            if p == a or y[p] != y[a]:
                continue
            for n in range(len(y)):
                if y[n] != y[a]:
                    d_ap, d_an = np.sum((x[a] - x[p]) ** 2), np.sum((x[a] - x[n]) ** 2)
                    terms.append(max(0.0, m + d_ap - d_an))
    return float(np.mean(terms))


def ref_semihard(f, y, m):
    x, y = unit(f), y.tolist()
    terms = []
    for a in range(len(y)):
        negs = [np.sum((x[a] - x[n]) ** 2) for n in range(len(y)) if y[n] != y[a]]
        for p in range(len(y)):
            if p == a or y[p] != y[a]:
                continue
            d_ap = np.sum((x[a] - x[p]) ** 2)
            farther = [d for d in negs if d > d_ap]
            d_an = min(farther) if farther else max(negs)
            terms.append(max(0.0, m + d_ap - d_an))
    return float(np.mean(terms))


def ref_npair(f, y, s):
    x, y = unit(f), y.tolist()
    classes = sorted(set(y))
    first_two = [[i for i in range(len(y)) if y[i] == c][:2] for c in classes]
    anchors = [x[i] for i, _ in first_two]
    positives = [x[j] for _, j in first_two]
    total = 0.0
    for i, a in enumerate(anchors):
        logits = [s * float(a @ p) for p in positives]
        total += -logits[i] + math.log(sum(math.exp(v) for v in logits))
    return total / len(classes)


def ref_ms(f, y, alpha, beta, base, eps):
    """Per-anchor loop as in Wang et al.'s official code."""
    x, y = unit(f), y.tolist()
    sim = x @ x.T
    total = 0.0
    for i in range(len(y)):
        pos = [sim[i, j] for j in range(len(y)) if y[j] == y[i] and sim[i, j] < 1 - 1e-5]
        neg = [sim[i, j] for j in range(len(y)) if y[j] != y[i]]
        if not pos or not neg:
            continue
        hard_neg = [s for s in neg if s + eps > min(pos)]
        hard_pos = [s for s in pos if s - eps < max(neg)]
        if not hard_neg or not hard_pos:
            continue
        total += 1 / alpha * math.log(1 + sum(math.exp(-alpha * (s - base)) for s in hard_pos))
        total += 1 / beta * math.log(1 + sum(math.exp(beta * (s - base)) for s in hard_neg))
    return total / len(y)


def ref_tml(f, y, margin, scale, lam, eps):
    x, y = unit(f), y.tolist()
    cos = x @ x.T
    pairs_p = [(a, p) for a in range(len(y)) for p in range(len(y)) if a != p and y[a] == y[p]]
    pairs_n = [(a, n) for a in range(len(y)) for n in range(len(y)) if y[a] != y[n]]
    tuplet = []
    for a, p in pairs_p:
        target = math.cos(math.acos(cos[a, p]) - margin)
        tuplet.append(math.log(1 + sum(math.exp(scale * (cos[a, n] - target)) for aa, n in pairs_n if aa == a)))
    mean_p = np.mean([cos[a, p] for a, p in pairs_p])
    mean_n = np.mean([cos[a, n] for a, n in pairs_n])
    var_p = np.mean([max(0.0, (1 - eps) * mean_p - cos[a, p]) ** 2 for a, p in pairs_p])
    var_n = np.mean([max(0.0, cos[a, n] - (1 + eps) * mean_n) ** 2 for a, n in pairs_n])
    return float(np.mean(tuplet) + lam * (var_p + var_n))


def ref_ntxent(f, y, t):
    """SimCLR: each anchor against all other samples; labels pair the two views."""
    x, y = unit(f), y.tolist()
    cos = x @ x.T
    terms = []
    for i in range(len(y)):
        for j in range(len(y)):
            if i != j and y[i] == y[j]:
                denom = sum(math.exp(cos[i, k] / t) for k in range(len(y)) if k != i)
                terms.append(-math.log(math.exp(cos[i, j] / t) / denom))
    return float(np.mean(terms))


def ref_cosine_softmax(f, y, W, scale, kind, m):
    x = unit(f)
    w = W.detach().numpy()
    w = w / np.linalg.norm(w, axis=1, keepdims=True)
    total = 0.0
    for i, c in enumerate(y.tolist()):
        cos = x[i] @ w.T
        logits = scale * cos
        theta = math.acos(cos[c])
        if kind == "cosface":
            logits[c] = scale * (cos[c] - m)
        elif kind == "arcface":
            logits[c] = scale * (math.cos(theta + m) if theta + m <= math.pi else cos[c] - m * math.sin(m))
        total += -logits[c] + math.log(np.exp(logits).sum())
    return total / len(y)


def ref_contrastive(f, y, pos_margin, neg_margin):
    x, y = unit(f), y.tolist()
    pos, neg = [], []
    for a in range(len(y)):
        for b in range(len(y)):
            if a == b:
                continue
            d = np.linalg.norm(x[a] - x[b])
            (pos if y[a] == y[b] else neg).append(max(0.0, d - pos_margin) if y[a] == y[b] else max(0.0, neg_margin - d))
    avg_nonzero = lambda v: float(np.mean([t for t in v if t > 0])) if any(t > 0 for t in v) else 0.0  # noqa: E731
    return avg_nonzero(pos) + avg_nonzero(neg)


# ------------------------------------------------------------------------------ hand-made batches
def test_triplet_hand_example():
    # unit directions 0, 90, 180, 270 degrees (norms varied); classes {0, 90} and {180, 270}
    f = torch.tensor([[1.0, 0], [0, 2.0], [-3.0, 0], [0, -1.0]], dtype=torch.float64)
    y = torch.tensor([0, 0, 1, 1])
    # d = 2 (90 deg) or 4 (180 deg); per anchor one of its two triplets is 1 + 2 - 2 = 1, the other is 0
    assert get_loss("triplet")(f, y).item() == pytest.approx(0.5, abs=1e-12)


def test_semihard_hand_example_fallback_to_hardest():
    # anchor/positive opposite (d_ap = 4), negative at 90 deg (d_an = 2): no negative beyond d_ap,
    # so the hardest (largest d_an = 2) is used: 0.2 + 4 - 2 = 2.2 for both positive pairs
    f = torch.tensor([[1.0, 0], [-5.0, 0], [0, 0.5]], dtype=torch.float64)
    y = torch.tensor([0, 0, 1])
    assert get_loss("semihard")(f, y).item() == pytest.approx(2.2, abs=1e-12)


def test_semihard_picks_closest_farther_negative():
    # anchor (1,0), positive at 60 deg (d_ap = 1); negatives at 90 deg (d=2) and 180 deg (d=4) and 30 deg (d<1)
    ang = [0.0, 60.0, 90.0, 180.0, 30.0]
    f = torch.tensor([[math.cos(math.radians(a)), math.sin(math.radians(a))] for a in ang], dtype=torch.float64)
    y = torch.tensor([0, 0, 1, 1, 1])
    loss = get_loss("semihard", margin=1.5)(f, y).item()
    assert loss == pytest.approx(ref_semihard(f, y, 1.5), abs=1e-12)
    # the anchor-0 pair alone would be 1.5 + 1 - 2 = 0.5 (negative at 90 deg, not the closer 30 deg one)
    x = unit(f)
    d = lambda i, j: float(np.sum((x[i] - x[j]) ** 2))  # noqa: E731
    assert d(0, 2) == pytest.approx(2.0) and d(0, 1) == pytest.approx(1.0)


def test_semihard_tie_is_not_semihard():
    # class 0 at 0 and 90 deg (d_ap = 2); negatives at 180 and 270 deg. For each positive pair one negative
    # ties (d_an = 2 = d_ap, not strictly farther), the other is at d_an = 4: TF's strict rule takes 4 -> 0.
    f = torch.tensor([[1.0, 0], [0, 1.0], [-1.0, 0], [0, -1.0]], dtype=torch.float64)
    y = torch.tensor([0, 0, 1, 1])
    assert get_loss("semihard")(f, y).item() == 0.0 == ref_semihard(f, y, 0.2)


def test_npair_hand_example():
    f = torch.tensor([[1.0, 0], [2.0, 0], [0, 1.0], [0, 3.0]], dtype=torch.float64)
    y = torch.tensor([0, 0, 1, 1])
    s = 25.0
    # logits [[s, 0], [0, s]] -> CE = log(1 + e^-s)
    assert get_loss("npair")(f, y).item() == pytest.approx(math.log1p(math.exp(-s)), rel=1e-9)


# --------------------------------------------------------------------------- vs reference loops
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_triplet_vs_bruteforce(seed):
    f, y = make_batch(seed=seed)
    assert get_loss("triplet")(f, y).item() == pytest.approx(ref_triplet(f, y, 1.0), rel=1e-9)
    assert get_loss("triplet", margin=0.3)(f, y).item() == pytest.approx(ref_triplet(f, y, 0.3), rel=1e-9)


@pytest.mark.parametrize("k", [3, 4])
def test_triplet_vs_pml_and_not_pml_default_reducer(k):
    f, y = make_batch(p=5, k=k, seed=3)
    ref = pml_losses.TripletMarginLoss(
        margin=1.0, distance=pml_distances.LpDistance(power=2), reducer=pml_reducers.MeanReducer()
    )(f, y)
    ours = get_loss("triplet")(f, y)
    assert ours.item() == pytest.approx(ref.item(), rel=1e-9)
    # PML's default AvgNonZeroReducer averages only violating triplets: a different loss
    avg_nonzero = pml_losses.TripletMarginLoss(margin=1.0, distance=pml_distances.LpDistance(power=2))(f, y)
    assert avg_nonzero.item() > ours.item() + 1e-3


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_semihard_vs_bruteforce(seed):
    f, y = make_batch(p=5, k=3, seed=seed)
    for m in (0.2, 1.0):
        assert get_loss("semihard", margin=m)(f, y).item() == pytest.approx(ref_semihard(f, y, m), rel=1e-9, abs=1e-12)


def test_semihard_unbalanced_and_single_class():
    f, y = make_batch(p=4, k=3, seed=5)
    y = torch.tensor([0, 0, 0, 0, 1, 1, 2, 3, 3, 3, 3, 3])  # unbalanced, one singleton
    assert get_loss("semihard")(f, y).item() == pytest.approx(ref_semihard(f, y, 0.2), rel=1e-9)
    f1 = f.clone().requires_grad_()
    zero = get_loss("semihard")(f1, torch.zeros(12, dtype=torch.long))  # no negatives at all
    zero.backward()
    assert zero.item() == 0.0 and torch.all(f1.grad == 0)


@pytest.mark.parametrize("seed", [0, 1])
def test_npair_vs_loop(seed):
    f, y = make_batch(p=5, k=2, seed=seed)
    assert get_loss("npair")(f, y).item() == pytest.approx(ref_npair(f, y, 25.0), rel=1e-9)
    f, y = make_batch(p=4, k=3, seed=seed)  # more than two per class: only the first two are used
    assert get_loss("npair", scale=64.0)(f, y).item() == pytest.approx(ref_npair(f, y, 64.0), rel=1e-9)


def test_npair_skips_singletons():
    f, y = make_batch(p=3, k=2, seed=4)
    f = torch.cat([f, torch.randn(1, f.shape[1], dtype=f.dtype)])
    y = torch.cat([y, torch.tensor([99])])
    assert get_loss("npair")(f, y).item() == pytest.approx(ref_npair(f[:-1], y[:-1], 25.0), rel=1e-9)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ms_vs_official_loop_and_pml(seed):
    f, y = make_batch(p=4, k=5, seed=seed)
    ours = get_loss("ms")(f, y).item()
    assert ours == pytest.approx(ref_ms(f, y, 2.0, 40.0, 0.5, 0.1), rel=1e-9)
    miner = pml_miners.MultiSimilarityMiner(epsilon=0.1)
    pml = pml_losses.MultiSimilarityLoss(alpha=2, beta=40, base=0.5)(f, y, miner(f, y)).item()
    assert ours == pytest.approx(pml, rel=1e-9)
    assert ours > 0


def test_ms_drops_duplicate_positives_like_official_code():
    # class 0 = one direction twice (cos = 1, excluded as in the official code), a negative close to it:
    # anchors 0 and 1 then have no positive and are skipped; only class 1's anchors contribute
    base = torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64)
    near = torch.tensor([0.95, math.sqrt(1 - 0.95**2), 0.0], dtype=torch.float64)
    f = torch.stack([base, 2 * base, near, torch.tensor([0.9, 0.0, 0.43589], dtype=torch.float64)])
    y = torch.tensor([0, 0, 1, 1])
    ours = get_loss("ms")(f, y).item()
    assert ours == pytest.approx(ref_ms(f, y, 2.0, 40.0, 0.5, 0.1), rel=1e-9)
    # once the second sample is no longer a duplicate (cos < 1 - 1e-5), the class-0 anchors count
    g = f.clone()
    g[1] = torch.tensor([2.0, 0.0, 0.02], dtype=torch.float64)
    assert get_loss("ms")(g, y).item() == pytest.approx(ref_ms(g, y, 2.0, 40.0, 0.5, 0.1), rel=1e-9)
    assert get_loss("ms")(g, y).item() > ours + 0.1


def test_ms_mining_matters():
    f, y = make_batch(p=4, k=5, seed=7)
    ours = get_loss("ms", epsilon=0.0)(f, y).item()
    assert ours == pytest.approx(ref_ms(f, y, 2.0, 40.0, 0.5, 0.0), rel=1e-9)
    assert abs(ours - get_loss("ms", epsilon=10.0)(f, y).item()) > 1e-6  # eps=10 keeps every pair


@pytest.mark.parametrize("seed", [0, 1])
def test_tml_vs_loop_and_pml(seed):
    f, y = make_batch(p=4, k=4, seed=seed)
    ours = get_loss("tml")(f, y).item()
    assert ours == pytest.approx(ref_tml(f, y, 0.1, 64.0, 0.5, 0.01), rel=1e-9)
    pml = pml_losses.MultipleLosses(
        [pml_losses.TupletMarginLoss(margin=math.degrees(0.1), scale=64),
         pml_losses.IntraPairVarianceLoss(pos_eps=0.01, neg_eps=0.01)],
        weights=[1.0, 0.5],
    )(f, y).item()
    assert ours == pytest.approx(pml, rel=1e-9)


def test_tml_duplicate_positive_is_finite():
    f, y = make_batch(p=3, k=4, seed=1)
    f = f.float()
    f[1] = f[0] * 3.0  # a duplicate positive direction: cos rounds to ~1
    y = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2])
    f.requires_grad_()
    loss = get_loss("tml")(f, y)
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(f.grad).all()


@pytest.mark.parametrize("seed", [0, 1])
def test_ntxent_vs_simclr_loop(seed):
    f, y = make_batch(p=6, k=2, seed=seed)
    for t in (0.5, 0.1):
        ours = get_loss("ntxent", temperature=t)(f, y).item()
        assert ours == pytest.approx(ref_ntxent(f, y, t), rel=1e-9)
        assert ours == pytest.approx(pml_losses.NTXentLoss(temperature=t)(f, y).item(), rel=1e-9)


def test_ntxent_more_views_vs_pml():
    f, y = make_batch(p=4, k=3, seed=4)
    assert get_loss("ntxent")(f, y).item() == pytest.approx(pml_losses.NTXentLoss(temperature=0.5)(f, y).item(), rel=1e-9)


@pytest.mark.parametrize("name", SOFTMAX)
def test_cosine_softmax_vs_loop_and_pml(name):
    f, y = make_batch(p=4, k=3, seed=11)
    loss = build(name)
    spec = LOSS_SPECS[name].defaults
    m = spec.get("margin", 0.0)
    assert loss(f, y).item() == pytest.approx(ref_cosine_softmax(f, y, loss.W, spec["scale"], name, m), rel=1e-9)
    if name == "normface":
        pml = pml_losses.NormalizedSoftmaxLoss(4, 6, temperature=1 / spec["scale"])
    elif name == "cosface":
        pml = pml_losses.CosFaceLoss(4, 6, margin=m, scale=spec["scale"])
    else:
        pml = pml_losses.ArcFaceLoss(4, 6, margin=math.degrees(m), scale=spec["scale"])
    pml = pml.double()
    pml.W.data = loss.W.data.T.clone()
    assert loss(f, y).item() == pytest.approx(pml(f, y).item(), rel=1e-9)


def test_arcface_large_angle_branch():
    # embedding opposite to its class weight: theta = pi > pi - m, so the fallback cos - m sin m is used
    loss = build("arcface", d=2, num_classes=2)
    loss.W.data = torch.tensor([[1.0, 0.0], [0.0, 1.0]], dtype=torch.float64)
    f = torch.tensor([[-1.0, 0.0]], dtype=torch.float64)
    y = torch.tensor([0])
    assert loss(f, y).item() == pytest.approx(ref_cosine_softmax(f, y, loss.W, 30.0, "arcface", 0.5), rel=1e-9)


def test_cosine_softmax_has_parameters_and_checks_labels():
    loss = build("cosface")
    assert sum(p.numel() for p in loss.parameters()) == 4 * 6
    f, _ = make_batch(p=4, k=3, seed=0)
    with pytest.raises(ValueError, match="num_classes"):
        loss(f, torch.full((12,), 4))


def test_contrastive_vs_loop():
    f, y = make_batch(p=4, k=4, seed=2)
    for pm, nm in ((0.0, 1.0), (0.2, 1.3)):
        assert get_loss("contrastive", pos_margin=pm, neg_margin=nm)(f, y).item() == pytest.approx(
            ref_contrastive(f, y, pm, nm), rel=1e-9
        )


@pytest.mark.parametrize("name", NORMALIZED_LOSSES)
def test_every_loss_is_scale_invariant_in_value(name):
    f, y = make_batch(p=4, k=LOSS_SPECS[name].k, seed=3)
    loss = build(name)
    assert loss(7.3 * f, y).item() == pytest.approx(loss(f, y).item(), rel=1e-9)


# ---------------------------------------------------------------------------- triplet_violations
def ref_violations(f, y):
    x, y = unit(f), y.tolist()
    bad = total = 0
    for a in range(len(y)):
        for p in range(len(y)):
            if p == a or y[p] != y[a]:
                continue
            for n in range(len(y)):
                if y[n] != y[a]:
                    total += 1
                    bad += np.sum((x[a] - x[n]) ** 2) <= np.sum((x[a] - x[p]) ** 2)
    return bad / total


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_triplet_violations_vs_bruteforce(seed):
    f, y = make_batch(p=5, k=3, seed=seed)
    assert triplet_violations(f, y) == pytest.approx(ref_violations(f, y), abs=1e-12)


def test_triplet_violations_extremes_and_large_batch():
    y = torch.arange(4).repeat_interleave(3)
    centers = torch.eye(4, 5, dtype=torch.float64)
    tight = centers[y] + 0.01 * torch.randn(12, 5, dtype=torch.float64)
    assert triplet_violations(tight, y) == 0.0
    assert math.isnan(triplet_violations(tight, torch.zeros(12, dtype=torch.long)))
    # B = 512 runs without a B^3 tensor
    big = torch.randn(512, 16)
    yb = torch.arange(128).repeat_interleave(4)
    v = triplet_violations(big, yb)
    assert 0.3 < v < 0.7  # random directions: about half the triplets are violated


# ------------------------------------------------------------------------------------ bad input
def test_names_and_specs():
    assert LOSS_NAMES == ("triplet", "semihard", "npair", "npair_ip_l2", "npair_ip", "ms", "tml", "ntxent",
                          "supcon", "normface", "cosface", "arcface", "contrastive")
    assert set(LOSS_NAMES) - set(NORMALIZED_LOSSES) == {"npair_ip_l2", "npair_ip"}
    assert {n: LOSS_SPECS[n].k for n in ("triplet", "semihard", "npair", "ms", "tml")} == {
        "triplet": 3, "semihard": 3, "npair": 2, "ms": 5, "tml": 4}
    assert LOSS_SPECS["ms"].defaults == {"alpha": 2.0, "beta": 40.0, "base": 0.5, "epsilon": 0.1}
    for spec in LOSS_SPECS.values():
        assert spec.cls.__doc__ and spec.description and spec.source


def test_unknown_name_lists_valid_names():
    with pytest.raises(ValueError, match="triplet, semihard, npair"):
        get_loss("tripplet")


@pytest.mark.parametrize(
    "name,hp,word",
    [
        ("triplet", {"margin": -0.1}, "margin"),
        ("triplet", {"margin": "1"}, "margin"),
        ("triplet", {"margin": float("nan")}, "margin"),
        ("triplet", {"scale": 2.0}, "scale"),
        ("npair", {"scale": 0.0}, "scale"),
        ("ms", {"base": 2.0}, "base"),
        ("ms", {"alpha": True}, "alpha"),
        ("tml", {"margin": 2.0}, "margin"),
        ("ntxent", {"temperature": -1}, "temperature"),
        ("supcon", {"temperature": 0.0}, "temperature"),
        ("npair_ip_l2", {"l2_reg": -0.1}, "l2_reg"),
        ("npair_ip", {"scale": 25.0}, "scale"),
        ("cosface", {"num_classes": 3}, "embedding_size"),
        ("cosface", {"num_classes": 3.0, "embedding_size": 4}, "num_classes"),
        ("arcface", {"num_classes": 3, "embedding_size": 4, "margin": 4.0}, "margin"),
        ("contrastive", {"pos_margin": 1.0, "neg_margin": 0.5}, "neg_margin"),
        ("triplet", {"num_classes": 3}, "num_classes"),
    ],
)
def test_bad_hyperparameters_raise(name, hp, word):
    with pytest.raises(ValueError, match=word) as err:
        get_loss(name, **hp)
    assert "alid keys" in str(err.value)


def test_bad_inputs_raise():
    loss = get_loss("triplet")
    with pytest.raises(ValueError, match="2-D"):
        loss(torch.randn(4), torch.arange(4))
    with pytest.raises(ValueError, match="labels"):
        loss(torch.randn(4, 3), torch.arange(3))
    with pytest.raises(ValueError, match="integer"):
        loss(torch.randn(4, 3), torch.zeros(4))


# ------------------------------------------------------------------ the N-pair dispute: inner products
def ref_npair_ip(f, y, lam):
    """Sohn's N-pair-mc on raw inner products, written as log(1 + sum_j exp(f_i.f_j+ - f_i.f_i+)), plus TF's
    npairs_loss penalty lam/4 (mean ||f_a||^2 + mean ||f_p||^2)."""
    x, y = f.detach().numpy(), y.tolist()
    classes = sorted(set(y))
    pairs = [[i for i in range(len(y)) if y[i] == c][:2] for c in classes]
    pairs = [pr for pr in pairs if len(pr) == 2]
    anchors = [x[i] for i, _ in pairs]
    positives = [x[j] for _, j in pairs]
    total = 0.0
    for i, a in enumerate(anchors):
        total += math.log(1 + sum(math.exp(float(a @ p) - float(a @ positives[i]))
                                  for j, p in enumerate(positives) if j != i))
    reg = np.mean([a @ a for a in anchors]) + np.mean([p @ p for p in positives])
    return total / len(pairs) + lam / 4 * reg


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_inner_product_npair_vs_loop(seed):
    f, y = make_batch(p=5, k=2, seed=seed)
    f = f / 2  # raw inner products up to ~16: exp() stays moderate in the loop
    assert get_loss("npair_ip_l2")(f, y).item() == pytest.approx(ref_npair_ip(f, y, 0.002), rel=1e-9)
    assert get_loss("npair_ip")(f, y).item() == pytest.approx(ref_npair_ip(f, y, 0.0), rel=1e-9)
    assert get_loss("npair_ip_l2", l2_reg=0.5)(f, y).item() == pytest.approx(ref_npair_ip(f, y, 0.5), rel=1e-9)
    f3, y3 = make_batch(p=4, k=3, seed=seed)  # more than two per class: only the first two are used
    assert get_loss("npair_ip_l2")(f3, y3).item() == pytest.approx(ref_npair_ip(f3, y3, 0.002), rel=1e-9)


@pytest.mark.parametrize("seed", [0, 1])
def test_inner_product_npair_vs_pml(seed):
    """PML's NPairsLoss on unnormalized dot products; its LpRegularizer(power=2) averages ||f||^2 over the
    whole batch, which equals TF's lam/4 (mean_a + mean_p) with weight lam/2 when K = 2."""
    f, y = make_batch(p=6, k=2, seed=seed)
    dot = pml_distances.DotProductSimilarity(normalize_embeddings=False)
    bare = pml_losses.NPairsLoss(distance=dot)(f, y).item()
    assert get_loss("npair_ip")(f, y).item() == pytest.approx(bare, rel=1e-9)
    from pytorch_metric_learning.regularizers import LpRegularizer
    reg = pml_losses.NPairsLoss(distance=dot, embedding_regularizer=LpRegularizer(power=2),
                                embedding_reg_weight=0.002 / 2)(f, y).item()
    assert get_loss("npair_ip_l2")(f, y).item() == pytest.approx(reg, rel=1e-9)
    assert reg > bare  # the penalty is not vacuous


def test_inner_product_npair_reads_the_norms():
    f, y = make_batch(p=4, k=2, seed=5)
    loss = get_loss("npair_ip")
    assert abs(loss(3.0 * f, y).item() - loss(f, y).item()) > 1e-3
    # normalizing first and scaling by sqrt(s) gives the paper's normalized N-pair with scale s
    x = torch.nn.functional.normalize(f, dim=1)
    assert loss(5.0 * x, y).item() == pytest.approx(get_loss("npair", scale=25.0)(f, y).item(), rel=1e-9)


def test_inner_product_npair_gradient_vs_hand_formula():
    """d/df of CE over logits a_i.p_j: dL/da_i = (1/N) sum_j (softmax_ij - [i=j]) p_j, dL/dp_j = (1/N)
    sum_i (softmax_ij - [i=j]) a_i; the penalty adds lam/2 f / N_pairs to every anchor and positive."""
    f, y = make_batch(p=4, k=2, seed=6)
    lam = 0.3
    fr = f.clone().requires_grad_()
    (g,) = torch.autograd.grad(get_loss("npair_ip_l2", l2_reg=lam)(fr, y), fr)
    a_idx = [int(torch.nonzero(y == c)[0]) for c in range(4)]
    p_idx = [int(torch.nonzero(y == c)[1]) for c in range(4)]
    a, p = f[a_idx], f[p_idx]
    s = torch.softmax(a @ p.T, dim=1) - torch.eye(4, dtype=f.dtype)
    expected = torch.zeros_like(f)
    expected[a_idx] = s @ p / 4 + lam / 2 * a / 4
    expected[p_idx] = s.T @ a / 4 + lam / 2 * p / 4
    torch.testing.assert_close(g, expected, rtol=1e-10, atol=1e-12)


# ------------------------------------------------------------------------- supervised contrastive
def ref_supcon(f, y, t):
    """Khosla et al. Eq. 2 (L_out), explicit loops: per anchor, the mean over its positives of
    -log(exp(z_i.z_p/t) / sum_{a != i} exp(z_i.z_a/t)); mean over anchors with a positive."""
    x, y = unit(f), y.tolist()
    per_anchor = []
    for i in range(len(y)):
        positives = [p for p in range(len(y)) if p != i and y[p] == y[i]]
        if not positives:
            continue
        denom = sum(math.exp(float(x[i] @ x[a]) / t) for a in range(len(y)) if a != i)
        per_anchor.append(np.mean([-math.log(math.exp(float(x[i] @ x[p]) / t) / denom) for p in positives]))
    return float(np.mean(per_anchor))


@pytest.mark.parametrize("k", [2, 3, 4])
def test_supcon_vs_loop_and_pml(k):
    f, y = make_batch(p=4, k=k, seed=k)
    for t in (0.1, 0.5):
        ours = get_loss("supcon", temperature=t)(f, y).item()
        assert ours == pytest.approx(ref_supcon(f, y, t), rel=1e-9)
        assert ours == pytest.approx(pml_losses.SupConLoss(temperature=t)(f, y).item(), rel=1e-9)


def test_supcon_equals_ntxent_only_for_two_views():
    f, y = make_batch(p=5, k=2, seed=1)
    assert get_loss("supcon", temperature=0.5)(f, y).item() == pytest.approx(get_loss("ntxent")(f, y).item(), rel=1e-9)
    f, y = make_batch(p=5, k=4, seed=1)
    assert abs(get_loss("supcon", temperature=0.5)(f, y).item() - get_loss("ntxent")(f, y).item()) > 1e-3


def test_supcon_unbalanced_with_singletons():
    f, y = make_batch(p=4, k=3, seed=8)
    y = torch.tensor([0, 0, 0, 0, 1, 1, 2, 3, 3, 3, 3, 4])  # two singletons: not anchors, still in denominators
    ours = get_loss("supcon")(f, y).item()
    assert ours == pytest.approx(ref_supcon(f, y, 0.1), rel=1e-9)
    assert ours == pytest.approx(pml_losses.SupConLoss(temperature=0.1)(f, y).item(), rel=1e-9)
