"""Q6c, the registered follow-up to Q6b (``sec_lib.runs.sgdrates``): the tier's rate rule per loss and arm, grown at
an edge; the test runs are Q6b's with only the rate changed; the driver resumes and writes its choices once; the
optim page decides Q6c in its own family of 5, and only on the decisive tier."""
import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sec_lib.chapters import optim
from sec_lib.runs import followup, selection, sgdrates, study, tier
from sec_lib.runs import pool as P, store as S
from sec_lib.runs.experiments import run_key
from sec_lib.runs.train import RunResult

REPO = Path(__file__).resolve().parents[2]


class Plan:
    shape, length = "cosine", 3000


def result(c, score):
    """A stored record of ``c`` scoring ``score`` (NaN: a diverged run)."""
    e = pd.DataFrame({"step": [c.iterations], "R@1": [score]})
    ok = np.isfinite(score)
    return RunResult(c, "done" if ok else "failed", {"R@1": score} if ok else {}, e.iloc[:0], e.iloc[:0], e,
                     e.iloc[:0], e.iloc[:0], e.iloc[:0], error=None if ok else "non-finite loss at step 3")


class FakeStore:
    def __init__(self, score):
        self.score, self.have = score, {}

    def fill(self, configs):
        for c in configs:
            self.have[run_key(c)] = result(c, self.score(c))

    def has(self, c):
        return run_key(c) in self.have

    def get(self, c, tables=()):
        return self.have.get(run_key(c))


def test_a_rate_peaking_at_the_grid_edge_grows_the_grid_then_the_choice_is_final():
    peak = {"sgd": 3.0, "sgd+sec": 0.03}             # without SEC the best rate lies beyond the grid's high edge
    st = FakeStore(lambda c: 80 - abs(math.log10(c.lr / peak["sgd+sec" if c.eta else "sgd"])) + c.seed / 1e4)
    c, grid, need = sgdrates.choose(st, "triplet", "sgd", Plan)
    assert c is None and sorted({x.lr for x in need}) == list(selection.LR_GRID) and len(need) == 15 and grid == need
    assert all(x.loss == "triplet" and x.optimizer == "sgd" and x.holdout_classes > 0 and x.eta == 0 for x in need)
    st.fill(need)
    c, grid, need = sgdrates.choose(st, "triplet", "sgd", Plan)
    assert c is None and {x.lr for x in need} == {10.0} and {x.seed for x in need} == set(selection.SEEDS)
    assert {x.lr for x in grid} == {*selection.LR_GRID, 10.0}          # the grown grid, trained points included
    st.fill(need)
    c, grid, need = sgdrates.choose(st, "triplet", "sgd", Plan)
    assert need == [] and len(grid) == 18 and c.weight == 1.0 and c.needs is None and c.edge is None   # 1 beats 10: interior
    st.fill(sgdrates.selection_configs("triplet", "sgd+sec", selection.LR_GRID, Plan))
    c, _, need = sgdrates.choose(st, "triplet", "sgd+sec", Plan)
    assert need == [] and c.weight == 0.03


def test_a_diverged_seed_keeps_its_rate_from_being_chosen():
    st = FakeStore(lambda c: math.nan if (c.lr == 0.1 and c.seed == 1001) else 80 - abs(c.lr - 0.1))
    st.fill(sgdrates.selection_configs("ms", "sgd", selection.LR_GRID, Plan))
    c, _, _ = sgdrates.choose(st, "ms", "sgd", Plan)
    assert c.weight == 0.03 and c.scores[0.1] == -math.inf       # 0.03 and 0.3 tie without 0.1: the smaller rate


def test_bad_loss_is_refused_with_the_valid_ones():
    with pytest.raises(ValueError, match="triplet, npair, ms"):
        sgdrates.selection_configs("semihard", "sgd", (0.1,), Plan)


def test_the_test_runs_are_q6bs_runs_with_only_the_rate_changed():
    q6b = sgdrates.q6b_configs()
    assert len(q6b) == 40 and {c.optimizer for c in q6b} == {"sgd"} and {c.holdout_classes for c in q6b} == {0}
    rates = {"triplet": {"sgd": 0.3, "sgd+sec": 0.03}, "npair": {"sgd": 0.03, "sgd+sec": 0.03}}
    new = sgdrates.test_configs(rates)
    for a, b in zip(q6b, new):
        arm = "sgd+sec" if a.eta > 0 else "sgd"
        assert b.lr == rates.get(a.loss, {}).get(arm, a.lr)
        assert dataclasses.replace(b, lr=a.lr) == a           # nothing else changed
    kept = [(a, b) for a, b in zip(q6b, new) if a.loss not in rates]
    assert kept and all(run_key(a) == run_key(b) for a, b in kept)   # semihard, ms: Q6b's runs, the same keys


