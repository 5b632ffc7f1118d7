"""Tables, estimates and claim rows for the book's "review record" chapters.

The chapters answer the questions of the public review of Zhang, Li & Zhang, *Deep Metric Learning
with Spherical Embedding* (NeurIPS 2020): η sensitivity, which μ, BatchNorm / WeightNorm, a
normalize layer, Adam vs SGD, convergence speed, the unstable gradient, and a generated claims
page. Every function here takes tidy frames (``sec_lib.store.Frames`` parts: ``runs``, ``steps``,
``tracked``, ``evals``, ``test_norms``) and returns tidy frames or small dicts; nothing is printed,
written or trained. Figures are in :mod:`sec_lib.review_plots`.

Statistics (from :mod:`sec_lib.report`): mean ± Student-t 95% CI over seeds; SEC-vs-baseline
comparisons are paired on the seed (paired t-test over seeds, ``scipy.stats.ttest_rel``);
"pooled" estimates average a per-seed difference over several losses first and then test the
per-seed means against 0 (one-sample t-test, which is the paired t-test of the pooled means).
Verdicts are always computed by :func:`sec_lib.report.verdict` from the estimate and its CI.

The claims page is driven by :data:`CLAIMS`, a list of dicts (id, claim, source, how measured,
expected sign, the function computing the estimate from the frames, the paper's number).
"""
from __future__ import annotations

import math
from typing import Callable, Iterable, Sequence

import numpy as np
import pandas as pd
from scipy import stats

from . import experiments as ex
from . import report
from .params import Choice

__all__ = [
    "CHAPTER_PAGES", "NOTEBOOK_PARAMS", "load", "load_pilot", "summary_table", "pooled_diff", "values_ci",
    "fmt_estimate",
    # eta
    "eta_summary", "eta_table", "eta_diffs", "eta_reading", "eta_robustness",
    # mu
    "mu_labels", "label_mu", "mu_order", "mu_table", "mu_rebuttal_table", "mu_diffs", "mu_vs_best_zero",
    "ema_vs_batch", "mu_trajectory",
    # bn / wn
    "BNWN_REBUTTAL", "bnwn_table", "bnwn_diffs", "head_effect",
    # normalize layer
    "run_step_means", "normlayer_table", "normlayer_diffs",
    # optimizers
    "pilot_table", "optim_table", "optim_diffs", "optim_pooled", "balance_table", "balance_diffs",
    # convergence
    "reach_step", "reach_table", "curve_band", "convergence_diffs",
    # instability
    "tracked_stats", "instability_table", "slope_curve",
    # question 10
    "class_association", "class_association_summary", "difficulty_association", "fmt_cell", "HIT_COLUMNS",
    # claims
    "Evidence", "CLAIMS", "claim_definitions", "describe_runs", "claim_rows", "claims_table", "claims_html", "rules_table", "verdict_counts",
]

#: The notebooks this module serves (``notebooks/<name>.ipynb``).
CHAPTER_PAGES = ("eta", "mu", "bnwn", "normlayer", "optim", "convergence", "instability", "claims")

#: Papermill parameters of each notebook, checked by ``sec_lib.params.notebook_params``.
NOTEBOOK_PARAMS = {name: {"profile": Choice(ex.PROFILE_NAMES)} for name in CHAPTER_PAGES}

#: The chapter (``experiments.CHAPTERS``) holding the main-table runs.
MAIN_CHAPTER = "compare"

#: Loss names as the paper abbreviates them.
LOSS_ABBR = {"triplet": "T", "semihard": "SHT", "npair": "NNP", "ms": "MS"}

#: Tables the review chapters read (cosines and the gradient scatter only where needed).
_DEFAULT_TABLES = ("steps", "tracked", "evals", "test_norms", "grad_scatter")


# =================================================================================================
# Loading and generic helpers
# =================================================================================================


def load(chapter: str, profile, tables: Iterable[str] = _DEFAULT_TABLES, root=None):
    """Frames of a chapter's runs from the result store (``load_runs(chapter_configs(chapter, profile))``).

    ``chapter`` is one of ``experiments.CHAPTERS``; duplicate configs are loaded once. Raises KeyError
    (from :func:`sec_lib.store.load_runs`) when runs are missing: run ``python -m sec_lib.book run`` first.
    The learning-rate choice inside ``chapter_configs`` reads the default store (``$SEC_RUNS_DIR``).
    """
    from .store import load_runs, run_key
    Choice(tuple(ex.CHAPTERS)).check("chapter", chapter)
    tables = tuple(tables)
    uniq = {}
    from .store import ResultStore
    for c in ex.chapter_configs(chapter, profile, ResultStore(root)):
        uniq.setdefault(run_key(c), c)
    return load_runs(list(uniq.values()), root=root, tables=tables)


def load_pilot(profile, root=None):
    """Frames of the learning-rate pilot (``experiments.lr_pilot``)."""
    from .store import load_runs
    p = ex.get_profile(profile) if isinstance(profile, str) else profile
    return load_runs(ex.lr_pilot(p), root=root, tables=("evals",))


def describe_runs(runs: pd.DataFrame) -> str:
    """A computed sentence on what a chapter's runs are (count, failures, data, model, length, seeds)."""
    if not len(runs):
        return "No runs."
    n_fail = int((runs["status"] != "done").sum()) if "status" in runs.columns else 0

    def vals(col, fmt="{}"):
        if col not in runs.columns:
            return "?"
        return ", ".join(fmt.format(v) for v in sorted(runs[col].dropna().unique().tolist()))
    return (f"{len(runs)} runs ({n_fail} failed) on **{vals('dataset')}** with a **{vals('model')}** "
            f"(embedding {vals('embed_dim')}-d, batch {vals('batch_size')}), {vals('iterations')} iterations, "
            f"optimizer {vals('optimizer')} (lr {vals('lr', '{:g}')}), seeds {{{vals('seed')}}}.")


def _check_cols(df: pd.DataFrame, cols: Iterable[str], what: str) -> None:
    if not isinstance(df, pd.DataFrame):
        raise ValueError(f"{what} must be a pandas DataFrame, got {type(df).__name__}")
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise ValueError(f"{what} lacks columns {missing}; it has {list(df.columns)}")


def fmt_cell(mean, lo, hi, n, digits: int = 2) -> str:
    """'mean ± half-width' with ``digits`` decimals, or 3 significant digits for values below 0.01 or
    above 10^4 in magnitude (norm variances); 'mean (n=1)' without an interval, 'n/a' without data."""
    if not n or not np.isfinite(mean):
        return "n/a"
    small = mean != 0 and (abs(mean) < 0.01 or abs(mean) >= 1e4)
    f = (lambda v: f"{v:.3g}") if small else (lambda v: f"{v:.{digits}f}")
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return f"{f(mean)} (n={int(n)})"
    return f"{f(mean)} ± {f((hi - lo) / 2)}"


