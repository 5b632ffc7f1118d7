"""The compare page's section on C4W, a registered follow-up (:mod:`sec_lib.runs.weightdecay`,
``data/followups/weight-decay/README.md``): does SEC add anything to a baseline trained with the authors' weight decay?

What the page shows depends on how far the follow-up is:

- on a tier other than the decisive one (whose runs it retrains): one line, :func:`absent_line`;
- while its runs train: how many selection and test runs are committed, :func:`status_sentence`;
- once ``choices.json`` is written: the weights chosen on held-out classes, :func:`selection_table` and
  :func:`selection_sentence`;
- once every test run is committed: its two registered families (the pooled (SEC + WD) − (none + WD) row alone; the
  four per-loss rows, Holm), :func:`families_table` and :func:`families_sentence`; outside them, descriptive, the
  pooled (none + WD) − none and (SEC + WD) − SEC against the main comparison's runs without weight decay,
  :func:`descriptive_sentence`; the figure's rows, :func:`figure_rows`; the verdict's bullet, :func:`verdict_bullet`.

Every number is computed from the committed runs; nothing here is a page module's (the page imports this one)."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd

from .. import reference
from ..report import VERDICTS, paired_diff, pooled_diff, refine
from ..report.claims import Claim, from_row
from ..runs import followup, regimeseeds, selection, tier
from ..runs import weightdecay as wd
from ..runs.pilot import TIER
from .common import and_list, ci_text, loss_noun, measures_text, n_text
from .evidence import followup_runs_sentence
from .gains import sized_verdicts

#: The descriptive comparisons outside the families: (name, arm, against).
DESCRIPTIVE = (("(none + WD) − none", "none + WD", "none"), ("(SEC + WD) − SEC", "sec + WD", "sec"))
#: How the figure names its pooled row.
POOLED = "pooled (mean of the 4 losses)"
README = "/".join(wd.FOLDER) + "/README.md"


#: The section's opening, shown where the page shows the decisive tier (the runs C4W retrains).
INTRO = (
    "Every run above trains without weight decay. The authors' code trains with Adam's weight decay on every parameter "
    "but the BatchNorm layers' (`sec_lib.runs.benchmark_settings` cites their `config.py`). On glyphs every regularizer gains "
    "about the same over none, so the primary test may only say that a network trained without weight decay gains from "
    "any regularizer. **Does SEC add anything to a baseline that already has the authors' weight decay?** "
    " "
    "A follow-up was registered before any of its runs (`data/followups/weight-decay/README.md`, trained by "
    "`sec_lib/runs/weightdecay.py`). For each of the four losses a weight decay is chosen on held-out training classes "
    "(none is a point of the grid), then SEC's η under that weight decay, both by the tier's rule; then the main "
    "comparison's runs without a regularizer and with SEC train again at those weights on the test classes, at the main comparison's seeds. "
    "Its question, (SEC + WD) − (none + WD) in R@1 pooled over the four losses per seed, is a family of its own; the four "
    "losses, one by one, are a Holm family. Beside them, outside the families and descriptive only, the same runs set "
    "against the runs above: what weight decay alone changes, (none + WD) − none, and what it changes for SEC, "
    "(SEC + WD) − SEC. The verdicts above stay as they are: this follow-up asks its own question."
)


def applies(tier: str) -> bool:
    """Whether the page shows C4W: only where it shows the decisive tier, whose runs C4W retrains."""
    return tier == TIER


def absent_line(tier: str) -> str:
    """The one line the page says about C4W on another tier."""
    return (f"{wd.ID}, a registered follow-up, retrains the {TIER} tier's runs with weight decay; this page shows the "
            f"{tier} tier, so it shows none of it.")


def planned_selection_runs() -> int:
    """The held-out runs of both selections if no grid grows at an edge: per loss the nonzero weight-decay grid and
    SEC's three η, each at every selection seed (the point 0 of selection 1 is the tier's own runs)."""
    return len(wd.LOSSES) * (len(wd.WD_GRID) + 3) * len(selection.SEEDS)


def planned_test_runs() -> int:
    """The test runs: none + WD and SEC + WD, the four losses, every test seed."""
    return len(wd.SEEDS) * 2 * len(wd.LOSSES)


def tier_selection_keys(root=None) -> set:
    """The keys of the decisive tier's held-out selection runs: C4W's selection export copies its η = 0 ones (the
    point 0), which are the tier's runs, not the follow-up's own."""
    path = tier.tier_dir(TIER, root) / "selection" / "runs.parquet"
    return set(pd.read_parquet(path, columns=["key"])["key"]) if path.exists() else set()


def own_selection_runs(root=None) -> tuple[int, int]:
    """C4W's own held-out selection runs committed, and how many of them are at points an edge rule added (a weight
    decay outside :data:`~sec_lib.runs.weightdecay.WD_GRID`, an η outside the loss's first grid
    :func:`~sec_lib.runs.weightdecay.eta_grid`). Its export also holds the tier's η = 0 held-out runs, the point 0 of
    selection 1, which the decisive tier trained and the plan does not count."""
    path = wd.folder(root) / "selection" / "runs.parquet"
    if not path.exists():
        return 0, 0
    runs = pd.read_parquet(path)
    own = runs[~runs["key"].isin(tier_selection_keys(root))]
    plan, grown = followup.tier_plan(), 0
    for loss, eta, cfg in zip(own["loss"], own["eta"], own["config"]):
        if eta == 0:
            grown += float(json.loads(cfg)["weight_decay"]) not in wd.WD_GRID
        else:
            grown += float(eta) not in wd.eta_grid(plan.eta[loss])
    return len(own), grown


def status_sentence(root=None) -> str:
    """Where C4W stands, in one plain sentence: its question, its own selection runs (and those at points an edge rule
    added) and its test runs committed, and that its verdict waits for every test run."""
    (sel, grown), test = own_selection_runs(root), len(wd.stage_runs("test", root))
    if wd.read_choices(root):
        chosen = "its weights are chosen, below"
    else:
        added = (f"{grown} of them at points the rule added where a grid grew at its edge; " if grown else "")
        chosen = f"{added}the plan is {planned_selection_runs()} if no grid grows"
    state = "is underway" if sel + test else "is registered; its runs have not started"
    return (f"**{wd.ID} {state}.** It asks: {wd.QUESTION} So far {sel} held-out selection runs are committed "
            f"({chosen}) and {test} of its {planned_test_runs()} test runs; its verdict waits for all "
            f"{planned_test_runs()} test runs (registered in `{README}`).")


# ------------------------------------------------------------------------------ the selection

def _score(scores: dict, weight: float) -> float:
    """A choice's held-out R@1 at ``weight`` (``choices.json`` keys weights as ``f"{w:g}"``; NaN where absent or
    diverged)."""
    v = scores.get(f"{weight:g}")
    return float(v) if v is not None else np.nan


def _flag_text(flag: str) -> str:
    """A flag of ``choices.json`` as the table shows it: 'weight decay: weight decay not selected ...' (the selection's
    name before a flag that names it again) without the repeated name."""
    head, sep, rest = flag.partition(": ")
    return rest if sep and rest.startswith(head) else flag


def selection_table(choices: dict | None = None, root=None) -> pd.DataFrame:
    """One row per loss from ``choices.json`` (default: the committed one): the weight decay chosen and tested, the
    mean held-out R@1 without weight decay and at the tested weight, SEC's η chosen and tested under it, and the
    selection's flags. Empty (with its columns) while the choices are not written."""
    choices = wd.read_choices(root) if choices is None else choices
    cols = ["loss", "weight decay chosen", "weight decay tested", "held-out R@1, no weight decay",
            "held-out R@1, tested weight decay", "η chosen", "η tested", "flags"]
    unknown = sorted(set(choices) - set(wd.LOSSES))
    if unknown:
        raise ValueError(f"choices name losses {unknown} that {wd.ID} does not select; valid values: "
                         f"{', '.join(wd.LOSSES)}")
    rows = []
    for loss in wd.LOSSES:
        if loss not in choices:
            continue
        c = choices[loss]
        s = c.get("scores", {}).get("weight_decay", {})
        rows.append({"loss": loss, "weight decay chosen": c["weight_decay"],
                     "weight decay tested": c["weight_decay_tested"],
                     "held-out R@1, no weight decay": _score(s, 0.0),
                     "held-out R@1, tested weight decay": _score(s, c["weight_decay_tested"]),
                     "η chosen": c["eta"], "η tested": c["eta_tested"],
                     "flags": "; ".join(_flag_text(f) for f in c.get("flags", [])) or "—"})
    return pd.DataFrame(rows, columns=cols)


