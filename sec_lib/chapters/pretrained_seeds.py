"""P1c on the pretrained page: the regime interaction tested again on fresh seeds, a registered follow-up to P1
(:mod:`sec_lib.runs.regimeseeds`, ``data/followups/regime-seeds/README.md``).

While its runs train, the page says how many are committed and what the registered seed plan is powered for; once
all are committed, the one-sided test on the new seeds (:func:`sec_lib.runs.regimeseeds.test`) in one sentence, with
the earlier registered test on seeds 0-4 (P1's own record, which keeps its verdict) beside it, a per-seed table
(:func:`seed_table`, drawn by :func:`sec_lib.figures.regime.seeds_figure`) and a bullet for the page's verdict. The
follow-up retrains the decisive tier's runs, so another tier shows one line (:func:`absent_line`). Its claim
(:data:`CLAIM`) joins the scorecard with its committed runs. Not a page module: the pretrained page imports it."""
from __future__ import annotations

import json
from dataclasses import dataclass

import pandas as pd

from ..report import values_ci
from ..report.claims import Claim
from ..runs import followup
from ..runs import regimeseeds as rs
from ..runs.decisive import read_plan
from ..runs.pilot import TIER
from . import check_shown
from .common import check_cols
from .evidence import followup_runs_sentence, page_records

__all__ = ["PARTS", "applies", "absent_line", "seeds_text", "labelled", "earlier_runs", "per_seed", "seed_table",
           "group_summary", "progress", "status_sentence", "result", "earlier", "result_sentence", "verdict_bullet",
           "Section", "section", "fresh_seeds_sentence", "readme_brief", "claim_estimate", "CLAIM"]

#: The per-seed columns of :func:`per_seed`: SEC − none in each regime (mean over the losses) and their difference.
PARTS = ("SEC − none, fine-tuned", "SEC − none, from scratch", "interaction")
#: P1's claim id (the earlier registered test, on seeds 0-4).
P1 = "P1"


#: The section's opening, shown where the page shows the decisive tier (the runs P1c retrains on new seeds).
INTRO = (
    "The interaction above is P1's registered test, and its verdict stands whatever follows. On the decisive tier's seeds "
    "0–4 it left a hint that did not survive the Holm adjustment over its family, and a hint found on five seeds cannot be "
    "confirmed on the same five. So a follow-up, **P1c**, was registered before any of its runs "
    "(`data/followups/regime-seeds/README.md`, trained by `sec_lib/runs/regimeseeds.py`): the same none and SEC runs of the "
    "four losses, fine-tuned and from scratch, on fresh seeds only, as many as a power plan on the committed seeds asks "
    "(below). Its whole family is one one-sided t-test on the new seeds, in the direction of the hint: SEC gains less when "
    "fine-tuning. Confirmed, that is the opposite of P1's prediction, and P1 reads *not reproduced*; not confirmed, P1 "
    "stays *inconclusive*, with the smallest effect the new seeds could detect beside it."
)


def applies(profile: str) -> bool:
    """Whether the pretrained page, showing the tier ``profile``, shows P1c: only on the decisive tier, whose runs
    it retrains on new seeds."""
    check_shown(profile)
    return profile == TIER


def absent_line(profile: str) -> str:
    """The one line the page shows in P1c's place on a tier other than the decisive one; ValueError on that tier."""
    if applies(profile):
        raise ValueError(f"P1c applies to the {TIER} tier: show its section, not the absent line (the absent line "
                         f"is for the other tiers)")
    return (f"{rs.ID}, a registered follow-up to P1 on fresh seeds, retrains the {TIER} tier's runs; this page shows "
            f"the {profile} tier, so it shows no part of it.")


def seeds_text(seeds) -> str:
    """'5–14' for consecutive seeds, else '0, 2 and 7'."""
    s = sorted({int(x) for x in seeds})
    if not s:
        return "none"
    if len(s) > 2 and s == list(range(s[0], s[-1] + 1)):
        return f"{s[0]}–{s[-1]}"
    return str(s[0]) if len(s) == 1 else ", ".join(map(str, s[:-1])) + f" and {s[-1]}"


