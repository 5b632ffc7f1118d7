"""What every chapter needs: loading a chapter's runs from a result store, the book's names and
orders for losses, variants and metrics, and the paired-comparison helpers the chapters share (a page's
Holm family goes through :func:`sec_lib.report.one_family` / :func:`sec_lib.report.with_verdict`).

Nothing here trains. ``load`` reads from the store it is given (``root``); the learning-rate and η
choices inside :func:`sec_lib.runs.experiments.sweep_configs` read from that same store.
"""
from __future__ import annotations

import math
from typing import Iterable, Sequence

import numpy as np
import pandas as pd

from ..runs import experiments as ex
from .. import report
from ..params import Choice
from ..reference import RETRIEVAL_METRICS, comparison_label
from ..runs.store import load_runs, run_key
from ..runs.tier import store_for
from ..report.claims import mde_from_ci as _mde_from_ci
from ..report import cv_from_var  # noqa: F401 (the chapters' name for it)
from ..report import shared_steps  # noqa: F401 (the chapters' name for it)
from ..report.verdicts import equivalence_words, inconclusive_words  # noqa: F401 (the chapters' names for them)
from ..report.claims import p_words

#: Each norm variance of the runs table (absolute units) -> its scale-free counterpart, the coefficient of
#: variation CV = std / mean of the same norms. SEC mostly shrinks the embedding, so a variance
#: falls with the scale; every page that shows a variance shows this CV beside it (:func:`with_norm_cv`).
NORM_CV = {"test_norm_var": "test_norm_cv", "train_norm_var": "train_norm_cv"}
#: The mean norm each variance's CV divides by (a column of the runs table).
NORM_MEAN = {"test_norm_var": "test_norm_mean", "train_norm_var": "train_norm_mean"}
#: The norm statistics of the main table and its paired differences: each variance, then its CV.
NORM_METRICS = ("test_norm_var", "test_norm_cv", "train_norm_var", "train_norm_cv")
#: Regularised variant -> how the page names the paired comparison against ``none``.
COMPARISONS = {v: comparison_label(v) for v in ("sec", "l2reg")}
#: Direction each metric is expected to move under SEC (+1 up, -1 down): drives the verdicts.
EXPECTED_SIGN = {**{m: +1 for m in (*RETRIEVAL_METRICS, "MAP@R")}, "test_norm_var": -1, "train_norm_var": -1,
                 "test_norm_cv": -1, "train_norm_cv": -1}
TEST_NAME = "paired t-test over seeds (two-sided)"

#: How a page title names a loss (the papers' names); :func:`loss_noun` is the same name inside a sentence.
LOSS_TITLES = {"triplet": "Triplet", "semihard": "Semihard triplet", "npair": "Normalized N-pair",
               "npair_ip": "Inner-product N-pair", "npair_ip_l2": "Inner-product N-pair with L2",
               "ms": "Multi-similarity", "tml": "Tuplet margin", "cosface": "CosFace", "arcface": "ArcFace",
               "normface": "NormFace", "contrastive": "Contrastive", "ntxent": "NT-Xent", "supcon": "SupCon"}


def loss_noun(loss: str) -> str:
    """A loss's name inside a sentence: its title with a capitalised first word lowered ('tuplet margin',
    'normalized N-pair'), a proper name kept ('CosFace', 'NT-Xent'); an unknown loss is its key."""
    title = LOSS_TITLES.get(loss, loss)
    first, _, rest = title.partition(" ")
    if first[1:].islower():
        first = first.lower()
    return f"{first} {rest}".rstrip()


class MissingSweep(KeyError):
    """Hand-made evidence (the claims page's ``Evidence.from_frames``) lacks what a claim needs (a
    chapter's frames, or the profile behind them): that claim gets no estimate (verdict *not testable
    offline*) instead of failing the whole table."""


