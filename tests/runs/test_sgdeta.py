"""Q6d, the registered follow-up to Q6c (``sec_lib.runs.sgdeta``): the tier's η rule per loss at the SGD rate of its
arm without SEC, grown at an edge, η = 0 allowed to win; its η = 0 and paper-η points are Q6c's runs; the test runs
are Q6b's at that rate with only η changed, the arm without SEC Q6c's; the driver resumes and reuses."""
import dataclasses
import json
import math
from pathlib import Path

import pandas as pd
import pytest

from sec_lib.runs import followup, selection, sgdeta, sgdrates, study, tier
from sec_lib.runs import pool as P, store as S
from sec_lib.runs.experiments import run_key

from test_sgdrates import FakeStore, Plan, result

REPO = Path(__file__).resolve().parents[2]
RATES = {"triplet": 0.3, "semihard": 0.1, "npair": 0.01, "ms": 0.3}


def test_a_best_eta_at_the_low_edge_grows_the_grid_down_then_the_choice_is_final():
    st = FakeStore(lambda c: 80 - abs(math.log10((c.eta or 1e-9) / 5e-4)) + c.seed / 1e4)   # peaks below 0.005
    c, grid, need = sgdeta.choose(st, "triplet", 0.3, Plan)
    assert c is None and grid == need and len(need) == 3 * (1 + len(selection.ETA_GRID))
    assert {x.eta for x in need} == {0.0, *selection.ETA_GRID} and {x.seed for x in need} == set(selection.SEEDS)
    assert all(x.loss == "triplet" and x.optimizer == "sgd" and x.lr == 0.3 and x.holdout_classes > 0 for x in need)
    assert {x.variant for x in need if x.eta == 0} == {"none"} and {x.variant for x in need if x.eta} == {"sec"}
    st.fill(need)
    c, grid, need = sgdeta.choose(st, "triplet", 0.3, Plan)
    assert c is None and {x.eta for x in need} == {0.0005} and len(grid) == 21
    st.fill(need)
    c, grid, need = sgdeta.choose(st, "triplet", 0.3, Plan)      # 0.0005 is the low edge now: grown once more
    assert c is None and {x.eta for x in need} == {0.00005}
    st.fill(need)
    c, grid, need = sgdeta.choose(st, "triplet", 0.3, Plan)
    assert need == [] and len(grid) == 24 and c.weight == 0.0005 and c.edge is None and c.needs is None


def test_when_no_sec_wins_sec_is_not_selected_and_its_best_eta_is_tested():
    st = FakeStore(lambda c: 85.0 if c.eta == 0 else (math.nan if c.eta >= 0.5 else 84 - c.eta))
    st.fill(sgdeta.selection_configs("ms", (0.0, *selection.ETA_GRID), 0.3, Plan))
    c, _, need = sgdeta.choose(st, "ms", 0.3, Plan)
    while need:                          # 0.005, the low edge, is the best nonzero η: the grid grows, twice at most
        st.fill(need)
        c, _, need = sgdeta.choose(st, "ms", 0.3, Plan)
    assert c.weight == 0.0 and c.best_nonzero == 0.00005 and c.edge == "low" and c.scores[0.5] == -math.inf
    assert any("SEC not selected" in f for f in c.flags_for("SEC"))


def test_bad_loss_is_refused_with_the_valid_ones():
    with pytest.raises(ValueError, match="triplet, semihard, npair, ms"):
        sgdeta.selection_configs("ntxent", (0.0,), 0.1, Plan)


def test_its_no_sec_and_paper_eta_points_are_the_tiers_sgd_rate_runs():
    plan = followup.tier_plan()
    for loss in sgdrates.LOSSES:
        assert [run_key(c) for c in sgdeta.selection_configs(loss, (0.0,), 0.3, plan)] == \
            [run_key(c) for c in sgdrates.selection_configs(loss, "sgd", (0.3,), plan)]
        assert [run_key(c) for c in sgdeta.selection_configs(loss, (1.0,), 0.03, plan)] == \
            [run_key(c) for c in sgdrates.selection_configs(loss, "sgd+sec", (0.03,), plan)]
    semi = sgdeta.selection_configs("semihard", (0.0, 0.5), 0.1, plan)
    assert [run_key(c) for c in semi] == [run_key(c) for a in selection.RATE_ARMS
                                          for c in selection.rate_configs(a, (0.1,), plan.shape, plan.length)]


