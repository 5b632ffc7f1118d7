"""The decisive tier's held-out selection rule (sec_lib/runs/selection.py): 3 seeds a point, grids grow at an
edge at most twice a side, η = 0 may win and is flagged."""
import pandas as pd
import pytest

from sec_lib.runs import selection as sel


def test_an_interior_choice_is_final():
    c = sel.choose({0.0: 70.0, 0.005: 70.5, 0.05: 71.0, 0.1: 71.5, 0.5: 71.2, 1.0: 70.9})
    assert (c.weight, c.best_nonzero, c.edge, c.needs, c.flags) == (0.1, 0.1, None, None, [])


def test_an_edge_choice_grows_the_grid_twice_then_is_flagged():
    s = {0.0: 70.0, 0.005: 72.0, 0.05: 71.0, 0.1: 70.5, 0.5: 70.2, 1.0: 69.0}
    c = sel.choose(s)
    assert c.edge == "low" and c.needs == pytest.approx(0.0005)
    s[0.0005] = 72.5
    c = sel.choose(s)
    assert c.needs == pytest.approx(0.00005)
    s[0.00005] = 73.0
    c = sel.choose(s)
    assert c.edge == "low" and c.needs is None and c.weight == 0.00005
    assert c.flags == ["at the low edge of its grid after 2 extensions"]
    assert sel.choose({0.0: 1, 0.005: 1, 0.05: 1, 0.1: 1, 0.5: 2, 1.0: 3}).needs == pytest.approx(10.0)


def test_no_regularizer_may_win_and_the_best_nonzero_weight_is_still_tested():
    c = sel.choose({0.0: 75.0, 0.005: 70.0, 0.05: 71.0, 0.1: 72.0, 0.5: 71.0, 1.0: 70.0})
    assert c.weight == 0.0 and c.best_nonzero == 0.1 and c.needs is None
    assert c.flags[0].startswith("SEC not selected")


def test_ties_go_to_the_smaller_weight_and_missing_points_are_an_error():
    assert sel.choose({0.0: 70.0, 0.005: 70.0, 0.05: 71.0, 0.1: 71.0, 0.5: 70.0, 1.0: 70.0}).weight == 0.05
    with pytest.raises(ValueError, match="without scores"):
        sel.choose({0.0: 70.0, 0.005: 70.0})


def test_scores_need_every_seed_and_paired_diffs_pair_on_the_seed():
    runs = pd.DataFrame([{"eta": e, "seed": s, "R@1": 70 + e + s / 1000} for e in (0.0, 0.1) for s in sel.SEEDS]
                        + [{"eta": 0.5, "seed": 1000, "R@1": 99.0}])
    sc = sel.scores_of(runs)
    assert set(sc) == {0.0, 0.1} and sc[0.1] == pytest.approx(70.1 + 1.001)
    d = sel.paired_diffs(runs, 0.1)
    assert d["seed"].tolist() == list(sel.SEEDS) and d["diff"].tolist() == pytest.approx([0.1] * 3)


def test_selection_runs_are_held_out_with_every_seed_and_the_pilots_schedule():
    cfgs = sel.configs("ms", (0.0, 0.1), "step", 4000)
    assert len(cfgs) == 6 and {c.seed for c in cfgs} == set(sel.SEEDS)
    assert all(c.holdout_classes > 0 and c.schedule == "step" and c.lr_milestones == (2400, 3400) for c in cfgs)
    assert [c.eta for c in cfgs] == [0.0] * 3 + [0.1] * 3 and cfgs[3].mu == "batch"
    l2 = sel.configs("ms", (0.005,), "cosine", 4000, kind="l2reg")
    assert all(c.mu == "zero" and c.eta == 0.005 and c.schedule == "cosine" for c in l2)
    with pytest.raises(ValueError, match="valid values: sec, l2reg"):
        sel.configs("ms", (0.1,), "step", 4000, kind="l3")


