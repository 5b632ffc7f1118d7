"""The claims page: every claim of the paper and question of the review as one row (our estimate,
its interval, the paper's number and a computed verdict), plus the norm-by-class questions.

The rows are driven by :data:`CLAIMS`, a list of dicts (id, claim, source, how measured, expected
sign, the function computing the estimate from the frames, the paper's number). The frames come
from an :class:`Evidence`, which loads each chapter's runs once from the store it is given.
This module reads every other chapter's analysis; it is one feature that reads top to bottom.
"""
from __future__ import annotations

import html as _html
import math
from typing import Callable, Sequence

import numpy as np
import pandas as pd

from ..runs import experiments as ex
from .. import reference, report
from ..figures.tables import csv_link
from ..report import pooled_diff, values_ci
from . import profile_param
from .bnwn import head_effect
from .common import LOSS_ABBR, MAIN_CHAPTER, MissingChapter, check_cols, load, mde_from_ci, run_step_means
from .convergence import EARLY_FRACTIONS, early_column, early_steps, early_table, splice_early
from . import face, fairness, npair, ssl
from .eta import eta_grid_gains
from .evidence import evidence_profile, same_sign
from .normclass import (HIT_COLUMNS, class_association, class_association_summary,  # noqa: F401 (the page's API)
                        difficulty_association, difficulty_sentence)
from .instability import tracked_stats
from .mu import ema_vs_batch, label_mu, mu_vs_best_zero

#: The notebook's parameters (checked by ``sec_lib.params.notebook_params``).
PARAMS = profile_param()

class Evidence:
    """The frames the claims draw on, per chapter, loaded once from the store on first use.

    ``Evidence(profile)`` loads with :func:`load`; ``Evidence.from_frames({chapter: Frames}, profile)``
    wraps hand-made frames (tests). ``runs(chapter)`` of the "mu" chapter carries the ``setting`` label.
    With ``tiers=True`` each chapter is loaded from the tier that :func:`sec_lib.chapters.evidence.
    evidence_profile` picks for it (the reference tier where it holds every run of the chapter, else
    ``profile``); :meth:`profile_of` says which, and :attr:`touched` collects the chapters read since
    it was last cleared (the claims table uses it to label each row with its tier).
    """
    def __init__(self, profile=None, frames: dict | None = None, loader: Callable | None = None, root=None,
                 tiers: bool = False):
        self.profile = profile
        self.root = root
        self._frames = dict(frames or {})
        self._derived = {}
        self._from_store = loader is None
        self.tier_of: dict = {}
        self.touched: set = set()
        self._tiers = tiers and loader is None and profile is not None
        self._loader = loader if loader is not None else self._load

    def _load(self, chapter: str):
        tp = evidence_profile(self.profile, (chapter,), self.root) if self._tiers else self.profile
        self.tier_of[chapter] = tp
        return load(chapter, tp, root=self.root)

    @classmethod
    def from_frames(cls, frames: dict, profile=None) -> "Evidence":
        def missing(ch):
            raise MissingChapter(f"no frames for chapter {ch!r}; given: {sorted(frames)}")
        return cls(profile, frames, loader=missing)

    def profile_of(self, chapter: str):
        """The profile (tier) whose runs ``chapter``'s frames hold."""
        return self.tier_of.get(chapter, self.profile)

    def frames(self, chapter: str):
        self.touched.add(chapter)
        if chapter not in self._frames:
            # chapters that show the same runs (compare, convergence, instability: the main table) load once
            same = [c for c in self._frames if self._from_store and ex.CHAPTERS.get(c) is ex.CHAPTERS.get(chapter)]
            if same:
                self._frames[chapter] = self._frames[same[0]]
                self.tier_of[chapter] = self.profile_of(same[0])
            else:
                self._frames[chapter] = self._loader(chapter)
        return self._frames[chapter]

    def runs(self, chapter: str) -> pd.DataFrame:
        r = self.frames(chapter).runs
        if chapter == "mu" and "setting" not in r.columns:
            r = label_mu(r, self.profile_of("mu"), self.root)
        return r

    def table(self, chapter: str, name: str) -> pd.DataFrame:
        return getattr(self.frames(chapter), name)

    def derived(self, name: str, fn: Callable):
        """``fn()`` computed once per Evidence under ``name`` (per-run tables shared by several claims)."""
        if name not in self._derived:
            self._derived[name] = fn()
        return self._derived[name]


