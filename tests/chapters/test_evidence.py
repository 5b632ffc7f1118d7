"""Which tier a page shows: the decisive tier only when it holds every run; the two tiers side by side."""
import math

import pandas as pd
import pytest

from sec_lib.chapters import PAGES

from sec_lib.runs import experiments as ex
from sec_lib.runs import tier
from sec_lib.chapters import evidence
from sec_lib.runs.pool import run_all
from sec_lib.runs.store import ResultStore
from sec_lib.runs.train import TrainConfig


def gains(rows):
    return pd.DataFrame([dict(zip(("loss", "variant", "estimate", "ci_lo", "ci_hi", "verdict"), r), metric="R@1")
                         for r in rows])


def test_sign_agreement_pairs_rows_and_compares_signs():
    main = gains([("triplet", "sec", 1.0, 0.2, 1.8, "reproduced"), ("ms", "sec", -0.5, -1.0, 0.0, "inconclusive"),
                  ("npair", "sec", 0.3, -0.1, 0.7, "inconclusive")])
    quick = gains([("triplet", "sec", 2.0, -1.0, 5.0, "inconclusive"), ("ms", "sec", 0.4, -2.0, 2.8, "inconclusive"),
                   ("cosface", "sec", 1.0, math.nan, math.nan, "inconclusive")])
    t = evidence.sign_agreement(main, quick)
    same = dict(zip(t["loss"], t["same sign"]))
    assert same == {"triplet": "yes", "ms": "no", "npair": "n/a", "cosface": "n/a"}
    row = t[t["loss"] == "triplet"].iloc[0]
    assert row["decisive"] == "+1.00 [+0.20, +1.80]" and row["quick verdict"] == "inconclusive"
    assert t[t["loss"] == "cosface"].iloc[0]["quick"] == "+1.00"        # no interval: the estimate alone
    s = evidence.agreement_sentence(t)
    assert "1 of 2" in s and s.endswith("opposite sign for ms (sec).")


def test_the_decisive_tier_takes_a_page_over_once_its_stages_hold_every_run(monkeypatch, tmp_path):
    """The staged decisive tier is shown page by page, only when its stage folders hold every run of the page's
    sweeps, and the quick tier until then; the tier sentence says which tier is shown. The retired reference tier
    is never shown, even where its folder would hold every run."""
    cfgs = [TrainConfig(dataset="toy", model="mlp", width=8, embed_dim=4, iterations=6, batch_size=12, eval_every=3,
                        track_every=2, track_samples=2, dtheta_every=2, seed=s, data_kwargs={"num_classes": 12})
            for s in (0, 1, 2)]
    store = ResultStore(tmp_path / "store")
    run_all(cfgs, root=store.root, jobs=1)
    tier.export(store, cfgs[:2], tmp_path / "reference")                # the retired tier holds both runs
    tier.export(store, cfgs[:1], tmp_path / "decisive" / "main")       # one stage of two runs' worth committed
    monkeypatch.setattr(evidence, "tier_dir", lambda name: tmp_path / name)
    monkeypatch.setattr(evidence, "has_tier", lambda name: bool(tier.stage_dirs(tmp_path / name))
                        or (tmp_path / name / "runs.parquet").exists())
    need = {"compare": cfgs[:2], "eta": cfgs[2:]}          # the decisive tier names a third run for 'eta' alone
    monkeypatch.setattr(ex, "sweep_configs", lambda ch, profile, store: need[ch] if profile == "decisive" or
                        ch == "compare" else [])
    assert evidence.MAIN_TIERS == ("decisive",)
    assert evidence.evidence_profile("cpu", ("compare",)) == "cpu"                # decisive: 1 of 2 runs in
    tier.export(store, cfgs[1:2], tmp_path / "decisive" / "later")               # a second stage completes it
    assert evidence.evidence_profile("cpu", ("compare",)) == "decisive"
    assert evidence.evidence_profile("cpu", ("compare",), root=tmp_path) == "cpu"   # an explicit store wins
    assert evidence.evidence_profile("cpu", ("compare", "eta")) == "cpu"         # the decisive tier lacks 'eta'
    assert evidence.evidence_profile("decisive", ("compare", "eta")) == "decisive"   # a long tier shows itself
    assert evidence.evidence_profile("gpu", ("compare",)) == "gpu"
    with pytest.raises(Exception, match="profile"):
        evidence.evidence_profile("fast", ("compare",))
    sentences = {}
    monkeypatch.setattr(evidence, "tier_runs", lambda profile, sweeps, root=None: pd.DataFrame())
    for shown in ("decisive", "cpu"):
        sentences[shown] = evidence.tier_sentence(shown, "cpu", ("compare",))
    assert "the decisive tier**" in sentences["decisive"] and "data/reference/decisive/" in sentences["decisive"]
    assert "takes this page over" not in sentences["decisive"]
    assert "No committed tier (decisive) holds every run" in sentences["cpu"]
    # before its plan is written the decisive profile does not exist: no page is covered, nothing fails
    monkeypatch.undo()
    monkeypatch.setattr(evidence, "tier_dir", lambda name: tmp_path / name)
    monkeypatch.setattr(evidence, "has_tier", lambda name: bool(tier.stage_dirs(tmp_path / name)))
    monkeypatch.setattr(tier, "REPO", tmp_path / "repo")                     # no plan.json there
    evidence._covers.cache_clear()
    assert not evidence.covers("decisive", ("compare",))


