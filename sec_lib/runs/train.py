"""One readable, instrumented training loop.

``train(TrainConfig(...))`` trains an embedding network with a metric loss (optionally plus SEC)
and returns a :class:`RunResult`: final test metrics plus tidy tables of what happened at every
step. The loop reads top to bottom; instrumentation lives in small helpers below it.

What each step records (table ``steps``):

* ``loss_metric``, ``loss_sec``: the two parts of the objective;
* ``norm_mean``, ``norm_var``, ``mu``: batch statistics of the raw embedding norms ‖f_i‖ and the
  μ that SEC used (NaN without SEC);
* ``pos_cos``, ``neg_cos``: mean cosine of positive / negative pairs in the batch;
* ``violations``: fraction of (a, p, n) triplets with d_an ≤ d_ap;
* ``grad_slope``, ``grad_r2``: log-log fit of the per-sample ‖∂L_metric/∂f_i‖ against ‖f_i‖
  (the theory predicts slope −1 at fixed directions), with gradients from autograd;
* ``grad_norm_cv``: coefficient of variation of ‖∂L_metric/∂f_i‖ in the batch;
  (the batch statistics from ``norm_mean`` to here, every ``stats_every`` steps, the first and the last step
  included; NaN at the other steps: a run's trajectory is the same whatever ``stats_every`` is);
* ``dtheta_mean``, ``dtheta_std``, ``dtheta_cv`` (every ``dtheta_every`` steps): the angle each
  sample's embedding turned during the step, measured by re-embedding the same batch after the
  update;
* ``step_time``: wall seconds of the step (forward, backward, update; instrumentation included).

"Raw embedding" means what SEC acts on: the network output before l2-normalisation (for the
``normalize`` head, the features before its normalising layer).

All of this instrumentation is a :class:`sec_lib.monitor.NormMonitor` (built by :func:`make_monitor`), the
monitor anyone can attach to their own loop: the loop hands it the raw embeddings, the metric loss and the
labels before the backward pass (``observe``) and the model after the update (``after_step``), and takes the
step's measures back (``row``); its per-sample rows at the grad-scatter steps are the ``grad_scatter`` table.
"""
from __future__ import annotations

import functools
import itertools
import math
import time
from typing import Callable

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from .. import kernels
from .. import metrics as metrics_mod
from ..data import PKSampler, get_dataset
from ..data.augment import ViewBatches
from ..data.ondevice import on_device
from ..data.splits import QueryGallery, holdout_split
from ..losses import LOSS_SPECS, get_loss
from ..models import build_model
from ..metrics.probe import linear_probe
from ..monitor import MonitorConfig, NormMonitor, measure_batch
from ..sec import CenterInvariantPenalty, SphericalEmbeddingConstraint
from ..threads import torch_threads
from .pinned import holds_pin, train_in_child
from .config import INSTRUMENT_COLUMNS, TABLE_COLUMNS, RunResult, TrainConfig, weights_path, with_schema


# ---------------------------------------------------------------------------------------------
# The loop
# ---------------------------------------------------------------------------------------------

def train(cfg: TrainConfig, progress: Callable[[int, int], None] | None = None) -> RunResult:
    """Train one model as ``cfg`` says and return its RunResult (status 'failed' on a NaN/inf loss).

    The run uses exactly ``cfg.num_threads`` threads (torch and the OpenMP/BLAS pools), wherever it
    is called from (a sweep worker, the runner in-process, a notebook), and restores the caller's
    setting afterwards: the thread count changes the numbers, so it is part of the run's identity.

    The pinned kernels must be in force (the reproducibility contract, :mod:`sec_lib.kernels`). Where this process
    cannot hold the pin (torch or numpy was imported before ``sec_lib``), the run trains in a child process started
    under the pin (:mod:`sec_lib.runs.pinned`), which says so in one line: the same bits, never an unpinned run.
    """
    cfg.validate()
    ok, why = holds_pin()
    if not ok:
        return train_in_child(cfg, progress, why)
    with torch_threads(cfg.num_threads):
        steps = training_steps(cfg, progress)
        while True:
            try:
                next(steps)
            except StopIteration as done:
                return done.value


