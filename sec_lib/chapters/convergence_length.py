"""C4L on the convergence page: has the SEC − none gap stopped moving at 13,500 iterations?

A registered follow-up (:mod:`sec_lib.runs.longruns`, ``data/followups/longer-runs/README.md``) retrains the main
comparison's none, SEC and L2-reg arms at 20,250 iterations. This module joins its committed runs with their
13,500-iteration twins (the decisive tier's ``main/`` runs) into the frame :func:`sec_lib.runs.longruns.family`
reads, and words the result for the page: while the runs train, how many are committed; once all are, each
comparison's change Δ with its interval, the gap at each length and the registered verdict; the page's table,
figure and verdict bullet; and the landing page's sentence once it is complete.
"""
from __future__ import annotations

import json

import pandas as pd

from ..figures import longruns as longruns_figure
from ..figures.tables import fold_columns
from ..report import mean_ci
from ..runs import followup, longruns, tier
from ..runs.config import run_key
from ..runs.pilot import TIER
from .evidence import followup_runs_sentence

__all__ = ["COLUMNS", "applies", "absent", "twin_runs", "long_runs", "joined", "progress", "ready", "gap_intervals",
           "results", "table", "rule_text", "section", "figure", "caption", "reading", "landing_sentence",
           "landing_brief"]

#: The columns of :func:`joined`: what :func:`sec_lib.runs.longruns.family` reads, and each run's key.
COLUMNS = ["key", "loss", "arm", "seed", "length", "R@1"]
#: What each verdict word says of the gap, in plain words.
MEANING = {"stable": "the gap has stopped moving",
           "still moving": "the gap is still moving",
           "undecided": "the seeds cannot tell whether it has stopped moving"}


#: The section's opening, shown where the page shows the decisive tier (the runs C4L retrains).
INTRO = (
    "The main comparison's runs stop at 13,500 iterations, and over their last quarter the gap between SEC and no "
    "regularizer was still growing. C4L, a follow-up registered before any of its runs "
    "(`data/followups/longer-runs/README.md`, trained by `sec_lib/runs/longruns.py`), trains the runs without a "
    "regularizer, with SEC and with L2-reg again for 20,250 iterations, 1.5 times as long and otherwise unchanged, and asks "
    "how much each gap moved between the two lengths: SEC − none, its primary, and SEC − L2-reg, each a family of its "
    "own. The page's answer above, read at 13,500 iterations, stays as registered."
)


#: The compare page's pointer to the question C4L answers on the convergence page (decisive tier only).
COMPARE_POINTER = (
    "**Is the primary estimate the converged one?** The runs stop at 13,500 iterations, and the SEC − none gap still "
    "grew over their last quarter. A follow-up registered before its runs trained (C4L) retrains the none, SEC and "
    "L2-reg arms for 20,250 iterations; [the convergence page](convergence.html) owns that question and gives its "
    "verdict, in its section *Has the gap stopped moving?*"
)


def _n(x: int) -> str:
    return f"{int(x):,}"


def applies(ev) -> bool:
    """Whether the page shows C4L: only where it shows the decisive tier, whose runs C4L retrains (a quick book, or a
    real-benchmark book, has none of them)."""
    ev.frames("convergence")
    return ev.profile_of("convergence") == TIER


def absent(ev) -> str:
    """What the page says in C4L's place where :func:`applies` is False."""
    return (f"{longruns.ID} is a follow-up on the {TIER} tier's runs; this page shows the "
            f"{ev.profile_of('convergence')} tier, which has none, so it shows no part of it.")


def _frame(runs: pd.DataFrame) -> pd.DataFrame:
    """``runs`` (a committed ``runs.parquet``) in :data:`COLUMNS`: the arm read from each run's config, the length
    its iterations; ``R@1`` is the run's final test R@1 (its last evaluation), NaN for a run that did not finish."""
    cfg = [json.loads(c) for c in runs["config"]]
    r1 = runs["R@1"].astype(float).where(runs["status"] == "done") if "status" in runs.columns else runs["R@1"]
    return pd.DataFrame({"key": runs["key"].to_numpy(), "loss": [c["loss"] for c in cfg],
                         "arm": [longruns.arm_of(c) for c in cfg], "seed": [int(c["seed"]) for c in cfg],
                         "length": [int(c["iterations"]) for c in cfg], "R@1": r1.to_numpy(float)})


