"""The scale page: does SEC move R@1 by *equalizing* the embedding norms (the paper's argument) or by
*shrinking* them (what L2-reg does)?

Its runs (``experiments.scale``): the four main losses in five arms (``experiments.SCALE_ARMS``): no regularizer,
L2-reg (μ = 0), plain SEC at the η chosen on held-out classes, relative SEC (``relative=True``: it penalizes the
squared CV of the batch's norms, so it cannot pull the scale; its own η chosen on held-out classes) and the
fixed-scale control (SEC toward a fixed radius, the loss's median norm without a regularizer, which equalizes
without shrinking). Four contrasts, declared before the runs (:data:`CONTRASTS`), form the page's one Holm family;
:func:`mechanism` reads which mechanism moves R@1 from their verdicts.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import pandas as pd

from ..runs import experiments as ex
from ..runs import scalearms
from .. import reference
from ..report import MARGINS, one_family, pooled_diff, summary_table
from ..report.claims import Claim, derived_family, from_row
from ..analysis.source import run_source
from ..runs.store import run_key
from . import check_shown, common, evidence, profile_param
from .evidence import MAIN_TIERS
from .common import (beside_cv, check_cols, cv_from_var, equivalence_words, measures_text, seeds_text, shared_steps,
                     verdict_row_of, with_batch_cv, with_norm_cv)

#: The notebook's parameters (checked by ``sec_lib.params.notebook_params``).
PARAMS = profile_param()

#: How the page names each arm (``TrainConfig.variant``), in the page's order.
ARM_LABELS = {"none": "none", "l2reg": "L2-reg (μ = 0)", "sec": "SEC", "sec-relative": "relative SEC",
              "sec-fixed": "fixed-scale SEC", "cir": "CIR (PML)"}
assert tuple(ARM_LABELS) == scalearms.SCALE_ARMS
#: The two mechanisms a contrast can speak for.
MECHANISMS = ("equalize", "shrink")
#: The page's declared family (declared before any run): comparison, baseline arm, compared arm, the mechanism a
#: gain would show, and the expected sign (+1: the compared arm has the higher R@1). Equalizing: relative SEC and
#: the fixed-scale control each lower the CV without shrinking the scale. Shrinking: L2-reg shrinks without
#: equalizing, and plain SEC is relative SEC plus the pull toward a smaller scale.
CONTRASTS = (
    ("relative SEC − none", "none", "sec-relative", "equalize", +1),
    ("fixed-scale SEC − none", "none", "sec-fixed", "equalize", +1),
    ("L2-reg − none", "none", "l2reg", "shrink", +1),
    ("SEC − relative SEC", "sec-relative", "sec", "shrink", +1),
)
#: The Holm family of the page.
FAMILY = "scale page"
#: Per-run measures the page shows per arm: R@1, the training-set mean norm (the scale), its variance and CV.
ARM_METRICS = ("R@1", "train_norm_mean", "train_norm_var", "test_norm_var")
#: Per-step measures of the trajectories: the batch's mean norm, its CV (std / mean) and the mean angle a sample
#: turned in the step (Δθ, the effective step size).
TRAJECTORY_COLUMNS = ("norm_mean", "norm_cv", "dtheta_mean")


def arm_runs(frames) -> pd.DataFrame:
    """The runs of ``frames`` (a store ``Frames`` or a runs DataFrame with ``variant``) with ``arm`` (the page's
    name of each arm, :data:`ARM_LABELS`) and each norm variance's CV (:func:`~.common.with_norm_cv`); runs of a
    variant that is not an arm are refused with the valid ones named."""
    runs = with_norm_cv(frames)
    check_cols(runs, ["variant", "loss", "seed"], "runs")
    bad = sorted(set(runs["variant"].dropna()) - set(ARM_LABELS))
    if bad:
        raise ValueError(f"runs of variant(s) {bad} are not arms of the scale page; valid: {list(ARM_LABELS)}")
    return runs.assign(arm=runs["variant"].map(ARM_LABELS))


def arm_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Display table per loss × arm (mean ± 95% CI over seeds): R@1, the training-set mean norm, and each norm
    variance with its CV beside it; the rows in the page's arm order."""
    r = arm_runs(runs)
    r = r.assign(_o=r["variant"].map({v: i for i, v in enumerate(ARM_LABELS)})).sort_values(["loss", "_o"], kind="stable")
    r = r.assign(_l=r["loss"].map({l: i for i, l in enumerate(ex.MAIN_LOSSES)})).sort_values(["_l", "_o"], kind="stable")
    return summary_table(r, ["loss", "arm"], beside_cv(ARM_METRICS, r.columns), digits=3)


