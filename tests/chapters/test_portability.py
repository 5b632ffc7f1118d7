"""The portability check (Level 2 of the reproducibility contract), on the committed decisive tier's primary
comparison, with stand-in retrained numbers (no training here); the retired reference tier's report stays readable."""
import json
from pathlib import Path

import pandas as pd
import pytest

from kinds import each_vendor  # noqa: F401  (a fixture: tests/kinds.py)
from sec_lib import kernels
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


# --- the committed reports, as the tiers page shows them ----------------------------------------------------------

INTEL = pt.report_path("decisive", "Intel/AVX2/avx2")


@pytest.fixture(scope="module")
def intel():
    if not INTEL.exists():
        pytest.skip("the decisive tier's Intel report is not in this checkout")
    return json.loads(INTEL.read_text())


def test_the_decisive_tiers_intel_report_is_committed_with_its_source(intel):
    """The Intel Xeon's report of 2026-11-29 (a fresh clone of c38b8f1), kept as that run wrote it; its README names
    the run, and nothing at run time reads the developers' shared folder."""
    assert INTEL.parent == tier.tier_dir("decisive") / "portability" and INTEL.name == "Intel-AVX2-avx2.json"
    assert intel["cpu_kind"] == "Intel/AVX2/avx2" and intel["profile"] == "decisive"
    assert intel["committed_kinds"] == {"AMD/AVX2/avx2": 8} and intel["date"].startswith("2026-11-29")
    assert intel["keys"] == pt.stratified_sample(pt.primary_runs("decisive"), 8)      # the sample this tier draws
    assert pt.TABLES_KEY not in intel                                                 # made before the hashes
    readme = (INTEL.parent / "README.md").read_text()
    for said in ("c38b8f1", "2026-11-29", "python -m sec_lib.book portability --sample 8 --jobs 2", "22 minutes",
                 "Intel Xeon"):
        assert said in readme, said
    assert INTEL.read_text().startswith("{\n \"committed_kinds\"")                    # the command's own format
    for module in ("portability.py", "tiers.py"):                                    # read from the tier, not ../shared
        assert "../shared" not in Path(pt.__file__).with_name(module).read_text()


def _overview_row(rep):
    return {"runs retrained": len(rep["diffs"]),
            "R@1 identical": sum(d == 0 for d in rep["diffs"].values()),
            "verdicts changed": sum(not e["same_verdict"] for e in rep["estimates"]),
            "estimates outside their interval": sum(not e["inside"] for e in rep["estimates"])}


def test_the_tiers_page_shows_the_intel_report_beside_the_retired_tiers(intel):
    """One row per report, the decisive tier's first and the retired tier's last, each computed from its JSON: no
    verdict of the decisive tier changed on Intel, 6 of its 8 runs gave the committed R@1 exactly (the two ms runs
    did not), and the report says it compared R@1 only; the retired tier's report changed the pooled verdict."""
    shown = pt.page()
    o = shown.overview
    assert list(o.columns) == list(pt.OVERVIEW_COLUMNS)
    assert o["tier"].iloc[0] == "decisive" and o["tier"].iloc[-1] == "retired reference"
    reps = [*pt.reports("decisive"), *pt.reports("reference")]
    assert len(o) == len(reps) == len(shown.sections)
    for (_, row), rep in zip(o.iterrows(), reps):
        assert {k: row[k] for k in _overview_row(rep)} == _overview_row(rep)
        d = pd.Series(rep["diffs"])
        assert row["mean R@1 shift"] == pytest.approx(d.mean(), abs=1e-6)
        assert row["SD of the shift"] == pytest.approx(d.std(ddof=1), abs=1e-6)
        assert row["largest |shift|"] == pytest.approx(d.abs().max(), abs=1e-6)
        assert row["tables identical"] == pt.NOT_COMPARED                    # both reports predate the hashes
    i = next(i for i, r in enumerate(reps) if r["cpu_kind"] == "Intel/AVX2/avx2")
    assert o.loc[i, ["R@1 identical", "verdicts changed", "estimates outside their interval"]].tolist() == [6, 0, 0]
    assert o.loc[i, "mean R@1 shift"] == pytest.approx(intel["mean_diff"])
    said = shown.sections[i].sentence
    assert said.startswith("*The decisive tier.* On Intel/AVX2/avx2, 8 retrained runs of the primary comparison "
                           "(committed: 8 on AMD/AVX2/avx2) landed -0.14 R@1 from the committed ones on average "
                           "(SD 0.27, largest 0.65); 6 of 8 gave the committed final R@1 exactly, the other 2 "
                           "did not: ")
    names = pt.run_names("decisive", intel["diffs"])
    differ = {k: d for k, d in intel["diffs"].items() if d != 0}
    assert sorted(names[k].split()[0] for k in differ) == ["ms", "ms"]
    for k, d in differ.items():
        assert f"{names[k]} ({d:+.2f})" in said
    assert "it compared the final R@1 only" in said
    assert said.endswith("No verdict changed, and every estimate stayed inside its committed interval.")
    assert shown.sentence == ("The decisive tier's primary comparison was retrained on 1 CPU kind (Intel/AVX2/avx2) in "
                              "1 report: no verdict changed, and 6 of its 8 retrained runs gave the committed final "
                              "R@1 exactly.") or len(pt.reports("decisive")) > 1
    assert shown.sections[i].name == "portability_decisive_Intel-AVX2-avx2"
    assert shown.sections[i].table["same_verdict"].all() and len(shown.sections[i].table) == 5   # 4 losses, pooled
    retired = shown.sections[-1]
    assert retired.sentence.startswith("*The retired reference tier.* On AMD/AVX2/native")
    assert "The verdict changed for pooled (smaller than claimed → inconclusive)" in retired.sentence
    assert "the other" not in retired.sentence                            # none identical: no run is singled out


