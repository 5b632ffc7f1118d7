"""The paper's reference numbers, and the tables the book's result pages are built from.

Two kinds of numbers meet on the book's pages, and this module keeps them apart by a ``source``
column (and ``DataFrame.attrs["source"]``) on every frame it returns:

* the paper's and the rebuttal's numbers, read from ``data/paper/*.csv`` (copied once from
  Zhang, Li & Zhang, *Deep Metric Learning with Spherical Embedding*, NeurIPS 2020, arXiv
  2011.02785, and its public OpenReview rebuttal; ``data/paper/README.md`` names each file's source);
* ours, computed from the result store's tidy frames (:func:`sec_lib.store.load_runs`) with the
  statistics of :mod:`sec_lib.report`: Student-t 95 % intervals over seeds and paired t-tests
  that pair runs on their seed.

No number is typed here: every value comes from a CSV or from the store. Verdict wording is built
from the numbers with :func:`sec_lib.report.verdict`.

Sections: the paper's tables · the main table (compare page) · the norms page · the train page ·
the data page · notebook parameters.
"""
from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from . import report
from .experiments import MAIN_LOSSES, PROFILE_NAMES, VARIANTS
from .losses import LOSS_NAMES, LOSS_SPECS
from .params import Choice, Device, Mu, Number, ParameterError
from .train import OPTIMIZERS

__all__ = [
    "PAPER_DIR", "SOURCES", "PAPER_DATASETS", "RETRIEVAL_METRICS", "NORM_METRICS", "COMPARISONS", "VARIANT_NAMES",
    "TEST_NAME", "comparison_label",
    # the paper's tables
    "paper_table", "paper_gains", "rebuttal_table", "rebuttal_variance",
    # compare page
    "runs_frame", "setup_sentence", "main_table", "main_table_display", "sec_gain", "sec_gain_display", "gains_vs_paper",
    "gain_sentences", "overall_sentence",
    # norms page
    "norm_summary", "norm_reduction", "norm_sentences", "variance_vs_gain", "variance_gain_correlation",
    "q4_sentence", "grad_slopes_per_run", "grad_slope_stats", "slope_sentence", "norms_verdict",
    # train page
    "train_page_config", "run_header", "is_main_table_run", "config_table", "run_readings", "final_metrics", "run_sentence",
    # data page
    "data_summary", "data_sentence", "font_table", "render_info", "profile_table",
    # notebook parameters
    "NOTEBOOK_PARAMS", "OptionalParam",
]

#: Folder with the copied reference numbers (inside the repository, next to ``sec_lib``).
PAPER_DIR = Path(__file__).resolve().parents[1] / "data" / "paper"

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
NORM_METRICS = ("test_norm_var", "train_norm_var")
#: How the pages name the variants.
VARIANT_NAMES = {"none": "none", "l2reg": "L2-reg", "sec": "SEC"}


def comparison_label(variant: str, baseline: str = "none") -> str:
    """'SEC − none', 'L2-reg − none', 'SEC − L2-reg', ..."""
    return f"{VARIANT_NAMES.get(variant, variant)} − {VARIANT_NAMES.get(baseline, baseline)}"


#: Regularised variant -> how the page names the paired comparison against ``none``.
COMPARISONS = {v: comparison_label(v) for v in ("sec", "l2reg")}
#: Direction each metric is expected to move under SEC (+1 up, -1 down): drives the verdicts.
PERCENT_METRICS = (*RETRIEVAL_METRICS, "MAP@R")
EXPECTED_SIGN = {**{m: +1 for m in (*RETRIEVAL_METRICS, "MAP@R")}, "test_norm_var": -1, "train_norm_var": -1,
                 "test_norm_cv": -1}
TEST_NAME = "paired t-test over seeds (two-sided)"


# =============================================================================================
# The paper's tables
# =============================================================================================

def _read_csv(name: str) -> pd.DataFrame:
    path = PAPER_DIR / name
    if not path.exists():
        raise FileNotFoundError(f"reference table {path} not found; the repository's data/paper/ folder "
                                "holds the paper's numbers (see its README.md)")
    return pd.read_csv(path)


def _with_source(df: pd.DataFrame, source: str) -> pd.DataFrame:
    df = df.copy()
    df["source"] = source
    df.attrs["source"] = source
    return df


def _check_datasets(dataset, valid=PAPER_DATASETS) -> list | None:
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
    names = _check_datasets(dataset)
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


# =============================================================================================
# The main table (compare page)
# =============================================================================================

def runs_frame(frames) -> pd.DataFrame:
    """The per-run table of a :class:`~sec_lib.store.Frames` (or a runs DataFrame itself)."""
    runs = getattr(frames, "runs", frames)
    if not isinstance(runs, pd.DataFrame):
        raise ValueError(f"frames must be a store.Frames or a runs DataFrame, got {type(frames).__name__}")
    for col in ("loss", "variant"):
        if col not in runs.columns:
            raise ValueError(f"the runs frame has no column {col!r}; columns: {list(runs.columns)}")
    return runs


def _order(df: pd.DataFrame, cols=("loss", "variant")) -> pd.DataFrame:
    """Sort rows in the book's order: the paper's losses, then variants none / l2reg / sec."""
    orders = {"loss": MAIN_LOSSES, "variant": VARIANTS}
    keys = []
    for c in cols:
        if c in df.columns:
            known = list(orders.get(c, ()))
            extra = sorted(set(df[c].dropna().astype(str)) - set(known))
            rank = {v: i for i, v in enumerate(known + extra)}
            keys.append(df[c].astype(str).map(rank))
    if not keys:
        return df
    tmp = df.assign(**{f"__k{i}": k for i, k in enumerate(keys)})
    return tmp.sort_values([f"__k{i}" for i in range(len(keys))], kind="stable").drop(
        columns=[f"__k{i}" for i in range(len(keys))]).reset_index(drop=True)


def setup_sentence(runs: pd.DataFrame) -> str:
    """A computed description of the runs a page reads (counts, data, model, iterations, failures)."""
    runs = runs_frame(runs)
    n = len(runs)
    nf = int((runs["status"] != "done").sum()) if "status" in runs.columns else 0
    parts = [f"This page reads **{n} runs** from the result store"]
    dims = []
    for col, what in (("loss", "losses"), ("variant", "variants"), ("seed", "seeds")):
        if col in runs.columns:
            vals = list(dict.fromkeys(runs[col].astype(str)))
            dims.append(f"{len(vals)} {what} ({', '.join(vals)})")
    if dims:
        parts.append(": " + " × ".join(dims))
    det = []
    for col, fmt in (("dataset", "data: {}"), ("model", "model: {}"), ("iterations", "{} iterations"),
                     ("batch_size", "batch {}"), ("embed_dim", "{}-d embedding"), ("device", "device: {}")):
        if col in runs.columns and len(runs):
            vals = sorted(set(runs[col].astype(str)))
            det.append(fmt.format("/".join(vals)))
    text = "".join(parts) + (f" ({', '.join(det)})" if det else "") + "."
    text += (f" **{nf} of them failed** (non-finite loss); they count in no mean." if nf else " All of them finished.")
    return text