def summary_table(runs: pd.DataFrame, by: Sequence[str], metrics: Sequence[str], digits: int = 2) -> pd.DataFrame:
    """Display table: one row per group (first-appearance order), cells "mean ± CI half-width"
    (Student t, 95%, :func:`sec_lib.report.summarize`; see :func:`fmt_cell`), plus the number of runs
    and of failed (diverged) runs per group. Failed runs have no metrics and are not averaged."""
    by = list(by)
    _check_cols(runs, [*by, *metrics], "runs")
    s = report.summarize(runs, by, list(metrics))
    out = []
    for key, sub in s.groupby(by, sort=False, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        row = dict(zip(by, key))
        for m in metrics:
            hit = sub[sub["metric"] == m]
            row[m] = (fmt_cell(hit["mean"].iloc[0], hit["ci_lo"].iloc[0], hit["ci_hi"].iloc[0], hit["n"].iloc[0], digits)
                      if len(hit) else "n/a")
        out.append(row)
    w = pd.DataFrame(out, columns=[*by, *metrics])
    status = runs["status"] if "status" in runs.columns else pd.Series("done", index=runs.index)
    counts = (runs.assign(_failed=(status != "done").astype(int))
              .groupby(by, sort=False, dropna=False)
              .agg(runs=("_failed", "size"), failed=("_failed", "sum")).reset_index())
    return w.merge(counts, on=by, how="left")


def values_ci(values, level: float = 0.95) -> dict:
    """Mean, t-CI and the one-sample t-test against 0 of some per-seed (or per-run) values."""
    x = pd.to_numeric(pd.Series(list(values), dtype=object), errors="coerce").to_numpy(float)
    x = x[np.isfinite(x)]
    mean, lo, hi, n = report.mean_ci(x, level=level)
    p = math.nan
    if n >= 2:
        if np.ptp(x) > 1e-12 * max(1.0, abs(mean)):
            p = float(stats.ttest_1samp(x, 0.0).pvalue)
        else:                                   # no spread: like report.paired_diff
            p = 0.0 if mean != 0 else math.nan
    return {"estimate": mean, "ci_lo": lo, "ci_hi": hi, "n": n, "p_value": p}


def pooled_diff(runs: pd.DataFrame, compare_col: str, a, b, metric: str, pool: Sequence[str] = ("loss",),
                pair_on: str = "seed", transform: Callable | None = None, level: float = 0.95) -> dict:
    """Difference ``b - a`` of ``metric``, paired on ``pair_on`` within each ``pool`` group, averaged
    over the pool groups per seed, then mean ± t-CI over seeds with a one-sample t-test against 0.

    ``transform`` (e.g. ``np.log10``) is applied to the metric before differencing. Returns a dict
    ``estimate, ci_lo, ci_hi, n`` (seeds), ``p_value``, ``n_groups`` (pool groups with a pair).
    """
    pool = list(pool)
    _check_cols(runs, [compare_col, metric, pair_on, *pool], "runs")
    sub = runs[runs[compare_col].isin([a, b])]
    vals = pd.to_numeric(sub[metric], errors="coerce").astype(float)
    if transform is not None:
        with np.errstate(divide="ignore", invalid="ignore"):
            vals = pd.Series(transform(vals.to_numpy()), index=sub.index)
    sub = sub.assign(_v=vals)
    key = [pair_on, *pool]
    if sub.duplicated([*key, compare_col]).any():
        raise ValueError(f"several runs share {key + [compare_col]}; add the distinguishing column to pool")
    wide_ = sub.pivot_table(index=key, columns=compare_col, values="_v", aggfunc="first", dropna=False)
    if a not in wide_.columns or b not in wide_.columns:
        return {"estimate": math.nan, "ci_lo": math.nan, "ci_hi": math.nan, "n": 0, "p_value": math.nan, "n_groups": 0}
    d = (wide_[b] - wide_[a]).replace([np.inf, -np.inf], np.nan).dropna()
    per_seed = d.groupby(level=0).mean()
    out = values_ci(per_seed.to_numpy(), level)
    out["n_groups"] = int(d.reset_index()[pool].drop_duplicates().shape[0]) if pool else int(len(d) > 0)
    return out


def _paired(runs, by, compare_col, a, b, metrics, **kw) -> pd.DataFrame:
    """report.paired_diff, or an empty frame of the same shape if a side is absent."""
    present = set(runs[compare_col].dropna().unique().tolist()) if compare_col in runs.columns else set()
    if a not in present or b not in present:
        cols = [*by, "metric", "mean_a", "mean_b", "diff", "ci_lo", "ci_hi", "p_value", "n_pairs", "n_unpaired"]
        return pd.DataFrame(columns=cols)
    return report.paired_diff(runs, by, compare_col, a, b, metrics=list(metrics), **kw)


def _name_means(diffs: pd.DataFrame, a: str, b: str) -> pd.DataFrame:
    """Rename report.paired_diff's ``mean_a`` / ``mean_b`` to say what they are."""
    return diffs.rename(columns={"mean_a": f"mean {a}", "mean_b": f"mean {b}"})


def _with_verdict(diffs: pd.DataFrame, expected_sign: int, min_effect: float | None = None) -> pd.DataFrame:
    v = [report.verdict(r.diff, r.ci_lo, r.ci_hi, expected_sign, min_effect, n=int(r.n_pairs))
         for r in diffs.itertuples(index=False)]
    return diffs.assign(verdict=v)


def fmt_estimate(d: dict, digits: int = 2, unit: str = "") -> str:
    """'+1.23 [0.45, 2.01] (n=3)' for an estimate dict; 'no evidence' when there is none."""
    est = d.get("estimate")
    if est is None or not np.isfinite(est):
        return "no evidence"
    lo, hi = d.get("ci_lo"), d.get("ci_hi")
    ci = f" [{lo:+.{digits}f}, {hi:+.{digits}f}]" if lo is not None and np.isfinite(lo) and np.isfinite(hi) else ""
    n = d.get("n")
    return f"{est:+.{digits}f}{unit}{ci}" + (f" (n={int(n)})" if n is not None else "")


def _rebuttal() -> pd.DataFrame:
    """All of the rebuttal's tables in one frame with a ``table`` column (via :mod:`sec_lib.paper`)."""
    from . import paper
    return pd.concat([paper.rebuttal_table(t).assign(table=t) for t in paper.REBUTTAL_TABLES], ignore_index=True)


# =================================================================================================
# η sensitivity (question 9)
# =================================================================================================

ETA_METRICS = ("R@1", "train_norm_var", "test_norm_var")


def eta_summary(runs: pd.DataFrame, metrics: Sequence[str] = ETA_METRICS) -> pd.DataFrame:
    """Tidy mean ± CI per loss × η (η = 0: no SEC)."""
    _check_cols(runs, ["loss", "eta", *metrics], "runs")
    return report.summarize(runs.sort_values(["eta"], kind="stable"), ["loss", "eta"], list(metrics))


def eta_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Display table of R@1 and norm variances per loss × η (losses in their order, η ascending)."""
    rank = {l: i for i, l in enumerate(dict.fromkeys(runs["loss"]))}
    order = runs.assign(_l=runs["loss"].map(rank)).sort_values(["_l", "eta"], kind="stable").drop(columns="_l")
    return summary_table(order, ["loss", "eta"], list(ETA_METRICS))


def eta_diffs(runs: pd.DataFrame, metric: str = "R@1") -> pd.DataFrame:
    """Paired difference (over seeds) of ``metric`` at each η > 0 minus η = 0, per loss, with the
    paired t-test p-value and a verdict for "SEC at this η beats no SEC" (expected sign +1)."""
    _check_cols(runs, ["loss", "eta", "seed", metric], "runs")
    parts = []
    for eta in sorted(e for e in runs["eta"].unique() if e > 0):
        sub = runs[runs["eta"].isin([0.0, eta])]
        d = _paired(sub, ["loss"], "eta", 0.0, eta, [metric])
        if len(d):
            parts.append(d.assign(eta=eta))
    if not parts:
        return pd.DataFrame(columns=["loss", "eta", "metric", "diff", "ci_lo", "ci_hi", "p_value", "n_pairs", "verdict"])
    out = pd.concat(parts, ignore_index=True)
    out = out[["loss", "eta", *[c for c in out.columns if c not in ("loss", "eta")]]]
    order = {l: i for i, l in enumerate(dict.fromkeys(runs["loss"]))}
    out = out.sort_values(["loss", "eta"], key=lambda s: s.map(order) if s.name == "loss" else s, kind="stable")
    return _name_means(_with_verdict(out.reset_index(drop=True), +1), "η = 0", "at η")


def eta_reading(diffs: pd.DataFrame) -> str:
    """One sentence per loss: the η at which SEC's gain is significant (CI above 0), the η at which it
    significantly hurts (CI below 0), and the best η by mean difference."""
    parts = []
    for loss, sub in diffs.groupby("loss", sort=False):
        up = [f"{e:g}" for e, lo in zip(sub["eta"], sub["ci_lo"]) if np.isfinite(lo) and lo > 0]
        down = [f"{e:g}" for e, hi in zip(sub["eta"], sub["ci_hi"]) if np.isfinite(hi) and hi < 0]
        best = sub.loc[sub["diff"].astype(float).idxmax()] if sub["diff"].notna().any() else None
        s = f"**{loss}**: SEC beats η = 0 with a CI above 0 at " + (f"η ∈ {{{', '.join(up)}}}" if up else "no η")
        s += ", and is worse with a CI below 0 at " + (f"η ∈ {{{', '.join(down)}}}" if down else "no η")
        if best is not None:
            s += f"; best η by mean difference: {best['eta']:g} ({best['diff']:+.2f})"
        parts.append("- " + s + ".")
    return "\n".join(parts)


def eta_robustness(runs: pd.DataFrame, metric: str = "R@1") -> dict:
    """Gain over η = 0 averaged over every η > 0 of the grid and every loss, per seed; mean ± CI
    over seeds (one-sample t-test). Positive = SEC helps across the whole η range tried."""
    _check_cols(runs, ["loss", "eta", "seed", metric], "runs")
    base = runs[runs["eta"] == 0].set_index(["seed", "loss"])[metric].astype(float)
    sec = runs[runs["eta"] > 0]
    if not len(sec) or not len(base):
        return values_ci([])
    d = sec.assign(_d=[float(v) - base.get((s, l), np.nan) for v, s, l in zip(sec[metric], sec["seed"], sec["loss"])])
    return values_ci(d.groupby("seed")["_d"].mean().to_numpy())


# =================================================================================================
# Which μ (questions 1 and 2)
# =================================================================================================


def mu_labels(profile) -> dict:
    """Run key -> μ-setting label (``experiments.mu_settings``) of the "which μ" chapter's runs."""
    from .store import run_key
    p = ex.get_profile(profile) if isinstance(profile, str) else profile
    from .store import ResultStore
    q = ex.tuned(p, ResultStore(), "adam")
    out = {}
    for loss in ex.MU_LOSSES:
        for label, ch in ex.mu_settings(q, loss):
            for s in q.seeds:
                out[run_key(ex.config(q, loss, "none", s, **ch))] = label
    return out


def mu_order(profile) -> list[str]:
    """The μ-setting labels in the chapter's order."""
    p = ex.get_profile(profile) if isinstance(profile, str) else profile
    return list(dict.fromkeys(label for loss in ex.MU_LOSSES for label, _ in ex.mu_settings(p, loss)))


def label_mu(runs: pd.DataFrame, profile) -> pd.DataFrame:
    """``runs`` with a ``setting`` column (the μ label); keeps an existing ``setting`` column."""
    if "setting" in runs.columns:
        return runs
    _check_cols(runs, ["key"], "runs")
    labels = mu_labels(profile)
    return runs.assign(setting=runs["key"].map(labels))


MU_METRICS = ("R@1", "NMI", "F1", "train_norm_var")


def mu_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Display table per loss × μ setting (needs the ``setting`` column, see :func:`label_mu`)."""
    return summary_table(runs, ["loss", "setting"], list(MU_METRICS))


def _rebuttal_mu_key(setting: str):
    if setting == "none":
        return ("none", None)
    if setting == "batch mean":
        return ("sec", None)
    if setting.startswith("zero η="):
        return ("mu0", float(setting.split("=", 1)[1]))
    return None


def mu_rebuttal_table(runs: pd.DataFrame, loss: str = "semihard", rebuttal: pd.DataFrame | None = None) -> pd.DataFrame:
    """Our numbers for ``loss`` per μ setting next to the rebuttal's Table 2 (Cars, semihard;
    ``data/paper/rebuttal_tables.csv``, table = regularizers). Settings the rebuttal did not run are blank there."""
    reb = _rebuttal() if rebuttal is None else rebuttal
    reb = reb[reb["table"] == "regularizers"]
    ours = mu_table(runs[runs["loss"] == loss])
    rows = []
    for r in ours.to_dict("records"):
        k = _rebuttal_mu_key(r["setting"])
        hit = pd.DataFrame()
        if k is not None:
            hit = reb[reb["setting"] == k[0]]
            if k[1] is not None:
                hit = hit[np.isclose(hit["eta"].astype(float), k[1])]
        h = hit.iloc[0] if len(hit) else None
        rows.append({"setting": r["setting"], "R@1": r["R@1"], "NMI": r["NMI"], "F1": r["F1"],
                     "norm var (train)": r["train_norm_var"], "runs": r["runs"],
                     "rebuttal R@1": float(h["R@1"]) if h is not None else np.nan,
                     "rebuttal NMI": float(h["NMI"]) if h is not None else np.nan,
                     "rebuttal F1": float(h["F1"]) if h is not None else np.nan,
                     "rebuttal norm var": float(h["mean_norm_var"]) if h is not None else np.nan})
    return pd.DataFrame(rows)


def mu_diffs(runs: pd.DataFrame, reference: str = "batch mean", metric: str = "R@1") -> pd.DataFrame:
    """Paired difference ``reference - setting`` per loss for every other μ setting (positive:
    the reference, SEC toward the batch mean, is better)."""
    _check_cols(runs, ["loss", "setting", "seed", metric], "runs")
    parts = []
    for setting in dict.fromkeys(runs["setting"].dropna()):
        if setting == reference:
            continue
        sub = runs[runs["setting"].isin([setting, reference])]
        d = _paired(sub, ["loss"], "setting", setting, reference, [metric])
        if len(d):
            parts.append(d.assign(versus=setting))
    if not parts:
        return pd.DataFrame(columns=["loss", "versus", "metric", "diff", "ci_lo", "ci_hi", "p_value", "n_pairs", "verdict"])
    out = pd.concat(parts, ignore_index=True)
    out = out[["loss", "versus", *[c for c in out.columns if c not in ("loss", "versus")]]]
    return _name_means(_with_verdict(out.sort_values("loss", kind="stable").reset_index(drop=True), +1),
                       "setting", reference)


def mu_vs_best_zero(runs: pd.DataFrame, metric: str = "R@1") -> pd.DataFrame:
    """Per loss: the best μ = 0 (L2-reg) setting chosen post hoc by mean ``metric`` (this favours μ = 0),
    and the paired difference batch-mean SEC minus that setting, with its verdict (expected sign +1)."""
    _check_cols(runs, ["loss", "setting", "seed", metric], "runs")
    rows = []
    for loss, sub in runs.groupby("loss", sort=False):
        zero = sub[sub["setting"].astype(str).str.startswith("zero")]
        means = zero.groupby("setting")[metric].mean().dropna()
        if not len(means) or "batch mean" not in set(sub["setting"]):
            continue
        best = means.idxmax()
        d = _paired(sub[sub["setting"].isin([best, "batch mean"])], [], "setting", best, "batch mean", [metric])
        if len(d):
            rows.append(d.assign(loss=loss, best_zero=best).iloc[0].to_dict())
    cols = ["loss", "best_zero", "metric", "mean_a", "mean_b", "diff", "ci_lo", "ci_hi", "p_value", "n_pairs", "n_unpaired"]
    out = pd.DataFrame(rows, columns=cols)
    out = _with_verdict(out, +1) if len(out) else out.assign(verdict=pd.Series(dtype=str))
    return _name_means(out, "best zero", "batch mean")


def ema_vs_batch(runs: pd.DataFrame, metric: str = "R@1") -> dict:
    """Pooled (over the μ-chapter losses) paired difference EMA − batch mean for the EMA with the
    smallest momentum ρ (the closest to "the mean over all data"); a no-change claim."""
    _check_cols(runs, ["loss", "setting", "seed", metric], "runs")
    emas = [s for s in dict.fromkeys(runs["setting"].dropna()) if str(s).startswith("EMA ρ=")]
    if not emas:
        return values_ci([])
    ema = min(emas, key=lambda s: float(s.split("=", 1)[1]))
    out = pooled_diff(runs, "setting", "batch mean", ema, metric)
    out["setting"] = ema
    return out


def mu_trajectory(runs: pd.DataFrame, steps: pd.DataFrame, settings: Sequence[str] | None = None) -> pd.DataFrame:
    """Mean over seeds of the μ SEC used (``steps.mu``) and of the batch mean norm per loss × setting × step."""
    _check_cols(runs, ["key", "loss", "setting"], "runs")
    _check_cols(steps, ["key", "step", "mu", "norm_mean"], "steps")
    sub = runs if settings is None else runs[runs["setting"].isin(settings)]
    m = steps.merge(sub[["key", "loss", "setting"]], on="key")
    return (m.groupby(["loss", "setting", "step"], sort=False)[["mu", "norm_mean"]].mean().reset_index())


# =================================================================================================
# BatchNorm and WeightNorm (question 5)
# =================================================================================================

#: (head, variant) -> (rebuttal table, rebuttal setting). The rebuttal's paper-head baseline without
#: SEC is the first row of its Table 2 (table = regularizers, setting = none); nobn was not run there.
BNWN_REBUTTAL = {
    ("paper", "none"): ("regularizers", "none"),
    ("paper", "sec"): ("bn_wn", "sec"),
    ("bn_before_norm", "none"): ("bn_wn", "bn"),
    ("bn_before_norm", "sec"): ("bn_wn", "bn+sec"),
    ("weightnorm", "none"): ("bn_wn", "wn"),
    ("weightnorm", "sec"): ("bn_wn", "wn+sec"),
}
BNWN_METRICS = ("R@1", "NMI", "F1", "train_norm_var")


def bnwn_table(runs: pd.DataFrame, rebuttal: pd.DataFrame | None = None) -> pd.DataFrame:
    """Ours per head × variant next to the rebuttal's Table 5 (Cars, semihard)."""
    reb = _rebuttal() if rebuttal is None else rebuttal
    ours = summary_table(runs, ["head", "variant"], list(BNWN_METRICS))
    rows = []
    for r in ours.to_dict("records"):
        k = BNWN_REBUTTAL.get((r["head"], r["variant"]))
        hit = reb[(reb["table"] == k[0]) & (reb["setting"] == k[1])] if k else pd.DataFrame()
        h = hit.iloc[0] if len(hit) else None
        rows.append({**{c: r[c] for c in ("head", "variant", *BNWN_METRICS, "runs", "failed")},
                     "rebuttal R@1": float(h["R@1"]) if h is not None else np.nan,
                     "rebuttal NMI": float(h["NMI"]) if h is not None else np.nan,
                     "rebuttal F1": float(h["F1"]) if h is not None else np.nan,
                     "rebuttal norm var": float(h["mean_norm_var"]) if h is not None else np.nan})
    return pd.DataFrame(rows).rename(columns={"train_norm_var": "norm var (train)"})


