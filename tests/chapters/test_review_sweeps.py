"""The review chapters' sweeps and analysis: the review losses join the η selection on held-out classes, the new
chapters compare none with SEC over the profile's seeds, existing store keys do not move, and the
chapter analyses (paired SEC − none rows, fairness statistics, N-pair norm drift, claim rows) on hand-made inputs."""
import importlib.util
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sec_lib.runs import experiments as ex
from sec_lib.chapters import claims, evidence, face, fairness, npair, review, ssl
from sec_lib.losses import LOSS_SPECS
from sec_lib.runs.store import Frames

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("key_check", REPO / "bench" / "key_check.py")
key_check = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(key_check)


# ------------------------------------------------------------------------------------ experiments
def test_existing_run_keys_are_unchanged():
    before = json.loads((REPO / "tests" / "chapters" / "data" / "run_keys_before_review_losses.json").read_text())
    now = key_check.keys(("smoke", "cpu"))
    for sweep, keys in before.items():
        assert set(keys) <= set(now[sweep]), sweep
        # only the selection gains runs, and the smoke convergence chapter its dense-early prefixes
        if not sweep.endswith("/selection") and sweep != "smoke/convergence":
            assert set(now[sweep]) == set(keys), sweep


@pytest.mark.parametrize("profile", ex.PROFILE_NAMES)
def test_review_losses_are_selected_on_held_out_classes_with_the_pilot_seed(profile):
    p = ex.get_profile(profile)
    sel = [c for c in ex.eta_selection(p) if c.loss in ex.REVIEW_LOSSES]
    assert {c.loss for c in sel} == set(ex.REVIEW_LOSSES) - set(p.excluded_losses)   # benchmarks: no SimCLR
    assert all(c.holdout_classes == p.holdout_classes > 0 and c.seed == p.pilot_seed and c.eta > 0 for c in sel)
    assert {c.eta for c in sel} == set(p.review_eta_grid or p.eta_grid)
    assert all(c.seed not in p.seeds for c in sel)
    for c in sel:
        c.replace(device="cpu").validate()


def test_simclr_runs_use_two_views_the_rebuttal_temperature_and_no_batch_rounding():
    p = ex.get_profile("cpu")
    c = ex.config(p, "ntxent", "sec", 0, eta=0.1)
    assert c.views == 2 and LOSS_SPECS["ntxent"].defaults["temperature"] == 0.5 and not c.loss_kwargs
    assert c.batch_size == p.base["batch_size"]
    assert LOSS_SPECS["supcon"].defaults["temperature"] == 0.1          # Khosla et al.'s standard value
    assert ex.config(p, "supcon").views == 0


@pytest.mark.parametrize("sweep,losses", [("ssl", ex.SSL_LOSSES), ("npair", ex.NPAIR_VARIANTS),
                                            ("face", ex.FACE_LOSSES)])
@pytest.mark.parametrize("profile", ("smoke", "cpu"))
def test_new_chapters_compare_none_and_sec_at_the_selected_eta_over_the_seeds(sweep, losses, profile):
    store = key_check.FakeStore()               # R@1 peaks at η = 0.5 in the fake selection
    cfgs = ex.sweep_configs(sweep, profile, store)
    p = ex.get_profile(profile)
    assert {(c.loss, c.eta > 0, c.seed) for c in cfgs} == {(l, v, s) for l in losses for v in (False, True)
                                                           for s in p.seeds}
    assert all(c.eta == 0.5 for c in cfgs if c.eta > 0)
    assert all(c.holdout_classes == 0 for c in cfgs)
    if profile == "cpu":
        assert len(p.seeds) >= 3


def test_a_page_of_the_main_losses_does_not_wait_for_the_review_selection():
    class Partial(key_check.FakeStore):
        def get(self, cfg, tables=()):
            return None if cfg.loss in ex.REVIEW_LOSSES else super().get(cfg)
    assert ex.sweep_configs("tuned", "smoke", Partial())
    with pytest.raises(KeyError, match="η selection"):
        ex.sweep_configs("ssl", "smoke", Partial())


# ------------------------------------------------------------------------------------ analysis
def _runs(diffs: dict, base: float = 50.0, metric: str = "R@1") -> pd.DataFrame:
    """Runs of each loss: none at ``base`` + seed, sec at that + the given per-seed difference."""
    rows = []
    for loss, d in diffs.items():
        for s, x in enumerate(d):
            rows.append({"key": f"{loss}-n-{s}", "loss": loss, "variant": "none", "seed": s, "status": "done",
                         metric: base + s, "eta": 0.0})
            rows.append({"key": f"{loss}-s-{s}", "loss": loss, "variant": "sec", "seed": s, "status": "done",
                         metric: base + s + x, "eta": 0.5})
    return pd.DataFrame(rows)


