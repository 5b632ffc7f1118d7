"""C4W's figure on the compare page: SEC − none with the authors' weight decay ((SEC + WD) − (none + WD), the
follow-up's registered rows) beside SEC − none without it (the main comparison), per loss and pooled, each around 0
with its 95% interval, so that a reader sees whether SEC's gain survives weight decay. The rows come from
:func:`sec_lib.chapters.compare_weightdecay.figure_rows`; the drawing is :func:`sec_lib.figures.results.paired_differences`'."""
from __future__ import annotations

import matplotlib
import numpy as np
import pandas as pd

from .results import PAIRED_COLUMNS, paired_differences
from .style import style

#: Width (inches): as narrow as the compare page's other SEC − none figures, so that its labels stay legible.
WIDTH = 5.6


def _groups(rows: pd.DataFrame) -> list:
    """The loss groups in the rows' order (the pooled group last, as the rows give it)."""
    return list(dict.fromkeys(rows["loss"]))


def weightdecay_figure(rows: pd.DataFrame, width: float = WIDTH):
    """SEC − none with weight decay and without it, per loss and pooled (``rows``: one row per group and arm with
    :data:`~sec_lib.figures.results.PAIRED_COLUMNS`), the mean over seeds and its 95% interval around 0."""
    missing = [c for c in PAIRED_COLUMNS if c not in rows.columns]
    if missing:
        raise ValueError(f"rows lack the columns {missing}; it needs {', '.join(PAIRED_COLUMNS)}")
    if not len(rows):
        raise ValueError("rows is empty: C4W has no paired difference to draw yet")
    fig = paired_differences(rows, title="", width=width, losses=_groups(rows),
                             xlabel="paired difference [points]; right of 0: SEC helps")
    with style():
        ax = fig.axes[0]
        ax.set_xlabel(ax.get_xlabel(), loc="right")
        fig.suptitle("SEC − none in R@1, with and without weight decay:\nmean and 95% interval",
                     fontsize=matplotlib.rcParams["axes.titlesize"])
    return fig


def weightdecay_caption(rows: pd.DataFrame) -> str:
    """The figure's caption (Markdown): what each row is, the weights each arm trained with (read from ``rows``), and
    which rows carry a registered verdict."""
    missing = [c for c in PAIRED_COLUMNS if c not in rows.columns]
    if missing:
        raise ValueError(f"rows lack the columns {missing}; it needs {', '.join(PAIRED_COLUMNS)}")
    arms = list(dict.fromkeys(rows["arm"]))
    n = f" over {int(np.nanmax(rows['n']))} paired seeds" if "n" in rows.columns and rows["n"].notna().any() else ""
    weights = "; ".join(
        f"{g}: " + ", ".join(f"{a} η = {e}" for a, e in zip(d["arm"], d["eta"]))
        for g, d in rows.groupby("loss", sort=False) if not (d["eta"] == "per loss").all())
    return (f"**Figure.** SEC − none in R@1 for each loss and pooled over the four (per seed the mean over the losses), "
            f"{' and '.join(arms)}: the mean paired difference{n} (dot) and its 95% Student-t interval (whisker), "
            "runs paired on their seed; the vertical line is no effect. The rows with weight decay are C4W's "
            "registered comparisons, (SEC + WD) − (none + WD) (the pooled one a family alone, the losses Holm over "
            "four; the intervals drawn are unadjusted); the rows without it are the main comparison's, SEC at the η "
            f"chosen on held-out classes. The weights each arm trained with (WD: weight decay): {weights}.")
