"""The linear probe: split rules, the fit against scikit-learn, accuracy on data with a known answer."""
import numpy as np
import pytest
import torch
from sklearn.linear_model import LogisticRegression

from sec_lib.metrics.probe import fit_softmax_regression, linear_probe, stratified_split


def test_split_is_stratified_disjoint_and_seeded():
    labels = torch.tensor([0] * 10 + [1] * 5 + [2] * 2 + [3])
    tr, te = stratified_split(labels, 0.5, seed=1)
    assert not set(tr.tolist()) & set(te.tolist())
    assert sorted(tr.tolist() + te.tolist()) == list(range(17))  # the singleton class 3 is left out
    counts = {c: int((labels[tr] == c).sum()) for c in range(3)}
    assert counts == {0: 5, 1: 2, 2: 1}  # round(2.5) = 2 (banker's rounding), clipped to [1, n - 1]
    tr2, _ = stratified_split(labels, 0.5, seed=1)
    tr3, _ = stratified_split(labels, 0.5, seed=2)
    assert torch.equal(tr, tr2) and not torch.equal(tr, tr3)
    with pytest.raises(ValueError, match="train_fraction"):
        stratified_split(labels, 1.0)


def test_fit_matches_sklearn_logistic_regression():
    rng = np.random.default_rng(0)
    n, d, c = 120, 5, 4
    x = rng.normal(size=(n, d)) + rng.normal(size=(c, d))[np.arange(n) % c]
    y = np.arange(n) % c
    C = 2.0
    sk = LogisticRegression(C=C, tol=1e-12, max_iter=10000).fit(x, y)
    w, b = fit_softmax_regression(torch.tensor(x), torch.tensor(y), c, l2=1.0 / (C * n))
    ours = torch.softmax(torch.tensor(x) @ w.T + b, dim=1).numpy()
    np.testing.assert_allclose(ours, sk.predict_proba(x), atol=1e-5)
    np.testing.assert_allclose(w.numpy(), sk.coef_, atol=1e-3)


def test_probe_accuracy_on_separable_and_on_random_embeddings():
    g = torch.Generator().manual_seed(0)
    centers = torch.nn.functional.normalize(torch.randn(10, 16, generator=g), dim=1)
    labels = torch.arange(10).repeat_interleave(12)
    tight = centers[labels] * 3 + 0.02 * torch.randn(120, 16, generator=g)
    assert linear_probe(tight, labels, l2=1e-3)["probe_top1"] == 100.0
    noise = torch.randn(120, 16, generator=g)
    out = linear_probe(noise, labels, l2=1e-3)
    assert out["probe_top1"] < 35  # chance is 10 %
    assert out["probe_train_n"] == 60 and out["probe_test_n"] == 60 and out["probe_classes"] == 10
    with pytest.raises(ValueError, match="labels"):
        linear_probe(noise, labels[:-1])