def test_the_page_says_when_no_decisive_report_is_committed(tmp_path):
    shown = pt.page(("decisive",), root=tmp_path)
    assert shown.overview.empty and shown.sections == ()
    assert shown.sentence.startswith("No portability report of the decisive tier is committed yet")


def _tier_part(text: str, label: str) -> str:
    """The sentence of :func:`findings` on one tier: from its bold name to the next tier's."""
    part = text.split(f"The **{label} tier**", 1)[1]
    return part.split("The **", 1)[0]


def test_the_findings_name_each_tier_and_say_what_its_reports_found(intel):
    """The paragraph the claims page shows near its verdicts: the decisive tier's report (no verdict changed on the
    Intel Xeon) and the retired tier's (its changed verdict, read from its report), each in its own tier's
    sentence, so the retired tier's change is never read as the decisive tier's."""
    said = pt.findings()
    assert said.startswith(pt.FINDINGS_QUESTION) and said.index("**decisive tier**") < said.index("**retired reference")
    decisive = _tier_part(said, "decisive")
    assert decisive.startswith(", which every verdict of the book reads, held:")
    assert "retrained on an Intel Xeon" in decisive and "no verdict changed" in decisive
    assert f"{intel['n']} of its runs" in decisive and "trained on AMD CPUs" in decisive
    retired = _tier_part(said, "retired reference")
    changed = [e for r in pt.reports("reference") for e in r["estimates"] if not e["same_verdict"]]
    assert changed and "did not hold" in retired and "retrained on another AMD CPU (an AMD EPYC)" in retired
    for e in changed:
        assert f"changed from {e['verdict']} to {e['swapped_verdict']}" in retired
        assert f"changed from {e['verdict']}" not in decisive
    assert not pt.findings(question=False).startswith(pt.FINDINGS_QUESTION)


def test_the_findings_say_so_where_no_report_is_committed_and_follow_a_changed_verdict(intel, tmp_path):
    """Without reports, nothing is asserted: each tier's sentence says its check is not measured. A decisive report
    with a changed verdict is said to have not held, naming the estimate and both words."""
    empty = pt.findings(tmp_path)
    for label in ("decisive", "retired reference"):
        part = _tier_part(empty, label)
        assert "not measured here" in part and "held" not in part.replace("hold on", "")
    rep = json.loads(json.dumps(intel))      # the triplet SEC run retrained 10 points lower (the words are recomputed)
    names = pt.run_names("decisive", rep["diffs"])
    (key,) = [k for k in rep["diffs"] if names[k].startswith("triplet sec ")]
    rep["diffs"][key] = -10.0
    path = pt.report_path("decisive", rep["cpu_kind"], tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(rep))
    part = _tier_part(pt.findings(tmp_path), "decisive")
    assert "did not hold" in part
    assert "the verdict of the triplet loss's estimate changed from smaller than claimed to inconclusive" in part
    assert f" of {len(rep['estimates'])} verdicts)" in part


# --- new reports compare the tables by hash ----------------------------------------------------------------------

def _hashes(keys, same):
    """Made-up committed and retrained hashes (whole tables and per column): identical for the keys in ``same``; the
    others' step tables differ in their grad_slope column."""
    committed = {k: {"steps_hash": f"s{i:015d}", "steps_columns": {"step": "a", "grad_slope": f"g{i}"},
                     "evals_hash": f"e{i:015d}", "evals_columns": {"step": "a", "R@1": f"r{i}"}}
                 for i, k in enumerate(keys)}
    got = {k: (committed[k] if k in same else {**committed[k], "steps_hash": "0" * 16,
                                                "steps_columns": {"step": "a", "grad_slope": "other"}})
           for k in keys}
    return got, committed