def test_the_rates_are_q6cs_choices_without_sec_and_q6bs_for_semihard():
    assert sgdeta.base_rates() == {lo: sgdrates.read_choices()[lo]["sgd"]["lr"] if lo in sgdrates.LOSSES
                                   else followup.q6b_rates()[lo]["none"] for lo in sgdeta.LOSSES}


def test_the_test_runs_are_q6bs_at_the_rate_without_sec_and_the_chosen_eta():
    rates = sgdeta.base_rates()
    chosen = {lo: {"lr": rates[lo], "tested": 0.05} for lo in sgdeta.LOSSES}
    q6b, new = sgdrates.q6b_configs(), sgdeta.test_configs(chosen)
    assert len(new) == 40
    for a, b in zip(q6b, new):
        assert b.lr == rates[a.loss] and b.eta == (0.05 if a.eta > 0 else 0.0)
        assert dataclasses.replace(b, lr=a.lr, eta=a.eta) == a            # nothing else changed
    q6c = sgdrates.test_configs({lo: {a: v["lr"] for a, v in arms.items()}
                                 for lo, arms in sgdrates.read_choices().items()})
    assert {run_key(c) for c in new if c.eta == 0} == {run_key(c) for c in q6c if c.eta == 0}   # Q6c's, reused


@pytest.fixture
def repo(tmp_path, monkeypatch, no_fsync):
    monkeypatch.setattr(tier, "REPO", tmp_path)
    monkeypatch.setattr(followup, "tier_plan", lambda: Plan)
    monkeypatch.setenv("SEC_RUNS_DIR", str(tmp_path / "runs"))
    return tmp_path


def test_no_rates_without_q6cs_choice(repo):
    with pytest.raises(KeyError, match="Q6d needs Q6c's rates"):
        sgdeta.base_rates()
    with pytest.raises(KeyError, match="not final yet"):
        sgdeta.test_runs()


def test_the_driver_selects_writes_its_choices_then_trains_and_exports_the_test_runs(repo, monkeypatch, capsys):
    peak = {"triplet": 0.05, "semihard": 0.5, "npair": 0.0, "ms": 1.0}     # npair: no SEC wins
    base = [dataclasses.replace(c, iterations=10) for c in sgdrates.q6b_configs(REPO) if c.seed < 2]   # 2 seeds
    monkeypatch.setattr(followup, "q6b_configs", lambda root=None: base)
    sgdrates.write_choices({lo: {"sgd": {"lr": RATES[lo]}, "sgd+sec": {"lr": 0.03}} for lo in sgdrates.LOSSES})
    trained = []

    def score(c):
        if c.loss == "npair":
            return 85.0 - 10 * c.eta + c.seed / 1e3
        return 80 - abs(math.log10(max(c.eta, 1e-6) / peak[c.loss])) + c.seed / 1e3

    def fake_run_all(configs, root=None, jobs=1, **kw):
        store = S.ResultStore(root)
        for c in configs:
            store.save(result(c, score(c)))
            trained.append(c)
        return []
    q6b = S.ResultStore(repo / "q6b-store")             # Q6b's runs, committed: semihard's none arm among them
    for c in base:
        q6b.save(result(c, score(c)))
    tier.export(q6b, base, tier.tier_dir("decisive") / "optim")
    monkeypatch.setattr(P, "run_all", fake_run_all)
    final = study.run([sgdeta.STUDY], jobs=500)["sgd-eta"]
    assert {lo: (v["lr"], v["eta"], v["tested"]) for lo, v in final.items()} == {
        "triplet": (0.3, 0.05, 0.05), "semihard": (0.1, 0.5, 0.5), "npair": (0.01, 0.0, 0.00005), "ms": (0.3, 1.0, 1.0)}
    assert any("not selected" in f for f in final["npair"]["flags"])
    assert {c.eta for c in trained if c.loss == "npair"} >= {0.0005, 0.00005}      # grown twice at the low edge
    here = sgdeta.folder()
    assert json.loads((here / "choices.json").read_text()) == final == sgdeta.read_choices()
    runs = sgdeta.test_runs()
    assert len(runs) == len(base) and (runs["holdout_classes"] == 0).all()
    assert set(runs.loc[runs.variant == "sec", "eta"]) == {0.05, 0.5, 0.00005, 1.0}
    assert set(runs.loc[runs.variant == "none", "lr"]) == {0.3, 0.1, 0.01}
    assert not [c for c in trained if c.holdout_classes == 0 and c.loss == "semihard" and c.eta == 0]   # Q6b's
    assert "committed decisive optim runs" in capsys.readouterr().out
    from sec_lib.chapters import optim
    said = optim.followup_evidence_sentence("Q6d")
    assert said.startswith("**Evidence for Q6d:** the selection, ") and "reused" not in said.split("; the test")[0]
    assert "(4 of them Q6b's runs, reused)" in said          # semihard's test runs: Q6b's, both arms (η 0.5 won)
    n = len(trained)
    assert study.run([sgdeta.STUDY], jobs=500)["sgd-eta"] == final and len(trained) == n          # a rerun resumes: nothing trains again