def norm_cv(runs: pd.DataFrame) -> pd.Series:
    """Coefficient of variation (std / mean) of the training-set norms of each run, from the stored
    ``train_norm_var`` and ``train_norm_mean``: scale-free, unlike the variance, which shrinks with the
    norms themselves."""
    check_cols(runs, ["train_norm_var", "train_norm_mean"], "runs")
    return np.sqrt(runs["train_norm_var"].astype(float)) / runs["train_norm_mean"].astype(float)


def _est_norm_cv(ev: Evidence) -> dict:
    r = ev.runs(MAIN_CHAPTER)
    if "train_norm_mean" not in r.columns:
        return _no_evidence("the runs lack train_norm_mean, so the CV of the norms cannot be computed")(ev)
    return pooled_diff(r.assign(train_norm_cv=norm_cv(r)), "variant", "none", "sec", "train_norm_cv", transform=np.log10)


def _est_balance(ev: Evidence) -> dict:
    r = run_step_means(ev.runs(MAIN_CHAPTER), ev.table(MAIN_CHAPTER, "steps"), ["dtheta_cv"])
    return pooled_diff(r, "variant", "none", "sec", "dtheta_cv")


def _est_convergence(ev: Evidence) -> dict:
    """Paired R@1 SEC − none at the fixed early fractions of the run (:data:`EARLY_FRACTIONS`), averaged
    over the fractions and the losses per seed; the note says which evaluation steps were used."""
    runs, evals, _ = splice_early(ev.runs("convergence"), ev.table("convergence", "evals"))
    e = early_table(runs, evals)
    cols = [early_column(f) for f in EARLY_FRACTIONS]
    out = pooled_diff(e.assign(early_r1=e[cols].mean(axis=1, skipna=False)), "variant", "none", "sec", "early_r1")
    out["note"] = f"R@1 at the first evaluation at or after each fraction of the run: {early_steps(e)}"
    return out


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
    out = values_ci(r.loc[r["variant"] == "none", "grad_slope"])
    out["note"] = "reproduced only if the slope's interval contains −1 (∝ 1/‖f‖) and excludes 0"
    return out


def slope_verdict(base: str, ci_lo, ci_hi, target: float = -1.0) -> str:
    """Q7a's rule: the directional verdict (slope < 0), and "reproduced" only when the interval also
    contains ``target`` (−1: ‖∂L/∂f‖ ∝ 1/‖f‖); a negative slope whose interval excludes −1 shows a
    different power law: "not reproduced"."""
    if base != "reproduced":
        return base
    return "reproduced" if ci_lo <= target <= ci_hi else "not reproduced"


def _est_growth(ev: Evidence) -> dict:
    r = tracked_stats(ev.runs("instability"), ev.table("instability", "tracked"))
    return values_ci(np.log(r.loc[r["variant"] == "none", "growth"].astype(float)))


def _est_eta(ev: Evidence) -> dict:
    """Q9: the η of the grid at which the gain over η = 0 (pooled over losses per seed, Holm over the
    grid) is reproduced, and how many decades of η they span. Reproduced when they span at least a
    factor 10; not reproduced when no η is better than inconclusive and some η is not reproduced."""
    g = eta_grid_gains(ev.runs("eta"))
    if not len(g):
        return _no_evidence("no η > 0 paired with η = 0")(ev)
    ok = g[g["verdict"] == "reproduced"]
    span = float(np.log10(ok["eta"].max() / ok["eta"].min())) if len(ok) else math.nan
    if len(ok) and span >= 1.0:
        v = "reproduced"
    elif not len(ok) and (g["verdict"] == "not reproduced").all():
        v = "not reproduced"
    else:
        v = "inconclusive"
    where = (f"interval above 0 for η ∈ [{ok['eta'].min():g}, {ok['eta'].max():g}] ({len(ok)} of {len(g)} grid values"
             f" {', '.join(f'{x:g}' for x in g['eta'])}), {span:.1f} decades" if len(ok)
             else f"no η of the grid {', '.join(f'{x:g}' for x in g['eta'])} has its interval above 0")
    return {"estimate": 0.0 if math.isnan(span) else span, "ci_lo": math.nan, "ci_hi": math.nan,
            "n": int(g["n"].min()), "p_value": math.nan, "mde": float(g["mde"].max()), "rule_verdict": v,
            "note": where + "; estimate = decades of η spanned (no interval; the grid is its own Holm family)"}


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