def trajectories(runs: pd.DataFrame, steps: pd.DataFrame, columns: Sequence[str] = TRAJECTORY_COLUMNS) -> pd.DataFrame:
    """Mean over seeds, per loss × arm × logged step, of the batch's mean norm, its CV (std / mean, from the
    logged variance and mean, :func:`~.common.with_batch_cv`) and the mean per-sample Δθ; steps where a column
    was not logged are left out of that column's mean."""
    r = arm_runs(runs)
    s = with_batch_cv(steps)
    check_cols(s, ["key", "step", *columns], "steps")
    m = shared_steps(s[["key", "step", *columns]]).merge(r[["key", "loss", "variant", "arm"]], on="key")
    out = m.groupby(["loss", "variant", "arm", "step"], sort=False)[list(columns)].mean().reset_index()
    return out.dropna(subset=list(columns), how="all").reset_index(drop=True)


def _log_ratio(runs: pd.DataFrame, a: str, b: str, metric: str) -> dict:
    """log10(b / a) of ``metric`` (a positive per-run measure), paired on seed within each loss, averaged over the
    losses per seed: mean, 95% interval, t-test over seeds (:func:`sec_lib.report.pooled_diff`)."""
    return pooled_diff(runs, "variant", a, b, metric, transform=np.log10)


def _contrast_row(r: pd.DataFrame, a: str, b: str, sign: int, metric: str) -> dict:
    """One contrast of a family: ``metric`` of arm ``b`` − arm ``a`` paired on seed within each loss, averaged over
    the losses per seed, as a verdict row with the metric's declared margin, and ``n_losses``."""
    est = pooled_diff(r, "variant", a, b, metric)
    return {"metric": metric, **verdict_row_of(est, sign, MARGINS.get(metric)), "n_losses": est.get("n_groups", 0),
            "groups_p": est.get("groups_p", math.nan), "apart": est.get("apart", "")}


def scale_family(runs: pd.DataFrame, metric: str = "R@1") -> pd.DataFrame:
    """The page's ONE Holm family: each of :data:`CONTRASTS`, ``metric`` of the compared arm − the baseline arm,
    paired on seed within each loss and averaged over the losses per seed (n = seeds), with its verdict (expected
    sign +1; the metric's declared equivalence margin, ±0.5 points of R@1, as on every R@1 row of the book), ``p_adj``
    and ``m`` over the four, the detectable effect and ``n_losses``. Beside each: what the
    compared arm did to the scale and the spread, log10 of its training-set mean norm and CV over the baseline's
    (descriptive, not tested)."""
    r = arm_runs(runs)
    check_cols(r, [metric], "runs")
    rows = []
    for name, a, b, mech, sign in CONTRASTS:
        row = {"comparison": name, "mechanism": mech, **_contrast_row(r, a, b, sign, metric)}
        for col, label in (("train_norm_mean", "log10 scale ratio"), ("train_norm_cv", "log10 CV ratio")):
            row[label] = _log_ratio(r, a, b, col)["estimate"] if col in r.columns else math.nan
        rows.append(row)
    (fam,) = one_family(pd.DataFrame(rows), family=FAMILY)
    return fam             # its groups_p and apart (the loss × arm test) fold under the table with the test's details


def mechanism(family: pd.DataFrame) -> dict:
    """Which mechanism moves R@1, read from the family's verdicts: ``equalize`` / ``shrink`` are True when at least
    one of that mechanism's contrasts is *reproduced* (a gain, Holm-adjusted), False when none is; ``against``
    lists the contrasts decided the wrong way (a significant loss); ``answer`` names the outcome ("equalizing",
    "shrinking", "both", "neither")."""
    check_cols(family, ["comparison", "mechanism", "verdict", "estimate", "ci_hi"], "family")
    out = {}
    for mech in MECHANISMS:
        sub = family[family["mechanism"] == mech]
        out[mech] = bool((sub["verdict"] == "reproduced").any())
        out[f"{mech}_rows"] = list(sub.loc[sub["verdict"] == "reproduced", "comparison"])
    out["against"] = list(family.loc[(family["verdict"] == "not reproduced") & (family["ci_hi"] < 0), "comparison"])
    out["answer"] = {(True, True): "both", (True, False): "equalizing", (False, True): "shrinking",
                     (False, False): "neither"}[(out["equalize"], out["shrink"])]
    return out


def mixed_contrasts(family: pd.DataFrame, m: dict) -> str:
    """'equalizing gains in relative SEC − none but not in fixed-scale SEC − none; …': for each mechanism that gains
    (:func:`mechanism`) while another of its contrasts does not, which contrast does and which does not; '' when
    every contrast of a gaining mechanism gains."""
    words = {"equalize": "equalizing", "shrink": "shrinking"}
    out = []
    for mech in MECHANISMS:
        others = [c for c in family.loc[family["mechanism"] == mech, "comparison"] if c not in m[f"{mech}_rows"]]
        if m[mech] and others:
            out.append(f"{words[mech]} gains in {' and '.join(m[f'{mech}_rows'])} but not in {' and '.join(others)}")
    return "; ".join(out)