def twin_runs(root=None) -> pd.DataFrame:
    """The 13,500-iteration twins (:func:`sec_lib.runs.longruns.twin_configs`) as the decisive tier's ``main/`` stage
    committed them, in :data:`COLUMNS`; KeyError if one is missing."""
    want = {run_key(c) for c in longruns.twin_configs(root)}
    path = tier.tier_dir(TIER, root) / "main" / "runs.parquet"
    runs = pd.read_parquet(path)
    runs = runs[runs["key"].isin(want)]
    if len(runs) != len(want):
        raise KeyError(f"{longruns.ID}'s 13,500-iteration twins: {len(runs)} of {len(want)} are in {path}")
    return _frame(runs).reset_index(drop=True)


def long_runs(root=None) -> pd.DataFrame:
    """C4L's committed runs (:func:`sec_lib.runs.longruns.test_runs`) in :data:`COLUMNS`; KeyError (no evidence yet)
    until all of them are committed."""
    return _frame(longruns.test_runs(root))


def joined(root=None) -> pd.DataFrame:
    """C4L's runs beside their 13,500-iteration twins, one row a run (:data:`COLUMNS`): the frame
    :func:`sec_lib.runs.longruns.family` reads. KeyError until all of C4L's runs are committed."""
    out = pd.concat([twin_runs(root), long_runs(root)], ignore_index=True)
    lengths = sorted(out["length"].unique())
    if lengths != [longruns.BASE_LENGTH, longruns.LENGTH]:
        raise ValueError(f"{longruns.ID} compares runs of {longruns.BASE_LENGTH} and {longruns.LENGTH} iterations; "
                         f"got {lengths}")
    return out


def progress(root=None) -> tuple[int, int]:
    """(runs committed, runs registered) of C4L, counted in its committed ``test/runs.parquet``."""
    return followup.committed_count(longruns.folder(root) / "test" / "runs.parquet", longruns.test_configs(root))


def ready(root=None) -> bool:
    """Whether every run of C4L is committed (its verdict can be read)."""
    k, n = progress(root)
    return k == n


def gap_intervals(runs: pd.DataFrame) -> pd.DataFrame:
    """Per comparison and length, the gap (each comparison's arm − its reference, the mean over the losses per
    seed) with its 95% t-interval over the seeds: columns comparison, length, gap, lo, hi, seeds. ``runs``:
    :func:`joined`'s columns."""
    w = runs.pivot_table(index=["seed", "loss", "length"], columns="arm", values="R@1")
    rows = []
    for name, a, b in longruns.COMPARISONS:
        per_seed = (w[a] - w[b]).groupby(level=["length", "seed"]).mean()
        for length, x in per_seed.groupby(level="length"):
            m, lo, hi, n = mean_ci(x)
            rows.append({"comparison": name, "length": int(length), "gap": m, "lo": lo, "hi": hi, "seeds": n})
    return pd.DataFrame(rows)


def results(runs: pd.DataFrame | None = None, root=None) -> dict:
    """C4L's numbers on ``runs`` (:func:`joined`'s; read from the committed runs by default): ``family``
    (:func:`sec_lib.runs.longruns.family`), ``deltas`` (per seed) and ``gaps`` (:func:`gap_intervals`). KeyError
    while its runs are not all committed."""
    runs = joined(root) if runs is None else runs
    missing = [c for c in COLUMNS[1:] if c not in runs.columns]
    if missing:
        raise ValueError(f"runs lacks column(s) {missing}; it needs {COLUMNS[1:]}")
    return {"family": longruns.family(runs), "deltas": longruns.deltas(runs), "gaps": gap_intervals(runs)}


def _row(res: dict, comparison: str) -> tuple[pd.Series, dict]:
    fam = res["family"].set_index("comparison")
    names = [n for n, _, _ in longruns.COMPARISONS]
    if comparison not in fam.index:
        raise ValueError(f"comparison {comparison!r} is not one of C4L's; valid: {', '.join(names)}")
    g = res["gaps"][res["gaps"]["comparison"] == comparison].set_index("length")
    return fam.loc[comparison], {int(k): r for k, r in g.iterrows()}