def _paper_var_ratio() -> float:
    v = reference.rebuttal_variance()
    return float(np.mean(np.log10(v["norm_var_sec"] / v["norm_var_none"])))


def _paper_table1() -> pd.DataFrame:
    return reference.paper_table(("CUB", "Cars"))


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
        reb = reference.rebuttal_all()
        a = reb[(reb["table"] == table_a) & (reb["setting"] == set_a)]
        if eta_a is not None:
            a = a[np.isclose(a["eta"].astype(float), eta_a)]
        b = reb[(reb["table"] == table_b) & (reb["setting"] == set_b)]
        return float(b[metric].iloc[0]) - float(a[metric].iloc[0])
    return f


def _paper_var_gain_corr() -> float:
    v = reference.rebuttal_variance().set_index("loss")
    t = _paper_table1()
    t = t[t["dataset"] == "Cars"].pivot_table(index="loss", columns="variant", values="R@1")
    red = np.log10(v["norm_var_none"] / v["norm_var_sec"])
    gain = (t["sec"] - t["none"]).reindex(red.index)
    return float(np.corrcoef(red.to_numpy(), gain.to_numpy())[0, 1])


def _paper_tml() -> str:
    reb = reference.rebuttal_all()
    t = reb[reb["table"] == "tml"].pivot_table(index="dataset", columns="setting", values="R@1")
    return ", ".join(f"{ds} {t.loc[ds, 'sec'] - t.loc[ds, 'none']:+.2f}" for ds in t.index)