def answer_sentence(family: pd.DataFrame) -> str:
    """The page's answer in one computed paragraph: which mechanism moves R@1 here, with the contrasts behind it."""
    m = mechanism(family)
    est = {r["comparison"]: r for r in family.to_dict("records")}

    def cite(name):
        r = est[name]
        lo, hi = r["ci_lo"], r["ci_hi"]
        ci = f" [{lo:+.2f}, {hi:+.2f}]" if np.isfinite(lo) and np.isfinite(hi) else ""
        return f"{name} {r['estimate']:+.2f}{ci} ({r['verdict']}{equivalence_words(r)})"
    head = {"both": "**Both mechanisms move R@1 here**: equalizing the norms and shrinking them each give a gain",
            "equalizing": "**Equalizing moves R@1 here; shrinking does not detectably**",
            "shrinking": "**Shrinking moves R@1 here; equalizing does not detectably**",
            "neither": "**Neither mechanism detectably moves R@1 here**"}[m["answer"]]
    mixed = mixed_contrasts(family, m)
    if mixed:                                 # a mechanism gains in one contrast and not in the other: say which
        head = {"both": "**Both mechanisms move R@1 here, though not in every contrast**: " + mixed,
                }.get(m["answer"], f"{head}, and only in one contrast: {mixed}")
    eq = "; ".join(cite(c[0]) for c in CONTRASTS if c[3] == "equalize")
    sh = "; ".join(cite(c[0]) for c in CONTRASTS if c[3] == "shrink")
    text = (f"{head}. Equalizing without shrinking: {eq}. Shrinking: {sh}. R@1 points, mean over the "
            f"{int(family['n_losses'].max()) if len(family) else 0} losses per seed, 95% intervals over seeds; one Holm "
            f"family of {int(family['m'].max()) if len(family) else 0}.")
    if m["against"]:
        text += " Decided the wrong way (a significant loss): " + ", ".join(m["against"]) + "."
    return text + losses_differ_sentence(family)


def losses_differ_sentence(family: pd.DataFrame) -> str:
    """' The four losses do not agree on: SEC − relative SEC (loss × arm test p = 0.01: npair stands apart …); …':
    the contrasts whose pooled row the loss × arm test flags (:func:`sec_lib.report.groups_differ`); '' for none."""
    if "groups_p" not in family.columns:
        return ""
    flagged = [r for r in family.to_dict("records") if np.isfinite(r.get("groups_p", math.nan))
               and r["groups_p"] < 0.05]
    if not flagged:
        return ""
    return (" ⚑ The losses do not agree on: " + "; ".join(f"{r['comparison']} (loss × arm test p = "
                                                          f"{r['groups_p']:.2g}: {r['apart']})" for r in flagged)
            + ": the pooled row averages over losses that differ.")


def sec_split(runs: pd.DataFrame) -> dict:
    """What plain SEC does to the training-set norms against no regularizer, per seed averaged over the losses:
    log10 of the variance ratio and its two parts, 2·log10 of the CV ratio (equalizing) and 2·log10 of the mean-norm
    ratio (shrinking), which add up to it (Var = (CV·mean)²), each as mean and 95% interval over seeds; and the
    share of the variance's fall that the scale explains (scale part / variance part, of the means)."""
    r = arm_runs(runs)
    check_cols(r, ["train_norm_var", "train_norm_mean", "train_norm_cv"], "runs")
    parts = {"log10 variance ratio": _log_ratio(r, "none", "sec", "train_norm_var"),
             "2·log10 CV ratio (equalizing)": _log_ratio(r.assign(train_norm_cv=r["train_norm_cv"] ** 2), "none", "sec",
                                                        "train_norm_cv"),
             "2·log10 scale ratio (shrinking)": _log_ratio(r.assign(train_norm_mean=r["train_norm_mean"] ** 2), "none",
                                                          "sec", "train_norm_mean")}
    var, scl = parts["log10 variance ratio"]["estimate"], parts["2·log10 scale ratio (shrinking)"]["estimate"]
    share = scl / var if np.isfinite(var) and var != 0 and np.isfinite(scl) else math.nan
    return {"parts": parts, "scale_share": share}


def sec_split_table(runs: pd.DataFrame) -> pd.DataFrame:
    """:func:`sec_split` as a table: part, estimate, 95% interval, n (seeds)."""
    s = sec_split(runs)
    return pd.DataFrame([{"part of log10 Var(SEC) / Var(none)": k, "estimate": v["estimate"], "ci_lo": v["ci_lo"],
                          "ci_hi": v["ci_hi"], "n (seeds)": v["n"]} for k, v in s["parts"].items()])


