"""The main comparison's tables and paired gains: per loss × variant, the mean and interval over seeds
(:func:`main_table`), and each regularizer's paired difference against no regularizer in its declared Holm family
(:func:`sec_gain`). The compare page shows them; the norms, table1, landing, review and tiers pages read them too.

Statistics: Student-t intervals over seeds and paired t-tests that pair runs on their seed
(:mod:`sec_lib.report`); every verdict comes from :func:`sec_lib.report.verdict`.
"""
from __future__ import annotations

import dataclasses
import warnings
from typing import Sequence

import numpy as np
import pandas as pd

from .. import report
from ..figures.tables import fold_columns
from .. import reference
from ..reference import RETRIEVAL_METRICS, comparison_label
from ..report import fmt_metric, format_ci
from ..runs import experiments as ex
from . import evidence
from .common import (EXPECTED_SIGN, NORM_CV, NORM_METRICS, TEST_NAME, ci_text, loss_noun, mde_text, order_rows,
                     p_text, runs_frame, with_norm_cv)
from .evidence import ETA_ARM_NAMES, name_eta_arms
from .gain_words import fmt_p


def main_table(frames, metrics: Sequence[str] = (*RETRIEVAL_METRICS, *NORM_METRICS),
               level: float = 0.95) -> pd.DataFrame:
    """Ours, per loss × variant: mean and Student-t CI over seeds of each metric (tidy).

    Columns: loss, variant, metric, mean, ci_lo, ci_hi, n (finite values: failed runs do not count),
    n_runs (runs in the cell, failed included), n_failed (runs whose status is not 'done'; only when
    the frame has a ``status`` column). Metrics missing from the frame are left out. The norm CVs
    (``test_norm_cv``, ``train_norm_cv``) are computed from ``frames`` (:func:`~sec_lib.chapters.common.with_norm_cv`).
    """
    runs = runs_frame(frames)
    if any(m in NORM_CV.values() for m in metrics):
        runs = with_norm_cv(frames)
    metrics = [m for m in metrics if m in runs.columns]
    if not metrics:
        raise ValueError(f"none of the metrics are in the runs frame; columns: {list(runs.columns)}")
    s = report.summarize(runs, ["loss", "variant"], metrics, level=level)
    counts = runs.groupby(["loss", "variant"], sort=False).size().rename("n_runs").reset_index()
    s = s.merge(counts, on=["loss", "variant"], how="left")
    if "status" in runs.columns:
        failed = (runs["status"] != "done").groupby([runs["loss"], runs["variant"]], sort=False).sum()
        s = s.merge(failed.rename("n_failed").reset_index(), on=["loss", "variant"], how="left")
    out = order_rows(s)
    out.attrs["source"] = "ours"
    return out


def _cell(mean, lo, hi, n, metric, digits) -> str:
    return format_ci(mean, lo, hi, n, number=lambda v: fmt_metric(v, metric, digits))


def main_table_display(table: pd.DataFrame, digits: int = 2) -> pd.DataFrame:
    """One row per loss × variant with ``mean ± CI half-width`` cells (percent metrics with ``digits``
    decimals, other quantities with 3 significant digits), the number of seeds and of failed runs.
    Next to retrieval metrics, the norm variances, each with its CV (std / mean) beside it, are folded
    into a table of their own on the page (:func:`sec_lib.figures.tables.fold_columns`)."""
    rows = []
    for (loss, variant), sub in table.groupby(["loss", "variant"], sort=False):
        row = {"loss": loss, "variant": variant}
        for r in sub.itertuples(index=False):
            row[r.metric] = _cell(r.mean, r.ci_lo, r.ci_hi, int(r.n), r.metric, digits)
        row["seeds"] = int(sub["n"].max())
        if "n_failed" in sub.columns:
            row["failed"] = int(sub["n_failed"].max())
        rows.append(row)
    out = order_rows(pd.DataFrame(rows))
    if any(m in out.columns for m in RETRIEVAL_METRICS):
        norms = [m for m in NORM_METRICS if m in out.columns]
        fold_columns(out, ["loss", "variant"], {f"Norm spread, each variance with its scale-free CV = std / mean "
                                                f"beside it: {', '.join(norms)} (mean ± 95% CI)": norms})
    return out


