"""The optimizer page: the learning-rate pilot, SEC under Adam and SGD, and how balanced the
per-sample updates are."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from ..runs import decisive, sgdeta, sgdrates
from ..runs import experiments as ex
from ..runs.config import nonfinite_step
from ..report import one_family, pooled_diff, summary_table
from . import profile_param
from ..report.claims import Claim, derived_family, family_row
from .. import reference
from ..analysis.source import run_source
from .common import (and_list, beside_cv, check_cols, fixed_or_nan, load_pilot, measures_text, record_row,
                     run_step_means, verdict_row_of, with_norm_cv)
from .evidence import page_records
# SEC − none per loss and over the losses, shared with the follow-ups; their names are this page's too.
from .optim_stats import left_out, optim_diffs, optim_pooled, pooled_over  # noqa: F401
# The registered follow-ups (Q6c, Q6d) have a module of their own; their names are this page's too.
from .optim_followups import (FOLLOWUPS, SGD_ETA, followup_absent, followup_evidence,  # noqa: F401
                              followup_evidence_sentence, followup_family, followup_or_note, followup_reading,
                              followup_readings, followups_apply, q6c_rates_sentence, q6c_selection_curves,
                              q6d_eta_sentence, q6d_selection_curves, sgd_answer, sgd_reading)

#: The notebook's parameters (checked by ``sec_lib.params.notebook_params``).
PARAMS = profile_param()


def pilot_table(pilot_runs: pd.DataFrame) -> pd.DataFrame:
    """The learning-rate pilot (semihard on held-out training classes, one seed no reported run uses):
    optimizer, arm (no SEC, or SGD with SEC at the paper's η), lr, held-out R@1, status and whether
    it was chosen, by the rule of ``experiments.chosen_lr`` (best R@1 per optimizer and arm; ties
    and failed runs: the smaller rate; a failed run counts as -inf); ``seeds`` (1) and ``failed`` (0 or 1) as in
    :func:`rate_selection`."""
    check_cols(pilot_runs, ["optimizer", "lr", "status", "eta"], "pilot runs")
    df = pilot_runs.copy()
    if "R@1" not in df.columns:
        df["R@1"] = np.nan
    df["arm"] = np.where(df["eta"] > 0, "sec", "none")
    score = np.where(df["status"] == "done", pd.to_numeric(df["R@1"], errors="coerce").fillna(-np.inf), -np.inf)
    df["_score"] = score
    chosen = set()
    for _, sub in df.groupby(["optimizer", "arm"], sort=False):
        best = max(zip(sub["_score"], -sub["lr"], sub.index))
        chosen.add(best[2])
    df["chosen"] = [i in chosen for i in df.index]
    df["seeds"], df["failed"] = 1, (df["status"] != "done").astype(int)
    return df[["optimizer", "arm", "eta", "lr", "R@1", "status", "chosen", "seeds", "failed"]].reset_index(drop=True)


def rate_selection(profile, root=None) -> pd.DataFrame:
    """How the chapter's learning rates were chosen, in :func:`pilot_table`'s columns: the learning-rate pilot of
    ``profile``; for the decisive tier, its held-out selection of SGD's rates without and with SEC (the
    ``sgd-selection`` stage: each rate's R@1 the mean over its ``seeds``, of which ``failed`` failed, ``chosen`` the
    rate its profile fixed; Adam's rate is the tier's fixed 3e-3)."""
    p = ex.get_profile(profile) if isinstance(profile, str) else profile
    src = run_source(p.name, root)
    if not src.seeded_selection:
        return pilot_table(load_pilot(p, root).runs)

    def rate(c):
        return (("optimizer", c.optimizer), ("arm", "sec" if c.eta > 0 else "none"), ("eta", c.eta), ("lr", c.lr)) \
            if c.optimizer == "sgd" else None
    out = src.selection(("sgd-selection",), rate)
    cols = ["optimizer", "arm", "eta", "lr", "R@1", "status", "chosen", "seeds", "failed"]
    if not len(out):
        return pd.DataFrame(columns=cols)
    out = out.rename(columns={"held-out R@1": "R@1"})
    out["chosen"] = [bool(lr == fixed_or_nan(p, "lr", "sgd+sec" if a == "sec" else "sgd"))
                     for a, lr in zip(out["arm"], out["lr"])]
    return out[cols]


def optim_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Per optimizer × loss × variant: R@1, NMI, train norm variance with its CV (std / mean, scale-free;
    :func:`~sec_lib.chapters.common.with_norm_cv`) beside it, and the learning rate used."""
    cv = with_norm_cv(runs)
    t = summary_table(cv, ["optimizer", "loss", "variant"], beside_cv(["R@1", "NMI", "train_norm_var"], cv.columns))
    lr = runs.groupby(["optimizer", "loss", "variant"], sort=False)["lr"].first().reset_index()
    return t.merge(lr, on=["optimizer", "loss", "variant"], how="left")