def rebuttal_cv_table(runs: pd.DataFrame, rebuttal: pd.DataFrame | None = None) -> pd.DataFrame:
    """The rebuttal's training-set norm variances without / with SEC (Cars, per loss; ``sec_lib/data/paper/
    rebuttal_variance.csv``) beside ours for the same loss (plain SEC of this page against none, mean over seeds):
    our variances, our mean norms and our CVs (std / mean), and how much of our variance's fall is the scale
    (2·log10 of the mean-norm ratio over log10 of the variance ratio; blank where our variance did not fall). The
    rebuttal gives no mean norm, so its
    variances have no CV: ours say how far a fall of that size can be rescaling."""
    reb = reference.rebuttal_variance() if rebuttal is None else rebuttal
    check_cols(reb, ["loss", "norm_var_none", "norm_var_sec"], "rebuttal")
    r = arm_runs(runs)
    check_cols(r, ["train_norm_var", "train_norm_mean"], "runs")
    r = r[r["variant"].isin(["none", "sec"]) & r["train_norm_var"].notna()]
    means = r.groupby(["loss", "variant"])[["train_norm_var", "train_norm_mean"]].mean()
    cvs = r.assign(cv=cv_from_var(r["train_norm_var"].astype(float), r["train_norm_mean"].astype(float))) \
        .groupby(["loss", "variant"])["cv"].mean()
    rows = []
    for x in reb.to_dict("records"):
        loss = x["loss"]
        have = (loss, "none") in means.index and (loss, "sec") in means.index
        v0, v1 = (means.loc[(loss, "none"), "train_norm_var"], means.loc[(loss, "sec"), "train_norm_var"]) if have \
            else (math.nan, math.nan)
        m0, m1 = (means.loc[(loss, "none"), "train_norm_mean"], means.loc[(loss, "sec"), "train_norm_mean"]) if have \
            else (math.nan, math.nan)
        c0, c1 = (cvs.loc[(loss, "none")], cvs.loc[(loss, "sec")]) if have else (math.nan, math.nan)
        lv = math.log10(v1 / v0) if have and v0 > 0 and v1 > 0 else math.nan
        ls = 2 * math.log10(m1 / m0) if have and m0 > 0 and m1 > 0 else math.nan
        rows.append({"loss": loss, "rebuttal var none": x["norm_var_none"], "rebuttal var SEC": x["norm_var_sec"],
                     "rebuttal var ratio": x["norm_var_none"] / x["norm_var_sec"],
                     "our var none": v0, "our var SEC": v1, "our var ratio": v0 / v1 if have and v1 > 0 else math.nan,
                     "our mean norm none": m0, "our mean norm SEC": m1, "our CV none": c0, "our CV SEC": c1,
                     # only where our variance fell: a share of a rise (or of no change) means nothing
                     "share of the fall that is scale": ls / lv if np.isfinite(lv) and lv < 0 else math.nan})
    return pd.DataFrame(rows)


def rebuttal_sentence(table: pd.DataFrame) -> str:
    """How the rebuttal's variance falls read as CVs from our runs: the median share of our variance's fall that is
    rescaling, and the CV change beside the variance change for each loss."""
    t = table.dropna(subset=["our var none", "our var SEC"])
    if not len(t):
        return "Our runs have no plain-SEC / none pair to set beside the rebuttal's variances."
    each = "; ".join(f"{r['loss']}: variance ÷{r['our var ratio']:.3g} (rebuttal ÷{r['rebuttal var ratio']:.3g}), "
                     f"CV {r['our CV none']:.3g} → {r['our CV SEC']:.3g}, mean norm {r['our mean norm none']:.3g} → "
                     f"{r['our mean norm SEC']:.3g}" for r in t.to_dict("records"))
    shares = t["share of the fall that is scale"].to_numpy(float)
    fell = int(np.isfinite(shares).sum())
    if not fell:
        return f"In our runs {each}. SEC lowered our training-set norm variance for none of the losses."
    share = float(np.nanmedian(shares))
    return (f"In our runs {each}. Over the {fell} loss{'es' if fell != 1 else ''} whose variance fell, a median "
            f"{share:.0%} of the fall of log Var(‖f‖) under SEC is the fall of the scale (the mean norm), the rest the "
            "fall of the CV: a variance ratio alone, as the rebuttal reports it, cannot tell the two apart.")


