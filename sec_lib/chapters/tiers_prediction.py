"""The tiers page's question "did the held-out selection predict the test classes?": per loss and η, the gain over
η = 0 that the held-out selection saw beside the gain on the test classes (:func:`selection_prediction`), and how
well the one ranked the other, pooled and within each loss (:func:`prediction_sentence`). The page API is
:mod:`sec_lib.chapters.tiers`, which re-exports these names.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats

from ..analysis.source import run_source
from ..runs import experiments as ex
from ..runs.decisive import ETA_SELECTION_STAGES
from .common import and_list, load


COLUMNS = ["loss", "eta", "heldout_gain", "heldout_seeds", "test_gain", "test_seeds", "test_runs"]


def selection_prediction(profile: str, root=None) -> pd.DataFrame:
    """Per loss and η > 0 of the η grid: the held-out gain over η = 0 that the selection saw (training classes
    held out, its seeds) beside the test gain over η = 0 on the test classes (mean of the paired differences over
    the seeds), and which runs gave the test gain (``test_runs``, :data:`TEST_SOURCES`): the η sweep, every η of
    the grid, for the losses it trains (the four main losses). The decisive tier's other losses, and its main
    losses until its η sweep is committed, take the main comparison's SEC arms, at the selected and the paper's η
    (the four main losses, tuplet margin and CosFace), and the review losses the review chapters' SEC runs, at the
    selected η. One row per cell that has both; empty where the tier lacks either."""
    try:
        p = ex.get_profile(profile)               # the decisive tier's exists once its plan is written
        src = run_source(profile, root)
        if src.seeded_selection:                  # its held-out selection is a stage: 3 seeds a point
            held = _seeded_held_out(src)
        else:
            sel = [r for r in ex.selection_runs(p, src.store, ex.MAIN_LOSSES) if r.config.mu == "batch"]
            held = pd.DataFrame([{"loss": r.config.loss, "eta": r.config.eta, "R@1": r.metrics.get("R@1", math.nan)}
                                 for r in sel if r.status == "done"], columns=["loss", "eta", "R@1"])
    except (KeyError, ValueError, ex.SelectionError):
        return pd.DataFrame(columns=COLUMNS)
    test = _test_runs(profile, root, src.seeded_selection)
    if not len(held) or test is None or not len(test):
        return pd.DataFrame(columns=COLUMNS)
    h = held.groupby(["loss", "eta"])["R@1"].mean().unstack()
    n_held = held.groupby(["loss", "eta"])["R@1"].count().unstack()
    test = test[test["status"] == "done"]
    rows = []
    for loss in (*ex.MAIN_LOSSES, *ex.EXTRA_LOSSES, *ex.REVIEW_LOSSES):
        if loss not in h.index or 0.0 not in h.columns or not np.isfinite(h.loc[loss, 0.0]):
            continue
        mine = test[test["loss"] == loss]
        source = next((s for s in TEST_SOURCES if (mine["test_runs"] == s).any()), None)
        if source is None:
            continue
        tl = mine[mine["test_runs"] == source].pivot_table(index="seed", columns="eta", values="R@1")
        for eta in [e for e in h.columns if e > 0 and e in tl.columns and 0.0 in tl.columns]:
            d = (tl[eta] - tl[0.0]).dropna()
            if not len(d) or not np.isfinite(h.loc[loss, eta]):
                continue
            rows.append({"loss": loss, "eta": float(eta), "heldout_gain": float(h.loc[loss, eta] - h.loc[loss, 0.0]),
                         "heldout_seeds": int(n_held.loc[loss, eta]), "test_gain": float(d.mean()),
                         "test_seeds": int(len(d)), "test_runs": source})
    return pd.DataFrame(rows, columns=COLUMNS)


#: Where :func:`selection_prediction`'s test gains come from, in the order a loss takes them, with what each tests.
TEST_SOURCES = {"η sweep": "every η of the grid",
                "main comparison": "SEC at the selected and at the paper's η: two cells per loss, one where they "
                                   "coincide",
                "review chapters": "SEC at the selected η: one cell per loss"}


def _test_runs(profile: str, root, seeded: bool) -> pd.DataFrame | None:
    """The runs on the test classes behind :func:`selection_prediction` (loss, seed, eta, status, R@1 and their
    source ``test_runs``; η = 0 for the runs without a regularizer): the η sweep where the tier holds it; a tier
    with a ``seeded`` selection (stages of several seeds a point) adds the main comparison's and the review chapters' runs without a regularizer and with SEC (μ the batch
    mean). None when there are none."""
    def runs_of(sweep):
        try:
            return load(sweep, profile, tables=(), root=root).runs
        except (KeyError, ValueError, ex.SelectionError):
            return None
    parts = []
    eta = runs_of("eta")
    if eta is not None:
        parts.append(eta.assign(test_runs="η sweep"))
    if seeded:
        for source, names in (("main comparison", ("main",)), ("review chapters", ("ssl", "npair", "face"))):
            for sweep in names:
                runs = runs_of(sweep)
                if runs is None:
                    continue
                keep = (runs["variant"] == "none") | ((runs["variant"] == "sec") & (runs["mu"] == "batch"))
                runs = runs[keep]
                parts.append(runs.assign(eta=runs["eta"].where(runs["variant"] == "sec", 0.0), test_runs=source))
    cols = ["loss", "seed", "eta", "status", "R@1", "test_runs"]
    return pd.concat([x[cols] for x in parts], ignore_index=True).drop_duplicates() if parts else None


def _seeded_held_out(src) -> pd.DataFrame:
    """The decisive tier's held-out SEC runs (its η selection stages,
    :data:`~sec_lib.runs.decisive.ETA_SELECTION_STAGES`), one row per finished run: loss, eta, R@1."""
    rows = [{"loss": c.loss, "eta": c.eta, "R@1": r["R@1"]}
            for c, r in src.stage_runs(ETA_SELECTION_STAGES)
            if r["status"] == "done" and c.variant in ("none", "sec") and c.mu == "batch" and not c.relative]
    return pd.DataFrame(rows, columns=["loss", "eta", "R@1"])


def _fisher(r: float, dof: int) -> tuple[float, float]:
    """The 95% interval of a correlation ``r`` by Fisher's z, its standard error 1/sqrt(``dof``)."""
    z, se = math.atanh(max(min(r, 0.999999), -0.999999)), 1 / math.sqrt(dof)
    return math.tanh(z - 1.96 * se), math.tanh(z + 1.96 * se)