#: The claims page: one dict per paper claim or review question. ``estimate(ev)`` computes our
#: number from the frames; ``paper`` is None, a number or a callable computing it from data/reference.
#: ``expected_sign``: the direction the claim predicts (+1 up, −1 down, 0 no change).
CLAIMS: list[dict] = [
    dict(id="C1", claim="SEC lowers the relative spread (coefficient of variation) of the embedding norms",
         source="paper Sec. 4 / Fig. 3; rebuttal (Cars train set)",
         measured="log10(CV of the train norms with SEC / without), CV = std / mean, paired on seed, mean over the 4 "
                  "losses (main-table runs); paper: the rebuttal's log10 variance ratio (no CV given)",
         unit="log10 ratio", expected_sign=-1, estimate=_est_norm_cv, paper=_paper_var_ratio, link="norms.html"),
    dict(id="C2", claim="SEC makes the per-sample updates more balanced", source="paper Sec. 3.2",
         measured="CV of the per-sample angle turned in a step (dtheta_cv, mean over training), SEC − none, mean over losses",
         unit="CV", expected_sign=-1, estimate=_est_balance, paper=None, link="optim.html"),
    dict(id="C3", claim="SEC converges faster", source="paper Sec. 4 (training curves)",
         measured="test R@1 SEC − none at 10%, 25% and 50% of the run length (evaluation steps that exist), "
                  "paired on seed, mean over the fractions and the losses",
         unit="pp", expected_sign=+1, estimate=_est_convergence, paper=None, link="convergence.html"),
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
         unit="pp", expected_sign=+1, estimate=_est_normlayer, paper=None, link="normlayer.html",
         same_runs_as="C4"),
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
         unit="pp", expected_sign=+1, estimate=_est_optim("adam"), paper=lambda: _paper_gain(), link="optim.html",
         same_runs_as="C4"),
    dict(id="Q6b", claim="SEC helps under SGD", source="review Q6 (not run in the paper)",
         measured="R@1 SEC − none under SGD (pilot-chosen lr), mean over the 4 losses per seed",
         unit="pp", expected_sign=+1, estimate=_est_optim("sgd"), paper=None, link="optim.html"),
    dict(id="Q7a", claim="The gradient magnitude falls with the norm (‖∂L/∂f‖ ∝ 1/‖f‖)", source="review Q7; paper Prop. 2",
         measured="log-log slope of ‖∂L/∂f_i‖ against ‖f_i‖ in each batch, mean over training, runs without SEC pooled across losses; reproduced only if the "
                  "interval contains −1 and excludes 0",
         unit="slope", expected_sign=-1, estimate=_est_slope, paper=None, link="instability.html",
         n_counts="runs pooled across losses", target=-1.0),
    dict(id="Q7b", claim="Without SEC the norms of training samples grow during training", source="review Q7; rebuttal Fig. 1",
         measured="log(mean tracked norm at the end / at the start), runs without SEC pooled across losses",
         unit="log ratio", expected_sign=+1, estimate=_est_growth, paper=None, link="instability.html",
         n_counts="runs pooled across losses"),
    dict(id="Q8b", claim="SEC helps the tuplet margin loss", source="review Q8; rebuttal Table 4",
         measured="R@1 SEC − none, tuplet margin loss", unit="pp", expected_sign=+1,
         estimate=_est_beyond(("tml",), "no tuplet-margin runs in this profile"),
         paper=_paper_tml, link="compare.html"),
    dict(id="Q9", claim="SEC helps over a wide range of η", source="review Q9; paper Fig. (η sensitivity)",
         measured="the η > 0 of the grid at which R@1 − R@1 at η = 0 (mean over the 4 losses per seed) has its "
                  "interval above 0 with Holm-adjusted p < 0.05 over the grid; reproduced if they span ≥ 10× in η",
         unit="decades", expected_sign=+1, estimate=_est_eta, paper=None, link="eta.html"),
    dict(id="Q10a", claim="Unregularized norms depend on the class", source="review Q10 (meta-review: fairness)",
         measured="η² (share of test-norm variance between classes) minus its chance value, runs without SEC "
                  "pooled across losses",
         unit="η²", expected_sign=+1, estimate=_est_class, paper=None, link="claims.html#question-10",
         n_counts="runs pooled across losses"),
    dict(id="Q10b", claim="SEC reduces the class dependence of the norms", source="review Q10",
         measured="excess η² SEC − none, mean over the 4 losses per seed", unit="η²", expected_sign=-1,
         estimate=_est_class_sec, paper=None, link="claims.html#question-10"),
    dict(id="Q10c", claim="Unregularized norms track difficulty: samples retrieved wrongly have smaller norms "
                          "(as norm-as-confidence work such as Ranjan et al. 2017 suggests)", source="review Q10",
         measured="correlation of the test norm with the sample's R@1 hit (1 = nearest neighbour of its class), "
                  "runs without SEC pooled across losses", unit="r", expected_sign=+1,
         n_counts="runs pooled across losses", estimate=_est_difficulty, paper=None, link="claims.html#question-10"),
]
#: The review pages' claims (issue 13), placed after the row they extend: SimCLR and supervised
#: contrastive (Q8a, Q8a-r, Q8e), ArcFace and CosFace (Q8c, Q8d), the four N-pair readings (Q11a-c),
#: fairness by font design (Q10d-g).
_AFTER = {"Q8b": ssl.CLAIMS + face.CLAIMS + npair.CLAIMS, "Q10c": fairness.CLAIMS}
CLAIMS = [c2 for c in CLAIMS for c2 in (c, *_AFTER.get(c["id"], ()))]
_CLAIM_KEYS = ("id", "claim", "source", "measured", "unit", "expected_sign", "estimate", "paper", "link",
               "n_counts", "same_runs_as", "target", "margin")


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


def _margin(c: dict):
    """A claim's equivalence margin: its own, else that of R@1 for claims in percentage points, else none."""
    if c.get("margin") is not None:
        return c["margin"]
    return report.margin_for(report.PRIMARY_METRIC) if c.get("unit") == "pp" else None