def selection_table(profile, root=None) -> pd.DataFrame:
    """Relative SEC's η selection on held-out classes: per main loss and η of the profile's ``relative_eta_grid``
    (0 = no regularizer), the held-out R@1 and which η was chosen (:func:`experiments.chosen_relative_eta`)."""
    check_shown(profile)
    p = ex.get_profile(profile)
    src = run_source(profile, root)
    if src.seeded_selection:
        return _seeded_selection_table(p, src)
    store = src.store
    q = ex.tuned(p, "adam", store)
    runs = scalearms.relative_selection_runs(q, store)
    rows = []
    for loss in ex.MAIN_LOSSES:
        mine = [r for r in runs if r.config.loss == loss]
        chosen = scalearms.chosen_relative_eta(q, loss, mine)
        for r in sorted(mine, key=lambda r: r.config.eta):
            rows.append({"loss": loss, "η (relative SEC)": r.config.eta, "held-out R@1": r.metrics.get("R@1", math.nan),
                         "status": r.status, "chosen": "✓" if r.config.eta == chosen else ""})
    return pd.DataFrame(rows)


def _seeded_selection_table(p, src) -> pd.DataFrame:
    """:func:`selection_table` of the decisive tier: its scale-selection stage (relative SEC's η, 3 seeds a point) and
    the main selection's η = 0 runs as the baseline, each point's held-out R@1 the mean over its seeds; ✓ the η the
    profile fixed (``choices.json``)."""
    def point(c):
        if c.loss not in ex.MAIN_LOSSES or not (c.relative or c.eta == 0):
            return None
        return (("loss", c.loss), ("η (relative SEC)", c.eta))
    out = src.selection(("selection", "scale-selection"), point)
    if not len(out):
        return pd.DataFrame(columns=["loss", "η (relative SEC)", "held-out R@1", "seeds", "status", "chosen"])
    out["chosen"] = ["✓" if e == common.fixed_or_nan(p, "relative", l) else ""
                     for l, e in zip(out["loss"], out["η (relative SEC)"])]
    return out[["loss", "η (relative SEC)", "held-out R@1", "seeds", "status", "chosen"]]


def design_sentence(profile, root=None) -> str:
    """What this page trained, counted from :func:`experiments.scale` for ``profile`` (its store at ``root``): the
    runs, how many are the page's own (relative SEC, the fixed-scale control, PML's CIR where trained) and how many
    it shares with the main table (both η arms), and relative SEC's held-out selection."""
    check_shown(profile)
    p = ex.get_profile(profile)
    if not p.relative_eta_grid:
        return f"Profile {profile!r} has no relative-SEC η grid, so it trains no runs for this page."
    src = run_source(profile, root)
    store = src.store
    q = ex.tuned(p, "adam", store)
    configs = ex.sweep_configs("scale", profile, store)
    shared = {run_key(c) for ch in ("compare", "tuned") for c in ex.sweep_configs(ch, profile, store)}
    own = [c for c in configs if run_key(c) not in shared]
    its = "/".join(f"{i:,}" for i in sorted({c.iterations for c in configs}))
    if src.seeded_selection:                     # 3 seeds a grid point, grown at an edge
        sel = _seeded_selection_table(p, src)
        points = sel[sel["η (relative SEC)"] > 0] if len(sel) else sel
        grid = ", ".join(f"{e:g}" for e in sorted(set(points["η (relative SEC)"]))) if len(points) else "—"
        n_sel, how = int(points["seeds"].sum()) if len(points) else 0, "3 seeds a point"
    else:
        grid, n_sel, how = ", ".join(f"{e:g}" for e in q.relative_eta_grid), len(ex.relative_selection(q)), "pilot seed"
    arms = len({c.variant for c in configs})
    mine = "relative SEC, the fixed-scale control" + (" and PML's CIR" if any(c.penalty == "cir" for c in configs)
                                                      else "")
    return (f"This page reads {len(configs)} runs ({len(ex.MAIN_LOSSES)} losses × {arms} arms × "
            f"{seeds_text(configs)} seeds, {its} iterations): {len(own)} are its own ({mine}), the others are the "
            f"main table's (at the paper's η and at the η chosen on held-out classes). Relative SEC's η was "
            f"chosen among {grid} by {n_sel} runs on held-out training classes ({how}). That is all "
            f"this page adds to profile {profile!r}: the same seeds and run length as the main table.")


