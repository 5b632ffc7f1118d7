"""The norm-health monitor: :class:`NormMonitor`, its settings :class:`MonitorConfig` and the loss wrapper
:class:`MonitoredLoss`. The package docstring (:mod:`sec_lib.monitor`) says how to attach it."""
from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd
import torch
from torch import nn

from ..params import Number, ParameterError
from .diagnosis import MonitorReport, diagnose
from .measures import angle_balance, angle_change, cv, norm_summary, pair_summary, slope_interval

__all__ = ["MonitorConfig", "NormMonitor", "MonitoredLoss", "measure_batch", "measure_on_device", "read_measures",
           "COLUMNS", "SAMPLE_COLUMNS"]

#: The columns of :meth:`NormMonitor.frame`, one row per recorded step (NaN where a measure was not taken).
COLUMNS = ("step", "n", "norm_mean", "norm_var", "norm_cv", "grad_slope", "grad_slope_lo", "grad_slope_hi",
           "grad_r2", "grad_norm_cv", "dtheta_mean", "dtheta_std", "dtheta_cv", "dtheta_high_low",
           "pos_cos", "neg_cos", "violations")
#: The columns of :meth:`NormMonitor.samples`, one row per sample of a recorded step.
SAMPLE_COLUMNS = ("step", "sample", "norm", "grad_norm", "dtheta")


@dataclass(frozen=True)
class MonitorConfig:
    """When the monitor measures, and how it summarises.

    A step ``s`` (counted from 1 by the monitor unless the caller gives it) is *recorded* when
    ``s % every == 0`` or ``s`` is in ``extra_steps``: its norms, gradient slope and (with labels) pair statistics
    are measured. Δθ is measured at ``s % dtheta_every == 0`` (``None``: at the recorded steps) and needs the
    same samples after the update (:meth:`NormMonitor.after_step`, or ``attach(..., optimizer=...)``).
    """
    every: int = 20                           # record every this many steps (the default costs <= 3%: bench/)
    dtheta_every: int | None = None           # Δθ every this many steps; None: at the recorded steps
    extra_steps: frozenset = frozenset()      # also record at these steps (the training loop: first and last)
    sample_steps: frozenset | None = None     # keep per-sample rows at these recorded steps; None: at all
    level: float = 0.95                       # level of the slope's interval
    tail: float = 0.25                        # fraction of the batch in the high- and low-norm groups of Δθ

    def __post_init__(self):
        Number(1, 10**9, True).check("every", self.every)
        if self.dtheta_every is not None:
            Number(1, 10**9, True).check("dtheta_every", self.dtheta_every)
        Number(0, 1, open_lo=True).check("level", self.level)
        Number(0, 0.5, open_lo=True).check("tail", self.tail)
        if self.level >= 1:
            raise ParameterError(f"parameter 'level' = {self.level!r} is not valid; expected a number in (0, 1)")
        object.__setattr__(self, "extra_steps", frozenset(int(s) for s in self.extra_steps))
        if self.sample_steps is not None:
            object.__setattr__(self, "sample_steps", frozenset(int(s) for s in self.sample_steps))

    def records(self, step: int) -> bool:
        """Whether step ``step`` gets the batch measures (norms, gradient, pairs)."""
        return step % self.every == 0 or step in self.extra_steps

    def turns(self, step: int) -> bool:
        """Whether step ``step`` gets Δθ."""
        return self.records(step) if self.dtheta_every is None else step % self.dtheta_every == 0

    def keeps_samples(self, step: int) -> bool:
        return self.sample_steps is None or step in self.sample_steps


@dataclass
class _Capture:
    """What one recorded step left for measuring: tensors only, nothing read to the host yet."""
    step: int
    stats: bool                               # batch measures due
    dtheta: bool                              # Δθ due
    raw: torch.Tensor                         # the embeddings, detached
    labels: torch.Tensor | None = None
    grad: torch.Tensor | None = None          # dL_metric/df, detached
    after: torch.Tensor | None = None         # the same samples re-embedded after the update
    graph: torch.Tensor | None = None         # attach(): the hooked output, in the graph until backward
    loss_given: bool = False                  # the gradient came from a loss (observe/wrap), not from backward
    inputs: tuple | None = None               # attach(): the model's (args, kwargs) of this step, for Δθ


