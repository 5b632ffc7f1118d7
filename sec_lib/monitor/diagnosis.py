"""The monitor's report: its table and a short diagnosis computed from that table, nothing else.

:func:`diagnose` writes three findings and a closing line, each from the columns of
:meth:`sec_lib.monitor.NormMonitor.frame`:

* **norms**: the last recorded CV of the batch's norms and its trend, the least-squares slope of ``norm_cv`` on
  the step with its Student-t interval ("rose", "fell", or "no trend distinguishable from zero" when the interval
  holds 0);
* **gradient**: the mean over recorded steps of the per-batch slope of ``ln ||dL/df_i||`` on ``ln ||f_i||``, with
  its t-interval over steps, beside the -1 that Proposition 2 gives for a loss on normalized embeddings at fixed
  directions (across a batch the directions differ: the slope's distance from -1 is the slope of the gradient at
  unit norm, ``||f_i|| ||dL/df_i||``, on the norm);
* **turning**: the mean over steps of ``dtheta_high_low``, how far the high-norm samples turned in one update
  relative to the low-norm ones, with its interval.

It states what was measured and promises nothing about accuracy.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import pandas as pd
from scipy import stats

from ..report import mean_ci

__all__ = ["MonitorReport", "diagnose", "trend"]

#: What the diagnosis says last, on every report.
CLOSING = ("These numbers describe this run's batches only. They say how unequal the norms, the gradients and "
           "the turning speeds were; they do not say whether SEC, or any other change, would improve its accuracy.")


class MonitorReport(NamedTuple):
    """``monitor.report()``: the tidy table (one row per recorded step) and the diagnosis computed from it
    (markdown). Unpacks as ``frame, diagnosis = monitor.report()``."""
    frame: pd.DataFrame
    diagnosis: str

    def _repr_markdown_(self) -> str:
        return self.diagnosis


def trend(x, y, level: float = 0.95) -> tuple[float, float, float]:
    """Least-squares slope of ``y`` on ``x`` with its ``level`` t-interval ``(slope, lo, hi)``; NaN with fewer
    than 3 finite points or no spread in ``x``."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    if x.size < 3 or np.ptp(x) == 0:
        return math.nan, math.nan, math.nan
    cx = x - x.mean()
    b = float((cx * (y - y.mean())).sum() / (cx * cx).sum())
    resid = y - y.mean() - b * cx
    se = math.sqrt(float((resid ** 2).sum()) / (x.size - 2) / float((cx * cx).sum()))
    half = float(stats.t.ppf((1 + level) / 2, x.size - 2)) * se
    return b, b - half, b + half


def _ci(lo: float, hi: float) -> str:
    return f"[{lo:.3g}, {hi:.3g}]" if math.isfinite(lo) and math.isfinite(hi) else "(no interval: one value)"


def _norms(f: pd.DataFrame, level: float) -> str:
    g = f.dropna(subset=["norm_cv"])
    if g.empty:
        return "**Norms.** No batch was recorded yet."
    last = g.iloc[-1]
    text = (f"**Norms.** At step {int(last['step'])} the batch's norms had mean {last['norm_mean']:.3g} and "
            f"coefficient of variation (sd / mean) {last['norm_cv']:.3f}.")
    b, lo, hi = trend(g["step"], g["norm_cv"], level)
    if math.isnan(b):
        return text + f" With {len(g)} recorded step{'s' if len(g) != 1 else ''} there is no trend to fit."
    span = float(g["step"].iloc[-1] - g["step"].iloc[0])
    if lo > 0 or hi < 0:
        word = "rose" if b > 0 else "fell"
        how = f"{word} by {abs(b) * span:.3g} over steps {int(g['step'].iloc[0])}–{int(g['step'].iloc[-1])}"
    else:
        how = f"shows no trend distinguishable from zero over steps {int(g['step'].iloc[0])}–{int(g['step'].iloc[-1])}"
    return (text + f" Across {len(g)} recorded steps the CV {how} (least-squares trend {b * span:+.3g} over the "
            f"span, {level:.0%} interval {_ci(lo * span, hi * span)}).")


def _gradient(f: pd.DataFrame, level: float) -> str:
    s = f["grad_slope"].dropna()
    if s.empty:
        return ("**Gradient.** No gradient was recorded: give `observe` the metric loss, or let backward run through "
                "the hooked layer.")
    m, lo, hi, n = mean_ci(s, level)
    where = ("contains" if lo <= -1 <= hi else "excludes") if math.isfinite(lo) else "cannot be compared with"
    last = f.dropna(subset=["grad_slope"]).iloc[-1]
    return (f"**Gradient.** The per-batch slope of log ‖∂L/∂f_i‖ against log ‖f_i‖ averaged {m:.3f} over {n} "
            f"recorded step{'s' if n != 1 else ''} "
            f"({level:.0%} t-interval over steps {_ci(lo, hi)}, which {where} −1; last batch "
            f"{last['grad_slope']:.3f} {_ci(last['grad_slope_lo'], last['grad_slope_hi'])}, R² {last['grad_r2']:.2f}). "
            "For a loss on normalized embeddings the gradient's magnitude is exactly ∝ 1/‖f‖ at a fixed direction "
            "(slope −1). Across a batch the directions differ too: the slope minus −1 is the slope of the gradient "
            "at unit norm, ‖f_i‖·‖∂L/∂f_i‖, on the norm, so a slope below −1 means the samples of small norm also "
            "had the larger gradients at unit norm.")


def _turning(f: pd.DataFrame, level: float, tail: float) -> str:
    r = f["dtheta_high_low"].dropna()
    if r.empty:
        return ("**Turning.** Δθ was not measured: call `monitor.after_step(model, x)` after `optimizer.step()`, or "
                "attach the monitor with the optimizer.")
    m, lo, hi, n = mean_ci(r, level)
    part = "quarter" if tail == 0.25 else f"{tail:.0%}"
    speed = (f"{1 / m:.2f}× slower" if m < 1 else f"{m:.2f}× faster") if m > 0 else "not at all"
    return (f"**Turning.** In one update, the {part} of the batch with the largest norms turned {m:.2f}× as far as "
            f"the {part} with the smallest (mean over {n} step{'s' if n != 1 else ''}, "
            f"{level:.0%} interval {_ci(lo, hi)}): {speed}. "
            f"The spread of the angle change within a batch (CV of Δθ) averaged {f['dtheta_cv'].mean():.2f}.")


def diagnose(frame: pd.DataFrame, level: float = 0.95, tail: float = 0.25) -> str:
    """The diagnosis of a monitor's :meth:`~sec_lib.monitor.NormMonitor.frame`, as markdown bullet points."""
    parts = [_norms(frame, level), _gradient(frame, level), _turning(frame, level, tail), CLOSING]
    return "\n".join(f"- {p}" for p in parts)
