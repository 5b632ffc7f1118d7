"""The compare page: our main table (four losses × none / L2-reg / SEC, mean and 95% CI over seeds),
paired gains against the no-regulariser baseline, our gains against the paper's, the η chosen on
held-out classes, and the losses beyond the paper's four.

Statistics: Student-t intervals over seeds and paired t-tests that pair runs on their seed
(:mod:`sec_lib.report`); every verdict comes from :func:`sec_lib.report.verdict`.
"""
from __future__ import annotations

import dataclasses
import warnings
from typing import Sequence

import numpy as np
import pandas as pd

from ..runs import experiments as ex
from .. import reference, report
from ..figures.tables import fold_columns
from ..reference import RETRIEVAL_METRICS, SOURCES, comparison_label
from ..report import fmt_metric, format_ci
from ..analysis.source import run_source
from ..runs import decisive
from ..runs.decisive import ETA_SELECTION_STAGES
from . import common, profile_param
from .evidence import ETA_ARM_NAMES, name_eta_arms
from ..report.claims import Claim, family_row
from .gain_words import (ARM_WORDS, LOSS_CLAIMS, fmt_p, gain_sentences, gains_paragraph,  # noqa: F401
                         overall_sentence)
from .common import (EXPECTED_SIGN, LOSS_ABBR, NORM_CV, NORM_METRICS, TEST_NAME, loss_noun, order_rows, runs_frame,
                     with_norm_cv)

#: The notebook's parameters (checked by ``sec_lib.params.notebook_params``).
PARAMS = profile_param()


def setup_sentence(runs: pd.DataFrame) -> str:
    """A computed description of the runs a page reads (counts, data, model, iterations, failures)."""
    runs = runs_frame(runs)
    n = len(runs)
    nf = int((runs["status"] != "done").sum()) if "status" in runs.columns else 0
    parts = [f"This page reads **{n} runs** from the result store"]
    dims = []
    for col, what in (("loss", "losses"), ("variant", "variants"), ("seed", "seeds")):
        if col in runs.columns:
            vals = list(dict.fromkeys(runs[col].astype(str)))
            dims.append(f"{len(vals)} {what} ({', '.join(vals)})")
    if dims:
        parts.append(": " + " × ".join(dims))
    det = []
    for col, fmt in (("dataset", "data: {}"), ("model", "model: {}"), ("iterations", "{} iterations"),
                     ("batch_size", "batch {}"), ("embed_dim", "{}-d embedding"), ("device", "device: {}")):
        if col in runs.columns and len(runs):
            vals = sorted(set(runs[col].astype(str)))
            det.append(fmt.format("/".join(vals)))
    text = "".join(parts) + (f" ({', '.join(det)})" if det else "") + "."
    text += (f" **{nf} of them failed** (non-finite loss); they count in no mean." if nf else " All of them finished.")
    return text


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
    cols = [*cols[:-1], "p_adj", "m", "mde", "n_counts", "role", "family", "verdict",
            *(["eta_arm"] if "eta_arm" in out.columns else [])]
    out = order_rows(out[cols], cols=("loss", "variant"))
    out.attrs["source"] = "ours"
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


def beyond_paragraph(gains: pd.DataFrame, frames, metric: str = "R@1") -> str:
    """The R@1 bullets of :func:`beyond_gains`, one block per arm, each arm's weights named from its runs."""
    runs = runs_frame(eta_arms_apart(frames))
    blocks = []
    for v in (ETA_ARM_NAMES["selected"], ETA_ARM_NAMES["paper"], "sec", "l2reg"):
        if not (gains["variant"].eq(v) & gains["metric"].eq(metric)).any():
            continue
        w = runs[runs["variant"] == v].groupby("loss", sort=False)["eta"].first()
        weights = ", ".join(f"{loss} {w[loss]:g}" for loss in (*ex.EXTRA_LOSSES, *ex.MAIN_LOSSES) if loss in w.index)
        title = f"{comparison_label(v)}, {metric} (weights: {weights})"
        blocks.append(gains_paragraph(gains, metric, v, title=title, closing=False))
    return "\n\n".join(blocks)