def runs_frame(frames) -> pd.DataFrame:
    """The per-run table of a :class:`~sec_lib.runs.store.Frames` (or a runs DataFrame itself)."""
    runs = getattr(frames, "runs", frames)
    if not isinstance(runs, pd.DataFrame):
        raise ValueError(f"frames must be a store.Frames or a runs DataFrame, got {type(frames).__name__}")
    for col in ("loss", "variant"):
        if col not in runs.columns:
            raise ValueError(f"the runs frame has no column {col!r}; columns: {list(runs.columns)}")
    return runs


def order_rows(df: pd.DataFrame, cols=("loss", "variant")) -> pd.DataFrame:
    """Sort rows in the book's order: the paper's losses, then tuplet margin and CosFace; variants none / l2reg /
    sec, then SEC's η arms (selected, then the paper's: :func:`sec_lib.chapters.gains.eta_arms_apart`)."""
    orders = {"loss": (*ex.MAIN_LOSSES, *ex.EXTRA_LOSSES),
              "variant": (*ex.VARIANTS, "sec, selected η", "sec, paper's η")}
    keys = []
    for c in cols:
        if c in df.columns:
            known = list(orders.get(c, ()))
            extra = sorted(set(df[c].dropna().astype(str)) - set(known))
            rank = {v: i for i, v in enumerate(known + extra)}
            keys.append(df[c].astype(str).map(rank))
    if not keys:
        return df
    tmp = df.assign(**{f"__k{i}": k for i, k in enumerate(keys)})
    return tmp.sort_values([f"__k{i}" for i in range(len(keys))], kind="stable").drop(
        columns=[f"__k{i}" for i in range(len(keys))]).reset_index(drop=True)


def with_norm_cv(frames, test_norms: pd.DataFrame | None = None) -> pd.DataFrame:
    """The runs of ``frames`` (a :class:`~sec_lib.runs.store.Frames` or a runs DataFrame) with, beside each
    norm variance, its scale-free counterpart (:data:`NORM_CV`; :func:`cv_from_var`):

    * ``test_norm_cv``: std / mean of the run's stored test norms (``frames.test_norms``, population
      std) where the frames carry them, else from the runs table's ``test_norm_var`` and ``test_norm_mean``
      (the same numbers: ``test_norm_var`` is the variance of those norms);
    * ``train_norm_cv``: ``sqrt(train_norm_var) / train_norm_mean`` of the runs table.

    A CV whose inputs are absent is left out (no column; :func:`norm_cv_note` says why); one already in
    the frame is kept. Failed runs (no norms) get NaN. ``test_norms`` stands for ``frames.test_norms``
    (e.g. with a runs DataFrame)."""
    runs = getattr(frames, "runs", frames)
    if not isinstance(runs, pd.DataFrame):
        raise ValueError(f"frames must be a store.Frames or a runs DataFrame, got {type(runs).__name__}")
    out = runs.copy()
    tn = getattr(frames, "test_norms", None) if test_norms is None else test_norms
    per_run = None
    if isinstance(tn, pd.DataFrame) and len(tn) and {"key", "norm"} <= set(tn.columns) and "key" in out.columns:
        g = tn.groupby("key")["norm"]
        per_run = cv_from_var(g.var(ddof=0), g.mean())
    for var_col, cv_col in NORM_CV.items():
        if cv_col in out.columns:
            continue
        cv, found = pd.Series(np.nan, index=out.index, dtype=float), False
        if var_col == "test_norm_var" and per_run is not None:
            cv, found = out["key"].map(per_run).astype(float), True
        if var_col in out.columns and NORM_MEAN[var_col] in out.columns:
            cv = cv.fillna(cv_from_var(pd.to_numeric(out[var_col], errors="coerce").astype(float),
                                       pd.to_numeric(out[NORM_MEAN[var_col]], errors="coerce").astype(float)))
            found = True
        if found:
            out[cv_col] = cv
    return out


