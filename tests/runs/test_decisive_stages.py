"""The decisive tier after its main comparison: one profile for every chapter (its main-comparison runs are the
main stage's own), held-out choices written once, and the later stages trained with stand-in training."""
import math

import pandas as pd
import pytest

from sec_lib.runs import decisive, mainstage, plan, selection
from sec_lib.runs import experiments as ex
from sec_lib.runs.store import run_key


def a_plan(seeds=7, shape="cosine", length=9000, losses=ex.MAIN_LOSSES) -> mainstage.Plan:
    return mainstage.Plan(shape, length, seeds, 0.45, 0.4, {}, {l: 0.1 for l in losses},
                          {l: 0.005 for l in losses}, {})


def test_the_profile_names_exactly_the_main_stages_runs():
    p = a_plan()
    extra = {"tml": {"sec": 0.5, "l2reg": 0.01, "flags": []}, "cosface": {"sec": 0.05, "l2reg": 0.001, "flags": []}}
    main = {run_key(c) for c in mainstage.configs(p)}
    named = ex.sweep_configs("main", decisive.profile(p, extra), None)
    assert {run_key(c) for c in named if c.loss in ex.MAIN_LOSSES} == main
    assert {c.seed for c in named if c.loss in ex.EXTRA_LOSSES} == set(range(plan.FLOOR))
    dp = decisive.profile(p, {})
    with pytest.raises(KeyError, match="no held-out choice of the L2 weight for 'tml'"):
        ex.sweep_configs("main", dp, None)                  # tml and cosface: their selection comes later
    compare = ex.sweep_configs("compare", dp, None)          # none at the planned seeds; L2 and paper's η at 5
    assert {run_key(c) for c in compare} <= main
    seeds = pd.DataFrame([{"variant": c.variant, "seed": c.seed} for c in compare]).groupby("variant")["seed"].nunique()
    assert seeds.to_dict() == {"none": 7, "l2reg": plan.FLOOR, "sec": plan.FLOOR}
    assert {run_key(c) for c in ex.sweep_configs("tuned", dp, None)} <= main       # SEC at the selected η, 7 seeds
    assert len(ex.sweep_configs("tuned", dp, None)) == 2 * 4 * 7
    eta = ex.sweep_configs("eta", dp, None)
    assert {c.seed for c in eta} == {0, 1, 2} and {c.iterations for c in eta} == {9000}
    assert all(c.schedule == "cosine" and c.lr == decisive.LR and c.holdout_classes == 0 for c in eta)
    assert {c.seed for c in ex.sweep_configs("mu", dp, None)} == set(range(plan.FLOOR))
    early = [c for c in ex.sweep_configs("convergence", dp, None) if c.iterations < 9000]
    assert len(early) == 4 * 2 * plan.FLOOR                     # prefixes of none and SEC at the paper's η
    assert {(c.iterations, c.schedule_iterations, c.eval_every) for c in early} == {(2000, 9000, 100)}
    with pytest.raises(KeyError, match="no held-out choice of the η for 'tml'"):
        ex.sweep_configs("beyond", dp, None)
    dp = decisive.profile(p, extra)
    beyond = ex.sweep_configs("beyond", dp, None)
    # the main comparison's four arms over the floor's seeds, each SEC run labelled with its η arm
    assert {(c.loss, c.variant, c.eta) for c in beyond if c.eta} == {
        ("tml", "sec", 0.5), ("cosface", "sec", 0.05), ("tml", "sec", 1.0), ("cosface", "sec", 1.0),
        ("tml", "l2reg", 0.01), ("cosface", "l2reg", 0.001)}
    assert {c.seed for c in beyond} == set(range(plan.FLOOR)) and len(beyond) == 2 * 4 * plan.FLOOR
    assert {run_key(c) for c in beyond} <= {run_key(c) for c in ex.sweep_configs("main", dp, None)}
    arms = {(run_key(c), c.variant, c.eta): lab["eta_arm"] for c, lab in ex.beyond_runs(dp, None)}
    assert {(v, eta, arm) for (_, v, eta), arm in arms.items() if v == "sec"} == {
        ("sec", 0.5, "selected"), ("sec", 0.05, "selected"), ("sec", 1.0, "paper")}
    # the other profiles are untouched: no fixed choices, no floor, the η sweep over their seeds
    ref = ex.get_profile("reference")
    assert ref.fixed_choices == {} and ref.floor_seeds == () and ref.sweep_seeds == ()


def test_the_fixed_scale_radius_is_the_median_held_out_norm():
    from sec_lib.runs.train import RunResult
    e = pd.DataFrame()

    def run(norms, status="done"):
        return RunResult(None, status, {}, e, e, e, pd.DataFrame({"norm": norms}), e, e)
    assert decisive.radius_of([run([1.0, 2.0]), run([12.345, 30.0]), None]) == 7.17     # median 7.1725, 3 digits
    with pytest.raises(ex.SelectionError, match="no positive median norm"):
        decisive.radius_of([run([5.0], "failed"), None])