def test_seed_diffs_pair_on_seed_and_drop_failed_runs():
    runs = _runs({"a": [1.0, 2.0, 3.0]})
    runs.loc[runs["key"] == "a-s-2", "status"] = "failed"
    d = review.seed_diffs(runs)
    assert d["seed"].tolist() == [0, 1] and d["diff"].tolist() == [1.0, 2.0]


def test_sec_rows_estimate_is_the_mean_paired_difference_and_holm_spans_the_family():
    runs = _runs({"x": [2.0, 2.5, 3.0], "y": [-0.1, 0.1, 0.0]})
    rows = review.sec_rows(runs, losses=("x", "y"), family="t")
    assert rows["estimate"].tolist() == pytest.approx([2.5, 0.0])
    assert (rows["m"] == 2).all() and (rows["family"] == "t").all()
    x, y = rows.iloc[0], rows.iloc[1]
    assert x["p_value"] < y["p_value"] and x["p_adj"] == pytest.approx(min(1.0, 2 * x["p_value"]))  # Holm, m = 2
    assert x["verdict"] != y["verdict"]


def test_rebuttal_simclr_numbers_come_from_the_package_data():
    t = pd.read_csv(REPO / "sec_lib" / "data" / "paper" / "rebuttal_tables.csv")
    t = t[t.iloc[:, 0] == "simclr"].set_index("setting")
    r = ssl.rebuttal_simclr()
    assert r["none"] == pytest.approx(float(t.loc["none", "top1"]))
    assert r["gain"] == pytest.approx(float(t.loc["sec", "top1"]) - float(t.loc["none", "top1"]))


def test_npair_norm_growth_is_last_over_first_mean_norm():
    runs = pd.DataFrame({"key": ["a", "b"], "loss": ["npair_ip", "npair_ip"], "variant": ["none", "sec"]})
    steps = pd.DataFrame({"key": ["a", "a", "b", "b"], "step": [0, 10, 0, 10], "norm_mean": [1.0, 8.0, 2.0, 3.0]})
    g = npair.norm_growth(runs, steps).set_index("variant")
    assert g.loc["none", "ratio"] == 8.0 and g.loc["sec", "ratio"] == 1.5
    assert set(npair.READINGS) == set(ex.NPAIR_VARIANTS)