@pytest.fixture
def repo(tmp_path, monkeypatch, no_fsync):
    monkeypatch.setattr(tier, "REPO", tmp_path)
    monkeypatch.setattr(followup, "tier_plan", lambda: Plan)
    monkeypatch.setenv("SEC_RUNS_DIR", str(tmp_path / "runs"))
    return tmp_path


def test_the_driver_selects_writes_its_choices_then_trains_and_exports_the_test_runs(repo, monkeypatch, capsys):
    peak = {("triplet", False): 0.3, ("triplet", True): 0.03, ("npair", False): 0.01, ("npair", True): 0.03,
            ("ms", False): 1.0, ("ms", True): 0.03, ("semihard", False): 0.1, ("semihard", True): 0.1}
    base = [dataclasses.replace(c, iterations=10) for c in sgdrates.q6b_configs(REPO) if c.seed < 2]   # 2 seeds
    monkeypatch.setattr(sgdrates, "q6b_configs", lambda root=None: base)
    trained = []

    def score(c):
        s = 80 - abs(math.log10(c.lr / peak[(c.loss, c.eta > 0)])) + c.seed / 1e3 + (c.eta > 0) * 0.5
        return math.nan if (c.loss, c.eta > 0, c.lr) == ("ms", True, 1.0) else s     # diverged

    def fake_run_all(configs, root=None, jobs=1, **kw):
        store = S.ResultStore(root)
        for c in configs:
            store.save(result(c, score(c)))
            trained.append(c)
        return []
    # Q6b's runs are committed in the decisive tier's optim stage: semihard's are restored from it, never retrained
    q6b = S.ResultStore(repo / "q6b-store")
    for c in base:
        q6b.save(result(c, score(c)))
    tier.export(q6b, base, tier.tier_dir("decisive") / "optim")
    monkeypatch.setattr(P, "run_all", fake_run_all)
    final = study.run([sgdrates.STUDY], jobs=200)["sgd-rates"]          # one chunk a round: one export each
    assert {lo: {a: v["lr"] for a, v in arms.items()} for lo, arms in final.items()} == {
        "triplet": {"sgd": 0.3, "sgd+sec": 0.03}, "npair": {"sgd": 0.01, "sgd+sec": 0.03},
        "ms": {"sgd": 1.0, "sgd+sec": 0.03}}
    # ms without SEC peaks at 1, the high edge: its grid grew to 10; npair's at 0.01, the low edge: to 0.001
    assert {c.lr for c in trained if c.loss == "ms" and c.eta == 0} == {*selection.LR_GRID, 10.0}
    assert {c.lr for c in trained if c.loss == "npair" and c.eta == 0} == {0.001, *selection.LR_GRID}
    here = sgdrates.folder()
    assert json.loads((here / "choices.json").read_text()) == final == sgdrates.read_choices()
    assert final["ms"]["sgd+sec"]["scores"]["1"] is None and "Infinity" not in (here / "choices.json").read_text()
    sel = pd.read_parquet(here / "selection" / "runs.parquet")
    assert len(sel) == 3 * (6 * 5 + 2) and (sel["holdout_classes"] > 0).all()
    runs = sgdrates.test_runs()
    assert len(runs) == len(base) and (runs["holdout_classes"] == 0).all()
    assert not [c for c in trained if c.loss == "semihard"] and "committed decisive optim runs" in capsys.readouterr().out
    said = optim.followup_evidence_sentence("Q6c")
    assert said.startswith("**Evidence for Q6c:** the selection, 96 runs of 3,000 iterations on glyphs, scored on 400 held-out")
    assert "the test, 16 runs of 10 iterations" in said and "(4 of them Q6b's runs, reused)" in said
    assert set(runs.loc[(runs.loss == "ms") & (runs.variant == "none"), "lr"]) == {1.0}
    n = len(trained)
    assert study.run([sgdrates.STUDY], jobs=200)["sgd-rates"] == final and len(trained) == n          # a rerun resumes: nothing trains again
    table = sgdrates.rate_table()
    assert table.loc[table["chosen"], ["loss", "arm", "lr"]].values.tolist() == [
        ["triplet", "none", 0.3], ["triplet", "sec", 0.03], ["npair", "none", 0.01], ["npair", "sec", 0.03],
        ["ms", "none", 1.0], ["ms", "sec", 0.03]]
    said = optim.q6c_rates_sentence(table, {"semihard": {"none": 0.1, "sec": 0.2}})
    assert "N-pair: 0.01 without SEC, 0.03 with it" in said and "selection (0.1 without SEC, 0.2 with it)" in said
    curves = optim.q6c_selection_curves(table)
    assert set(curves["arm"]) == {"none", "sec"}
    assert curves.loc[curves["status"] == "failed", ["loss", "arm", "lr"]].values.tolist() == [["ms", "sec", 1.0]]
    assert curves["chosen"].sum() == 6 and list(curves.columns) == ["loss", "arm", "lr", "R@1", "status", "chosen"]