def measure_batch(raw: torch.Tensor, grad: torch.Tensor | None = None, labels: torch.Tensor | None = None,
                  after: torch.Tensor | None = None, stats: bool = True, level: float = 0.95,
                  tail: float = 0.25) -> tuple[dict, dict]:
    """Every measure of one batch: ``(row, per_sample)``.

    ``row`` maps column names of :data:`COLUMNS` to floats (only those measured); ``per_sample`` maps ``norm``,
    ``grad_norm`` and ``dtheta`` to float64 host arrays (those measured). ``stats=False`` measures Δθ only. The
    measures are computed on the batch's device (:func:`measure_on_device`) and read to the host in one transfer
    (:func:`read_measures`)."""
    return read_measures([measure_on_device(raw, grad, labels, after, stats, tail)], level)[0]


def measure_on_device(raw: torch.Tensor, grad: torch.Tensor | None = None, labels: torch.Tensor | None = None,
                      after: torch.Tensor | None = None, stats: bool = True, tail: float = 0.25) -> tuple:
    """The first half of :func:`measure_batch`: ``(n, scalars, vectors)``, the batch size and the measures as
    float64 tensors on the batch's device (0-d scalars by column name; per-sample vectors by name). Nothing is
    read to the host, so a training step on a GPU can queue it and read many steps' measures at once."""
    norms = raw.norm(dim=1)
    scalars, vectors = {}, {"norm": norms}
    if stats:
        scalars.update(norm_summary(norms))
        if grad is not None:
            gnorm = grad.norm(dim=1)
            vectors["grad_norm"] = gnorm
            scalars["grad_norm_cv"] = cv(gnorm)
    if after is not None:
        theta = angle_change(raw, after)
        vectors["dtheta"] = theta
        scalars.update(angle_balance(theta, norms, tail))
    if stats and labels is not None:
        scalars.update(pair_summary(raw, labels))
    return (int(raw.shape[0]), {k: v.double() for k, v in scalars.items()},
            {k: v.double() for k, v in vectors.items()})


def read_measures(measured: list, level: float = 0.95) -> list[tuple[dict, dict]]:
    """The second half of :func:`measure_batch`, for any number of batches measured by :func:`measure_on_device`:
    one transfer to the host for all of them, then the slope's interval on the host. Returns ``(row, per_sample)``
    per batch, in order."""
    if not measured:
        return []
    flat = torch.cat([t.reshape(-1) for _, sc, ve in measured for t in (*sc.values(), *ve.values())])
    host = flat.cpu().numpy()
    out, at = [], 0
    for n, sc, ve in measured:
        row = {"n": n}
        row.update(zip(sc, host[at:at + len(sc)].tolist()))
        at += len(sc)
        per_sample = {}
        for name, v in ve.items():
            per_sample[name] = host[at:at + v.numel()].copy()
            at += v.numel()
        if "grad_norm" in per_sample:
            row.update(slope_interval(per_sample["norm"], per_sample["grad_norm"], level))
        out.append((row, per_sample))
    return out