def table(res: dict) -> pd.DataFrame:
    """The page's table: one row per comparison, Δ with its interval, p (t-test against 0), seeds, the detectable
    effect and the registered verdict; the gap at each length with its 95% interval folded beneath it (the frame and
    its CSV keep every column)."""
    rows = []
    for name, _, _ in longruns.COMPARISONS:
        f, g = _row(res, name)
        row = {"comparison": name}
        for length in (longruns.BASE_LENGTH, longruns.LENGTH):
            row |= {f"gap at {_n(length)}": g[length]["gap"], f"lo ({_n(length)})": g[length]["lo"],
                    f"hi ({_n(length)})": g[length]["hi"]}
        row |= {"Δ": f["delta"], "Δ lo": f["lo"], "Δ hi": f["hi"], "p": f["p"], "seeds": int(f["seeds"]),
                "mde": f["mde"], "verdict": f["verdict"]}
        rows.append(row)
    out = pd.DataFrame(rows)
    gaps = [c for c in out.columns if c.startswith(("gap at", "lo (", "hi ("))]
    # the gaps at each length fold under the Δ table, so that it fits the text column (the CSV keeps them all)
    return fold_columns(out, ["comparison"], {"the gap at each length, with its 95% interval": gaps})


def _ci(lo: float, hi: float) -> str:
    return f"95% CI [{lo:+.2f}, {hi:+.2f}]"


def _comparison_text(res: dict, name: str) -> str:
    f, g = _row(res, name)
    base, long = g[longruns.BASE_LENGTH], g[longruns.LENGTH]
    return (f"{name}, averaged over the losses per seed, is {base['gap']:+.2f} R@1 points "
            f"({_ci(base['lo'], base['hi'])}) at {_n(longruns.BASE_LENGTH)} iterations and {long['gap']:+.2f} "
            f"({_ci(long['lo'], long['hi'])}) at {_n(longruns.LENGTH)}: it changes by Δ = {f['delta']:+.2f} "
            f"({_ci(f['lo'], f['hi'])}; t-test against 0, p = {f['p']:.2g}; could detect ≥ {f['mde']:.2f}; "
            f"n = {int(f['seeds'])} seeds) → **{f['verdict']}**: {MEANING[f['verdict']]}")


def rule_text() -> str:
    """The registered verdict rule in words, with its margin."""
    m = f"{longruns.MARGIN:g}"
    return (f"*stable* if Δ's 95% interval lies inside ±{m} R@1 points, *still moving* if it excludes 0 and Δ lies "
            f"beyond ±{m}, *undecided* otherwise")


def section(root=None, res: dict | None = None) -> str:
    """The page's C4L section in words: while its runs train, how many are committed; once all are, each comparison's
    gap at both lengths, its change Δ with the 95% interval, seeds, detectable effect and registered verdict
    (``res``: :func:`results`, read from the committed runs by default)."""
    k, n = progress(root)
    if k < n:
        return (f"{longruns.ID} retrains the main comparison's runs for {_n(longruns.LENGTH)} iterations: {k} of {n} "
                "runs committed; its verdict waits for all of them.")
    res = results(root=root) if res is None else res
    first, second = (_comparison_text(res, name) for name, _, _ in longruns.COMPARISONS)
    seeds = int(res["deltas"].groupby("comparison").size().iloc[0])
    return (f"{longruns.ID} retrained the main comparison's runs without a regularizer, with SEC and with L2-reg for "
            f"{_n(longruns.LENGTH)} iterations, {longruns.LENGTH / longruns.BASE_LENGTH:g} times the tier's "
            f"{_n(longruns.BASE_LENGTH)}, and pairs each with its {_n(longruns.BASE_LENGTH)}-iteration twin by loss "
            f"and seed ({n} runs over {seeds} seeds). Its primary: {first}. Its second comparison: {second}. Each "
            f"comparison is a family of its own; the rule, registered before the runs: {rule_text()}.\n\n"
            + followup_runs_sentence(longruns.ID, [("", longruns.folder(root) / "test")], longruns.FOLDER_TEXT))


def figure(res: dict):
    """:func:`sec_lib.figures.longruns.delta_figure` of ``res`` (:func:`results`)."""
    return longruns_figure.delta_figure(res["deltas"], res["family"], margin=longruns.MARGIN,
                                        lengths=(longruns.BASE_LENGTH, longruns.LENGTH))