def selected_eta_rows(ev, losses: Sequence[str]) -> pd.DataFrame:
    """The compare page's R@1 rows of SEC at the η chosen on held-out classes − none for ``losses``, as its tables
    test them (each row with that table's Holm family): the four main losses from the table of the ``tuned`` runs,
    tuplet margin and CosFace from the beyond table (:func:`beyond_gains`)."""
    parts = []
    if set(losses) & set(ex.MAIN_LOSSES):
        parts.append(sec_gain(ev.frames("tuned"), variants=("sec",), metrics=("R@1",)))
    if set(losses) & set(ex.EXTRA_LOSSES):
        parts.append(_beyond_selected(ev))
    out = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=["loss"])
    return out[out["loss"].isin(losses)].set_index("loss").reindex([l for l in losses if l in set(out["loss"])])


def other_tier_sentence(profile: str, shown: str, losses: Sequence[str], claims: str, root=None) -> str:
    """For a review page that reads ``shown`` (the quick tier, say) while the compare page reads some of its losses
    from another tier: that tier's rows of SEC at the held-out η − none for ``losses`` (:func:`selected_eta_rows`),
    so that a reader sees both numbers and which one the page's ``claims`` are decided on. '' where both pages read
    one tier, or the compare page has none of ``losses``."""
    from . import evidence
    from .common import ci_text, loss_noun, mde_text, p_text
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
    """The Holm family of a paired comparison on this page, declared by the question it answers: one
    per comparison (SEC − none, L2-reg − none) and kind of measure (R@1, the secondary metrics, the
    norm statistics), never all of them together."""
    what = {"primary": report.PRIMARY_METRIC, "secondary": "secondary metrics"}.get(role, role)
    return f"{comparison}, {what}"


def gains_vs_paper(frames, dataset=("CUB", "Cars"), metrics: Sequence[str] = RETRIEVAL_METRICS,
                   gains: pd.DataFrame | None = None, data: str = "glyphs") -> pd.DataFrame:
    """Our gain next to the paper's, per loss, comparison (SEC − none, L2-reg − none), metric and
    paper dataset (tidy). ``gains``: a precomputed :func:`sec_gain` frame (computed when None). ``dataset``:
    the paper's datasets to set beside ours (a real-benchmark book: its own,
    :func:`sec_lib.runs.benchmarks.paper_datasets`); ``data``: what our runs trained on, for the source label.

    Columns: dataset, loss, variant, comparison, metric, ours, ours_ci_lo, ours_ci_hi, p_value,
    n (paired seeds), paper, same_sign (our estimate has the paper's sign), source.
    """
    names = reference.check_datasets(dataset, ("CUB", "Cars", "SOP", "InShop"))
    g = sec_gain(frames, metrics=metrics) if gains is None else gains
    g = g[g["metric"].isin(metrics) & (g["baseline"] == "none")]
    p = reference.paper_gains(names, metrics)
    out = g.merge(p[["dataset", "loss", "variant", "metric", "paper_gain"]], on=["loss", "variant", "metric"],
                  how="inner")
    out = out.rename(columns={"estimate": "ours", "ci_lo": "ours_ci_lo", "ci_hi": "ours_ci_hi", "paper_gain": "paper"})
    out["same_sign"] = np.sign(out["ours"]) == np.sign(out["paper"])
    out["source"] = f"ours ({data}) vs {SOURCES['table1']}"
    cols = ["dataset", "loss", "variant", "comparison", "metric", "ours", "ours_ci_lo", "ours_ci_hi", "p_value",
            "n", "paper", "same_sign", "source"]
    out = out[cols]
    out = out.assign(__d=out["dataset"].map({d: i for i, d in enumerate(names)}))
    out = order_rows(out.sort_values("__d", kind="stable").drop(columns="__d"), cols=("loss", "variant"))
    out.attrs["source"] = out["source"].iloc[0] if len(out) else "ours"
    return out


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