class NormMonitor:
    """Norm health of the embeddings a training loop produces: see :mod:`sec_lib.monitor` for the three ways to
    attach it, and :class:`MonitorConfig` for its settings (``NormMonitor(every=10)`` sets them by name).

    ``step`` is the last step the monitor saw. Measures are taken at recorded steps only and read to the host
    once per recorded step, when the next recorded step begins or a table is asked for: between recorded steps
    the monitor does nothing on the device and never syncs.
    """

    def __init__(self, config: MonitorConfig | None = None, **settings):
        if config is not None and settings:
            raise TypeError("give NormMonitor either a MonitorConfig or settings by name, not both")
        self.config = config if config is not None else MonitorConfig(**settings)
        self.step = 0
        self._pending: _Capture | None = None
        self._rows: list[dict] = []
        self._samples: list[dict] = []
        self._handles: list = []
        self._model: nn.Module | None = None
        self._select: Callable | None = None
        self._inputs: tuple | None = None
        self._reembedding = False
        self.deferred = False
        self._queue: list = []

    def defer(self, on: bool = True) -> "NormMonitor":
        """Deferred reads (a training loop on a GPU): a recorded step's measures are computed on the device when
        the next recorded step begins, queued there, and read to the host only by :meth:`flush` (or a table), so
        the steps in between never wait for the device. The rows are the same as without deferring."""
        self.deferred = bool(on)
        return self

    def flush(self) -> dict[int, dict]:
        """Measure the pending step and read every queued one to the host in one transfer; returns the rows read
        now, by step. Without :meth:`defer` it is the same as reading the pending step."""
        first = len(self._rows)
        self._finalize()
        self._read_queue()
        return {r["step"]: r for r in self._rows[first:]}

    # -- 1. any loop ----------------------------------------------------------------------------------------
    def observe(self, raw: torch.Tensor | None = None, loss: torch.Tensor | None = None,
                labels: torch.Tensor | None = None, step: int | None = None) -> None:
        """Record one training step from its embeddings ``raw`` (B, D), before ``loss.backward()``.

        ``loss``: the metric loss alone (not a regularizer: its gradient would enter the slope); at recorded steps
        its gradient with respect to ``raw`` is taken with ``torch.autograd.grad(..., retain_graph=True)``, which
        leaves the ``.grad`` of every parameter untouched. ``labels`` add the pair statistics. ``step``: the
        step's number (default: one more than the last).

        On an attached monitor (:meth:`attach`) the hook already recorded the embeddings: call
        ``observe(loss=metric_loss, labels=y)`` without ``raw`` to use the metric loss's gradient instead of the
        gradient that backward passes through the hooked layer (which includes any regularizer on it).
        """
        if raw is None:
            if not self.attached:
                raise ValueError("observe() needs the embeddings `raw` unless the monitor is attached by hooks "
                                 "(NormMonitor.attach)")
            rec = self._open()
            if rec is not None:
                if loss is not None:
                    self._gradient(rec, rec.graph, loss)
                if labels is not None:
                    rec.labels = labels.detach()
            return
        if self.attached:
            raise ValueError("this monitor is attached by hooks, which record the embeddings themselves: call "
                             "observe(loss=..., labels=...) without `raw`, or use a monitor of its own")
        _check_raw(raw)
        self._begin(self.step + 1 if step is None else int(step), raw, labels)
        rec = self._pending
        if loss is not None and rec is not None and rec.step == self.step:
            self._gradient(rec, raw, loss)

    def after_step(self, model: nn.Module | None = None, *inputs, embed: Callable | None = None, **kwargs) -> None:
        """Measure Δθ of the step just taken: re-embed the same inputs after ``optimizer.step()``.

        ``model(*inputs, **kwargs)`` must return the raw embeddings, or ``embed(model, *inputs, **kwargs)`` does.
        The model runs in its current mode under ``torch.no_grad()``; its buffers (BatchNorm running statistics)
        and the random number generators are restored afterwards, so measuring leaves the training run as it
        was. A no-op at steps without Δθ. On an attached monitor ``monitor.after_step()`` needs no arguments.
        """
        rec = self._pending
        if rec is None or rec.step != self.step or not rec.dtheta or rec.after is not None:
            return
        if self.attached:
            model = model if model is not None else self._model
            args, kw = (inputs, kwargs) if inputs else (rec.inputs or (None, None))
            if args is None:
                raise ValueError("after_step() on an attached monitor re-embeds the inputs the hooked model saw; none "
                                 "were kept for this step: pass them, monitor.after_step(model, x)")
            with _untouched(model, args):
                self._reembedding = True
                try:
                    model(*args, **kw)
                finally:
                    self._reembedding = False
            rec.inputs = None
            return
        if model is None:
            raise ValueError("after_step() needs the model (and its inputs) to re-embed the batch")
        with _untouched(model, inputs):
            out = embed(model, *inputs, **kwargs) if embed is not None else model(*inputs, **kwargs)
        _check_raw(out, "the re-embedded batch (give after_step an `embed` function that returns the raw embeddings)")
        rec.after = _measurable(out.detach())

    # -- 2. a forward hook ------------------------------------------------------------------------------------
    @classmethod
    def attach(cls, module: nn.Module, optimizer: torch.optim.Optimizer | None = None, *,
               model: nn.Module | None = None, select: Callable | None = None,
               config: MonitorConfig | None = None, **settings) -> "NormMonitor":
        """A monitor fed by hooks on ``module``, the layer whose output is the raw embedding.

        Each forward of ``module`` with gradients enabled is one training step (evaluation passes under
        ``torch.no_grad()`` are ignored). At recorded steps the forward hook keeps the output and a tensor hook
        keeps the gradient that ``backward`` passes through it. With ``optimizer``, a step hook re-embeds the
        step's inputs of ``model`` (default ``module``; give the whole network when ``module`` is its last layer)
        after each update for Δθ; without it, call :meth:`after_step`. ``select`` picks the embedding from a
        tuple output. :meth:`detach` (or leaving a ``with`` block) removes every hook.
        """
        mon = cls(config, **settings)
        mon._model = model if model is not None else module
        mon._select = select
        mon._handles.append(module.register_forward_hook(mon._on_forward))
        mon._handles.append(mon._model.register_forward_pre_hook(mon._on_model_input, with_kwargs=True))
        if optimizer is not None:
            mon._handles.append(optimizer.register_step_post_hook(mon._on_optimizer_step))
        return mon

    @property
    def attached(self) -> bool:
        return bool(self._handles)

    def detach(self) -> "NormMonitor":
        """Remove every hook this monitor registered; what it recorded stays."""
        for h in self._handles:
            h.remove()
        self._handles = []
        self._inputs = None
        return self

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.detach()

    # -- 3. beside a loss ----------------------------------------------------------------------------------------
    def wrap(self, loss_fn: nn.Module) -> "MonitoredLoss":
        """``loss_fn`` (a pytorch-metric-learning loss or any ``loss_fn(embeddings, labels, ...)``) with this
        monitor observing its input, labels and gradient: see :class:`MonitoredLoss`."""
        return MonitoredLoss(loss_fn, self)

    # -- results ---------------------------------------------------------------------------------------------------
    def row(self, step: int) -> dict:
        """The measures of step ``step`` if it was the last one recorded (reads it now), else ``{}``."""
        self._finalize()
        self._read_queue()
        return self._rows[-1] if self._rows and self._rows[-1]["step"] == step else {}

    def frame(self) -> pd.DataFrame:
        """One row per recorded step, columns :data:`COLUMNS` (a tidy table)."""
        self._finalize()
        self._read_queue()
        return pd.DataFrame(self._rows, columns=list(COLUMNS)).astype({"step": "int64", "n": "int64"})

    def samples(self) -> pd.DataFrame:
        """One row per sample of the recorded steps kept (``MonitorConfig.sample_steps``), columns
        :data:`SAMPLE_COLUMNS`; ``sample`` is the position in the batch."""
        self._finalize()
        self._read_queue()
        if not self._samples:
            return pd.DataFrame({c: pd.Series(dtype="int64" if c in ("step", "sample") else "float64")
                                 for c in SAMPLE_COLUMNS})
        return pd.DataFrame({c: np.concatenate([s[c] for s in self._samples]) for c in SAMPLE_COLUMNS})

    def report(self) -> MonitorReport:
        """``(frame, diagnosis)``: :meth:`frame` and the short diagnosis computed from it
        (:func:`sec_lib.monitor.diagnosis.diagnose`)."""
        frame = self.frame()
        return MonitorReport(frame, diagnose(frame, level=self.config.level, tail=self.config.tail))

    # -- internals ---------------------------------------------------------------------------------------------------
    def _begin(self, step: int, raw: torch.Tensor, labels) -> None:
        """Step ``step`` begins: capture what its measures need (nothing at an unrecorded step)."""
        self.step = step
        stats, dtheta = self.config.records(step), self.config.turns(step)
        if not (stats or dtheta):
            return
        self._finalize()
        self._pending = _Capture(step, stats, dtheta, _measurable(raw.detach()),
                                 labels=labels.detach() if (stats and labels is not None) else None)

    def _open(self) -> _Capture | None:
        """The current step's capture while it still awaits its gradient (attach mode, before backward)."""
        rec = self._pending
        if rec is None or rec.step != self.step or rec.graph is None or rec.loss_given:
            return None
        return rec

    def _gradient(self, rec: _Capture, raw: torch.Tensor, loss: torch.Tensor) -> None:
        if not rec.stats or not raw.requires_grad or not loss.requires_grad:
            return
        (g,) = torch.autograd.grad(loss, raw, retain_graph=True, allow_unused=True)
        rec.loss_given = True
        rec.grad = None if g is None else _measurable(g.detach())

    def _finalize(self) -> None:
        """Measure the pending capture and read it to the host (the one sync of a recorded step); deferred: measure
        it on the device and queue it for :meth:`flush`."""
        rec, self._pending = self._pending, None
        if rec is None:
            return
        measured = measure_on_device(rec.raw, rec.grad if rec.stats else None, rec.labels,
                                     rec.after if rec.dtheta else None, stats=rec.stats, tail=self.config.tail)
        self._queue.append((rec.step, measured))
        if not self.deferred:
            self._read_queue()

    def _read_queue(self) -> None:
        queue, self._queue = self._queue, []
        for (step, _), (row, per) in zip(queue, read_measures([m for _, m in queue], self.config.level)):
            self._rows.append({"step": step, **row})
            if self.config.keeps_samples(step):
                n = len(per["norm"])
                self._samples.append({"step": np.full(n, step, dtype=np.int64), "sample": np.arange(n, dtype=np.int64),
                                      **{c: per.get(c, np.full(n, np.nan)) for c in ("norm", "grad_norm", "dtheta")}})

    # hooks
    def _on_model_input(self, module, args, kwargs):
        if not self._reembedding and torch.is_grad_enabled():
            self._inputs = (args, kwargs)

    def _on_forward(self, module, args, output):
        out = self._select(output) if self._select is not None else output
        if self._reembedding:
            if self._pending is not None:
                self._pending.after = _measurable(_checked(out).detach())
            return
        if not torch.is_grad_enabled():
            return                                       # an evaluation pass, not a training step
        _checked(out)
        self._begin(self.step + 1, out, None)
        rec = self._pending
        if rec is not None and rec.step == self.step:
            rec.inputs = self._inputs if rec.dtheta else None
            if rec.stats and out.requires_grad:
                rec.graph = out
                out.register_hook(functools.partial(self._on_grad, rec))
        self._inputs = None

    def _on_grad(self, rec: _Capture, grad: torch.Tensor) -> None:
        if not rec.loss_given:
            rec.grad = _measurable(grad.detach().clone())
        rec.graph = None

    def _on_optimizer_step(self, optimizer, args, kwargs) -> None:
        rec = self._pending
        if rec is not None and rec.step == self.step and rec.inputs is not None:
            self.after_step()