def main_table(frames, metrics: Sequence[str] = (*RETRIEVAL_METRICS, *NORM_METRICS),
               level: float = 0.95) -> pd.DataFrame:
    """Ours, per loss × variant: mean and Student-t CI over seeds of each metric (tidy).

    Columns: loss, variant, metric, mean, ci_lo, ci_hi, n (finite values: failed runs do not count),
    n_runs (runs in the cell, failed included), n_failed (runs whose status is not 'done'; only when
    the frame has a ``status`` column). Metrics missing from the frame are left out.
    """
    runs = runs_frame(frames)
    metrics = [m for m in metrics if m in runs.columns]
    if not metrics:
        raise ValueError(f"none of the metrics are in the runs frame; columns: {list(runs.columns)}")
    s = report.summarize(runs, ["loss", "variant"], metrics, level=level)
    counts = runs.groupby(["loss", "variant"], sort=False).size().rename("n_runs").reset_index()
    s = s.merge(counts, on=["loss", "variant"], how="left")
    if "status" in runs.columns:
        failed = (runs["status"] != "done").groupby([runs["loss"], runs["variant"]], sort=False).sum()
        s = s.merge(failed.rename("n_failed").reset_index(), on=["loss", "variant"], how="left")
    out = _order(s)
    out.attrs["source"] = "ours"
    return out


def _num(x, metric: str, digits: int = 2, sign: bool = False) -> str:
    """Percent metrics with ``digits`` decimals, other quantities (norm variances, CVs, slopes) with
    3 significant digits; '−0.00' is printed as '0.00'."""
    if x is None or not np.isfinite(x):
        return "n/a"
    plus = "+" if sign else ""
    if metric in PERCENT_METRICS:
        return f"{round(float(x), digits) + 0.0:{plus}.{digits}f}"
    return f"{float(x) + 0.0:{plus}.3g}"


def _cell(mean, lo, hi, n, metric, digits) -> str:
    if n == 0 or not np.isfinite(mean):
        return "n/a"
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return f"{_num(mean, metric, digits)} (n={n})"
    return f"{_num(mean, metric, digits)} ± {_num((hi - lo) / 2, metric, digits)}"


def main_table_display(table: pd.DataFrame, digits: int = 2) -> pd.DataFrame:
    """One row per loss × variant with ``mean ± CI half-width`` cells (percent metrics with ``digits``
    decimals, other quantities with 3 significant digits), the number of seeds and of failed runs."""
    rows = []
    for (loss, variant), sub in table.groupby(["loss", "variant"], sort=False):
        row = {"loss": loss, "variant": variant}
        for r in sub.itertuples(index=False):
            row[r.metric] = _cell(r.mean, r.ci_lo, r.ci_hi, int(r.n), r.metric, digits)
        row["seeds"] = int(sub["n"].max())
        if "n_failed" in sub.columns:
            row["failed"] = int(sub["n_failed"].max())
        rows.append(row)
    return _order(pd.DataFrame(rows))


def sec_gain(frames, variants: Sequence[str] = ("sec", "l2reg"), baseline: str = "none",
             metrics: Sequence[str] = (*RETRIEVAL_METRICS, *NORM_METRICS), level: float = 0.95) -> pd.DataFrame:
    """Paired difference (variant − none) per loss and metric, pairing runs on their seed.

    Columns: loss, variant, baseline, comparison, metric, mean_a (baseline), mean_b (variant), diff,
    ci_lo, ci_hi, p_value, n_pairs, n_unpaired, test, verdict. The verdict (:func:`sec_lib.report.verdict`)
    checks the paper's direction: up for the retrieval metrics, down for the norm variances.
    Variants absent from the frame are skipped.
    """
    runs = runs_frame(frames)
    if "seed" not in runs.columns:
        raise ValueError("the runs frame has no 'seed' column to pair runs on")
    metrics = [m for m in metrics if m in runs.columns]
    present = set(runs["variant"].dropna())
    if baseline not in present:
        raise ValueError(f"baseline variant {baseline!r} is not in the runs frame; variants present: {sorted(present)}")
    parts = []
    for v in variants:
        if v not in present:
            continue
        with warnings.catch_warnings():   # scipy warns on near-identical pairs; report.paired_diff handles them
            warnings.simplefilter("ignore", RuntimeWarning)
            d = report.paired_diff(runs, by="loss", compare_col="variant", a=baseline, b=v, pair_on="seed",
                                   metrics=metrics, level=level)
        for c in ("mean_a", "mean_b", "diff", "ci_lo", "ci_hi"):   # float noise such as -1.8e-15 -> 0
            d[c] = d[c].round(10) + 0.0
        d.insert(1, "variant", v)
        d.insert(2, "baseline", baseline)
        d.insert(3, "comparison", comparison_label(v, baseline))
        parts.append(d)
    cols = ["loss", "variant", "baseline", "comparison", "metric", "mean_a", "mean_b", "diff", "ci_lo", "ci_hi",
            "p_value", "n_pairs", "n_unpaired", "test", "verdict"]
    if not parts:
        return pd.DataFrame(columns=cols)
    out = pd.concat(parts, ignore_index=True)
    out["test"] = TEST_NAME
    out["verdict"] = [report.verdict(r.diff, r.ci_lo, r.ci_hi, expected_sign=EXPECTED_SIGN.get(r.metric, +1),
                                     n=r.n_pairs) for r in out.itertuples(index=False)]
    out = _order(out[cols], cols=("loss", "variant"))
    out.attrs["source"] = "ours"
    return out