def test_the_tally_counts_the_decisive_tier_as_committed_evidence():
    from sec_lib.chapters import claims
    assert claims.is_long_tier("decisive") and claims.is_long_tier("decisive/gpu")
    assert not claims.is_long_tier("reference")                  # retired: no page reads it, the tally never counts it
    assert not claims.is_long_tier("decisive/cpu") and not claims.is_long_tier("")


def test_every_chapter_page_names_its_tier_and_loads_through_it():
    """Each chapter notebook gets its one evidence object from page_evidence (the sweeps it reads are
    declared once, in PAGES), says which tier with tier_sentence, and loads through that evidence or
    its tier (T), never the raw profile (but for the quick tier set beside it)."""
    import json
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    for name in ("compare", "table1", "norms", "eta", "mu", "bnwn", "normlayer", "optim", "convergence",
                 "instability", "ssl", "npair", "face", "fairness", "home"):
        cells = ["".join(c["source"]) for c in json.loads((repo / "notebooks" / f"{name}.ipynb").read_text())["cells"]
                 if c["cell_type"] == "code"]
        pick = next(c for c in cells if "evidence.page_evidence(" in c)
        assert f'evidence.page_evidence("{name}", P["profile"])' in pick and "T = EV.profile" in pick, name
        assert "SWEEPS" not in "".join(cells), name                       # no second declaration of the sweeps
        assert "evidence.tier_sentence(T" in pick and "EV.sweeps" in pick, name
        later = [c for c in cells[cells.index(pick) + 1:] if 'if T != P["profile"]' not in c]   # but the quick tier beside
        assert not any("load(" in c and 'P["profile"]' in c.split("load(")[1].split(")")[0] for c in later), name
    reads = {p.source: p.evidence_sweeps for p in PAGES}
    # the landing page states the compare page's claim C4v beside its own per-loss rows: one tier for both (when the
    # decisive tier held the main comparison but not yet tml and CosFace, the landing page showed it while the compare
    # page, and so C4v, still read the reference tier)
    assert reads["home"] == reads["compare"]