def with_batch_cv(steps: pd.DataFrame) -> pd.DataFrame:
    """A steps table with ``norm_cv``, the CV (std / mean) of the norms within each logged batch, beside its
    ``norm_var`` (:func:`cv_from_var` of ``norm_var`` and ``norm_mean``, both population statistics of the
    batch, as the monitor logs them); unchanged when it lacks either column or already has ``norm_cv``."""
    if not isinstance(steps, pd.DataFrame):
        raise ValueError(f"steps must be a DataFrame, got {type(steps).__name__}")
    if "norm_cv" in steps.columns or not {"norm_var", "norm_mean"} <= set(steps.columns):
        return steps
    var = pd.to_numeric(steps["norm_var"], errors="coerce").astype(float).clip(lower=0)
    return steps.assign(norm_cv=cv_from_var(var, pd.to_numeric(steps["norm_mean"], errors="coerce").astype(float)))


def beside_cv(metrics: Iterable[str], columns: Iterable[str]) -> list[str]:
    """``metrics`` with each norm variance followed by its CV (:data:`NORM_CV`) where ``columns`` (e.g. of
    :func:`with_norm_cv`'s frame) hold it; a CV already listed is not repeated."""
    metrics, columns = list(metrics), set(columns)
    out = []
    for m in metrics:
        if m in out:
            continue
        out.append(m)
        cv = NORM_CV.get(m)
        if cv is not None and cv in columns and cv not in out:
            out.append(cv)
    return out


def norm_cv_note(frames, variances: Iterable[str] = tuple(NORM_CV)) -> str:
    """'' when every norm variance of ``variances`` in the runs of ``frames`` has its CV
    (:func:`with_norm_cv`), else a sentence naming the variances shown without one and the column missing."""
    runs = with_norm_cv(frames)
    missing = [v for v in variances if v in runs.columns and NORM_CV[v] not in runs.columns]
    if not missing:
        return ""
    why = "; ".join(f"{v} (the runs lack {NORM_MEAN[v]}" + (" and test norms" if v == "test_norm_var" else "") + ")"
                    for v in missing)
    return (f"No CV (std / mean) can be shown beside {why}: these runs store no mean norm, so only the variance, "
            "which shrinks with the norms' scale, is shown.")


def var_cv_text(var_a, var_b, cv_a=np.nan, cv_b=np.nan, arrow: str = "→") -> str:
    """'variance 4.1 → 0.0021 (CV 0.18 → 0.13)': a change of a norm variance with its scale-free
    counterpart beside it ('CV n/a' where a CV is missing), 3 significant digits."""
    def num(v):
        return f"{float(v):.3g}" if v is not None and np.isfinite(v) else "n/a"
    cv = (f"CV {num(cv_a)} {arrow} {num(cv_b)}" if all(v is not None and np.isfinite(v) for v in (cv_a, cv_b))
          else "CV n/a")
    return f"variance {num(var_a)} {arrow} {num(var_b)} ({cv})"


def run_attrs(runs: pd.DataFrame) -> pd.DataFrame:
    cols = [c for c in ("key", "loss", "variant", "seed", "status") if c in runs.columns]
    return runs[cols]


#: The slope Proposition 2 predicts (‖∂L/∂f‖ ∝ 1/‖f‖): the slope claim is reproduced only if its interval holds it.
SLOPE_TARGET = -1.0
#: The chapter (``experiments.SWEEPS``) holding the main-table runs.
MAIN_SWEEP = "compare"
#: Loss names as the paper abbreviates them.
LOSS_ABBR = {"triplet": "T", "semihard": "SHT", "npair": "NNP", "ms": "MS"}
#: Tables the review chapters read (cosines and the gradient scatter only where needed).
_DEFAULT_TABLES = ("steps", "tracked", "evals", "test_norms", "grad_scatter")


