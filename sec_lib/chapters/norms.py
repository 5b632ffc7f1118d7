"""The norms page: the norm statistics per loss and variant, their paired reduction under SEC and
L2-reg, variance reduction against R@1 gain (ours and the rebuttal's), and the per-run
gradient-against-norm slopes."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats

from .. import reference
from ..reference import SOURCES, VARIANT_NAMES
from . import profile_param
from .common import NORM_METRICS, order_rows, run_attrs, runs_frame
from .compare import fmt_p, main_table, sec_gain

#: The notebook's parameters (checked by ``sec_lib.params.notebook_params``).
PARAMS = profile_param()


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
    reference.check_datasets(paper_dataset)
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
    rv = reference.rebuttal_variance()
    pg = reference.paper_gains(paper_dataset, [metric])
    pg = pg[pg["variant"] == "sec"].set_index("loss")["paper_gain"]
    for r in rv.itertuples(index=False):
        rows.append({"source": "rebuttal", "loss": r.loss, "var_none": r.norm_var_none, "var_sec": r.norm_var_sec,
                     "reduction": r.reduction, "reduction_ci_lo": math.nan, "reduction_ci_hi": math.nan,
                     "ratio": r.ratio, "gain": pg.get(r.loss, math.nan), "gain_ci_lo": math.nan,
                     "gain_ci_hi": math.nan, "n_pairs": 1})
    out = order_rows(pd.DataFrame(rows), cols=("loss",))
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
    return order_rows(run_attrs(runs).merge(per, on="key", how="inner"))


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
                   f"(difference {r.diff:+.3g}, {ci}, {fmt_p(r.p_value)}) → verdict on 'it decreases': "
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


#: The head of the paper's Figure 1 setting: no BatchNorm on the final embedding (the rebuttal's answer to
#: reviewer 5); its runs are the BN / WN page's ``nobn`` runs (semihard, with and without SEC).
FIG1_HEAD = "nobn"


def figure1_runs(runs: pd.DataFrame, test_norms: pd.DataFrame, head: str = FIG1_HEAD) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The runs (and their test norms) of the paper's Figure 1 setting: ``head`` only (default: no BN on the
    embedding), from the BN / WN sweep."""
    for name, df, cols in (("runs", runs, ["key", "head", "variant"]), ("test_norms", test_norms, ["key", "norm"])):
        missing = [c for c in cols if c not in df.columns]
        if missing:
            raise ValueError(f"{name} lacks columns {missing}; it has {list(df.columns)}")
    r = runs[(runs["head"] == head) & (runs["status"] == "done")] if "status" in runs.columns else runs[runs["head"] == head]
    if not len(r):
        raise ValueError(f"no finished runs with head {head!r}; heads present: {sorted(runs['head'].unique())}")
    return r.reset_index(drop=True), test_norms[test_norms["key"].isin(r["key"])].reset_index(drop=True)


def figure1_sentence(runs: pd.DataFrame, test_norms: pd.DataFrame) -> str:
    """The coefficient of variation of the final test norms (std / mean, mean over seeds) without and with SEC."""
    cv = test_norms.groupby("key")["norm"].agg(lambda x: x.std() / x.mean()).rename("cv").reset_index()
    m = runs.merge(cv, on="key").groupby("variant")["cv"].agg(["mean", "count"])
    if not {"none", "sec"} <= set(m.index):
        return "Both variants are needed for the comparison; found: " + ", ".join(m.index) + "."
    a, b = m.loc["none", "mean"], m.loc["sec", "mean"]
    return (f"Without BN on the embedding, the final test norms spread with CV = {a:.3f} without SEC and {b:.3f} "
            f"with SEC (mean over {int(m.loc['none', 'count'])} seeds; SEC {'narrows' if b < a else 'does not narrow'} "
            f"the spread).")