def bnwn_diffs(runs: pd.DataFrame, metrics: Sequence[str] = ("R@1", "NMI", "F1"), rebuttal: pd.DataFrame | None = None) -> pd.DataFrame:
    """Paired SEC − none per head (paired t-test over seeds) and the rebuttal's difference beside."""
    reb = _rebuttal() if rebuttal is None else rebuttal
    d = _paired(runs, ["head"], "variant", "none", "sec", metrics)
    paper = []
    for r in d.itertuples(index=False):
        ka, kb = BNWN_REBUTTAL.get((r.head, "none")), BNWN_REBUTTAL.get((r.head, "sec"))
        val = np.nan
        if ka and kb:
            va = reb[(reb["table"] == ka[0]) & (reb["setting"] == ka[1])][r.metric]
            vb = reb[(reb["table"] == kb[0]) & (reb["setting"] == kb[1])][r.metric]
            if len(va) and len(vb):
                val = float(vb.iloc[0]) - float(va.iloc[0])
        paper.append(val)
    return _name_means(d.assign(rebuttal_diff=paper), "none", "sec")


def head_effect(runs: pd.DataFrame, head: str, expected_sign: int, metric: str = "R@1",
                rebuttal: pd.DataFrame | None = None) -> dict:
    """SEC − none for one head: estimate dict with the rebuttal's number and the computed verdict."""
    d = bnwn_diffs(runs[runs["head"] == head], [metric], rebuttal)
    if not len(d):
        out = values_ci([])
        out.update(rebuttal=np.nan)
    else:
        r = d.iloc[0]
        out = {"estimate": float(r["diff"]), "ci_lo": float(r["ci_lo"]), "ci_hi": float(r["ci_hi"]),
               "n": int(r["n_pairs"]), "p_value": float(r["p_value"]), "rebuttal": float(r["rebuttal_diff"]),
               "mean_none": float(r["mean none"]), "mean_sec": float(r["mean sec"])}
    out["verdict"] = report.verdict(out["estimate"], out["ci_lo"], out["ci_hi"], expected_sign, n=out["n"])
    return out