def training_steps(cfg: TrainConfig, progress=None):
    """The loop, as a generator that yields after every step and returns the RunResult: :func:`train` runs it
    to the end; :func:`sec_lib.runs.many.train_many` interleaves several on one device."""
    t_start = time.perf_counter()
    device = torch.device(cfg.device)
    torch.manual_seed(cfg.seed)
    np_rng = np.random.default_rng(cfg.seed)

    train_ds, test_ds = load_data(cfg)
    model = build_model(cfg.model, head=cfg.head, embed_dim=cfg.embed_dim, **model_kwargs(cfg, train_ds)).to(device)
    if cfg.channels_last:
        model = model.to(memory_format=torch.channels_last)
    loss_fn = make_loss(cfg, train_ds).to(device)
    if cfg.eta == 0:
        sec = None
    elif cfg.penalty == "cir":
        sec = CenterInvariantPenalty(cfg.eta).to(device)
    else:
        sec = SphericalEmbeddingConstraint(eta=cfg.eta, mu=cfg.mu, momentum=cfg.momentum,
                                           relative=cfg.relative).to(device)
    opt, sched = make_optimizer(cfg, model, loss_fn)
    batches = batch_source(cfg, train_ds, device)
    forward = Forward(cfg, device)                      # autocast and memory format, when the config asks
    loss_input = 0 if LOSS_SPECS[cfg.loss].normalized else 1    # losses that read norms get the raw embedding
    tracked_idx = torch.as_tensor(np_rng.choice(len(train_ds), size=min(cfg.track_samples, len(train_ds)), replace=False))
    monitor = make_monitor(cfg)
    log = Recorder(monitor, deferred=cfg.read_every > 1)
    if cfg.track_samples:
        tracked_x = get_batch(train_ds, tracked_idx, device)[0]      # on the device once, for every tracked step
        log.add_tracked(0, tracked_idx, forward.norms(model, tracked_x))
    if cfg.eval_every:
        log.evals.append({"step": 0, **evaluate_model(model, test_ds, cfg, device, final=False)[0]})

    for step in range(1, cfg.iterations + 1):
        log.start_step()
        model.train()
        x, y = next(batches)
        emb, raw = forward(model, x)                      # raw: what SEC constrains (pre-normalisation)
        loss_metric = loss_fn((emb, raw)[loss_input], y)
        loss_sec = sec(raw) if sec is not None else torch.zeros((), device=device)
        log.add_losses(step, loss_metric, loss_sec, sec.last_mu_tensor if sec is not None else None)
        reads = step % cfg.read_every == 0 or step == cfg.iterations or bool(cfg.eval_every and
                                                                             step % cfg.eval_every == 0)
        if reads and (bad := log.read_losses()) is not None:    # every loss since the last read, one host read
            return failed(cfg, log, bad, t_start)
        if monitor is not None:                           # gradient of the metric loss alone, SEC's kept out
            monitor.observe(raw, loss=loss_metric, labels=y, step=step)
        opt.zero_grad(set_to_none=True)
        (loss_metric + loss_sec).backward()
        opt.step()
        if sched is not None:
            sched.step()
        if monitor is not None:                           # Δθ: the same batch re-embedded after the update
            monitor.after_step(model, x, embed=forward.prenorm)
        if cfg.track_samples and step % cfg.track_every == 0:
            log.add_tracked(step, tracked_idx, forward.norms(model, tracked_x))
        if reads:
            log.read_steps()                              # the step rows since the last read, one host read
        if step == cfg.iterations:
            scores, test_emb, test_labels = evaluate_model(model, test_ds, cfg, device, final=True)
            log.evals.append({"step": step, **scores})
        elif cfg.eval_every and step % cfg.eval_every == 0:
            log.evals.append({"step": step, **evaluate_model(model, test_ds, cfg, device, final=False)[0]})
        if progress is not None:
            progress(step, cfg.iterations)
        yield step

    return finish(cfg, model, train_ds, test_emb, test_labels, log, device, t_start)