def gains_vs_paper(frames, dataset=("CUB", "Cars"), metrics: Sequence[str] = RETRIEVAL_METRICS,
                   gains: pd.DataFrame | None = None) -> pd.DataFrame:
    """Our gain next to the paper's, per loss, comparison (SEC − none, L2-reg − none), metric and
    paper dataset (tidy). ``gains``: a precomputed :func:`sec_gain` frame (computed when None).

    Columns: dataset, loss, variant, comparison, metric, ours, ours_ci_lo, ours_ci_hi, p_value,
    n_pairs, paper, same_sign (our estimate has the paper's sign), source.
    """
    names = _check_datasets(dataset, ("CUB", "Cars", "SOP", "InShop"))
    g = sec_gain(frames, metrics=metrics) if gains is None else gains
    g = g[g["metric"].isin(metrics) & (g["baseline"] == "none")]
    p = paper_gains(names, metrics)
    out = g.merge(p[["dataset", "loss", "variant", "metric", "paper_gain"]], on=["loss", "variant", "metric"],
                  how="inner")
    out = out.rename(columns={"diff": "ours", "ci_lo": "ours_ci_lo", "ci_hi": "ours_ci_hi", "paper_gain": "paper"})
    out["same_sign"] = np.sign(out["ours"]) == np.sign(out["paper"])
    out["source"] = f"ours (glyphs) vs {SOURCES['table1']}"
    cols = ["dataset", "loss", "variant", "comparison", "metric", "ours", "ours_ci_lo", "ours_ci_hi", "p_value",
            "n_pairs", "paper", "same_sign", "source"]
    out = out[cols]
    out = out.assign(__d=out["dataset"].map({d: i for i, d in enumerate(names)}))
    out = _order(out.sort_values("__d", kind="stable").drop(columns="__d"), cols=("loss", "variant"))
    out.attrs["source"] = out["source"].iloc[0] if len(out) else "ours"
    return out


def _fmt_p(p) -> str:
    if p is None or not np.isfinite(p):
        return "p n/a"
    return f"p = {p:.2g}" if p >= 0.001 else "p < 0.001"


def sec_gain_display(gains: pd.DataFrame, metrics: Sequence[str] | None = None, key_metric: str = "R@1",
                     digits: int = 2) -> pd.DataFrame:
    """Display form of :func:`sec_gain`: one row per loss × comparison, one column per metric with
    ``difference [95% CI]``, then the paired t-test's p-value, and the verdict for ``key_metric``.
    (The raw numbers of every metric are in the tidy frame itself.)"""
    g = gains if metrics is None else gains[gains["metric"].isin(metrics)]
    rows = []
    for (loss, comp), sub in g.groupby(["loss", "comparison"], sort=False):
        row = {"loss": loss, "comparison": comp, "pairs": int(sub["n_pairs"].max())}
        for r in sub.itertuples(index=False):
            ci = (f" [{_num(r.ci_lo, r.metric, digits, True)}, {_num(r.ci_hi, r.metric, digits, True)}]"
                  if np.isfinite(r.ci_lo) else "")
            row[r.metric] = _num(r.diff, r.metric, digits, True) + ci
        key = sub[sub["metric"] == key_metric]
        if len(key):
            row[f"p ({key_metric})"] = _fmt_p(key["p_value"].iloc[0]).replace("p = ", "").replace("p ", "")
            row[f"verdict ({key_metric})"] = key["verdict"].iloc[0]
        rows.append(row)
    return pd.DataFrame(rows)


def gain_sentences(gains: pd.DataFrame, metric: str = "R@1", variant: str = "sec",
                   paper: pd.DataFrame | None = None, baseline: str = "none") -> list[str]:
    """One computed sentence per loss: our paired difference with its CI, the test, the verdict and,
    if ``paper`` (a :func:`gains_vs_paper` frame) is given, the paper's gains on its datasets."""
    g = gains[(gains["metric"] == metric) & (gains["variant"] == variant) & (gains["baseline"] == baseline)]
    out = []
    for r in g.itertuples(index=False):
        if r.n_pairs == 0:
            out.append(f"**{r.loss}**: no paired seeds, so {r.comparison} cannot be tested (verdict: {r.verdict}).")
            continue
        ci = (f"95% CI [{_num(r.ci_lo, metric, 2, True)}, {_num(r.ci_hi, metric, 2, True)}]"
              if np.isfinite(r.ci_lo) else "no CI with one seed")
        s = (f"**{r.loss}**: {r.comparison} on {metric} = {_num(r.diff, metric, 2, True)} points ({ci}, "
             f"{r.n_pairs} paired seeds, {TEST_NAME}, {_fmt_p(r.p_value)}) → verdict: **{r.verdict}**")
        if paper is not None:
            pp = paper[(paper["loss"] == r.loss) & (paper["variant"] == variant) & (paper["metric"] == metric)]
            if len(pp):
                s += "; the paper reports " + ", ".join(f"{x.paper:+.2f} on {x.dataset}" for x in pp.itertuples())
        out.append(s + ".")
    return out


def overall_sentence(gains: pd.DataFrame, metric: str = "R@1", variant: str = "sec", baseline: str = "none") -> str:
    """A computed closing sentence: for how many losses the gain is supported by the CIs, and for
    which losses the variant is worse with an interval entirely below zero."""
    g = gains[(gains["metric"] == metric) & (gains["variant"] == variant) & (gains["baseline"] == baseline)]
    comp = comparison_label(variant, baseline)
    if not len(g):
        return f"No {comp} comparison on {metric} could be computed."
    n = len(g)
    counts = g["verdict"].value_counts()
    rep, part, notr = (int(counts.get(v, 0)) for v in ("reproduced", "partly", "not reproduced"))
    worse = list(g.loc[g["ci_hi"] < 0, "loss"])
    tail = (f" For {', '.join(worse)} the difference is negative with a 95% interval entirely below zero: "
            f"there the regulariser hurts." if worse else "")
    if rep == n:
        return (f"{comp} improves {metric} for all {n} losses with 95% intervals that exclude zero: the paper's "
                "main claim holds on this benchmark.")
    if rep == 0 and part == 0:
        return (f"{comp} does not improve {metric} here for any of the {n} losses (every point estimate is zero "
                "or negative): on this benchmark the paper's main claim is not reproduced." + tail)
    if rep == 0:
        return (f"{comp} does not give a gain in {metric} that the 95% intervals support for any of the {n} losses "
                f"({part} point the paper's way but their intervals include zero, {notr} point the other way); "
                "the data here do not confirm the paper's claim." + tail)
    return (f"{comp} improves {metric} with intervals that exclude zero for {rep} of {n} losses; {part} point the "
            f"paper's way without interval support and {notr} point the other way, so the claim holds only in part."
            + tail)


# =============================================================================================
# The norms page
# =============================================================================================

def _run_attrs(runs: pd.DataFrame) -> pd.DataFrame:
    cols = [c for c in ("key", "loss", "variant", "seed", "status") if c in runs.columns]
    return runs[cols]