class MonitoredLoss(nn.Module):
    """A loss with a :class:`NormMonitor` beside it: ``MonitoredLoss(loss_fn, monitor)(embeddings, labels, ...)``
    returns exactly ``loss_fn(embeddings, labels, ...)`` (same value, same graph) and records the step from its
    input and labels. Calls without gradients (evaluation) are not steps.

    The slope's gradient is that of the metric part alone. A pytorch-metric-learning loss may carry an
    ``embedding_regularizer`` (``SECRegularizer`` for one), which PML adds to the loss as
    ``embedding_reg_weight * regularizer(embeddings)``: at recorded steps a forward hook keeps that term ``r``, and
    the gradient is taken of ``loss - embedding_reg_weight * r`` (new graph nodes beside the loss, which backward
    never visits), so the regularizer's gradient cancels out of the measure and training is untouched.

    On a monitor attached by hooks the wrapper adds, to the step the hook recorded, the metric loss's gradient and
    the labels; it must then receive the hooked output itself.
    """

    def __init__(self, loss_fn: nn.Module, monitor: NormMonitor):
        super().__init__()
        self.loss = loss_fn
        self.monitor = monitor

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor | None = None, *args, **kwargs):
        mon = self.monitor
        if not (torch.is_grad_enabled() and embeddings.requires_grad):
            return self.loss(embeddings, labels, *args, **kwargs)
        if mon.attached:
            rec = mon._open()
            if rec is None:
                return self.loss(embeddings, labels, *args, **kwargs)
            if embeddings is not rec.graph:
                raise ValueError("the monitor is attached to a layer whose output is not this loss's input; give the "
                                 "loss the hooked output itself, or use a separate monitor with wrap() alone")
        elif not mon.config.records(mon.step + 1):
            loss = self.loss(embeddings, labels, *args, **kwargs)
            mon.observe(embeddings, labels=labels)             # counts the step (and keeps it for Δθ if due)
            return loss
        with _regularizer_terms(self.loss) as terms:
            loss = self.loss(embeddings, labels, *args, **kwargs)
        metric = loss
        for weight, term in terms:
            metric = metric - weight * term
        if mon.attached:
            mon._gradient(rec, embeddings, metric)
            if labels is not None:
                rec.labels = labels.detach()
        else:
            mon.observe(embeddings, loss=metric, labels=labels)
        return loss


