"""The pretrained page: does SEC's effect change in the paper's regime, fine-tuning a pretrained
backbone, against training from scratch?

Its runs (``experiments.SWEEPS['pretrained']``, :func:`sec_lib.runs.finetune.sweep_runs`): the four main losses
× {none, L2-reg, SEC} (and relative SEC on the decisive tier) × the main table's seeds, fine-tuned from the glyph
backbone pretrained here (a new head, frozen trunk BN, Adam with trunk and head rates chosen on held-out classes;
the quick tier's one step decay, the decisive tier's own cosine), each beside its from-scratch twin, the run of the
same loss, variant and seed trained from scratch. Every run carries its ``regime``
("fine-tuned" / "from scratch", the chapter's sweep label). Two Holm families are declared here, before any run:
SEC − none fine-tuned per loss (:data:`FAMILY_EFFECT`) and the regime interaction, (SEC − none fine-tuned) −
(SEC − none from scratch), per loss and averaged over the losses (:data:`FAMILY_INTERACTION`).
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..runs import experiments as ex
from ..runs import finetune as ft
from ..report import MARGINS, VERDICT_RULES, one_family, paired_diff, summary_table, values_ci
from ..report.claims import Claim, derived_family, from_row
from . import check_shown, pretrained_seeds, profile_param
from ..analysis.source import run_source
from ..analysis.tiers import MISSING, decisive_progress
from ..runs import decisive
from ..runs.pilot import last_quarter_gain
from ..runs.store import run_key
from .evidence import LONG_TIERS
from .gains import sized_verdicts
from .common import (check_cols, cv_from_var, equivalence_words, fixed_or_nan, measures_text, run_slopes, seeds_text,
                     shared_steps, verdict_row_of, with_batch_cv, with_norm_cv)

#: The notebook's parameters (checked by ``sec_lib.params.notebook_params``).
PARAMS = profile_param()
#: The two regimes (the runs' ``regime`` label), fine-tuned first.
REGIMES = ft.REGIMES
#: The variants the page shows: the main comparison's three and relative SEC, the scale page's scale-free SEC (the
#: decisive tier's fourth arm; the quick tier does not train it).
SHOWN_VARIANTS = (*ex.VARIANTS, "sec-relative")
#: The regularised variants each regime compares with ``none`` (descriptive rows), with their names on the page.
EFFECT_VARIANTS = {"l2reg": "L2-reg", "sec": "SEC", "sec-relative": "relative SEC"}
#: The verdict words of a gain on the claimed side, whatever its size against the paper's.
SIGNAL_WORDS = ("reproduced", "smaller than claimed", "larger than claimed")

#: The Holm family of SEC − none, fine-tuned, one row per main loss (expected sign +1: the paper's gain).
FAMILY_EFFECT = "pretrained page: SEC − none, fine-tuned"
#: The Holm family of the regime interaction: one row per main loss and their mean over the losses per seed
#: (expected sign +1: SEC gains more in the paper's regime than from scratch, the skeptic's "different regime").
FAMILY_INTERACTION = "pretrained page: regime interaction"
#: The interaction family's row for the mean over the losses.
POOLED = "mean over the losses"
#: The per-step measures of the trajectories: the batch's mean norm, its CV, the gradient-vs-norm slope.
TRAJECTORY_COLUMNS = ("norm_mean", "norm_cv", "grad_slope")
#: The start-of-training measures (the first logged step's batch) and the end (the test embeddings).
START_METRICS = ("start_norm_mean", "start_norm_var", "start_norm_cv", "test_norm_mean", "test_norm_var",
                 "test_norm_cv")


def has_arm(profile: str) -> bool:
    """Whether ``profile`` trains the fine-tuning arm (:data:`sec_lib.runs.finetune.FINETUNE_PROFILES`)."""
    check_shown(profile)
    return profile in ft.FINETUNE_PROFILES


def regime_runs(frames) -> pd.DataFrame:
    """The runs of ``frames`` (a store ``Frames`` or a runs DataFrame) with each norm variance's CV; every run
    must carry a ``regime`` of :data:`REGIMES` and a variant of :data:`SHOWN_VARIANTS` (others are refused with
    the valid ones named). KeyError when there are no runs (a profile without the fine-tuning arm)."""
    runs = with_norm_cv(frames)
    if not len(runs):
        raise KeyError("no fine-tuning runs: this profile has no fine-tuning arm (profiles with one: "
                       f"{', '.join(ft.FINETUNE_PROFILES)})")
    check_cols(runs, ["regime", "variant", "loss", "seed", "R@1"], "runs")
    for col, valid in (("regime", REGIMES), ("variant", SHOWN_VARIANTS)):
        bad = sorted(set(runs[col].dropna().astype(str)) - set(valid))
        if bad:
            raise ValueError(f"runs of {col} {bad} are not shown on the pretrained page; valid: {list(valid)}")
    return runs


def start_norms(runs: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """``runs`` (:func:`regime_runs`) with the first logged step's batch norms: ``start_norm_mean``,
    ``start_norm_var`` and ``start_norm_cv`` (std / mean); runs without a logged step get NaN."""
    check_cols(steps, ["key", "step", "norm_mean", "norm_var"], "steps")
    first = steps.sort_values("step").groupby("key", sort=False).first()[["norm_mean", "norm_var"]]
    first = first.rename(columns={"norm_mean": "start_norm_mean", "norm_var": "start_norm_var"}).reset_index()
    first["start_norm_cv"] = cv_from_var(first["start_norm_var"].astype(float).clip(lower=0),
                                         first["start_norm_mean"].astype(float))
    return runs.drop(columns=[c for c in first.columns if c != "key" and c in runs.columns]).merge(
        first, on="key", how="left")


def start_table(start: pd.DataFrame) -> pd.DataFrame:
    """Per regime (mean ± 95% CI over its runs): the first step's batch norm mean, variance and CV, and the
    test embeddings' at the end."""
    check_cols(start, ["regime", *START_METRICS], "start")
    s = start.assign(_o=start["regime"].map({r: i for i, r in enumerate(REGIMES)})).sort_values("_o", kind="stable")
    return summary_table(s, ["regime"], list(START_METRICS), digits=3)


