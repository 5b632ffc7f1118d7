"""Linear probe: how linearly separable are the test classes in a frozen embedding?

SimCLR is usually judged by a linear classifier trained on frozen features (rebuttal Table 1: top-1 of a
linear classifier on CIFAR-10). On the glyph benchmark the classes of the test split are never seen in
training, so the probe is fitted on part of each test class and scored on the rest:

* :func:`stratified_split`: per class, a seeded ``train_fraction`` of its samples (at least one, and at
  least one left for testing) go to the probe's training part;
* :func:`fit_softmax_regression`: multinomial logistic regression (softmax + cross-entropy, an l2 penalty
  on the weights, unpenalized biases) fitted to convergence by full-batch L-BFGS in float64; the objective
  is scikit-learn's ``LogisticRegression(C)`` divided by ``C n`` (same optimum; the tests compare);
* :func:`linear_probe`: both, on l2-normalized embeddings (what retrieval uses), returning accuracies in
  percent.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

__all__ = ["stratified_split", "fit_softmax_regression", "linear_probe"]


def _check(embeddings, labels):
    if not isinstance(embeddings, torch.Tensor) or embeddings.ndim != 2 or len(embeddings) < 2:
        shape = tuple(embeddings.shape) if isinstance(embeddings, torch.Tensor) else type(embeddings).__name__
        raise ValueError(f"embeddings must be a 2-D tensor (N, D) with N >= 2; got {shape}")
    if not isinstance(labels, torch.Tensor) or labels.shape != (len(embeddings),) or labels.is_floating_point():
        shape = tuple(labels.shape) if isinstance(labels, torch.Tensor) else type(labels).__name__
        raise ValueError(f"labels must be an integer tensor with one label per embedding ({len(embeddings)}); got {shape}")


def stratified_split(labels: torch.Tensor, train_fraction: float = 0.5, seed: int = 0):
    """(train indices, test indices): per class ``round(train_fraction * n_c)`` samples, clipped to
    [1, n_c - 1], drawn with ``numpy.random.default_rng(seed)``. Classes with a single sample are left out
    of both (they cannot be both fitted and scored)."""
    if not (isinstance(train_fraction, (int, float)) and 0 < train_fraction < 1):
        raise ValueError(f"train_fraction={train_fraction!r} is not valid; expected a number in (0, 1)")
    lab = labels.cpu().numpy()
    rng = np.random.default_rng(seed)
    train, test = [], []
    for c in np.unique(lab):
        idx = np.flatnonzero(lab == c)
        if len(idx) < 2:
            continue
        idx = rng.permutation(idx)
        k = int(np.clip(round(train_fraction * len(idx)), 1, len(idx) - 1))
        train.append(idx[:k])
        test.append(idx[k:])
    if not train:
        raise ValueError("no class has two or more samples: nothing to fit and score")
    return torch.as_tensor(np.sort(np.concatenate(train))), torch.as_tensor(np.sort(np.concatenate(test)))


def fit_softmax_regression(x: torch.Tensor, y: torch.Tensor, num_classes: int, l2: float = 1e-4,
                           max_iter: int = 500, tol: float = 1e-10):
    """Weights W (C x D) and biases b (C) minimising ``mean CE(x W^T + b, y) + l2/2 ||W||^2`` (L-BFGS,
    float64, strong Wolfe line search). Deterministic."""
    if not (isinstance(l2, (int, float)) and l2 > 0):
        raise ValueError(f"l2={l2!r} is not valid; expected a number > 0 (the problem needs it to have an optimum)")
    x = x.detach().to(torch.float64).cpu()
    y = y.detach().cpu().long()
    w = torch.zeros(num_classes, x.shape[1], dtype=torch.float64, requires_grad=True)
    b = torch.zeros(num_classes, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([w, b], lr=1, max_iter=max_iter, tolerance_grad=tol, tolerance_change=tol * 1e-3,
                            history_size=20, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = F.cross_entropy(x @ w.T + b, y) + 0.5 * l2 * w.pow(2).sum()
        loss.backward()
        return loss

    opt.step(closure)
    return w.detach(), b.detach()


def linear_probe(embeddings: torch.Tensor, labels: torch.Tensor, train_fraction: float = 0.5, seed: int = 0,
                 l2: float = 1e-4) -> dict:
    """Fit a softmax regression on a class-stratified part of the (l2-normalized) embeddings and score it on
    the rest. Returns ``{"probe_top1": test accuracy %, "probe_train_top1": training accuracy %,
    "probe_train_n", "probe_test_n", "probe_classes"}``."""
    _check(embeddings, labels)
    x = F.normalize(embeddings.detach().to(torch.float64).cpu(), dim=1)
    lab = labels.cpu()
    tr, te = stratified_split(lab, train_fraction, seed)
    classes, y = torch.unique(lab, return_inverse=True)
    w, b = fit_softmax_regression(x[tr], y[tr], len(classes), l2=l2)

    def accuracy(idx):
        return 100.0 * float(((x[idx] @ w.T + b).argmax(1) == y[idx]).double().mean())

    return {"probe_top1": accuracy(te), "probe_train_top1": accuracy(tr), "probe_train_n": int(len(tr)),
            "probe_test_n": int(len(te)), "probe_classes": int(len(torch.unique(y[tr])))}