def load(sweep: str, profile, tables: Iterable[str] = _DEFAULT_TABLES, root=None):
    """Frames of a chapter's runs from the result store at ``root`` (default: the committed tier of a
    long profile when it exists, else ``$SEC_RUNS_DIR`` or ``data/runs``: see
    :func:`sec_lib.runs.tier.store_for`), i.e. ``load_runs(sweep_configs(chapter, profile, store))``.

    ``sweep`` is one of ``experiments.SWEEPS``; duplicate configs are loaded once. Raises KeyError
    (from :func:`sec_lib.runs.store.load_runs`) when runs are missing: run ``python -m sec_lib.book run`` first.
    The runs frame carries the chapter's sweep labels as columns (:func:`sec_lib.runs.experiments.sweep_labels`,
    e.g. the μ chapter's ``setting``).
    The learning-rate and η choices inside ``sweep_configs`` read the same store.
    """
    Choice(tuple(ex.SWEEPS)).check("chapter", sweep)
    tables = tuple(tables)
    uniq = {}
    store = store_for(profile if isinstance(profile, str) else profile.name, root)
    for c in ex.sweep_configs(sweep, profile, store):
        uniq.setdefault(run_key(c), c)
    frames = load_runs(list(uniq.values()), tables=tables, store=store)
    labels = ex.sweep_labels(sweep, profile, store)       # the sweep labels the runs were made with
    if labels and len(frames.runs):
        cols = list(dict.fromkeys(k for lab in labels.values() for k in lab))
        frames.runs = frames.runs.assign(**{c: frames.runs["key"].map(lambda k, c=c: labels.get(k, {}).get(c))
                                            for c in cols})
    return frames


def load_pilot(profile, root=None):
    """Frames of the learning-rate pilot (``experiments.lr_pilot``)."""
    p = ex.get_profile(profile) if isinstance(profile, str) else profile
    return load_runs(ex.lr_pilot(p), tables=("evals",), store=store_for(p.name, root))


def seeds_text(configs) -> str:
    """How many seeds each arm of ``configs`` has ('5', or '5/20' where the arms differ: the decisive tier's primary
    arms have the plan's seeds, the others 5)."""
    n = {}
    for c in configs:
        arm = (c.loss, c.variant, c.eta, c.mu, c.relative, c.optimizer, c.head, c.pretrained)
        n[arm] = n.get(arm, 0) + 1
    return "/".join(str(k) for k in sorted(set(n.values()))) or "0"


def fixed_or_nan(p, kind: str, name: str) -> float:
    """:func:`sec_lib.runs.experiments.fixed_choice`, or NaN while that held-out choice has not been made (a staged
    tier's selection table marks no point chosen then)."""
    try:
        return ex.fixed_choice(p, kind, name)
    except KeyError:
        return math.nan


def and_list(items) -> str:
    """'a', 'a and b', 'a, b and c'."""
    items = [str(x) for x in items]
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def describe_runs(runs: pd.DataFrame) -> str:
    """A computed sentence on what a chapter's runs are (count, failures, data, model, length, seeds)."""
    if not len(runs):
        return "No runs."
    n_fail = int((runs["status"] != "done").sum()) if "status" in runs.columns else 0

    def vals(col, fmt="{}"):
        if col not in runs.columns:
            return "?"
        return ", ".join(fmt.format(v) for v in sorted(runs[col].dropna().unique().tolist()))
    return (f"{len(runs)} runs ({n_fail} failed) on **{vals('dataset')}** with a **{vals('model')}** "
            f"(embedding {vals('embed_dim')}-d, batch {vals('batch_size')}), {vals('iterations')} iterations, "
            f"optimizer {vals('optimizer')} (lr {vals('lr', '{:g}')}), seeds {{{vals('seed')}}}.")


def check_cols(df: pd.DataFrame, cols: Iterable[str], what: str) -> None:
    if not isinstance(df, pd.DataFrame):
        raise ValueError(f"{what} must be a pandas DataFrame, got {type(df).__name__}")
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise ValueError(f"{what} lacks columns {missing}; it has {list(df.columns)}")


def paired(runs, by, compare_col, a, b, metrics, **kw) -> pd.DataFrame:
    """report.paired_diff, or an empty frame of the same shape if a side is absent."""
    present = set(runs[compare_col].dropna().unique().tolist()) if compare_col in runs.columns else set()
    if a not in present or b not in present:
        return pd.DataFrame(columns=[*by, *report.PAIRED_COLUMNS])
    return report.paired_diff(runs, by, compare_col, a, b, metrics=list(metrics), **kw)