def start_contrast(start: pd.DataFrame) -> dict:
    """Fine-tuned / from scratch at the first step, paired on (loss, variant, seed): the ratio of the batch's
    mean norm, of its variance and of its CV (geometric means of the paired ratios, with 95% intervals over the
    pairs), and the mean of each regime."""
    check_cols(start, ["regime", "loss", "variant", "seed", "start_norm_mean", "start_norm_var", "start_norm_cv"],
               "start")
    out = {}
    for col in ("start_norm_mean", "start_norm_var", "start_norm_cv"):
        w = start.pivot_table(index=["loss", "variant", "seed"], columns="regime", values=col, aggfunc="first")
        if not set(REGIMES) <= set(w.columns):
            out[col] = {"estimate": math.nan, "ci_lo": math.nan, "ci_hi": math.nan, "n": 0}
            continue
        with np.errstate(divide="ignore", invalid="ignore"):
            lr = np.log10(w[REGIMES[0]].astype(float) / w[REGIMES[1]].astype(float))
        e = values_ci(lr.replace([np.inf, -np.inf], np.nan).dropna())
        out[col] = {"ratio": 10 ** e["estimate"], "ratio_lo": 10 ** e["ci_lo"], "ratio_hi": 10 ** e["ci_hi"],
                    "n": e["n"], **{r: float(start.loc[start["regime"] == r, col].mean()) for r in REGIMES}}
    return out


def start_sentence(start: pd.DataFrame) -> str:
    """How large and uneven the norms are when fine-tuning starts, against training from scratch, in words."""
    c = start_contrast(start)

    def part(col, name):
        x = c[col]
        if not x.get("n"):
            return f"{name}: no pairs"
        ci = (f" [{x['ratio_lo']:.3g}, {x['ratio_hi']:.3g}]" if np.isfinite(x["ratio_lo"]) and
              np.isfinite(x["ratio_hi"]) else "")
        return f"{name} {x[REGIMES[0]]:.3g} against {x[REGIMES[1]]:.3g} (ratio {x['ratio']:.3g}{ci})"
    m, cv = c["start_norm_mean"], c["start_norm_cv"]
    size = ("larger" if m.get("ratio_lo", math.nan) > 1 else "smaller" if m.get("ratio_hi", math.nan) < 1
            else "not detectably different in size")
    spread = ("more uneven" if cv.get("ratio_lo", math.nan) > 1 else "less uneven" if cv.get("ratio_hi", math.nan) < 1
              else "not detectably more or less uneven")
    return (f"At the first step, fine-tuned against from scratch (paired on loss, variant and seed; geometric mean "
            f"ratios with 95% intervals over {m.get('n', 0)} pairs): {part('start_norm_mean', 'mean norm')}; "
            f"{part('start_norm_var', 'variance')}; {part('start_norm_cv', 'CV')}. Here the norms a fine-tuning "
            f"run starts from are **{size}** and **{spread}** than a from-scratch run's: the embedding is a new "
            f"head on the pretrained trunk, so its first norms are the head's, not the trunk's features'.")


def effects(runs: pd.DataFrame, metric: str = "R@1") -> pd.DataFrame:
    """Per regime, loss and regularised variant (L2-reg, SEC, relative SEC where trained): ``metric`` of the
    variant − none, paired on seed (:func:`sec_lib.report.paired_diff`; 95% t interval, paired t-test),
    descriptive (no verdicts)."""
    r = regime_runs(runs)
    out = []
    for regime in REGIMES:
        sub = r[r["regime"] == regime]
        for v, name in EFFECT_VARIANTS.items():
            if not {"none", v} <= set(sub["variant"]):
                continue
            d = paired_diff(sub, ["loss"], "variant", "none", v, metrics=[metric])
            out.append(d.assign(regime=regime, comparison=f"{name} − none"))
    if not out:
        return pd.DataFrame(columns=["regime", "comparison", "loss", "metric", "estimate", "ci_lo", "ci_hi",
                                     "p_value", "n"])
    d = pd.concat(out, ignore_index=True)
    d = d.assign(_r=d["regime"].map({r: i for i, r in enumerate(REGIMES)}),
                 _l=d["loss"].map({l: i for i, l in enumerate(ex.MAIN_LOSSES)}))
    d = d.assign(_c=d["comparison"].map({f"{n} − none": i for i, n in enumerate(EFFECT_VARIANTS.values())}))
    d = d.sort_values(["_r", "_c", "_l"], kind="stable").reset_index(drop=True)
    return d[["regime", "comparison", "loss", "metric", "mean_a", "mean_b", "estimate", "ci_lo", "ci_hi", "p_value",
              "n"]]