def claim_rows(ev: Evidence, claims: Sequence[dict] = CLAIMS) -> list[dict]:
    """Rows for :func:`sec_lib.report.verdict_table`: each claim's estimate computed from ``ev``, with its
    raw p-value, the minimum detectable effect (``mde``), what n counts and which runs it reuses."""
    rows = []
    for c in claims:
        missing = [k for k in ("id", "claim", "expected_sign", "estimate") if k not in c]
        if missing:
            raise ValueError(f"claim {c.get('id', '?')!r} lacks keys {missing}; keys: {list(_CLAIM_KEYS)}")
        n_counts = c.get("n_counts", "seeds")
        if n_counts not in report.N_COUNTS:
            raise ValueError(f"claim {c['id']!r}: n_counts must be one of {list(report.N_COUNTS)}, got {n_counts!r}")
        if hasattr(ev, "touched"):
            ev.touched.clear()
        try:
            e = c["estimate"](ev)
        except MissingChapter as err:
            e = {"note": str(err).strip('"')}
        tiers = sorted({str(ev.profile_of(ch)) for ch in getattr(ev, "touched", ())
                        if ev.profile_of(ch) is not None})
        n = e.get("n")
        lo, hi = e.get("ci_lo"), e.get("ci_hi")
        has_ci = (lo is not None and hi is not None and np.isfinite(lo) and np.isfinite(hi)
                  and hi - lo > 1e-9 * max(abs(lo), abs(hi)))    # zero spread: as report.verdict
        p = float(e.get("p_value", math.nan)) if has_ci else math.nan   # zero spread: nothing was tested
        mde = e["mde"] if "mde" in e else (mde_from_ci(lo, hi, n) if has_ci else math.nan)
        rows.append({"claim": c["id"], "text": c["claim"], "estimate": e.get("estimate"), "ci_lo": lo,
                     "ci_hi": hi, "n": int(n) if n is not None else None,
                     "paper": _paper_value(c.get("paper")), "link": c.get("link"),
                     "expected_sign": c["expected_sign"], "margin": _margin(c),
                     "source": c.get("source", ""), "measured": c.get("measured", ""), "unit": c.get("unit", ""),
                     "p_value": p, "mde": mde, "n_counts": n_counts, "same_runs_as": c.get("same_runs_as") or "",
                     "target": c.get("target", math.nan), "rule_verdict": e.get("rule_verdict", ""),
                     "note": e.get("note", ""), "tier": "/".join(tiers)})
    return rows


def claims_table(ev: Evidence, claims: Sequence[dict] = CLAIMS) -> pd.DataFrame:
    """The claims with computed verdicts, the claims page taken as ONE Holm family
    (:func:`sec_lib.report.adjust_family`: ``p_adj``, ``m``), and display cells: ``evidence``
    "estimate [lo, hi]", ``p`` (adjusted), ``detectable`` ("≥ X"), ``n (counts)``.

    Special rules: Q7a-style claims with a ``target`` (the slope −1) are reproduced only if the interval
    also contains the target (:func:`slope_verdict`); a claim whose estimate gives ``rule_verdict`` (Q9's
    range of η) takes that verdict."""
    rows = claim_rows(ev, claims)
    t = report.verdict_table([{k: v for k, v in r.items() if k != "p_adj"} for r in rows])
    fam = report.adjust_family(t.assign(margin=[r["margin"] for r in rows]).rename(columns={}), family="claims page")
    t["p_adj"], t["m"] = fam["p_adj"].to_numpy(), fam["m"].to_numpy()
    verdicts = []
    for r, v in zip(t.to_dict("records"), fam["verdict"]):
        if r["rule_verdict"]:
            v = r["rule_verdict"]
        elif np.isfinite(r["target"]):
            v = slope_verdict(v, r["ci_lo"], r["ci_hi"], r["target"])
        verdicts.append(v)
    t["verdict"] = verdicts
    digits = [3 if r.unit in ("r", "η²", "CV", "slope", "log10 ratio", "log ratio") else 2 for r in t.itertuples(index=False)]
    t["evidence"] = [report.format_ci(r.estimate, r.ci_lo, r.ci_hi, digits=d, style="interval",
                                      number=lambda v, d=d: f"{v:+.{d}f}", missing="no evidence")
                     for r, d in zip(t.itertuples(index=False), digits)]
    t["p"] = [("" if not np.isfinite(p) else f"{p:.2g}") for p in t["p_adj"]]
    t["detectable"] = [("" if not np.isfinite(m) else f"≥ {m:.{d}f}") for m, d in zip(t["mde"].astype(float), digits)]
    t["n (counts)"] = [("" if not n else f"{int(n)} {c}") for n, c in zip(t["n"].fillna(0), t["n_counts"])]
    t["paper_value"] = [float(p) if isinstance(p, (int, float)) and not isinstance(p, bool) else np.nan for p in t["paper"]]
    t["paper"] = [("" if p is None else (f"{p:+.3g}" if isinstance(p, float) else str(p))) for p in t["paper"]]
    return t