def test_the_tiers_page_lists_the_tier_of_every_chapter_page(monkeypatch):
    from sec_lib.chapters import tiers
    monkeypatch.setattr(evidence, "has_tier", lambda name: False)
    t = tiers.page_tiers("cpu")
    assert set(t["tier shown"]) == {"cpu"} and {"compare", "mu", "home", "fairness"} <= set(t["page"])
    assert not t["reads"].str.contains("selection").any()
    # what each page waits for: the sweeps the decisive tier does not hold yet
    held = {"compare", "tuned", "beyond", "norms", "selection"}
    monkeypatch.setattr(evidence, "covers", lambda tier, sweeps: tier == "decisive" and set(sweeps) <= held)
    t = tiers.page_tiers("cpu").set_index("page")
    col = "not yet in the decisive tier"
    assert t.loc["compare", "tier shown"] == "decisive" and t.loc["compare", col] == "—"
    assert t.loc["norms", "tier shown"] == "cpu" and t.loc["norms", col] == "bnwn"
    # ftrates is a selection sweep (the fine-tuning rates): a staged tier never holds one on its own (covers), so
    # listing it would never clear; the pretrained runs made from its choice are what the page waits for
    assert t.loc["pretrained", "reads"] == "ftrates, pretrained" and t.loc["pretrained", col] == "pretrained"


def test_the_smoke_profile_checks_the_pipeline_and_shows_its_own_runs(monkeypatch):
    monkeypatch.setattr(evidence, "covers", lambda tier, sweeps: tier == "decisive")
    assert evidence.evidence_profile("smoke", ("compare",)) == "smoke"
    assert evidence.evidence_profile("cpu", ("compare",)) == "decisive"


@pytest.mark.skipif(not tier.has_tier("decisive"), reason="no committed decisive tier")
def test_the_committed_decisive_tier_renders_the_headline():
    """The pages that read the committed decisive tier compute from it (the smoke book does not render them: its
    profile shows its own runs)."""
    from sec_lib.chapters import home
    if not evidence.covers("decisive", ("main",)):
        pytest.skip("the committed decisive tier does not yet hold the main comparison")
    g = home.headline_gains("decisive")
    assert set(g["setting"]) == {"selected", "paper"} and (g["n"] >= 5).all()
    assert g["estimate"].notna().all() and (g["ci_lo"] < g["ci_hi"]).all()
    s = evidence.tier_sentence("decisive", "cpu", ("main",))
    assert s.startswith("**Evidence on this page: the decisive tier**") and "13,500 iterations" in s
    n = len(evidence.tier_runs("decisive", ("main",)))
    assert s.startswith(f"**Evidence on this page: the decisive tier**, {n} runs of 13,500 iterations (every run of "
                        "this tier's sweeps that the page draws on; a registered follow-up's runs are counted in its own "
                        "section) on ")


@pytest.mark.skipif(not tier.has_tier("decisive"), reason="no committed decisive tier")
def test_the_mu_page_labels_the_committed_tier_without_a_quick_store(tmp_path, monkeypatch):
    """The μ page names each run's setting from keys that hold the pilot's learning rate: read from the
    committed tier, not from the (here empty) quick store. It read the quick store, so the page failed
    with a KeyError as soon as a committed tier held the chapter."""
    from sec_lib.chapters import common, mu
    if not evidence.covers("decisive", ("mu",)):
        pytest.skip("the committed decisive tier does not yet hold the μ chapter")
    monkeypatch.setenv("SEC_RUNS_DIR", str(tmp_path / "empty"))
    runs = mu.label_mu(common.load("mu", "decisive", tables=()).runs, "decisive")
    assert runs["setting"].notna().all()
    assert set(runs["setting"]) == set(mu.mu_order("decisive"))
    assert (runs.groupby(["loss", "setting"]).size() >= 3).all()            # at least 3 seeds per loss and setting


def test_claims_tier_agreement_uses_the_same_sign_rule():
    from sec_lib.chapters import claims
    t = pd.DataFrame({"claim": ["A", "B", "C", "D"], "tier": ["decisive", "decisive", "decisive", "cpu"],
                      "estimate": [1.0, -0.5, math.nan, 2.0], "evidence": list("abcd"), "verdict": list("vwxy")})
    q = pd.DataFrame({"claim": ["A", "B", "C", "D"], "tier": ["cpu"] * 4, "estimate": [2.0, 0.3, 1.0, 1.0],
                      "evidence": list("efgh"), "verdict": list("vwxy")})
    a = claims.tier_agreement(t, q)
    assert a["claim"].tolist() == ["A", "B", "C"]                       # D reads the quick tier itself
    assert a["same sign"].tolist() == ["yes", "no", "n/a"]
    assert a["decisive tier"].tolist() == ["a", "b", "c"] and a[claims.QUICK_COLUMNS[0]].tolist() == ["e", "f", "g"]
    assert all("no verdict" in c or "not used" in c for c in claims.QUICK_COLUMNS)     # labelled as read by no verdict