def eta_selection_table(profile, root=None, losses=None) -> pd.DataFrame:
    """Held-out R@1 of every η of the selection runs, per loss, with the chosen η marked.

    The selection runs train on the training classes minus the held-out ones and evaluate on those
    held-out training classes (``experiments.eta_selection``), so the test classes play no part.
    ``root``: the result store's folder (default: ``$SEC_RUNS_DIR`` or ``data/runs``). ``losses``: the losses to
    show (default: the four main losses, tuplet margin and CosFace, this page's; a review page passes its own).
    """
    losses = tuple(losses) if losses is not None else (*ex.MAIN_LOSSES, *ex.EXTRA_LOSSES)
    p = ex.get_profile(profile) if isinstance(profile, str) else profile
    src = run_source(p.name, root)
    if src.seeded_selection:
        return _seeded_eta_selection(p, src, losses)
    selection = [r for r in ex.selection_runs(p, src.store, losses) if r.config.mu == "batch"]   # the η rows, not L2
    out = pd.DataFrame([{"loss": r.config.loss, "eta": r.config.eta, "status": r.status,
                         "heldout_R@1": r.metrics.get("R@1", np.nan)} for r in selection])
    chosen = {loss: ex.chosen_eta(p, loss, selection) for loss in out["loss"].unique()}
    out["chosen"] = [bool(e == chosen[l]) for l, e in zip(out["loss"], out["eta"])]
    return out.sort_values(["loss", "eta"]).reset_index(drop=True)


def _seeded_eta_selection(p, src, losses) -> pd.DataFrame:
    """:func:`eta_selection_table` of the decisive tier for ``losses``: its held-out selection stages
    (:data:`sec_lib.runs.decisive.ETA_SELECTION_STAGES`), each η's held-out R@1 the mean over its seeds (``seeds``), ``chosen`` the η its
    profile fixed from that selection (``plan.json``, ``choices.json``; none while the loss's selection trains)."""
    def eta_point(c):
        keep = c.loss in losses and not c.relative and (c.eta == 0 or c.mu == "batch")
        return (("loss", c.loss), ("eta", c.eta)) if keep else None
    out = src.selection(ETA_SELECTION_STAGES, eta_point)
    if not len(out):
        return pd.DataFrame(columns=["loss", "eta", "status", "heldout_R@1", "seeds", "chosen"])
    out = out.rename(columns={"held-out R@1": "heldout_R@1"})
    out["chosen"] = [bool(e == common.fixed_or_nan(p, "sec", l)) for l, e in zip(out["loss"], out["eta"])]
    return out[["loss", "eta", "status", "heldout_R@1", "seeds", "chosen"]].sort_values(["loss", "eta"]).reset_index(
        drop=True)


def selection_flags(profile, losses=None) -> str:
    """Markdown: what the decisive tier's held-out selection flagged for ``losses`` (default: the four main losses,
    tuplet margin and CosFace; ``plan.json`` for the four main losses, ``choices.json`` for the others): where η = 0
    scored best, SEC was not selected for that loss and its best nonzero η is tested, flagged; where a choice sits at
    an edge of its grid after every extension, it says so; a loss whose selection has not been made yet is named.
    Empty for a tier without such flags (the quick and reference tiers choose by their own rule, shown in the table
    above)."""
    if not run_source(profile).seeded_selection:
        return ""
    try:
        plan = decisive.read_plan()
    except KeyError:
        return ""
    losses = tuple(losses) if losses is not None else (*ex.MAIN_LOSSES, *ex.EXTRA_LOSSES)
    choices = decisive.read_choices()
    flags, pending = {}, []
    for loss in losses:
        if loss in plan.eta:
            fs = list(plan.flags.get(loss, ()))
        elif isinstance(choices.get(loss), dict):
            fs = list(choices[loss].get("flags", ()))
        else:
            pending.append(loss)
            continue
        if fs:
            flags[loss] = fs
    wait = (f"The held-out η of {common.and_list(pending)} is not chosen yet: "
            f"{'its' if len(pending) == 1 else 'their'} selection is still training." if pending else "")
    if not flags:
        done = [x for x in losses if x not in pending]
        if not done:
            return wait
        kinds = "η and L2 weight" if any(loss in (*ex.MAIN_LOSSES, *ex.EXTRA_LOSSES) for loss in done) else "η"
        return (f"Every {kinds} the decisive tier chose on held-out classes is interior to its grid, and SEC was "
                f"selected for every loss{'' if not pending else ' chosen so far'}." + (" " + wait if wait else ""))
    lines = []
    for loss, fs in flags.items():
        eta = plan.eta.get(loss, choices.get(loss, {}).get("sec"))
        tested = f" (η = {eta:g} is tested)" if eta is not None else ""
        lines.append(f"- **{loss}**{tested}: " + flags_text(fs))
    return "**Flagged by the held-out selection:**\n\n" + "\n".join(lines) + ("\n\n" + wait if wait else "")