def test_the_eta_table_the_sentence_and_the_figure_read_the_committed_selection(repo, monkeypatch):
    from sec_lib.chapters import optim
    from sec_lib.figures import sweeps
    score = {0.0: 85.0, 0.005: 84.0, 0.05: 86.0, 0.1: 85.5, 0.5: math.nan, 1.0: math.nan}
    st = S.ResultStore(repo / "runs")
    cfgs = sgdeta.selection_configs("ms", (0.0, *selection.ETA_GRID), 0.3, Plan)
    for c in cfgs:
        st.save(result(c, score[c.eta]))
    tier.export(st, cfgs, sgdeta.folder() / "selection")
    assert optim.q6d_eta_sentence(sgdeta.eta_table()) == "Q6d's held-out selection is not final yet."
    sgdeta.write_choices({"ms": {"lr": 0.3, "eta": 0.05, "tested": 0.05}})
    table = sgdeta.eta_table()
    assert table["eta"].tolist() == [0.0, *selection.ETA_GRID] and (table["seeds"] == 3).all()
    assert table.loc[table["failed"] > 0, "eta"].tolist() == [0.5, 1.0] and table["R@1"].isna().sum() == 2
    assert table.loc[table["chosen"], "eta"].tolist() == [0.05] == table.loc[table["tested"], "eta"].tolist()
    assert optim.q6d_eta_sentence(table) == "Chosen on held-out classes, by the tier's η rule: multi-similarity at lr 0.3: η 0.05."
    sgdeta.write_choices({"ms": {"lr": 0.3, "eta": 0.0, "tested": 0.05}})
    said = optim.q6d_eta_sentence(sgdeta.eta_table())
    assert "multi-similarity at lr 0.3: no SEC scored best, so SEC was not selected; its best η, 0.05, is tested" in said
    curves = optim.q6d_selection_curves(sgdeta.eta_table())
    assert curves.loc[curves["arm"] == "none", "eta"].tolist() == [0.0] and curves["chosen"].sum() == 1
    fig = sweeps.pilot_figure(curves, panel="loss", x="eta")
    ax = fig.axes[0]
    assert ax.get_xlabel() == "SEC's η" and any(l.get_linestyle() == "--" and l.get_ydata()[0] == 85.0
                                                for l in ax.get_lines())
    with pytest.raises(ValueError, match="'lr' or 'eta'"):
        sweeps.pilot_figure(curves, panel="loss", x="mu")


def test_q6d_is_its_own_family_of_five_and_the_reading_names_both_follow_ups():
    from sec_lib.chapters import optim
    from test_sgdrates import _runs
    fam = optim.followup_family(_runs({"triplet": -1.0, "semihard": -0.8, "npair": -1.2, "ms": -0.9}), "Q6d")
    assert {int(m) for t in fam.values() for m in t["m"]} == {5} and set(fam["pooled"]["family"]) == {sgdeta.FAMILY}
    assert fam["pooled"]["verdict"].iloc[0] == "not reproduced"
    reading = optim.page_reading({"pooled": fam["pooled"].iloc[:0], "balance": pd.DataFrame()}, None,
                                 {"Q6c": "- **Q6c** x", "Q6d": "- **Q6d** y"})
    assert "- **Q6c** x\n- **Q6d** y" in reading
    assert (f"Each registered follow-up (Q6c and Q6d) is decided in a Holm family of its own ({sgdrates.FAMILY}; "
            f"{sgdeta.FAMILY}); every other verdict") in reading
    with pytest.raises(ValueError, match="valid values: Q6c, Q6d"):
        optim.followup_family(fam["diffs"], "Q6e")


