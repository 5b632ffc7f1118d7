"""The μ page: which target norm (batch mean, EMA, zero = L2-reg at several weights, a fixed radius),
ours against the rebuttal's Table 2, and how μ moves during training."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from ..runs import experiments as ex
from .. import reference, report
from ..report import one_family, pooled_diff, summary_table, values_ci, with_verdict
from . import profile_param
from ..report.claims import Claim, derived_family, from_row
from .common import (beside_cv, check_cols, measures_text, name_means, inconclusive_words, paired, shared_steps,
                     verdict_row_of, with_norm_cv)

#: The notebook's parameters (checked by ``sec_lib.params.notebook_params``).
PARAMS = profile_param()


def mu_order(profile) -> list[str]:
    """The μ-setting labels in the chapter's order."""
    p = ex.get_profile(profile) if isinstance(profile, str) else profile
    return list(dict.fromkeys(label for loss in ex.MU_LOSSES for label, _ in ex.mu_settings(p, loss)))


def label_mu(runs: pd.DataFrame, profile=None, root=None) -> pd.DataFrame:
    """``runs`` with its ``setting`` column (the μ label), which :func:`sec_lib.chapters.common.load` adds from the
    labels :func:`sec_lib.runs.experiments.mu_runs` made the runs with. A frame without it (not loaded through
    the chapter) is an error naming the fix. ``profile`` and ``root`` are accepted for old notebooks."""
    check_cols(runs, ["key", "setting"], "runs (load them with sec_lib.chapters.common.load('mu', ...))")
    return runs


MU_METRICS = ("R@1", "NMI", "F1", "train_norm_var")


def eta_sentence(runs: pd.DataFrame) -> str:
    """Which SEC weight the page's runs use, read from the runs: per loss, the η of its batch-mean runs (every μ
    setting with SEC shares it), and whether that is the paper's η (:data:`sec_lib.runs.experiments.ETA_SEC`)."""
    check_cols(runs, ["loss", "setting", "eta"], "runs")
    eta = runs[runs["setting"] == "batch mean"].groupby("loss")["eta"].unique()
    if not len(eta):
        return ""
    each = ", ".join(f"{loss} {'/'.join(f'{e:g}' for e in sorted(v))}" for loss, v in eta.items())
    paper = all(len(v) == 1 and np.isclose(v[0], ex.ETA_SEC.get(loss, np.nan)) for loss, v in eta.items())
    whose = ("the paper's η for each loss, as in the rebuttal's Table 2, not the η the main comparison chose on "
             "held-out classes" if paper else "not the paper's η for every loss")
    return (f"SEC's weight on this page is η = {each}: {whose}. The batch mean, the EMAs and the fixed radii all "
            "use it; only the μ = 0 rows take their own weights.")


def mu_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Display table per loss × μ setting (needs the ``setting`` column, see :func:`label_mu`); beside the
    training-set norm variance its CV (std / mean, ``train_norm_cv``) where the runs store the mean norm
    (:func:`~sec_lib.chapters.common.with_norm_cv`)."""
    runs = with_norm_cv(runs)
    return summary_table(runs, ["loss", "setting"], beside_cv(MU_METRICS, runs.columns))


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
    ``sec_lib/data/paper/rebuttal_tables.csv``, table = regularizers). Settings the rebuttal did not run are blank there.
    Our norm variance has its CV (std / mean) beside it where the runs allow; the rebuttal gives variances only."""
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
                     "norm var (train)": r["train_norm_var"],
                     **({"norm CV (train)": r["train_norm_cv"]} if "train_norm_cv" in r else {}), "runs": r["runs"],
                     "rebuttal R@1": float(h["R@1"]) if h is not None else np.nan,
                     "rebuttal NMI": float(h["NMI"]) if h is not None else np.nan,
                     "rebuttal F1": float(h["F1"]) if h is not None else np.nan,
                     "rebuttal norm var": float(h["mean_norm_var"]) if h is not None else np.nan})
    return pd.DataFrame(rows)


#: The Holm family of the μ page (every comparison on it, see :func:`mu_family`).
FAMILY = "mu page"


def _expected_sign(setting: str) -> int:
    """The claim each paired row tests: the batch mean is as good as a running mean (EMA: no change, 0),
    and better than no SEC, μ = 0 and a fixed radius (+1)."""
    return 0 if str(setting).startswith("EMA") else +1