def test_a_chapters_runs_carry_the_sweep_labels_they_were_made_with(tmp_path, monkeypatch, no_fsync):
    """Experiments emits each μ run's setting with the run (mu_runs); load() adds it as a column, so the
    μ page reads it instead of recovering it from the configs. A frame without it is refused, naming the fix."""
    from sec_lib.chapters import common, mu
    from sec_lib.runs import experiments as ex
    from sec_lib.runs.store import ResultStore, run_key
    from sec_lib.runs.train import RunResult
    p = ex.get_profile("smoke")
    made = ex.mu_runs(p)
    assert [c for c, _ in made] == ex.mu_ablation(p)                           # the same runs, labelled
    assert {lab["setting"] for _, lab in made} == set(mu.mu_order(p))
    store = ResultStore(tmp_path)
    monkeypatch.setattr(ex, "tuned", lambda prof, opt, st: prof)            # no pilot: the profile's own rate
    monkeypatch.setattr(common, "store_for", lambda name, root=None: store)
    e = pd.DataFrame({"step": [1], "R@1": [1.0]})
    for c, _ in made:
        store.save(RunResult(c, "done", {"R@1": 1.0}, e.iloc[:0], e.iloc[:0], e, e.iloc[:0], e.iloc[:0], e.iloc[:0]))
    runs = common.load("mu", p, tables=()).runs
    want = {run_key(c): lab["setting"] for c, lab in made}
    assert dict(zip(runs["key"], runs["setting"])) == want and mu.label_mu(runs) is runs
    assert ex.sweep_labels("bnwn", p, store) == {}                         # no labels: no columns added
    main = ex.sweep_labels("compare", p, store)                            # the main table labels its runs
    assert set(main) == {run_key(c) for c in ex.main_table(p)} == set(ex.sweep_labels("norms", p, store))
    assert {c.variant: main[run_key(c)]["eta_arm"] for c in ex.main_table(p)} == {"none": "", "l2reg": "",
                                                                                   "sec": "paper"}
    assert all(lab["main_table"] for lab in main.values())
    assert ex.is_main_table_run(ex.main_table(p)[0], p, store)
    shared = {lab["setting"] for c, lab in made if ex.is_main_table_run(c, p, store)}
    assert shared and shared < {lab["setting"] for _, lab in made}           # the μ sweep reuses some of them, not all
    with pytest.raises(ValueError, match="setting"):
        mu.label_mu(runs.drop(columns="setting"))


def test_sec_rows_are_named_for_the_eta_arm_their_runs_were_made_with():
    """The η arm travels as a label (experiments.main_table_runs / tuned_sec_runs), not recovered from η: the gains
    carry it, and name_eta_arms names SEC's rows by it (an L2 row keeps its variant; no label is an error)."""
    from sec_lib.chapters import compare
    rows = []
    for arm, chapter_eta in (("paper", 1.0), ("selected", 0.1)):
        for seed in range(3):
            rows += [{"loss": "ms", "variant": "none", "seed": seed, "R@1": 50.0 + seed, "eta_arm": ""},
                     {"loss": "ms", "variant": "sec", "seed": seed, "R@1": 51.0 + seed * 1.1, "eta_arm": arm,
                      "eta": chapter_eta},
                     {"loss": "ms", "variant": "l2reg", "seed": seed, "R@1": 49.0 + seed, "eta_arm": ""}]
    paper, selected = pd.DataFrame(rows[:9]), pd.DataFrame(rows[9:])
    g = pd.concat([compare.sec_gain(paper, metrics=("R@1",)), compare.sec_gain(selected, variants=("sec",),
                                                                               metrics=("R@1",))])
    assert list(zip(g["variant"], g["eta_arm"])) == [("l2reg", ""), ("sec", "paper"), ("sec", "selected")]
    named = evidence.name_eta_arms(g)
    assert list(named["variant"]) == ["l2reg", "sec, paper's η", "sec, selected η"]
    assert "eta_arm" not in compare.sec_gain(paper.drop(columns="eta_arm"), metrics=("R@1",)).columns
    with pytest.raises(ValueError, match="eta_arm"):
        evidence.name_eta_arms(g.drop(columns="eta_arm"))