def _glyph_frame(effect: float, rng, n_classes: int = 30, per_class: int = 8) -> pd.DataFrame:
    labels = np.repeat(np.arange(n_classes), per_class)
    design = np.tile(["serif", "sans"], n_classes * per_class // 2)
    class_level = rng.normal(0, 1, n_classes)[labels]            # a class effect the within-class η² must ignore
    norm = 5 + class_level + effect * (design == "serif") + rng.normal(0, 0.3, len(labels))
    return pd.DataFrame({"label": labels, "design": design, "norm_rel": norm})


def test_within_eta2_finds_a_design_effect_and_not_a_class_effect():
    rng = np.random.default_rng(0)
    strong = fairness.within_eta2(_glyph_frame(1.0, rng), "norm_rel")
    none_ = fairness.within_eta2(_glyph_frame(0.0, rng), "norm_rel")
    assert strong["eta2_excess"] > 0.5
    assert abs(none_["eta2_excess"]) < 0.02


def test_max_hit_gap_is_a_within_class_gap_in_points():
    f = pd.DataFrame({"label": [0, 0, 1, 1], "design": ["serif", "sans"] * 2, "hit@1": [1, 0, 1, 0]})
    assert fairness.max_hit_gap(f) == pytest.approx(100.0)
    f2 = pd.DataFrame({"label": [0, 0, 1, 1], "design": ["serif", "serif", "sans", "sans"], "hit@1": [1, 1, 0, 0]})
    assert fairness.max_hit_gap(f2) == pytest.approx(0.0)     # a class difference, not a design difference


def test_fairness_seed_values_average_losses_then_pair_on_seed():
    stats = pd.DataFrame({"loss": ["a", "b"] * 4, "variant": ["none"] * 4 + ["sec"] * 4,
                          "seed": [0, 0, 1, 1] * 2, "x": [1.0, 3.0, 2.0, 2.0, 0.0, 1.0, 1.0, 2.0]})
    assert fairness.seed_values(stats, "x", None, "none").tolist() == [2.0, 2.0]
    assert fairness.seed_values(stats, "x").tolist() == [-1.5, -0.5]


def test_face_and_ssl_claims_replace_the_offline_rows():
    ids = {c.id for m in (ssl, npair, face, fairness) for c in m.CLAIMS}
    assert {"Q8a", "Q8c", "Q8d"} <= ids and len(ids) == sum(len(m.CLAIMS) for m in (ssl, npair, face, fairness))
    page = list(claims.claim_definitions()["id"])
    assert ids <= set(page) and len(page) == len(set(page))          # on the claims page, each once
    assert page.index("Q8a") < page.index("Q8e") < page.index("Q9") < page.index("Q10d") < page.index("Q11a")
    for m in (ssl, npair, face, fairness):                             # the page module's own definition
        assert evidence.page_claims(m.__name__.rsplit(".", 1)[1]) == list(m.CLAIMS)


def test_review_rows_get_verdicts_from_their_page():
    runs = _runs({"ntxent": [1.0, 2.0, 1.5], "supcon": [0.5, 0.4, 0.6]}).assign(probe_top1=lambda d: d["R@1"])
    empty = pd.DataFrame()
    ev = evidence.Evidence.from_frames({"ssl": Frames(runs, *[empty] * 6)}, profile="smoke")
    t = {r.id: r for r in evidence.page_records("ssl", ev)}
    rows = ssl.verdict_rows(runs)
    assert all(r.verdict != "not testable offline" for r in t.values()) and t["Q8a"].n == 3
    assert t["Q8a"].estimate == pytest.approx(1.5)
    probe = rows[rows["metric"] == "probe_top1"].iloc[0]
    assert t["Q8a"].verdict == probe["verdict"] and t["Q8a"].p_adj == pytest.approx(probe["p_adj"])   # the page's family


def test_max_hit_gap_leaves_out_rare_designs():
    n = 40
    f = pd.DataFrame({"label": np.arange(n) // 2, "design": ["serif", "sans"] * (n // 2), "hit@1": [1, 1] * (n // 2)})
    rare = pd.DataFrame({"label": [0], "design": ["script"], "hit@1": [0]})
    assert fairness.max_hit_gap(pd.concat([f, rare], ignore_index=True)) == pytest.approx(0.0)
    assert fairness.max_hit_gap(pd.concat([f, rare], ignore_index=True), min_share=0.0) > 50


def test_within_eta2_chance_is_the_mean_over_within_class_shuffles():
    """The chance value against a brute-force loop: each shuffle permutes the groups inside every class only,
    so it keeps each class's multiset of groups, and the mean of η² over shuffles is the chance value."""
    rng = np.random.default_rng(1)
    f = _glyph_frame(0.3, rng, n_classes=12, per_class=6)
    out = fairness.within_eta2(f, "norm_rel", n_perm=200, seed=3)
    v = (f["norm_rel"] - f.groupby("label")["norm_rel"].transform("mean")).to_numpy()
    codes = pd.factorize(f["design"])[0]
    brute = []
    r2 = np.random.default_rng(7)
    for _ in range(2000):
        gp = codes.copy()
        for lab in np.unique(f["label"]):
            idx = np.flatnonzero(f["label"].to_numpy() == lab)
            gp[idx] = codes[r2.permutation(idx)]
        brute.append(fairness._eta2(v, gp, 2))
    assert out["eta2_chance"] == pytest.approx(np.mean(brute), abs=0.01)
    assert out["eta2"] == pytest.approx(fairness._eta2(v, codes, 2))
    grand = v.mean()
    ssb = sum((codes == c).sum() * (v[codes == c].mean() - grand) ** 2 for c in (0, 1))
    assert out["eta2"] == pytest.approx(ssb / ((v - grand) ** 2).sum())


def test_within_eta2_batched_shuffles_are_the_sequential_lexsort_ones():
    """The batched sort draws the same random keys in the same order as one lexsort per shuffle did, so the
    chance value is bit-identical to the loop it replaced (committed pages keep their numbers)."""
    rng = np.random.default_rng(2)
    f = _glyph_frame(0.3, rng, n_classes=30, per_class=7)
    out = fairness.within_eta2(f, "norm_rel", n_perm=25, seed=5)
    v = (f["norm_rel"] - f.groupby("label")["norm_rel"].transform("mean")).to_numpy(float)
    codes, levels = pd.factorize(f["design"].astype(str))
    cl = pd.factorize(f["label"])[0]
    base, r = np.argsort(cl, kind="stable"), np.random.default_rng(5)
    chance = []
    for _ in range(25):
        gp = np.empty_like(codes)
        gp[base] = codes[np.lexsort((r.random(len(cl)), cl))]
        chance.append(fairness._eta2(v, gp, len(levels)))
    assert out["eta2_chance"] == float(np.mean(chance))
