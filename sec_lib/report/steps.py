"""Per-step logs of several runs on one grid of steps, so that a mean over runs at a step averages every run."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from ._common import check_columns


def shared_steps(steps: pd.DataFrame, columns: Sequence[str] | None = None) -> pd.DataFrame:
    """The per-step log with every run on one grid of steps, for a mean over runs at each step.

    A committed tier keeps a different subset of each run's steps (``tier.decimate_steps``), so a mean over runs at
    each logged step averages a different subset of runs from step to step, and its curve jumps between them (the μ
    and scale pages drew doubled lines). Where the runs already share their steps (the quick tier) the frame is
    returned as it is. Else each run's ``columns`` (default: every numeric column) are interpolated linearly onto
    one grid, the steps some run logged, evenly thinned to as many as the run with the most rows keeps, within the
    run's own first and last logged step of that column (no extrapolation: NaN outside). Columns: key, step and
    ``columns``."""
    if not isinstance(steps, pd.DataFrame):
        raise ValueError(f"steps must be a pandas DataFrame, got {type(steps).__name__}")
    check_columns(steps, ["key", "step"], "steps")
    if steps.empty or steps.groupby("key")["step"].apply(lambda s: tuple(np.unique(s))).nunique() <= 1:
        return steps
    cols = list(columns) if columns is not None else [
        c for c in steps.columns if c not in ("key", "step") and pd.api.types.is_numeric_dtype(steps[c])]
    check_columns(steps, cols, "steps")
    union = np.unique(steps["step"].to_numpy())
    most = int(steps.groupby("key")["step"].nunique().max())
    grid = union[np.unique(np.linspace(0, len(union) - 1, most).round().astype(int))] if len(union) > most else union
    parts = []
    for key, g in steps.groupby("key", sort=False):
        g = g.sort_values("step", kind="stable")
        out = {"key": key, "step": grid}
        for c in cols:
            ok = g[c].notna().to_numpy()
            x, v = g["step"].to_numpy(float)[ok], pd.to_numeric(g[c], errors="coerce").to_numpy(float)[ok]
            col = np.full(len(grid), np.nan)
            if len(x):
                inside = (grid >= x[0]) & (grid <= x[-1])
                col[inside] = np.interp(grid[inside], x, v)
            out[c] = col
        parts.append(pd.DataFrame(out))
    return pd.concat(parts, ignore_index=True)
