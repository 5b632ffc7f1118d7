"""The portability check (Level 2 of the reproducibility contract), on the committed decisive tier's primary
comparison, with stand-in retrained numbers (no training here); the retired reference tier's report stays readable."""
import pytest

from sec_lib.chapters import portability as pt
from sec_lib.chapters.evidence import covers
from sec_lib.runs import tier


@pytest.fixture(scope="module")
def runs():
    if not tier.has_tier("decisive") or not covers("decisive", ("tuned",)):
        pytest.skip("the committed decisive tier does not hold the primary comparison")
    return pt.primary_runs("decisive")


def test_the_primary_comparison_is_the_four_main_losses_none_and_sec_at_one_eta(runs):
    from sec_lib.runs import experiments as ex
    assert set(runs["loss"]) == set(ex.MAIN_LOSSES) and set(runs["variant"]) == {"none", "sec"}
    assert runs.groupby(["loss", "variant"])["seed"].nunique().min() >= 5
    assert not runs["key"].duplicated().any()


def test_the_retired_reference_tiers_report_is_still_read():
    reps = pt.reports("reference")
    if not reps:
        pytest.skip("the retired reference tier's portability report is not in this checkout")
    assert all(r["n"] == len(r["diffs"]) and r["cpu_kind"] for r in reps)
    said = pt.sentence(reps[0])
    assert said.startswith(f"On {reps[0]['cpu_kind']}, {reps[0]['n']} retrained runs")
    for e in reps[0]["estimates"]:                     # each changed verdict named with its before and after
        assert (f"{e['estimate']} ({e['verdict']} → {e['swapped_verdict']})" in said) == (not e["same_verdict"])


def test_the_sample_takes_one_seed_of_every_arm_first(runs):
    keys = pt.stratified_sample(runs, 8)
    picked = runs.set_index("key").loc[keys]
    assert len(set(keys)) == 8 and picked.groupby(["loss", "variant"]).size().eq(1).all()
    assert (picked["seed"] == runs.groupby(["loss", "variant"])["seed"].transform("min").min()).all()
    assert pt.stratified_sample(runs, 10)[:8] == keys and len(pt.stratified_sample(runs, 1000)) == len(runs)
    with pytest.raises(ValueError, match="sample = 0 is not valid"):
        pt.stratified_sample(runs, 0)


def test_identical_reruns_change_nothing(runs):
    keys = pt.stratified_sample(runs, 8)
    same = dict(zip(runs["key"], runs["R@1"]))
    rep = pt.compare(runs, {k: same[k] for k in keys})
    assert rep["n"] == 8 and rep["identical"] == 8 and rep["mean_diff"] == 0
    assert all(r["same_verdict"] and r["inside"] and r["swapped"] == pytest.approx(r["committed"])
               for r in rep["estimates"])


def test_a_large_shift_of_the_sec_runs_is_reported_as_a_changed_verdict(runs):
    """Every SEC run retrained 10 points lower: each per-loss estimate leaves its interval."""
    sec = runs[runs["variant"] == "sec"]
    rep = pt.compare(runs, {k: v - 10.0 for k, v in zip(sec["key"], sec["R@1"])})
    assert rep["mean_diff"] == pytest.approx(-10.0) and rep["identical"] == 0
    assert not any(r["inside"] for r in rep["estimates"])
    pooled = next(r for r in rep["estimates"] if r["estimate"] == "pooled")
    assert pooled["swapped"] == pytest.approx(pooled["committed"] - 10.0)
    said = pt.sentence({**rep, "cpu_kind": "X", "committed_kinds": {"Y": 8}})
    assert "The verdict changed for " in said and " → " in said and "outside the committed interval: " in said
