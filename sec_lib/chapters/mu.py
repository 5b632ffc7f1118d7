"""The μ page: which target norm (batch mean, EMA, zero = L2-reg at several weights, a fixed radius),
ours against the rebuttal's Table 2, and how μ moves during training."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from .. import experiments as ex
from .. import reference, report
from ..report import fmt_estimate, pooled_diff, summary_table, values_ci
from ..store import ResultStore, run_key
from . import profile_param
from .common import check_cols, name_means, paired, with_verdict

#: The notebook's parameters (checked by ``sec_lib.params.notebook_params``).
PARAMS = profile_param()


def mu_labels(profile, root=None) -> dict:
    """Run key -> μ-setting label (``experiments.mu_settings``) of the "which μ" chapter's runs
    (their keys hold the pilot's learning rate, read from the store at ``root``)."""
    p = ex.get_profile(profile) if isinstance(profile, str) else profile
    q = ex.tuned(p, "adam", ResultStore(root))
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


def label_mu(runs: pd.DataFrame, profile, root=None) -> pd.DataFrame:
    """``runs`` with a ``setting`` column (the μ label); keeps an existing ``setting`` column."""
    if "setting" in runs.columns:
        return runs
    check_cols(runs, ["key"], "runs")
    labels = mu_labels(profile, root)
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
    ``sec_lib/data/paper/rebuttal_tables.csv``, table = regularizers). Settings the rebuttal did not run are blank there."""
    reb = reference.rebuttal_all() if rebuttal is None else rebuttal
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
    check_cols(runs, ["loss", "setting", "seed", metric], "runs")
    parts = []
    for setting in dict.fromkeys(runs["setting"].dropna()):
        if setting == reference:
            continue
        sub = runs[runs["setting"].isin([setting, reference])]
        d = paired(sub, ["loss"], "setting", setting, reference, [metric])
        if len(d):
            parts.append(d.assign(versus=setting))
    if not parts:
        return pd.DataFrame(columns=["loss", "versus", "metric", "diff", "ci_lo", "ci_hi", "p_value", "n_pairs", "verdict"])
    out = pd.concat(parts, ignore_index=True)
    out = out[["loss", "versus", *[c for c in out.columns if c not in ("loss", "versus")]]]
    return name_means(with_verdict(out.sort_values("loss", kind="stable").reset_index(drop=True), +1),
                       "setting", reference)


def mu_vs_best_zero(runs: pd.DataFrame, metric: str = "R@1") -> pd.DataFrame:
    """Per loss: the best μ = 0 (L2-reg) setting chosen post hoc by mean ``metric`` (this favours μ = 0),
    and the paired difference batch-mean SEC minus that setting, with its verdict (expected sign +1)."""
    check_cols(runs, ["loss", "setting", "seed", metric], "runs")
    rows = []
    for loss, sub in runs.groupby("loss", sort=False):
        zero = sub[sub["setting"].astype(str).str.startswith("zero")]
        means = zero.groupby("setting")[metric].mean().dropna()
        if not len(means) or "batch mean" not in set(sub["setting"]):
            continue
        best = means.idxmax()
        d = paired(sub[sub["setting"].isin([best, "batch mean"])], [], "setting", best, "batch mean", [metric])
        if len(d):
            rows.append(d.assign(loss=loss, best_zero=best).iloc[0].to_dict())
    cols = ["loss", "best_zero", "metric", "mean_a", "mean_b", "diff", "ci_lo", "ci_hi", "p_value", "n_pairs", "n_unpaired"]
    out = pd.DataFrame(rows, columns=cols)
    out = with_verdict(out, +1) if len(out) else out.assign(verdict=pd.Series(dtype=str))
    return name_means(out, "best zero", "batch mean")


def ema_vs_batch(runs: pd.DataFrame, metric: str = "R@1") -> dict:
    """Pooled (over the μ-chapter losses) paired difference EMA − batch mean for the EMA with the
    smallest momentum ρ (the closest to "the mean over all data"); a no-change claim."""
    check_cols(runs, ["loss", "setting", "seed", metric], "runs")
    emas = [s for s in dict.fromkeys(runs["setting"].dropna()) if str(s).startswith("EMA ρ=")]
    if not emas:
        return values_ci([])
    ema = min(emas, key=lambda s: float(s.split("=", 1)[1]))
    out = pooled_diff(runs, "setting", "batch mean", ema, metric)
    out["setting"] = ema
    return out


def mu_trajectory(runs: pd.DataFrame, steps: pd.DataFrame, settings: Sequence[str] | None = None) -> pd.DataFrame:
    """Mean over seeds of the μ SEC used (``steps.mu``) and of the batch mean norm per loss × setting × step."""
    check_cols(runs, ["key", "loss", "setting"], "runs")
    check_cols(steps, ["key", "step", "mu", "norm_mean"], "steps")
    sub = runs if settings is None else runs[runs["setting"].isin(settings)]
    m = steps.merge(sub[["key", "loss", "setting"]], on="key")
    return (m.groupby(["loss", "setting", "step"], sort=False)[["mu", "norm_mean"]].mean().reset_index())


def page_reading(runs: pd.DataFrame, best: pd.DataFrame) -> str:
    """The page's closing bullets: batch-mean SEC against the best μ = 0 per loss (:func:`mu_vs_best_zero`)
    and the EMA against the batch mean (:func:`ema_vs_batch`), each with its verdict."""
    lines = []
    for r in best.itertuples(index=False):
        lines.append(f"- **{r.loss}**: batch-mean SEC − best μ = 0 ({r.best_zero}) = {r.diff:+.2f} R@1 points "
                     f"(95% CI [{r.ci_lo:+.2f}, {r.ci_hi:+.2f}], {r.n_pairs} paired seeds, paired t-test p = "
                     f"{r.p_value:.2g}) → *toward the mean beats toward zero*: **{r.verdict}**.")
    ema = ema_vs_batch(runs)
    v_ema = report.verdict(ema["estimate"], ema["ci_lo"], ema["ci_hi"], 0, n=ema["n"])
    lines.append(f"- **Batch mean or data mean?** {ema.get('setting', 'EMA')} − batch mean, averaged over the losses: "
                 f"{fmt_estimate(ema)} R@1 points → *the batch mean is as good as a running mean* "
                 f"(equivalence within ±{report.VERDICT_RULES.equivalence_margin:g} points): **{v_ema}**.")
    return "\n".join(lines) + "\n\nThe best μ = 0 weight was picked after the fact, which can only help μ = 0."