def _paired_rows(runs: pd.DataFrame, reference: str, metric: str) -> pd.DataFrame:
    """Raw paired ``reference − setting`` per loss for every other setting, with ``_sign``."""
    check_cols(runs, ["loss", "setting", "seed", metric], "runs")
    parts = []
    for setting in dict.fromkeys(runs["setting"].dropna()):
        if setting == reference:
            continue
        sub = runs[runs["setting"].isin([setting, reference])]
        d = paired(sub, ["loss"], "setting", setting, reference, [metric])
        if len(d):
            parts.append(d.assign(versus=setting, _sign=_expected_sign(setting)))
    cols = ["loss", "versus", "metric", "mean_a", "mean_b", "estimate", "ci_lo", "ci_hi", "p_value", "n",
            "n_unpaired", "_sign"]
    if not parts:
        return pd.DataFrame(columns=cols)
    out = pd.concat(parts, ignore_index=True)
    out = out[["loss", "versus", *[c for c in out.columns if c not in ("loss", "versus")]]]
    return out.sort_values("loss", kind="stable").reset_index(drop=True)


def _best_zero(runs: pd.DataFrame, metric: str) -> dict:
    """Per loss: the μ = 0 (L2-reg) setting with the best mean ``metric``, chosen post hoc."""
    out = {}
    for loss, sub in runs.groupby("loss", sort=False):
        zero = sub[sub["setting"].astype(str).str.startswith("zero")]
        means = zero.groupby("setting")[metric].mean().dropna()
        if len(means) and "batch mean" in set(sub["setting"]):
            out[loss] = means.idxmax()
    return out


def mu_family(runs: pd.DataFrame, metric: str = "R@1", reference: str = "batch mean") -> dict:
    """Every comparison of the μ page as ONE Holm family (a review chapter is one family).

    The family: ``reference − setting`` per loss for every other μ setting (paired on seed; expected
    sign +1 — the batch mean is better — against no SEC, μ = 0 and the fixed radius; a no-change claim,
    within the metric's margin, against the EMAs), and the EMA with the smallest ρ − batch mean averaged
    over the losses per seed (:func:`ema_vs_batch`; no change). Returns a dict:

    * ``diffs``: the paired table (columns of :func:`sec_lib.report.with_verdict`: ``p_adj``
      and ``m`` of the whole family, ``mde``, ``n`` (paired seeds) with ``n_counts`` "seeds", ``verdict``);
    * ``best``: per loss, batch-mean SEC − the best μ = 0 setting picked post hoc (``best_zero``). These
      are rows of ``diffs`` (the same runs and test), so they take that row's adjusted p and verdict and
      are not counted twice (``same_runs_as``); Holm over every μ = 0 weight covers the post hoc pick;
    * ``ema``: a one-row table of the EMA − batch mean comparison (n = seeds, each the mean over the losses).
    """
    diffs = with_verdict(_paired_rows(runs, reference, metric), "_sign").drop(columns="_sign")
    ema = ema_vs_batch(runs, metric) if reference == "batch mean" else values_ci([])
    ema_row = pd.DataFrame([{"comparison": f"{ema.get('setting', 'EMA')} − {reference}, mean over the losses",
                             "setting": ema.get("setting", "EMA"), "metric": metric,
                             **verdict_row_of(ema, 0, report.MARGINS.get(metric)), "n_losses": ema.get("n_groups", 0)}])
    diffs, ema_row = one_family(diffs, ema_row, family=FAMILY)
    best = []
    for loss, setting in _best_zero(runs, metric).items():
        hit = diffs[(diffs["loss"] == loss) & (diffs["versus"] == setting)]
        if len(hit):
            r = hit.iloc[0].to_dict()
            r.pop("versus")
            best.append({"loss": loss, "best_zero": setting, **{k: v for k, v in r.items() if k != "loss"},
                         "same_runs_as": f"the paired table's row {loss} / {setting}"})
    best_cols = ["loss", "best_zero", *[c for c in diffs.columns if c not in ("loss", "versus")], "same_runs_as"]
    return {"diffs": name_means(diffs, "setting", reference),
            "best": name_means(pd.DataFrame(best, columns=best_cols), "best zero", reference),
            "ema": ema_row}


def mu_diffs(runs: pd.DataFrame, reference: str = "batch mean", metric: str = "R@1") -> pd.DataFrame:
    """Paired difference ``reference - setting`` per loss for every other μ setting (positive:
    the reference, SEC toward the batch mean, is better), with verdicts from the page's one Holm
    family (:func:`mu_family`)."""
    return mu_family(runs, metric, reference)["diffs"]


def mu_vs_best_zero(runs: pd.DataFrame, metric: str = "R@1") -> pd.DataFrame:
    """Per loss: the best μ = 0 (L2-reg) setting chosen post hoc by mean ``metric`` (this favours μ = 0),
    and the paired difference batch-mean SEC minus that setting, with its verdict (expected sign +1)
    from the page's one Holm family (:func:`mu_family`: the rows of :func:`mu_diffs` they repeat)."""
    check_cols(runs, ["loss", "setting", "seed", metric], "runs")
    return mu_family(runs, metric)["best"]