# ---------------------------------------------------------------------------------------------
# Building blocks
# ---------------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=8)
def _cached_dataset(name, split, root, image_size, max_classes, extra):
    kwargs = dict(extra)
    if name != "toy":
        kwargs.setdefault("image_size", image_size)
    if max_classes is not None:
        kwargs["max_classes"] = max_classes
    return get_dataset(name, split, root=root, **kwargs)


def load_data(cfg: TrainConfig):
    """Train and evaluation datasets (zero-shot split by class); cached per process.

    With ``holdout_classes`` = h > 0 the last h training classes become the evaluation set (a
    validation split: the test classes are not touched) and training uses the others.
    """
    extra = tuple(sorted(cfg.data_kwargs.items()))
    train_ds = _cached_dataset(cfg.dataset, "train", cfg.data_root, cfg.image_size, cfg.train_classes, extra)
    if cfg.holdout_classes:
        return holdout_split(train_ds, cfg.holdout_classes)
    if cfg.dataset == "inshop":       # the In-Shop protocol: queries retrieve from the gallery
        return train_ds, QueryGallery(*(_cached_dataset("inshop", s, cfg.data_root, cfg.image_size, cfg.test_classes,
                                                        extra) for s in ("query", "gallery")))
    test_ds = _cached_dataset(cfg.dataset, "test", cfg.data_root, cfg.image_size, cfg.test_classes, extra)
    return train_ds, test_ds


def model_kwargs(cfg: TrainConfig, ds) -> dict:
    if cfg.model == "mlp":
        return {"in_dim": int(ds.x.shape[1]), "width": cfg.width}
    sample = ds[0][0]
    return {"in_channels": int(sample.shape[0]), "image_size": cfg.image_size, "width": cfg.width,
            "pretrained": weights_path(cfg.pretrained), "freeze_bn": cfg.freeze_bn}


def make_loss(cfg: TrainConfig, ds):
    kwargs = dict(cfg.loss_kwargs)
    required = LOSS_SPECS[cfg.loss].required          # cosine-softmax losses own class weights
    if "num_classes" in required:
        kwargs.setdefault("num_classes", int(ds.num_classes))
    if "embedding_size" in required:
        kwargs.setdefault("embedding_size", cfg.embed_dim)
    return get_loss(cfg.loss, **kwargs)


def batchnorm_parameters(*modules) -> set:
    """The ids of the parameters of every BatchNorm layer (1-d, 2-d, 3-d, sync) inside ``modules``: the ones weight
    decay leaves alone, as the authors' ``config.py`` does."""
    return {id(p) for m in modules for sub in m.modules() if isinstance(sub, torch.nn.modules.batchnorm._NormBase)
            for p in sub.parameters(recurse=False)}


def decay_groups(groups: list, skip: set, weight_decay: float) -> list:
    """``groups`` with weight decay on every parameter but those in ``skip`` (BatchNorm's): each group split into its
    decayed part (``weight_decay``) and its undecayed part (0), in that order, empty parts dropped. With
    ``weight_decay`` 0 the groups are returned as they are, so a run without weight decay builds the optimizer it
    always built."""
    if not weight_decay:
        return groups
    out = []
    for g in groups:
        for wd, params in ((weight_decay, [p for p in g["params"] if id(p) not in skip]),
                           (0.0, [p for p in g["params"] if id(p) in skip])):
            if params:
                out.append({**g, "params": params, "weight_decay": wd})
    return out