_SIGN_WORD = {1: "increase", -1: "decrease", 0: "no change"}


def _text(x) -> str:
    """A cell as text: '' for None / NaN."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return ""
    return str(x)


def role_sentence() -> str:
    """Which metric is primary (:data:`sec_lib.report.PRIMARY_METRIC`) and which are secondary."""
    return (f"**{report.PRIMARY_METRIC}** is the declared primary metric; "
            f"{', '.join(report.SECONDARY_METRICS)} are secondary.")


def claims_html(table: pd.DataFrame, name: str = "claims") -> str:
    """The claims table as HTML with working relative links to the evidence pages, followed by a
    CSV download link (``sec_lib.figures.tables.csv_link``). Key columns first: estimate [interval],
    Holm-adjusted p, verdict; then the detectable effect, n and what it counts."""
    cols = ["claim", "estimate [95% CI]", "adj. p", "verdict", "could detect", "n", "what is claimed", "paper", "page"]
    head = "".join(f"<th>{_html.escape(c)}</th>" for c in cols)
    body = []
    for r in table.to_dict("records"):
        link, note_text = _text(r.get("link")), _text(r.get("note"))
        page = f'<a href="{_html.escape(link)}">{_html.escape(link.split("#")[0])}</a>' if link else ""
        same = _text(r.get("same_runs_as"))
        note = f'<br><small>{_html.escape(note_text)}</small>' if note_text else ""
        same_html = f'<br><small><b>same runs as {_html.escape(same)}</b></small>' if same else ""
        detail = (f'<br><small>{_html.escape(str(r["source"]))}; measured: {_html.escape(str(r["measured"]))}; '
                  f'expected: {_SIGN_WORD[int(r["expected_sign"])]}</small>')
        tds = f"<td>{_html.escape(str(r['claim']))}{same_html}</td>"
        tds += f"<td>{_html.escape(r['evidence'])} {_html.escape(_text(r.get('unit')))}{note}</td>"
        tds += f"<td>{_html.escape(r['p'])}</td>"
        tds += f'<td class="verdict verdict-{r["verdict"].replace(" ", "-")}"><b>{_html.escape(r["verdict"])}</b></td>'
        tds += f"<td>{_html.escape(r['detectable'])}</td><td>{_html.escape(r['n (counts)'])}</td>"
        tds += f"<td>{_html.escape(str(r['text']))}{detail}</td>"
        tds += f"<td>{_html.escape(_text(r['paper']))}</td><td>{page}</td>"
        body.append(f"<tr>{tds}</tr>")
    csv_cols = ["claim", "estimate", "ci_lo", "ci_hi", "p_value", "p_adj", "m", "verdict", "mde", "n", "n_counts",
                "same_runs_as", "text", "source", "measured", "unit", "paper", "expected_sign", "margin", "link", "note"]
    csv = table[[c for c in csv_cols if c in table.columns]]
    return (f'<table class="sec-table"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'
            f"<p>{csv_link(csv, name)}</p>")


def rules_table(rules: report.VerdictRules | None = None) -> pd.DataFrame:
    """The verdict rules in force (``sec_lib.report.VERDICT_RULES``) and what each verdict means."""
    r = rules or report.VERDICT_RULES
    rows = [
        {"rule": "CI level", "value": f"{r.level:g}", "meaning": "Student-t interval of the mean over seeds (or runs)"},
        {"rule": "alpha", "value": f"{r.alpha:g}",
         "meaning": "both decisive words need the Holm-adjusted p of their test below this (families: the "
                    "compare page, each review chapter, the claims page)"},
        {"rule": "power", "value": f"{r.power:g}", "meaning": "power at which the detectable effect is given"},
        {"rule": "margin", "value": "see the margins table",
         "meaning": "practical equivalence margin per metric; inside it an effect is negligible"},
        {"rule": "primary metric", "value": report.PRIMARY_METRIC,
         "meaning": "declared primary; " + ", ".join(report.SECONDARY_METRICS) + " are secondary"},
        {"rule": "reproduced", "value": "",
         "meaning": "directional: CI entirely on the predicted side of 0 and adjusted p < alpha; "
                    "no change: CI inside ±margin and the equivalence test's (TOST) adjusted p < alpha"},
        {"rule": "not reproduced", "value": "",
         "meaning": "directional: CI entirely on the wrong side and adjusted p < alpha, or CI entirely inside "
                    "±margin and the equivalence test's adjusted p < alpha; no change: CI entirely outside "
                    "±margin and adjusted p < alpha"},
        {"rule": "inconclusive", "value": r.single_run_max,
         "meaning": "every other case, and always without a usable CI (one seed, or zero spread)"},
        {"rule": "not testable offline", "value": "", "meaning": "no evidence: no runs can measure it here"},
    ]
    return pd.DataFrame(rows)


def margins_html() -> str:
    """:func:`sec_lib.report.margin_table` as an HTML table."""
    return report.margin_table().to_html(index=False, classes="sec-table", border=0)


def counted(table: pd.DataFrame) -> pd.DataFrame:
    """The rows that count in the tally: each body of evidence once (rows marked ``same_runs_as`` left out)."""
    if "same_runs_as" not in table.columns:
        return table
    return table[table["same_runs_as"].fillna("").astype(str) == ""]


def verdict_counts(table: pd.DataFrame) -> dict:
    """How many claims got each verdict (all of report.VERDICTS, zeros included), counting each body of
    evidence once (:func:`counted`)."""
    c = counted(table)["verdict"].value_counts()
    return {v: int(c.get(v, 0)) for v in report.VERDICTS}


def counts_sentence(table: pd.DataFrame) -> str:
    """'Of N bodies of evidence: **a** reproduced, ...' from :func:`verdict_counts`, naming the rows
    left out because they reuse another row's runs."""
    counts = verdict_counts(table)
    dup = table[~table.index.isin(counted(table).index)]
    extra = (" (" + ", ".join(f"{r.claim} uses the same runs as {r.same_runs_as}" for r in dup.itertuples(index=False))
             + ", counted once)") if len(dup) else ""
    return (f"Of {len(counted(table))} bodies of evidence{extra}: "
            + ", ".join(f"**{n}** {v}" for v, n in counts.items()) + ".")