def test_test_runs_are_no_evidence_until_every_one_is_committed(repo, monkeypatch):
    with pytest.raises(KeyError, match="not final yet"):
        sgdrates.test_runs()
    sgdrates.write_choices({"triplet": {"sgd": {"lr": 0.3}, "sgd+sec": {"lr": 0.03}}})
    monkeypatch.setattr(sgdrates, "q6b_configs", lambda root=None, q=sgdrates.q6b_configs: q(REPO))
    with pytest.raises(KeyError, match="0 of 40"):
        sgdrates.test_runs()


def _runs(gain: dict, seeds=5) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rows = []
    for loss, g in gain.items():
        for s in range(seeds):
            base = 80 + rng.normal(0, 0.3)
            for v, add in (("none", 0.0), ("sec", g)):
                rows.append({"optimizer": "sgd", "loss": loss, "variant": v, "seed": s, "status": "done",
                             "R@1": base + add + rng.normal(0, 0.1), "lr": 0.1, "eta": 1.0 if v == "sec" else 0.0})
    return pd.DataFrame(rows)


def test_q6c_is_one_family_of_five_and_its_reading_names_it():
    fam = optim.followup_family(_runs({"triplet": 1.0, "semihard": 0.8, "npair": 1.2, "ms": 0.9}), "Q6c")
    assert len(fam["diffs"]) == 4 and len(fam["pooled"]) == 1
    assert {int(m) for t in fam.values() for m in t["m"]} == {5}
    assert set(fam["pooled"]["family"]) == {sgdrates.FAMILY} and fam["pooled"]["verdict"].iloc[0] == "reproduced"
    reading = optim.page_reading({"pooled": fam["pooled"].iloc[:0], "balance": pd.DataFrame()}, None, {"Q6c": "- **Q6c** x"})
    assert "- **Q6c** x" in reading and f"Each registered follow-up (Q6c) is decided in a Holm family of its own " \
                                         f"({sgdrates.FAMILY}); every other verdict" in reading


def test_q6c_has_no_evidence_on_a_tier_other_than_the_decisive_one():
    from sec_lib.chapters.evidence import Evidence

    class Ev(Evidence):
        def profile_of(self, sweep):
            return "cpu"
    ev = Ev.from_frames({"optim": object()}, "cpu")
    with pytest.raises(KeyError, match="the cpu tier has none"):
        optim.followup_evidence(ev, "Q6c")
    claim = next(c for c in optim.CLAIMS if c.id == "Q6c")
    assert claim.family == sgdrates.FAMILY and claim.expected_sign == +1


def test_a_restart_keeps_the_grown_points_of_a_finished_grid_in_the_export(repo, monkeypatch):
    """A grid grown and final in one process (N-pair's, to 0.001) is exported whole by a later process that still has
    other selection runs to train: the export writes only the runs it is named."""
    monkeypatch.setattr(sgdrates, "q6b_configs", lambda root=None: [])
    store = S.ResultStore(repo / "runs")
    peak = {"npair": 0.01}

    def fill(configs):
        for c in configs:
            store.save(result(c, 80 - abs(math.log10(c.lr / peak.get(c.loss, 0.1))) + c.seed / 1e3))
    for _ in range(2):                                   # N-pair without SEC: the grid, then its grown point
        fill(sgdrates.choose(store, "npair", "sgd", Plan)[2])
    assert {c.lr for c in sgdrates.choose(store, "npair", "sgd", Plan)[1]} == {0.001, *selection.LR_GRID}
    trained = []

    def fake_run_all(configs, root=None, jobs=1, **kw):
        fill(configs)
        trained.extend(configs)
        return []
    monkeypatch.setattr(P, "run_all", fake_run_all)
    study.run([sgdrates.STUDY], jobs=200)["sgd-rates"]
    sel = pd.read_parquet(sgdrates.folder() / "selection" / "runs.parquet")
    grown = sel[(sel["loss"] == "npair") & (sel["eta"] == 0)]
    assert set(grown["lr"]) == {0.001, *selection.LR_GRID} and len(grown) == 18
    assert not [c for c in trained if c.loss == "npair" and c.eta == 0]    # nothing of that grid trained again


def test_the_page_shows_q6c_only_where_it_shows_the_decisive_tier():
    from sec_lib.chapters.evidence import Evidence

    class Ev(Evidence):
        def __init__(self, tier):
            super().__init__("x", {"optim": object()}, loader=lambda ch: None)
            self.shown = tier

        def profile_of(self, sweep):
            return self.shown
    assert optim.followups_apply(Ev("decisive")) and not optim.followups_apply(Ev("cub-smoke"))
    said = optim.followup_absent(Ev("cub-smoke"), "Q6c")
    assert "the cub-smoke tier, which has none" in said and "glyph" not in said