def flags_text(flags) -> str:
    """A loss's selection flags as recorded (SEC's as they are, the L2 weight's prefixed 'L2: ', as
    ``plan.json`` and ``choices.json`` keep them) in words, grouped by regularizer: 'SEC's η: …. The L2 weight: …'."""
    sec = [f.replace("SEC not selected", "not selected") for f in flags if not f.startswith("L2: ")]
    l2 = [f[len("L2: "):].replace("L2-reg not selected", "not selected") for f in flags if f.startswith("L2: ")]
    parts = [*(["SEC's η: " + "; ".join(sec)] if sec else []), *(["the L2 weight: " + "; ".join(l2)] if l2 else [])]
    return ". ".join(p[0].upper() + p[1:] for p in parts) + "."


# ------------------------------------------------------------------------------ the claims this page decides

def _loss_row(loss: str):
    """C4a-d: the R@1 row of SEC − none for ``loss`` as this page's table tests it (its family: SEC − none, R@1)."""
    return family_row(lambda ev: sec_gain(ev.frames("compare"), variants=("sec",), metrics=("R@1",)), loss=loss)


def _pooled(chapter: str, a: str = "none", b: str = "sec", losses=ex.MAIN_LOSSES):
    def estimate(ev) -> dict:
        r = ev.runs(chapter)
        return report.pooled_diff(r[r["loss"].isin(losses)], "variant", a, b, "R@1")
    estimate.__name__ = f"pooled_{b}_minus_{a}_{chapter}"
    return estimate


def _l2_weights(ev) -> str:
    r = ev.runs("compare")
    w = r[r["variant"] == "l2reg"].groupby("loss")["eta"].first()
    return ", ".join(f"{l} {w[l]:g}" for l in ex.MAIN_LOSSES if l in w.index)


def _sec_vs_l2(ev) -> dict:
    out = _pooled("compare", "l2reg", "sec")(ev)
    out["note"] = f"L2-reg weights: {_l2_weights(ev)}"
    return out


def _sec_vs_l2_held_out(ev) -> dict:
    """C5v: SEC at the η chosen on held-out classes (the ``tuned`` runs, the headline's arm) − L2-reg at its held-out
    weight (the main comparison's L2 arm), paired on seed within each main loss, averaged over the losses per seed."""
    tuned, main = ev.runs("tuned"), ev.runs("compare")
    r = pd.concat([tuned[tuned["variant"] == "sec"], main[main["variant"] == "l2reg"]], ignore_index=True)
    out = report.pooled_diff(r[r["loss"].isin(ex.MAIN_LOSSES)], "variant", "l2reg", "sec", "R@1")
    out["note"] = f"L2-reg weights: {_l2_weights(ev)}"
    return out


def _paper_gains(a: str = "none", b: str = "sec", loss: str | None = None):
    """The paper's sizes for a claim: Table 1's R@1 of ``b`` − ``a`` per dataset (and loss) on its four datasets."""
    return lambda: reference.paper_gain_values(a, b, loss)


def _paper_text(what: str = "gains"):
    return lambda values: reference.paper_size_text(values, what=what)


def _beyond_selected(ev) -> pd.DataFrame:
    """The beyond table's R@1 rows of SEC at the held-out η − none (:func:`beyond_gains`), computed once per evidence
    object: the claim Q8b and the other pages' sentences (:func:`selected_eta_rows`) read the same rows."""
    def rows() -> pd.DataFrame:
        g = beyond_gains(ev.frames("beyond"), metrics=("R@1",))
        return g[g["variant"].isin((ETA_ARM_NAMES["selected"], "sec"))]
    return ev.derived("beyond_selected_r1", rows)