def tier_sentence(table: pd.DataFrame) -> str:
    """Which tier each row's evidence was read from (the ``tier`` column of :func:`claims_table`)."""
    tiers = table.get("tier", pd.Series([""] * len(table))).fillna("").astype(str)
    have = tiers[tiers != ""].value_counts()
    if not len(have):
        return "No row has runs behind it."
    parts = [f"{n} rows from the **{t}** tier" for t, n in have.items()]
    text = "Evidence: " + ", ".join(parts) + "."
    if len(have) > 1:
        text += (" Each chapter is read from the reference tier once that tier holds all of its runs, and from the "
                 "quick tier until then; the tally counts both.")
    return text


def tier_agreement(table: pd.DataFrame, quick: pd.DataFrame) -> pd.DataFrame:
    """The rows read from a long tier beside the same claims on the quick tier: both estimates with
    their intervals, both verdicts, and whether the two estimates have the same sign."""
    q = quick.set_index("claim")
    rows = []
    for r in table.itertuples(index=False):
        if not r.tier or r.tier == quick["tier"].iloc[0] or r.claim not in q.index:
            continue
        qr = q.loc[r.claim]
        rows.append({"claim": r.claim, r.tier: r.evidence, f"{r.tier} verdict": r.verdict,
                     "quick": qr["evidence"], "quick verdict": qr["verdict"],
                     "same sign": same_sign(r.estimate, qr["estimate"])})
    return pd.DataFrame(rows)