def sec_gain(frames, variants: Sequence[str] = ("sec", "l2reg"), baseline: str = "none",
             metrics: Sequence[str] = (*RETRIEVAL_METRICS, *NORM_METRICS), level: float = 0.95) -> pd.DataFrame:
    """Paired difference (variant − none) per loss and metric, pairing runs on their seed.

    Columns: loss, variant, baseline, comparison, metric, mean_a (baseline), mean_b (variant), estimate,
    ci_lo, ci_hi, p_value, n (paired seeds), n_unpaired, test, p_adj, m, mde, n_counts, role, family, verdict, and
    ``eta_arm`` (the variant's η arm, 'paper' / 'selected') where the runs carry that label.
    Each declared family (:func:`family_of`) goes through :func:`sec_lib.report.with_verdict`: the verdict
    (:func:`sec_lib.report.verdict` with the family's Holm-adjusted p) checks the paper's direction: up for
    the retrieval metrics, down for the norm variances and their CVs (computed from ``frames``,
    :func:`~sec_lib.chapters.common.with_norm_cv`). Variants absent from the frame are skipped.
    """
    runs = runs_frame(frames)
    if any(m in NORM_CV.values() for m in metrics):
        runs = with_norm_cv(frames)
    if "seed" not in runs.columns:
        raise ValueError("the runs frame has no 'seed' column to pair runs on")
    metrics = [m for m in metrics if m in runs.columns]
    present = set(runs["variant"].dropna())
    if baseline not in present:
        raise ValueError(f"baseline variant {baseline!r} is not in the runs frame; variants present: {sorted(present)}")
    parts = []
    for v in variants:
        if v not in present:
            continue
        with warnings.catch_warnings():   # scipy warns on near-identical pairs; report.paired_diff handles them
            warnings.simplefilter("ignore", RuntimeWarning)
            d = report.paired_diff(runs, by="loss", compare_col="variant", a=baseline, b=v, pair_on="seed",
                                   metrics=metrics, level=level)
        for c in ("mean_a", "mean_b", "estimate", "ci_lo", "ci_hi"):   # float noise such as -1.8e-15 -> 0
            d[c] = d[c].round(10) + 0.0
        d.insert(1, "variant", v)
        d.insert(2, "baseline", baseline)
        d.insert(3, "comparison", comparison_label(v, baseline))
        if "eta_arm" in runs.columns:       # the η arm the variant's runs were made with (a label, experiments)
            arms = runs[runs["variant"] == v].groupby("loss")["eta_arm"].first()
            d["eta_arm"] = d["loss"].map(arms).fillna("")
        parts.append(d)
    cols = ["loss", "variant", "baseline", "comparison", "metric", "mean_a", "mean_b", "estimate", "ci_lo", "ci_hi",
            "p_value", "n", "n_unpaired", "test", "verdict"]
    if not parts:
        return pd.DataFrame(columns=cols)
    out = pd.concat(parts, ignore_index=True)
    out["test"] = TEST_NAME
    out["role"] = [_role(m) for m in out["metric"]]
    out["family"] = [family_of(c, r) for c, r in zip(out["comparison"], out["role"])]
    out["expected_sign"] = [EXPECTED_SIGN.get(m, +1) for m in out["metric"]]
    # one Holm family per declared family; each metric's margin (report.MARGINS); mde at the family's α/m
    out = pd.concat([report.with_verdict(sub, "expected_sign", family=name)
                     for name, sub in out.groupby("family", sort=False)]).sort_index()
    out["verdict"] = sized_verdicts(out)
    cols = [*cols[:-1], "p_adj", "m", "mde", "n_counts", "role", "family", "verdict",
            *(["eta_arm"] if "eta_arm" in out.columns else [])]
    out = order_rows(out[cols], cols=("loss", "variant"))
    out.attrs["source"] = "ours"
    return out