def _beyond_row(loss: str):
    """Q8b: the R@1 row of SEC at the selected η − none for ``loss`` as this page's beyond table tests it
    (:func:`beyond_gains`; its Holm family: that arm over tuplet margin and CosFace). No runs of ``loss``: KeyError
    (the claim has no evidence)."""
    def family(ev) -> pd.DataFrame:
        if not (ev.runs("beyond")["loss"] == loss).any():
            raise KeyError(f"no {loss} runs in the beyond chapter")
        return _beyond_selected(ev)
    return family_row(family, loss=loss)


#: The claims this page decides: per loss (Table 1) and pooled at the paper's η, the primary test (η chosen on
#: held-out classes), SEC against L2-reg at the paper's η and at the held-out arms, and the tuplet margin loss. The
#: family rule (the claims page): a registered pooled row is a family alone; per-loss rows form a family of their own.
CLAIMS = [
    *[Claim(id=f"C4{c}", claim=f"SEC improves R@1 for the {loss_noun(l)} loss ({LOSS_ABBR[l]} in the paper), at the "
                               "paper's η", source="paper Table 1",
            measured=f"R@1 SEC at the paper's η − none, {l}, paired on seed (main-table runs); Holm over the four "
                     "losses' SEC − none R@1",
            estimate=_loss_row(l), expected_sign=+1, page="compare",
            paper=lambda l=l: reference.paper_loss_gains_text(l), paper_size=_paper_gains(loss=l),
            paper_size_text=_paper_text())
      for c, l in zip("abcd", ex.MAIN_LOSSES)],
    Claim(id="C4", claim="SEC improves R@1 on average over the losses, at the paper's η", source="paper Table 1",
          measured="R@1 SEC at the paper's η − none, mean over the 4 losses per seed; paper: mean over CUB and Cars",
          estimate=_pooled("compare"), expected_sign=+1, page="compare", family="pooled, the paper's η",
          paper=lambda: reference.paper_mean_gain(), paper_size=_paper_gains(), paper_size_text=_paper_text()),
    Claim(id="C4v", claim="SEC improves R@1 on average over the losses, with η chosen on held-out classes "
                          "(the primary test)", source="paper Table 1",
          measured="R@1 SEC (η per loss chosen on held-out training classes) − none, mean over the 4 losses per seed",
          estimate=_pooled("tuned"), expected_sign=+1, page="compare", family="primary test",
          paper=lambda: reference.paper_mean_gain(), paper_size=_paper_gains(), paper_size_text=_paper_text()),
    Claim(id="C5", claim="SEC (μ = batch mean) beats L2-reg (μ = 0), with SEC at the paper's η",
          source="paper Table 1",
          measured="R@1 SEC at the paper's η − L2-reg at its held-out weight, mean over the 4 losses per seed (each "
                   "loss's L2 weight is in the claim's note); paper: mean over CUB and Cars",
          estimate=_sec_vs_l2, expected_sign=+1, page="compare", family="SEC − L2-reg",
          paper=lambda: reference.paper_mean_gain(None, "l2reg", "sec"), paper_size=_paper_gains("l2reg", "sec"),
          paper_size_text=_paper_text("SEC − L2-reg gains")),
    Claim(id="C5v", claim="SEC beats L2-reg at the arms the headline uses: SEC at the η chosen on held-out classes "
                          "against L2-reg at its held-out weight", source="paper Table 1; rebuttal Table 2 (review Q2)",
          measured="R@1 SEC (held-out η) − L2-reg (held-out weight), paired on seed within each loss, mean over the "
                   "4 losses per seed",
          estimate=_sec_vs_l2_held_out, expected_sign=+1, page="compare", family="SEC − L2-reg, held-out arms",
          paper=lambda: reference.paper_mean_gain(None, "l2reg", "sec"), paper_size=_paper_gains("l2reg", "sec"),
          paper_size_text=_paper_text("SEC − L2-reg gains"),
          added="added after the runs (not registered before them): the rebuttal's question asked of the arm the "
                "headline uses; a family of its own"),
    Claim(id="Q8b", claim="SEC helps the tuplet margin loss", source="review Q8; rebuttal Table 4",
          measured="R@1 SEC (η chosen on held-out classes) − none, tuplet margin loss; Holm over tml and CosFace, "
                   "as the page's table",
          estimate=_beyond_row("tml"), expected_sign=+1, page="compare",
          family="losses beyond the four", paper=reference.rebuttal_tml_text),
]