def name_means(diffs: pd.DataFrame, a: str, b: str) -> pd.DataFrame:
    """Rename report.paired_diff's ``mean_a`` / ``mean_b`` to say what they are."""
    return diffs.rename(columns={"mean_a": f"mean {a}", "mean_b": f"mean {b}"})


def mde_from_ci(lo, hi, n) -> float:
    """:func:`sec_lib.report.claims.mde_from_ci` at the rules' α (the one statement of that arithmetic)."""
    return _mde_from_ci(lo, hi, n)


def ci_text(estimate, lo, hi, digits: int = 2) -> str:
    """'+1.23 (95% CI [+0.45, +2.01])', '+1.23 (no interval)' without one, 'no evidence' without an estimate."""
    if estimate is None or not np.isfinite(estimate):
        return "no evidence"
    if lo is None or hi is None or not (np.isfinite(lo) and np.isfinite(hi)):
        return f"{estimate:+.{digits}f} (no interval)"
    return f"{estimate:+.{digits}f} (95% CI [{lo:+.{digits}f}, {hi:+.{digits}f}])"


def n_text(n, n_counts: str = "seeds", detail: str = "") -> str:
    """'n = 3 seeds' / 'n = 12 runs pooled across losses', then ', ``detail``' when given."""
    if n is None or (isinstance(n, float) and not np.isfinite(n)):
        return "n = 0"
    if int(n) == 1:  # 'n = 1 seed', 'n = 1 run pooled across losses'
        first, _, rest = n_counts.partition(" ")
        n_counts = " ".join(filter(None, [first[:-1] if first.endswith("s") else first, rest]))
    return f"n = {int(n)} {n_counts}" + (f", {detail}" if detail else "")


def p_text(p_adj, m) -> str:
    """'Holm-adjusted p = 0.012 over 7 comparisons', 'p = 0.04 (the only comparison of its family)', or 'no test'
    without a p-value."""
    return p_words(p_adj, m) or "no test"


def mde_text(mde, digits: int = 2, unit: str = "") -> str:
    """'could detect ≥ 1.23' (the smallest effect the design detects at 80% power, at its family's level α/m), or 'detectable
    effect n/a (no spread)' without it (fewer than 2 values, or zero spread)."""
    if mde is None or not np.isfinite(mde):
        return "detectable effect n/a (no spread)"
    return f"could detect ≥ {mde:.{digits}f}{unit}"


def measures_text(r, digits: int = 2, unit: str = "", detail: str = "", test: str = "") -> str:
    """One verdict row's measures in words: '+2.10 points (95% CI [+1.85, +2.35]; paired t-test, Holm-adjusted
    p = 0.003 over 5 comparisons; could detect ≥ 0.33; n = 3 seeds)'. ``r``: a row (dict or Series) with
    ``estimate``, ``ci_lo``, ``ci_hi``, ``p_adj``, ``m``, ``mde``, ``n``, ``n_counts``;
    ``unit`` follows the estimate, ``detail`` what n counts, ``test`` names the test."""
    r = dict(r)
    est, n = r["estimate"], r["n"]
    if est is None or not np.isfinite(est):
        return f"no evidence ({n_text(n, r.get('n_counts', 'seeds'))})"
    lo, hi = r.get("ci_lo"), r.get("ci_hi")
    ci = (f"95% CI [{lo:+.{digits}f}, {hi:+.{digits}f}]" if lo is not None and hi is not None
          and np.isfinite(lo) and np.isfinite(hi) else "no interval")
    p = p_text(r.get("p_adj"), r.get("m", 0))
    tested = test and p != "no test"
    return (f"{est:+.{digits}f}{' ' + unit if unit else ''} ({ci}; {test + ', ' if tested else ''}{p}; "
            f"{mde_text(r.get('mde'), digits)}; {n_text(n, r.get('n_counts', 'seeds'), detail)})")


def record_row(rec) -> dict:
    """A claim record as a verdict row (:func:`measures_text`'s keys)."""
    return {k: getattr(rec, k) for k in ("estimate", "ci_lo", "ci_hi", "p_adj", "m", "mde", "n", "n_counts", "verdict")}