def labelled(runs: pd.DataFrame, root=None) -> pd.DataFrame:
    """Committed runs (columns config, seed, R@1, as ``runs.parquet`` holds them) labelled for the test: columns
    seed, loss, arm (:data:`~sec_lib.runs.regimeseeds.ARMS`, by the decisive plan's η), regime ('fine-tuned' where
    the run starts from the pretrained backbone) and R@1; runs of another arm are left out."""
    check_cols(runs, ["config", "seed", "R@1"], "runs")
    eta = read_plan(root).eta
    cfg = [json.loads(c) for c in runs["config"]]
    out = pd.DataFrame({"seed": runs["seed"].astype(int).to_numpy(), "loss": [c["loss"] for c in cfg],
                        "arm": [rs.arm_of(c, eta) for c in cfg],
                        "regime": [rs.REGIMES[0] if c.get("pretrained") else rs.REGIMES[1] for c in cfg],
                        "R@1": runs["R@1"].astype(float).to_numpy()})
    return out[out["arm"].notna()].reset_index(drop=True)


def earlier_runs(root=None) -> pd.DataFrame:
    """The registered seeds' runs (the decisive ``pretrained`` stage's seeds, 0-4, fine-tuned, and their from-scratch
    twins of ``main``) in :func:`labelled`'s columns: the runs :func:`~sec_lib.runs.regimeseeds.committed_interaction`
    reads."""
    frames = [rs.committed(stage, root).assign(regime=regime)
              for regime, stage in zip(rs.REGIMES, ("pretrained", "main"))]
    runs = pd.concat(frames, ignore_index=True)
    runs = runs[runs["seed"].isin(set(frames[0]["seed"]))]
    return runs[["seed", "loss", "arm", "regime", "R@1"]].reset_index(drop=True)


def per_seed(runs: pd.DataFrame) -> pd.DataFrame:
    """Per seed: SEC − none fine-tuned and from scratch, each the mean over the losses, and their difference, the
    pooled interaction (:func:`sec_lib.runs.regimeseeds.interaction`). ``runs``: :func:`labelled`'s columns; an arm
    or regime outside the registered ones is refused, naming the valid ones."""
    check_cols(runs, ["seed", "loss", "arm", "regime", "R@1"], "runs")
    for col, valid in (("arm", rs.ARMS), ("regime", rs.REGIMES)):
        bad = sorted(set(runs[col].astype(str)) - set(valid))
        if bad:
            raise ValueError(f"runs of {col} {bad} are not part of {rs.ID}; valid: {list(valid)}")
    w = runs.pivot_table(index=["seed", "loss", "regime"], columns="arm", values="R@1")
    gap = (w["sec"] - w["none"]).unstack("regime").groupby(level="seed").mean()
    out = pd.DataFrame({PARTS[0]: gap[rs.REGIMES[0]], PARTS[1]: gap[rs.REGIMES[1]]})
    out[PARTS[2]] = out[PARTS[0]] - out[PARTS[1]]
    return out.reset_index()


def seed_table(new_runs: pd.DataFrame | None = None, root=None) -> pd.DataFrame:
    """:func:`per_seed` of the registered seeds (:func:`earlier_runs`) and, where given, of P1c's (``new_runs``,
    :func:`labelled`), one row per seed with its ``group``: 'seeds 0–4, registered' or 'seeds 5–14, P1c'."""
    old = per_seed(earlier_runs(root))
    parts = [old.assign(group=f"seeds {seeds_text(old['seed'])}, registered")]
    if new_runs is not None:
        new = per_seed(new_runs)
        parts.append(new.assign(group=f"seeds {seeds_text(new['seed'])}, {rs.ID}"))
    return pd.concat(parts, ignore_index=True)[["group", "seed", *PARTS]]


def group_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per group of :func:`seed_table`: the mean interaction over its seeds with its 95% t interval (``estimate``,
    ``ci_lo``, ``ci_hi``, ``n``), in the table's order."""
    check_cols(table, ["group", "seed", "interaction"], "seed table")
    rows = [{"group": g, **values_ci(sub["interaction"].to_numpy(float))}
            for g, sub in table.groupby("group", sort=False)]
    return pd.DataFrame(rows, columns=["group", "estimate", "ci_lo", "ci_hi", "n", "p_value"])