def effect_family(runs: pd.DataFrame, metric: str = "R@1") -> pd.DataFrame:
    """The family :data:`FAMILY_EFFECT`: SEC − none fine-tuned, one row per main loss, paired on seed, expected
    sign +1 and the metric's declared equivalence margin (±0.5 R@1 points, as every R@1 row of the book), Holm over
    the losses; each R@1 signal sized against the paper's Table 1 gains for its loss, measured in this very regime
    (:func:`sec_lib.chapters.gains.sized_verdicts`, as every per-loss SEC − none row of the book)."""
    r = regime_runs(runs)
    rows = []
    for loss in ex.MAIN_LOSSES:
        sub = r[(r["regime"] == REGIMES[0]) & (r["loss"] == loss)]
        w = sub.pivot_table(index="seed", columns="variant", values=metric, aggfunc="first")
        d = (w["sec"] - w["none"]).dropna() if {"sec", "none"} <= set(w.columns) else pd.Series(dtype=float)
        rows.append({"comparison": "SEC − none, fine-tuned", "loss": loss, "metric": metric,
                     **verdict_row_of(values_ci(d.to_numpy()), +1, MARGINS.get(metric))})
    (fam,) = one_family(pd.DataFrame(rows), family=FAMILY_EFFECT)
    return fam.assign(verdict=sized_verdicts(fam.assign(variant="sec", baseline="none", expected_sign=+1)))


def _sec_effects(runs: pd.DataFrame, metric: str) -> pd.DataFrame:
    """SEC − none per (loss, seed) in each regime (columns: the regimes), seeds paired within each loss."""
    w = runs.pivot_table(index=["loss", "seed"], columns=["regime", "variant"], values=metric, aggfunc="first")
    out = {}
    for regime in REGIMES:
        if (regime, "sec") in w.columns and (regime, "none") in w.columns:
            out[regime] = w[(regime, "sec")] - w[(regime, "none")]
        else:
            out[regime] = pd.Series(np.nan, index=w.index)
    return pd.DataFrame(out)


def _interaction_groups(runs: pd.DataFrame, metric: str) -> list[tuple[str, pd.DataFrame]]:
    """Per main loss, then :data:`POOLED` (the mean over the losses per seed): the seeds that hold all four runs,
    with SEC − none in each regime (columns: the regimes) and their difference (``interaction``)."""
    e = _sec_effects(regime_runs(runs), metric)
    e = e.assign(interaction=e[REGIMES[0]] - e[REGIMES[1]]).dropna()
    groups = [(loss, e.xs(loss, level="loss")) for loss in ex.MAIN_LOSSES if loss in e.index.get_level_values("loss")]
    return [*groups, (POOLED, e.groupby(level="seed").mean())]


def interaction_family(runs: pd.DataFrame, metric: str = "R@1") -> pd.DataFrame:
    """The family :data:`FAMILY_INTERACTION`: per main loss, (SEC − none fine-tuned) − (SEC − none from scratch)
    paired on seed (the same seed's four runs), and :data:`POOLED`, that difference averaged over the losses per
    seed; each with its mean and 95% t interval over seeds, the one-sample t-test, expected sign +1 and the
    metric's declared equivalence margin, Holm over the five rows. Beside each, the two regimes' SEC − none (means
    over the same seeds)."""
    rows = []
    for name, g in _interaction_groups(runs, metric):
        rows.append({"loss": name, "metric": metric, "SEC − none, fine-tuned": float(g[REGIMES[0]].mean()) if len(g)
                     else math.nan, "SEC − none, from scratch": float(g[REGIMES[1]].mean()) if len(g) else math.nan,
                     **verdict_row_of(values_ci(g["interaction"].to_numpy()), +1, MARGINS.get(metric))})
    (fam,) = one_family(pd.DataFrame(rows), family=FAMILY_INTERACTION)
    return fam


#: The three differences :func:`interaction_rows` gives per loss, in the figure's order.
INTERACTION_PARTS = ("SEC − none, fine-tuned", "SEC − none, from scratch", "interaction")


