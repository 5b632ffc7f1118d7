"""The "Table 1 at a glance" page: the paper's Table 1 and ours in the same layout (rows loss ×
variant, the same metric columns), the paper's numbers from :mod:`sec_lib.reference`, ours from the
main table's runs (mean [95% CI] over seeds)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..runs import benchmarks
from ..runs import experiments as ex
from .. import reference, report
from . import profile_param
from .common import MAIN_SWEEP, load
from .gains import main_table

#: The notebook's parameters (checked by ``sec_lib.params.notebook_params``).
PARAMS = profile_param()
#: The metric columns of the paper's Table 1 for CUB and Cars, in its order.
TABLE1_METRICS = ("NMI", "F1", "R@1", "R@2", "R@4", "R@8")
#: The page shows them in two groups, so that a row of intervals fits the text column.
METRIC_GROUPS = {"Recall@K": ("R@1", "R@2", "R@4", "R@8"), "Clustering: NMI and F1": ("NMI", "F1")}


def table1_glance(profile, root=None, datasets=None, metrics=None, digits: int = 1) -> dict:
    """The paper's Table 1 and ours in the same layout: {block name: table}, one block per paper
    dataset and one for ours, each with rows loss × variant and the same metric columns (ours as
    'mean [95% CI]' over seeds). ``datasets`` / ``metrics`` default to the profile's
    (:func:`sec_lib.runs.benchmarks.paper_datasets` / :func:`~sec_lib.runs.benchmarks.paper_metrics`: the book's
    own dataset and the paper's metrics for it on a real benchmark; CUB and Cars, NMI, F1 and R@1–8 on glyphs)."""
    name = profile if isinstance(profile, str) else profile.name
    datasets = benchmarks.paper_datasets(name) if datasets is None else datasets
    metrics = benchmarks.paper_metrics(name) if metrics is None else metrics
    frames = load(MAIN_SWEEP, profile, tables=(), root=root)
    return glance_tables(reference.paper_table(list(datasets)), main_table(frames, metrics=metrics), datasets,
                         metrics, digits, ours_name=benchmarks.data_name(name))


def glance_tables(ref: pd.DataFrame, ours: pd.DataFrame, datasets=("CUB", "Cars"), metrics=TABLE1_METRICS,
                  digits: int = 1, ours_name: str = "glyphs") -> dict:
    """:func:`table1_glance` from frames: ``ref`` = :func:`sec_lib.reference.paper_table`, ``ours`` =
    :func:`sec_lib.chapters.gains.main_table` (tidy); ``ours_name`` names our data in the block's title."""
    reference.check_datasets(datasets)

    def number(v):                       # no "-0.0"
        return f"{round(float(v), digits) + 0.0:.{digits}f}"
    metrics = [m for m in metrics if m in ref.columns or m in set(ours["metric"])]
    ours_block = f"ours, {ours_name}"
    blocks = {f"paper, {d}": [] for d in datasets}
    blocks[ours_block] = []
    for loss in ex.MAIN_LOSSES:
        for v in ex.VARIANTS:
            head = {"loss": loss, "variant": reference.VARIANT_NAMES.get(v, v)}
            for d in datasets:
                r = ref[(ref["dataset"] == d) & (ref["loss"] == loss) & (ref["variant"] == v)]
                row = dict(head)
                for m in metrics:
                    val = float(r[m].iloc[0]) if len(r) and m in r.columns else np.nan
                    row[m] = f"{val:.{digits}f}" if np.isfinite(val) else ""
                blocks[f"paper, {d}"].append(row)
            o = ours[(ours["loss"] == loss) & (ours["variant"] == v)].set_index("metric")
            row = dict(head)
            for m in metrics:
                row[m] = (report.format_ci(o.loc[m, "mean"], o.loc[m, "ci_lo"], o.loc[m, "ci_hi"], None,
                                           style="interval", number=number) if m in o.index else "")
            blocks[ours_block].append(row)
    return {k: pd.DataFrame(v) for k, v in blocks.items()}


def best_variant_counts(tables: dict, metric: str = "R@1") -> pd.DataFrame:
    """Per block and loss, which variant has the highest ``metric`` (ours: by the mean): the
    at-a-glance question of Table 1 ("is SEC the best row?")."""
    rows = []
    for block, t in tables.items():
        for loss, sub in t.groupby("loss", sort=False):
            vals = pd.to_numeric(sub[metric].astype(str).str.split(" ").str[0], errors="coerce")
            if vals.notna().any():
                rows.append({"table": block, "loss": loss, "best": sub.loc[vals.idxmax(), "variant"]})
    return pd.DataFrame(rows, columns=["table", "loss", "best"])


def answer(best: pd.DataFrame, metric: str = "R@1") -> str:
    """The page's answer, above its tables: how often SEC is the best row in each block (:func:`glance_sentence`),
    and where the differences between rows are tested."""
    return (f"**The answer.** {glance_sentence(best, metric)} These are orderings of means only: whether a difference "
            "between rows is larger than the seed-to-seed noise is tested, paired by seed, on "
            "[the main table](compare.html).")


def glance_sentence(best: pd.DataFrame, metric: str = "R@1") -> str:
    """How often SEC is the best variant, per block."""
    parts = []
    for block, sub in best.groupby("table", sort=False):
        parts.append(f"{block}: SEC is best for {int((sub['best'] == 'SEC').sum())} of {len(sub)} losses")
    return f"Highest {metric} of the three variants — " + "; ".join(parts) + "."