def arm_contrast_by_loss(runs: pd.DataFrame, arm: str, base: str = "none") -> pd.DataFrame:
    """Per loss, means over seeds: R@1 of ``arm`` − ``base`` (paired on seed), the training-set CV of ``arm``, of
    plain SEC and of ``base``, and ``arm``'s mean norm over plain SEC's (how much larger a scale it equalizes at)."""
    r = with_norm_cv(arm_runs(runs))
    check_cols(r, ["loss", "seed", "R@1", "train_norm_mean", "train_norm_cv"], "runs")
    w = r.pivot_table(index=["loss", "seed"], columns="variant", values="R@1", aggfunc="first")
    if arm not in w.columns or base not in w.columns:
        return pd.DataFrame(columns=["loss", "R@1 diff", "CV", "CV SEC", f"CV {base}", "scale / SEC's"])
    d = (w[arm] - w[base]).groupby(level="loss").mean()
    m = r.groupby(["loss", "variant"])[["train_norm_mean", "train_norm_cv"]].mean()
    rows = []
    for loss in [l for l in ex.MAIN_LOSSES if l in d.index]:
        get = lambda v, c: m[c].get((loss, v), math.nan)       # noqa: E731
        rows.append({"loss": loss, "R@1 diff": float(d[loss]), "CV": get(arm, "train_norm_cv"),
                     "CV SEC": get("sec", "train_norm_cv"), f"CV {base}": get(base, "train_norm_cv"),
                     "scale / SEC's": get(arm, "train_norm_mean") / get("sec", "train_norm_mean")})
    return pd.DataFrame(rows)


def fixed_scale_sentence(runs: pd.DataFrame, drop: float = 1.0) -> str:
    """The fixed-scale control read per loss: its R@1 against none, and how hard it equalized against plain SEC (its
    training-set CV beside SEC's, and the scale it holds over SEC's). It runs at plain SEC's η toward a radius many
    times SEC's scale, and the penalty is in absolute units, so it can equalize far harder than SEC does: where its CV
    is below SEC's for every loss, the sentence says so, and names the losses it cost more than ``drop`` points."""
    t = arm_contrast_by_loss(runs, "sec-fixed")
    if not len(t):
        return ""
    per = "; ".join(f"{r['loss']} {r['R@1 diff']:+.2f} (CV {r['CV']:.3f} against SEC's {r['CV SEC']:.3f} and "
                    f"none's {r['CV none']:.3f})" for r in t.to_dict("records"))
    ratio = t["scale / SEC's"]
    text = (f"**The fixed-scale control per loss** (R@1 − none, mean over seeds; training-set CV): {per}. It holds a "
            f"scale {ratio.min():.0f} to {ratio.max():.0f} times plain SEC's at SEC's own η.")
    harder = bool((t["CV"] < t["CV SEC"]).all())
    lost = list(t.loc[t["R@1 diff"] < -drop, "loss"])
    if harder:
        text += (" On every loss it equalized harder than SEC (a lower CV): SEC's penalty is in absolute units, so "
                 "the same η at a larger radius pulls harder. This arm therefore tests equalizing beyond SEC's "
                 "strength, at a weight no selection chose; relative SEC, whose η was chosen on held-out classes, is "
                 "the page's test of equalizing without shrinking.")
    if lost:
        text += f" It cost more than {drop:g} point{'s' if drop != 1 else ''} on {', '.join(lost)}."
    return text


def page_reading(runs: pd.DataFrame, family: pd.DataFrame | None = None) -> str:
    """The closing bullets: each contrast of the family with every measure and its verdict, then the mechanism."""
    fam = scale_family(runs) if family is None else family
    lines = []
    for r in fam.to_dict("records"):
        what = {"equalize": "equalizing alone", "shrink": "shrinking"}[r["mechanism"]]
        detail = f"each the mean over {int(r['n_losses'])} losses"
        lines.append(f"- **{r['comparison']}** ({what}): {measures_text(r, 2, 'R@1 points', detail, 't-test against 0')}"
                     f": **{r['verdict']}**.")
    lines.append("\n" + answer_sentence(fam))
    return "\n".join(lines)


# ------------------------------------------------------------------------------ is SEC already in PML?

def cir_gaps(runs: pd.DataFrame, test_norms: pd.DataFrame) -> pd.DataFrame:
    """PML's CenterInvariantRegularizer against ``mu^2`` times SEC on each run's own test-set norms (both depend on
    the embedding only through its norms, :func:`sec_lib.sec.center_invariant_penalty`): one row per run with
    ``arm``, ``loss``, ``cv``, ``skew``, ``kurt`` of the norms, ``gap`` = CIR / (mu^2 SEC) - 1 computed from the
    norms, and ``gap_formula`` = skew CV + (kurt - 1) CV^2 / 4 (the exact moment identity; the two agree to
    rounding)."""
    check_cols(runs, ["key", "arm", "loss"], "runs")
    check_cols(test_norms, ["key", "norm"], "test_norms")
    rows = []
    for key, g in test_norms[test_norms["key"].isin(runs["key"])].groupby("key", sort=False):
        n = g["norm"].to_numpy(float)
        mu, d = n.mean(), n - n.mean()
        var, m3, m4 = (d ** 2).mean(), (d ** 3).mean(), (d ** 4).mean()
        if not var > 0:
            continue
        sq = n ** 2
        cir, sec = ((sq - sq.mean()) ** 2).mean() / 4, var
        cv, skew, kurt = math.sqrt(var) / mu, m3 / var ** 1.5, m4 / var ** 2
        rows.append({"key": key, "cv": cv, "skew": skew, "kurt": kurt, "gap": cir / (mu ** 2 * sec) - 1,
                     "gap_formula": skew * cv + (kurt - 1) * cv ** 2 / 4})
    out = pd.DataFrame(rows, columns=["key", "cv", "skew", "kurt", "gap", "gap_formula"])
    return runs[["key", "arm", "loss"]].merge(out, on="key", how="inner")