def decided_elsewhere(table: pd.DataFrame, records: dict, key: str) -> pd.DataFrame:
    """A page's Holm family table in which each row whose ``key`` value is in ``records`` (``{value: ClaimRecord}``,
    the claim another page decides on the same runs) carries that claim's verdict, named ("Q8b (compare page): not
    reproduced"), so that the book gives those runs one verdict. The row's numbers stay this family's: the family
    is adjusted as declared."""
    out = table.copy()
    for value, rec in records.items():
        if "verdict" in out.columns:
            out.loc[out[key] == value, "verdict"] = f"{rec.id} ({rec.page} page): {rec.verdict}"
    return out


def verdict_row_of(est: dict, expected_sign: int, margin=None, n_counts: str = "seeds") -> dict:
    """A verdict row (the keys of :data:`sec_lib.report.ROW_COLUMNS`) from an estimate dict of
    :func:`sec_lib.report.values_ci` / :func:`sec_lib.report.pooled_diff` (``estimate``, ``ci_lo``,
    ``ci_hi``, ``n``, ``p_value``): the family of one until :func:`sec_lib.report.one_family` adjusts it.
    A zero-width interval (zero spread) carries no test: p NaN, like :func:`sec_lib.report.verdict_row`."""
    lo, hi, n = est.get("ci_lo", math.nan), est.get("ci_hi", math.nan), est.get("n", 0)
    usable = report.usable_interval(lo, hi)
    p = float(est.get("p_value", math.nan)) if usable else math.nan
    mde = mde_from_ci(lo, hi, n) if usable else math.nan
    row = {"estimate": est.get("estimate", math.nan), "ci_lo": lo if usable else math.nan,
           "ci_hi": hi if usable else math.nan, "p_value": p, "p_adj": p, "m": int(np.isfinite(p)), "n": n,
           "n_counts": n_counts, "mde": mde, "expected_sign": int(expected_sign),
           "margin": math.nan if margin is None else float(margin)}
    row["p_eq"] = row["p_eq_adj"] = report.equivalence_p(row["estimate"], row["ci_lo"], row["ci_hi"], n,
                                                         report.claim_margin(margin, int(expected_sign)))
    row["verdict"] = report.verdict(row["estimate"], row["ci_lo"], row["ci_hi"], expected_sign, margin,
                                    n=n, p_adj=p, p_eq_adj=row["p_eq_adj"])
    return row


def run_step_means(runs: pd.DataFrame, steps: pd.DataFrame, cols: Sequence[str], last_frac: float = 1.0,
                   stat: str = "mean") -> pd.DataFrame:
    """``runs`` with, per run, the mean (or, with ``stat="median"``, the median) over steps (NaN-skipping; the
    last ``last_frac`` of training) of each step column in ``cols`` (e.g. dtheta_cv, grad_norm_cv)."""
    if not 0 < last_frac <= 1:
        raise ValueError(f"last_frac must be in (0, 1], got {last_frac!r}")
    if stat not in ("mean", "median"):
        raise ValueError(f"stat must be 'mean' or 'median', got {stat!r}")
    cols = list(cols)
    check_cols(steps, ["key", "step", *cols], "steps")
    s = steps
    if last_frac < 1:
        last = s.groupby("key")["step"].transform("max")
        s = s[s["step"] > (1 - last_frac) * last]
    means = s.groupby("key")[cols].agg(stat).reset_index()
    return runs.drop(columns=[c for c in cols if c in runs.columns]).merge(means, on="key", how="left")


def run_slopes(runs: pd.DataFrame, steps: pd.DataFrame, last_frac: float = 1.0) -> pd.DataFrame:
    """``runs`` with each run's ``grad_slope``: the MEDIAN over its logged steps of the per-batch log-log slope of
    ‖∂L/∂f_i‖ against ‖f_i‖. The one per-run summary of that slope on every page. A batch whose norms barely
    differ fits a slope of −40 or −250 (about a fifth of the decisive tier's batches lie beyond ±5), so a
    per-run mean follows its few worst batches; the median follows the typical one."""
    return run_step_means(runs, steps, ["grad_slope"], last_frac, stat="median")