def progress(root=None) -> tuple[int, int]:
    """(runs of P1c's registration committed in ``test/runs.parquet``, runs it registers)."""
    return followup.committed_count(rs.folder(root) / "test" / "runs.parquet", rs.test_configs(root))


def status_sentence(root=None) -> str:
    """While P1c trains: its question, how many of its runs are committed, the registered seed plan (computed from
    the registered seeds' interactions: what effect it is powered for) and that the verdict waits."""
    have, want = progress(root)
    plan = rs.seed_plan(rs.committed_interaction(root))
    cap = f", {rs.ID}'s cap" if plan["seeds"] == rs.CAP else ""
    differs = "" if plan["seeds"] == rs.N_SEEDS else f" (its registration trains {rs.N_SEEDS})"
    state = (f"is underway: {have} of {want} runs committed" if have else
             f"is registered; none of its {want} runs has trained yet")
    return (f"**{rs.ID} {state}** (`{rs.FOLDER_TEXT}test/`). Its question: "
            f"{rs.QUESTION.rstrip('?')} ({seeds_text(rs.SEEDS)})? Its seed plan, registered before any of "
            f"its runs: the interaction on seeds 0–4 was {plan['observed']:+.2f} R@1 points with a per-seed SD of "
            f"{plan['sd']:.2f}; a hint that did not survive Holm likely overstates its size, so the test is powered "
            f"for half of it, {plan['effect']:.2f} points, at 80% power in a one-sided t-test at α = {rs.ALPHA:g}. "
            f"That takes {plan['seeds']} seeds{cap}{differs}, which detect {plan['mde']:.2f} points. The verdict "
            f"waits for all {want} runs; until then P1 keeps its registered verdict.")


def result(root=None) -> dict:
    """P1c's test on its committed runs (:func:`sec_lib.runs.regimeseeds.test`) with its per-seed ``table``
    (:func:`seed_table`, both groups) and ``groups`` (:func:`group_summary`). KeyError while its runs are not all
    committed."""
    runs = labelled(rs.test_runs(root), root)
    table = seed_table(runs, root)
    return {**rs.test(runs), "new_seeds": sorted(set(runs["seed"])), "table": table, "groups": group_summary(table)}


def earlier(ev) -> dict:
    """P1's record on the page's evidence ``ev`` (the registered test on seeds 0-4, as the scorecard decides it):
    estimate, ci_lo, ci_hi, p_value (raw), p_adj (Holm), m, n, verdict."""
    recs = [r for r in page_records("pretrained", ev) if r.id == P1]
    if not recs:
        raise KeyError(f"the pretrained page decides no claim {P1} on the {ev.profile} tier")
    r = recs[0]
    return {k: getattr(r, k) for k in ("estimate", "ci_lo", "ci_hi", "p_value", "p_adj", "m", "n", "verdict")}


def _earlier_words(old: dict) -> str:
    return (f"the earlier registered test, P1's own on seeds 0–4, which keeps its verdict: {old['estimate']:+.2f} "
            f"[{old['ci_lo']:+.2f}, {old['ci_hi']:+.2f}] R@1 points over {old['n']} seeds, raw p {old['p_value']:.2g}, "
            f"Holm p {old['p_adj']:.2g} over its family of {old['m']}: *{old['verdict']}*")


def result_sentence(res: dict, old: dict) -> str:
    """The complete P1c in one paragraph: the new seeds' pooled interaction, its 95% interval, the one-sided p, the
    one-sided detectable effect, the registered verdict and what it means for P1, then ``old`` (:func:`earlier`)."""
    check_cols(pd.DataFrame([res]), ["estimate", "lo", "hi", "p_one_sided", "seeds", "mde", "verdict", "P1"],
               f"{rs.ID}'s result")
    _checked(res)
    new = seeds_text(res.get("new_seeds", rs.SEEDS))
    if res["verdict"] == "confirmed":
        means = (f"SEC gains less when fine-tuning a pretrained backbone than from scratch, the opposite of P1's "
                 f"prediction, so P1 reads *{res['P1']}* (opposite)")
    else:
        means = (f"these seeds do not show that SEC gains less when fine-tuning, so P1 stays *{res['P1']}*; an "
                 f"interaction smaller than {res['mde']:.2f} points in that direction could have gone unseen")
    return (f"**On fresh seeds ({new}), {rs.ID} is {res['verdict']}.** The interaction, (SEC − none fine-tuned) − "
            f"(SEC − none from scratch) averaged over the four losses per seed, is {res['estimate']:+.2f} "
            f"[{res['lo']:+.2f}, {res['hi']:+.2f}] R@1 points over {res['seeds']} seeds (95% t interval); the "
            f"one-sided t-test in the registered direction (below 0: SEC gains less fine-tuned) gives p = "
            f"{res['p_one_sided']:.2g}, and these seeds detect an interaction of {res['mde']:.2f} points one-sided "
            f"with 80% power. By the registered rule (p < {rs.ALPHA:g}), {rs.ID} is "
            f"**{res['verdict']}**: {means}. Beside it, "
            f"{_earlier_words(old)}.")