def cir_table(gaps: pd.DataFrame) -> pd.DataFrame:
    """Per arm: runs, the median test-set CV and the median and range of the gap CIR / (mu^2 SEC) - 1."""
    g = gaps.groupby("arm", sort=False)
    return pd.DataFrame({"runs": g.size(), "median CV": g["cv"].median(), "median gap": g["gap"].median(),
                         "smallest gap": g["gap"].min(), "largest gap": g["gap"].max()}).reset_index()


def cir_sentence(gaps: pd.DataFrame) -> str:
    """The computed answer to "is SEC already in pytorch-metric-learning?" on these runs."""
    if gaps.empty:
        return "No run has test-set norms to compare CIR and SEC on."
    t = cir_table(gaps).set_index("arm")
    worst = float((gaps["gap"] - gaps["gap_formula"]).abs().max())
    parts = [f"{arm}: {r['median gap']:+.3f} (median CV {r['median CV']:.3f})" for arm, r in t.iterrows()]
    return (f"On these runs' own test-set norms, PML's `CenterInvariantRegularizer` equals μ²·SEC times (1 + gap), with "
            f"the median gap per arm {'; '.join(parts)} (the moment identity gives the same gaps to {worst:.1e}). So "
            f"in value CIR is SEC weighted by μ², the squared scale, to within those gaps; but that weight moves with "
            f"the scale: CIR is homogeneous of degree 4, and along a rescaling it pulls about twice as hard as μ²·SEC "
            f"(the theory page, section 7): at a matched value it contracts the scale twice as hard, and it "
            f"is not SEC: **no, SEC is not already in pytorch-metric-learning**, though CIR is its scale-weighted cousin.")


#: The PML arm's own declared family (declared with the arm, before its runs): does PML's
#: CenterInvariantRegularizer, at the weight whose value is SEC's at the unregularized radius
#: (:func:`sec_lib.runs.scalearms.cir_eta`), gain like SEC (expected sign +1 against none), and is it SEC (expected no
#: change against plain SEC, within the R@1 margin)? (comparison, baseline arm, compared arm, expected sign)
CIR_CONTRASTS = (("CIR − none", "none", "cir", +1), ("CIR − SEC", "sec", "cir", 0))
#: Its Holm family.
CIR_FAMILY = "scale page: PML's CIR"


def shown_arms(runs: pd.DataFrame) -> list:
    """The page's names of the arms ``runs`` holds, in the page's order (a tier without the CIR arm shows five)."""
    have = set(runs["variant"])
    return [label for v, label in ARM_LABELS.items() if v in have]


def cir_family(runs: pd.DataFrame, metric: str = "R@1") -> pd.DataFrame:
    """The PML arm's family (:data:`CIR_CONTRASTS`): ``metric`` of CIR − none and CIR − SEC, paired on seed within
    each loss and averaged over the losses per seed, with the metric's declared margin (a 'reproduced' CIR − SEC
    says the two are equivalent within it); Holm over the two. Empty where ``runs`` hold no CIR arm."""
    r = arm_runs(runs)
    if "cir" not in set(r["variant"]):
        return pd.DataFrame(columns=["comparison", "metric", "estimate", "ci_lo", "ci_hi", "verdict"])
    check_cols(r, [metric], "runs")
    rows = [{"comparison": name, **_contrast_row(r, a, b, sign, metric)} for name, a, b, sign in CIR_CONTRASTS]
    (fam,) = one_family(pd.DataFrame(rows), family=CIR_FAMILY)
    return fam