def test_the_beyond_table_keeps_each_eta_arm_apart_and_pairs_it_with_the_runs_without_a_regularizer():
    """tml and CosFace have two SEC arms in the decisive tier (the selected and the paper's η), both with variant
    'sec': pooled, a paired difference would average them. beyond_gains pairs each arm with the runs without a
    regularizer on its own (its estimate and p against scipy), and each arm is its own Holm family over the losses;
    the Q8b claim reads only the selected arm."""
    from scipy import stats
    from sec_lib.chapters import compare
    rows, seeds = [], range(4)
    shift = {"paper": -1.0, "selected": 0.5}
    for loss, base in (("tml", 70.0), ("cosface", 60.0)):
        for s in seeds:
            noise = 0.3 * ((s * 7) % 3 - 1)
            rows += [{"key": f"{loss}n{s}", "loss": loss, "variant": "none", "seed": s, "R@1": base + s, "eta": 0.0,
                      "eta_arm": "", "status": "done"},
                     {"key": f"{loss}l{s}", "loss": loss, "variant": "l2reg", "seed": s, "R@1": base + s + 0.2 + noise,
                      "eta": 0.001, "eta_arm": "", "status": "done"}]
            rows += [{"key": f"{loss}{arm}{s}", "loss": loss, "variant": "sec", "seed": s, "status": "done",
                      "R@1": base + s + d + noise * (1 + (arm == "paper")), "eta": 1.0 if arm == "paper" else 0.1,
                      "eta_arm": arm} for arm, d in shift.items()]
    runs = pd.DataFrame(rows)
    g = compare.beyond_gains(runs, metrics=("R@1",))
    assert list(zip(g["loss"], g["variant"])) == [(l, v) for l in ("tml", "cosface")
                                                 for v in ("l2reg", "sec, selected η", "sec, paper's η")]
    for r in g.itertuples():
        arm = {"sec, selected η": ("sec", "selected"), "sec, paper's η": ("sec", "paper")}.get(r.variant,
                                                                                            ("l2reg", ""))
        b = runs[(runs.loss == r.loss) & (runs.variant == arm[0]) & (runs.eta_arm == arm[1])].sort_values("seed")
        a = runs[(runs.loss == r.loss) & (runs.variant == "none")].sort_values("seed")
        assert r.estimate == pytest.approx((b["R@1"].to_numpy() - a["R@1"].to_numpy()).mean())
        assert r.p_value == pytest.approx(stats.ttest_rel(b["R@1"], a["R@1"]).pvalue)
        assert r.m == 2 and r.family == f"{r.comparison}, R@1"
    assert set(g["comparison"]) == {"L2-reg − none", "SEC (selected η) − none", "SEC (paper's η) − none"}
    table = compare.main_table(compare.eta_arms_apart(runs), metrics=("R@1",))
    assert table.groupby("variant")["n"].max().to_dict() == {"none": 4, "l2reg": 4, "sec, selected η": 4,
                                                             "sec, paper's η": 4}
    text = compare.beyond_paragraph(g, runs)
    assert text.index("SEC (selected η) − none, R@1 (weights: tml 0.1, cosface 0.1)") < text.index("paper's η")
    # the tuplet margin claim (Q8b) is the selected arm's difference, not the two SEC arms averaged
    q8b = next(c for c in compare.CLAIMS if c.id == "Q8b")
    from types import SimpleNamespace
    est = q8b.estimate(evidence.Evidence.from_frames({"beyond": SimpleNamespace(runs=runs)}))
    sel = runs.query("loss == 'tml' and eta_arm == 'selected'").sort_values("seed")["R@1"].to_numpy()
    none = runs.query("loss == 'tml' and variant == 'none'").sort_values("seed")["R@1"].to_numpy()
    assert est["estimate"] == pytest.approx((sel - none).mean()) and est["n"] == 4
    row = g[(g["loss"] == "tml") & (g["variant"] == "sec, selected η")].iloc[0]      # the table's row, its family
    assert est["p_adj"] == pytest.approx(row["p_adj"]) and est["m"] == 2 and est["verdict"] == row["verdict"]


