"""The paper's and the rebuttal's reference numbers, as package data.

The numbers were copied once from Zhang, Li & Zhang, *Deep Metric Learning with Spherical Embedding*
(NeurIPS 2020, arXiv 2011.02785) and its public OpenReview rebuttal into ``sec_lib/data/paper/*.csv``
(``sec_lib/data/paper/README.md`` names each file's source). They ship inside the package and are read
with :mod:`importlib.resources`, so an installed wheel has them too; nothing is typed here.

Every frame carries its ``source`` (a column and ``DataFrame.attrs["source"]``), so the pages keep the
paper's numbers apart from ours.
"""
from __future__ import annotations

import io
from importlib import resources
from typing import Sequence

import numpy as np
import pandas as pd

from .params import Choice

__all__ = ["SOURCES", "REBUTTAL_TABLES", "PAPER_DATASETS", "RETRIEVAL_METRICS", "VARIANT_NAMES", "comparison_label",
           "check_datasets", "paper_table", "paper_gains", "rebuttal_table", "rebuttal_variance", "rebuttal_variance_note", "rebuttal_all", "paper_files"]


def paper_files():
    """The folder of the reference CSVs (``sec_lib/data/paper``), as an :mod:`importlib.resources` Traversable."""
    return resources.files(__package__).joinpath("data", "paper")


#: Human-readable source of each reference table (shown on the pages).
SOURCES = {
    "table1": "paper Table 1 (Zhang, Li & Zhang, NeurIPS 2020)",
    "regularizers": "rebuttal Table 2 (μ = 0 vs batch mean; Cars, semihard)",
    "bn_wn": "rebuttal Table 5 (BatchNorm / WeightNorm; Cars, semihard)",
    "tml": "rebuttal Table 4 (tuplet margin loss)",
    "simclr": "rebuttal Table 1 (SimCLR on CIFAR-10)",
    "variance": "rebuttal, answer to 'do larger variance reductions give larger gains?' (Cars training set)",
}
REBUTTAL_TABLES = ("regularizers", "bn_wn", "tml", "simclr")
PAPER_DATASETS = ("CUB", "Cars", "SOP", "InShop")
RETRIEVAL_METRICS = ("R@1", "R@2", "R@4", "R@8", "NMI", "F1")
#: How the pages name the variants.
VARIANT_NAMES = {"none": "none", "l2reg": "L2-reg", "sec": "SEC",
                 "sec, selected η": "SEC (selected η)", "sec, paper's η": "SEC (paper's η)"}


def comparison_label(variant: str, baseline: str = "none") -> str:
    """'SEC − none', 'L2-reg − none', 'SEC − L2-reg', ..."""
    return f"{VARIANT_NAMES.get(variant, variant)} − {VARIANT_NAMES.get(baseline, baseline)}"


def _read_csv(name: str) -> pd.DataFrame:
    path = paper_files().joinpath(name)
    if not path.is_file():
        raise FileNotFoundError(f"reference table {name} not found in the package folder sec_lib/data/paper "
                                "(it holds the paper's numbers; see its README.md)")
    return pd.read_csv(io.StringIO(path.read_text(encoding="utf-8")))


def _with_source(df: pd.DataFrame, source: str) -> pd.DataFrame:
    df = df.copy()
    df["source"] = source
    df.attrs["source"] = source
    return df


def check_datasets(dataset, valid=PAPER_DATASETS) -> list | None:
    if dataset is None:
        return None
    names = [dataset] if isinstance(dataset, str) else list(dataset)
    for d in names:
        if d not in valid:
            raise ValueError(f"dataset = {d!r} is not valid; valid values: {', '.join(valid)}")
    return names


def paper_table(dataset=None) -> pd.DataFrame:
    """The paper's Table 1 in long-ish form: one row per (dataset, loss, variant), metric columns in percent.

    ``dataset``: None (all of CUB, Cars, SOP, InShop), a name or a list of names. Metric columns
    a dataset does not report (e.g. NMI for In-Shop, R@2 for SOP) are NaN; columns that are NaN for
    every selected row are dropped. Carries ``source`` (column and ``attrs``).
    """
    names = check_datasets(dataset)
    df = pd.concat([_read_csv("table1.csv"), _read_csv("table1_sop_inshop.csv")], ignore_index=True)
    if names is not None:
        df = df[df["dataset"].isin(names)]
    df = df.dropna(axis=1, how="all").reset_index(drop=True)
    return _with_source(df, SOURCES["table1"])


def paper_gains(dataset=("CUB", "Cars"), metrics: Sequence[str] = RETRIEVAL_METRICS) -> pd.DataFrame:
    """The paper's gains over its own baseline: (variant − none) per dataset, loss and metric.

    Tidy columns: dataset, loss, variant ('sec' | 'l2reg'), comparison, metric, paper_none,
    paper_variant, paper_gain, source.
    """
    t = paper_table(dataset)
    metrics = [m for m in metrics if m in t.columns]
    long = t.melt(id_vars=["dataset", "loss", "variant"], value_vars=metrics, var_name="metric", value_name="value")
    base = long[long["variant"] == "none"].drop(columns="variant").rename(columns={"value": "paper_none"})
    other = long[long["variant"] != "none"].rename(columns={"value": "paper_variant"})
    out = other.merge(base, on=["dataset", "loss", "metric"], how="inner")
    out["paper_gain"] = out["paper_variant"] - out["paper_none"]
    out["comparison"] = out["variant"].map(comparison_label)
    out = out.dropna(subset=["paper_gain"])
    cols = ["dataset", "loss", "variant", "comparison", "metric", "paper_none", "paper_variant", "paper_gain"]
    return _with_source(out[cols].reset_index(drop=True), SOURCES["table1"])