def test_a_choice_is_written_once(tmp_path):
    sec = selection.choose({0.0: 1.0, 0.005: 1.0, 0.05: 2.0, 0.1: 1.5, 0.5: 1.0, 1.0: 0.5})
    l2 = selection.choose({0.0: 3.0, 0.001: 1.0, 0.005: 2.0, 0.01: 1.5}, selection.L2_GRID)
    got = decisive.record_choice("tml", sec, l2, root=tmp_path)
    assert got["sec"] == 0.05 and got["l2reg"] == 0.005 and got["flags"][0].startswith("L2: L2-reg not selected")
    other = selection.choose({0.0: 1.0, 0.005: 1.0, 0.05: 1.0, 0.1: 3.0, 0.5: 1.0, 1.0: 0.5})
    assert decisive.record_choice("tml", other, root=tmp_path) == got        # never rewritten
    decisive.record_choice("arcface", other, root=tmp_path)
    assert decisive.read_choices(tmp_path) == {"tml": got, "arcface": {"sec": 0.1, "l2reg": None, "flags": []}}
    edge = selection.choose({0.0: 1.0, 0.005: 9.0, 0.05: 1.0, 0.1: 1.0, 0.5: 1.0, 1.0: 1.0})
    with pytest.raises(ValueError, match="not final"):
        decisive.record_choice("ms", edge, root=tmp_path)
    with pytest.raises(KeyError, match="no plan yet"):
        decisive.read_plan(tmp_path)