def ema_settings(settings) -> list[str]:
    """The EMA labels among ``settings`` (``"EMA ρ=0.1"``, as :func:`sec_lib.runs.experiments.mu_settings` makes
    them), fastest first: the last is the smallest ρ, the closest to "the mean over all data"."""
    emas = [s for s in dict.fromkeys(pd.Series(settings).dropna()) if str(s).startswith("EMA ρ=")]
    return sorted(emas, key=lambda s: -float(s.split("=", 1)[1]))


def ema_vs_batch(runs: pd.DataFrame, metric: str = "R@1") -> dict:
    """Pooled (over the μ-chapter losses) paired difference EMA − batch mean for the EMA with the
    smallest momentum ρ (the closest to "the mean over all data"); a no-change claim."""
    check_cols(runs, ["loss", "setting", "seed", metric], "runs")
    emas = ema_settings(runs["setting"])
    if not emas:
        return values_ci([])
    ema = emas[-1]
    out = pooled_diff(runs, "setting", "batch mean", ema, metric)
    out["setting"] = ema
    return out


def mu_trajectory(runs: pd.DataFrame, steps: pd.DataFrame, settings: Sequence[str] | None = None) -> pd.DataFrame:
    """Mean over seeds of the μ SEC used (``steps.mu``) and of the batch mean norm per loss × setting × step."""
    check_cols(runs, ["key", "loss", "setting"], "runs")
    check_cols(steps, ["key", "step", "mu", "norm_mean"], "steps")
    sub = runs if settings is None else runs[runs["setting"].isin(settings)]
    m = shared_steps(steps[["key", "step", "mu", "norm_mean"]]).merge(sub[["key", "loss", "setting"]], on="key")
    return (m.groupby(["loss", "setting", "step"], sort=False)[["mu", "norm_mean"]].mean().reset_index())


def trajectory_sentence(traj: pd.DataFrame, reference: str = "batch mean", factor: float = 2.0) -> str:
    """:func:`mu_trajectory` at its last step in words: per loss, the batch's mean norm under SEC toward the batch
    mean and toward each EMA (mean over seeds). Where the slowest EMA ends with norms more than ``factor`` times
    those under the batch mean, it says what that means: SEC pulls the norms toward the lagging μ, so the batch
    follows the running mean, and a slow EMA acts as a slowly drifting fixed radius, not as "the mean over the
    data". '' without the reference or an EMA."""
    check_cols(traj, ["loss", "setting", "step", "mu", "norm_mean"], "traj")
    emas = ema_settings(traj["setting"])
    if reference not in set(traj["setting"]) or not emas:
        return ""
    last = traj.loc[traj.groupby(["loss", "setting"])["step"].idxmax()].set_index(["loss", "setting"])["norm_mean"]
    parts, ratios = [], []
    for loss in dict.fromkeys(traj["loss"]):
        if (loss, reference) not in last.index:
            continue
        shown = [st for st in (reference, *emas) if (loss, st) in last.index]
        parts.append(f"{loss}: " + ", ".join(f"{last[(loss, st)]:.2f} ({st})" for st in shown))
        if (loss, emas[-1]) in last.index and last[(loss, reference)] > 0:
            ratios.append(last[(loss, emas[-1])] / last[(loss, reference)])
    if not parts:
        return ""
    text = "At the last step, the batch's mean norm ‖f‖ (mean over seeds) is " + "; ".join(parts) + "."
    if ratios and min(ratios) > factor:
        times = (f"about {min(ratios):.0f}" if round(min(ratios)) == round(max(ratios))
                 else f"{min(ratios):.0f} to {max(ratios):.0f}")
        text += (f" Under the slowest running mean ({emas[-1]}) the norms end {times} "
                 "times larger than under the batch mean: SEC pulls every norm toward the lagging μ, so the batch "
                 "follows the running mean rather than the reverse, and a slow EMA acts as a slowly drifting fixed "
                 "radius near where training started, not as the mean over the data.")
    return text