def prediction_sentence(df: pd.DataFrame, profile: str) -> str:
    """How well the held-out gains ranked the test gains: Pearson and Spearman r over the (loss, η) cells
    (Pearson with a Fisher-z 95% interval), Pearson within each loss (the partial correlation given the loss, over
    the losses with more than one cell), and per loss whether the held-out choice is the test's best η."""
    d = df.dropna(subset=["heldout_gain", "test_gain"])
    if len(d) < 4:
        return f"The {profile} tier does not hold both the η selection and the η sweep, so this cannot be measured yet."
    r = float(stats.pearsonr(d["heldout_gain"], d["test_gain"])[0])
    rho = float(stats.spearmanr(d["heldout_gain"], d["test_gain"])[0])
    lo, hi = _fisher(r, len(d) - 3)
    several = [(loss, g) for loss, g in d.groupby("loss") if len(g) > 1]       # one cell: nothing to choose
    within = ""
    if len(several) > 1 and sum(len(g) for _, g in several) - len(several) - 2 > 0:
        # the comparison a selection makes is among one loss's η: the partial correlation given the loss (each
        # loss's gains centred on its own mean), its Fisher interval with one degree of freedom less per loss
        c = pd.concat([g[["heldout_gain", "test_gain"]] - g[["heldout_gain", "test_gain"]].mean() for _, g in several])
        rw = float(stats.pearsonr(c["heldout_gain"], c["test_gain"])[0])
        wlo, whi = _fisher(rw, len(c) - 3 - (len(several) - 1))
        within = (f" Within each loss, the comparison a selection makes (each loss's gains centred on its own mean, "
                  f"over the {len(c)} cells of the {len(several)} losses with more than one), r = {rw:+.2f} "
                  f"[{wlo:+.2f}, {whi:+.2f}]" + (": below the pooled r, part of which is the losses' different "
                                                  "levels." if rw < r else "."))
    same = [loss for loss, g in several
            if g.loc[g["heldout_gain"].idxmax(), "eta"] == g.loc[g["test_gain"].idxmax(), "eta"]]
    seeds, held = sorted(set(d["test_seeds"])), sorted(set(d["heldout_seeds"]))
    source = d["test_runs"] if "test_runs" in d.columns else pd.Series("η sweep", index=d.index)
    by = {s: list(dict.fromkeys(d.loc[source == s, "loss"])) for s in TEST_SOURCES if (source == s).any()}
    partial = ("" if list(by) == ["η sweep"] else
               " The test gains come from " + and_list(f"the {s} ({TEST_SOURCES[s]}) for {and_list(ls)}"
                                                       for s, ls in by.items()) + "."
               + ("" if "η sweep" in by else " The η sweep, which tests every η of the grid for the four main "
                                              "losses, is not committed yet."))
    return (f"Over the {len(d)} (loss, η) cells of the {profile} tier, the held-out gain over η = 0 (mean over "
            f"{'/'.join(map(str, held))} selection seed{'s' if held != [1] else ''} per cell) and the test gain (mean "
            f"over {'/'.join(map(str, seeds))} seeds) correlate at Pearson "
            f"r = {r:+.2f} [{lo:+.2f}, {hi:+.2f}] (Spearman {rho:+.2f}).{within} The held-out choice is also the test's best "
            f"η for {len(same)} of the {len(several)} losses with more than one cell"
            f"{' (' + ', '.join(same) + ')' if same else ''}. "
            + ("Its selection used 3 seeds per grid point, against one in the retired reference tier."
               if profile == "decisive" else "The decisive tier selects with 3 seeds per grid point for this reason.")
            + partial)