def caption() -> str:
    """The figure's caption (the notebook's figure metadata holds it; a test keeps the two the same)."""
    return longruns_figure.delta_caption(margin=longruns.MARGIN, lengths=(longruns.BASE_LENGTH, longruns.LENGTH))


def reading(root=None, res: dict | None = None) -> str:
    """C4L's bullet for the page's verdict: each comparison's Δ and registered verdict once all its runs are
    committed, else how many are."""
    head = f"- **Has the gap stopped moving?** ({longruns.ID}, a registered follow-up"
    k, n = progress(root)
    if k < n:
        return f"{head}): its runs are underway ({k} of {n} committed), so it has no verdict yet."
    res = results(root=root) if res is None else res
    fam = res["family"].set_index("comparison")
    parts = [f"{name}: Δ = {fam.loc[name, 'delta']:+.2f} R@1 points from {_n(longruns.BASE_LENGTH)} to "
             f"{_n(longruns.LENGTH)} iterations ({_ci(fam.loc[name, 'lo'], fam.loc[name, 'hi'])}; "
             f"n = {int(fam.loc[name, 'seeds'])} seeds) → **{fam.loc[name, 'verdict']}**"
             for name, _, _ in longruns.COMPARISONS]
    return (f"{head}; each comparison a family of its own): " + "; ".join(parts) + ". It is registered in "
            f"`{longruns.FOLDER_TEXT}README.md`.")


def landing_sentence(root=None, res: dict | None = None) -> str:
    """The landing page's sentence once C4L is complete, by its primary (SEC − none)'s registered verdict, in plain
    words and without the follow-up's id: *still moving*, that the 13,500-iteration estimate is not the converged one,
    with the 20,250-iteration gap and its interval beside it and the primary test unchanged; *stable*, that the gap had
    stopped moving, so the estimate stands; *undecided*, that the longer runs cannot tell. '' while runs are missing."""
    if res is None:
        if not ready(root):
            return ""
        res = results(root=root)
    primary = longruns.COMPARISONS[0][0]
    f, g = _row(res, primary)
    base, long = g[longruns.BASE_LENGTH], g[longruns.LENGTH]
    lead = (f"a follow-up registered before its runs trained the same comparison for {_n(longruns.LENGTH)} "
            f"iterations, where {primary} reads {long['gap']:+.2f} R@1 points ({_ci(long['lo'], long['hi'])}; "
            f"n = {int(f['seeds'])} seeds) against {base['gap']:+.2f} at {_n(longruns.BASE_LENGTH)}")
    change = f"Δ = {f['delta']:+.2f}, {_ci(f['lo'], f['hi'])}"
    if f["verdict"] == "still moving":
        return (f"The {_n(longruns.BASE_LENGTH)}-iteration estimate is not the converged one: {lead}; the primary test "
                f"stays as registered, at {_n(longruns.BASE_LENGTH)} iterations.")
    if f["verdict"] == "stable":
        return (f"The {_n(longruns.BASE_LENGTH)}-iteration estimate is the converged one: {lead}. The gap had stopped "
                f"moving ({change}, inside ±{longruns.MARGIN:g} points).")
    return (f"Whether the {_n(longruns.BASE_LENGTH)}-iteration estimate is the converged one, the longer runs "
            f"cannot tell: {lead} ({change}, neither inside ±{longruns.MARGIN:g} points nor clearly beyond).")


#: What the landing page's brief line says of its answer's estimate, by the primary's registered verdict.
BRIEF_WORDS = {"still moving": "not yet converged",
               "stable": "it had stopped moving",
               "undecided": "too uncertain to say if it has converged"}


def landing_brief(root=None, res: dict | None = None) -> str:
    """One short line under the landing page's answer once C4L is complete (its first screen holds the answer and the
    figure, so the whole sentence, :func:`landing_sentence`, sits below the figure): the primary's gap at
    20,250 iterations with its interval, and what its registered verdict says of the answer's estimate. ''
    while runs are missing."""
    if res is None:
        if not ready(root):
            return ""
        res = results(root=root)
    f, g = _row(res, longruns.COMPARISONS[0][0])
    long = g[longruns.LENGTH]
    return (f"Trained 1.5 times as long, SEC's gain reads {long['gap']:+.2f} [{long['lo']:+.2f}, {long['hi']:+.2f}]: "
            f"{BRIEF_WORDS[f['verdict']]}.")