def norm_summary(frames, level: float = 0.95) -> pd.DataFrame:
    """Per loss × variant: mean and CI over seeds of the final norm statistics of each run.

    Metrics: test_norm_mean, test_norm_var, test_norm_cv (std / mean, scale-free: the variance
    shrinks with the norms themselves, e.g. under L2-reg), train_norm_var. Tidy, as :func:`main_table`.
    """
    runs = runs_frame(frames).copy()
    tn = getattr(frames, "test_norms", None)
    if tn is not None and len(tn) and "norm" in tn.columns:
        per = tn.groupby("key")["norm"].agg(["mean", "std", "var"])
        per = per.assign(cv=per["std"] / per["mean"])
        runs = runs.merge(per[["cv"]].rename(columns={"cv": "test_norm_cv"}), left_on="key", right_index=True,
                          how="left")
    metrics = [m for m in ("test_norm_mean", "test_norm_var", "test_norm_cv", "train_norm_var") if m in runs.columns]
    return main_table(runs, metrics=metrics, level=level)


def norm_reduction(frames, variants=("sec", "l2reg"), level: float = 0.95) -> pd.DataFrame:
    """Paired change (variant − none) of the final norm statistics per loss, with verdicts expecting a decrease."""
    runs = runs_frame(frames).copy()
    tn = getattr(frames, "test_norms", None)
    if tn is not None and len(tn) and "norm" in tn.columns:
        per = tn.groupby("key")["norm"].agg(["mean", "std"])
        runs = runs.merge((per["std"] / per["mean"]).rename("test_norm_cv"), left_on="key", right_index=True,
                          how="left")
    metrics = [m for m in ("test_norm_var", "test_norm_cv", "train_norm_var") if m in runs.columns]
    return sec_gain(runs, variants=variants, metrics=metrics, level=level)


def variance_vs_gain(frames, metric: str = "R@1", var_col: str = "train_norm_var", paper_dataset: str = "Cars",
                     level: float = 0.95) -> pd.DataFrame:
    """Reviewer question 4: does a larger norm-variance reduction go with a larger gain?

    One row per (source, loss): ``var_none``, ``var_sec``, ``reduction`` (none − sec),
    ``ratio`` (none / sec), ``gain`` (SEC − none in ``metric``), with paired CIs for ours
    (``reduction_ci_*``, ``gain_ci_*``, ``n_pairs``) and NaN CIs for the rebuttal's single runs.
    Sources: ``ours`` (variances of our embeddings, glyphs) and ``rebuttal`` (training-set
    variances on Cars from the rebuttal, gains from paper Table 1 on ``paper_dataset``). The two
    are on different scales (different networks, embedding sizes and data): compare rankings, not values.
    """
    _check_datasets(paper_dataset)
    runs = runs_frame(frames)
    if var_col not in runs.columns:
        raise ValueError(f"var_col = {var_col!r} is not a column of the runs frame; valid: {list(NORM_METRICS)}")
    g = sec_gain(runs, variants=("sec",), metrics=[metric, var_col], level=level)
    rows = []
    for loss, sub in g.groupby("loss", sort=False):
        gm = sub[sub["metric"] == metric].iloc[0]
        vm = sub[sub["metric"] == var_col].iloc[0]
        rows.append({"source": "ours", "loss": loss, "var_none": vm.mean_a, "var_sec": vm.mean_b,
                     "reduction": -vm["diff"], "reduction_ci_lo": -vm.ci_hi, "reduction_ci_hi": -vm.ci_lo,
                     "ratio": vm.mean_a / vm.mean_b if vm.mean_b else math.nan,
                     "gain": gm["diff"], "gain_ci_lo": gm.ci_lo, "gain_ci_hi": gm.ci_hi, "n_pairs": int(gm.n_pairs)})
    rv = rebuttal_variance()
    pg = paper_gains(paper_dataset, [metric])
    pg = pg[pg["variant"] == "sec"].set_index("loss")["paper_gain"]
    for r in rv.itertuples(index=False):
        rows.append({"source": "rebuttal", "loss": r.loss, "var_none": r.norm_var_none, "var_sec": r.norm_var_sec,
                     "reduction": r.reduction, "reduction_ci_lo": math.nan, "reduction_ci_hi": math.nan,
                     "ratio": r.ratio, "gain": pg.get(r.loss, math.nan), "gain_ci_lo": math.nan,
                     "gain_ci_hi": math.nan, "n_pairs": 1})
    out = _order(pd.DataFrame(rows), cols=("loss",))
    out = out.sort_values("source", key=lambda s: s.map({"ours": 0, "rebuttal": 1}), kind="stable")
    out = out.reset_index(drop=True)
    out.attrs["source"] = f"ours; {SOURCES['variance']} with gains from {SOURCES['table1']} ({paper_dataset})"
    out.attrs["metric"], out.attrs["var_col"], out.attrs["paper_dataset"] = metric, var_col, paper_dataset
    return out


def variance_gain_correlation(vvg: pd.DataFrame, x: str = "reduction") -> pd.DataFrame:
    """Spearman rank correlation between variance reduction (or ``ratio``) and gain, per source.

    With four losses a rank correlation can only take the values -1, -0.8, ..., 1, so no p-value is
    given: the page reports it as a description, not a test.
    """
    from scipy import stats
    if x not in ("reduction", "ratio"):
        raise ValueError(f"x = {x!r} is not valid; valid values: 'reduction', 'ratio'")
    rows = []
    for src, sub in vvg.groupby("source", sort=False):
        sub = sub[np.isfinite(sub[x]) & np.isfinite(sub["gain"])]
        if len(sub) >= 3 and sub[x].nunique() > 1 and sub["gain"].nunique() > 1:
            rho = float(stats.spearmanr(sub[x], sub["gain"]).statistic)
        else:
            rho = math.nan
        rows.append({"source": src, "x": x, "n_losses": len(sub), "spearman_rho": rho})
    return pd.DataFrame(rows)


def grad_slopes_per_run(frames, skip_fraction: float = 0.0) -> pd.DataFrame:
    """Per run: the median, mean and spread of the per-step log-log slope of ‖∂L/∂f_i‖ against ‖f_i‖,
    the mean r² of those fits and the fraction of steps with a negative slope.

    ``skip_fraction`` drops that first fraction of each run's steps (e.g. 0.1 for a warm-up).
    """
    runs = runs_frame(frames)
    steps = getattr(frames, "steps", None)
    if steps is None or "grad_slope" not in steps.columns:
        raise ValueError("frames.steps with a 'grad_slope' column is needed (train with instrument=True)")
    if not 0.0 <= skip_fraction < 1.0:
        raise ValueError(f"skip_fraction = {skip_fraction!r} is not valid; expected a number in [0, 1)")
    rows = []
    for key, s in steps.groupby("key", sort=False):
        s = s.sort_values("step")
        s = s[s["step"] > s["step"].max() * skip_fraction]
        v = s["grad_slope"].to_numpy(float)
        v = v[np.isfinite(v)]
        r2 = s["grad_r2"].to_numpy(float) if "grad_r2" in s else np.array([])
        rows.append({"key": key, "slope_median": float(np.median(v)) if len(v) else math.nan,
                     "slope_mean": float(v.mean()) if len(v) else math.nan,
                     "slope_std": float(v.std()) if len(v) else math.nan,
                     "frac_negative": float((v < 0).mean()) if len(v) else math.nan,
                     "r2_mean": float(np.nanmean(r2)) if np.isfinite(r2).any() else math.nan, "n_steps": len(v)})
    per = pd.DataFrame(rows, columns=["key", "slope_median", "slope_mean", "slope_std", "frac_negative",
                                      "r2_mean", "n_steps"])
    return _order(_run_attrs(runs).merge(per, on="key", how="inner"))