def test_pages_reading_one_sweep_load_it_once_and_each_gets_its_own_copy(monkeypatch, tmp_path):
    """The landing page's tally decides every page's claims in one process: a sweep that several pages read (the
    main comparison) is loaded from the store once, and no page's evidence sees another's edits."""
    from sec_lib.chapters import common
    from sec_lib.runs.store import Frames
    calls = []

    def fake_load(sweep, profile, root=None, tables=()):
        calls.append((sweep, profile, root))
        return Frames(*(pd.DataFrame({"key": ["a", "b"], "x": [1.0, 2.0]}) for _ in range(7)))
    monkeypatch.setattr(common, "load", fake_load)
    evidence.forget_pages()
    try:
        readers = [p.source for p in PAGES if "compare" in p.evidence_sweeps][:2]
        assert len(readers) == 2, readers
        a, b = (evidence.page_evidence(p, "smoke", root=tmp_path) for p in readers)
        assert a is not b
        ra, rb = a.runs("compare"), b.runs("compare")
        assert len(calls) == 1 and calls[0][0] == "compare"
        ra.loc[0, "x"] = 99.0                                   # one page edits its frame in place ...
        ra["y"] = 1
        assert rb["x"].tolist() == [1.0, 2.0] and "y" not in rb     # ... the other page's is untouched
        other = tmp_path / "other"                             # another store root is another load
        evidence.page_evidence(readers[0], "smoke", root=other).runs("compare")
        assert len(calls) == 2 and calls[1][2] == other
        evidence._PAGE_EVIDENCE.clear()                        # new evidence objects, the shared frames kept:
        evidence.page_evidence(readers[0], "smoke", root=tmp_path).runs("compare")
        assert len(calls) == 2                                 # the same store is not read again ...
        monkeypatch.setenv("SEC_RUNS_DIR", str(tmp_path / "q"))
        evidence._PAGE_EVIDENCE.clear()
        evidence.page_evidence(readers[0], "smoke", root=tmp_path).runs("compare")
        assert len(calls) == 3                                 # ... another quick store is
    finally:
        evidence.forget_pages()


def test_the_face_page_shows_cosface_from_the_compare_pages_tier_where_that_is_another(monkeypatch):
    """The compare page reads CosFace from a tier that does not hold ArcFace yet, while the face page (and Q8d) read
    the tier that holds both: the face page states the other tier's CosFace row, the very row of the compare page's
    table, and says nothing where both pages read one tier."""
    from types import SimpleNamespace
    from sec_lib.chapters import compare, face
    rows = []
    for s in range(4):
        rows += [{"key": f"n{s}", "loss": "cosface", "variant": "none", "seed": s, "R@1": 60.0 + s, "eta": 0.0,
                  "eta_arm": "", "status": "done"},
                 {"key": f"s{s}", "loss": "cosface", "variant": "sec", "seed": s, "R@1": 59.0 + s + 0.1 * (s % 2),
                  "eta": 0.005, "eta_arm": "selected", "status": "done"}]
    runs = pd.DataFrame(rows)
    ev = evidence.Evidence.from_frames({"beyond": SimpleNamespace(runs=runs)}, profile="decisive")
    monkeypatch.setattr(evidence, "page_evidence", lambda page, profile, root=None: ev)
    assert face.compare_tier_sentence("cpu", "decisive") == ""
    s = face.compare_tier_sentence("cpu", "cpu")
    row = compare.beyond_gains(runs, metrics=("R@1",)).iloc[0]
    assert f"{row['estimate']:+.2f} (95% CI [{row['ci_lo']:+.2f}, {row['ci_hi']:+.2f}])" in s
    assert f"**{row['verdict']}**" in s and "Q8d, read the cpu tier until the decisive tier holds all" in s