def selection_sentence(table: pd.DataFrame) -> str:
    """What the held-out selection chose (:func:`selection_table`), loss by loss, in words: each weight decay and η,
    and where no weight decay (or no SEC) scored best, which weight is tested instead."""
    if not len(table):
        return f"{wd.ID}'s held-out selection is not final yet."
    parts = []
    for r in table.itertuples(index=False):
        d = dict(zip(table.columns, r))
        if d["weight decay chosen"] == 0:
            w = (f"no weight decay scored best, so its least harmful weight, {d['weight decay tested']:g}, is "
                 "tested (flagged)")
        else:
            w = f"weight decay {d['weight decay tested']:g}"
        if d["η chosen"] == 0:
            e = f"under it SEC was not selected; its best η, {d['η tested']:g}, is tested (flagged)"
        else:
            e = f"SEC's η {d['η tested']:g} under it"
        parts.append(f"{loss_noun(d['loss'])}: {w}; {e}")
    return "Chosen on held-out training classes, by the tier's rule: " + "; ".join(parts) + "."


# ------------------------------------------------------------------------------ the test and its families

def arm_of(cfg: dict) -> str:
    """A C4W test run's arm (its config, a dict): 'none + WD' or 'sec + WD'. ValueError for a run without weight
    decay (not one of C4W's)."""
    if not cfg.get("weight_decay"):
        raise ValueError(f"a {wd.ID} test run trains with weight decay; this one has weight_decay = "
                         f"{cfg.get('weight_decay')!r}")
    return "sec + WD" if cfg.get("eta") else "none + WD"


