"""Question 10 of the review, on the claims page: do unregularized norms depend on the class or on
the sample's difficulty? Per-run one-way ANOVA η² of the test norm by class (with its chance value),
and the correlation of the test norm with the per-sample retrieval hit.

The claims page (:mod:`sec_lib.chapters.claims`) turns these into rows Q10a-c and shows the tables.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd
from scipy import stats

from ..report import fmt_estimate, pooled_diff, summary_table, values_ci
from ..report.claims import Claim
from .common import check_cols


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
    check_cols(test_norms, ["key", "label", "norm"], "test_norms")
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
        ss_w = ss_tot - ss_b               # the one-way ANOVA F-test, from the sums of squares (as scipy's f_oneway)
        p = float(stats.f.sf((ss_b / (k - 1)) / (ss_w / (n - k)), k - 1, n - k)) if ss_tot > 0 and ss_w > 0 else \
            (0.0 if ss_tot > 0 else np.nan)
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


def difficulty_sentence(diff: pd.DataFrame) -> str:
    """The difficulty question from :func:`difficulty_association`: the norm-hit correlation of runs
    without SEC, or why the stored results cannot answer it."""
    if diff["norm_hit_corr"].notna().any():
        return ("**Difficulty.** The correlation of the test norm with the sample's R@1 hit, runs without SEC: "
                + fmt_estimate(values_ci(diff.loc[diff.variant == 'none', 'norm_hit_corr']), 3) + ".")
    return ("**Difficulty.** Not measurable from the stored results: the store keeps each test image's norm and label "
            "but not whether its nearest neighbour is of the same class. Testing difficulty needs that per-sample hit "
            "(or the test embeddings) stored next to the norms, e.g. a `hit@1` column in the `test_norms` table "
            "written by `sec_lib.runs.train.finish`.")


# ------------------------------------------------------------------------------ the claims (on the claims page)

def _class_assoc(ev) -> pd.DataFrame:
    return ev.derived("class_association",
                      lambda: class_association(ev.runs("compare"), ev.table("compare", "test_norms")))


def _est_class(ev) -> dict:
    r = _class_assoc(ev)
    out = values_ci(r.loc[r["variant"] == "none", "excess"])
    out["note"] = "η² of test norm by class minus its chance value (k−1)/(N−1), runs without SEC"
    return out


def _est_class_sec(ev) -> dict:
    return pooled_diff(_class_assoc(ev), "variant", "none", "sec", "excess")


def _est_difficulty(ev) -> dict:
    r = difficulty_association(ev.runs("compare"), ev.table("compare", "test_norms"))
    out = values_ci(r.loc[r["variant"] == "none", "norm_hit_corr"])
    if out["n"] == 0:
        out["note"] = ("needs a per-sample retrieval hit (nearest neighbour of the same class) stored next to each "
                       "test norm (test_norms column 'hit@1'); the store keeps norms and labels only")
    return out


_Q10 = "claims.html#question-10"
#: Question 10 with the class as the attribute: decided and shown on the claims page.
CLAIMS = [
    Claim(id="Q10a", claim="Unregularized norms depend on the class", source="review Q10 (meta-review: fairness)",
          measured="η² (share of test-norm variance between classes) minus its chance value, runs without SEC "
                   "pooled across losses", unit="η²", expected_sign=+1, estimate=_est_class, page="claims",
          link=_Q10, n_counts="runs pooled across losses"),
    Claim(id="Q10b", claim="SEC reduces the class dependence of the norms", source="review Q10",
          measured="excess η² SEC − none, mean over the 4 losses per seed", unit="η²", expected_sign=-1,
          estimate=_est_class_sec, page="claims", link=_Q10),
    Claim(id="Q10c", claim="Unregularized norms track difficulty: samples retrieved wrongly have smaller norms "
                           "(as norm-as-confidence work such as Ranjan et al. 2017 suggests)", source="review Q10",
          measured="correlation of the test norm with the sample's R@1 hit (1 = nearest neighbour of its class), "
                   "runs without SEC pooled across losses", unit="r", expected_sign=+1,
          n_counts="runs pooled across losses", estimate=_est_difficulty, page="claims", link=_Q10),
]