def test_the_later_stages_train_in_order_each_run_once(tmp_path, monkeypatch, capsys, no_fsync):
    """Stand-in training through every stage after the main comparison, on shortened loss lists: each held-out
    selection records its choices, each training stage exports only runs that no earlier stage named, seed by seed."""
    from sec_lib.runs import decisive_studies, sweeps, tier
    from sec_lib.runs import pool as P, store as S
    from sec_lib.runs.train import RunResult
    monkeypatch.setenv("SEC_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setattr(tier, "REPO", tmp_path)
    for name, value in (("MAIN_LOSSES", ("ms",)), ("EXTRA_LOSSES", ("tml",)), ("REVIEW_LOSSES", ("arcface",)),
                        ("SSL_LOSSES", ()), ("NPAIR_VARIANTS", ("tml",)), ("FACE_LOSSES", ("arcface",)),
                        ("MU_LOSSES", ("ms",)), ("BN_HEADS", ("nobn", "paper"))):
        for module in (ex, sweeps):                 # the registry and the sweeps below it read their own names
            monkeypatch.setattr(module, name, value)
    from sec_lib.runs import finetune
    monkeypatch.setitem(finetune.GRIDS, "decisive", ((1e-4, 3e-4, 1e-3), (0.2, 0.5)))   # 3 trunk rates, 2 ratios
    monkeypatch.setattr(selection, "SEEDS", (1000, 1001))                               # 2 held-out seeds a point
    monkeypatch.setattr(selection, "LR_GRID", (0.03, 0.1, 0.3, 1.0))
    monkeypatch.setattr(decisive, "SWEEPS", tuple(c for c in decisive.SWEEPS if c != "normlayer"))
    monkeypatch.setattr(decisive, "STAGES", tuple(s for s in decisive.STAGES if s[0] != "normlayer"))
    p = a_plan(seeds=6, length=3000, losses=("ms",))
    mainstage.write_plan(p, decisive.plan_path())
    trained = []

    def fake_run_all(configs, root=None, jobs=1, **kw):
        store = S.ResultStore(root)
        for c in configs:                        # held-out R@1 peaks at η = 0.05 (interior) and L2 = 0.005
            peak = 0.005 if c.mu == "zero" else 0.05
            score = 70.0 - (abs(math.log10(c.eta / peak)) if c.eta else 2.0) + c.seed / 1e4
            if c.optimizer == "sgd":                    # SGD's rate peaks at 0.1 without SEC, at 1.0 (an edge) with it
                score -= abs(math.log10(c.lr / (1.0 if c.eta else 0.1)))
            if c.relative:                              # relative SEC's η peaks at 1 (interior of 0.1, 1, 10)
                score = 70.0 - abs(math.log10(c.eta)) + c.seed / 1e4
            if c.pretrained:                            # fine-tuning: trunk 3e-4 (interior), head ratio 0.5
                score = 80.0 - abs(math.log10(c.lr / 3e-4)) - abs(math.log10(c.lr_head / c.lr / 0.5)) + c.seed / 1e4
            e = pd.DataFrame({"step": [c.iterations], "R@1": [score]})
            norms = pd.DataFrame({"label": [0, 1, 2], "norm": [9.0 + c.seed % 2, 10.0, 14.0], "hit@1": [1, 0, 1]})
            store.save(RunResult(c, "done", {"R@1": score}, e.iloc[:0], e.iloc[:0], e, norms, e.iloc[:0],
                                 e.iloc[:0]))
            trained.append(c)
        return []

    monkeypatch.setattr(P, "run_all", fake_run_all)
    assert decisive_studies.train(decisive_studies.later_studies(), 500, store=S.ResultStore()) == 0
    said = capsys.readouterr().out
    assert "not written yet" not in said and "the decisive tier's stages are complete" in said
    assert decisive.read_choices() == {"tml": {"sec": 0.05, "l2reg": 0.005, "flags": []},
                                       "arcface": {"sec": 0.1, "l2reg": None, "flags": []},   # review grid 0.1/0.5/1
                                       "rates": {"sgd": {"lr": 0.1, "flags": []},            # 1.0: grown to 10, lost
                                                 "sgd+sec": {"lr": 1.0, "flags": []}},
                                       "scale": {"ms": {"relative": 1.0, "radius": 10.0, "flags": []}},
                                       "finetune": {"lr": 3e-4, "lr_head": 1.5e-4, "flags": []}}
    folder = tmp_path / "data" / "reference" / "decisive"
    assert 10.0 in set(pd.read_parquet(folder / "sgd-selection" / "runs.parquet")["lr"])   # sgd+sec's grid grown
    fine = pd.read_parquet(folder / "pretrained" / "runs.parquet")      # fine-tuned: their twins are main runs
    assert len(fine) == 4 * plan.FLOOR and set(fine["lr"]) == {3e-4} and set(fine["seed"]) == set(range(plan.FLOOR))
    assert set(fine["eta"]) == {0.0, 0.005, 0.1, 1.0}                # none, L2, SEC at the held-out η, relative SEC
    optim = pd.read_parquet(folder / "optim" / "runs.parquet")          # Adam's arms are the main comparison's
    assert set(optim["optimizer"]) == {"sgd"} and len(optim) == 2 * plan.FLOOR
    assert set(optim.loc[optim["eta"] > 0, "lr"]) == {1.0} and set(optim.loc[optim["eta"] == 0, "lr"]) == {0.1}
    keys = {}
    for stage, *_ in decisive.STAGES:
        runs = pd.read_parquet(folder / stage / "runs.parquet")
        assert len(runs) and not set(runs["key"]) & set(keys), stage       # no run in two stage folders
        keys.update(dict.fromkeys(runs["key"], stage))
    main = {run_key(c) for c in mainstage.configs(p)}
    assert not main & set(keys)                                            # nor one of the main comparison's
    assert len(trained) == len(keys) == len(set(map(run_key, trained)))
    extra = pd.read_parquet(folder / "extra" / "runs.parquet")
    assert set(extra["loss"]) == {"tml"} and len(extra) == 4 * plan.FLOOR  # none, L2, SEC selected and paper's η
    eta = pd.read_parquet(folder / "eta" / "runs.parquet")
    # ms: η = 0 and the grid's 5 weights at 3 seeds, less what the main comparison trained (η = 0, 0.1 and the
    # paper's 1.0 at seeds 0-2)
    assert len(eta) == 3 * (1 + len(ex.get_profile("reference").eta_grid)) - 3 * 3
    assert list(eta["seed"]) == sorted(eta["seed"])                       # seed by seed
    scale = pd.read_parquet(folder / "scale" / "runs.parquet")         # relative SEC and the fixed-scale control
    assert len(scale) == 2 * plan.FLOOR and set(scale["mu"]) == {"batch", "10.0"}
    early = pd.read_parquet(folder / "convergence" / "runs.parquet")     # the early prefixes of none and SEC
    assert len(early) == 2 * plan.FLOOR and set(early["iterations"]) == {2000}
    review = pd.read_parquet(folder / "review" / "runs.parquet")
    assert set(review["loss"]) == {"arcface"} and set(review["eta"]) == {0.0, 0.1}
    assert (pd.read_parquet(folder / "review-selection" / "runs.parquet")["holdout_classes"] > 0).all()
    # every trained arm is on a page: each run of a training stage, and of the main comparison, is named by
    # a sweep some page reads under the decisive profile (the held-out selections are the tiers page's)
    from sec_lib.chapters import PAGES
    prof, store = decisive.profile(), S.ResultStore()
    shown = {run_key(c) for page in PAGES for ch in page.evidence_sweeps for c in ex.sweep_configs(ch, prof, store)}
    for stage, _, how in decisive.STAGES:
        if how[0] == "train":
            missing = set(pd.read_parquet(folder / stage / "runs.parquet")["key"]) - shown
            assert not missing, (stage, len(missing))
    assert main <= shown
    # a rerun trains nothing: every stage is in the store (and would be restored from its folder)
    trained.clear()
    assert decisive_studies.train(decisive_studies.later_studies(), 500, store=S.ResultStore()) == 0 and trained == []