def cir_arm_sentence(fam: pd.DataFrame, runs: pd.DataFrame, tier: str) -> str:
    """What a PML user gets from the CIR arm, computed: its two contrasts with their verdicts, and what it did to
    the scale and the CV beside SEC's (training-set norms, mean over losses and seeds). From a tier that is not one
    whose verdicts the book states (:data:`sec_lib.chapters.evidence.MAIN_TIERS`), each verdict is marked 'quick
    tier only', as the scorecard lists such a result apart."""
    quick = tier not in MAIN_TIERS
    if not len(fam):
        return (f"The {tier} tier has no CIR arm: its scale stage was registered with the five arms above. The quick "
                "tier trains it (`make book`).")
    r = with_norm_cv(arm_runs(runs))
    f = fam.set_index("comparison")

    def cite(name):
        x = f.loc[name]
        ci = (f" [{x['ci_lo']:+.2f}, {x['ci_hi']:+.2f}]" if np.isfinite(x["ci_lo"]) and np.isfinite(x["ci_hi"])
              else "")
        return (f"{name} {x['estimate']:+.2f}{ci} R@1 points ({'quick tier only: ' if quick else ''}**{x['verdict']}**"
                f"{equivalence_words(x.to_dict())})")
    m = r.groupby("variant")[["train_norm_mean", "train_norm_cv"]].mean()
    eta = r.loc[r["variant"] == "cir"].groupby("loss")["eta"].first() if "eta" in r.columns else pd.Series(dtype=float)
    etas = " (" + ", ".join(f"{loss} {e:.3g}" for loss, e in eta.items()) + ")" if len(eta) else ""
    same = {"reproduced": "behaves as SEC within the margin", "not reproduced": "does not behave as SEC"}.get(
        f.loc["CIR − SEC", "verdict"], "cannot be told apart from SEC or shown to match it here")
    length = f" of {int(r['iterations'].max()):,} iterations" if "iterations" in r.columns else ""
    head = (f"**PML's CIR as an arm (the quick tier only: {int(f['n'].max())} seeds{length}; the decisive tier "
            "registered its scale stage without this arm, so these are not verdicts of the book).**" if quick else
            f"**PML's CIR as an arm ({tier} tier).**")
    return (f"{head} Trained at η = SEC's η / radius²{etas}, so that at the scale "
            f"the loss reaches without a regularizer its value is SEC's: {cite('CIR − none')}; {cite('CIR − SEC')} "
            f"(Holm over these two, {int(f['n'].max())} seeds, each the mean over {int(f['n_losses'].max())} losses; "
            f"'CIR − SEC' expects no change, ±{f['margin'].max():g} points). Training-set mean norm: none "
            f"{m.loc['none', 'train_norm_mean']:.3g}, SEC {m.loc['sec', 'train_norm_mean']:.3g}, CIR "
            f"{m.loc['cir', 'train_norm_mean']:.3g}; CV {m.loc['none', 'train_norm_cv']:.3f}, "
            f"{m.loc['sec', 'train_norm_cv']:.3f}, {m.loc['cir', 'train_norm_cv']:.3f}. A PML user who reaches for "
            f"CIR in place of SEC, at SEC's strength, gets a regularizer that {same} on R@1.")


def cir_arm_reading(ev, profile: str, root=None) -> tuple[pd.DataFrame, str, pd.DataFrame]:
    """(family, sentence, runs) of the CIR arm: the page's own tier where it trained the arm, else the quick tier of
    ``profile`` (the decisive tier registered its scale stage without it), else an empty family and a sentence
    saying so."""
    runs = arm_runs(ev.runs("scale"))
    tier = ev.profile
    if "cir" not in set(runs["variant"]) and ev.profile != profile:
        try:
            runs, tier = arm_runs(evidence.page_evidence("scale", profile, root, tier=profile).runs("scale")), profile
        except (KeyError, ValueError):
            pass
    fam = cir_family(runs)
    text = cir_arm_sentence(fam, runs, tier)
    if len(fam) and tier not in evidence.MAIN_TIERS:        # the table says it too
        fam = fam.assign(verdict=[f"quick tier only: {v}" for v in fam["verdict"]])
    return fam, text, runs


# ------------------------------------------------------------------------------ the claims this page decides

#: :func:`scale_family` on the page's evidence, exactly as the page computes it.
page_family = derived_family(__name__, "scale_family", lambda ev: scale_family(ev.runs("scale")))


def _est_equalize(ev) -> dict:
    fam = page_family(ev)
    row = fam[fam["comparison"] == CONTRASTS[0][0]]
    if not len(row):
        raise KeyError("no relative SEC − none row in the page's family")
    m = mechanism(fam)
    return from_row(row.iloc[0], note=f"which mechanism moves R@1 here: {m['answer']} (equalizing contrasts reproduced: "
                                      f"{', '.join(m['equalize_rows']) or 'none'}; shrinking: "
                                      f"{', '.join(m['shrink_rows']) or 'none'})")


CLAIMS = [
    Claim(id="S1", claim="Equalizing the norms gains R@1 without shrinking them: relative SEC, which lowers the CV "
                         "without shrinking the scale, still gains (whether shrinking gains too is the page's "
                         "family, not this claim)",
          source="the paper's argument (Sec. 3); this book's question (shrink or equalize)",
          measured="R@1 relative SEC (scale-free, own held-out η) − none, mean over the 4 main losses per seed; the "
                   "note names the mechanism the page's family finds",
          expected_sign=+1, page="scale", estimate=_est_equalize, pooled=True),
]
