"""C4W's held-out choices recomputed from its committed runs alone, by the rule its README registered, written here
again without the library's selection code: the mean held-out R@1 of each grid point over the three selection seeds
(a run that did not finish scores −∞), the best point chosen (ties: the smaller weight), 0 allowed to win (then the
best nonzero weight is tested), and a grid grown ×/÷ 10 while its best nonzero point sits at an edge, twice a side
at most. Selection 1 varies the weight decay (its point 0 the tier's η = 0 runs); selection 2 varies SEC's η under the
tested weight decay (its point 0 selection 1's tested run). While the follow-up trains, only what is committed is
checked: no point beyond what the rule asked for, and no choice file before every grid is final."""
import json
import math

import pandas as pd
import pytest

from sec_lib.runs import followup
from sec_lib.runs import weightdecay as wd

SEEDS = (1000, 1001, 1002)
SELECTION = wd.folder() / "selection" / "runs.parquet"


def committed() -> pd.DataFrame:
    if not SELECTION.exists():
        pytest.skip("C4W has no committed selection runs yet")
    runs = pd.read_parquet(SELECTION)
    cfg = [json.loads(c) for c in runs["config"]]
    score = [r if s == "done" else -math.inf for r, s in zip(runs["R@1"], runs["status"])]
    return pd.DataFrame({"loss": runs["loss"], "eta": runs["eta"].astype(float), "seed": runs["seed"],
                         "wd": [float(c["weight_decay"]) for c in cfg], "score": score,
                         "holdout": runs["holdout_classes"]})


def means(runs: pd.DataFrame, by: str) -> dict:
    """{point: mean score} for the points with every selection seed committed."""
    return {float(w): g["score"].mean() for w, g in runs.groupby(by) if set(SEEDS) <= set(g["seed"])}


def recompute(scores: dict, first: tuple) -> dict:
    """The registered rule on ``scores`` ({point: mean}, 0 included) with first grid ``first``: the choice, the
    tested point, and the point the grid still needs (None once final)."""
    grid = sorted(w for w in scores if w != 0)
    best = max(scores, key=lambda w: (scores[w], -w))
    best_nonzero = max(grid, key=lambda w: (scores[w], -w))
    need = None
    if best_nonzero == grid[0] and sum(w < min(first) for w in grid) < 2:
        need = grid[0] / 10
    elif best_nonzero == grid[-1] and sum(w > max(first) for w in grid) < 2:
        need = grid[-1] * 10
    return {"weight": best, "tested": best or best_nonzero, "needs": need}


def grown_as_asked(points: list, first: tuple, rule_on) -> None:
    """Every committed point beyond the first grid was asked for by the rule (``rule_on(points)``) on the points
    before it, one at a time."""
    have, left = sorted(first), sorted(p for p in points if p not in first)
    while left:
        asked = rule_on(have)["needs"]
        hit = [w for w in left if asked is not None and math.isclose(w, asked, rel_tol=1e-9)]
        assert hit, f"grid point(s) {left} committed, but on {have} the rule asks for {asked}"
        left.remove(hit[0])
        have = sorted([*have, hit[0]])


@pytest.mark.parametrize("loss", wd.LOSSES)
def test_each_committed_grid_is_the_registered_rule_recomputed(loss):
    runs = committed()
    mine = runs[runs["loss"] == loss]
    assert mine["holdout"].notna().all()                      # every selection run is held out
    plan = followup.tier_plan()
    choices = wd.read_choices()
    sel1 = mine[mine["eta"] == 0]
    s1 = means(sel1, "wd")
    if not all(w in s1 for w in (0.0, *wd.WD_GRID)):
        assert not choices, "choices.json was written before selection 1's first grid was complete"
        return
    grown_as_asked([w for w in s1 if w], wd.WD_GRID, lambda ws: recompute({w: s1[w] for w in (0.0, *ws)}, wd.WD_GRID))
    r1 = recompute(s1, wd.WD_GRID)
    sel2 = mine[(mine["eta"] > 0) & (mine["wd"] == r1["tested"])]
    if r1["needs"] is not None:                               # selection 1 still grows: no selection 2 yet
        assert r1["needs"] not in s1 and sel2.empty and not choices
        return
    base = wd.eta_grid(plan.eta[loss])
    s2 = {0.0: s1[r1["tested"]], **means(sel2, "eta")}
    assert set(mine[(mine["eta"] > 0)]["wd"]) <= {r1["tested"]}   # SEC trains only under the tested weight decay
    if not all(e in s2 for e in base):
        assert not choices
        return
    grown_as_asked([e for e in s2 if e], base, lambda es: recompute({e: s2[e] for e in (0.0, *es)}, base))
    r2 = recompute(s2, base)
    if r2["needs"] is not None:                               # selection 2 still grows
        assert not choices
        return
    if not choices:
        pytest.skip(f"{loss}'s grids are final here; choices.json is written once every loss's are")
    got = choices[loss]
    assert (got["weight_decay"], got["weight_decay_tested"]) == (r1["weight"], r1["tested"])
    assert (got["eta"], got["eta_tested"]) == (r2["weight"], r2["tested"])


def test_the_recomputation_itself_on_hand_made_grids():
    """Ties go to the smaller weight; 0 may win, and then the best nonzero is tested; a best nonzero at an edge asks
    for the next point, twice a side at most; a point the rule never asked for is caught."""
    first = (1.0, 10.0, 100.0)
    r = recompute({0.0: 5.0, 1.0: 6.0, 10.0: 6.0, 100.0: 4.0}, first)
    assert (r["weight"], r["tested"], r["needs"]) == (1.0, 1.0, 0.1)          # a tie at the low edge
    r = recompute({0.0: 7.0, 1.0: 6.0, 10.0: 6.5, 100.0: 4.0}, first)
    assert (r["weight"], r["tested"], r["needs"]) == (0.0, 10.0, None)        # 0 wins, its best nonzero inside
    r = recompute({0.0: 1.0, 0.01: 2.0, 0.1: 1.5, 1.0: 1.0, 10.0: 1.0, 100.0: 1.0}, first)
    assert (r["weight"], r["needs"]) == (0.01, None)                          # grown twice: no third time
    r = recompute({0.0: 1.0, 1.0: 1.0, 10.0: 1.0, 100.0: 3.0, 1000.0: 4.0}, first)
    assert r["needs"] == 10000.0
    scores = {0.0: 1.0, 0.1: 3.0, 1.0: 2.0, 10.0: 1.0, 100.0: 1.0}
    grown_as_asked([0.1, 1.0, 10.0, 100.0], first, lambda ws: recompute({w: scores[w] for w in (0.0, *ws)}, first))
    scores[1000.0] = 0.5                                                       # never asked for
    with pytest.raises(AssertionError, match=r"grid point\(s\) \[1000.0\] committed"):
        grown_as_asked([0.1, 1.0, 10.0, 100.0, 1000.0], first,
                       lambda ws: recompute({w: scores[w] for w in (0.0, *ws)}, first))