def test_a_new_report_compares_each_runs_tables_by_hash(runs):
    """Identical means identical bits: a run whose R@1 matched but whose step table did not is named, and the
    counts of the page come from the per-run booleans."""
    keys = pt.stratified_sample(runs, 8)
    same = dict(zip(runs["key"], runs["R@1"]))
    got, committed = _hashes(keys, set(keys[:6]))
    tables = pt.table_comparison(got, committed)
    assert tables[keys[0]] == {"steps_hash": "s" + "0" * 15, "committed_steps_hash": "s" + "0" * 15,
                               "steps_identical": True, "steps_differ": [], "evals_hash": "e" + "0" * 15,
                               "committed_evals_hash": "e" + "0" * 15, "evals_identical": True, "evals_differ": []}
    assert not tables[keys[7]]["steps_identical"] and tables[keys[7]]["evals_identical"]
    assert tables[keys[7]]["steps_differ"] == ["grad_slope"] and tables[keys[7]]["evals_differ"] == []
    assert pt.table_comparison({"k": {"steps_hash": "a", "evals_hash": "b"}},
                               {"k": {"steps_hash": None, "evals_hash": "b"}})["k"]["steps_identical"] is False
    r1 = {k: same[k] for k in keys[:7]} | {keys[7]: same[keys[7]] - 1.0}
    rep = {**pt.compare(runs, r1, tables), "cpu_kind": "X", "committed_kinds": {"Y": 8}, "profile": "decisive"}
    assert rep["identical"] == 7 and rep["identical_tables"] == 6 and set(rep[pt.TABLES_KEY]) == set(keys)
    said = pt.sentence(rep)
    names = pt.run_names("decisive", keys)
    assert "7 of 8 gave the committed final R@1 exactly, the other 1 did not: " + f"{names[keys[7]]} (-1.00)" in said
    assert f"Compared by hash, 6 of 8 also gave the committed step and evaluation tables bit for bit; 1 with the " \
           f"committed R@1 did not ({names[keys[6]]}). The columns that differed: grad_slope of the step table " \
           "(2 runs)." in said
    assert "R@1 only" not in said
    assert pt.overview_table([rep])["tables identical"].tolist() == ["6 of 8"]
    t = pt.runs_table(rep).set_index("key")
    assert t["R@1 identical"].sum() == 7 and t["steps identical"].sum() == 6 and t["evals identical"].all()
    for old in pt.reports("reference"):                      # a report made before the hashes: nothing compared
        assert pt.runs_table(old)["steps identical"].isna().all()


@pytest.mark.parametrize("same", [True, False], ids=["same tables", "other tables"])
def test_run_check_writes_the_tables_hashes_under_this_machines_kind(runs, tmp_path, monkeypatch, each_vendor, same):
    """``run_check`` with ``retrain`` stood in (no training): the report is named by the kind this process presents
    (as this machine and as the other vendor's: ``each_vendor``), carries per run its tables' hashes against the
    committed ones (read from the committed tier), and hands ``progress`` to ``retrain``."""
    keys = pt.stratified_sample(runs, 8)
    t = tier.open_tier(tier.tier_dir("decisive"))
    r1 = dict(zip(runs["key"], runs["R@1"]))
    seen = {}

    def fake_retrain(ks, root, jobs, progress=None):
        seen.update(keys=list(ks), jobs=jobs, progress=progress)
        out = {}
        for k in ks:
            h = tier.committed_hashes(t, k) if same else {"steps_hash": "0" * 16, "evals_hash": "1" * 16}
            out[k] = tier.Retrained(r1[k], kernels.this_kind(), **h)
        return out
    monkeypatch.setattr(pt.tier_mod, "retrain", fake_retrain)
    monkeypatch.setattr(pt, "report_path", lambda profile, kind, root=None: tmp_path / f"{pt.slug(kind)}.json")
    bar = []
    rep = pt.run_check("decisive", 8, 3, progress=bar.append)
    assert seen == {"keys": keys, "jobs": 3, "progress": bar.append}
    assert rep["cpu_kind"] == each_vendor and kernels.cpu_info()["cpu_vendor"] == each_vendor.split("/")[0]
    saved = json.loads((tmp_path / f"{pt.slug(each_vendor)}.json").read_text())
    assert saved == json.loads(json.dumps(rep))
    assert set(saved[pt.TABLES_KEY]) == set(keys) and saved["identical"] == 8
    assert saved["identical_tables"] == (8 if same else 0)
    for k in keys:
        row = saved[pt.TABLES_KEY][k]
        committed = tier.committed_hashes(t, k)
        assert (row["committed_steps_hash"], row["committed_evals_hash"]) == (committed["steps_hash"],
                                                                              committed["evals_hash"])
        assert row["steps_identical"] == row["evals_identical"] == same
        assert row["evals_differ"] == ([] if same else sorted(committed["evals_columns"]))    # R@1, R@2, ..., step
    assert ("8 of 8 also gave" if same else "0 of 8 also gave") in pt.sentence(saved)
    assert pt.overview_table([saved])["tables identical"].tolist() == [f"{8 if same else 0} of 8"]