def test_the_npair_page_shows_the_compare_pages_npair_and_tml_rows_from_their_tables(monkeypatch):
    """npair's row comes from the compare page's table of the tuned runs (Holm over the main losses there), tml's
    from its beyond table: the same p and verdict as those tables give."""
    from types import SimpleNamespace
    from sec_lib.chapters import compare, npair
    tuned, beyond = [], []
    for s in range(4):
        for loss, gain in (("npair", 1.0), ("triplet", 0.2)):
            tuned += [{"key": f"{loss}n{s}", "loss": loss, "variant": "none", "seed": s, "R@1": 70.0 + s,
                       "eta": 0.0, "eta_arm": "", "status": "done"},
                      {"key": f"{loss}s{s}", "loss": loss, "variant": "sec", "seed": s, "status": "done",
                       "R@1": 70.0 + s + gain + 0.2 * (s % 2), "eta": 0.1, "eta_arm": "selected"}]
        beyond += [{"key": f"tn{s}", "loss": "tml", "variant": "none", "seed": s, "R@1": 60.0 + s, "eta": 0.0,
                    "eta_arm": "", "status": "done"},
                   {"key": f"ts{s}", "loss": "tml", "variant": "sec", "seed": s, "R@1": 59.5 + s + 0.3 * (s % 2),
                    "eta": 0.1, "eta_arm": "selected", "status": "done"}]
    tuned, beyond = pd.DataFrame(tuned), pd.DataFrame(beyond)
    ev = evidence.Evidence.from_frames({"tuned": SimpleNamespace(runs=tuned), "beyond": SimpleNamespace(runs=beyond)},
                                       profile="decisive")
    rows = compare.selected_eta_rows(ev, ("npair", "tml"))
    want = compare.sec_gain(tuned, variants=("sec",), metrics=("R@1",)).set_index("loss").loc["npair"]
    assert list(rows.index) == ["npair", "tml"] and rows.loc["npair", "m"] == 2
    assert rows.loc["npair", "p_adj"] == pytest.approx(want["p_adj"]) and rows.loc["npair", "verdict"] == want["verdict"]
    assert rows.loc["tml", "estimate"] == pytest.approx(-0.5 + 0.3 * 2 / 4)
    monkeypatch.setattr(evidence, "page_evidence", lambda page, profile, root=None: ev)
    s = npair.compare_tier_sentence("cpu", "cpu")
    assert s.startswith("**Normalized N-pair and tuplet margin in the decisive tier.**") and "Q11c" in s
    assert npair.compare_tier_sentence("cpu", "decisive") == ""


def test_the_landing_page_states_the_losses_beyond_the_four_from_the_compare_pages_table(monkeypatch):
    from types import SimpleNamespace
    from sec_lib.chapters import compare, home
    rows = []
    for loss, d in (("tml", -0.5), ("cosface", 1.0)):
        for s in range(4):
            rows += [{"key": f"{loss}n{s}", "loss": loss, "variant": "none", "seed": s, "R@1": 60.0 + s, "eta": 0.0,
                      "eta_arm": "", "status": "done"},
                     {"key": f"{loss}s{s}", "loss": loss, "variant": "sec", "seed": s, "status": "done",
                      "R@1": 60.0 + s + d + 0.2 * (s % 2), "eta": 0.1, "eta_arm": "selected"}]
    runs = pd.DataFrame(rows)
    ev = evidence.Evidence.from_frames({"beyond": SimpleNamespace(runs=runs)}, profile="decisive")
    monkeypatch.setattr(evidence, "page_evidence", lambda page, profile, root=None: ev)
    s = home.beyond_sentence("cpu")
    g = compare.beyond_gains(runs, metrics=("R@1",)).set_index("loss")
    for loss, name in (("tml", "tuplet margin"), ("cosface", "CosFace")):
        r = g.loc[loss]
        assert f"{name} {r['estimate']:+.2f} [{r['ci_lo']:+.2f}, {r['ci_hi']:+.2f}] (**{r['verdict']}**" in s
    assert s.index("tuplet margin") < s.index("CosFace") and "(decisive tier" in s
    empty = evidence.Evidence.from_frames({"beyond": SimpleNamespace(runs=runs.iloc[0:0])}, profile="decisive")
    monkeypatch.setattr(evidence, "page_evidence", lambda page, profile, root=None: empty)
    assert home.beyond_sentence("cpu") == ""