def interaction_rows(runs: pd.DataFrame, metric: str = "R@1") -> pd.DataFrame:
    """What the interaction figure draws: per main loss and :data:`POOLED`, SEC − none fine-tuned, SEC − none from
    scratch and their difference (the regime interaction of :func:`interaction_family`), each the mean over the
    seeds that hold all four runs, with its 95% t interval (descriptive: the verdicts are the families')."""
    rows = []
    for name, g in _interaction_groups(runs, metric):
        for part, col in zip(INTERACTION_PARTS, (*REGIMES, "interaction")):
            c = values_ci(g[col].to_numpy())
            rows.append({"loss": name, "part": part, "estimate": c["estimate"], "ci_lo": c["ci_lo"],
                         "ci_hi": c["ci_hi"], "n": c["n"]})
    return pd.DataFrame(rows, columns=["loss", "part", "estimate", "ci_lo", "ci_hi", "n"])


def answer_sentence(effect_fam: pd.DataFrame, inter_fam: pd.DataFrame) -> str:
    """The page's answer in one computed paragraph: the pooled interaction with its verdict, and SEC − none
    fine-tuned per loss."""
    check_cols(inter_fam, ["loss", "estimate", "ci_lo", "ci_hi", "verdict", "m", "p_adj"], "interaction family")
    check_cols(effect_fam, ["loss", "estimate", "ci_lo", "ci_hi", "verdict"], "effect family")
    pool = inter_fam[inter_fam["loss"] == POOLED]
    if not len(pool) or not np.isfinite(pool["estimate"].iloc[0]):
        return "No seed has all four runs of a loss in both regimes: the interaction cannot be estimated."
    p = pool.iloc[0]

    def ci(lo, hi):
        return f" [{lo:+.2f}, {hi:+.2f}]" if np.isfinite(lo) and np.isfinite(hi) else " (no interval)"
    below = np.isfinite(p["ci_hi"]) and p["ci_hi"] < 0
    above = np.isfinite(p["ci_lo"]) and p["ci_lo"] > 0
    if p["verdict"] == "reproduced":
        head = "**Yes: SEC gains more when fine-tuning the pretrained backbone than from scratch**"
    elif below and p["p_adj"] < VERDICT_RULES.alpha:
        head = "**The regime changes SEC's effect, the other way: SEC does worse fine-tuned than from scratch**"
    elif equivalence_words(p.to_dict()):
        head = (f"**No: averaged over the losses, the regime changes SEC's effect by no more than {p['margin']:g} "
                "R@1 points**")
    elif below or above:         # the interval excludes 0, but the family's Holm adjustment does not decide it
        head = (f"**Not decided: averaged over the losses, SEC's effect is {'smaller' if below else 'larger'} "
                f"fine-tuned than from scratch by its 95% interval, but not after the Holm adjustment over the "
                f"{int(p['m'])} rows of its family (adjusted p = {p['p_adj']:.2g}): a hint, not a finding**")
    else:
        head = "**Not detectably, averaged over the losses: no change of SEC's effect with the regime was found**"
    decided = [r for r in inter_fam.to_dict("records") if r["loss"] != POOLED and r["verdict"] == "reproduced"
               or r["loss"] != POOLED and np.isfinite(r["ci_hi"]) and r["ci_hi"] < 0
               and r["p_adj"] < VERDICT_RULES.alpha]
    per_loss = ("" if not decided else " Per loss, the interaction is decided for " + "; ".join(
        f"{r['loss']}: {r['estimate']:+.2f}{ci(r['ci_lo'], r['ci_hi'])} ({r['verdict']}; SEC − none "
        f"{r['SEC − none, fine-tuned']:+.2f} fine-tuned against {r['SEC − none, from scratch']:+.2f} from scratch)"
        for r in decided) + ".")
    per = "; ".join(f"{r['loss']} {r['estimate']:+.2f}{ci(r['ci_lo'], r['ci_hi'])} "
                    f"({r['verdict']}{equivalence_words(r)})" for r in effect_fam.to_dict("records"))
    gains = int(effect_fam["verdict"].isin(SIGNAL_WORDS).sum())
    smaller = int((effect_fam["verdict"] == "smaller than claimed").sum())
    return (f"{head}. The interaction, (SEC − none fine-tuned) − (SEC − none from scratch) averaged over the "
            f"losses per seed, is {p['estimate']:+.2f}{ci(p['ci_lo'], p['ci_hi'])} R@1 points "
            f"({p['verdict']}{equivalence_words(p.to_dict())}; Holm "
            f"over the {int(p['m'])} rows of its family).{per_loss} Fine-tuned, SEC − none per loss: {per}; SEC gains "
            f"for {gains} of {len(effect_fam)} losses in this regime"
            + ("" if not smaller else ", smaller than the paper's gains for that loss" if gains == 1 else
               f", {'all' if smaller == gains else smaller} of them smaller than the paper's gains for their losses")
            + ".")


def trajectories(runs: pd.DataFrame, steps: pd.DataFrame, columns=TRAJECTORY_COLUMNS) -> pd.DataFrame:
    """Mean over seeds per regime × loss × variant × logged step of the batch's mean norm, its CV (std / mean)
    and the gradient-vs-norm slope (the log-log slope of the per-sample ‖∂L/∂f_i‖ against ‖f_i‖)."""
    r = regime_runs(runs)
    s = with_batch_cv(steps)
    check_cols(s, ["key", "step", *columns], "steps")
    m = shared_steps(s[["key", "step", *columns]]).merge(r[["key", "regime", "loss", "variant"]], on="key")
    return m.groupby(["regime", "loss", "variant", "step"], sort=False)[list(columns)].mean().reset_index()