def grad_slope_stats(frames, skip_fraction: float = 0.0, level: float = 0.95) -> pd.DataFrame:
    """Per loss × variant: mean and CI over runs of each run's median slope, fraction of negative
    slopes and mean r² (tidy; see :func:`grad_slopes_per_run`)."""
    per = grad_slopes_per_run(frames, skip_fraction)
    return main_table(per, metrics=("slope_median", "frac_negative", "r2_mean"), level=level)


def norm_sentences(reduction: pd.DataFrame, metric: str = "test_norm_cv", variant: str = "sec") -> list[str]:
    """Computed sentences: does ``variant`` lower a norm statistic against none, per loss (paired, CI, verdict)?"""
    what = {"test_norm_var": "the test-set norm variance", "test_norm_cv": "the test-set norm CV (std / mean)",
            "train_norm_var": "the training-set norm variance"}.get(metric, metric)
    g = reduction[(reduction["metric"] == metric) & (reduction["variant"] == variant)]
    out = []
    for r in g.itertuples(index=False):
        if r.n_pairs == 0:
            out.append(f"**{r.loss}**: no paired seeds (verdict: {r.verdict}).")
            continue
        ci = f"95% CI [{r.ci_lo:+.3g}, {r.ci_hi:+.3g}]" if np.isfinite(r.ci_lo) else "no CI with one seed"
        out.append(f"**{r.loss}**: {r.comparison} changes {what} from {r.mean_a:.3g} to {r.mean_b:.3g} "
                   f"(difference {r.diff:+.3g}, {ci}, {_fmt_p(r.p_value)}) → verdict on 'it decreases': "
                   f"**{r.verdict}**.")
    return out


def q4_sentence(corr: pd.DataFrame) -> str:
    """A computed reading of :func:`variance_gain_correlation` (reviewer question 4)."""
    parts = []
    for r in corr.itertuples(index=False):
        who = "our runs" if r.source == "ours" else "the rebuttal's numbers (with the paper's gains)"
        if not np.isfinite(r.spearman_rho):
            parts.append(f"for {who} the rank correlation is undefined ({r.n_losses} losses with finite values)")
            continue
        rho = r.spearman_rho
        direction = ("larger reductions go with larger gains" if rho >= 0.75 else
                     "a weak tendency for larger reductions to go with larger gains" if rho > 0 else
                     "larger reductions go with smaller gains" if rho <= -0.75 else
                     "a weak tendency for larger reductions to go with smaller gains" if rho < 0 else
                     "no monotone relation")
        parts.append(f"for {who} Spearman's ρ = {r.spearman_rho:+.2f} over {r.n_losses} losses ({direction})")
    n = int(corr["n_losses"].max()) if len(corr) else 0
    return ("Across losses, " + "; ".join(parts) + f". With {n} points a rank correlation is a description, not "
            "evidence: its permutation distribution has only a handful of values.")


def slope_sentence(per_run: pd.DataFrame) -> str:
    """A computed reading of :func:`grad_slopes_per_run`: the typical slope per variant and how often it is negative."""
    parts = []
    for v, sub in per_run.groupby("variant", sort=False):
        med = sub["slope_median"].median()
        neg = sub["frac_negative"].mean()
        parts.append(f"{VARIANT_NAMES.get(v, v)}: median slope {med:+.2f}, negative in {100 * neg:.0f}% of steps")
    r2 = per_run["r2_mean"].mean()
    return ("Within a training batch, the gradient magnitude falls with the norm when the slope is negative; "
            "the theory's −1 holds only at a fixed direction. Per variant (over losses and seeds) — "
            + "; ".join(parts) + f". The mean r² of the per-batch fits is {r2:.2f}, i.e. the norm explains "
            f"{'most' if r2 >= 0.5 else 'a minority'} of the batch's spread in gradient size.")


def norms_verdict(reduction: pd.DataFrame, corr: pd.DataFrame, per_run: pd.DataFrame) -> str:
    """The norms page's computed closing paragraph (questions 1-3 of the page)."""
    out = []
    for metric, what in (("test_norm_cv", "the relative spread of the test norms (CV)"),
                         ("test_norm_var", "the raw test norm variance")):
        g = reduction[(reduction["metric"] == metric) & (reduction["variant"] == "sec")]
        if len(g):
            c = g["verdict"].value_counts()
            out.append(f"SEC lowers {what} with a 95% interval below zero for {int(c.get('reproduced', 0))} of "
                       f"{len(g)} losses (point estimate only: {int(c.get('partly', 0))}; no decrease: "
                       f"{int(c.get('not reproduced', 0))}).")
    gl = reduction[(reduction["metric"] == "test_norm_cv") & (reduction["variant"] == "l2reg")]
    gs = reduction[(reduction["metric"] == "test_norm_cv") & (reduction["variant"] == "sec")]
    if len(gl) and len(gs):
        m = gs.merge(gl, on="loss", suffixes=("_sec", "_l2"))
        k = int((m["mean_b_sec"] < m["mean_b_l2"]).sum())
        out.append(f"SEC's mean CV is below L2-reg's for {k} of {len(m)} losses.")
    if len(corr):
        rho = dict(zip(corr["source"], corr["spearman_rho"]))
        o, r = rho.get("ours", math.nan), rho.get("rebuttal", math.nan)
        if np.isfinite(o) and np.isfinite(r):
            agree = "the same sign" if np.sign(o) == np.sign(r) and o != 0 else "different signs"
            out.append(f"On question 4 our rank correlation (ρ = {o:+.2f}) and the rebuttal's (ρ = {r:+.2f}) have "
                       f"{agree}; with four losses neither settles the question.")
    if len(per_run):
        med = per_run["slope_median"].median()
        out.append(f"The median per-batch gradient-vs-norm slope over all runs is {med:+.2f}: "
                   + ("gradients do shrink with the norm, as Proposition 2 implies." if med < 0 else
                      "within a batch, larger norms do not come with smaller gradients here."))
    return " ".join(out) if out else "No runs to judge."



# =============================================================================================
# The train page
# =============================================================================================