# =================================================================================================
# Normalize layer (question 3)
# =================================================================================================


def run_step_means(runs: pd.DataFrame, steps: pd.DataFrame, cols: Sequence[str], last_frac: float = 1.0) -> pd.DataFrame:
    """``runs`` with, per run, the mean over steps (NaN-skipping; the last ``last_frac`` of training)
    of each step column in ``cols`` (e.g. grad_slope, dtheta_cv, grad_norm_cv)."""
    if not 0 < last_frac <= 1:
        raise ValueError(f"last_frac must be in (0, 1], got {last_frac!r}")
    cols = list(cols)
    _check_cols(steps, ["key", "step", *cols], "steps")
    s = steps
    if last_frac < 1:
        last = s.groupby("key")["step"].transform("max")
        s = s[s["step"] > (1 - last_frac) * last]
    means = s.groupby("key")[cols].mean().reset_index()
    return runs.drop(columns=[c for c in cols if c in runs.columns]).merge(means, on="key", how="left")


NORMLAYER_METRICS = ("R@1", "NMI", "train_norm_var", "test_norm_var", "grad_slope")


def normlayer_table(runs: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """Per head × variant: retrieval, prenorm norm variances and the mean log-log slope of the
    per-sample gradient norm wrt the prenorm features against their norm."""
    r = run_step_means(runs, steps, ["grad_slope"])
    return summary_table(r, ["head", "variant"], list(NORMLAYER_METRICS), digits=3)


def normlayer_diffs(runs: pd.DataFrame, metrics: Sequence[str] = ("R@1", "NMI")) -> pd.DataFrame:
    """Four paired comparisons: normalize − paper head (without and with SEC; expected: no change,
    since every loss already normalizes) and SEC − none (per head; expected: a gain)."""
    parts = []
    for variant in ("none", "sec"):
        d = _paired(runs[runs["variant"] == variant], [], "head", "paper", "normalize", metrics)
        if len(d):
            parts.append(_name_means(_with_verdict(d, 0), "baseline", "compared")
                         .assign(comparison=f"normalize − paper head ({variant})"))
    for head in ("paper", "normalize"):
        d = _paired(runs[runs["head"] == head], [], "variant", "none", "sec", metrics)
        if len(d):
            parts.append(_name_means(_with_verdict(d, +1), "baseline", "compared")
                         .assign(comparison=f"SEC − none ({head} head)"))
    if not parts:
        return pd.DataFrame(columns=["comparison", "metric", "diff", "ci_lo", "ci_hi", "p_value", "n_pairs", "verdict"])
    out = pd.concat(parts, ignore_index=True)
    return out[["comparison", *[c for c in out.columns if c != "comparison"]]]


# =================================================================================================
# Adam vs SGD (question 6)
# =================================================================================================


def pilot_table(pilot_runs: pd.DataFrame) -> pd.DataFrame:
    """The learning-rate pilot (semihard, no SEC, one seed no reported run uses): optimizer, lr, final
    R@1, status and whether it was chosen, by the rule of ``experiments.chosen_lr`` (best final R@1;
    ties and failed runs: the smaller rate; a failed run counts as -inf)."""
    _check_cols(pilot_runs, ["optimizer", "lr", "status"], "pilot runs")
    df = pilot_runs.copy()
    if "R@1" not in df.columns:
        df["R@1"] = np.nan
    score = np.where(df["status"] == "done", pd.to_numeric(df["R@1"], errors="coerce").fillna(-np.inf), -np.inf)
    df["_score"] = score
    chosen = set()
    for opt, sub in df.groupby("optimizer", sort=False):
        best = max(zip(sub["_score"], -sub["lr"], sub.index))
        chosen.add(best[2])
    df["chosen"] = [i in chosen for i in df.index]
    return df[["optimizer", "lr", "R@1", "status", "chosen"]].reset_index(drop=True)


def optim_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Per optimizer × loss × variant: R@1, NMI, train norm variance, and the learning rate used."""
    t = summary_table(runs, ["optimizer", "loss", "variant"], ["R@1", "NMI", "train_norm_var"])
    lr = runs.groupby(["optimizer", "loss", "variant"], sort=False)["lr"].first().reset_index()
    return t.merge(lr, on=["optimizer", "loss", "variant"], how="left")


def optim_diffs(runs: pd.DataFrame, metric: str = "R@1") -> pd.DataFrame:
    """Paired SEC − none per optimizer × loss with its verdict (expected sign +1)."""
    d = _paired(runs, ["optimizer", "loss"], "variant", "none", "sec", [metric])
    return _name_means(_with_verdict(d, +1), "none", "sec")


def optim_pooled(runs: pd.DataFrame, metric: str = "R@1") -> pd.DataFrame:
    """Per optimizer: SEC − none averaged over the losses per seed, mean ± CI over seeds, verdict."""
    rows = []
    for opt, sub in runs.groupby("optimizer", sort=False):
        e = pooled_diff(sub, "variant", "none", "sec", metric)
        rows.append({"optimizer": opt, "metric": metric, **e,
                     "verdict": report.verdict(e["estimate"], e["ci_lo"], e["ci_hi"], +1, n=e["n"])})
    return pd.DataFrame(rows)


BALANCE_COLS = ("dtheta_cv", "grad_norm_cv", "dtheta_mean")


def balance_table(runs: pd.DataFrame, steps: pd.DataFrame, by: Sequence[str] = ("optimizer", "variant")) -> pd.DataFrame:
    """Spread of the per-sample updates: mean over training of dtheta_cv (CV of the angle each sample
    turned in a step), grad_norm_cv (CV of ‖∂L/∂f_i‖ in the batch) and dtheta_mean, per group."""
    r = run_step_means(runs, steps, list(BALANCE_COLS))
    return summary_table(r, list(by), list(BALANCE_COLS), digits=3)


def balance_diffs(runs: pd.DataFrame, steps: pd.DataFrame, by: Sequence[str] = ("optimizer",)) -> pd.DataFrame:
    """Pooled (over losses) paired SEC − none of dtheta_cv and grad_norm_cv per group, verdict for
    "SEC balances the updates" (expected sign −1)."""
    r = run_step_means(runs, steps, list(BALANCE_COLS))
    rows = []
    groups = r.groupby(list(by), sort=False) if by else [((), r)]
    for key, sub in groups:
        key = key if isinstance(key, tuple) else (key,)
        for col in ("dtheta_cv", "grad_norm_cv"):
            e = pooled_diff(sub, "variant", "none", "sec", col)
            rows.append({**dict(zip(by, key)), "metric": col, **e,
                         "verdict": report.verdict(e["estimate"], e["ci_lo"], e["ci_hi"], -1, n=e["n"])})
    return pd.DataFrame(rows)


# =================================================================================================
# Convergence
# =================================================================================================


def reach_step(steps, values, frac: float = 0.9) -> float:
    """The first iteration at which a curve reaches ``frac`` × its final value, interpolated.

    Definition: with evaluations ``(t_0 < t_1 < … < t_m, r_0 … r_m)`` (``t_0 = 0`` is the untrained
    model) and the threshold ``τ = frac · r_m``: 0 if ``r_0 ≥ τ``; otherwise, with ``j`` the first
    index such that ``r_j ≥ τ``, the linear interpolation ``t_{j−1} + (τ − r_{j−1}) / (r_j − r_{j−1}) ·
    (t_j − t_{j−1})``. It always exists (``r_m ≥ τ`` for ``r_m ≥ 0``); NaN for an empty curve,
    non-finite values or a negative final value. Non-monotone curves count their first crossing.
    """
    if not 0 < frac <= 1:
        raise ValueError(f"frac must be in (0, 1], got {frac!r}")
    t = np.asarray(steps, dtype=float)
    r = np.asarray(values, dtype=float)
    if t.shape != r.shape or t.ndim != 1:
        raise ValueError(f"steps and values must be 1-D of the same length, got shapes {t.shape} and {r.shape}")
    if len(t) == 0 or not np.all(np.isfinite(r)) or not np.all(np.isfinite(t)):
        return math.nan
    order = np.argsort(t, kind="stable")
    t, r = t[order], r[order]
    if r[-1] < 0:
        return math.nan
    tau = frac * r[-1]
    if r[0] >= tau:
        return float(t[0])
    j = int(np.argmax(r >= tau))
    return float(t[j - 1] + (tau - r[j - 1]) / (r[j] - r[j - 1]) * (t[j] - t[j - 1]))


def reach_table(runs: pd.DataFrame, evals: pd.DataFrame, frac: float = 0.9, metric: str = "R@1") -> pd.DataFrame:
    """``runs`` with ``reach`` (:func:`reach_step` of the run's ``metric`` curve), ``initial`` and
    ``final`` (first and last evaluation). Failed runs get NaN."""
    _check_cols(evals, ["key", "step", metric], "evals")
    rows = []
    for key, e in evals.groupby("key", sort=False):
        e = e.sort_values("step")
        rows.append({"key": key, "reach": reach_step(e["step"], e[metric], frac),
                     "initial": float(e[metric].iloc[0]), "final": float(e[metric].iloc[-1])})
    per = pd.DataFrame(rows, columns=["key", "reach", "initial", "final"])
    out = runs.drop(columns=[c for c in ("reach", "initial", "final") if c in runs.columns]).merge(per, on="key", how="left")
    if "status" in out.columns:
        out.loc[out["status"] != "done", ["reach", "final"]] = np.nan
    return out


def curve_band(runs: pd.DataFrame, evals: pd.DataFrame, by: Sequence[str] = ("loss", "variant"),
               metric: str = "R@1") -> pd.DataFrame:
    """Per group × evaluation step: mean, t-CI (over seeds), min and max of ``metric``."""
    by = list(by)
    _check_cols(runs, ["key", *by], "runs")
    _check_cols(evals, ["key", "step", metric], "evals")
    m = evals.merge(runs[["key", *by]], on="key")
    s = report.summarize(m, [*by, "step"], [metric]).drop(columns="metric")
    mm = m.groupby([*by, "step"], sort=False)[metric].agg(["min", "max"]).reset_index()
    out = s.merge(mm, on=[*by, "step"], how="left")
    rank = {c: {v: i for i, v in enumerate(dict.fromkeys(runs[c]))} for c in by}
    keys = pd.DataFrame({c: out[c].map(rank[c]) for c in by}).assign(step=out["step"])
    return out.loc[keys.sort_values([*by, "step"], kind="stable").index].reset_index(drop=True)


def convergence_diffs(reach: pd.DataFrame) -> pd.DataFrame:
    """Paired SEC − none per loss of the iteration to reach the fraction (expected sign −1: SEC is
    faster) and of the final R@1 (expected +1), paired t-test over seeds."""
    d1 = _with_verdict(_paired(reach, ["loss"], "variant", "none", "sec", ["reach"]), -1)
    d2 = _with_verdict(_paired(reach, ["loss"], "variant", "none", "sec", ["final"]), +1)
    return _name_means(pd.concat([d1, d2], ignore_index=True), "none", "sec")


# =================================================================================================
# Instability (question 7)
# =================================================================================================


def tracked_stats(runs: pd.DataFrame, tracked: pd.DataFrame) -> pd.DataFrame:
    """``runs`` with per-run statistics of the tracked training samples' norms: mean norm at the
    first and last tracked step, their ratio ``growth``, the CV across samples at the end
    ``cv_end``, and ``max_rel_jump``, the largest relative change of one sample's norm between two
    consecutive tracked steps (after the first 10% of training)."""
    _check_cols(tracked, ["key", "step", "sample", "norm"], "tracked")
    rows = []
    for key, t in tracked.groupby("key", sort=False):
        first, last = t["step"].min(), t["step"].max()
        n0 = t.loc[t["step"] == first, "norm"].astype(float)
        n1 = t.loc[t["step"] == last, "norm"].astype(float)
        w = t.pivot_table(index="step", columns="sample", values="norm").sort_index()
        rel = (w.diff().abs() / w.shift()).iloc[1:]
        rel = rel[rel.index > first + 0.1 * (last - first)]
        rows.append({"key": key, "norm_start": n0.mean(), "norm_end": n1.mean(),
                     "growth": n1.mean() / n0.mean() if n0.mean() > 0 else np.nan,
                     "cv_end": n1.std(ddof=0) / n1.mean() if n1.mean() > 0 else np.nan,
                     "max_rel_jump": float(np.nanmax(rel.to_numpy())) if rel.size else np.nan})
    per = pd.DataFrame(rows, columns=["key", "norm_start", "norm_end", "growth", "cv_end", "max_rel_jump"])
    return runs.merge(per, on="key", how="left")


INSTABILITY_METRICS = ("grad_slope", "grad_r2", "growth", "cv_end", "max_rel_jump")


def instability_table(runs: pd.DataFrame, steps: pd.DataFrame, tracked: pd.DataFrame,
                      by: Sequence[str] = ("loss", "variant")) -> pd.DataFrame:
    """Per group: mean log-log slope (and r²) of ‖∂L/∂f_i‖ against ‖f_i‖ over training, and the
    tracked samples' norm growth, final spread and largest step-to-step jump."""
    r = run_step_means(runs, steps, ["grad_slope", "grad_r2"])
    r = tracked_stats(r, tracked)
    return summary_table(r, list(by), list(INSTABILITY_METRICS), digits=3)


def slope_curve(runs: pd.DataFrame, steps: pd.DataFrame, by: Sequence[str] = ("loss", "variant"),
                col: str = "grad_slope", window: int = 5) -> pd.DataFrame:
    """Per group × step: the mean over seeds of ``col`` after a centred rolling mean of ``window`` steps per run."""
    by = list(by)
    _check_cols(steps, ["key", "step", col], "steps")
    s = steps[["key", "step", col]].sort_values(["key", "step"]).copy()
    s[col] = (s.groupby("key", sort=False)[col].rolling(window, center=True, min_periods=1).mean()
              .reset_index(level=0, drop=True))
    m = s.merge(runs[["key", *by]], on="key")
    return report.summarize(m, [*by, "step"], [col]).drop(columns="metric")


# =================================================================================================
# Question 10: are unregularized norms associated with attributes of the samples?
# =================================================================================================

#: Columns of ``test_norms`` that would hold a per-sample retrieval hit (1 if the nearest neighbour
#: has the query's class). The training loop does not store one yet; with it, difficulty can be tested.
HIT_COLUMNS = ("hit@1", "hit1", "correct")


def class_association(runs: pd.DataFrame, test_norms: pd.DataFrame) -> pd.DataFrame:
    """Per run: how much of the test-norm variance the class explains.

    ``eta2`` = between-class sum of squares / total sum of squares of ‖f‖ (one-way ANOVA); its
    expectation when norms do not depend on the class (random permutation of the labels) is
    ``(k−1)/(N−1)`` (k classes, N samples), reported as ``eta2_chance``; ``excess = eta2 − eta2_chance``;
    ``p_value`` from the one-way ANOVA F-test (``scipy.stats.f_oneway``).
    """
    _check_cols(test_norms, ["key", "label", "norm"], "test_norms")
    rows = []
    for key, t in test_norms.groupby("key", sort=False):
        x = t["norm"].astype(float).to_numpy()
        g = t["label"].to_numpy()
        labels, inv = np.unique(g, return_inverse=True)
        k, n = len(labels), len(x)
        if n < 3 or k < 2 or n <= k:
            rows.append({"key": key, "eta2": np.nan, "eta2_chance": np.nan, "excess": np.nan, "p_value": np.nan,
                         "n_classes": k, "n_samples": n})
            continue
        means = np.bincount(inv, weights=x) / np.bincount(inv)
        ss_tot = float(((x - x.mean()) ** 2).sum())
        ss_b = float((np.bincount(inv) * (means - x.mean()) ** 2).sum())
        eta2 = ss_b / ss_tot if ss_tot > 0 else np.nan
        chance = (k - 1) / (n - 1)
        groups = [x[inv == i] for i in range(k)]
        p = float(stats.f_oneway(*groups).pvalue) if ss_tot > 0 else np.nan
        rows.append({"key": key, "eta2": eta2, "eta2_chance": chance, "excess": eta2 - chance, "p_value": p,
                     "n_classes": k, "n_samples": n})
    per = pd.DataFrame(rows, columns=["key", "eta2", "eta2_chance", "excess", "p_value", "n_classes", "n_samples"])
    return runs.merge(per, on="key", how="left")


def class_association_summary(assoc: pd.DataFrame, by: Sequence[str] = ("loss", "variant"), alpha: float = 0.05) -> pd.DataFrame:
    """Display table of :func:`class_association`: η², its chance value and the excess (mean ± 95% CI
    over runs) per group, and how many runs' ANOVA F-test rejects "no class effect" at ``alpha``."""
    t = summary_table(assoc, list(by), ["eta2", "eta2_chance", "excess"], digits=3)
    rej = (assoc.assign(_rej=(assoc["p_value"] < alpha).astype(int))
           .groupby(list(by), sort=False)["_rej"].sum().rename(f"runs with p < {alpha:g}").reset_index())
    return t.merge(rej, on=list(by), how="left")


def difficulty_association(runs: pd.DataFrame, test_norms: pd.DataFrame) -> pd.DataFrame:
    """Per run: point-biserial correlation of the test norm with the per-sample retrieval hit, if
    ``test_norms`` holds one of :data:`HIT_COLUMNS`; NaN otherwise (the training loop would have to
    store, for each test sample, whether its nearest neighbour shares its class)."""
    col = next((c for c in HIT_COLUMNS if c in test_norms.columns), None)
    rows = []
    for key, t in test_norms.groupby("key", sort=False):
        r = np.nan
        if col is not None:
            h = pd.to_numeric(t[col], errors="coerce").to_numpy(float)
            x = t["norm"].astype(float).to_numpy()
            ok = np.isfinite(h) & np.isfinite(x)
            if ok.sum() >= 3 and np.ptp(h[ok]) > 0 and np.ptp(x[ok]) > 0:
                r = float(stats.pearsonr(x[ok], h[ok]).statistic)
        rows.append({"key": key, "norm_hit_corr": r})
    per = pd.DataFrame(rows, columns=["key", "norm_hit_corr"])
    return runs.merge(per, on="key", how="left")


# =================================================================================================
# Claims
# =================================================================================================


class Evidence:
    """The frames the claims draw on, per chapter, loaded once from the store on first use.

    ``Evidence(profile)`` loads with :func:`load`; ``Evidence.from_frames({chapter: Frames}, profile)``
    wraps hand-made frames (tests). ``runs(chapter)`` of the "mu" chapter carries the ``setting`` label.
    """

    def __init__(self, profile=None, frames: dict | None = None, loader: Callable | None = None):
        self.profile = profile
        self._frames = dict(frames or {})
        self._derived = {}
        self._from_store = loader is None
        self._loader = loader if loader is not None else (lambda ch: load(ch, profile))

    @classmethod
    def from_frames(cls, frames: dict, profile=None) -> "Evidence":
        def missing(ch):
            raise KeyError(f"no frames for chapter {ch!r}; given: {sorted(frames)}")
        return cls(profile, frames, loader=missing)

    def frames(self, chapter: str):
        if chapter not in self._frames:
            # chapters that show the same runs (compare, convergence, instability: the main table) load once
            same = [c for c in self._frames if self._from_store and ex.CHAPTERS.get(c) is ex.CHAPTERS.get(chapter)]
            self._frames[chapter] = self._frames[same[0]] if same else self._loader(chapter)
        return self._frames[chapter]

    def runs(self, chapter: str) -> pd.DataFrame:
        r = self.frames(chapter).runs
        if chapter == "mu" and "setting" not in r.columns:
            r = label_mu(r, self.profile)
        return r

    def table(self, chapter: str, name: str) -> pd.DataFrame:
        return getattr(self.frames(chapter), name)

    def derived(self, name: str, fn: Callable):
        """``fn()`` computed once per Evidence under ``name`` (per-run tables shared by several claims)."""
        if name not in self._derived:
            self._derived[name] = fn()
        return self._derived[name]


# -- estimates: each takes an Evidence and returns {"estimate", "ci_lo", "ci_hi", "n", ...} ---------------

def _est_norm_var(ev: Evidence) -> dict:
    r = ev.runs(MAIN_CHAPTER)
    return pooled_diff(r, "variant", "none", "sec", "train_norm_var", transform=np.log10)


def _est_balance(ev: Evidence) -> dict:
    r = run_step_means(ev.runs(MAIN_CHAPTER), ev.table(MAIN_CHAPTER, "steps"), ["dtheta_cv"])
    return pooled_diff(r, "variant", "none", "sec", "dtheta_cv")


def _est_convergence(ev: Evidence) -> dict:
    r = reach_table(ev.runs("convergence"), ev.table("convergence", "evals"))
    return pooled_diff(r, "variant", "none", "sec", "reach")


def _est_loss_gain(loss: str) -> Callable:
    def f(ev: Evidence) -> dict:
        r = ev.runs(MAIN_CHAPTER)
        return pooled_diff(r[r["loss"] == loss], "variant", "none", "sec", "R@1")
    f.__name__ = f"_est_gain_{loss}"
    return f


def _est_gain_all(ev: Evidence) -> dict:
    return pooled_diff(ev.runs(MAIN_CHAPTER), "variant", "none", "sec", "R@1")


def _est_gain_tuned(ev: Evidence) -> dict:
    return pooled_diff(ev.runs("tuned"), "variant", "none", "sec", "R@1")


def _est_sec_vs_l2(ev: Evidence) -> dict:
    return pooled_diff(ev.runs(MAIN_CHAPTER), "variant", "l2reg", "sec", "R@1")


def _est_mu_zero(ev: Evidence) -> dict:
    r = ev.runs("mu")
    d = mu_vs_best_zero(r)
    d = d[d["loss"] == "semihard"] if "semihard" in set(d["loss"]) else d
    if not len(d):
        return values_ci([])
    row = d.iloc[0]
    return {"estimate": row["diff"], "ci_lo": row["ci_lo"], "ci_hi": row["ci_hi"], "n": int(row["n_pairs"]),
            "p_value": row["p_value"], "note": f"{row['loss']}: batch mean − best μ = 0 ({row['best_zero']}, picked post hoc)"}


def _est_ema(ev: Evidence) -> dict:
    e = ema_vs_batch(ev.runs("mu"))
    if "setting" in e:
        e["note"] = f"{e['setting']} − batch mean, pooled over losses"
    return e


def _est_normlayer(ev: Evidence) -> dict:
    r = ev.runs("normlayer")
    return pooled_diff(r[r["head"] == "normalize"], "variant", "none", "sec", "R@1", pool=())


def _est_var_gain_corr(ev: Evidence) -> dict:
    """Per seed: Pearson r across the losses between the log10 variance reduction (none / sec) and the R@1 gain."""
    r = ev.runs(MAIN_CHAPTER)
    rows = []
    for seed, sub in r.groupby("seed"):
        w = sub.pivot_table(index="loss", columns="variant", values=["train_norm_var", "R@1"], aggfunc="first")
        try:
            red = np.log10(w[("train_norm_var", "none")] / w[("train_norm_var", "sec")])
            gain = w[("R@1", "sec")] - w[("R@1", "none")]
        except KeyError:
            continue
        ok = np.isfinite(red) & np.isfinite(gain)
        if ok.sum() >= 3 and np.ptp(red[ok]) > 0 and np.ptp(gain[ok]) > 0:
            rows.append(float(np.corrcoef(red[ok], gain[ok])[0, 1]))
    out = values_ci(rows)
    out["note"] = "Pearson r over the losses, per seed"
    return out


def _est_bn(ev: Evidence) -> dict:
    return head_effect(ev.runs("bnwn"), "bn_before_norm", -1)


def _est_wn(ev: Evidence) -> dict:
    return head_effect(ev.runs("bnwn"), "weightnorm", +1)


def _est_optim(opt: str) -> Callable:
    def f(ev: Evidence) -> dict:
        r = ev.runs("optim")
        return pooled_diff(r[r["optimizer"] == opt], "variant", "none", "sec", "R@1")
    f.__name__ = f"_est_optim_{opt}"
    return f


def _est_slope(ev: Evidence) -> dict:
    r = run_step_means(ev.runs(MAIN_CHAPTER), ev.table(MAIN_CHAPTER, "steps"), ["grad_slope"])
    return values_ci(r.loc[r["variant"] == "none", "grad_slope"])


def _est_growth(ev: Evidence) -> dict:
    r = tracked_stats(ev.runs("instability"), ev.table("instability", "tracked"))
    return values_ci(np.log(r.loc[r["variant"] == "none", "growth"].astype(float)))


def _est_eta(ev: Evidence) -> dict:
    return eta_robustness(ev.runs("eta"))


def _class_assoc(ev: Evidence) -> pd.DataFrame:
    return ev.derived("class_association",
                      lambda: class_association(ev.runs(MAIN_CHAPTER), ev.table(MAIN_CHAPTER, "test_norms")))


def _est_class(ev: Evidence) -> dict:
    r = _class_assoc(ev)
    out = values_ci(r.loc[r["variant"] == "none", "excess"])
    out["note"] = "η² of test norm by class minus its chance value (k−1)/(N−1), runs without SEC"
    return out


def _est_class_sec(ev: Evidence) -> dict:
    r = _class_assoc(ev)
    return pooled_diff(r, "variant", "none", "sec", "excess")


def _est_difficulty(ev: Evidence) -> dict:
    r = difficulty_association(ev.runs(MAIN_CHAPTER), ev.table(MAIN_CHAPTER, "test_norms"))
    out = values_ci(r.loc[r["variant"] == "none", "norm_hit_corr"])
    if out["n"] == 0:
        out["note"] = ("needs a per-sample retrieval hit (nearest neighbour of the same class) stored next to each "
                       "test norm (test_norms column 'hit@1'); the store keeps norms and labels only")
    return out


def _no_evidence(note: str) -> Callable:
    def f(ev: Evidence) -> dict:
        return {"estimate": math.nan, "ci_lo": math.nan, "ci_hi": math.nan, "n": 0, "note": note}
    return f


def _est_beyond(losses: Sequence[str], note: str) -> Callable:
    """SEC − none R@1 for losses outside the main four, if any chapter's runs hold them; else no evidence."""
    def f(ev: Evidence) -> dict:
        try:
            r = ev.runs("beyond")
        except KeyError:                       # hand-made evidence without that chapter
            r = ev.runs(MAIN_CHAPTER)
        sub = r[r["loss"].isin(losses)]
        if not len(sub):
            return _no_evidence(note)(ev)
        return pooled_diff(sub, "variant", "none", "sec", "R@1")
    return f


# -- the paper's numbers (computed from data/paper, never typed) --------------------------------------------

def _paper_var_ratio() -> float:
    from . import paper
    v = paper.rebuttal_variance()
    return float(np.mean(np.log10(v["norm_var_sec"] / v["norm_var_none"])))


def _paper_table1() -> pd.DataFrame:
    from . import paper
    return paper.paper_table(("CUB", "Cars"))


def _paper_gain(loss: str | None = None, a: str = "none", b: str = "sec") -> float:
    t = _paper_table1()
    if loss is not None:
        t = t[t["loss"] == loss]
    w = t.pivot_table(index=["dataset", "loss"], columns="variant", values="R@1")
    return float((w[b] - w[a]).mean())


def _paper_loss_gain(loss: str) -> Callable:
    def f() -> str:
        t = _paper_table1()
        t = t[t["loss"] == loss].pivot_table(index="dataset", columns="variant", values="R@1")
        return ", ".join(f"{ds} {t.loc[ds, 'sec'] - t.loc[ds, 'none']:+.2f}" for ds in t.index)
    return f


def _paper_rebuttal_diff(table_a, set_a, table_b, set_b, metric="R@1", eta_a=None) -> Callable:
    def f() -> float:
        reb = _rebuttal()
        a = reb[(reb["table"] == table_a) & (reb["setting"] == set_a)]
        if eta_a is not None:
            a = a[np.isclose(a["eta"].astype(float), eta_a)]
        b = reb[(reb["table"] == table_b) & (reb["setting"] == set_b)]
        return float(b[metric].iloc[0]) - float(a[metric].iloc[0])
    return f


def _paper_var_gain_corr() -> float:
    from . import paper
    v = paper.rebuttal_variance().set_index("loss")
    t = _paper_table1()
    t = t[t["dataset"] == "Cars"].pivot_table(index="loss", columns="variant", values="R@1")
    red = np.log10(v["norm_var_none"] / v["norm_var_sec"])
    gain = (t["sec"] - t["none"]).reindex(red.index)
    return float(np.corrcoef(red.to_numpy(), gain.to_numpy())[0, 1])


def _paper_tml() -> str:
    reb = _rebuttal()
    t = reb[reb["table"] == "tml"].pivot_table(index="dataset", columns="setting", values="R@1")
    return ", ".join(f"{ds} {t.loc[ds, 'sec'] - t.loc[ds, 'none']:+.2f}" for ds in t.index)


def _paper_simclr() -> float:
    reb = _rebuttal()
    s = reb[reb["table"] == "simclr"].set_index("setting")["top1"]
    return float(s["sec"] - s["none"])


#: The claims page: one dict per paper claim or review question. ``estimate(ev)`` computes our
#: number from the frames; ``paper`` is None, a number or a callable computing it from data/paper.
#: ``expected_sign``: the direction the claim predicts (+1 up, −1 down, 0 no change).
CLAIMS: list[dict] = [
    dict(id="C1", claim="SEC lowers the variance of the embedding norms", source="paper Sec. 4 / Fig. 3; rebuttal (Cars train set)",
         measured="log10(train norm var with SEC / without), paired on seed, mean over the 4 losses (main-table runs)",
         unit="log10 ratio", expected_sign=-1, estimate=_est_norm_var, paper=_paper_var_ratio, link="norms.html"),
    dict(id="C2", claim="SEC makes the per-sample updates more balanced", source="paper Sec. 3.2",
         measured="CV of the per-sample angle turned in a step (dtheta_cv, mean over training), SEC − none, mean over losses",
         unit="CV", expected_sign=-1, estimate=_est_balance, paper=None, link="optim.html"),
    dict(id="C3", claim="SEC converges faster", source="paper Sec. 4 (training curves)",
         measured="iteration at which test R@1 first reaches 90% of its final value (interpolated), SEC − none, mean over losses",
         unit="iterations", expected_sign=-1, estimate=_est_convergence, paper=None, link="convergence.html"),
    *[dict(id=f"C4{c}", claim=f"SEC improves R@1 for the {LOSS_ABBR[l]} loss ({l})", source="paper Table 1",
           measured=f"R@1 SEC − none, {l}, paired on seed (main-table runs); paper: per dataset",
           unit="pp", expected_sign=+1, estimate=_est_loss_gain(l), paper=_paper_loss_gain(l), link="compare.html")
      for c, l in zip("abcd", ex.MAIN_LOSSES)],
    dict(id="C4", claim="SEC improves R@1 on average over the losses", source="paper Table 1",
         measured="R@1 SEC − none, mean over the 4 losses per seed; paper: mean over CUB and Cars",
         unit="pp", expected_sign=+1, estimate=_est_gain_all, paper=lambda: _paper_gain(), link="compare.html"),
    dict(id="C4v", claim="SEC improves R@1 on average over the losses, with η chosen on held-out classes",
         source="paper Table 1",
         measured="R@1 SEC (η per loss chosen on held-out training classes) − none, mean over the 4 losses per seed",
         unit="pp", expected_sign=+1, estimate=_est_gain_tuned, paper=lambda: _paper_gain(), link="compare.html"),
    dict(id="C5", claim="SEC (μ = batch mean) beats L2-reg (μ = 0)", source="paper Table 1",
         measured="R@1 SEC − L2-reg (η = 0.005), mean over the 4 losses per seed; paper: mean over CUB and Cars",
         unit="pp", expected_sign=+1, estimate=_est_sec_vs_l2, paper=lambda: _paper_gain(None, "l2reg", "sec"),
         link="compare.html"),
    dict(id="Q1", claim="μ as the batch mean works as well as a running mean over the data", source="review Q1; rebuttal Fig. 2",
         measured="R@1 EMA (smallest ρ) − batch mean, mean over semihard and MS; equivalence within the margin",
         unit="pp", expected_sign=0, estimate=_est_ema, paper=None, link="mu.html"),
    dict(id="Q2", claim="Toward the batch mean beats toward zero (L2, best η)", source="review Q2; rebuttal Table 2",
         measured="R@1 batch-mean SEC − best μ = 0 setting (η picked post hoc, which favours μ = 0), semihard",
         unit="pp", expected_sign=+1, estimate=_est_mu_zero,
         paper=_paper_rebuttal_diff("regularizers", "mu0", "regularizers", "sec", eta_a=0.005), link="mu.html"),
    dict(id="Q3", claim="SEC still helps when the network ends in a normalize layer", source="review Q3 (Reviewer 4)",
         measured="R@1 SEC (on the pre-normalization features) − none, head 'normalize'",
         unit="pp", expected_sign=+1, estimate=_est_normlayer, paper=None, link="normlayer.html"),
    dict(id="Q4", claim="Larger variance reductions give larger gains", source="review Q4; rebuttal variance numbers",
         measured="Pearson r over the 4 losses of log10(var none/var SEC) vs the R@1 gain, per seed; paper: rebuttal variances vs Cars gains",
         unit="r", expected_sign=+1, estimate=_est_var_gain_corr, paper=_paper_var_gain_corr, link="compare.html"),
    dict(id="Q5a", claim="SEC with BatchNorm right before the l2-normalization hurts (rebuttal: collapse)",
         source="review Q5; rebuttal Table 5", measured="R@1 SEC − none, head bn_before_norm, semihard",
         unit="pp", expected_sign=-1, estimate=_est_bn,
         paper=_paper_rebuttal_diff("bn_wn", "bn", "bn_wn", "bn+sec"), link="bnwn.html"),
    dict(id="Q5b", claim="SEC still helps with WeightNorm on the last layer", source="review Q5; rebuttal Table 5",
         measured="R@1 SEC − none, head weightnorm, semihard", unit="pp", expected_sign=+1, estimate=_est_wn,
         paper=_paper_rebuttal_diff("bn_wn", "wn", "bn_wn", "wn+sec"), link="bnwn.html"),
    dict(id="Q6a", claim="The norm imbalance still hurts under Adam (SEC helps)", source="review Q6 (Reviewer 5, meta-review)",
         measured="R@1 SEC − none under Adam (pilot-chosen lr), mean over the 4 losses per seed; paper: Table 1 (Adam), mean",
         unit="pp", expected_sign=+1, estimate=_est_optim("adam"), paper=lambda: _paper_gain(), link="optim.html"),
    dict(id="Q6b", claim="SEC helps under SGD", source="review Q6 (not run in the paper)",
         measured="R@1 SEC − none under SGD (pilot-chosen lr), mean over the 4 losses per seed",
         unit="pp", expected_sign=+1, estimate=_est_optim("sgd"), paper=None, link="optim.html"),
    dict(id="Q7a", claim="The gradient magnitude falls with the norm (‖∂L/∂f‖ ∝ 1/‖f‖)", source="review Q7; paper Prop. 2",
         measured="log-log slope of ‖∂L/∂f_i‖ against ‖f_i‖ in each batch, mean over training, runs without SEC (theory: −1)",
         unit="slope", expected_sign=-1, estimate=_est_slope, paper=None, link="instability.html"),
    dict(id="Q7b", claim="Without SEC the norms of training samples grow during training", source="review Q7; rebuttal Fig. 1",
         measured="log(mean tracked norm at the end / at the start), runs without SEC",
         unit="log ratio", expected_sign=+1, estimate=_est_growth, paper=None, link="instability.html"),
    dict(id="Q8a", claim="SEC helps contrastive self-supervised learning (SimCLR)", source="review Q8; rebuttal Table 1",
         measured="top-1 of a linear probe, SEC − none", unit="pp", expected_sign=+1,
         estimate=_est_beyond(("ntxent",), "needs SimCLR pre-training on CIFAR-10 at scale (ResNet-50, 150 epochs, batch 256); "
                                             "no such runs in the offline sweep"),
         paper=_paper_simclr, link=None),
    dict(id="Q8b", claim="SEC helps the tuplet margin loss", source="review Q8; rebuttal Table 4",
         measured="R@1 SEC − none, tuplet margin loss", unit="pp", expected_sign=+1,
         estimate=_est_beyond(("tml",), "no tuplet-margin runs in this profile"),
         paper=_paper_tml, link="compare.html"),
    dict(id="Q8c", claim="SEC helps face recognition with cosine-softmax losses", source="review Q8; paper Sec. 4.3",
         measured="face verification accuracy, SEC − none", unit="pp", expected_sign=+1,
         estimate=_no_evidence("needs face data sets (CASIA-WebFace / LFW) that cannot be used offline, and the "
                               "paper's face code was never published; Q8d tests CosFace on glyphs instead"),
         paper=None, link=None),
    dict(id="Q8d", claim="SEC helps a cosine-softmax loss (CosFace), here on glyph retrieval rather than faces",
         source="review Q8; paper Sec. 4.3", measured="R@1 SEC − none, CosFace loss (η chosen on held-out classes)",
         unit="pp", expected_sign=+1, estimate=_est_beyond(("cosface",), "no CosFace runs in this profile"),
         paper=None, link="compare.html"),
    dict(id="Q9", claim="SEC helps over a wide range of η", source="review Q9; paper Fig. (η sensitivity)",
         measured="R@1 at each η > 0 of the grid − η = 0, mean over the grid and the 4 losses per seed",
         unit="pp", expected_sign=+1, estimate=_est_eta, paper=None, link="eta.html"),
    dict(id="Q10a", claim="Unregularized norms depend on the class", source="review Q10 (meta-review: fairness)",
         measured="η² (share of test-norm variance between classes) minus its chance value, runs without SEC",
         unit="η²", expected_sign=+1, estimate=_est_class, paper=None, link="claims.html#question-10"),
    dict(id="Q10b", claim="SEC reduces the class dependence of the norms", source="review Q10",
         measured="excess η² SEC − none, mean over the 4 losses per seed", unit="η²", expected_sign=-1,
         estimate=_est_class_sec, paper=None, link="claims.html#question-10"),
    dict(id="Q10c", claim="Unregularized norms track difficulty: samples retrieved wrongly have smaller norms "
                          "(as norm-as-confidence work such as Ranjan et al. 2017 suggests)", source="review Q10",
         measured="correlation of the test norm with the sample's R@1 hit (1 = nearest neighbour of its class), "
                  "runs without SEC", unit="r", expected_sign=+1,
         estimate=_est_difficulty, paper=None, link="claims.html#question-10"),
]

_CLAIM_KEYS = ("id", "claim", "source", "measured", "unit", "expected_sign", "estimate", "paper", "link")


def _paper_value(p):
    if p is None:
        return None
    try:
        v = p() if callable(p) else p
    except (FileNotFoundError, KeyError, IndexError):
        return None
    return v


def claim_definitions(claims: Sequence[dict] = CLAIMS) -> pd.DataFrame:
    """The claim definitions as a table: id, claim, source, how measured, unit, expected sign, the
    function that computes the estimate, and where the evidence is."""
    return pd.DataFrame([{"id": c["id"], "claim": c["claim"], "source": c.get("source", ""),
                          "measured": c.get("measured", ""), "unit": c.get("unit", ""),
                          "expected": _SIGN_WORD[int(c["expected_sign"])],
                          "function": getattr(c["estimate"], "__name__", repr(c["estimate"])).lstrip("_"),
                          "page": c.get("link") or ""} for c in claims])


def claim_rows(ev: Evidence, claims: Sequence[dict] = CLAIMS) -> list[dict]:
    """Rows for :func:`sec_lib.report.verdict_table`: each claim's estimate computed from ``ev``."""
    rows = []
    for c in claims:
        missing = [k for k in ("id", "claim", "expected_sign", "estimate") if k not in c]
        if missing:
            raise ValueError(f"claim {c.get('id', '?')!r} lacks keys {missing}; keys: {list(_CLAIM_KEYS)}")
        e = c["estimate"](ev)
        n = e.get("n")
        rows.append({"claim": c["id"], "text": c["claim"], "estimate": e.get("estimate"), "ci_lo": e.get("ci_lo"),
                     "ci_hi": e.get("ci_hi"), "n": int(n) if n is not None else None,
                     "paper": _paper_value(c.get("paper")), "link": c.get("link"),
                     "expected_sign": c["expected_sign"], **({"min_effect": c["min_effect"]} if "min_effect" in c else {}),
                     "source": c.get("source", ""), "measured": c.get("measured", ""), "unit": c.get("unit", ""),
                     "p_value": e.get("p_value", math.nan), "note": e.get("note", "")})
    return rows


def claims_table(ev: Evidence, claims: Sequence[dict] = CLAIMS) -> pd.DataFrame:
    """The claims with computed verdicts (:func:`sec_lib.report.verdict_table`) and an ``evidence``
    column "estimate [CI] (n)"."""
    t = report.verdict_table(claim_rows(ev, claims))
    t["evidence"] = [fmt_estimate({"estimate": r.estimate, "ci_lo": r.ci_lo, "ci_hi": r.ci_hi, "n": r.n},
                              3 if r.unit in ("r", "η²", "CV", "slope", "log10 ratio", "log ratio") else 2)
                     for r in t.itertuples(index=False)]
    t["paper_value"] = [float(p) if isinstance(p, (int, float)) and not isinstance(p, bool) else np.nan for p in t["paper"]]
    t["paper"] = [("" if p is None else (f"{p:+.3g}" if isinstance(p, float) else str(p))) for p in t["paper"]]
    return t


_SIGN_WORD = {1: "increase", -1: "decrease", 0: "no change"}


def _text(x) -> str:
    """A cell as text: '' for None / NaN."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return ""
    return str(x)


def claims_html(table: pd.DataFrame, name: str = "claims") -> str:
    """The claims table as HTML with working relative links to the evidence pages, followed by a
    CSV download link (``sec_lib.display.csv_link``)."""
    import html as _html

    from .display import csv_link
    # Narrow enough for the book's column: where the claim comes from, how it is measured and the
    # expected direction go under the claim in small print; every field is in the CSV.
    cols = ["claim", "what is claimed", "verdict", "our evidence", "paper", "page"]
    head = "".join(f"<th>{_html.escape(c)}</th>" for c in cols)
    body = []
    for r in table.to_dict("records"):
        link, note_text = _text(r.get("link")), _text(r.get("note"))
        page = f'<a href="{_html.escape(link)}">{_html.escape(link.split("#")[0])}</a>' if link else ""
        note = f'<br><small>{_html.escape(note_text)}</small>' if note_text else ""
        detail = (f'<br><small>{_html.escape(str(r["source"]))}; measured: {_html.escape(str(r["measured"]))}; '
                  f'expected: {_SIGN_WORD[int(r["expected_sign"])]}</small>')
        tds = f"<td>{_html.escape(str(r['claim']))}</td><td>{_html.escape(str(r['text']))}{detail}</td>"
        tds += f'<td class="verdict verdict-{r["verdict"].replace(" ", "-")}"><b>{_html.escape(r["verdict"])}</b></td>'
        tds += f"<td>{_html.escape(r['evidence'])} {_html.escape(_text(r.get('unit')))}{note}</td>"
        tds += f"<td>{_html.escape(_text(r['paper']))}</td><td>{page}</td>"
        body.append(f"<tr>{tds}</tr>")
    csv_cols = ["claim", "text", "source", "measured", "unit", "estimate", "ci_lo", "ci_hi", "n", "p_value", "paper",
                "expected_sign", "verdict", "link", "note"]
    csv = table[[c for c in csv_cols if c in table.columns]]
    return (f'<table class="sec-table"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'
            f"<p>{csv_link(csv, name)}</p>")


def rules_table(rules: report.VerdictRules | None = None) -> pd.DataFrame:
    """The verdict thresholds in force (``sec_lib.report.VERDICT_RULES``) and what each verdict means."""
    r = rules or report.VERDICT_RULES
    rows = [
        {"rule": "CI level", "value": f"{r.level:g}", "meaning": "Student-t interval of the mean over seeds"},
        {"rule": "min_effect", "value": f"{r.min_effect:g}",
         "meaning": "smallest |estimate| that counts as reproduced for a directional claim"},
        {"rule": "equivalence_margin", "value": f"{r.equivalence_margin:g}",
         "meaning": "a no-change claim is reproduced if the CI lies inside ±margin"},
        {"rule": "single_run_max", "value": r.single_run_max, "meaning": "best verdict without a CI (one seed)"},
        {"rule": "reproduced", "value": "", "meaning": "CI entirely on the expected side of 0 and |estimate| ≥ min_effect"},
        {"rule": "partly", "value": "", "meaning": "estimate on the expected side but the CI includes 0 (or no CI)"},
        {"rule": "not reproduced", "value": "", "meaning": "estimate 0 or on the wrong side"},
        {"rule": "not testable offline", "value": "", "meaning": "no evidence: no runs can measure it here"},
    ]
    return pd.DataFrame(rows)


def verdict_counts(table: pd.DataFrame) -> dict:
    """How many claims got each verdict (all of report.VERDICTS, zeros included)."""
    c = table["verdict"].value_counts()
    return {v: int(c.get(v, 0)) for v in report.VERDICTS}