@pytest.mark.parametrize("via", ["choice", "fallback"])
def test_the_decisive_command_trains_the_grids_grows_an_edge_and_exports(tmp_path, monkeypatch, capsys, via,
                                                                         no_fsync):
    """The stage driver with stand-in training: every loss's η peaks at the grid's low edge, so each η grid grows
    twice and is then flagged; every run named is exported to the selection folder. The schedule comes from the
    pilot's choice, or (``fallback``) from its registered fallback at the last pair's T when nothing converged."""
    from sec_lib.runs import commands, decisive_studies, pilot, tier
    from sec_lib.runs import pool as P, store as S
    from sec_lib.runs.train import RunResult
    monkeypatch.setenv("SEC_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setattr(tier, "REPO", tmp_path)
    monkeypatch.setattr(pilot, "configs", lambda profile="reference", pairs=1: [])
    monkeypatch.setattr(pilot, "choice", lambda conv, pair: "step" if via == "choice" else None)
    monkeypatch.setattr(pilot, "fallback", lambda conv, pair: "step")
    from sec_lib.runs import experiments as ex, sweeps
    for module in (ex, sweeps):                           # the registry and the sweeps below it read their own names
        monkeypatch.setattr(module, "MAIN_LOSSES", ("ms",))   # one loss: the same logic, a quarter of the writes
    trained = []

    def fake_run_all(configs, root=None, jobs=1, **kw):
        store = S.ResultStore(root)
        for c in configs:
            e = pd.DataFrame({"step": [c.iterations], "R@1": [0.0]})
            score = (70.0 - abs(c.eta - 4.5e-5) * (1 if c.mu == "batch" else -1) + c.seed / 1e4
                     + (c.seed * 7919 + round(c.eta * 1e6)) % 13 / 1e3)        # seed noise: a paired SD > 0
            store.save(RunResult(c, "done", {"R@1": score}, e.iloc[:0], e.iloc[:0], e, e.iloc[:0], e.iloc[:0],
                                 e.iloc[:0]))
            trained.append(c)
        return []

    monkeypatch.setattr(P, "run_all", fake_run_all)
    later = []                                             # the stages after the main comparison: tests/runs/test_decisive_stages.py
    monkeypatch.setattr(decisive_studies, "later_studies", lambda: later.append(1) or [])
    assert commands.decisive_command(jobs=200) == 0          # one chunk a round: one export each
    assert later == [1]
    said = capsys.readouterr().out
    assert "ms sec: chosen 5e-05" in said and "at the low edge of its grid after 2 extensions" in said
    n_sec = 3 * (1 + len(sel.ETA_GRID) + 2)              # η = 0 and the grid, grown twice, 3 seeds each
    n_l2 = 3 * (len(sel.L2_GRID) + 2)                    # L2 peaks at its high edge: grown twice
    assert len({id(c) for c in trained[:n_sec + n_l2]}) == n_sec + n_l2
    runs = pd.read_parquet(tmp_path / "data" / "reference" / "decisive" / "selection" / "runs.parquet")
    assert len(runs) == n_sec + n_l2 and (runs["holdout_classes"] > 0).all()
    assert {5e-4, 5e-5} <= set(runs["eta"])                 # the η grid grown twice at its low edge
    # then the main comparison: its plan is written first, from the final selection, and its runs export as they go
    from sec_lib.runs import mainstage
    plan = mainstage.Plan.from_json((tmp_path / "data" / "reference" / "decisive" / "plan.json").read_text())
    assert plan.eta == {"ms": 5e-05} and plan.shape == "step" and "main comparison plan" in said
    assert plan.length == (pilot.LENGTHS[0] if via == "choice" else pilot.LENGTH_PAIRS[-1][0])
    assert ("by the registered fallback the tier trains step at 13500" in said) == (via == "fallback")
    main = pd.read_parquet(tmp_path / "data" / "reference" / "decisive" / "main" / "runs.parquet")
    assert len(main) == len(mainstage.configs(plan)) and (main["holdout_classes"] == 0).all()
    assert len(trained) == n_sec + n_l2 + len(main)
