"""The norms page: the norm statistics per loss and variant, their paired reduction under SEC and
L2-reg, variance reduction against R@1 gain (ours and the rebuttal's), and the per-run
gradient-against-norm slopes."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..runs import experiments as ex
from .. import reference, report
from ..figures import results as results_fig
from ..figures import widgets
from ..reference import SOURCES, VARIANT_NAMES
from . import profile_param
from .common import NORM_CV, NORM_METRICS, SLOPE_TARGET, beside_cv, cv_from_var, order_rows, run_attrs, runs_frame, with_norm_cv
from .gain_words import fmt_p
from .gains import main_table, sec_gain
from ..report.claims import Claim

#: The notebook's parameters (checked by ``sec_lib.params.notebook_params``).
PARAMS = profile_param()


def norm_summary(frames, level: float = 0.95) -> pd.DataFrame:
    """Per loss × variant: mean and CI over seeds of the final norm statistics of each run.

    Metrics: test_norm_mean, test_norm_var, test_norm_cv (std / mean, scale-free: the variance
    shrinks with the norms themselves, e.g. under L2-reg), train_norm_var, train_norm_cv
    (:func:`~sec_lib.chapters.common.with_norm_cv`). Tidy, as :func:`main_table`.
    """
    runs = with_norm_cv(runs_frame(frames), getattr(frames, "test_norms", None))
    metrics = [m for m in beside_cv(("test_norm_mean", "test_norm_var", "train_norm_var"), runs.columns)
               if m in runs.columns]
    return main_table(runs, metrics=metrics, level=level)


def norm_reduction(frames, variants=("sec", "l2reg"), level: float = 0.95) -> pd.DataFrame:
    """Paired change (variant − none) of the final norm statistics per loss, with verdicts expecting a decrease:
    each norm variance and its CV (std / mean, :func:`~sec_lib.chapters.common.with_norm_cv`), one Holm
    family per comparison (the norm statistics)."""
    runs = with_norm_cv(runs_frame(frames), getattr(frames, "test_norms", None))
    metrics = [m for m in beside_cv(("test_norm_var", "train_norm_var"), runs.columns) if m in runs.columns]
    return sec_gain(runs, variants=variants, metrics=metrics, level=level)


def variance_vs_gain(frames, metric: str = "R@1", var_col: str = "train_norm_var", paper_dataset: str = "Cars",
                     level: float = 0.95) -> pd.DataFrame:
    """Reviewer question 4: does a larger norm-variance reduction go with a larger gain?

    One row per (source, loss): ``var_none``, ``var_sec``, beside them ``cv_none``, ``cv_sec`` (the same
    norms' scale-free CV = std / mean, :func:`~sec_lib.chapters.common.with_norm_cv`; NaN for the rebuttal,
    which gives variances only), ``reduction`` (none − sec),
    ``ratio`` (none / sec), ``log10_ratio`` (the x of :data:`Q4_DEFINITION`), ``gain`` (SEC − none in ``metric``), with paired CIs for ours
    (``reduction_ci_*``, ``gain_ci_*``, ``n`` paired seeds) and NaN CIs for the rebuttal's single runs.
    Sources: ``ours`` (variances of our embeddings, glyphs) and ``rebuttal`` (training-set
    variances on Cars from the rebuttal, gains from paper Table 1 on ``paper_dataset``). The two
    are on different scales (different networks, embedding sizes and data): compare rankings, not values.
    """
    reference.check_datasets(paper_dataset)
    runs = runs_frame(frames)
    if var_col not in runs.columns:
        raise ValueError(f"var_col = {var_col!r} is not a column of the runs frame; valid: {list(NORM_METRICS)}")
    runs = with_norm_cv(runs, getattr(frames, "test_norms", None))
    cv_col = NORM_CV.get(var_col)
    g = sec_gain(runs, variants=("sec",), metrics=[metric, *beside_cv([var_col], runs.columns)], level=level)
    rows = []
    for loss, sub in g.groupby("loss", sort=False):
        gm = sub[sub["metric"] == metric].iloc[0]
        vm = sub[sub["metric"] == var_col].iloc[0]
        cm = sub[sub["metric"] == cv_col]
        cv_none, cv_sec = (cm["mean_a"].iloc[0], cm["mean_b"].iloc[0]) if len(cm) else (math.nan, math.nan)
        rows.append({"source": "ours", "loss": loss, "var_none": vm.mean_a, "var_sec": vm.mean_b,
                     "cv_none": cv_none, "cv_sec": cv_sec,
                     "reduction": -vm["estimate"], "reduction_ci_lo": -vm.ci_hi, "reduction_ci_hi": -vm.ci_lo,
                     "ratio": vm.mean_a / vm.mean_b if vm.mean_b else math.nan,
                     "log10_ratio": math.log10(vm.mean_a / vm.mean_b) if vm.mean_a > 0 and vm.mean_b > 0 else math.nan,
                     "gain": gm["estimate"], "gain_ci_lo": gm.ci_lo, "gain_ci_hi": gm.ci_hi, "n": int(gm.n)})
    rv = reference.rebuttal_variance()
    pg = reference.paper_gains(paper_dataset, [metric])
    pg = pg[pg["variant"] == "sec"].set_index("loss")["paper_gain"]
    for r in rv.itertuples(index=False):
        rows.append({"source": "rebuttal", "loss": r.loss, "var_none": r.norm_var_none, "var_sec": r.norm_var_sec,
                     "cv_none": math.nan, "cv_sec": math.nan,
                     "reduction": r.reduction, "reduction_ci_lo": math.nan, "reduction_ci_hi": math.nan,
                     "ratio": r.ratio, "log10_ratio": math.log10(r.ratio), "gain": pg.get(r.loss, math.nan), "gain_ci_lo": math.nan,
                     "gain_ci_hi": math.nan, "n": 1})
    out = order_rows(pd.DataFrame(rows), cols=("loss",))
    out = out.sort_values("source", key=lambda s: s.map({"ours": 0, "rebuttal": 1}), kind="stable")
    out = out.reset_index(drop=True)
    out.attrs["source"] = f"ours; {SOURCES['variance']} with gains from {SOURCES['table1']} ({paper_dataset})"
    out.attrs["metric"], out.attrs["var_col"], out.attrs["paper_dataset"] = metric, var_col, paper_dataset
    return out


#: Reviewer question 4's one definition, used by the norms page and the claims page.
Q4_DEFINITION = ("Pearson r, across the losses, between log10(Var‖f‖ without SEC / Var‖f‖ with SEC) of the "
                 "training-set norms and the SEC − none gain in R@1; for our runs computed per seed and averaged "
                 "over seeds on Fisher's z scale (tanh of the mean atanh r and of its 95% t-interval, so that the "
                 "interval stays within ±1), for the rebuttal from its Cars variances and the paper's Cars gains")


def _pearson(x, y) -> float:
    x, y = np.asarray(x, float), np.asarray(y, float)
    ok = np.isfinite(x) & np.isfinite(y)
    if ok.sum() < 3 or np.ptp(x[ok]) == 0 or np.ptp(y[ok]) == 0:
        return math.nan
    return float(np.corrcoef(x[ok], y[ok])[0, 1])


def q4_correlation(runs: pd.DataFrame, metric: str = "R@1", var_col: str = "train_norm_var") -> dict:
    """Reviewer question 4 on our runs, by the book's one definition (:data:`Q4_DEFINITION`).

    Per seed, the Pearson r across the losses between log10(var none / var sec) and the SEC − none
    gain in ``metric`` (seeds with fewer than 3 losses, or no spread, give no r); then the mean over
    seeds on Fisher's z scale: :func:`sec_lib.report.values_ci` of atanh r (its t-test is the test), with the
    estimate and the interval's ends taken back by tanh, so that the interval stays within ±1 (a t-interval of
    the r's themselves reached −1.12 with 5 seeds). Returns that dict plus ``per_seed`` ({seed: r}),
    ``n_losses`` and ``definition``. The claims page calls this function.
    """
    runs = runs_frame(runs)
    for col in ("seed", metric, var_col):
        if col not in runs.columns:
            raise ValueError(f"the runs frame has no column {col!r}; columns: {list(runs.columns)}")
    per_seed, n_losses = {}, 0
    for seed, sub in runs[runs["variant"].isin(["none", "sec"])].groupby("seed"):
        w = sub.pivot_table(index="loss", columns="variant", values=[var_col, metric], aggfunc="first")
        if (var_col, "none") not in w.columns or (var_col, "sec") not in w.columns:
            continue
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.log10(w[(var_col, "none")].astype(float) / w[(var_col, "sec")].astype(float))
        gain = w[(metric, "sec")].astype(float) - w[(metric, "none")].astype(float)
        r = _pearson(ratio, gain)
        if np.isfinite(r):
            per_seed[seed] = r
            n_losses = max(n_losses, int((np.isfinite(ratio) & np.isfinite(gain)).sum()))
    z = np.arctanh(np.clip(np.array(list(per_seed.values()), float), -1 + 1e-9, 1 - 1e-9))
    out = report.values_ci(z)
    out.update({k: float(np.tanh(out[k])) for k in ("estimate", "ci_lo", "ci_hi")})
    out.update(per_seed=per_seed, n_losses=n_losses, definition=Q4_DEFINITION)
    return out


def q4_paper_correlation(dataset: str = "Cars", metric: str = "R@1") -> float:
    """Question 4 by the same definition on the rebuttal's Cars variances and the paper's Table 1
    gains on ``dataset`` (one run each, so a single r without an interval)."""
    reference.check_datasets(dataset)
    v = reference.rebuttal_variance().set_index("loss")
    g = reference.paper_gains(dataset, [metric])
    g = g[g["variant"] == "sec"].set_index("loss")["paper_gain"].reindex(v.index)
    return _pearson(np.log10(v["norm_var_none"] / v["norm_var_sec"]), g)


def q4_table(runs: pd.DataFrame, metric: str = "R@1", var_col: str = "train_norm_var",
             paper_dataset: str = "Cars") -> pd.DataFrame:
    """Question 4, ours and the rebuttal's, by :data:`Q4_DEFINITION`: one row per source with
    ``pearson_r``, ``ci_lo``, ``ci_hi``, ``n_seeds``, ``n_losses``."""
    ours = q4_correlation(runs, metric, var_col)
    paper = q4_paper_correlation(paper_dataset, metric)
    n_reb = len(reference.rebuttal_variance())
    out = pd.DataFrame([
        {"source": "ours", "pearson_r": ours["estimate"], "ci_lo": ours["ci_lo"], "ci_hi": ours["ci_hi"],
         "n_seeds": ours["n"], "n_losses": ours["n_losses"]},
        {"source": "rebuttal", "pearson_r": paper, "ci_lo": math.nan, "ci_hi": math.nan, "n_seeds": 1,
         "n_losses": n_reb}])
    out.attrs["definition"] = Q4_DEFINITION
    return out


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
            "train_norm_var": "the training-set norm variance",
            "train_norm_cv": "the training-set norm CV (std / mean)"}.get(metric, metric)
    g = reduction[(reduction["metric"] == metric) & (reduction["variant"] == variant)]
    out = []
    for r in g.itertuples(index=False):
        if r.n == 0:
            out.append(f"**{r.loss}**: no paired seeds (verdict: {r.verdict}).")
            continue
        ci = f"95% CI [{r.ci_lo:+.3g}, {r.ci_hi:+.3g}]" if np.isfinite(r.ci_lo) else "no CI with one seed"
        out.append(f"**{r.loss}**: {r.comparison} changes {what} from {r.mean_a:.3g} to {r.mean_b:.3g} "
                   f"(difference {r.estimate:+.3g}, {ci}, Holm-adjusted {fmt_p(r.p_adj)}, "
                   f"could detect ≥ {r.mde:.3g}, "
                   f"n = {r.n} seeds) → verdict on 'it decreases': "
                   f"**{r.verdict}**.")
    return out


def q4_sentence(corr: pd.DataFrame) -> str:
    """A computed reading of :func:`q4_table` (reviewer question 4)."""
    parts = []
    for r in corr.itertuples(index=False):
        who = "our runs" if r.source == "ours" else "the rebuttal's variances with the paper's gains"
        if not np.isfinite(r.pearson_r):
            parts.append(f"for {who} r is undefined (fewer than 3 losses with finite values, or no spread)")
            continue
        ci = (f" [95% CI {r.ci_lo:+.2f}, {r.ci_hi:+.2f}] over {int(r.n_seeds)} seeds" if np.isfinite(r.ci_lo)
              else (f" over {int(r.n_seeds)} seed" if r.source == "ours" else ""))
        parts.append(f"for {who} Pearson r = {r.pearson_r:+.2f}{ci}, across {int(r.n_losses)} losses")
    n = int(corr["n_losses"].max()) if len(corr) else 0
    return ("Question 4 (" + Q4_DEFINITION + "): " + "; ".join(parts) + f". A correlation over {n} losses is a "
            "description more than evidence: one loss can change its sign.")


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
            out.append(f"SEC lowers {what} with a 95% interval below zero and a Holm-adjusted p < 0.05 (this page's "
                       f"comparisons as one family) for {int(c.get('reproduced', 0))} of {len(g)} losses "
                       f"(inconclusive: {int(c.get('inconclusive', 0))}; not reproduced: "
                       f"{int(c.get('not reproduced', 0))}).")
    gl = reduction[(reduction["metric"] == "test_norm_cv") & (reduction["variant"] == "l2reg")]
    gs = reduction[(reduction["metric"] == "test_norm_cv") & (reduction["variant"] == "sec")]
    if len(gl) and len(gs):
        m = gs.merge(gl, on="loss", suffixes=("_sec", "_l2"))
        k = int((m["mean_b_sec"] < m["mean_b_l2"]).sum())
        out.append(f"SEC's mean CV is below L2-reg's for {k} of {len(m)} losses.")
    if len(corr):
        rho = dict(zip(corr["source"], corr["pearson_r"]))
        o, r = rho.get("ours", math.nan), rho.get("rebuttal", math.nan)
        if np.isfinite(o) and np.isfinite(r):
            agree = "the same sign" if np.sign(o) == np.sign(r) and o != 0 else "different signs"
            k = int(corr["n_losses"].max())
            out.append(f"On question 4 our correlation (r = {o:+.2f}) and the rebuttal's (r = {r:+.2f}) have "
                       f"{agree}; with {k} losses neither settles the question (a description, not a verdict).")
    if len(per_run):
        med = per_run["slope_median"].median()
        out.append(f"The median per-batch gradient-vs-norm slope over all {len(per_run)} runs is {med:+.2f}: "
                   + ("in the typical run, larger norms come with smaller gradients within a batch, the direction "
                      f"Proposition 2 gives; it predicts a slope of {SLOPE_TARGET:+g} (‖∂L/∂f‖ ∝ 1/‖f‖), and this one is "
                      + ("steeper" if med < SLOPE_TARGET else "shallower") if med < 0 else
                      "in the typical run, larger norms do not come with smaller gradients within a batch")
                   + " (a description without a test; the instability page tests the slope against "
                   f"{SLOPE_TARGET:+g}, claim Q7a).")
    return " ".join(out) if out else "No runs to judge."


def norms_explorer(frames, y: str = "norm_var", dpi: int = 100):
    """A kernel-free loss / variant selector: per loss × variant, the final test-norm distribution and
    the batch statistic ``y`` over training (:func:`sec_lib.figures.results.norm_panel`), precomputed
    and switched in the browser (:func:`sec_lib.figures.widgets.linked_explorer`)."""
    runs = runs_frame(frames)
    losses = [l for l in ex.MAIN_LOSSES if l in set(runs["loss"])]
    variants = [v for v in ex.VARIANTS if v in set(runs["variant"])]
    grid = {(l, v): results_fig.norm_panel(frames.test_norms, frames.steps, runs, l, v, y=y)
            for l in losses for v in variants}
    return widgets.linked_explorer(grid, [("loss", losses, "dropdown"), ("variant", variants, "dropdown")], dpi=dpi)


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
    """The coefficient of variation of the final test norms (std / mean, mean over seeds) without and with SEC
    (:func:`~sec_lib.chapters.common.with_norm_cv`)."""
    cv = with_norm_cv(runs.drop(columns=["test_norm_cv"], errors="ignore"), test_norms)
    if "test_norm_cv" not in cv.columns:
        return "These runs have neither test norms nor their mean and variance, so their CV cannot be computed."
    m = cv.dropna(subset=["test_norm_cv"]).groupby("variant")["test_norm_cv"].agg(["mean", "count"])
    if not {"none", "sec"} <= set(m.index):
        return "Both variants are needed for the comparison; found: " + ", ".join(m.index) + "."
    a, b = m.loc["none", "mean"], m.loc["sec", "mean"]
    return (f"Without BN on the embedding, the final test norms spread with CV = {a:.3f} without SEC and {b:.3f} "
            f"with SEC (mean over {int(m.loc['none', 'count'])} seeds; SEC {'narrows' if b < a else 'does not narrow'} "
            f"the spread).")


# ------------------------------------------------------------------------------ the claims this page decides

def norm_cv(runs: pd.DataFrame) -> pd.Series:
    """Coefficient of variation (std / mean) of the training-set norms of each run, from the stored
    ``train_norm_var`` and ``train_norm_mean``: scale-free, unlike the variance, which shrinks with the
    norms themselves."""
    for col in ("train_norm_var", "train_norm_mean"):
        if col not in runs.columns:
            raise KeyError(f"the runs lack {col}, so the CV of the norms cannot be computed")
    return cv_from_var(runs["train_norm_var"].astype(float), runs["train_norm_mean"].astype(float))


def _est_norm_cv(ev) -> dict:
    r = ev.runs("compare")
    return report.pooled_diff(r.assign(train_norm_cv=norm_cv(r)), "variant", "none", "sec", "train_norm_cv",
                              transform=np.log10)


def _est_q4(ev) -> dict:
    out = q4_correlation(ev.runs("compare"))
    out["note"] = "Pearson r over the losses, per seed (norms.q4_correlation)"
    return {k: v for k, v in out.items() if k not in ("per_seed", "definition")}


CLAIMS = [
    Claim(id="C1", claim="SEC lowers the relative spread (coefficient of variation) of the embedding norms",
          source="paper Sec. 4 / Fig. 3; rebuttal (Cars train set)",
          measured="log10(CV of the train norms with SEC / without), CV = std / mean, paired on seed, mean over the 4 "
                   "losses (main-table runs); paper: the rebuttal's log10 variance ratio (no CV given)",
          unit="log10 ratio", expected_sign=-1, estimate=_est_norm_cv, page="norms",
          paper=reference.rebuttal_log10_var_ratio),
    Claim(id="Q4", claim="Larger variance reductions give larger gains", source="review Q4; rebuttal variance numbers",
          measured=Q4_DEFINITION, unit="r", expected_sign=+1, estimate=_est_q4, page="norms",
          paper=q4_paper_correlation),
]