def make_optimizer(cfg: TrainConfig, model, loss_fn):
    """Two parameter groups, backbone (lr) and head + loss parameters (lr_head), as in the paper. Weight decay (Adam's
    coupled form for ``adam``) applies to every parameter except the BatchNorm layers', as in the authors' code
    (:func:`decay_groups`)."""
    head_params = list(model.head.parameters()) + list(loss_fn.parameters())
    head_ids = {id(p) for p in head_params}
    backbone = [p for p in model.parameters() if id(p) not in head_ids and p.requires_grad]
    groups = [{"params": backbone, "lr": cfg.lr},
              {"params": [p for p in head_params if p.requires_grad], "lr": cfg.lr_head or cfg.lr}]
    groups = decay_groups([g for g in groups if g["params"]], batchnorm_parameters(model, loss_fn), cfg.weight_decay)
    if cfg.optimizer == "adam":
        opt = torch.optim.Adam(groups, weight_decay=cfg.weight_decay, **kernels.adam_kwargs(cfg.device))
    elif cfg.optimizer == "adamw":
        opt = torch.optim.AdamW(groups, weight_decay=cfg.weight_decay, **kernels.adam_kwargs(cfg.device))
    else:
        opt = torch.optim.SGD(groups, momentum=cfg.sgd_momentum, weight_decay=cfg.weight_decay)
    if cfg.schedule == "step" and cfg.lr_milestones:
        sched = torch.optim.lr_scheduler.MultiStepLR(opt, list(cfg.lr_milestones), gamma=cfg.lr_decay)
    elif cfg.schedule == "cosine":
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=cfg.schedule_iterations or cfg.iterations)
    else:
        sched = None
    return opt, sched