def test_the_answer_for_sgd_groups_the_verdicts_by_the_eta_sec_trained_at():
    """Q6b and Q6c train SEC at the paper's η, Q6d at a held-out one: the page's answer for SGD says whether the
    verdict depends on η, from the records (a claim without an estimate on this tier is left out)."""
    import dataclasses
    from sec_lib.chapters import optim
    from sec_lib.report.claims import ClaimRecord
    base = ClaimRecord(id="", statement="s", page="optim", href="optim.html", family="f", unit="pp", expected_sign=1,
                       estimate=0.0, ci_lo=-1.0, ci_hi=1.0, n=5, n_counts="seeds", p_value=0.5, p_adj=0.5, m=5,
                       mde=1.0, verdict="")

    def R(**kw):                                            # a decided record, as page_records gives them
        return dataclasses.replace(base, **kw)
    q6b, q6c, q6d = (R(id="Q6b", verdict="not reproduced", estimate=-2.54), R(id="Q6c", verdict="not reproduced",
                     estimate=-1.82), R(id="Q6d", verdict="reproduced", estimate=0.85))
    assert optim.sgd_answer([q6d, q6c, q6b, R(id="C4", verdict="reproduced", estimate=0.4)]) == (
        "And *does SEC help under SGD?* It depends on SEC's η: at the paper's η, Q6b **not reproduced** (-2.54 points) "
        "and Q6c **not reproduced** (-1.82 points); at an η chosen for SGD on held-out classes, Q6d **reproduced** "
        "(+0.85 points).")
    same = optim.sgd_answer([q6b, R(id="Q6d", verdict="not reproduced", estimate=-0.9)])
    assert same.startswith("And *does SEC help under SGD?* The verdict is the same at every η tested: at the paper's η, "
                           "Q6b **not reproduced** (-2.54 points); at an η chosen")
    quick = optim.sgd_answer([R(id="Q6b", verdict="inconclusive", estimate=0.3),
                              R(id="Q6c", verdict="not testable offline", estimate=float("nan")),
                              R(id="Q6d", verdict="not testable offline", estimate=None)])
    assert quick == "And *does SEC help under SGD?* Only the paper's η was tested here: Q6b **inconclusive** (+0.30 points)."
    assert optim.sgd_answer([]) == ""
    fam = optim.followup_family(__import__("test_sgdrates")._runs({"triplet": 1.0, "semihard": 0.8, "npair": 1.2,
                                                                     "ms": 0.9}), "Q6d")
    reading = optim.page_reading({"pooled": fam["pooled"].iloc[:0], "balance": pd.DataFrame()}, None,
                                 {"Q6d": "- **Q6d** y"}, "And *does SEC help under SGD?* z")
    assert "- **Q6d** y\n\nAnd *does SEC help under SGD?* z\n\nEach registered follow-up (Q6d)" in reading


def test_a_committed_choice_is_never_rewritten_by_a_different_one(tmp_path, no_fsync):
    path = tmp_path / "choices.json"
    followup.settle_choices(path, {"ms": {"eta": 0.05}})
    followup.settle_choices(path, {"ms": {"eta": 0.05}})                  # the same choice: a rerun is fine
    with pytest.raises(RuntimeError, match="differs from the selection's runs"):
        followup.settle_choices(path, {"ms": {"eta": 0.5}})
    assert followup.read_json(path) == {"ms": {"eta": 0.05}}


def test_q6d_joins_the_scorecard_with_its_committed_test_runs_not_before():
    """A registered follow-up's claim is on the scorecard once its test runs are committed; until then the page says
    its runs are underway (no 'not testable offline' verdict for a test that is merely not finished)."""
    from sec_lib.chapters import optim
    try:
        sgdeta.test_runs()
        committed = True
    except KeyError:
        committed = False
    claims = {c.id: c for c in optim.CLAIMS}
    if committed:
        assert "Q6d" in claims, "Q6d's test runs are committed: add its Claim (family sgdeta.FAMILY) to optim.CLAIMS"
        assert claims["Q6d"].family == sgdeta.FAMILY and claims["Q6d"].expected_sign == +1
    else:
        assert "Q6d" not in claims


def test_a_follow_up_without_its_claim_reads_as_underway():
    from sec_lib.chapters import optim
    from sec_lib.chapters.evidence import Evidence

    class Ev(Evidence):
        def __init__(self):
            super().__init__("x", {"optim": object()}, loader=lambda ch: None)

        def profile_of(self, sweep):
            return "decisive"
    said = optim.followup_reading(Ev(), "Q6d") if "Q6d" not in {c.id for c in optim.CLAIMS} else ""
    if said:
        assert said.startswith("- **sgd, SEC's η chosen on held-out classes at the rate without SEC** (Q6d, a "
                               "registered follow-up): its runs are underway, so it is not on the scorecard yet.")
        assert "testable" not in said
