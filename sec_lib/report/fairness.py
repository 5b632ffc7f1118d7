"""Fairness by attribute: are embedding norms, or retrieval errors, tied to attributes of the samples?

The meta-review asked whether unregularized norms correlate with attributes of the samples (for example
difficulty or class), as a fairness question. On the glyph benchmark every image has real attributes, the
font that drew it (family, design, weight, italic: :mod:`sec_lib.data.fonts`), and every class has a
difficulty. This module holds the effect sizes every page uses, with ONE definition each:

* :func:`group_gap`: contrast between two levels ``a`` and ``b`` of an attribute: ``diff`` = mean_b -
  mean_a; ``rel_diff`` = diff / the overall mean (scale-free: multiplying every value by c leaves it
  unchanged, so runs whose norms differ in size compare); ``smd`` = Hedges' g (diff / pooled SD, small-sample
  corrected).
* :func:`eta_squared`: share of the variance explained by an attribute with any number of levels,
  SS_between / SS_total.
* :func:`correlation`: Spearman (default) or Pearson correlation of two columns, e.g. per-class mean norm
  against per-class difficulty.
* :func:`gap_change`: difference of differences: how much an attribute gap changes from a baseline variant
  (no SEC) to a treated one (SEC), on the same classes.

Intervals are percentile bootstrap intervals that resample CLUSTERS (by default the class, column
``label``): images of one class share their character, so they are not independent; all rows of a drawn
class come along (in every variant and seed, so :func:`gap_change` is paired by class). With
``within=True`` each value is first centred on its cluster's mean, so the contrast is measured within
classes (fonts are spread unevenly over classes: Computer Modern draws only ASCII, for instance, and a
between-class difference would otherwise pass for a font effect).

Helpers: :func:`with_attributes` joins a run's ``test_norms`` with the per-image and per-class attributes
(:func:`sec_lib.data.fonts.instance_attributes`, :func:`~sec_lib.data.fonts.glyph_attributes`);
:func:`relative_to_run` divides a value by its run's mean (norm / mean norm), :func:`class_table`
summarises a run's ``test_norms`` per class, :func:`class_difficulty` turns per-class hit rates into a
difficulty (1 - mean hit@1 over the given runs).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

__all__ = ["Interval", "group_gap", "eta_squared", "correlation", "gap_change", "relative_to_run", "class_table",
           "class_difficulty", "effects_frame", "with_attributes"]


@dataclass(frozen=True)
class Interval:
    """A point estimate with a (percentile bootstrap) interval at ``level``."""
    estimate: float
    lo: float
    hi: float
    level: float = 0.95

    @property
    def excludes_zero(self) -> bool:
        return bool(self.lo > 0 or self.hi < 0)


def effects_frame(effects: dict) -> pd.DataFrame:
    """``{name: Interval}`` as a table (statistic, estimate, lo, hi, level)."""
    return pd.DataFrame([{"statistic": k, "estimate": v.estimate, "lo": v.lo, "hi": v.hi, "level": v.level}
                         for k, v in effects.items()])


# --------------------------------------------------------------------------------------- checks
def _check_frame(frame, columns):
    if not isinstance(frame, pd.DataFrame):
        raise ValueError(f"expected a pandas DataFrame; got {type(frame).__name__}")
    missing = [c for c in columns if c is not None and c not in frame.columns]
    if missing:
        raise ValueError(f"column(s) {missing} not in the frame; its columns: {list(frame.columns)}")
    if len(frame) == 0:
        raise ValueError("the frame is empty")


def _check_boot(n_boot, level):
    if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)) or n_boot < 100:
        raise ValueError(f"n_boot={n_boot!r} is not valid; expected an integer >= 100")
    if not (isinstance(level, float) and 0.5 <= level < 1):
        raise ValueError(f"level={level!r} is not valid; expected a float in [0.5, 1)")


def _levels(frame, group, a, b):
    present = sorted(frame[group].dropna().unique().tolist(), key=str)
    for name, v in (("a", a), ("b", b)):
        if v not in present:
            raise ValueError(f"{name}={v!r} is not a level of column {group!r}; its levels: {present}")
    if a == b:
        raise ValueError(f"a and b must differ; got {a!r} twice")


def _values(frame, value, cluster, within):
    v = frame[value].to_numpy(dtype=float)
    if not np.isfinite(v).all():
        raise ValueError(f"column {value!r} has {int((~np.isfinite(v)).sum())} non-finite values")
    if within:
        if cluster is None:
            raise ValueError("within=True needs a cluster column (the classes to centre on)")
        v = v - frame.groupby(cluster, sort=False)[value].transform("mean").to_numpy(dtype=float)
    return v


def _cluster_codes(frame, cluster):
    if cluster is None:
        return np.arange(len(frame)), len(frame)
    codes, uniques = pd.factorize(frame[cluster], sort=True)
    return codes, len(uniques)


def _weights(n_clusters, n_boot, seed):
    """(n_boot + 1, n_clusters) cluster counts: row 0 = every cluster once (the point estimate), then
    multinomial resamples of the clusters with replacement."""
    rng = np.random.default_rng(seed)
    boot = rng.multinomial(n_clusters, np.full(n_clusters, 1.0 / n_clusters), size=n_boot)
    return np.vstack([np.ones((1, n_clusters)), boot]).astype(float)


def _sums(codes, n_clusters, mask, v):
    """Per-cluster count, sum and sum of squares of v over the rows in mask."""
    n = np.bincount(codes[mask], minlength=n_clusters).astype(float)
    s = np.bincount(codes[mask], weights=v[mask], minlength=n_clusters)
    q = np.bincount(codes[mask], weights=v[mask] ** 2, minlength=n_clusters)
    return n, s, q


def _interval(samples, level) -> Interval:
    est, boot = float(samples[0]), samples[1:]
    boot = boot[np.isfinite(boot)]
    if len(boot) == 0:
        return Interval(est, float("nan"), float("nan"), level)
    lo, hi = np.quantile(boot, [(1 - level) / 2, (1 + level) / 2])
    return Interval(est, float(lo), float(hi), level)


# ------------------------------------------------------------------------------------ effects
def group_gap(frame: pd.DataFrame, value: str, group: str, a, b, cluster: str | None = "label",
              within: bool = False, n_boot: int = 2000, level: float = 0.95, seed: int = 0) -> dict:
    """Contrast of ``value`` between rows with ``group == b`` and ``group == a`` (b minus a).

    Returns ``{"mean_a", "mean_b", "diff", "rel_diff", "smd"}`` as :class:`Interval` s, with the rows of
    both levels resampled by ``cluster`` (None: rows are independent). ``rel_diff`` divides by the mean of
    ``value`` over all rows of the two levels (before any centring); ``smd`` is Hedges' g with the pooled SD
    of the two levels. With ``within=True`` values are centred on their cluster's mean (over its rows of the
    two levels) first, so ``diff`` is a within-cluster contrast."""
    _check_frame(frame, [value, group, cluster])
    _check_boot(n_boot, level)
    _levels(frame, group, a, b)
    frame = frame[frame[group].isin([a, b])]
    raw = _values(frame, value, None, False)
    v = _values(frame, value, cluster, within)
    codes, k = _cluster_codes(frame, cluster)
    w = _weights(k, n_boot, seed)
    out = {}
    stats_ = {}
    for name, level_value in (("a", a), ("b", b)):
        n, s, q = _sums(codes, k, (frame[group] == level_value).to_numpy(), v)
        stats_[name] = (w @ n, w @ s, w @ q)
    n_all, s_raw, _ = _sums(codes, k, np.ones(len(frame), bool), raw)
    overall = (w @ s_raw) / (w @ n_all)
    with np.errstate(divide="ignore", invalid="ignore"):
        (na, sa, qa), (nb, sb, qb) = stats_["a"], stats_["b"]
        ma, mb = sa / na, sb / nb
        var_a, var_b = (qa - na * ma**2) / (na - 1), (qb - nb * mb**2) / (nb - 1)
        pooled = np.sqrt(((na - 1) * var_a + (nb - 1) * var_b) / (na + nb - 2))
        correction = 1 - 3 / (4 * (na + nb) - 9)
        diff = mb - ma
        out = {"mean_a": ma, "mean_b": mb, "diff": diff, "rel_diff": diff / overall,
               "smd": diff / pooled * correction}
    return {name: _interval(x, level) for name, x in out.items()}


def eta_squared(frame: pd.DataFrame, value: str, group: str, cluster: str | None = "label", within: bool = False,
                n_boot: int = 2000, level: float = 0.95, seed: int = 0) -> Interval:
    """SS_between / SS_total of ``value`` across the levels of ``group`` (share of variance explained), with a
    cluster bootstrap interval; ``within=True`` centres values on their cluster's mean first."""
    _check_frame(frame, [value, group, cluster])
    _check_boot(n_boot, level)
    frame = frame[frame[group].notna()]
    v = _values(frame, value, cluster, within)
    codes, k = _cluster_codes(frame, cluster)
    w = _weights(k, n_boot, seed)
    levels = frame[group].unique().tolist()
    if len(levels) < 2:
        raise ValueError(f"column {group!r} has {len(levels)} level(s); eta squared needs at least 2")
    n_t, s_t, q_t = (w @ x for x in _sums(codes, k, np.ones(len(frame), bool), v))
    between = np.zeros(len(w))
    for lv in levels:
        n, s, _ = (w @ x for x in _sums(codes, k, (frame[group] == lv).to_numpy(), v))
        with np.errstate(divide="ignore", invalid="ignore"):
            between += np.where(n > 0, s**2 / np.where(n > 0, n, 1), 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        ss_total = q_t - s_t**2 / n_t
        eta = (between - s_t**2 / n_t) / ss_total
    return _interval(eta, level)


def correlation(frame: pd.DataFrame, x: str, y: str, method: str = "spearman", cluster: str | None = None,
                n_boot: int = 2000, level: float = 0.95, seed: int = 0) -> Interval:
    """Spearman or Pearson correlation of columns ``x`` and ``y`` with a bootstrap interval (rows resampled,
    or whole clusters when ``cluster`` is given)."""
    if method not in ("spearman", "pearson"):
        raise ValueError(f"method={method!r} is not valid; valid methods: spearman, pearson")
    _check_frame(frame, [x, y, cluster])
    _check_boot(n_boot, level)
    xv, yv = frame[x].to_numpy(dtype=float), frame[y].to_numpy(dtype=float)
    if len(frame) < 3:
        raise ValueError(f"correlation needs at least 3 rows; got {len(frame)}")
    rng = np.random.default_rng(seed)
    if cluster is None:
        idx = rng.integers(0, len(frame), size=(n_boot, len(frame)))
    else:
        codes, k = _cluster_codes(frame, cluster)
        members = [np.flatnonzero(codes == c) for c in range(k)]
        draws = rng.integers(0, k, size=(n_boot, k))
        idx = [np.concatenate([members[c] for c in row]) for row in draws]
    samples = [corr(xv, yv, method)] + [corr(xv[i], yv[i], method) for i in idx]
    return _interval(np.asarray(samples), level)


def corr(x, y, method: str = "spearman") -> float:
    """The plain Spearman (ranks) or Pearson correlation coefficient of two arrays (no interval)."""
    if method == "spearman":
        x, y = stats.rankdata(x), stats.rankdata(y)
    x, y = x - x.mean(), y - y.mean()
    den = np.sqrt((x * x).sum() * (y * y).sum())
    return float((x * y).sum() / den) if den > 0 else float("nan")


def gap_change(frame: pd.DataFrame, value: str, group: str, a, b, variant: str = "variant", base="none",
               treated="sec", cluster: str | None = "label", within: bool = False, n_boot: int = 2000,
               level: float = 0.95, seed: int = 0) -> dict:
    """Difference of differences: the gap ``mean_b - mean_a`` of ``value`` in the ``treated`` variant minus
    the same gap in the ``base`` variant (rows of each variant pooled over seeds). The classes (``cluster``)
    are resampled jointly for both variants, so the interval is paired by class.

    Returns ``{"gap_base", "gap_treated", "change"}`` as :class:`Interval` s. A negative ``change`` of a
    positive ``gap_base`` means the treatment narrowed the gap. For norms, pass a scale-free value (see
    :func:`relative_to_run`)."""
    _check_frame(frame, [value, group, variant, cluster])
    _check_boot(n_boot, level)
    _levels(frame, group, a, b)
    _levels(frame, variant, base, treated)
    frame = frame[frame[group].isin([a, b]) & frame[variant].isin([base, treated])]
    v = np.empty(len(frame))
    for vv in (base, treated):  # centring (if any) within each variant
        m = (frame[variant] == vv).to_numpy()
        v[m] = _values(frame[m], value, cluster, within)
    codes, k = _cluster_codes(frame, cluster)
    w = _weights(k, n_boot, seed)
    gaps = {}
    for vv in (base, treated):
        means = {}
        for lv in (a, b):
            mask = ((frame[variant] == vv) & (frame[group] == lv)).to_numpy()
            n, s, _ = _sums(codes, k, mask, v)
            with np.errstate(divide="ignore", invalid="ignore"):
                means[lv] = (w @ s) / (w @ n)
        gaps[vv] = means[b] - means[a]
    return {"gap_base": _interval(gaps[base], level), "gap_treated": _interval(gaps[treated], level),
            "change": _interval(gaps[treated] - gaps[base], level)}


# ------------------------------------------------------------------------------------ helpers
def relative_to_run(frame: pd.DataFrame, value: str = "norm", by=("variant", "seed"), name: str | None = None):
    """A copy of ``frame`` with ``<value>_rel`` = value / its mean within each run (the ``by`` columns that
    exist): norms in units of their run's mean norm, comparable between runs with and without SEC."""
    _check_frame(frame, [value])
    keys = [c for c in by if c in frame.columns]
    out = frame.copy()
    mean = out.groupby(keys)[value].transform("mean") if keys else out[value].mean()
    out[name or f"{value}_rel"] = out[value] / mean
    return out


def class_table(test_norms: pd.DataFrame) -> pd.DataFrame:
    """Per class of a run's ``test_norms`` (columns label, norm, hit@1): n, mean norm, mean norm relative to
    the run's mean, SD of the norms, hit@1 rate in percent."""
    _check_frame(test_norms, ["label", "norm", "hit@1"])
    overall = test_norms["norm"].mean()
    g = test_norms.groupby("label")
    return pd.DataFrame({"n": g.size(), "norm_mean": g["norm"].mean(), "norm_rel": g["norm"].mean() / overall,
                         "norm_sd": g["norm"].std(ddof=1), "hit1": 100.0 * g["hit@1"].mean()}).reset_index()


def class_difficulty(test_norms_list) -> pd.DataFrame:
    """Per class, ``difficulty`` = 1 - mean hit@1 over the given runs' ``test_norms`` frames (e.g. every
    seed of the unregularized variant), so difficulty does not come from the run it is compared with."""
    frames = list(test_norms_list)
    if not frames:
        raise ValueError("class_difficulty needs at least one test_norms frame")
    for f in frames:
        _check_frame(f, ["label", "hit@1"])
    hits = pd.concat([f[["label", "hit@1"]] for f in frames])
    out = hits.groupby("label")["hit@1"].mean().rename("hit1_rate").reset_index()
    out["difficulty"] = 1.0 - out["hit1_rate"]
    return out


def with_attributes(test_norms: pd.DataFrame, instance_attrs: pd.DataFrame,
                    class_attrs: pd.DataFrame | None = None) -> pd.DataFrame:
    """A run's ``test_norms`` (one row per test image, dataset order) side by side with the attributes of the
    same images (``instance_attrs``, same order, e.g. ``instance_attributes(test_ds)``) and, optionally, of
    their classes (``class_attrs``, one row per ``label``). Raises if the rows do not describe the same
    images (different length or labels)."""
    _check_frame(test_norms, ["label"])
    _check_frame(instance_attrs, ["label"])
    if len(test_norms) != len(instance_attrs) or not np.array_equal(test_norms["label"].to_numpy(),
                                                                    instance_attrs["label"].to_numpy()):
        raise ValueError(f"test_norms ({len(test_norms)} rows) and instance_attrs ({len(instance_attrs)} rows) do "
                         "not list the same images in the same order (labels differ)")
    clash = sorted((set(test_norms.columns) & set(instance_attrs.columns)) - {"label"})
    if clash:
        raise ValueError(f"columns {clash} exist in both test_norms and instance_attrs")
    out = pd.concat([test_norms.reset_index(drop=True), instance_attrs.drop(columns="label").reset_index(drop=True)],
                    axis=1)
    if class_attrs is not None:
        _check_frame(class_attrs, ["label"])
        missing = sorted(set(out["label"]) - set(class_attrs["label"]))
        if missing:
            raise ValueError(f"class_attrs has no row for label(s) {missing[:10]}")
        out = out.merge(class_attrs, on="label", how="left", suffixes=("", "_class"), validate="many_to_one")
    return out