def batch_source(cfg: TrainConfig, ds, device: torch.device):
    """The run's training batches ``(x, y)``, endless. On the CPU, P x K batches from :class:`PKSampler`, gathered
    from the dataset and moved to ``device`` one at a time (SimCLR-style views: :class:`ViewBatches`). Off the CPU,
    for a dataset held as one tensor (the glyph pool), the same batches with nothing copied per step: the pool is put
    on the device once (:func:`on_device`), every batch's indices are drawn up front (the sampler's own sequence,
    uploaded once), and each batch is gathered there."""
    if cfg.views:                     # off the CPU its images and random numbers are on the device too
        return iter(ViewBatches.from_config(cfg, ds, device))
    sampler = iter(PKSampler(ds.labels, p=cfg.batch_size // cfg.k, k=cfg.k, seed=cfg.seed))
    if device.type == "cpu" or not hasattr(ds, "x"):
        return (get_batch(ds, next(sampler), device) for _ in itertools.count())
    order = torch.as_tensor(np.stack([next(sampler) for _ in range(cfg.iterations)])).to(device)
    x, labels = on_device(ds, device)
    return ((x[idx], labels[idx]) for idx in order)


class Forward:
    """The network's forward pass as the config asks: under bfloat16 autocast (``autocast='bf16'``; the outputs
    are cast back to float32, so the losses, SEC and the monitor work in float32) and with channels-last inputs
    (``channels_last``). At the defaults it is ``model.forward_with_prenorm(x)`` unchanged."""

    def __init__(self, cfg: TrainConfig, device: torch.device):
        self.device_type = device.type
        self.bf16 = cfg.autocast == "bf16"
        self.channels_last = cfg.channels_last

    def __call__(self, model, x):
        if self.channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        if not self.bf16:
            return model.forward_with_prenorm(x)
        with torch.autocast(self.device_type, dtype=torch.bfloat16):
            emb, raw = model.forward_with_prenorm(x)
        return emb.float(), raw.float()

    def prenorm(self, model, x) -> torch.Tensor:
        """The raw embeddings of ``x`` (the monitor's Δθ re-embedding)."""
        return self(model, x)[1]

    @torch.no_grad()
    def norms(self, model, x) -> torch.Tensor:
        """Raw norms of ``x`` in eval mode, on the device (the tracked samples; read with the step rows)."""
        model.eval()
        return self(model, x)[1].float().norm(dim=1)


def get_batch(ds, idx, device):
    idx = torch.as_tensor(idx)
    if hasattr(ds, "x"):
        return ds.x[idx].to(device), ds.labels[idx].to(device)
    xs, ys = zip(*(ds[int(i)] for i in idx))
    return torch.stack(xs).to(device), torch.as_tensor(ys).to(device)


@torch.no_grad()
def embed(model, ds, device, batch_size: int = 500, indices=None):
    """Raw embeddings (pre-normalisation) of a dataset in eval mode, and their labels."""
    model.eval()
    idx = torch.arange(len(ds)) if indices is None else torch.as_tensor(indices)
    out = []
    for chunk in idx.split(batch_size):
        x, _ = get_batch(ds, chunk, device)
        out.append(model.forward_with_prenorm(x)[1].float().cpu())
    return torch.cat(out), ds.labels[idx]


def evaluate_model(model, ds, cfg: TrainConfig, device, final: bool):
    """Test metrics (percent) and the raw test embeddings they came from."""
    if isinstance(ds, QueryGallery):
        (qe, ql), (ge, gl) = embed(model, ds.query, device), embed(model, ds.gallery, device)
        recall = metrics_mod.recall_at_k(qe, ql, ge, gl, ks=tuple(cfg.eval_ks))
        return {f"R@{k}": v for k, v in recall.items()}, torch.cat([qe, ge]), torch.cat([ql, gl])
    emb, labels = embed(model, ds, device)
    clustering = final or cfg.eval_clustering == "all"
    scores = metrics_mod.evaluate(emb, labels, ks=tuple(cfg.eval_ks), seed=cfg.seed, clustering=clustering,
                                  n_init=cfg.kmeans_n_init, kmeans_workers=cfg.kmeans_workers)
    return scores, emb, labels


def make_monitor(cfg: TrainConfig) -> NormMonitor | None:
    """The run's instrumentation (None without ``cfg.instrument``): batch statistics every ``stats_every`` steps
    and at the first, the last and the grad-scatter steps, Δθ every ``dtheta_every`` steps, per-sample rows at
    the grad-scatter steps."""
    if not cfg.instrument:
        return None
    scatter = grad_scatter_steps(cfg.iterations)
    return NormMonitor(MonitorConfig(every=cfg.stats_every, dtheta_every=cfg.dtheta_every,
                                     extra_steps=frozenset({1, cfg.iterations}) | scatter, sample_steps=scatter))


def step_columns(measures: dict) -> dict:
    """The monitor's measures of one step that are columns of the steps table, in the table's order."""
    return {c: measures[c] for c in INSTRUMENT_COLUMNS if c in measures}


def batch_stats(raw: torch.Tensor, y: torch.Tensor, grad: torch.Tensor) -> dict:
    """Norm, cosine, violation and gradient-vs-norm statistics of one batch (the monitor's measures)."""
    return step_columns(measure_batch(raw, grad, y)[0])


def grad_scatter_steps(iterations: int) -> set[int]:
    """Steps at which every sample's (norm, grad norm) pair is kept: start, middle and end."""
    return {1, max(1, iterations // 2), iterations}


class Recorder:
    """Accumulates the per-step rows, tracked norms and evaluations of one run; the grad scatter is the
    monitor's per-sample rows.

    The step values stay on the device as tensors until a read: :meth:`read_losses` (before the update of a read
    step: every loss since the last read, in one transfer, checked for finiteness) and :meth:`read_steps` (after
    it: the monitor's rows and the tracked norms, then the step rows). Reading at every step is the plain loop;
    reading every k steps gives the same rows with the host out of the device's way in between."""

    def __init__(self, monitor: NormMonitor | None = None, deferred: bool = False):
        self.steps, self.evals, self.tracked = [], [], []
        self.monitor = monitor
        if monitor is not None and deferred:
            monitor.defer()
        self._losses: list = []          # (step, device tensor: loss_metric, loss_sec, mu, their sum)
        self._read: list = []            # (step, loss_metric, loss_sec, mu) read to the host, rows not yet made
        self._tracked: list = []         # (step, idx, device norms)
        self._t0: float | None = None

    def start_step(self):
        if self._t0 is None:             # the first step since the last read: the chunk's clock starts
            self._t0 = time.perf_counter()

    def add_losses(self, step: int, loss_metric, loss_sec, mu):
        mu = torch.full((), math.nan, device=loss_metric.device) if mu is None else mu
        metric, sec = loss_metric.detach(), loss_sec.detach()
        self._losses.append((step, torch.stack([metric.float(), sec.float(), mu.to(metric.device).float(),
                                                (metric + sec).float()])))   # the objective, as backward sees it

    def read_losses(self) -> str | None:
        """Read every loss since the last read; the failure message of the first non-finite one (its earlier steps
        are kept), else None."""
        pending, self._losses = self._losses, []
        host = torch.stack([v for _, v in pending]).double().cpu().tolist() if pending else []
        for (step, _), (metric, sec, mu, total) in zip(pending, host):
            if not math.isfinite(total):
                self._read = [r for r in self._read if r[0] < step]
                self.read_steps()
                return (f"non-finite loss at step {step}: metric={metric:.4g}, sec={sec:.4g} "
                        f"(try a smaller learning rate or eta)")
            self._read.append((step, metric, sec, mu))
        return None

    def read_steps(self):
        """The rows of the steps read so far: the monitor's measures (one transfer), tracked norms, step times
        (the chunk's wall time shared equally among its steps)."""
        measured = self.monitor.flush() if self.monitor is not None else {}
        if self._tracked:
            host = torch.stack([n.float() for _, _, n in self._tracked]).cpu().numpy()
            for (step, idx, _), norms in zip(self._tracked, host):
                self.tracked.extend({"step": step, "sample": int(i), "norm": float(n)} for i, n in zip(idx, norms))
            self._tracked = []
        if not self._read:
            return
        step_time = (time.perf_counter() - self._t0) / len(self._read) if self._t0 is not None else math.nan
        for step, metric, sec, mu in self._read:
            row = {"step": step, "loss_metric": metric, "loss_sec": sec, "mu": mu}
            if self.monitor is not None:
                row.update(step_columns(measured.get(step, {})))
            row["step_time"] = step_time
            self.steps.append(row)
        self._read, self._t0 = [], None

    def add_tracked(self, step, idx, norms):
        """Tracked raw norms of step ``step`` (a device tensor, read with the next step rows)."""
        self._tracked.append((step, idx, norms))
        if step == 0:
            self.read_steps()

    def scatter(self) -> pd.DataFrame:
        if self.monitor is None:
            return pd.DataFrame()
        s = self.monitor.samples()
        return s[list(TABLE_COLUMNS["grad_scatter"])] if len(s) else pd.DataFrame()

    def frames(self, cfg: TrainConfig):
        """(steps, tracked, evals, grad_scatter), each with its full schema even when empty."""
        return tuple(with_schema(pd.DataFrame(rows) if isinstance(rows, list) else rows, name, cfg) for rows, name in
                     ((self.steps, "steps"), (self.tracked, "tracked"), (self.evals, "evals"),
                      (self.scatter(), "grad_scatter")))


def failed(cfg: TrainConfig, log: Recorder, message: str, t_start: float) -> RunResult:
    steps, tracked, evals, scatter = log.frames(cfg)
    stop = len(log.steps) + 1            # the failed step; a run that read every k steps measured a few beyond it
    tracked, scatter = (t[t["step"] < stop] if len(t) else t for t in (tracked, scatter))
    empty = {t: with_schema(pd.DataFrame(), t, cfg) for t in ("test_norms", "cosines")}
    return RunResult(cfg, "failed", {}, steps, tracked, evals, empty["test_norms"], empty["cosines"], scatter,
                     error=message, wall_s=time.perf_counter() - t_start, failed_step=len(log.steps) + 1)


def finish(cfg, model, train_ds, test_emb, test_labels, log, device, t_start) -> RunResult:
    """Final metrics, test norm histogram, positive/negative cosine samples, train norm variance."""
    steps, tracked, evals, scatter = log.frames(cfg)
    final = evals.iloc[-1].drop("step").dropna().to_dict()
    test_norm = test_emb.norm(dim=1)
    gen = torch.Generator().manual_seed(cfg.seed)
    n_train = min(len(train_ds), 2000)
    train_idx = torch.randperm(len(train_ds), generator=gen)[:n_train]
    train_emb, _ = embed(model, train_ds, device, indices=train_idx)
    metrics = {**{k: float(v) for k, v in final.items()},
               "test_norm_mean": test_norm.mean().item(), "test_norm_var": test_norm.var(unbiased=False).item(),
               "train_norm_mean": train_emb.norm(dim=1).mean().item(),
               "train_norm_var": train_emb.norm(dim=1).var(unbiased=False).item()}
    if len(steps):
        metrics["mean_step_time"] = float(steps["step_time"].mean())
    if cfg.views:                     # self-supervised runs: also a linear probe on the frozen test embeddings
        metrics.update(linear_probe(test_emb, test_labels, seed=cfg.seed))
    return RunResult(cfg, "done", metrics, steps, tracked, evals,
                     pd.DataFrame({"label": test_labels.numpy(), "norm": test_norm.numpy(),
                                   "hit@1": metrics_mod.nearest_neighbor_hits(test_emb, test_labels)}),
                     sample_cosines(test_emb, test_labels, gen), scatter,
                     wall_s=time.perf_counter() - t_start)


def sample_cosines(emb: torch.Tensor, labels: torch.Tensor, gen, n: int = 5000) -> pd.DataFrame:
    """Cosines of up to n random positive and n random negative test pairs."""
    fhat = F.normalize(emb, dim=1)
    i = torch.randint(len(emb), (8 * n,), generator=gen)
    j = torch.randint(len(emb), (8 * n,), generator=gen)
    keep = i != j
    i, j = i[keep], j[keep]
    same = labels[i] == labels[j]
    # positives are rare among random pairs: draw them from within classes instead
    pos_i, pos_j = positive_pairs(labels, gen, n)
    neg_i, neg_j = i[~same][:n], j[~same][:n]
    pos = (fhat[pos_i] * fhat[pos_j]).sum(1)
    neg = (fhat[neg_i] * fhat[neg_j]).sum(1)
    return pd.DataFrame({"kind": ["pos"] * len(pos) + ["neg"] * len(neg),
                         "cos": torch.cat([pos, neg]).numpy()})


def positive_pairs(labels: torch.Tensor, gen, n: int):
    order = torch.argsort(labels, stable=True)
    sorted_labels = labels[order]
    _, counts = torch.unique_consecutive(sorted_labels, return_counts=True)
    starts = torch.cumsum(counts, 0) - counts
    ok = counts >= 2
    starts, counts = starts[ok], counts[ok]
    if len(counts) == 0:
        return torch.empty(0, dtype=torch.long), torch.empty(0, dtype=torch.long)
    c = torch.randint(len(counts), (n,), generator=gen)
    a = (torch.rand(n, generator=gen) * counts[c]).long()
    b = (torch.rand(n, generator=gen) * (counts[c] - 1)).long()
    b = b + (b >= a).long()                                  # a different member of the same class
    return order[starts[c] + a], order[starts[c] + b]
