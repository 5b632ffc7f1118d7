"""Tidy summaries, paired comparisons and rule-based verdicts for the book's tables.

Everything takes and returns pandas frames in long ("tidy") form; nothing is printed or written.
Statistics:

* confidence intervals are Student-t intervals of the mean, ``mean +- t_{(1+level)/2, n-1} * s / sqrt(n)``
  with the sample standard deviation ``s`` (ddof=1);
* paired comparisons use the paired (dependent-samples) t-test, ``scipy.stats.ttest_rel``, two-sided,
  on the per-seed differences ``b - a``;
* verdicts are computed by :func:`verdict` from the estimate, its CI, the practical equivalence
  margin of the metric (:data:`MARGINS`) and the Holm-adjusted p-value (:func:`holm`) of the family
  the comparison belongs to; every row also reports the smallest effect its design could detect
  (:func:`min_detectable_effect`). :func:`verdict_row` builds such rows; :func:`one_family` (with
  :func:`with_verdict` for a table of :func:`paired_diff` rows) is the one entry point that adjusts a page's
  declared family (:func:`adjust_family` does the arithmetic). Every comparison has one row schema:
  ``estimate``, ``ci_lo``, ``ci_hi``, ``p_value``, ``n``.
  R@1 is the primary metric (:data:`PRIMARY_METRIC`), the others are secondary. No verdict is
  ever written by hand.

The paper reports single runs; here each configuration is repeated over seeds, so every number
comes with its interval.

Modules (every name is re-exported here, so ``from sec_lib.report import X`` is the API):

* :mod:`.intervals`: :func:`mean_ci`, :func:`summarize`, :func:`paired_diff`, :func:`values_ci`,
  :func:`pooled_diff`, :data:`DEFAULT_METRICS`, :data:`PAIRED_COLUMNS`;
* :mod:`.verdicts`: :data:`MARGINS`, :data:`PRIMARY_METRIC`, :class:`VerdictRules`, :func:`verdict`,
  :func:`verdict_row`, :func:`verdict_table`, :func:`equivalence_p`, :func:`claim_margin` and their constants;
* :mod:`.power`: :func:`min_detectable_effect`;
* :mod:`.multiplicity`: :func:`holm`, :func:`adjust_family`, :func:`one_family`, :func:`with_verdict`,
  :data:`FAMILY_COLUMNS`;
* :mod:`.formatting`: :func:`format_ci`, :func:`fmt_cell`, :func:`fmt_estimate`, :func:`fmt_metric`, :func:`wide`,
  :func:`summary_table`;
* :mod:`.fits`: :func:`loglog_fit`, :func:`loglog_fits`;
* :mod:`.steps`: :func:`shared_steps`.
"""
from .fits import LogLogFit, loglog_fit, loglog_fits
from .formatting import fmt_cell, fmt_estimate, fmt_metric, format_ci, is_percent, summary_table, wide
from .intervals import (DEFAULT_METRICS, PAIRED_COLUMNS, cv_from_var, groups_differ, mean_ci, paired_diff, pooled_diff,
                        summarize, values_ci)
from .multiplicity import FAMILY_COLUMNS, adjust_family, holm, one_family, with_verdict
from .power import min_detectable_effect
from .steps import shared_steps
from .verdicts import (
    MARGINS, N_COUNTS, PRIMARY_METRIC, ROW_COLUMNS, SECONDARY_METRICS, SIGNAL_WORDS, VERDICT_RULES, VERDICTS,
    VerdictRules, paper_range_of, refine, size_word,
    claim_margin, equivalence_p, margin_for, margin_table, metric_role, usable_interval, verdict, verdict_row,
    verdict_table,
)

__all__ = [
    "shared_steps",
    "mean_ci",
    "summarize",
    "wide",
    "paired_diff",
    "PRIMARY_METRIC",
    "SECONDARY_METRICS",
    "MARGINS",
    "N_COUNTS",
    "ROW_COLUMNS",
    "metric_role",
    "margin_for",
    "margin_table",
    "min_detectable_effect",
    "holm",
    "verdict_row",
    "adjust_family",
    "one_family",
    "with_verdict",
    "FAMILY_COLUMNS",
    "PAIRED_COLUMNS",
    "VerdictRules",
    "VERDICT_RULES",
    "VERDICTS",
    "groups_differ",
    "SIGNAL_WORDS",
    "paper_range_of",
    "size_word",
    "refine",
    "verdict",
    "verdict_table",
    "equivalence_p",
    "usable_interval",
    "claim_margin",
    "DEFAULT_METRICS",
    "format_ci",
    "fmt_cell",
    "fmt_estimate",
    "fmt_metric",
    "is_percent",
    "loglog_fit",
    "loglog_fits",
    "values_ci",
    "pooled_diff",
    "cv_from_var",
    "summary_table",
]
