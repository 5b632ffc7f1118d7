"""The fairness page (meta-review): do unregularized embedding norms depend on who the sample is (the font
design that drew the glyph, the class's difficulty), does SEC remove that dependence, and does retrieval
accuracy differ across font designs with and without SEC? No new training: the main table's runs.

Per run (one loss, variant and seed), on its test images:

* ``eta2_excess``: the within-class η² of the relative norm (norm / the run's mean norm) across font designs
  (serif / sans / monospace / script), minus its value when the designs are shuffled within each class
  (chance); > 0: the design explains norm variance beyond chance;
* ``difficulty_r``: Spearman correlation, over test classes, of the class's mean relative norm with its
  difficulty (1 − hit@1 rate over the unregularized runs of the same loss, :func:`sec_lib.report.fairness.class_difficulty`);
* ``hit_gap``: the largest within-class gap in hit@1 (points) between two font designs that draw at least 10% of
  the test images (who is served worse, and by how much).

Claims take these per run, average them over the 4 losses per seed and compare SEC with none paired on seed
(:func:`sec_lib.report.verdict_row`). The display table adds cluster-bootstrap intervals by class
(:mod:`sec_lib.report.fairness`, the same definitions as everywhere in the book).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..runs import experiments as ex
from ..report import fairness as fx
from .. import report
from ..data.fonts import instance_attributes
from ..runs.train import load_data
from . import profile_param
from ..report.claims import Claim, derived_family
from . import review
from .review import row_claim
from .common import MAIN_SWEEP, MissingSweep, check_cols, measures_text

#: The notebook's parameters (checked by ``sec_lib.params.notebook_params``).
PARAMS = profile_param()
SWEEP = MAIN_SWEEP                      # the main table's runs
GROUP = "design"
FAMILY = "fairness page"
N_PERM = 20
MIN_SHARE = 0.1               # a font design needs this share of the test images for an accuracy rate


def test_attributes(profile) -> pd.DataFrame:
    """Per test image of the profile's evaluation set (the order of every run's ``test_norms``): label and the
    font's family, design, weight and italic. The set depends only on the profile's data settings."""
    p = ex.get_profile(profile) if isinstance(profile, str) else profile
    return instance_attributes(load_data(ex.config(p, "semihard"))[1])


def _eta2(values: np.ndarray, codes: np.ndarray, k: int) -> float:
    """η² of ``values`` across the groups ``codes`` (integers 0..k-1; fewer than 2 present: NaN)."""
    n = np.bincount(codes, minlength=k)
    if (n > 0).sum() < 2:
        return np.nan
    mean = values.mean()
    ss_tot = float(((values - mean) ** 2).sum())
    if ss_tot <= 0:
        return np.nan
    m = np.bincount(codes, weights=values, minlength=k)[n > 0] / n[n > 0]
    return float((n[n > 0] * (m - mean) ** 2).sum() / ss_tot)


def within_eta2(frame: pd.DataFrame, value: str, group: str = GROUP, cluster: str = "label",
                n_perm: int = N_PERM, seed: int = 0) -> dict:
    """η² of ``value`` (centred on each class's mean) across ``group``, its chance value (``group`` shuffled
    within each class, mean over ``n_perm`` shuffles) and the excess (η² − chance).

    A shuffle within classes is one sort: members grouped by class in a random order (a stable sort on the class
    plus a random key in [0, 1), all ``n_perm`` shuffles in one batched sort) take the groups of the members
    grouped by class in their own order."""
    check_cols(frame, [value, group, cluster], "frame")
    f = frame[[value, group, cluster]].dropna()
    v = (f[value] - f.groupby(cluster)[value].transform("mean")).to_numpy(float)
    codes, levels = pd.factorize(f[group].astype(str))
    k = len(levels)
    eta = _eta2(v, codes, k)
    rng = np.random.default_rng(seed)
    cl = pd.factorize(f[cluster])[0]
    base = np.argsort(cl, kind="stable")
    order = np.argsort(cl[None, :] + rng.random((n_perm, len(cl))), axis=1, kind="stable")
    gp = np.empty((n_perm, len(cl)), dtype=codes.dtype)
    gp[:, base] = codes[order]
    c = float(np.mean([_eta2(v, g, k) for g in gp]))
    return {"eta2": eta, "eta2_chance": c, "eta2_excess": eta - c}


def max_hit_gap(frame: pd.DataFrame, group: str = GROUP, cluster: str = "label", min_share: float = MIN_SHARE) -> float:
    """Largest gap (points) between the hit@1 rates of two levels of ``group``, each rate taken on the
    classes' centred hits (a within-class contrast, so classes rendered by few designs do not decide it).
    Levels with less than ``min_share`` of the images are left out (the one script font: too few images
    for a stable rate)."""
    check_cols(frame, ["hit@1", group, cluster], "frame")
    f = frame.dropna(subset=["hit@1"])
    share = f[group].astype(str).map(f[group].astype(str).value_counts(normalize=True))
    f = f[share >= min_share]
    centred = f["hit@1"].astype(float) - f.groupby(cluster)["hit@1"].transform("mean") + f["hit@1"].mean()
    rates = 100.0 * centred.groupby(f[group].astype(str)).mean()
    return float(rates.max() - rates.min()) if len(rates) >= 2 else np.nan


def per_run(runs: pd.DataFrame, test_norms: pd.DataFrame, attrs: pd.DataFrame) -> pd.DataFrame:
    """``runs`` (done) with each run's eta2, eta2_chance, eta2_excess, difficulty_r and hit_gap.
    ``attrs``: :func:`test_attributes` (one row per test image, the order of every run's ``test_norms``)."""
    check_cols(test_norms, ["key", "label", "norm", "hit@1"], "test_norms")
    d = review.done(runs)
    by_key = {k: t.reset_index(drop=True) for k, t in test_norms.groupby("key", sort=False)}
    empty = test_norms.iloc[0:0]
    diff = {loss: fx.class_difficulty([by_key.get(k, empty) for k in
                                       d[(d["loss"] == loss) & (d["variant"] == "none")]["key"]])
            for loss in d["loss"].unique() if ((d["loss"] == loss) & (d["variant"] == "none")).any()}
    rows = []
    for r in d.itertuples(index=False):
        tn = by_key.get(r.key, empty).reset_index(drop=True)
        f = fx.with_attributes(tn, attrs)
        f = f.assign(norm_rel=f["norm"] / f["norm"].mean())
        out = {"key": r.key, **within_eta2(f, "norm_rel"), "hit_gap": max_hit_gap(f)}
        cls = f.groupby("label")["norm_rel"].mean().rename("norm_rel").reset_index()
        if r.loss in diff:
            cls = cls.merge(diff[r.loss], on="label")
            out["difficulty_r"] = fx.corr(cls["norm_rel"].to_numpy(float), cls["difficulty"].to_numpy(float),
                                           "spearman")
        rows.append(out)
    return d.merge(pd.DataFrame(rows), on="key", how="left")


STATS = {"eta2_excess": "excess η² of the relative norm by font design (within class)",
         "difficulty_r": "Spearman r, class mean relative norm vs class difficulty",
         "hit_gap": "largest within-class hit@1 gap between font designs (points)"}


def per_seed(stats: pd.DataFrame, col: str, variant: str) -> pd.Series:
    """``col`` averaged over the losses, per seed, for one variant."""
    s = stats[stats["variant"] == variant]
    return s.groupby("seed")[col].mean()


def seed_values(stats: pd.DataFrame, col: str, a: str | None = "none", b: str = "sec", absolute: bool = False) -> np.ndarray:
    """Per seed: ``col`` (mean over losses) of ``b`` − that of ``a`` (paired on seed); ``a=None``: ``b`` alone."""
    f = (lambda s: s.abs()) if absolute else (lambda s: s)
    sb = f(per_seed(stats, col, b))
    if a is None:
        return sb.to_numpy(float)
    sa = f(per_seed(stats, col, a))
    both = sa.index.intersection(sb.index)
    return (sb[both] - sa[both]).to_numpy(float)


def verdict_rows(stats: pd.DataFrame) -> pd.DataFrame:
    """The page's family: norms depend on design (none); SEC lowers that; norms track difficulty (none);
    SEC weakens that; SEC leaves the accuracy gap between designs unchanged."""
    rows = [
        {"question": "unregularized norms differ by font design", "statistic": "eta2_excess", "variant": "none",
         **report.verdict_row(seed_values(stats, "eta2_excess", None, "none"), +1)},
        {"question": "SEC lowers the font-design dependence of the norms", "statistic": "eta2_excess",
         "variant": "sec − none", **report.verdict_row(seed_values(stats, "eta2_excess"), -1)},
        {"question": "unregularized norms are smaller in harder classes", "statistic": "difficulty_r",
         "variant": "none", **report.verdict_row(seed_values(stats, "difficulty_r", None, "none"), -1)},
        {"question": "SEC weakens the norm–difficulty link (|r|)", "statistic": "|difficulty_r|",
         "variant": "sec − none", **report.verdict_row(seed_values(stats, "difficulty_r", absolute=True), -1)},
        {"question": "SEC leaves the accuracy gap between font designs unchanged", "statistic": "hit_gap",
         "variant": "sec − none", **report.verdict_row(seed_values(stats, "hit_gap"), 0)},
    ]
    return report.one_family(pd.DataFrame(rows), family=FAMILY)[0]


def summary(stats: pd.DataFrame) -> pd.DataFrame:
    """Mean ± 95% CI over runs of each statistic per loss × variant."""
    return report.summary_table(stats, ["loss", "variant"], list(STATS), digits=3)


def design_gaps(runs: pd.DataFrame, test_norms: pd.DataFrame, attrs: pd.DataFrame, a: str = "sans", b: str = "serif",
                n_boot: int = 500) -> pd.DataFrame:
    """Per loss: the within-class gap serif − sans of the relative norm and of hit@1 in each variant, and its
    change with SEC (:func:`sec_lib.report.fairness.gap_change`, cluster bootstrap by class, pooled over seeds)."""
    d = review.done(runs)
    frames = []
    for r in d.itertuples(index=False):
        f = fx.with_attributes(test_norms[test_norms["key"] == r.key].reset_index(drop=True), attrs)
        frames.append(f.assign(norm_rel=f["norm"] / f["norm"].mean(), hit=100.0 * f["hit@1"].astype(float),
                               loss=r.loss, variant=r.variant, seed=r.seed))
    all_ = pd.concat(frames, ignore_index=True)
    rows = []
    for loss, f in all_.groupby("loss", sort=False):
        f = f[f["variant"].isin(["none", "sec"])]
        for value in ("norm_rel", "hit"):
            g = fx.gap_change(f, value, GROUP, a, b, within=True, n_boot=n_boot)
            rows.append({"loss": loss, "value": {"norm_rel": "relative norm", "hit": "hit@1 (points)"}[value],
                         **{f"{k}": f"{v.estimate:+.3f} [{v.lo:+.3f}, {v.hi:+.3f}]" for k, v in g.items()}})
    return pd.DataFrame(rows).rename(columns={"gap_base": f"{b} − {a}, none", "gap_treated": f"{b} − {a}, SEC",
                                              "change": "change with SEC"})


#: Cohen's (1988) conventional "small" effects: η² = 0.01 (a share of variance) and |r| = 0.1. Below them a
#: reproduced dependence is real but tiny, and the page says so beside the verdict.
SMALL_ETA2, SMALL_R = 0.01, 0.1


def size_words(value: float, kind: str) -> str:
    """How large an η² share or a correlation r is, against Cohen's small effect (:data:`SMALL_ETA2`,
    :data:`SMALL_R`): e.g. '0.27% of the variance, below the 1% Cohen calls small'."""
    if kind not in ("eta2", "r"):
        raise ValueError(f"kind must be 'eta2' or 'r', got {kind!r}")
    if not np.isfinite(value):
        return "no estimate"
    if kind == "eta2":
        where = "below" if abs(value) < SMALL_ETA2 else "at or above"
        return f"{100 * value:.2g}% of the variance, {where} the {100 * SMALL_ETA2:g}% Cohen calls small"
    where = "below" if abs(value) < SMALL_R else "at or above"
    return f"|r| {where} the {SMALL_R:g} Cohen calls small"


def opening(rows: pd.DataFrame) -> str:
    pick = lambda s, v: rows[(rows["statistic"] == s) & (rows["variant"] == v)].iloc[0]
    a, b = pick("eta2_excess", "none"), pick("eta2_excess", "sec − none")
    c, g = pick("difficulty_r", "none"), pick("hit_gap", "sec − none")
    below = [r["verdict"] == "reproduced" and abs(r["estimate"]) < small
             for r, small in ((a, SMALL_ETA2), (c, SMALL_R))]
    tiny = "Reproduced here means real on these runs, not large: both dependences are tiny. " if all(below) else (
        "Reproduced here means real on these runs, not large: that dependence is tiny. " if any(below) else "")
    return (f"**Answer.** Without SEC the font design explains {a['estimate']:.4f} of the within-class norm variance "
            f"beyond chance ({size_words(a['estimate'], 'eta2')}; **{a['verdict']}**); SEC changes that by "
            f"{b['estimate']:+.4f} (**{b['verdict']}**). The class mean norm correlates with class difficulty at "
            f"r = {c['estimate']:+.2f} without SEC ({size_words(c['estimate'], 'r')}; **{c['verdict']}**). "
            f"{tiny}SEC changes the largest accuracy gap between font designs by {g['estimate']:+.2f} points "
            f"(**{g['verdict']}** for *no change*).")


def verdict(rows: pd.DataFrame) -> str:
    """One bullet per question of :func:`verdict_rows` (one Holm family): estimate, interval, test,
    Holm-adjusted p, detectable effect, n (seeds, each the mean over the losses) and verdict."""
    out = []
    for r in rows.to_dict("records"):
        test = "paired t-test" if str(r.get("variant", "")).startswith("sec") else "t-test against 0"
        out.append(f"- *{r['question']}*: {measures_text(r, 4, detail='each the mean over the losses', test=test)}: "
                   f"**{r['verdict']}**.")
    return "\n".join(out)


def _stats_of(ev) -> pd.DataFrame:
    runs = ev.runs(SWEEP)
    tn = ev.table(SWEEP, "test_norms")
    profile = ev.profile_of(SWEEP) if hasattr(ev, "profile_of") else ev.profile
    if profile is None:
        raise MissingSweep("the font attributes of the test images need the profile that produced the runs")
    return per_run(runs, tn, test_attributes(profile))


#: :func:`verdict_rows` on the page's evidence (per-run statistics of :func:`per_run`).
page_family = derived_family(__name__, "fairness_family", lambda ev: verdict_rows(_stats_of(ev)))


#: The claims this page decides (beside Q10a-c, which test the class as the attribute).
CLAIMS = [
    Claim(id="Q10d", claim="Unregularized norms differ by font design (serif / sans / monospace / script)",
          source="meta-review (fairness)", measured="within-class η² of norm/mean norm by font design minus its "
          "shuffled value, runs without SEC, mean over the 4 losses per seed", unit="η²", expected_sign=+1,
          page="fairness", estimate=row_claim(page_family, statistic="eta2_excess", variant="none")),
    Claim(id="Q10e", claim="SEC lowers the font-design dependence of the norms", source="meta-review (fairness)",
          measured="excess η² by font design, SEC − none, paired on seed", unit="η²", expected_sign=-1,
          page="fairness", estimate=row_claim(page_family, statistic="eta2_excess", variant="sec − none")),
    Claim(id="Q10f", claim="Unregularized norms are smaller in harder classes", source="meta-review (fairness)",
          measured="Spearman r of class mean relative norm with class difficulty, runs without SEC", unit="r",
          expected_sign=-1, page="fairness", estimate=row_claim(page_family, statistic="difficulty_r", variant="none")),
    Claim(id="Q10g", claim="SEC does not change who is served worse (accuracy gap between font designs)",
          source="meta-review (fairness)", measured="largest within-class hit@1 gap between font designs, SEC − none",
          unit="pp", expected_sign=0, page="fairness",
          estimate=row_claim(page_family, statistic="hit_gap", variant="sec − none")),
]