@contextlib.contextmanager
def _regularizer_terms(loss_fn: nn.Module):
    """Inside, a forward hook on ``loss_fn``'s ``embedding_regularizer`` (if any) collects ``(weight, term)`` as
    pytorch-metric-learning adds it to the loss (``weight * term``)."""
    terms: list = []
    reg = getattr(loss_fn, "embedding_regularizer", None)
    if not isinstance(reg, nn.Module):
        yield terms
        return
    weight = getattr(loss_fn, "embedding_reg_weight", 1)
    handle = reg.register_forward_hook(lambda module, args, out: terms.append((weight, out)))
    try:
        yield terms
    finally:
        handle.remove()


@contextlib.contextmanager
def _untouched(model: nn.Module, inputs):
    """No gradients; the model's buffers and the random number generators as they were afterwards."""
    saved = [(b, b.detach().clone()) for b in model.buffers()]
    device = next((t.device for t in _tensors(inputs)), torch.device("cpu"))
    devices = [device.index if device.index is not None else torch.cuda.current_device()] if device.type == "cuda" else []
    with torch.no_grad(), torch.random.fork_rng(devices=devices):
        try:
            yield
        finally:
            for b, value in saved:
                b.copy_(value)


def _tensors(obj):
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for o in obj:
            yield from _tensors(o)
    elif isinstance(obj, dict):
        for o in obj.values():
            yield from _tensors(o)


def _measurable(t: torch.Tensor) -> torch.Tensor:
    """Float32 or float64 as they are; half precision measured in float32."""
    return t if t.dtype in (torch.float32, torch.float64) else t.float()


def _checked(out):
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"the hooked layer returned {type(out).__name__}, not a tensor of embeddings; give attach() "
                        "`select=` to pick the raw embeddings from its output")
    _check_raw(out, "the hooked layer's output")
    return out


def _check_raw(raw, what: str = "raw") -> None:
    if not isinstance(raw, torch.Tensor) or raw.ndim != 2 or not raw.is_floating_point() or raw.shape[0] < 1:
        shape = tuple(raw.shape) if isinstance(raw, torch.Tensor) else type(raw).__name__
        raise ValueError(f"{what} must be a floating-point tensor of embeddings of shape (B, D); got {shape}")