def _default_lr_profile(profile, optimizer: str, run_pilot: bool):
    """The profile with the learning-rate pilot's choice for ``optimizer``, exactly as the sweeps
    build it (so a page's run has the same store key as the sweep's run)."""
    from . import experiments as ex
    from .store import ResultStore
    pilot = ex.lr_pilot(profile)
    store = ResultStore()
    if not all(store.has(c) for c in pilot):
        if not run_pilot:
            raise KeyError("the learning-rate pilot has not run yet: python -m sec_lib.book run --only pilot")
        for c in pilot:
            store.run(c)
    pilot_opt = optimizer if optimizer in profile.lr_pilot else "adam"   # adamw: Adam's rate
    q = ex.tuned(profile, store, pilot_opt)
    if pilot_opt != optimizer:
        import dataclasses
        q = dataclasses.replace(q, base=dict(q.base, optimizer=optimizer))
    return q


def train_page_config(profile: str, dataset: str = "glyphs", loss: str = "semihard", variant: str = "none",
                      eta=None, mu=None, optimizer: str = "adam", iterations=None, seed: int = 0, device=None,
                      run_pilot: bool = True):
    """The TrainConfig of the train page.

    Glyph runs are built with :func:`sec_lib.experiments.config` on the pilot-tuned profile, as the
    main table's sweep builds them, so with the defaults (eta, mu, iterations, device = None,
    optimizer 'adam') the page shows *the same run* as the main table (same store key). Toy runs use
    the profile's ``toy`` settings. ``eta`` / ``mu`` override the variant's regulariser (variant
    'none' takes neither); ``iterations`` / ``device`` override the profile's.
    ``run_pilot``: train the (small) learning-rate pilot if the store lacks it, else raise KeyError.
    """
    from . import experiments as ex
    from .train import TrainConfig
    p = ex.get_profile(profile)
    Choice(("glyphs", "toy")).check("dataset", dataset)
    Choice(ex.VARIANTS).check("variant", variant)
    Choice(OPTIMIZERS).check("optimizer", optimizer)
    if variant == "none" and ((eta is not None and eta != 0) or mu is not None):
        raise ParameterError(f"variant 'none' has no regulariser: eta must be None or 0 and mu None "
                             f"(got eta={eta!r}, mu={mu!r}); choose variant 'sec' or 'l2reg' to set them")
    if variant == "l2reg" and mu is not None and mu != "zero":
        raise ParameterError(f"parameter 'mu' = {mu!r} is not valid with variant 'l2reg' (μ = 0); "
                             "valid values: None or 'zero' (use variant 'sec' for other targets)")
    changes = {}
    if eta is not None:
        changes["eta"] = Number(0, math.inf).check("eta", eta)
    if mu is not None:
        changes["mu"] = Mu().check("mu", mu)
    if iterations is not None:
        changes["iterations"] = Number(1, 10**8, True).check("iterations", iterations)
    if device is not None:
        changes["device"] = Device().check("device", device)      # before the pilot trains anything
    if dataset == "glyphs":
        q = _default_lr_profile(p, optimizer, run_pilot)
        cfg = ex.config(q, loss, variant, seed, **changes)
    else:
        base = dict(p.toy, loss=loss, seed=seed, optimizer=optimizer)
        if variant == "sec":
            base.update(eta=ex.ETA_SEC.get(loss, 1.0), mu="batch")
        elif variant == "l2reg":
            base.update(eta=ex.ETA_L2, mu="zero")
        base.update(changes)
        if base.get("eta", 0) == 0:
            base.update(eta=0.0, mu="batch", momentum=1.0)
        base["batch_size"] = base["batch_size"] // LOSS_SPECS[loss].k * LOSS_SPECS[loss].k   # P x K for this loss
        cfg = TrainConfig(**base)
    return cfg.validate()


def run_header(result, stored: bool, profile: str) -> str:
    """A computed opening line for the train page: what ran, whether it was loaded or trained, and
    whether it is one of the main table's runs."""
    cfg = result.config
    reg = {"none": "no regulariser", "l2reg": f"L2-reg, η = {cfg.eta:g} (μ = 0)",
           "sec": f"SEC, η = {cfg.eta:g}, μ = batch mean"}.get(cfg.variant, f"η = {cfg.eta:g}, μ = {cfg.mu}")
    how = "loaded from the result store" if stored else "trained just now and stored"
    main = is_main_table_run(cfg, profile)
    return (f"**{cfg.loss} loss, {reg}**, {cfg.optimizer} (lr {cfg.lr:g}), {cfg.iterations} iterations, seed "
            f"{cfg.seed}, on {cfg.dataset} ({cfg.model}, {cfg.embed_dim}-d embedding). The run was {how}; it took "
            f"{result.wall_s:.0f} s and its status is **{result.failure or result.status}**. It "
            + ("is" if main else "is not") + f" one of the main table's runs (profile {profile}).")


def is_main_table_run(cfg, profile: str) -> bool:
    """Whether ``cfg`` is one of the main table's runs of ``profile`` (same store key)."""
    from . import experiments as ex
    from .store import run_key
    try:
        from .store import ResultStore
        keys = {run_key(c) for c in ex.chapter_configs("compare", profile, ResultStore())}
    except KeyError:
        return False
    return run_key(cfg) in keys


def config_table(cfg) -> pd.DataFrame:
    """The run's configuration as a two-column table (setting, value)."""
    from .store import run_key
    d = cfg.to_dict()
    rows = [{"setting": k, "value": str(v)} for k, v in d.items()]
    rows.append({"setting": "variant", "value": cfg.variant})
    rows.append({"setting": "store key", "value": run_key(cfg)})
    return pd.DataFrame(rows)


def _factor(a: float, b: float) -> str:
    if not (np.isfinite(a) and np.isfinite(b)) or min(abs(a), abs(b)) == 0:
        return "n/a"
    return f"{max(a, b) / min(a, b):.3g}×"