def failed_arms(runs: pd.DataFrame) -> pd.DataFrame:
    """Per optimizer × loss × variant with a failed run: ``failed`` of ``runs``, the ``lr`` and ``eta`` it used and
    the ``steps`` at which its runs stopped (read from their errors: 'non-finite loss at step N')."""
    check_cols(runs, ["optimizer", "loss", "variant", "status", "lr", "eta"], "runs")
    cols = ["optimizer", "loss", "variant", "failed", "runs", "lr", "eta", "steps"]
    rows = []
    for (opt, loss, var), sub in runs.groupby(["optimizer", "loss", "variant"], sort=False):
        bad = sub[sub["status"].astype(str) != "done"]
        if not len(bad):
            continue
        errors = bad["error"] if "error" in bad.columns else pd.Series(None, index=bad.index)
        steps = sorted(s for s in map(nonfinite_step, errors) if s is not None)
        rows.append({"optimizer": opt, "loss": loss, "variant": var, "failed": len(bad), "runs": len(sub),
                     "lr": float(bad["lr"].iloc[0]), "eta": float(bad["eta"].iloc[0]), "steps": steps})
    return pd.DataFrame(rows, columns=cols)


def failures_sentence(runs: pd.DataFrame) -> str:
    """Which arms of the chapter failed, at which setting and when, and what that does to the page's comparisons
    (from :func:`failed_arms`)."""
    f = failed_arms(runs)
    if not len(f):
        return "Every run of the chapter trained to its end."
    parts = []
    for r in f.to_dict("records"):
        arm = "with SEC" if r["variant"] == "sec" else f"({r['variant']})"
        steps = r["steps"]
        when = ("" if not steps else f" at step {steps[0]}" if len(steps) == 1
                else f" between steps {steps[0]} and {steps[-1]}")
        parts.append(f"{r['optimizer']}, {r['loss']} {arm} (lr {r['lr']:g}, η {r['eta']:g}): {r['failed']} of "
                     f"{r['runs']} runs stopped with a non-finite loss{when}")
    return ("Runs that failed: " + "; ".join(parts) + ". A failed run has no R@1; a loss with one is left out of its "
            "optimizer's averages over the losses (the `left out` columns), so that every seed averages the same "
            "losses, and its own row keeps only the seeds where both arms trained.")


BALANCE_COLS = ("dtheta_cv", "grad_norm_cv", "dtheta_mean")