def verdict_bullet(res: dict | None, old: dict | None = None, root=None) -> str:
    """P1c's bullet for the page's verdict: its registered verdict and P1's reading once ``res`` (:func:`result`) is
    there, else that its runs are underway (counted from the committed folder at ``root``); with P1's own verdict
    where ``old`` (:func:`earlier`) is given."""
    head = f"- **The interaction on fresh seeds** ({rs.ID}, a registered follow-up to P1, a family of its own"
    if res is None:
        have, want = progress(root)
        word = f", *{old['verdict']}*" if old else ""
        state = "are underway" if have else "have not started"
        return (f"{head}): its runs {state} ({have} of {want} committed), so it is not on the scorecard yet; P1 "
                f"keeps its registered verdict{word}.")
    also = f" P1's own test on seeds 0–4 keeps its verdict, *{old['verdict']}*." if old else ""
    return (f"{head}; one-sided t-test over {res['seeds']} seeds): {res['estimate']:+.2f} [{res['lo']:+.2f}, "
            f"{res['hi']:+.2f}] R@1 points, one-sided p = {res['p_one_sided']:.2g}, detectable {res['mde']:.2f} → "
            f"**{res['verdict']}**: P1 reads *{res['P1']}*.{also}")


@dataclass(frozen=True)
class Section:
    """What the page shows for P1c: its ``text``, the per-seed ``table`` and ``groups`` (None until complete or on
    another tier) and its verdict ``bullet`` ('' on another tier)."""
    text: str
    table: pd.DataFrame | None = None
    groups: pd.DataFrame | None = None
    bullet: str = ""


def section(profile: str, ev, root=None) -> Section:
    """P1c's part of the pretrained page showing the tier ``profile``: on the decisive tier, :func:`status_sentence`
    while its runs train, :func:`result_sentence` once all are committed, with P1's record on the page's evidence
    ``ev`` beside it (:func:`earlier`); elsewhere :func:`absent_line` and nothing more."""
    if not applies(profile):
        return Section(absent_line(profile))
    try:
        res = result(root)
    except KeyError:
        return Section(status_sentence(root), bullet=verdict_bullet(None, earlier(ev) if ev is not None else None,
                                                                    root))
    old = earlier(ev)
    runs = followup_runs_sentence(rs.ID, [("", rs.folder(root) / "test")], rs.FOLDER_TEXT)
    return Section(result_sentence(res, old) + "\n\n" + runs, res["table"], res["groups"], verdict_bullet(res, old))


#: The words after P1's answer while P1c's runs train (the landing page's words before P1c had a result).
PENDING = f"A registered follow-up on fresh seeds ({rs.ID}) will decide it."


def _checked(res: dict) -> dict:
    """``res`` (:func:`result`), once its verdict is one of the registered two; ValueError otherwise."""
    if res["verdict"] not in rs.P1_READING:
        raise ValueError(f"verdict {res['verdict']!r} is not valid; expected one of {list(rs.P1_READING)}")
    return res


def _complete(root=None, res: dict | None = None) -> dict | None:
    """``res``, else :func:`result` read at ``root``, checked (:func:`_checked`); None while P1c's runs are not all
    committed."""
    if res is None:
        try:
            res = result(root)
        except KeyError:
            return None
    return _checked(res)