def run_readings(result) -> dict:
    """One computed sentence per instrument of a run (keys: loss, tracked, mean_norm, norm_var, grad,
    slope, dtheta, cosines, violations, evals). Sentences describe the numbers; they judge nothing."""
    st, out = result.steps, {}
    if len(st) == 0:
        note = f"No steps were recorded (the run {result.failure})." if result.failure else "No steps were recorded."
        return {k: note for k in
                ("loss", "tracked", "mean_norm", "norm_var", "grad", "slope", "dtheta", "cosines", "violations", "evals")}
    first, last = st.iloc[0], st.iloc[-1]
    k = max(1, len(st) // 10)
    head, tail = st.iloc[:k], st.iloc[-k:]
    steps_word = "step" if k == 1 else f"{k} steps"
    l0, l1 = head["loss_metric"].mean(), tail["loss_metric"].mean()
    out["loss"] = (f"The metric loss {'fell' if l1 < l0 else 'rose'} from {l0:.3g} (first {steps_word}) to "
                   f"{l1:.3g} (last {steps_word})"
                   + (f"; the weighted regulariser ended at {tail['loss_sec'].mean():.3g}."
                      if (st['loss_sec'].fillna(0) != 0).any() else "; this run has no regulariser."))
    tr = result.tracked
    if len(tr):
        a = tr[tr["step"] == tr["step"].min()]["norm"]
        b = tr[tr["step"] == tr["step"].max()]["norm"]
        out["tracked"] = (f"At step {int(tr['step'].min())} the tracked samples' norms span {a.min():.3g}–{a.max():.3g} "
                          f"(max/min {_factor(a.min(), a.max())}); at step {int(tr['step'].max())} they span "
                          f"{b.min():.3g}–{b.max():.3g} (max/min {_factor(b.min(), b.max())}).")
    else:
        out["tracked"] = "No samples were tracked in this run."
    if "norm_mean" in st:
        mu = st["mu"].dropna() if "mu" in st else pd.Series(dtype=float)
        out["mean_norm"] = (f"The batch mean norm went from {first['norm_mean']:.3g} to {last['norm_mean']:.3g}"
                            + (f"; μ tracked it, ending at {mu.iloc[-1]:.3g}." if len(mu) else "."))
        out["norm_var"] = (f"The within-batch norm variance went from {head['norm_var'].mean():.3g} to "
                           f"{tail['norm_var'].mean():.3g} ({'down' if tail['norm_var'].mean() < head['norm_var'].mean() else 'up'}"
                           f" by {_factor(head['norm_var'].mean(), tail['norm_var'].mean())}, first vs last {steps_word}).")
    gs = result.grad_scatter
    if len(gs):
        from .plots import loglog_line
        fits = [(int(s_), loglog_line(d["norm"], d["grad_norm"])[0]) for s_, d in gs.groupby("step")]
        out["grad"] = ("Fitted log-log slopes of ‖∂L/∂f_i‖ on ‖f_i‖: "
                       + ", ".join(f"{sl:+.2f} at step {s_}" for s_, sl in fits)
                       + " (−1 would mean the norm alone sets the gradient size).")
    else:
        out["grad"] = "No per-sample gradients were kept in this run."
    sl = st["grad_slope"].dropna() if "grad_slope" in st else pd.Series(dtype=float)
    out["slope"] = (f"Over all steps the per-batch slope has median {sl.median():+.2f} (interquartile range "
                    f"{sl.quantile(0.25):+.2f} to {sl.quantile(0.75):+.2f})." if len(sl) else "No slopes were recorded.")
    dt = st.dropna(subset=["dtheta_mean"]) if "dtheta_mean" in st else st.iloc[:0]
    if len(dt):
        out["dtheta"] = (f"A sample turned on average {np.degrees(dt['dtheta_mean'].mean()):.3g}° per update; the "
                         f"spread across the batch (CV) averaged {dt['dtheta_cv'].mean():.2f} over the run, "
                         f"{dt['dtheta_cv'].iloc[: max(1, len(dt) // 10)].mean():.2f} at the start and "
                         f"{dt['dtheta_cv'].iloc[-max(1, len(dt) // 10):].mean():.2f} at the end.")
    else:
        out["dtheta"] = "No angle changes were recorded."
    cs = result.cosines
    if len(cs):
        pos, neg = cs[cs["kind"] == "pos"]["cos"], cs[cs["kind"] == "neg"]["cos"]
        out["cosines"] = (f"On the test classes, positive pairs have mean cosine {pos.mean():.2f} and negative pairs "
                          f"{neg.mean():.2f} (gap {pos.mean() - neg.mean():.2f}).")
    else:
        out["cosines"] = "No test cosines (the run did not finish)."
    out["violations"] = (f"Violating triplets: {head['violations'].mean():.3f} of the batch's triplets at the start, "
                         f"{tail['violations'].mean():.3f} at the end." if "violations" in st else
                         "No violations were recorded.")
    ev = result.evals
    if len(ev) and "R@1" in ev:
        best = ev.loc[ev["R@1"].idxmax()]
        out["evals"] = (f"Test R@1 went from {ev['R@1'].iloc[0]:.2f} % at step {int(ev['step'].iloc[0])} to "
                        f"{ev['R@1'].iloc[-1]:.2f} % at step {int(ev['step'].iloc[-1])} (best {best['R@1']:.2f} % "
                        f"at step {int(best['step'])}).")
    else:
        out["evals"] = "No test evaluations were recorded."
    return out


_RUN_METRICS = ("R@1", "R@2", "R@4", "R@8", "NMI", "F1", "MAP@R", "test_norm_mean", "test_norm_var",
                "train_norm_mean", "train_norm_var", "mean_step_time")


def final_metrics(result) -> pd.DataFrame:
    """The final numbers of one run (a RunResult, or a Frames/runs frame with one run) as a
    two-column table: metric, value."""
    if hasattr(result, "metrics") and hasattr(result, "config"):
        metrics = dict(result.metrics)
        wall = result.wall_s
    else:
        runs = runs_frame(result)
        if len(runs) != 1:
            raise ValueError(f"final_metrics needs exactly one run, got {len(runs)}")
        metrics = runs.iloc[0].to_dict()
        wall = metrics.get("wall_s", math.nan)
    rows = [{"metric": m, "value": float(metrics[m])} for m in _RUN_METRICS if m in metrics
            and metrics[m] is not None and not (isinstance(metrics[m], float) and math.isnan(metrics[m]))]
    rows.append({"metric": "wall_s", "value": float(wall)})
    if getattr(result, "failed_step", None) is not None:        # a failed run: where it stopped
        rows.append({"metric": "failed at step", "value": float(result.failed_step)})
    return pd.DataFrame(rows)


def run_sentence(result) -> str:
    """A computed one-paragraph reading of one run (status, R@1, the norm spread, SEC's μ)."""
    cfg = result.config
    if result.status != "done":
        return (f"This run ({cfg.loss}, variant {cfg.variant}) **{result.failure}**. The failure is part of "
                "the result; the instruments above show the steps before it.")
    m, st = result.metrics, result.steps
    out = [f"After {cfg.iterations} iterations, {cfg.loss} with variant **{cfg.variant}** reaches R@1 = "
           f"{m.get('R@1', math.nan):.2f} % on the {cfg.dataset} test classes (never seen in training)."]
    if len(st) and "norm_var" in st and st["norm_var"].notna().any():
        first, last = st["norm_var"].iloc[0], st["norm_var"].iloc[-1]
        nm0, nm1 = st["norm_mean"].iloc[0], st["norm_mean"].iloc[-1]
        out.append(f"The batch mean norm went from {nm0:.3g} to {nm1:.3g} and the batch norm variance from "
                   f"{first:.3g} to {last:.3g} ({'down' if last < first else 'up'} by a factor "
                   f"{max(first, last) / max(min(first, last), 1e-12):.3g}).")
    if "grad_slope" in st and st["grad_slope"].notna().any():
        out.append(f"The median log-log slope of ‖∂L/∂f‖ against ‖f‖ within a batch is "
                   f"{st['grad_slope'].median():.2f} (theory: −1 at a fixed direction).")
    return " ".join(out)


# =============================================================================================
# The data page
# =============================================================================================

def data_summary(train_ds, test_ds) -> pd.DataFrame:
    """Class and instance counts of the two splits of a dataset (computed from the dataset objects)."""
    rows = []
    for name, ds in (("train", train_ds), ("test", test_ds)):
        counts = np.bincount(np.asarray(ds.labels), minlength=int(ds.num_classes))
        shape = tuple(ds.x.shape[1:]) if hasattr(ds, "x") else tuple(ds[0][0].shape)
        rows.append({"split": name, "classes": int(ds.num_classes), "samples": int(len(ds)),
                     "per_class_min": int(counts.min()), "per_class_max": int(counts.max()),
                     "sample_shape": " × ".join(map(str, shape))})
    return pd.DataFrame(rows)


def font_table(ds) -> pd.DataFrame:
    """Fonts of a glyph dataset with their versions (from the cache manifest) and how many images
    of the dataset each one drew."""
    manifest = getattr(ds, "manifest", None) or {}
    fonts = manifest.get("fonts")
    if not fonts:
        raise ValueError("the dataset has no manifest with a 'fonts' list (only the glyphs dataset has one)")
    df = pd.DataFrame(fonts)
    if hasattr(ds, "font_index"):
        counts = np.bincount(np.asarray(ds.font_index), minlength=len(df))
        df["images"] = counts[: len(df)]
    return df


def data_sentence(train_ds, test_ds, profile) -> str:
    """A computed summary of a dataset's split and of what ``profile`` (a Profile) uses of it."""
    shared = len(set(train_ds.class_names) & set(test_ds.class_names))
    b = profile.base
    tc, vc = b.get("train_classes"), b.get("test_classes")
    return (f"The benchmark has **{train_ds.num_classes} training classes** ({len(train_ds)} images) and "
            f"**{test_ds.num_classes} test classes** ({len(test_ds)} images); {shared} classes appear in both "
            f"splits. The `{profile.name}` profile trains on "
            f"{'all' if tc is None else f'the first {min(tc, train_ds.num_classes)}'} training classes and tests on "
            f"{'all' if vc is None else f'the first {min(vc, test_ds.num_classes)}'} test classes, at "
            f"{b.get('image_size')} × {b.get('image_size')} pixels.")


def render_info(ds) -> pd.DataFrame:
    """How a glyph dataset's cached images were made (setting, value), from its cache manifest."""
    m = getattr(ds, "manifest", None) or {}
    if not m:
        raise ValueError("the dataset has no cache manifest (only the glyphs dataset has one)")
    rows = [(k, m.get(k)) for k in ("format", "generator_version", "image_size", "instances_per_class", "seed",
                                    "num_train_classes", "num_test_classes", "num_images", "generation_seconds",
                                    "tensor_file", "sha256") if k in m]
    rows += [(f"{k} version", v) for k, v in (m.get("versions") or {}).items()]
    return pd.DataFrame([{"setting": k, "value": str(v)} for k, v in rows])


def profile_table() -> pd.DataFrame:
    """What each profile trains on: classes, image size, model, iterations, batch, seeds (from experiments.PROFILES)."""
    from . import experiments as ex
    rows = []
    for name, p in ex.PROFILES.items():
        b = p.base
        rows.append({"profile": name, "dataset": b.get("dataset", "glyphs"),
                     "train classes": b.get("train_classes") or "all", "test classes": b.get("test_classes") or "all",
                     "image size": b.get("image_size"), "model": b.get("model", "smallcnn"),
                     "embedding dim": b.get("embed_dim"), "iterations": b.get("iterations"),
                     "batch": b.get("batch_size"), "seeds": len(p.seeds), "device": b.get("device", "cpu")})
    return pd.DataFrame(rows)


# =============================================================================================
# Notebook parameters
# =============================================================================================

class OptionalParam:
    """``None`` or a value accepted by ``spec`` (a :mod:`sec_lib.params` spec)."""

    def __init__(self, spec):
        self.spec = spec

    def check(self, name, value):
        if value is None:
            return None
        try:
            return self.spec.check(name, value)
        except ParameterError as err:
            raise ParameterError(f"{err} (or None for the default)") from None


def _notebook_params() -> dict:
    profile = {"profile": Choice(PROFILE_NAMES)}
    return {
        "data": dict(profile),
        "compare": dict(profile),
        "norms": dict(profile),
        "train": {**profile, "dataset": Choice(("glyphs", "toy")), "loss": Choice(tuple(LOSS_NAMES)),
                  "variant": Choice(VARIANTS), "eta": OptionalParam(Number(0, 1e6)), "mu": OptionalParam(Mu()),
                  "optimizer": Choice(tuple(OPTIMIZERS)), "iterations": OptionalParam(Number(1, 10**8, True)),
                  "seed": Number(0, 2**31 - 1, True), "device": OptionalParam(Device())},
    }


#: Parameter specs of the data, train, compare and norms notebooks (``sec_lib.params.notebook_params``).
NOTEBOOK_PARAMS: dict = _notebook_params()


def eta_selection_table(profile) -> pd.DataFrame:
    """Held-out R@1 of every η of the selection runs, per loss, with the chosen η marked.

    The selection runs train on the training classes minus the held-out ones and evaluate on those
    held-out training classes (``experiments.eta_selection``), so the test classes play no part.
    """
    from . import experiments as ex
    from .store import ResultStore, load_runs
    store = ResultStore()
    p = ex.tuned(ex.get_profile(profile) if isinstance(profile, str) else profile, store, "adam")
    sel = [store.get(c) for c in ex.eta_selection(p)]
    runs = load_runs(ex.eta_selection(p), tables=()).runs
    runs = runs[runs["mu"] == "batch"]
    out = runs[["loss", "eta", "status", "R@1"]].rename(columns={"R@1": "heldout_R@1"}).copy()
    chosen = {loss: ex.chosen_eta(p, loss, sel) for loss in out["loss"].unique()}
    out["chosen"] = [bool(e == chosen[l]) for l, e in zip(out["loss"], out["eta"])]
    return out.sort_values(["loss", "eta"]).reset_index(drop=True)