def test_the_portability_command_says_what_it_retrains_and_shows_a_progress_bar(runs, monkeypatch, capsys, tmp_path):
    """It printed nothing for 22 minutes on the Intel Xeon: now it says what it retrains first, and a bar of the
    steps trained moves as the runs report them (stderr)."""
    from sec_lib.site import runner
    keys = pt.stratified_sample(runs, 8)
    t = tier.open_tier(tier.tier_dir("decisive"))
    steps = sum(t.config(k).iterations for k in keys)
    intel = json.loads(INTEL.read_text()) if INTEL.exists() else None
    if intel is None:
        pytest.skip("the decisive tier's Intel report is not in this checkout")

    def fake_check(profile, sample, jobs, root=None, progress=None):
        for _ in range(4):
            progress(steps // 4)
        return intel
    monkeypatch.setattr(pt, "run_check", fake_check)
    assert runner.portability_command("decisive", 8, 2) == 0
    said = capsys.readouterr()
    assert said.out.startswith(f"retraining 8 runs of the decisive tier's primary comparison ({steps:,} steps in all) "
                               f"on {kernels.this_kind()} with 2 processes")
    assert "portability: 8 runs" in said.err and f"{steps // 4 * 4}/{steps}" in said.err
    assert pt.sentence(intel) in said.out and "gave the committed final R@1 exactly" in said.out


# --- the words, as the book says them today -------------------------------------------------------------------------

def test_the_reports_use_the_words_of_the_scorecard(intel):
    """The Intel report was written before the verdicts were sized against the paper's gains, and its JSON says
    "reproduced" for estimates the scorecard calls *smaller than claimed* (C4v pooled; C4a-c per loss). The page
    recomputes them from the committed runs and the report's shifts: the same estimates, today's words."""
    from sec_lib.chapters import evidence
    records = {r.id: r for r in evidence.page_records("compare", evidence.page_evidence("compare", "cpu"))}
    if records["C4v"].tier != "decisive":
        pytest.skip("the decisive tier is not in this checkout")
    assert {e["verdict"] for e in intel["estimates"]} == {"reproduced", "inconclusive"}        # as written
    (rep,) = [r for r in pt.reports("decisive") if r["cpu_kind"] == intel["cpu_kind"]]
    shown = {e["estimate"]: e for e in rep["estimates"]}
    for e in intel["estimates"]:                                  # the numbers are the report's
        assert shown[e["estimate"]]["committed"] == pytest.approx(e["committed"], abs=1e-9)
        assert shown[e["estimate"]]["swapped"] == pytest.approx(e["swapped"], abs=1e-5)
    assert shown["pooled"]["verdict"] == records["C4v"].verdict == "smaller than claimed"
    for loss in ("triplet", "semihard", "npair"):
        assert shown[loss]["verdict"] == shown[loss]["swapped_verdict"] == "smaller than claimed"
    assert shown["ms"]["verdict"] == "inconclusive"
    assert all(e["same_verdict"] for e in rep["estimates"])


def _report(**estimate):
    row = {"estimate": "pooled", "committed": 0.38, "ci_lo": 0.01, "ci_hi": 0.74, "verdict": "reproduced",
           "swapped": 0.30, "swapped_verdict": "inconclusive", "inside": True, "same_verdict": False, **estimate}
    return {"profile": "reference", "cpu_kind": "AMD/AVX2/native", "diffs": {"k": 0.1}, "estimates": [row]}


def test_a_report_without_its_tiers_runs_is_sized_on_its_own_numbers():
    """The retired tier's runs cannot be read back (its learning-rate pilot is not in the store): the committed word
    is sized on the committed interval against the paper's 1.66-7.48, the retrained word stays where sizing cannot
    change it, and a retrained *reproduced*, whose interval no report keeps, is refused with the reason."""
    (row,) = pt.in_todays_words(_report(), None)["estimates"]
    assert row["verdict"] == "smaller than claimed" and row["swapped_verdict"] == "inconclusive"
    assert not row["same_verdict"]
    (wide,) = pt.in_todays_words(_report(ci_hi=1.9), None)["estimates"]               # reaches the paper's range
    assert wide["verdict"] == "reproduced"
    with pytest.raises(ValueError, match="its retrained interval is not kept"):
        pt.in_todays_words(_report(swapped_verdict="reproduced"), None)