def wd_frame(runs: pd.DataFrame) -> pd.DataFrame:
    """C4W's committed test runs (:func:`sec_lib.runs.weightdecay.test_runs`) with their ``arm``, ``loss`` and the
    ``weight_decay`` and ``eta`` each trained with (read from its config)."""
    cfg = [json.loads(c) for c in runs["config"]]
    return runs.assign(arm=[arm_of(c) for c in cfg], loss=[c["loss"] for c in cfg],
                       weight_decay=[float(c["weight_decay"]) for c in cfg], eta=[float(c["eta"]) for c in cfg])


def main_frame(root=None) -> pd.DataFrame:
    """The main comparison's runs without weight decay that C4W's descriptive rows pair with: the decisive ``main``
    stage's none and SEC (at the held-out η, the primary test's arm) runs of the four losses."""
    runs = regimeseeds.committed("main", root)
    return runs[runs["loss"].isin(wd.LOSSES)].assign(weight_decay=0.0).reset_index(drop=True)


def results(wd_runs: pd.DataFrame, main_runs: pd.DataFrame) -> dict:
    """Everything the section shows once C4W is complete, from its test runs ``wd_runs`` (:func:`wd_frame`) and the
    main comparison's ``main_runs`` (:func:`main_frame`; columns arm 'none' / 'sec', loss, seed, R@1):

    - ``pooled``, ``per``: the registered families (:func:`sec_lib.runs.weightdecay.families`);
    - ``descriptive``: (none + WD) − none and (SEC + WD) − SEC pooled per seed over the four losses, with 95% intervals,
      outside the families (no verdict);
    - ``main_per``, ``main_pooled``: SEC − none without weight decay per loss and pooled, for the figure beside C4W's.
    """
    for name, frame, arms in (("wd_runs", wd_runs, ("none + WD", "sec + WD")), ("main_runs", main_runs, ("none", "sec"))):
        missing = [c for c in ("arm", "loss", "seed", "R@1") if c not in frame.columns]
        if missing:
            raise ValueError(f"{name} lacks the columns {missing}; it needs arm, loss, seed and R@1")
        bad = sorted(set(frame["arm"]) - set(arms))
        if bad:
            raise ValueError(f"{name} has arms {bad}; valid values: {', '.join(arms)}")
    fam = sized(*wd.families(wd_runs.assign(arm=wd_runs["arm"].map({"none + WD": "none", "sec + WD": "sec"}))))
    both = pd.concat([wd_runs, main_runs], ignore_index=True)
    desc = pd.DataFrame([{"comparison": name, **{k: v for k, v in pooled_diff(both, "arm", a, b, "R@1").items()
                                                 if k in ("estimate", "ci_lo", "ci_hi", "n", "excluded")}}
                         for name, b, a in DESCRIPTIVE])
    main_pooled = pooled_diff(main_runs, "arm", "none", "sec", "R@1")
    return {"pooled": fam[0], "per": fam[1], "descriptive": desc,
            "main_per": paired_diff(main_runs, ["loss"], "arm", "none", "sec", metrics=["R@1"]),
            "main_pooled": main_pooled,
            "eta": wd_runs[wd_runs["arm"] == "sec + WD"].groupby("loss")["eta"].first().to_dict(),
            "weight_decay": wd_runs.groupby("loss")["weight_decay"].first().to_dict(),
            "main_eta": main_runs[main_runs["arm"] == "sec"].groupby("loss")["eta"].first().to_dict()}


