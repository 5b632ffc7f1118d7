"""Does my model have the problem SEC fixes? A norm-health monitor for any training loop.

SEC's argument (Zhang, Li & Zhang, NeurIPS 2020, Sec. 3) rests on three measurable things, which
:class:`NormMonitor` records from the *raw* embeddings ``f`` of a batch (before any l2-normalisation):

1. how unequal the norms are: mean ‖f_i‖, variance and coefficient of variation (CV = sd / mean);
2. the gradient law of Proposition 2: for a loss on normalized embeddings ‖∂L/∂f_i‖ ∝ 1/‖f_i‖ at a fixed
   direction, so the slope of log ‖∂L/∂f_i‖ on log ‖f_i‖ over the batch is compared with −1 (with its interval).
   L is the metric loss alone: a regularizer's gradient (SEC's included) never enters the slope;
3. the consequence: how far each sample's direction turns in one update (Δθ), its spread, and the ratio of the
   mean turn of the high-norm samples to that of the low-norm ones.

Three ways to attach it (each is at most three added lines; a loop needs nothing else of sec_lib)::

    from sec_lib.monitor import NormMonitor

    # (a) hooks: the layer producing the embedding, and the optimizer for Δθ
    monitor = NormMonitor.attach(model, optimizer=opt)           # every=20 by default
    ...                                                          # the loop unchanged
    frame, diagnosis = monitor.report()

    # (b) by hand, in any loop
    monitor = NormMonitor(every=20)
    loss = loss_fn(raw, y); monitor.observe(raw, loss=loss, labels=y)   # before loss.backward()
    opt.step(); monitor.after_step(model, x)                            # Δθ

    # (c) beside a pytorch-metric-learning loss, as SECRegularizer is (labels included; a loss's
    #     embedding_regularizer is kept out of the slope's gradient)
    loss_fn = monitor.wrap(TripletMarginLoss(embedding_regularizer=SECRegularizer()))

**Δθ: the same batch after the step, not a probe batch.** Δθ is measured by re-embedding the step's own inputs
right after ``optimizer.step()`` (:meth:`NormMonitor.after_step`, or the optimizer hook of ``attach``), at the
steps that record Δθ. Proposition 2 is about the update a sample receives from its own gradient: only the
samples of the batch that produced that gradient turn by the law, and only their norms at the time of the step
are the ones it relates to. A fixed probe batch re-embedded every k steps would measure k updates at once, of
samples that were not in those batches and move only through the shared weights, which mixes the effect with
everything else the network learns. The cost is one forward pass without gradients per Δθ step; the model's
BatchNorm statistics and the random number generators are restored afterwards, so training is unchanged.

**Cost.** Between recorded steps the monitor does nothing on the device and never syncs with it; a recorded step
costs one ``autograd.grad`` through the loss (not the network), the Δθ forward pass and one read of its
measures to the host, which happens when the next recorded step begins or a table is asked for (no host sync per
step on a GPU). ``bench/monitor_overhead.py`` measures the per-step overhead at the default ``every=20``.
The training loop of this project (:mod:`sec_lib.runs.train`) uses the monitor with ``every=1`` (its
``stats_every``), so its step tables keep every step.

Modules: :mod:`.monitor` (:class:`NormMonitor`, :class:`MonitorConfig`, :class:`MonitoredLoss`),
:mod:`.measures` (the formulas), :mod:`.diagnosis` (:class:`MonitorReport`, :func:`diagnose`).
"""
from .diagnosis import MonitorReport, diagnose
from .monitor import COLUMNS, SAMPLE_COLUMNS, MonitorConfig, MonitoredLoss, NormMonitor, measure_batch

__all__ = ["NormMonitor", "MonitorConfig", "MonitoredLoss", "MonitorReport", "diagnose", "measure_batch",
           "COLUMNS", "SAMPLE_COLUMNS"]