def page_reading(runs: pd.DataFrame, family: dict | None = None) -> str:
    """The page's closing bullets from the page's one Holm family (:func:`mu_family`, computed from
    ``runs`` unless given): batch-mean SEC against the best μ = 0 per loss and the EMA against the
    batch mean, each with its estimate, interval, adjusted p, detectable effect, n and verdict."""
    fam = mu_family(runs) if family is None else family
    if not isinstance(fam, dict) or not {"best", "ema"} <= set(fam):
        raise ValueError(f"family must be the dict of mu_family(runs) (keys diffs, best, ema), got {type(fam).__name__}")
    lines = []
    for r in fam["best"].to_dict("records"):
        lines.append(f"- **{r['loss']}**: batch-mean SEC − best μ = 0 ({r['best_zero']}) = "
                     f"{measures_text(r, 2, 'R@1 points', test='paired t-test')} → *toward the mean beats toward "
                     f"zero*: **{r['verdict']}**.")
    e = fam["ema"].iloc[0]
    lines.append(f"- **Batch mean or data mean?** {e['comparison']}: "
                 f"{measures_text(e, 2, 'R@1 points', f'each the mean over {int(e.n_losses)} losses', 't-test against 0')}"
                 f" → *the batch mean is as good as a running mean* (equivalence within ±{e['margin']:g} points): "
                 f"**{e['verdict']}**{_ema_direction(e)}.{_ema_per_loss(fam)}")
    m = int(fam["ema"]["m"].iloc[0])
    return ("\n".join(lines) + f"\n\nEvery verdict on this page comes from one Holm family of {m} comparisons (the "
            "paired table and the EMA row; the best μ = 0 rows repeat rows of the paired table). The best μ = 0 "
            "weight was picked after the fact, which can only help μ = 0.")


def _ema_direction(e) -> str:
    """Where the pooled equivalence fails because the whole interval lies beyond the margin: which side the mean
    over the losses favours, so that 'not reproduced' is not read as 'the running mean wins'. '' otherwise."""
    lo, hi, margin = float(e["ci_lo"]), float(e["ci_hi"]), float(e["margin"])
    if not (np.isfinite(lo) and np.isfinite(hi) and np.isfinite(margin)):
        return ""
    if hi < -margin or lo > margin:
        side = "worse" if hi < -margin else "better"
        return (f": averaged over the losses, the running mean is {side} than the batch mean by more than "
                f"{margin:g} points")
    return ""


def _ema_per_loss(fam: dict) -> str:
    """The pooled EMA row's losses one by one (their rows of the paired table, batch mean − EMA), and whether they
    agree in sign. '' without those rows."""
    setting = fam["ema"]["setting"].iloc[0]
    rows = fam["diffs"][(fam["diffs"]["versus"] == setting) & (fam["diffs"]["metric"] == fam["ema"]["metric"].iloc[0])]
    rows = rows[np.isfinite(rows["estimate"].astype(float))]
    if not len(rows):
        return ""
    each = "; ".join(f"{r['loss']} {r['estimate']:+.2f} [{r['ci_lo']:+.2f}, {r['ci_hi']:+.2f}] "
                     f"({r['verdict']}{inconclusive_words(r)})" for r in rows.to_dict("records"))
    signs = set(np.sign(rows["estimate"].astype(float)))
    agree = (" The losses disagree in sign: the mean over them hides which μ suits which loss."
             if {-1.0, 1.0} <= signs else "")
    return f" Per loss, batch mean − {setting} (the paired table's rows): {each}.{agree}"


# ------------------------------------------------------------------------------ the claims this page decides

#: :func:`mu_family` on the page's evidence (its runs carry the μ labels they were made with), as the page computes it.
page_family = derived_family(__name__, "mu_family", lambda ev: mu_family(label_mu(ev.runs("mu"))))


def _est_ema(ev) -> dict:
    r = page_family(ev)["ema"].iloc[0]
    side = ("" if not np.isfinite(r["ci_lo"]) or r["ci_lo"] <= 0 <= r["ci_hi"] else
            "; the running mean does worse than the batch mean on average (the paper's choice)" if r["ci_hi"] < 0
            else "; the running mean does better than the batch mean on average")
    return from_row(r, note=f"{r['comparison']}{side}")


def _est_best_zero(ev) -> dict:
    b = page_family(ev)["best"]
    b = b[b["loss"] == "semihard"] if "semihard" in set(b["loss"]) else b
    if not len(b):
        raise KeyError("no μ = 0 setting paired with the batch mean")
    r = b.iloc[0]
    return from_row(r, note=f"{r['loss']}: batch mean − best μ = 0 ({r['best_zero']}, picked post hoc)")


CLAIMS = [
    Claim(id="Q1", claim="μ as the batch mean works as well as a running mean over the data",
          source="review Q1; rebuttal Fig. 2",
          measured="R@1 EMA (smallest ρ) − batch mean, mean over the losses per seed; equivalence within the margin",
          expected_sign=0, page="mu", estimate=_est_ema,
          failed_words=("a running mean does better than the batch mean",
                        "the batch mean does better than a running mean")),
    Claim(id="Q2", claim="Toward the batch mean beats toward zero (L2, best η)", source="review Q2; rebuttal Table 2",
          measured="R@1 batch-mean SEC − best μ = 0 setting (η picked post hoc, which favours μ = 0), semihard",
          expected_sign=+1, page="mu", estimate=_est_best_zero,
          paper=lambda: reference.rebuttal_diff("regularizers", "mu0", "regularizers", "sec", eta_a=0.005)),
]