def slope_table(runs: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """Per regime × variant, over its runs (all losses and seeds): each run's median gradient-vs-norm slope over
    its logged steps (:func:`~sec_lib.chapters.common.run_slopes`), over the first and over the last quarter of
    training (mean ± 95% CI over runs)."""
    r = regime_runs(runs)
    check_cols(steps, ["key", "step", "grad_slope"], "steps")
    s = steps[["key", "step", "grad_slope"]].dropna()
    last = s.groupby("key")["step"].transform("max")
    def per_run(st, last_frac=1.0):
        return run_slopes(r[["key"]], st, last_frac).set_index("key")["grad_slope"]

    per = pd.DataFrame({"slope (all steps)": per_run(s), "slope (first quarter)": per_run(s[s["step"] <= 0.25 * last]),
                        "slope (last quarter)": per_run(s, last_frac=0.25)})
    x = r.merge(per.reset_index(), on="key", how="left")
    x = x.assign(_r=x["regime"].map({g: i for i, g in enumerate(REGIMES)}),
                 _v=x["variant"].map({v: i for i, v in enumerate(SHOWN_VARIANTS)})).sort_values(["_r", "_v"])
    return summary_table(x, ["regime", "variant"], list(per.columns), digits=3)


def slope_contrast(runs: pd.DataFrame, steps: pd.DataFrame) -> dict:
    """Fine-tuned − from scratch of each run's median gradient-vs-norm slope, paired on (loss, variant, seed):
    mean, 95% interval and n (pairs)."""
    return _regime_contrast(_run_slopes(runs, steps), "slope")


def _run_slopes(runs: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """:func:`regime_runs` with each run's ``slope``: the median of its gradient-vs-norm slope over the logged
    steps (:func:`~sec_lib.chapters.common.run_slopes`)."""
    check_cols(steps, ["key", "step", "grad_slope"], "steps")
    r = regime_runs(runs)
    return run_slopes(r, steps).rename(columns={"grad_slope": "slope"}).dropna(subset=["slope"])


def _regime_contrast(per_run: pd.DataFrame, column: str) -> dict:
    """Fine-tuned − from scratch of the per-run ``column``, paired on (loss, variant, seed): :func:`values_ci` of
    the differences (n: pairs; NaN and n = 0 without a run of both regimes)."""
    w = per_run.pivot_table(index=["loss", "variant", "seed"], columns="regime", values=column, aggfunc="first")
    if not set(REGIMES) <= set(w.columns):
        return {"estimate": math.nan, "ci_lo": math.nan, "ci_hi": math.nan, "n": 0}
    return values_ci((w[REGIMES[0]] - w[REGIMES[1]]).dropna().to_numpy())


def slope_sentence(runs: pd.DataFrame, steps: pd.DataFrame) -> str:
    """The gradient-vs-norm relation in both regimes, in words (the paper's argument: a normalized loss's
    gradient falls as 1/‖f‖, slope −1)."""
    x = _run_slopes(runs, steps)
    means = {g: values_ci(x.loc[x["regime"] == g, "slope"].to_numpy()) for g in REGIMES}
    c = _regime_contrast(x, "slope")

    def fmt(e):
        ci = f" [{e['ci_lo']:+.3f}, {e['ci_hi']:+.3f}]" if np.isfinite(e["ci_lo"]) else ""
        return f"{e['estimate']:+.3f}{ci}"
    return (f"Gradient-vs-norm slope per run (log ‖∂L/∂f_i‖ against log ‖f_i‖, the median over the logged steps; "
            f"mean and 95% interval over runs): fine-tuned {fmt(means[REGIMES[0]])} ({means[REGIMES[0]]['n']} runs), "
            f"from scratch {fmt(means[REGIMES[1]])} ({means[REGIMES[1]]['n']} runs); paired on loss, variant and "
            f"seed, fine-tuned − from scratch {fmt(c)} ({c['n']} pairs). A slope of −1 is the paper's 1/‖f‖: the "
            f"more negative, the more a small-norm sample's step outweighs a large-norm one's.")


def late_gains(runs: pd.DataFrame, evals: pd.DataFrame) -> pd.DataFrame:
    """Each run of :func:`regime_runs` with its R@1 gain over the last quarter of its length
    (:func:`sec_lib.runs.pilot.last_quarter_gain`, the measure the tiers page gives every reported run; NaN without
    an evaluation at or before 75%)."""
    r = regime_runs(runs)
    check_cols(r, ["key", "iterations"], "runs")
    check_cols(evals, ["key", "step", "R@1"], "evals")
    by = dict(tuple(evals.groupby("key")))
    gains = [last_quarter_gain(by[k], int(n)) if k in by else math.nan for k, n in zip(r["key"], r["iterations"])]
    return r[["key", "regime", "loss", "variant", "seed"]].assign(gain=gains)


def late_gain_sentence(runs: pd.DataFrame, evals: pd.DataFrame) -> str:
    """Whether the runs still rise at their end, per regime (median and IQR of :func:`late_gains`), and fine-tuned
    − from scratch paired on loss, variant and seed, in words."""
    g = late_gains(runs, evals)

    def regime(name):
        x = g.loc[g["regime"] == name, "gain"].dropna()
        if x.empty:
            return f"{name}, no run has an evaluation at 75% of its length"
        q1, med, q3 = x.quantile([0.25, 0.5, 0.75])
        return f"{name}, a median of {med:+.2f} points (IQR {q1:+.2f} to {q3:+.2f}; {len(x)} runs)"
    c = _regime_contrast(g, "gain")
    pair = ("no pair has both regimes evaluated" if not c["n"] else
            f"fine-tuned − from scratch {c['estimate']:+.2f}"
            + (f" [{c['ci_lo']:+.2f}, {c['ci_hi']:+.2f}]" if np.isfinite(c["ci_lo"]) else "") + f" ({c['n']} pairs)")
    return (f"**Still rising at the end?** R@1 gained over the last quarter of each run: {regime(REGIMES[0])}; "
            f"{regime(REGIMES[1])}; paired on loss, variant and seed, {pair}. Both regimes share the tier's one run "
            f"length (the decisive tier's chosen by its schedule pilot, on from-scratch runs); no convergence test "
            f"was made on fine-tuned runs.")


def _regime_configs(profile, root=None) -> tuple:
    """(the profile tuned by its pilot, its runs at ``root`` (:func:`~sec_lib.analysis.source.run_source`), the
    fine-tuned configs, their from-scratch twins): the chapter's runs as :func:`sec_lib.runs.finetune.sweep_runs`
    names them, for the sentences that count them."""
    src = run_source(profile, root)
    q = ex.tuned(ex.get_profile(profile), "adam", src.store)
    labeled = ft.sweep_runs(q, src.store)
    return (q, src, [c for c, lab in labeled if lab["regime"] == REGIMES[0]],
            [c for c, lab in labeled if lab["regime"] == REGIMES[1]])


def design_sentence(profile, root=None) -> str:
    """What this page trained, counted from the chapter's configs for ``profile`` (its store at ``root``): the
    fine-tuning runs, their twins (shared with the main table), the held-out rate selection (its grid, and the
    pair it chose), and that this is the quick tier."""
    check_shown(profile)
    if not has_arm(profile):
        return (f"Profile {profile!r} has no fine-tuning arm yet (profiles with one: "
                f"{', '.join(ft.FINETUNE_PROFILES)}), so it trains no runs for this page.")
    q, src, fine, twins = _regime_configs(profile, root)
    main = {run_key(c) for c in ex.sweep_configs("compare", profile, src.store)}
    shared = sum(run_key(c) in main for c in twins)
    if src.seeded_selection:
        return _seeded_design_sentence(q, src, fine, twins, shared)
    lrs, ratios = ft.grid(q)
    lr, lr_head = ft.chosen_rates(q, src.store)
    cut = (f" This profile trains the trunk rates {', '.join(f'{x:g}' for x in lrs)} of the full grid "
           f"{', '.join(f'{x:g}' for x in ft.TRUNK_LRS)}, to keep the build within its time; the choice must still "
           f"fall inside it (`sec_lib/runs/finetune.py`, `GRIDS`, records the full grid's held-out result)." if tuple(lrs) != tuple(ft.TRUNK_LRS) else "")
    its = "/".join(f"{i:,}" for i in sorted({c.iterations for c in fine}))
    return (f"This page reads {len(fine) + len(twins)} runs of profile {profile!r}, the **quick tier**: {len(fine)} "
            f"fine-tuned ({len(ex.MAIN_LOSSES)} losses × none / L2-reg / SEC × {len(ex.table_seeds(q))} seeds, {its} "
            f"iterations, one decay by {ft.DECAY:g} at iteration {fine[0].lr_milestones[0] if fine else '?'}) and "
            f"their {len(twins)} from-scratch twins, {shared} of which are the main table's own runs. The trunk "
            f"and head rates were chosen by {len(ft.selection(q))} runs on held-out training classes (semihard "
            f"without SEC, pilot seed): trunk rates {', '.join(f'{x:g}' for x in lrs)} × head/trunk ratios "
            f"{', '.join(f'{x:g}' for x in ratios)}; the best held-out R@1 chose trunk {lr:g} and head {lr_head:g} "
            f"(ratio {lr_head / lr:g}).{cut}{rate_words(fine, twins)} {decisive_status()}")


def rate_words(fine, twins, flags=()) -> str:
    """How the fine-tuned runs' trunk rate compares with their from-scratch twins' rate (the paper fine-tunes its
    backbone slowly: rebuttal Table 3), with the held-out choice's ``flags``; empty without both kinds of run."""
    trunk, scratch = sorted({c.lr for c in fine}), sorted({c.lr for c in twins})
    if len(trunk) != 1 or len(scratch) != 1:
        return ""
    r = trunk[0] / scratch[0]
    how = ("fine-tuning moves the pretrained trunk more slowly than training from scratch moves the network, as the "
           "paper's protocol does" if r < 1 else
           "a slower trunk did not pay on the held-out classes, so these runs move the pretrained trunk at least as "
           "fast as training from scratch moves the network; the paper fine-tunes its backbone slowly (rebuttal "
           "Table 3), so in this respect the regime here is not the paper's")
    flagged = f" (flagged: {'; '.join(flags)})" if flags else ""
    return f" The chosen trunk rate is {r:.2g}× the from-scratch runs' rate ({scratch[0]:g}){flagged}: {how}."


def answer_heading(profile) -> str:
    """The bold lead of the page's answer in words, under the marked answer (which opens "The answer on these runs"),
    naming the tier it reads: a committed long tier by name, else the quick tier (the profile ``make book`` trains)."""
    return f"**What the runs show (the {profile if profile in LONG_TIERS else 'quick'} tier).** "


def schedule_sentence(profile, root=None) -> str:
    """The fine-tuned runs' learning-rate schedule and how the held-out rates were chosen, for the tier ``profile``
    shows (its store at ``root``), counted from the chapter's configs: the quick tier's step schedule (the
    rebuttal's), or the decisive tier's own decay, which its from-scratch twins share (registered before its runs)."""
    check_shown(profile)
    if not has_arm(profile):
        return ""
    fine = _regime_configs(profile, root)[2]
    if not fine:
        return ""
    c = fine[0]
    if c.schedule == "step":
        at = ", ".join(f"{m:,}" for m in c.lr_milestones)
        return (f"**Schedule:** a step schedule, one decay by {c.lr_decay:g} at iteration {at} of {c.iterations:,} "
                f"(5/8 of the run: the rebuttal's CUB rows, 0.1 at 5k of 8k). The rates were chosen with the pilot "
                f"seed alone.")
    return (f"**Schedule:** this tier's own {c.schedule} decay over {c.iterations:,} iterations, the shape and length "
            f"its schedule pilot chose (tiers page), not the paper's step schedule: keeping the schedule of the "
            f"from-scratch twins makes the regime interaction compare runs that differ only in their start and the "
            f"fine-tuning protocol (registered before any of these runs trained: `data/reference/decisive/README.md`). "
            f"The rates were chosen with 3 seeds a pair.")


def decisive_status(root=None) -> str:
    """Where the decisive tier's two fine-tuning stages stand (committed runs against those named so far), from its
    committed folders under ``root``: the page reads that tier once both are complete."""
    t = decisive_progress(root)[0].set_index("stage")

    def of(stage: str) -> str:
        have, named = int(t.loc[stage, "committed"]), t.loc[stage, "named"]
        return f"{have} of {named}" if named != MISSING else f"{have} (named once the choices they need are made)"
    return (f"The decisive tier (converged runs, seeds planned for power) trains this page's runs in two stages: "
            f"its held-out rate selection holds {of('finetune-selection')} runs, its fine-tuned runs "
            f"{of('pretrained')}; this page reads that tier once both are complete.")


def selection_table(profile, root=None) -> pd.DataFrame:
    """The held-out rate selection: held-out R@1 per trunk rate and head/trunk ratio, the chosen pair marked."""
    check_shown(profile)
    src = run_source(profile, root)
    if src.seeded_selection:
        return _seeded_selection_table(ex.get_profile(profile), src)
    store = src.store
    q = ex.tuned(ex.get_profile(profile), "adam", store)
    runs = ex.stored_runs(store, ft.selection(q), "the fine-tuning rate selection", q)
    lr, lr_head = ft.chosen_rates(q, store)
    return pd.DataFrame([{"trunk lr": r.config.lr, "head/trunk": r.config.lr_head / r.config.lr,
                          "head lr": r.config.lr_head, "held-out R@1": r.metrics.get("R@1", math.nan),
                          "status": r.status,
                          "chosen": "✓" if (r.config.lr, r.config.lr_head) == (lr, lr_head) else ""} for r in runs])


def _seeded_design_sentence(q, src, fine, twins, shared) -> str:
    """:func:`design_sentence` of the decisive tier: its fine-tuned runs (arms and seeds counted from their configs,
    under the tier's own schedule), their twins, and its held-out rate selection (3 seeds a pair, grown at an edge)."""
    arms = sorted({"relative SEC" if c.relative else {"none": "none", "l2reg": "L2-reg", "sec": "SEC"}[c.variant]
                   for c in fine}, key=["none", "L2-reg", "SEC", "relative SEC"].index)
    its = "/".join(f"{i:,}" for i in sorted({c.iterations for c in fine})) or "—"
    sel = _seeded_selection_table(q, src)
    if len(sel):
        trunks = ", ".join(f"{x:g}" for x in sorted(set(sel["trunk lr"])))
        ratios = ", ".join(f"{x:g}" for x in sorted(set(sel["head/trunk"].round(6))))
        pick = sel[sel["chosen"] == "✓"]
        chosen = (f"; the best mean held-out R@1 chose trunk {pick['trunk lr'].iloc[0]:g} and head "
                  f"{pick['head lr'].iloc[0]:g}" if len(pick) else "; no pair is chosen yet")
        flags = (decisive.choices_in(src.store.root).get(decisive.FINETUNE, {}).get("flags", [])   # the tier's own
                 if len(pick) else [])
        rates = (f"The trunk and head rates were chosen by {int(sel['seeds'].sum())} runs on held-out training classes "
                 f"(semihard without SEC, 3 seeds a pair): trunk rates {trunks} × head/trunk ratios {ratios}{chosen}."
                 f"{rate_words(fine, twins, flags)}")
    else:
        rates = "Its held-out rate selection has no committed run yet."
    return (f"This page reads {len(fine) + len(twins)} runs of the **decisive tier**: {len(fine)} fine-tuned "
            f"({len(ex.MAIN_LOSSES)} losses × {' / '.join(arms)} × {seeds_text(fine)} seeds, {its} iterations, the "
            f"tier's own schedule) and their {len(twins)} from-scratch twins, {shared} of which are the main "
            f"comparison's own runs (the others are the scale chapter's). {rates}")


def _seeded_selection_table(p, src) -> pd.DataFrame:
    """:func:`selection_table` of the decisive tier: its finetune-selection stage, each rate pair's held-out R@1 the
    mean over its seeds; ✓ the pair the profile fixed (``choices.json``)."""
    def pair(c):
        return (("trunk lr", c.lr), ("head lr", c.lr_head)) if c.pretrained else None
    out = src.selection(("finetune-selection",), pair)
    if not len(out):
        return pd.DataFrame(columns=["trunk lr", "head/trunk", "head lr", "held-out R@1", "seeds", "status", "chosen"])
    chosen = (fixed_or_nan(p, "lr", "finetune"), fixed_or_nan(p, "lr", "finetune-head"))
    out["head/trunk"] = out["head lr"] / out["trunk lr"]
    out["chosen"] = ["✓" if (a, b) == chosen else "" for a, b in zip(out["trunk lr"], out["head lr"])]
    return out[["trunk lr", "head/trunk", "head lr", "held-out R@1", "seeds", "status", "chosen"]]


def page_reading(effect_fam: pd.DataFrame, inter_fam: pd.DataFrame, start: pd.DataFrame | None = None) -> str:
    """The closing bullets: the start of training, each row of both families with every measure and its
    verdict, then the answer."""
    lines = []
    if start is not None:
        lines.append("- **Where fine-tuning starts.** " + start_sentence(start))
    for r in effect_fam.to_dict("records"):
        lines.append(f"- **SEC − none, fine-tuned, {r['loss']}**: {measures_text(r, 2, 'R@1 points', '', 't-test')}"
                     f": **{r['verdict']}**.")
    for r in inter_fam.to_dict("records"):
        lines.append(f"- **Interaction, {r['loss']}** (fine-tuned {r['SEC − none, fine-tuned']:+.2f}, from scratch "
                     f"{r['SEC − none, from scratch']:+.2f}): {measures_text(r, 2, 'R@1 points', '', 't-test')}"
                     f": **{r['verdict']}**.")
    lines.append("\n" + answer_sentence(effect_fam, inter_fam))
    return "\n".join(lines)


# ------------------------------------------------------------------------------ the claims this page decides

#: :func:`interaction_family` on the page's evidence, exactly as the page computes it.
page_family = derived_family(__name__, "pretrained_interaction", lambda ev: interaction_family(ev.runs("pretrained")))


def page_effects(ev) -> pd.DataFrame:
    """:func:`effect_family` on the page's evidence."""
    return ev.derived("pretrained_effect", lambda: effect_family(ev.runs("pretrained")))


def _est_interaction(ev) -> dict:
    fam = page_family(ev)
    row = fam[fam["loss"] == POOLED]
    if not len(row):
        raise KeyError("no pooled row in the page's interaction family")
    eff = page_effects(ev)
    signal = eff[eff["verdict"].isin(SIGNAL_WORDS)]
    gains = ", ".join(f"{loss} ({word})" for loss, word in zip(signal["loss"], signal["verdict"])) or "none"
    return from_row(row.iloc[0], note=f"SEC − none fine-tuned is a gain for: {gains}")


CLAIMS = [
    Claim(id="P1", claim="SEC's R@1 effect is larger when fine-tuning a pretrained backbone (the paper's regime) "
                         "than when training from scratch",
          source="this book's question (the skeptic's 'different regime'); the paper fine-tunes an ImageNet backbone",
          measured="R@1 (SEC − none fine-tuned) − (SEC − none from scratch), paired on seed, mean over the 4 main "
                   "losses per seed",
          expected_sign=+1, page="pretrained", family=FAMILY_INTERACTION, estimate=_est_interaction, pooled=True),
    pretrained_seeds.CLAIM,
]