def fresh_seeds_sentence(tier: str, root=None, res: dict | None = None) -> str:
    """The words after P1's answer, on the landing page and under the pretrained page's answer, where that page shows
    the decisive tier: once P1c's runs are all committed, its result in plain words (the new seeds' interaction with
    its interval and one-sided p, and what it means for P1, with the detectable effect where it is not confirmed);
    :data:`PENDING` while they train; '' on another tier (P1c retrains the decisive tier's runs). ``res`` is
    :func:`result`, read where not given."""
    if not applies(tier):
        return ""
    res = _complete(root, res)
    if res is None:
        return PENDING
    said = (f"On fresh seeds ({seeds_text(res.get('new_seeds', rs.SEEDS))}), a follow-up registered before its runs "
            f"trained ({rs.ID}) reads {res['estimate']:+.2f} [{res['lo']:+.2f}, {res['hi']:+.2f}] R@1 points over "
            f"{res['seeds']} seeds (one-sided p = {res['p_one_sided']:.2g})")
    if res["verdict"] == "confirmed":
        return (f"{said}: it confirms that SEC gains less when fine-tuning, the opposite of the claim, so P1 reads "
                f"**{res['P1']}** on these seeds.")
    return (f"{said}: it does not confirm that SEC gains less when fine-tuning (an interaction smaller than "
            f"{res['mde']:.2f} points could have gone unseen), so P1 stays **{res['P1']}**.")


def readme_brief(tier: str, root=None, res: dict | None = None) -> str:
    """The README's line on P1c, after the follow-ups that test the answer: once its runs are all committed, whether
    the fresh seeds confirm the regime's hint, with their interval; '' while they train and on another tier."""
    res = _complete(root, res) if applies(tier) else None
    if res is None:
        return ""
    said = {"confirmed": "confirm the fine-tuning regime's hint: SEC gains less when fine-tuning a pretrained "
                         "backbone than from scratch, the opposite of the paper's claim",
            "not confirmed": "do not confirm the fine-tuning regime's hint that SEC gains less when fine-tuning"}
    return (f"On fresh seeds, the runs {said[res['verdict']]} ({res['estimate']:+.2f} [{res['lo']:+.2f}, "
            f"{res['hi']:+.2f}] R@1 points).")


def claim_estimate(ev) -> dict:
    """P1c's estimate for the scorecard: the new seeds' pooled interaction with its 95% interval, the one-sided p
    (a family of its own, so unadjusted), its one-sided detectable effect and, as its verdict, P1's reading of the
    registered result (:data:`sec_lib.runs.regimeseeds.P1_READING`: *not reproduced* where the opposite direction is
    confirmed, else *inconclusive*). Read once per evidence ``ev`` where the pretrained page shows the decisive tier;
    KeyError (no evidence) on another tier or while its runs are not all committed."""
    ev.frames("pretrained")                     # the tier the page reads, named on the record
    profile = ev.profile_of("pretrained")
    if profile is None:                         # frames of no named tier: not the decisive tier's
        raise KeyError(f"{rs.ID} retrains the {TIER} tier's runs; these frames name no tier")
    if not applies(profile):
        raise KeyError(absent_line(profile))
    res = ev.derived("p1c_result", result)
    return {"estimate": res["estimate"], "ci_lo": res["lo"], "ci_hi": res["hi"], "n": res["seeds"],
            "p_value": res["p_one_sided"], "p_adj": res["p_one_sided"], "m": 1, "mde": res["mde"],
            "verdict": res["P1"],
            "note": f"{rs.ID} is {res['verdict']} (one-sided t-test in the registered direction, below 0: SEC gains "
                    f"less fine-tuned), so P1 reads {res['P1']} on these seeds"}


#: P1c's claim, for ``pretrained.CLAIMS`` once its runs are committed (a guard test asks for it then, not before: a
#: claim without evidence would stand on the scorecard as "not testable offline").
CLAIM = Claim(
    id=rs.ID, claim="SEC's R@1 effect is larger when fine-tuning a pretrained backbone than from scratch (P1), "
                    "tested again on fresh seeds",
    source="a registered follow-up to P1 (data/followups/regime-seeds)",
    measured="R@1 (SEC − none fine-tuned) − (SEC − none from scratch), paired on seed, mean over the 4 main losses "
             "per seed, on new seeds only; one-sided t-test in the direction observed on seeds 0-4 (below 0); a "
             "family of its own",
    expected_sign=+1, page="pretrained", family=rs.ID, estimate=claim_estimate)