def paper_gains() -> list | None:
    """The paper's Table 1 gains of SEC over none that the pooled row is sized against: every main loss's on its four
    datasets (as claim C4's); None where the reference is absent. Each loss's row is sized as every per-loss row of
    the book is (:func:`sec_lib.chapters.gains.sized_verdicts`)."""
    try:
        return reference.paper_gain_values("none", "sec") or None
    except (FileNotFoundError, KeyError):
        return None


def sized(pooled: pd.DataFrame, per: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The registered families' verdicts sized against the paper's gains, as the registration says ("the paper's
    sizes are the book's") and as the scorecard sizes C4 and C4a-d: a *reproduced* whose whole interval lies below the
    paper's smallest gain becomes *smaller than claimed* (above its largest, *larger than claimed*); every other
    word stays (:func:`sec_lib.report.refine`). The pooled row against every loss's gains, each loss's row against
    its own (:func:`sec_lib.chapters.gains.sized_verdicts`, SEC − none); without the reference, the words stay."""
    paper = paper_gains()
    if paper is None:
        return pooled, per
    pooled = pooled.assign(verdict=[refine(v, lo, hi, +1, paper)
                                    for v, lo, hi in zip(pooled["verdict"], pooled["ci_lo"], pooled["ci_hi"])])
    return pooled, per.assign(verdict=sized_verdicts(per.assign(expected_sign=+1), "sec"))


def evidence(tier: str, root=None) -> dict:
    """:func:`results` of the committed runs where the page shows the decisive tier; KeyError (no evidence yet) on
    another tier, or while C4W's choices or test runs are not all committed."""
    if not applies(tier):
        raise KeyError(absent_line(tier))
    return results(wd_frame(wd.test_runs(root)), main_frame(root))


def families_table(res: dict) -> pd.DataFrame:
    """The two registered families as one table: the pooled row (a family of its own), then the four losses (Holm
    over four), each with its estimate, 95% interval, adjusted p, detectable effect, seeds and verdict."""
    cols = ["estimate", "ci_lo", "ci_hi", "p_adj", "m", "mde", "n", "verdict", "family"]
    pooled = res["pooled"].assign(row="pooled: mean over the 4 losses")
    per = res["per"].assign(row=[loss_noun(l) for l in res["per"]["loss"]])
    out = pd.concat([pooled, per], ignore_index=True)
    return out[["row", *cols]].rename(columns={"row": "(SEC + WD) − (none + WD), R@1"})


#: How a signal's size against the paper's gains reads after "SEC adds ...", by its verdict word.
SIZE_WORDS = {"reproduced": ", within the paper's range", "smaller than claimed": ", less than the paper reports",
              "larger than claimed": ", more than the paper reports"}


def meaning(r) -> str:
    """What a verdict row of (SEC + WD) − (none + WD) says in plain words (its ``verdict``, one of
    :data:`sec_lib.report.VERDICTS`, read with its interval and margin)."""
    r = dict(r)
    v, margin = r["verdict"], r.get("margin", np.nan)
    if v in SIZE_WORDS:
        return f"SEC adds to the weight-decayed baseline{SIZE_WORDS[v]}"
    if v == "negligible":
        return f"SEC adds a gain under weight decay too small to matter (its interval inside ±{margin:g} points)"
    if v == "not reproduced":
        if np.isfinite(r["ci_hi"]) and r["ci_hi"] < 0:
            return "SEC lowers R@1 under weight decay"
        return f"SEC adds nothing that matters under weight decay (its interval inside ±{margin:g} points around 0)"
    if v == "inconclusive":
        return "these seeds cannot tell"
    if v == "not testable offline":
        return "there is no evidence"
    raise ValueError(f"verdict {v!r} is not one of the book's; valid values: {', '.join(VERDICTS)}")


def families_sentence(res: dict) -> str:
    """The registered answer in the book's verdict words: the pooled row (its family alone) with its estimate,
    95% interval, p, detectable effect and verdict, then each loss (Holm over four) by its verdict."""
    p = res["pooled"].iloc[0]
    head = (f"**(SEC + WD) − (none + WD)**, R@1 pooled over the four losses per seed (a family of its own): "
            f"{measures_text(p, 2, 'points', '', 't-test against 0')} → **{p['verdict']}**: {meaning(p)}.")
    per = [f"{loss_noun(r['loss'])} {r['estimate']:+.2f} ({r['verdict']})" for _, r in res["per"].iterrows()]
    m = int(res["per"]["m"].iloc[0]) if len(res["per"]) else 0
    return head + f" Loss by loss (paired t-tests, Holm over {m}): " + and_list(per) + "."


def evidence_sentence(root=None) -> str:
    """C4W's own runs in the evidence box's words: its held-out selection and its test runs, with iterations,
    run-hours, machine and dates (the tier's η = 0 selection runs its export holds are counted in the tier's box,
    as :func:`own_selection_runs` leaves them out)."""
    return followup_runs_sentence("C4W", [("its own held-out selection", wd.folder(root) / "selection",
                                           tier_selection_keys(root)),
                                          ("its test", wd.folder(root) / "test")], wd.FOLDER_TEXT)


def descriptive_sentence(res: dict) -> str:
    """The two comparisons outside the families, each pooled per seed over the four losses with its 95% interval,
    marked descriptive; and the pooled SEC − none without weight decay beside C4W's, for the reader's comparison."""
    parts = []
    for r in res["descriptive"].itertuples(index=False):
        left = f" ({and_list(r.excluded)} left out: a run failed)" if len(r.excluded) else ""
        parts.append(f"{r.comparison} {ci_text(r.estimate, r.ci_lo, r.ci_hi)} R@1 points ({n_text(r.n)}){left}")
    m = res["main_pooled"]
    return ("**Outside the families, descriptive only** (no test, no verdict; the runs without weight decay are the "
            "main comparison's, SEC at its held-out η): " + "; ".join(parts) + ". For comparison, SEC − none without "
            f"weight decay, pooled the same way, is {ci_text(m['estimate'], m['ci_lo'], m['ci_hi'])} R@1 points.")


def figure_rows(res: dict) -> pd.DataFrame:
    """The rows of :func:`sec_lib.figures.weightdecay.weightdecay_figure`: per loss and pooled, SEC − none with
    weight decay ((SEC + WD) − (none + WD), the registered rows) and without it (the main comparison's), each with its
    95% interval; ``eta`` the weights each arm trained with (text)."""
    with_wd, without = "with weight decay", "without (main comparison)"
    rows = []
    per, main = res["per"].set_index("loss"), res["main_per"].set_index("loss")
    for loss in wd.LOSSES:
        for arm, frame, variant, eta in (
                (with_wd, per, "sec + WD", f"{res['eta'].get(loss, np.nan):g}, WD {res['weight_decay'].get(loss, np.nan):g}"),
                (without, main, "sec", f"{res['main_eta'].get(loss, np.nan):g}")):
            if loss in frame.index:
                r = frame.loc[loss]
                rows.append({"loss": loss, "arm": arm, "variant": variant, "estimate": float(r["estimate"]),
                             "ci_lo": float(r["ci_lo"]), "ci_hi": float(r["ci_hi"]), "eta": eta, "n": int(r["n"])})
    for arm, d, variant in ((with_wd, res["pooled"].iloc[0], "sec + WD"), (without, res["main_pooled"], "sec")):
        rows.append({"loss": POOLED, "arm": arm, "variant": variant, "estimate": float(d["estimate"]),
                     "ci_lo": float(d["ci_lo"]), "ci_hi": float(d["ci_hi"]), "eta": "per loss", "n": int(d["n"])})
    out = pd.DataFrame(rows)
    out.attrs["metric"] = "R@1"
    return out


# ------------------------------------------------------------------------------ the page's verdict

def verdict_bullet(tier: str, root=None, res: dict | None = None) -> str:
    """C4W's bullet for the page's verdict: '' on another tier (the section's one line says why); while its runs
    train, that it is underway and not on the scorecard; once complete, the pooled row in the book's verdict words
    and each loss's verdict. ``res``: :func:`evidence`, computed when None."""
    if not applies(tier):
        return ""
    head = f"- **Over the authors' weight decay** ({wd.ID}, a registered follow-up"
    if res is None:
        try:
            res = evidence(tier, root)
        except KeyError:
            test = len(wd.stage_runs("test", root))
            state = "are underway" if test or len(wd.stage_runs("selection", root)) else "have not started"
            return (f"{head}): its runs {state} ({test} of {planned_test_runs()} test runs committed), so it is "
                    "not on the scorecard yet.")
    p = res["pooled"].iloc[0]
    per = and_list(f"{r['loss']} **{r['verdict']}**" for _, r in res["per"].iterrows())
    return (f"{head}; the pooled row a family alone, the losses Holm over {int(res['per']['m'].iloc[0])}): "
            f"(SEC + WD) − (none + WD) = {measures_text(p, 2, 'R@1 points', '', 't-test against 0')} → "
            f"**{p['verdict']}**: {meaning(p)}. Per loss: {per}.")


def _complete(tier: str, root=None, res: dict | None = None) -> dict | None:
    """``res``, else :func:`evidence` of the committed runs; None on another tier or while C4W is incomplete (the
    landing page's lines then say nothing)."""
    if not applies(tier):
        return None
    if res is not None:
        return res
    try:
        return evidence(tier, root)
    except KeyError:
        return None


def landing_sentence(tier: str, root=None, res: dict | None = None) -> str:
    """The landing page's sentence once C4W is complete, in plain words and without the follow-up's id: SEC − none
    under the authors' weight decay, pooled over the four losses, with its interval, seeds and what its registered
    verdict means, beside the same gap without weight decay. '' on another tier or while its runs are missing."""
    res = _complete(tier, root, res)
    if res is None:
        return ""
    p, m = res["pooled"].iloc[0], res["main_pooled"]
    return (f"Against a baseline trained with the weight decay the authors use (chosen on held-out classes for each "
            f"loss; a follow-up registered before its runs trained), SEC − none reads "
            f"{ci_text(p['estimate'], p['ci_lo'], p['ci_hi'])} R@1 points ({n_text(p['n'])}), against "
            f"{m['estimate']:+.2f} without weight decay. In the book's words, **{p['verdict']}**: {meaning(p)}.")


#: The question the compare page's pointer asks, beside C4L's (:data:`~sec_lib.chapters.convergence_length.COMPARE_POINTER`).
POINTER_QUESTION = "**Does the gain hold over the authors' weight decay?**"


def compare_pointer(tier: str, root=None, res: dict | None = None) -> str:
    """The compare page's short paragraph under its answer, beside C4L's pointer: the question C4W asks and, once its
    test runs are all committed, its pooled row with its interval and verdict (the section *Over the authors' weight
    decay* gives the rest); while they train, that its section says how far. '' on another tier."""
    if not applies(tier):
        return ""
    head = (f"{POINTER_QUESTION} The runs behind that answer train without the weight decay the authors use. A "
            f"follow-up registered before its runs trained ({wd.ID}) trains the baseline and SEC again with it, its weight and "
            "SEC's η chosen on held-out classes for each loss")
    res = _complete(tier, root, res)
    if res is None:
        return f"{head}; its runs still train, and its section *Over the authors' weight decay* below says how far."
    p = res["pooled"].iloc[0]
    return (f"{head}: (SEC + WD) − (none + WD) = {ci_text(p['estimate'], p['ci_lo'], p['ci_hi'])} R@1 points "
            f"({n_text(p['n'])}), **{p['verdict']}**: {meaning(p)}. Its section *Over the authors' weight decay* "
            "below gives the choices and each loss.")


#: The brief line's words for a signal, by its size against the paper's gains.
BRIEF_SIZE = {"reproduced": "still a gain, in the paper's range", "smaller than claimed": "still a gain, smaller than "
              "the paper's", "larger than claimed": "still a gain, larger than the paper's"}


def brief_words(r) -> str:
    """What a verdict row of (SEC + WD) − (none + WD) says, in a few words for the landing page's brief line."""
    r = dict(r)
    v = r["verdict"]
    if v in BRIEF_SIZE:
        return BRIEF_SIZE[v]
    if v == "negligible":
        return "a gain too small to matter"
    if v == "not reproduced":
        return "SEC lowers R@1 there" if np.isfinite(r["ci_hi"]) and r["ci_hi"] < 0 else "SEC adds nothing that matters there"
    if v == "inconclusive":
        return "these seeds cannot tell"
    if v == "not testable offline":
        return "there is no evidence"
    raise ValueError(f"verdict {v!r} is not one of the book's; valid values: {', '.join(VERDICTS)}")


def landing_brief(tier: str, root=None, res: dict | None = None) -> str:
    """One short line under the landing page's answer once C4W is complete (the whole sentence,
    :func:`landing_sentence`, sits below the figure): the pooled (SEC + WD) − (none + WD) with its interval, and what
    its registered verdict says. '' on another tier or while its runs are missing."""
    res = _complete(tier, root, res)
    if res is None:
        return ""
    p = res["pooled"].iloc[0]
    return (f"Over the authors' weight decay, SEC's gain reads {p['estimate']:+.2f} [{p['ci_lo']:+.2f}, {p['ci_hi']:+.2f}]: "
            f"{brief_words(p)}.")


# ------------------------------------------------------------------------------ its claim on the scorecard

def claim_estimate(ev) -> dict:
    """C4W's estimate for the scorecard: the pooled (SEC + WD) − (none + WD) row of its first family, with its
    verdict sized (:func:`evidence`), read once per evidence ``ev`` where the compare page shows the decisive tier.
    KeyError (no evidence) on another tier, or while its choices or test runs are not all committed."""
    ev.frames("compare")                        # the tier the page reads, named on the record
    tier = ev.profile_of("compare")
    return from_row(ev.derived("c4w_results", lambda: evidence(tier))["pooled"].iloc[0])


#: C4W's claim, for ``compare.CLAIMS`` once its test runs are committed (a guard test asks for it then, not before:
#: a claim without evidence would stand on the scorecard as "not testable offline").
CLAIM = Claim(
    id=wd.ID, claim="SEC improves R@1 over a baseline trained with the authors' weight decay",
    source="the authors' code (Adam's weight decay, BatchNorm spared); a registered follow-up to C4v "
           "(data/followups/weight-decay)",
    measured="R@1 (SEC + WD) − (none + WD), the weight decay and SEC's η under it chosen per loss on held-out classes, "
             "mean over the 4 losses per seed; a family of its own (the losses one by one: a Holm family of 4 on the "
             "compare page)",
    estimate=claim_estimate, expected_sign=+1, page="compare", family=wd.ID,
    paper=lambda: reference.paper_mean_gain(), paper_size=lambda: reference.paper_gain_values(),
    paper_size_text=lambda values: reference.paper_size_text(values))