#: The losses of the paper's Table 1 (the others, such as tml and CosFace, have no size to be set against).
PAPER_LOSSES = tuple(ex.MAIN_LOSSES)


def paper_sizes(loss: str, variant: str, baseline: str = "none") -> list:
    """The paper's Table 1 R@1 gains of ``variant`` (SEC at either η arm, or L2-reg) over ``baseline`` for ``loss``
    on its four datasets, the sizes the claims C4a-d are set against (:func:`sec_lib.reference.paper_gain_values`);
    [] where the paper reports no such row (another loss, another baseline or arm)."""
    arm = "sec" if variant in ("sec", *ETA_ARM_NAMES.values()) else variant
    if baseline != "none" or arm not in ("sec", "l2reg") or loss not in PAPER_LOSSES:
        return []
    return reference.paper_gain_values("none", arm, loss)


#: How a table's caption states :func:`sized_verdicts`' rule.
SIZE_RULE_CAPTION = ("an R@1 signal whose whole interval lies below the paper's smallest gain for its loss on CUB, Cars, "
                     "SOP and In-Shop reads smaller than claimed")


def sized_verdicts(gains: pd.DataFrame, variant: str | None = None) -> list[str]:
    """Each row's verdict, a *reproduced* R@1 row sized against the paper's gains for its loss and arm (the book's
    rule, :func:`sec_lib.report.refine`: *smaller than claimed* where the whole interval lies below the paper's
    smallest gain): so a table says what its claim row on the scorecard says. Other metrics, rows the paper does not
    report and the other words are unchanged. Rows without ``variant`` and ``baseline`` columns (a page's SEC − none
    rows, :func:`sec_lib.chapters.review.sec_rows`) are those of ``variant`` against none."""
    out = []
    for r in gains.itertuples(index=False):
        arm, base = getattr(r, "variant", variant), getattr(r, "baseline", "none")
        sizes = paper_sizes(r.loss, arm, base) if r.metric == report.PRIMARY_METRIC else []
        out.append(report.refine(r.verdict, r.ci_lo, r.ci_hi, int(r.expected_sign), sizes) if sizes else r.verdict)
    return out


def eta_arms_apart(frames):
    """``frames`` whose SEC runs are named for their η arm in the ``variant`` column ('sec, selected η',
    'sec, paper's η': :data:`~sec_lib.chapters.evidence.ETA_ARM_NAMES`, from the runs' ``eta_arm`` label), so that
    :func:`main_table` keeps the arms apart and :func:`sec_gain` pairs each with the runs without a regularizer on
    its own (one Holm family per arm). Runs without the label, and frames without the column, are left as they
    are."""
    runs = runs_frame(frames)
    if "eta_arm" not in runs.columns:
        return frames
    runs = name_eta_arms(runs)
    return dataclasses.replace(frames, runs=runs) if dataclasses.is_dataclass(frames) else runs


def beyond_gains(frames, metrics: Sequence[str] = (*RETRIEVAL_METRICS, *NORM_METRICS)) -> pd.DataFrame:
    """The ``beyond`` chapter's paired differences against no regularizer: SEC at the selected η, SEC at the
    paper's η and L2-reg (each where the frames have its runs), each arm its own Holm family per measure
    (:func:`sec_gain` on :func:`eta_arms_apart`)."""
    apart = eta_arms_apart(frames)
    present = set(runs_frame(apart)["variant"].dropna())
    arms = [v for v in (*ETA_ARM_NAMES.values(), "sec", "l2reg") if v in present]
    return sec_gain(apart, variants=arms, metrics=metrics)