def rebuttal_table(name: str) -> pd.DataFrame:
    """One of the rebuttal's tables: 'regularizers' (Table 2), 'bn_wn' (Table 5), 'tml' (Table 4),
    'simclr' (Table 1). Columns that are empty for that table are dropped."""
    Choice(REBUTTAL_TABLES).check("name", name)
    df = _read_csv("rebuttal_tables.csv")
    df = df[df["table"] == name].drop(columns="table").dropna(axis=1, how="all").reset_index(drop=True)
    return _with_source(df, SOURCES[name])


def rebuttal_variance() -> pd.DataFrame:
    """The rebuttal's training-set norm variance without / with SEC per loss (Cars), plus the
    absolute reduction (none − sec) and the ratio none / sec."""
    df = _read_csv("rebuttal_variance.csv")
    df["reduction"] = df["norm_var_none"] - df["norm_var_sec"]
    df["ratio"] = df["norm_var_none"] / df["norm_var_sec"]
    return _with_source(df, SOURCES["variance"])


def rebuttal_variance_note() -> str:
    """The rebuttal gives two training-set norm variances for semihard on Cars without and with SEC, one in its
    Table 2 and one in its answer on variance reductions, that disagree; both are copied as given. The sentence,
    computed from the copies, that every caption showing one of them adds."""
    t2 = rebuttal_table("regularizers")
    t2 = t2[t2["loss"] == "semihard"].set_index("setting")["mean_norm_var"]
    v = rebuttal_variance().set_index("loss").loc["semihard"]
    return (f"The rebuttal gives two norm variances for semihard on Cars without and with SEC: {t2['none']:.3g} → "
            f"{t2['sec']:.3g} in its Table 2 and {v['norm_var_none']:.3g} → {v['norm_var_sec']:.3g} in its answer "
            "on variance reductions; it does not say why they differ, and both are shown as given.")


def rebuttal_all() -> pd.DataFrame:
    """All of the rebuttal's tables in one frame with a ``table`` column."""
    return pd.concat([rebuttal_table(t).assign(table=t) for t in REBUTTAL_TABLES], ignore_index=True)


# ---------------------------------------------------------------- the paper's number beside each claim

def paper_mean_gain(loss: str | None = None, a: str = "none", b: str = "sec", dataset=("CUB", "Cars")) -> float:
    """Table 1's R@1 of ``b`` − ``a`` averaged over ``dataset`` (and over the losses, or for ``loss``)."""
    t = paper_table(tuple(dataset))
    if loss is not None:
        t = t[t["loss"] == loss]
    w = t.pivot_table(index=["dataset", "loss"], columns="variant", values="R@1")
    return float((w[b] - w[a]).mean())


def paper_gain_values(a: str = "none", b: str = "sec", loss: str | None = None, dataset=PAPER_DATASETS) -> list:
    """Table 1's R@1 of ``b`` − ``a`` per dataset and loss (for ``loss`` alone, or every loss): the paper's sizes a
    verdict sets an interval against (:func:`sec_lib.report.size_word`)."""
    t = paper_table(tuple(dataset))
    if loss is not None:
        t = t[t["loss"] == loss]
    w = t.pivot_table(index=["dataset", "loss"], columns="variant", values="R@1")
    return [float(round(x, 6)) for x in (w[b] - w[a]).dropna()]


def paper_size_text(values, dataset=PAPER_DATASETS, what: str = "gains") -> str:
    """'the paper's 1.7–7.5 on CUB, Cars, SOP and In-Shop (Table 1)': how a record names the paper's values and
    where they come from (another kind of data than glyphs)."""
    names = [{"InShop": "In-Shop"}.get(d, d) for d in dataset]
    where = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    lo, hi = min(values), max(values)
    size = f"{lo:+.1f}" if lo == hi else f"{lo:+.1f} to {hi:+.1f}"
    return f"the paper's {what} of {size} R@1 points on {where} (Table 1)"


def paper_loss_gains_text(loss: str, dataset=("CUB", "Cars")) -> str:
    """'CUB +1.23, Cars +4.56': Table 1's SEC − none R@1 for ``loss`` per dataset."""
    t = paper_table(tuple(dataset))
    t = t[t["loss"] == loss].pivot_table(index="dataset", columns="variant", values="R@1")
    return ", ".join(f"{ds} {t.loc[ds, 'sec'] - t.loc[ds, 'none']:+.2f}" for ds in t.index)


def rebuttal_diff(table_a: str, set_a: str, table_b: str, set_b: str, metric: str = "R@1", eta_a=None) -> float:
    """The rebuttal's ``metric`` of (table_b, set_b) − (table_a, set_a) (``eta_a`` picks a row of set_a)."""
    reb = rebuttal_all()
    a = reb[(reb["table"] == table_a) & (reb["setting"] == set_a)]
    if eta_a is not None:
        a = a[np.isclose(a["eta"].astype(float), eta_a)]
    b = reb[(reb["table"] == table_b) & (reb["setting"] == set_b)]
    return float(b[metric].iloc[0]) - float(a[metric].iloc[0])


def rebuttal_tml_text() -> str:
    """'CUB +x, Cars +y': the rebuttal's tuplet-margin SEC − none R@1 per dataset."""
    reb = rebuttal_all()
    t = reb[reb["table"] == "tml"].pivot_table(index="dataset", columns="setting", values="R@1")
    return ", ".join(f"{ds} {t.loc[ds, 'sec'] - t.loc[ds, 'none']:+.2f}" for ds in t.index)


def rebuttal_log10_var_ratio() -> float:
    """The rebuttal's mean over losses of log10(train-norm variance with SEC / without) on Cars."""
    v = rebuttal_variance()
    return float(np.mean(np.log10(v["norm_var_sec"] / v["norm_var_none"])))