def balance_means(runs: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """The runs that trained to their end, each with its mean over training of :data:`BALANCE_COLS` (the dots of
    the balance figure): a diverged run's statistics until it stopped describe no trained model."""
    done = runs[runs["status"].astype(str) == "done"] if "status" in runs.columns else runs
    return run_step_means(done, steps, list(BALANCE_COLS))


def balance_table(runs: pd.DataFrame, steps: pd.DataFrame, by: Sequence[str] = ("optimizer", "variant")) -> pd.DataFrame:
    """Spread of the per-sample updates: mean over training of dtheta_cv (CV of the angle each sample
    turned in a step), grad_norm_cv (CV of ‖∂L/∂f_i‖ in the batch) and dtheta_mean, per group (failed runs
    counted, not averaged)."""
    r = run_step_means(runs, steps, list(BALANCE_COLS))
    return summary_table(r, list(by), list(BALANCE_COLS), digits=3)


def balance_diffs(runs: pd.DataFrame, steps: pd.DataFrame, by: Sequence[str] = ("optimizer",)) -> pd.DataFrame:
    """Pooled (over losses) paired SEC − none of dtheta_cv and grad_norm_cv per group, verdict for
    "SEC balances the updates" (expected sign −1)."""
    r = run_step_means(runs, steps, list(BALANCE_COLS))
    rows = []
    groups = r.groupby(list(by), sort=False) if by else [((), r)]
    for key, sub in groups:
        key = key if isinstance(key, tuple) else (key,)
        for col in ("dtheta_cv", "grad_norm_cv"):
            e = pooled_diff(sub, "variant", "none", "sec", col)
            rows.append({**dict(zip(by, key)), "metric": col, **verdict_row_of(e, -1),
                         "n_losses": e.get("n_groups", 0), "left out": left_out(e)})
    return one_family(pd.DataFrame(rows))[0] if rows else pd.DataFrame(rows)


#: The Holm family of the optimizer page (see :func:`optim_family`).
FAMILY = "optim page"


def optim_family(runs: pd.DataFrame, steps: pd.DataFrame | None = None, metric: str = "R@1") -> dict:
    """Every verdict of the optimizer page as ONE Holm family: SEC − none per optimizer × loss
    (:func:`optim_diffs`), per optimizer averaged over the losses (:func:`optim_pooled`) and, given
    ``steps``, the balance of the per-sample updates (:func:`balance_diffs`). Returns ``{"diffs",
    "pooled", "balance"}`` (``balance`` empty without steps), every row with ``p_adj`` and ``m`` of the
    whole family, ``mde``, n and ``n_counts``."""
    diffs, pooled = optim_diffs(runs, metric), optim_pooled(runs, metric)
    balance = balance_diffs(runs, steps) if steps is not None else pd.DataFrame()
    tables = [t for t in (diffs, pooled, balance) if len(t)]
    adjusted = iter(one_family(*tables, family=FAMILY))
    diffs, pooled, balance = (next(adjusted) if len(t) else t for t in (diffs, pooled, balance))
    return {"diffs": diffs, "pooled": pooled, "balance": balance}


def rates_sentence(runs: pd.DataFrame, pilot: pd.DataFrame) -> str:
    """'Rates used: adam 0.003, sgd 0.1, sgd + SEC 0.03 (chosen on held-out classes: ...).' from the chapter's
    runs and :func:`pilot_table` (whose ``chosen`` column applies the rule of ``experiments.chosen_lr``)."""
    def label(opt, arm):
        return f"{opt} + SEC" if arm == "sec" and opt != "adam" else opt
    r = runs.assign(arm=np.where((runs["eta"] > 0) & (runs["optimizer"] != "adam"), "sec", "none"))
    used = r.groupby(["optimizer", "arm"])["lr"].first()
    chosen = pilot[pilot["chosen"]].set_index(["optimizer", "arm"])["lr"]
    return ("Rates used: " + ", ".join(f"{label(o, a)} {lr:g}" for (o, a), lr in used.items())
            + " (chosen on held-out classes: " + ", ".join(f"{label(o, a)} {chosen[(o, a)]:g}" for (o, a) in used.index
                                                   if (o, a) in chosen.index) + ").")


def _failures(rows: pd.DataFrame) -> str:
    """How many runs failed at the rates of ``rows`` (each with a failed run; ``failed`` of ``seeds``): 'all k
    seeds at each' when every run failed, 'its one run' for a one-seed pilot, else each rate's 'k of n failed'."""
    seeds, failed = rows["seeds"].astype(int), rows["failed"].astype(int)
    if (seeds == 1).all():
        return "its one run at each" if len(rows) > 1 else "its one run"
    if (failed == seeds).all():
        n = sorted(set(seeds))
        return f"all {n[0]} seeds at each" if len(n) == 1 and len(rows) > 1 else \
            f"all {n[0]} seeds" if len(n) == 1 else "every seed"
    return "; ".join(f"{f} of {n} failed" for f, n in zip(failed, seeds))


def selection_sentence(pilot: pd.DataFrame) -> str:
    """What the rate selection (:func:`rate_selection` or :func:`pilot_table`) found, computed from its rows: per
    optimizer and arm the chosen rate and whether it is interior to the rates that trained, and the rates at which
    one arm failed while the other trained at the same rate (SEC at the paper's η can narrow SGD's stable range)."""
    check_cols(pilot, ["optimizer", "arm", "lr", "seeds", "failed", "chosen"], "the rate selection")
    if not len(pilot):
        return "No rate-selection runs."

    def label(opt, arm):
        return f"{opt} with SEC" if arm == "sec" else f"{opt} without SEC"

    def rates(values):
        return and_list(f"{x:g}" for x in sorted(values))
    done = pilot["failed"] == 0
    parts, broke = [], []
    for (opt, arm), sub in pilot.groupby(["optimizer", "arm"], sort=False):
        ok, chosen = sub[done[sub.index]], sub[sub["chosen"]]
        if not len(chosen):
            continue
        lr = float(chosen["lr"].iloc[0])
        grid = sorted(sub["lr"])
        where = ("the smallest rate of its grid" if lr == grid[0] else "the largest rate of its grid" if lr == grid[-1]
                 else "the largest rate at which every run trained" if len(ok) and lr == ok["lr"].max()
                 else "inside its grid")
        parts.append(f"{label(opt, arm)} chose lr {lr:g} ({where})")
        failed = sub[~done[sub.index]]
        if len(failed):
            others = pilot[(pilot["optimizer"] == opt) & (pilot["arm"] != arm)]
            trained = set(others.loc[done[others.index], "lr"])
            alone = [x for x in failed["lr"] if x in trained]
            what = f"failed at lr {rates(failed['lr'])} ({_failures(failed)})"
            if alone:
                what += (f", where {label(opt, 'none' if arm == 'sec' else 'sec')} trained"
                         + (f": SEC at the paper's η narrows {opt}'s stable range" if arm == "sec" else ""))
            broke.append(f"{label(opt, arm)} {what}.")
    return ("; ".join(parts) + "." + (" " + " ".join(broke) if broke else "")).strip()


def eta_sentence(runs: pd.DataFrame, pilot: pd.DataFrame) -> str:
    """Which η SGD's SEC arm used per loss against the η its rate was chosen at (:func:`rate_selection`'s ``eta``
    of the chosen SEC row): a loss at another η tests a rate that was not chosen for it. Empty without an SGD SEC
    arm."""
    check_cols(pilot, ["optimizer", "arm", "eta", "chosen"], "the rate selection")
    chosen = pilot[(pilot["optimizer"] == "sgd") & (pilot["arm"] == "sec") & pilot["chosen"]]
    sec = runs[(runs["optimizer"] == "sgd") & (runs["variant"] == "sec")]
    if not len(chosen) or not len(sec):
        return ""
    at = float(chosen["eta"].iloc[0])
    used = sec.groupby("loss", sort=False)["eta"].first()
    other = used[~np.isclose(used.to_numpy(float), at)]
    if not len(other):
        return f"SGD's SEC arm uses η {at:g} for every loss, the η its rate was chosen at."
    by_eta = {e: [lo for lo, v in other.items() if v == e] for e in dict.fromkeys(other)}

    def times(r):
        return {2.0: "twice", 0.5: "half"}.get(r, f"{r:g} times")
    return (f"SGD's SEC arm chose its rate with semihard at η {at:g}; "
            + "; ".join(f"{and_list(ls)} use{'s' if len(ls) == 1 else ''} η {e:g}, {times(e / at)} that"
                        for e, ls in by_eta.items())
            + ". Under SGD, SEC's step on the parameters scales with lr·η, so those rows test a rate chosen at "
            + ("another η." if len(by_eta) > 1 else f"{'a smaller' if next(iter(by_eta)) > at else 'a larger'} η."))


def page_reading(family: dict, c4=None, followups: dict | None = None, sgd: str = "") -> str:
    """The page's closing bullets from its one Holm family (:func:`optim_family`): SEC's gain per
    optimizer averaged over the losses, how balanced the updates are, and the answer for Adam; each with
    interval, adjusted p, detectable effect, n and verdict. ``c4``: :func:`c4_record`, whose record replaces
    Adam's R@1 row (the same runs: one verdict in the book). ``followups``: {id: :func:`followup_reading`}, the
    registered follow-ups' bullets (:data:`FOLLOWUPS`), each decided in a registered family of its own. ``sgd``:
    :func:`sgd_answer`, the answer for SGD, after Adam's."""
    if not isinstance(family, dict) or not {"pooled", "balance"} <= set(family):
        raise ValueError("family must be the dict of optim_family(runs, steps) (keys diffs, pooled, balance), "
                         f"got {type(family).__name__}")
    pooled, balance = family["pooled"], family["balance"]
    lines = []
    for r in pooled.to_dict("records"):
        note = pooled_over(r)
        if r["optimizer"] == "adam" and c4 is not None:
            lines.append(f"- **adam**, decided on the {c4.page} page as claim {c4.id} (the same runs; Holm family: "
                         f"{c4.family}): SEC − none = {measures_text(record_row(c4), 2, 'R@1 points', note, 't-test against 0')}"
                         f" → *SEC helps under adam*: **{c4.verdict}**.")
            continue
        lines.append(f"- **{r['optimizer']}**: SEC − none = "
                     f"{measures_text(r, 2, 'R@1 points', note, 't-test against 0')} → *SEC helps under "
                     f"{r['optimizer']}*: **{r['verdict']}**.")
    followups = {k: v for k, v in (followups or {}).items() if v}
    lines += list(followups.values())
    for r in balance.to_dict("records"):
        note = pooled_over(r)
        lines.append(f"- **{r['optimizer']}**, {r['metric']}: SEC − none = "
                     f"{measures_text(r, 3, '', note, 't-test against 0')} → *SEC makes the updates more "
                     f"balanced*: **{r['verdict']}**.")
    adam = pooled[pooled.optimizer == "adam"] if len(pooled) else pooled
    if len(adam):
        a = adam.iloc[0]
        v, est = (c4.verdict, c4.estimate) if c4 is not None else (a.verdict, a.estimate)
        lines.append(f"\nSo, *does the norm imbalance still hurt under Adam?* Measured as the gain from removing it "
                     f"with SEC: **{v}** ({est:+.2f} points).")
    if sgd:
        lines.append(f"\n{sgd}")
    m = next((int(t["m"].iloc[0]) for t in (pooled, balance) if len(t)), 0)
    if followups:
        lines.append(f"\nEach registered follow-up ({and_list(followups)}) is decided in a Holm family of its own ("
                     + "; ".join(FOLLOWUPS[i][0].FAMILY for i in followups) + ")")
        lines[-1] += (f"; every other verdict on this page comes from one Holm family of {m} comparisons"
                      + (" (Adam's R@1 row among them, as declared)." if c4 is not None and len(adam) else "."))
        return "\n".join(lines)
    lines.append(f"\nEvery other verdict on this page, in the tables above and here, comes from one Holm family of {m} "
                 "comparisons (Adam's R@1 row among them, as declared)." if c4 is not None and len(adam) else
                 f"\nEvery verdict on this page, in the tables above and here, comes from one Holm family of {m} "
                 "comparisons.")
    return "\n".join(lines)


# ------------------------------------------------------------------------------ the claims this page decides

#: :func:`optim_family` on the page's evidence, exactly as the page computes it.
page_family = derived_family(__name__, "optim_family", lambda ev: optim_family(ev.runs("optim"), ev.table("optim", "steps")))


def _row(table: str, optimizer: str, metric: str):
    return family_row(lambda ev: page_family(ev)[table], optimizer=optimizer, metric=metric)


def c4_record(ev):
    """Claim C4's record as the compare page decides it, on the tier this page shows (``ev``): SEC − none under Adam,
    averaged over the losses, is the main comparison at the paper's η, C4's runs. Q6a and this page's Adam R@1 row
    carry its verdict, so that those runs have one verdict in the book; this page's family still holds the row (as
    declared), so the other rows' adjustment is unchanged."""
    return next(r for r in page_records("compare", ev) if r.id == "C4")


def _as_c4(ev) -> dict:
    """Q6a's estimate: :func:`c4_record` (KeyError, so no evidence, where C4 has none)."""
    rec = c4_record(ev)
    if not rec.has_estimate:
        raise KeyError(rec.note or "claim C4 has no evidence on this tier")
    return {**{k: getattr(rec, k) for k in ("estimate", "ci_lo", "ci_hi", "n", "p_value", "p_adj", "m", "mde",
                                            "verdict")},
            "note": f"decided as claim C4 on the compare page (family: {rec.family}), on the same runs"}


CLAIMS = [
    Claim(id="C2", claim="SEC makes the per-sample updates more balanced", source="paper Sec. 3.2",
          measured="CV of the per-sample angle turned in a step (dtheta_cv, mean over training), SEC − none, mean "
                   "over the losses per seed, under Adam", unit="CV", expected_sign=-1, page="optim",
          estimate=_row("balance", "adam", "dtheta_cv")),
    Claim(id="Q6a", claim="The norm imbalance still hurts under Adam (SEC helps)",
          source="review Q6 (Reviewer 5, meta-review)",
          measured="R@1 SEC − none under Adam (the main comparison's rate: the quick tier's pilot choice, the decisive "
                   f"tier's registered {decisive.LR:g}), mean over the losses per seed; decided as C4, on the same runs; paper: "
                   "Table 1 (Adam), mean",
          expected_sign=+1, page="optim", estimate=_as_c4, family="compare page, as C4 (pooled, the paper's η)",
          paper=lambda: reference.paper_mean_gain(), same_runs_as="C4"),
    Claim(id="Q6b", claim="SEC helps under SGD", source="review Q6 (not run in the paper)",
          measured="R@1 SEC − none under SGD (each arm's lr chosen on held-out classes with semihard, SEC at the "
                   "paper's η), mean over the losses per seed where every run trained",
          expected_sign=+1, page="optim", estimate=_row("pooled", "sgd", "R@1")),
    Claim(id="Q6c", claim="SEC helps under SGD when each loss and arm has its own held-out rate",
          source="review Q6; a registered follow-up to Q6b (data/followups/sgd-rates)",
          measured="R@1 SEC − none under SGD, each loss's and arm's lr chosen on held-out classes by the tier's rule, "
                   "SEC at the paper's η (Q6b's runs, the rate changed), mean over the losses per seed where every "
                   "run trained",
          expected_sign=+1, page="optim", family=sgdrates.FAMILY,
          estimate=family_row(lambda ev: followup_evidence(ev, "Q6c")["pooled"], optimizer="sgd", metric="R@1")),
    Claim(id="Q6d", claim="SEC helps under SGD at an η chosen for SGD",
          source="review Q6; a registered follow-up to Q6c (data/followups/sgd-eta)",
          measured="R@1 SEC − none under SGD, both arms at the loss's held-out rate without SEC, SEC at the η chosen "
                   "on held-out classes at that rate, mean over the losses per seed where every run trained",
          expected_sign=+1, page="optim", family=sgdeta.FAMILY,
          estimate=family_row(lambda ev: followup_evidence(ev, "Q6d")["pooled"], optimizer="sgd", metric="R@1")),
]