def selected_eta_rows(ev, losses: Sequence[str]) -> pd.DataFrame:
    """The compare page's R@1 rows of SEC at the η chosen on held-out classes − none for ``losses``, as its tables
    test them (each row with that table's Holm family): the four main losses from the table of the ``tuned`` runs,
    tuplet margin and CosFace from the beyond table (:func:`beyond_gains`)."""
    parts = []
    if set(losses) & set(ex.MAIN_LOSSES):
        parts.append(sec_gain(ev.frames("tuned"), variants=("sec",), metrics=("R@1",)))
    if set(losses) & set(ex.EXTRA_LOSSES):
        parts.append(beyond_selected(ev))
    out = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=["loss"])
    return out[out["loss"].isin(losses)].set_index("loss").reindex([l for l in losses if l in set(out["loss"])])


def other_tier_sentence(profile: str, shown: str, losses: Sequence[str], claims: str, root=None) -> str:
    """For a review page that reads ``shown`` (the quick tier, say) while the compare page reads some of its losses
    from another tier: that tier's rows of SEC at the held-out η − none for ``losses`` (:func:`selected_eta_rows`),
    so that a reader sees both numbers and which one the page's ``claims`` are decided on. '' where both pages read
    one tier, or the compare page has none of ``losses``."""
    ev = evidence.page_evidence("compare", profile, root)
    if ev.profile == shown:
        return ""
    try:
        rows = selected_eta_rows(ev, losses)
    except (KeyError, ValueError):
        return ""
    if not len(rows):
        return ""
    parts = [f"for {loss_noun(loss)}, {ci_text(r['estimate'], r['ci_lo'], r['ci_hi'])} points over "
             f"{int(r['n'])} seeds ({p_text(r['p_adj'], r['m'])} in its table; {mde_text(r['mde'])}): "
             f"**{r['verdict']}**" for loss, r in rows.iterrows()]
    which = " and ".join(loss_noun(loss) for loss in rows.index)
    return (f"**{which[:1].upper() + which[1:]} in the {ev.profile} tier.** The compare page reads {which} from the "
            f"{ev.profile} tier, "
            "which does not hold this page's other runs yet. There SEC (η chosen on held-out classes) − none "
            f"changes R@1 {'; '.join(parts)}. This page, and {claims}, read the {shown} tier until the "
            f"{ev.profile} tier holds all of its runs.")


def _role(metric: str) -> str:
    return "norm statistics" if metric in NORM_METRICS else report.metric_role(metric)


def family_of(comparison: str, role: str) -> str:
    """The Holm family of a paired comparison of the main table, declared by the question it answers: one
    per comparison (SEC − none, L2-reg − none) and kind of measure (R@1, the secondary metrics, the
    norm statistics), never all of them together."""
    what = {"primary": report.PRIMARY_METRIC, "secondary": "secondary metrics"}.get(role, role)
    return f"{comparison}, {what}"


def paper_gain_cell(lo: float, hi: float, paper: dict) -> str:
    """Whether our interval [lo, hi] includes the gains the paper reports ({dataset: gain}) for the same loss and
    comparison: 'CUB +7.48, Cars +7.10: both excluded', '…: CUB inside, Cars excluded', '…: inside'."""
    text = ", ".join(f"{d} {g:+.2f}" for d, g in paper.items())
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return f"{text}: no interval"
    inside = [d for d, g in paper.items() if lo <= g <= hi]
    if not inside:
        return f"{text}: {'both ' if len(paper) == 2 else 'all ' if len(paper) > 2 else ''}excluded"
    if len(inside) == len(paper):
        return f"{text}: inside"
    return f"{text}: {', '.join(inside)} inside, {', '.join(d for d in paper if d not in inside)} excluded"