def test_the_landing_line_on_other_losses_gives_each_pages_own_verdicts():
    """Question 8 does not stop at the compare page's two losses: SimCLR, supervised contrastive learning and ArcFace
    are read from their own pages' records, in R@1, each with its page's word and a link to it."""
    from sec_lib.chapters import home
    recs = {r.id: r for page in ("ssl", "face")
            for r in evidence.page_records(page, evidence.page_evidence(page, "cpu"))}
    s = home.other_losses_sentence("cpu")
    assert s.startswith("The same question's other losses, in R@1: SimCLR ")
    for cid, name in (("Q8a-r", "SimCLR"), ("Q8e", "supervised contrastive"), ("Q8c", "ArcFace")):
        assert f"{name} {recs[cid].evidence} (**{recs[cid].verdict}**)" in s
        assert "R@1" in recs[cid].measured
    assert "](ssl.html)" in s and "](face.html)" in s


def test_a_page_waiting_for_the_decisive_tier_states_the_claims_it_can_already_decide(monkeypatch):
    """The norms page reads the quick tier while the decisive tier lacks its BN/WN runs: the claims whose runs
    the decisive tier holds are decided there (a finite estimate) and stated; a claim it cannot decide is left out;
    nothing where the page shows the decisive tier."""
    import math
    from sec_lib.report.claims import ClaimRecord

    def rec(cid, est):
        return ClaimRecord(id=cid, statement=f"claim {cid}", page="norms", href="", family="f", unit="pp",
                           expected_sign=1, estimate=est, ci_lo=est - 1, ci_hi=est + 1, n=5, n_counts="seeds",
                           p_value=0.01, p_adj=0.02, m=2, mde=0.5, verdict="reproduced" if est == est else
                           "not testable offline")
    monkeypatch.setattr(evidence, "has_tier", lambda name: True)
    monkeypatch.setattr(evidence, "page_records", lambda page, ev: [rec("C1", 2.0), rec("Q4", math.nan)])
    monkeypatch.setattr(evidence, "covers", lambda tier, sweeps: set(sweeps) <= {"norms"})
    s = evidence.waiting_sentence("norms", "cpu")
    assert "It holds the runs behind C1, but not yet those of bnwn" in s
    assert "C1 (claim C1): +2.000 [+1.000, +3.000] pp, **reproduced**" in s and "Q4" not in s
    assert evidence.waiting_sentence("norms", "decisive") == ""
    monkeypatch.setattr(evidence, "page_records", lambda page, ev: [rec("Q4", math.nan)])
    assert evidence.waiting_sentence("norms", "cpu") == ""


def test_claim_ids_sort_by_letter_number_then_suffix_without_case():
    """A follow-up's capital suffix (C4W) sorts among its claim's small ones (after C4v, not between C4 and C4a)."""
    ids = ["Q10a", "C5", "C4W", "Q8a-r", "C4v", "C4", "Q2", "C4a", "P1c", "Q8a", "C1", "P1"]
    assert sorted(ids, key=evidence.claim_sort_key) == ["C1", "C4", "C4a", "C4v", "C4W", "C5", "P1", "P1c", "Q2",
                                                         "Q8a", "Q8a-r", "Q10a"]