def sec_gain_display(gains: pd.DataFrame, metrics: Sequence[str] | None = None, key_metric: str = "R@1",
                     digits: int = 2, paper: pd.DataFrame | None = None) -> pd.DataFrame:
    """Display form of :func:`sec_gain`: one row per loss × comparison, one column per metric with
    ``difference [95% CI]``, then the paired t-test's p-value, and the verdict for ``key_metric``.
    (The raw numbers of every metric are in the tidy frame itself.) On the page the other metrics are
    folded under the table (:func:`sec_lib.figures.tables.fold_columns`): the secondary ones, then the rest.
    ``paper`` (:func:`sec_lib.reference.paper_gains`): a column ``paper's gain (key_metric)`` says, for each row the
    paper reports (its loss and variant), whether our interval includes or excludes the paper's gain on each of its
    datasets (:func:`paper_gain_cell`)."""
    g = gains if metrics is None else gains[gains["metric"].isin(metrics)]
    reported = {} if paper is None else {
        (loss, variant): dict(zip(sub["dataset"], sub["paper_gain"].astype(float)))
        for (loss, variant), sub in paper[paper["metric"] == key_metric].groupby(["loss", "variant"], sort=False)}
    rows = []
    for (loss, comp), sub in g.groupby(["loss", "comparison"], sort=False):
        row = {"loss": loss, "comparison": comp}
        key = sub[sub["metric"] == key_metric]
        cells = {}
        for r in sub.itertuples(index=False):
            ci = (f" [{fmt_metric(r.ci_lo, r.metric, digits, True)}, {fmt_metric(r.ci_hi, r.metric, digits, True)}]"
                  if np.isfinite(r.ci_lo) else "")
            cells[r.metric] = fmt_metric(r.estimate, r.metric, digits, True) + ci
        if len(key):                      # key columns first: estimate [interval], adjusted p, verdict
            k = key.iloc[0]
            row[f"{key_metric} (primary)"] = cells.pop(key_metric)
            row[f"adj. p ({key_metric})"] = fmt_p(k["p_adj"]).replace("p = ", "").replace("p ", "")
            row[f"verdict ({key_metric})"] = k["verdict"]
            row["could detect"] = "" if not np.isfinite(k["mde"]) else f"≥ {fmt_metric(k['mde'], key_metric, digits, False)}"
            if paper is not None:
                have = reported.get((loss, k["variant"])) if k.get("baseline", "none") == "none" else None
                row[f"paper's gain ({key_metric})"] = paper_gain_cell(k["ci_lo"], k["ci_hi"], have) if have else ""
        row["n"] = f"{int(sub['n'].max())} seeds"
        row.update({f"{m} (secondary)" if m in report.MARGINS else m: c for m, c in cells.items()})
        rows.append(row)
    out = pd.DataFrame(rows)
    if not len(out):
        return out
    col = f"paper's gain ({key_metric})"
    if col in out and not out[col].astype(bool).any():          # no row the paper reports (tml, CosFace)
        out = out.drop(columns=col)
    others = [c for c in out.columns if c not in ("loss", "comparison", "n") and not c.endswith(f"({key_metric})")
              and c != f"{key_metric} (primary)" and c != "could detect" and not c.startswith("paper's gain")]
    second = [c for c in others if c.endswith(" (secondary)")]
    rest = [c for c in others if c not in second]
    name = lambda cols: ", ".join(c.removesuffix(" (secondary)") for c in cols)
    # the other measures in tables of two or three columns, so each fits the text column at 800 px
    test = [c for c in rest if c.startswith("test_")]
    train = [c for c in rest if c.startswith("train_")]
    other = [c for c in rest if c not in test and c not in train]
    return fold_columns(out, ["loss", "comparison"],
                        {f"Secondary metrics: {name(second)} (difference [95% CI])": second,
                         f"Test-set norms: {name(test)} (difference [95% CI])": test,
                         f"Training-set norms: {name(train)} (difference [95% CI])": train,
                         f"Other measures: {name(other)} (difference [95% CI])": other})


def beyond_selected(ev) -> pd.DataFrame:
    """The beyond table's R@1 rows of SEC at the held-out η − none (:func:`beyond_gains`), computed once per evidence
    object: the claim Q8b and the other pages' sentences (:func:`selected_eta_rows`) read the same rows."""
    def rows() -> pd.DataFrame:
        g = beyond_gains(ev.frames("beyond"), metrics=("R@1",))
        return g[g["variant"].isin((ETA_ARM_NAMES["selected"], "sec"))]
    return ev.derived("beyond_selected_r1", rows)
