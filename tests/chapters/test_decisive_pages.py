"""The pages' held-out selection tables read the decisive tier's selection stages (3 seeds a grid point), and a
page's selection sweep does not keep the decisive tier from covering it."""
import dataclasses
import json
import math
import shutil

import pandas as pd
import pytest

from kinds import each_vendor, other_kind  # noqa: F401  (each_vendor: a fixture, tests/kinds.py)
from sec_lib import kernels
from sec_lib.chapters import compare, evidence, optim, pretrained, scale
from sec_lib.runs import decisive, mainstage, selection, sweeps, tier
from sec_lib.runs import experiments as ex
from sec_lib.runs import store as store_module
from sec_lib.runs.store import ResultStore
from sec_lib.runs.train import RunResult


def save(store, c, score, status="done"):
    e = pd.DataFrame({"step": [c.iterations], "R@1": [score]})
    norms = pd.DataFrame({"label": [0], "norm": [1.0], "hit@1": [1]})
    store.save(RunResult(c, status, {"R@1": score}, e.iloc[:0], e.iloc[:0], e, norms, e.iloc[:0], e.iloc[:0]))


def shorten(monkeypatch, repo):
    """The stand-in tier's world: the repository at ``repo``, triplet the only loss."""
    monkeypatch.setattr(tier, "REPO", repo)
    for module in (ex, sweeps):            # the registry and the sweeps below it read their own names
        monkeypatch.setattr(module, "MAIN_LOSSES", ("triplet",))
        monkeypatch.setattr(module, "EXTRA_LOSSES", ())


def build(root):
    """A decisive tier of stage folders under ``root`` with a plan and choices: triplet's selection (η 0, 0.05, 0.1
    and L2 0.005, 3 seeds, held-out R@1 = 80 + 10·η + seed/1000, one η = 0.1 seed failed), relative SEC's (η 0.1,
    1), and the fine-tuning rates (two pairs); the result store they were exported from at ``root / "runs"``."""
    store = ResultStore(root / "runs")
    stages = {}
    for kind, weights, stage in (("sec", (0.0, 0.05, 0.1), "selection"), ("l2reg", (0.005,), "selection"),
                                 ("relative", (0.1, 1.0), "scale-selection")):
        for c in selection.configs("triplet", weights, "cosine", 3000, kind):
            failed = kind == "sec" and c.eta == 0.1 and c.seed == 1002
            save(store, c, math.nan if failed else 80 + 10 * c.eta + (c.seed - 1000) / 1000, "failed" if failed
                 else "done")
            stages.setdefault(stage, []).append(c)
    base = selection.configs("triplet", (0.0,), "cosine", 3000)
    for lr, head in ((1e-4, 5e-5), (3e-4, 1.5e-4)):
        for c in base:
            f = dataclasses.replace(c, pretrained="glyph-backbone", lr=lr, lr_head=head)
            save(store, f, 70 + lr * 1e4 + (c.seed - 1000) / 1000)
            stages.setdefault("finetune-selection", []).append(f)
    for arm in selection.RATE_ARMS:                    # SGD's rates: 0.1 peaks without SEC, 0.3 with it
        for c in selection.rate_configs(arm, (0.1, 0.3), "cosine", 3000):
            save(store, c, 60 - abs(c.lr - (0.3 if c.eta else 0.1)) * 10 + (c.seed - 1000) / 1000)
            stages.setdefault("sgd-selection", []).append(c)
    for stage, configs in stages.items():
        tier.export(store, configs, root / "data" / "reference" / "decisive" / stage)
    plan = mainstage.Plan("cosine", 3000, 6, 0.45, 0.4, {}, {"triplet": 0.1}, {"triplet": 0.005}, {})
    mainstage.write_plan(plan, decisive.plan_path())
    decisive.record_scale("triplet", selection.Choice(1.0, 1.0, {}, (0.1, 1.0), "high", None), 10.0)
    decisive.record_finetune(3e-4, 1.5e-4)
    for arm, lr in (("sgd", 0.1), ("sgd+sec", 0.3)):
        decisive.record_rate(arm, selection.Choice(lr, lr, {}, (0.1, 0.3), None, None))


@pytest.fixture(scope="module")
def staged_once(tmp_path_factory):
    """The stand-in tier (see :func:`build`), built once for the module; each test gets its own copy (``staged``)."""
    root = tmp_path_factory.mktemp("staged")
    with pytest.MonkeyPatch.context() as mp:
        shorten(mp, root)
        mp.setattr(store_module.os, "fsync", lambda fd: None)     # made-up records (see no_fsync, tests/conftest.py)
        build(root)
    return root


@pytest.fixture
def staged(staged_once, tmp_path, monkeypatch, no_fsync):
    """A copy of the stand-in tier at ``tmp_path`` (the repository the pages read it from): a test may add runs,
    stages and choices to it. Its files are new (``shutil.copy``, not ``copy2``): the caches keyed on a tier's
    file times (``evidence._covers``) see each test's tier as a tier of its own, as when each test built one."""
    shutil.copytree(staged_once, tmp_path, dirs_exist_ok=True, copy_function=shutil.copy)
    shorten(monkeypatch, tmp_path)
    return tmp_path


def test_the_compare_pages_eta_selection_reads_the_decisive_selection(staged):
    t = compare.eta_selection_table("decisive")
    assert list(t["eta"]) == [0.0, 0.05, 0.1] and set(t["loss"]) == {"triplet"}          # no L2 row, no relative row
    assert list(t["seeds"]) == [3, 3, 3]
    assert t["heldout_R@1"].tolist() == pytest.approx([80.001, 80.501, 81.0005])         # the failed seed left out
    assert list(t["status"]) == ["done", "done", "1 of 3 failed"]
    assert list(t["chosen"]) == [False, False, True]                                      # plan.json's η


def test_the_scale_and_pretrained_selections_read_their_stages(staged):
    t = scale.selection_table("decisive")
    assert list(t["η (relative SEC)"]) == [0.0, 0.1, 1.0]      # the main selection's η = 0 runs are the baseline
    assert list(t["chosen"]) == ["", "", "✓"] and list(t["seeds"]) == [3, 3, 3]
    f = pretrained.selection_table("decisive")
    assert list(f["trunk lr"]) == [1e-4, 3e-4] and list(f["chosen"]) == ["", "✓"]
    assert f["head/trunk"].tolist() == pytest.approx([0.5, 0.5]) and f["held-out R@1"].tolist() == pytest.approx(
        [71.001, 73.001])


def test_the_optim_pages_rates_read_the_decisive_sgd_selection(staged):
    t = optim.rate_selection("decisive")
    assert list(zip(t["arm"], t["lr"], t["chosen"])) == [("none", 0.1, True), ("none", 0.3, False),
                                                          ("sec", 0.1, False), ("sec", 0.3, True)]
    assert set(t["optimizer"]) == {"sgd"} and list(t["seeds"]) == [3] * 4
    runs = pd.DataFrame({"optimizer": ["adam", "sgd", "sgd"], "eta": [0.0, 0.0, 0.05], "lr": [3e-3, 0.1, 0.3]})
    assert optim.rates_sentence(runs, t) == ("Rates used: adam 0.003, sgd 0.1, sgd + SEC 0.3 (chosen on held-out "
                                             "classes: sgd 0.1, sgd + SEC 0.3).")


def test_the_rate_selection_sentence_says_where_sec_failed_and_the_plain_arm_trained():
    t = pd.DataFrame({"optimizer": ["sgd"] * 6, "arm": ["none"] * 3 + ["sec"] * 3, "lr": [0.1, 0.3, 1.0] * 2,
                      "R@1": [89.1, 88.9, 88.0, 89.2, float("nan"), float("nan")],
                      "status": ["done"] * 4 + ["3 of 3 failed"] * 2, "seeds": 3, "failed": [0] * 4 + [3] * 2,
                      "chosen": [True, False, False, True, False, False]})
    s = optim.selection_sentence(t)
    assert s.startswith("sgd without SEC chose lr 0.1 (the smallest rate of its grid); "
                        "sgd with SEC chose lr 0.1 (the smallest rate of its grid).")
    assert "sgd with SEC failed at lr 0.3 and 1 (all 3 seeds at each), where sgd without SEC trained: SEC at the " \
           "paper's η narrows sgd's stable range." in s
    t2 = pd.concat([t.iloc[:3].assign(lr=[0.03, 0.1, 0.3], chosen=[False, True, False]),
                    t.iloc[3:].assign(lr=[0.03, 0.1, 0.3], chosen=[False, True, False],
                                      status=["done", "done", "1 of 3 failed"], failed=[0, 0, 1])],
                   ignore_index=True)
    s2 = optim.selection_sentence(t2)
    assert "sgd with SEC chose lr 0.1 (the largest rate at which every run trained)" in s2    # one seed of 0.3 failed
    assert "sgd without SEC chose lr 0.1 (inside its grid)" in s2 and "(1 of 3 failed)" in s2
    assert optim.selection_sentence(t2.assign(status="done", failed=0)).count("failed") == 0
    pilot = optim.pilot_table(pd.DataFrame({"optimizer": ["sgd"] * 3, "lr": [0.1, 0.3, 1.0], "eta": [0.5] * 3,
                                            "R@1": [80.0, float("nan"), float("nan")],
                                            "status": ["done", "failed", "failed"]}))
    assert list(pilot["failed"]) == [0, 1, 1] and set(pilot["seeds"]) == {1}
    assert "sgd with SEC failed at lr 0.3 and 1 (its one run at each)." in optim.selection_sentence(pilot)
    with pytest.raises(ValueError, match="lacks columns"):
        optim.selection_sentence(t.drop(columns="chosen"))


def test_the_optim_page_says_when_sgds_sec_arm_runs_at_another_eta_than_its_rate_was_chosen_at():
    pilot = pd.DataFrame({"optimizer": ["sgd"] * 3, "arm": ["none", "sec", "sec"], "eta": [0.0, 0.5, 0.5],
                          "lr": [0.1, 0.1, 0.3], "chosen": [True, True, False]})
    runs = pd.DataFrame({"optimizer": ["adam"] + ["sgd"] * 5, "variant": ["sec", "none", "sec", "sec", "sec", "sec"],
                         "loss": ["ms", "ms", "semihard", "triplet", "npair", "ms"],
                         "eta": [1.0, 0.0, 0.5, 1.0, 1.0, 1.0]})
    assert optim.eta_sentence(runs, pilot) == (
        "SGD's SEC arm chose its rate with semihard at η 0.5; triplet, npair and ms use η 1, twice that. Under SGD, "
        "SEC's step on the parameters scales with lr·η, so those rows test a rate chosen at a smaller η.")
    assert optim.eta_sentence(runs[runs.loss != "ms"].assign(eta=lambda d: d.eta.where(d.eta != 1.0, 0.25)), pilot) \
        .startswith("SGD's SEC arm chose its rate with semihard at η 0.5; triplet and npair use η 0.25, half that.")
    assert optim.eta_sentence(runs[runs.loss == "semihard"], pilot).endswith("the η its rate was chosen at.")
    assert optim.eta_sentence(runs[runs.optimizer == "adam"], pilot) == ""


def test_the_scale_and_pretrained_pages_say_what_the_decisive_tier_trained(staged):
    """Their design sentences count the decisive tier's own runs (seeds per arm, its held-out selections at 3 seeds a
    point) instead of a pilot seed and the quick tier's design."""
    s = scale.design_sentence("decisive")
    assert "by 6 runs on held-out training classes (3 seeds a point)" in s and "among 0.1, 1" in s
    assert "5 arms × 5 seeds, 3,000 iterations" in s               # every arm of the chapter at the tier's floor
    f = pretrained.design_sentence("decisive")
    assert f.startswith("This page reads") and "**decisive tier**" in f and "quick tier" not in f
    assert "none / L2-reg / SEC / relative SEC × 5 seeds, 3,000 iterations" in f
    assert "chosen by 6 runs on held-out training classes (semihard without SEC, 3 seeds a pair)" in f
    assert "chose trunk 0.0003 and head 0.00015" in f
    assert "The chosen trunk rate is 0.1× the from-scratch runs' rate (0.003): fine-tuning moves" in f
    sched = pretrained.schedule_sentence("decisive")         # the tier's own schedule, named as not the paper's
    assert sched.startswith("**Schedule:** this tier's own cosine decay over 3,000 iterations, the shape and length its "
                            "schedule pilot chose (tiers page), not the paper's step schedule")
    assert sched.endswith("The rates were chosen with 3 seeds a pair.")
    path = decisive.choices_path()                              # a flagged choice says so beside the rate
    choices = json.loads(path.read_text())
    choices[decisive.FINETUNE]["flags"] = ["at the high edge of its grid after 2 extensions"]
    path.write_text(json.dumps(choices))
    assert "(0.003) (flagged: at the high edge of its grid after 2 extensions): " in pretrained.design_sentence("decisive")


def test_the_other_functions_the_pages_call_with_their_tier_take_the_decisive_tier(staged):
    """Every function a notebook calls with the tier it shows (T), besides the ones above, on the decisive tier."""
    from sec_lib.chapters import home, mu
    from sec_lib.runs import benchmarks
    assert mu.mu_order("decisive") == mu.mu_order("reference")
    assert home.paper_sets("decisive") == home.paper_sets("reference")
    assert benchmarks.data_name("decisive") == "glyphs"


def test_the_tiers_page_compares_the_decisive_held_out_gains_with_its_test_gains(staged):
    from sec_lib.chapters import tiers
    assert not len(tiers.selection_prediction("decisive"))            # no test run committed yet
    store = ResultStore(staged / "runs")
    main = ex.sweep_configs("main", "decisive", store)
    for c in main:              # test R@1 = 70 + 5·η (SEC) + seed/1000, as the η sweep's below (runs they share)
        save(store, c, 70 + 5 * c.eta * (c.variant == "sec") + c.seed / 1000)
    tier.export(store, main, staged / "data" / "reference" / "decisive" / "main")
    d = tiers.selection_prediction("decisive")       # before the η sweep: the main comparison's SEC arms
    assert list(d["eta"]) == [0.1] and set(d["test_runs"]) == {"main comparison"}   # η 1 has no held-out cell
    assert d["test_gain"].tolist() == pytest.approx([0.5]) and d["heldout_gain"].tolist() == pytest.approx([0.9995])
    assert set(d["test_seeds"]) == {len({c.seed for c in main if c.variant == "sec" and c.eta == 0.1})}
    sweep = ex.sweep_configs("eta", "decisive", store)
    for c in sweep:                                                    # test R@1 = 70 + 5·η + seed/1000
        save(store, c, 70 + 5 * c.eta + c.seed / 1000)
    tier.export(store, sweep, staged / "data" / "reference" / "decisive" / "eta")
    d = tiers.selection_prediction("decisive").set_index("eta")
    assert list(d.index) == [0.05, 0.1] and list(d["heldout_seeds"]) == [3, 2]          # the failed seed left out
    assert d["heldout_gain"].tolist() == pytest.approx([0.5, 0.9995])
    assert d["test_gain"].tolist() == pytest.approx([0.25, 0.5]) and set(d["test_seeds"]) == {3}
    assert set(d["test_runs"]) == {"η sweep"}


def test_the_tiers_page_takes_a_review_losss_test_gain_from_its_review_chapter(staged, monkeypatch):
    from sec_lib.chapters import tiers
    for module in (ex, sweeps):
        monkeypatch.setattr(module, "SSL_LOSSES", ("supcon",))
        monkeypatch.setattr(module, "REVIEW_LOSSES", ("supcon",))
    store = ResultStore(staged / "runs")
    held = selection.configs("supcon", (0.0, 0.1, 0.5), "cosine", 3000)
    for c in held:                                            # held-out R@1 = 70 + 10·η + seed/1000: η 0.5 best
        save(store, c, 70 + 10 * c.eta + (c.seed - 1000) / 1000)
    tier.export(store, held, staged / "data" / "reference" / "decisive" / "review-selection")
    decisive.record_choice("supcon", selection.Choice(0.5, 0.5, {}, (0.1, 0.5), None, None))
    assert not len(tiers.selection_prediction("decisive"))            # no test run committed yet
    runs = ex.sweep_configs("ssl", "decisive", store)
    for c in runs:                                                    # test R@1 = 60 + 2·η (SEC) + seed/1000
        save(store, c, 60 + 2 * c.eta * (c.variant == "sec") + c.seed / 1000)
    tier.export(store, runs, staged / "data" / "reference" / "decisive" / "review")
    d = tiers.selection_prediction("decisive")
    assert list(zip(d["loss"], d["eta"], d["test_runs"])) == [("supcon", 0.5, "review chapters")]
    assert d["heldout_gain"].tolist() == pytest.approx([5.0]) and d["test_gain"].tolist() == pytest.approx([1.0])
    assert set(d["test_seeds"]) == {len({c.seed for c in runs})}


def test_the_tiers_page_counts_the_cpu_kind_and_the_isa_each_decisive_run_recorded(staged, each_vendor):
    """Run as this machine and as the other vendor's (``each_vendor``): "another kind" is derived from the kind this
    process presents, never named (an Intel machine's own kind is ``Intel/AVX2/avx2``)."""
    from sec_lib.chapters import tiers
    decisive_root = staged / "data" / "reference" / "decisive"
    mine = kernels.this_kind()                     # every stand-in run recorded the kind of the machine that trained it
    for d in tier.stage_dirs(decisive_root):
        pd.read_parquet(d / "runs.parquet").assign(cpu_kind=mine).to_parquet(d / "runs.parquet")
    path = decisive_root / "sgd-selection" / "runs.parquet"
    r = pd.read_parquet(path)
    other = other_kind(mine)
    assert other != mine
    r.loc[r.index[:2], "cpu_isa"] = "sse4_2 avx avx2 fma"                     # two trained on an AVX2-only CPU
    r.loc[r.index[2:], "cpu_isa"] = "sse4_2 avx avx2 fma avx512f"
    r.loc[r.index[:1], "cpu_kind"] = other                                    # and one of them on another kind
    r.to_parquet(path)
    k = tiers.kind_table("decisive").set_index("stage")
    assert set(k.index) == {"selection", "scale-selection", "finetune-selection", "sgd-selection"}
    n = len(r)
    assert k.loc["sgd-selection", ["runs", "AVX2 only", "with AVX-512"]].tolist() == [n, 2, n - 2]
    assert k.loc["sgd-selection", "CPU kind"] == f"{mine} ({n - 1}), {other} (1)"
    total = len(tier.StagedTier(decisive_root).runs)
    assert tiers.staged_kind_sentence("decisive").startswith(
        f"The {total:,} runs of the decisive tier recorded 2 CPU kinds: {mine} ({total - 1}), {other} (1)")
    r.assign(cpu_kind=mine).to_parquet(path)
    assert tiers.staged_kind_sentence("decisive").startswith(f"All {total:,} runs of the decisive tier recorded one "
                                                             f"CPU kind, **{mine}**")
    assert tiers.staged_kind_sentence("gpu") == "The gpu tier has no committed run yet."


def test_the_compare_page_says_what_the_decisive_selection_flagged(staged):
    assert compare.selection_flags("reference") == ""
    assert "is interior to its grid, and SEC was selected for every loss" in compare.selection_flags("decisive")
    flagged = mainstage.Plan("cosine", 3000, 6, 0.45, 0.4, {}, {"triplet": 0.1}, {"triplet": 0.005},
                             {"triplet": ["SEC not selected (no regularizer scored best); the best nonzero weight is "
                                          "tested"]})
    (staged / "data" / "reference" / "decisive" / "plan.json").write_text(flagged.to_json())
    decisive.record_choice("tml", selection.Choice(0.5, 0.5, {}, (0.005, 0.5), "high", None),
                           selection.Choice(0.005, 0.005, {}, (0.005,), None, None))
    s = compare.selection_flags("decisive", losses=("triplet", "tml"))
    assert "- **triplet** (η = 0.1 is tested): SEC's η: not selected (no regularizer scored best)" in s
    assert "- **tml** (η = 0.5 is tested): SEC's η: at the high edge of its grid after 2 extensions." in s
    assert "tml" not in compare.selection_flags("decisive")        # not a loss of the stand-in's compare page
    # the L2 weight's flags (recorded as 'L2: …') stand apart from SEC's, each regularizer named once
    assert compare.flags_text(["SEC not selected (no regularizer scored best); the best nonzero weight is tested",
                               "L2: L2-reg not selected (no regularizer scored best); the best nonzero weight is tested",
                               "L2: at the low edge of its grid after 2 extensions"]) == (
        "SEC's η: not selected (no regularizer scored best); the best nonzero weight is tested. The L2 weight: not "
        "selected (no regularizer scored best); the best nonzero weight is tested; at the low edge of its grid after "
        "2 extensions.")
    assert compare.flags_text(["L2: at the low edge of its grid after 2 extensions"]) == (
        "The L2 weight: at the low edge of its grid after 2 extensions.")


def test_a_review_pages_eta_selection_reads_its_losses_from_the_review_selection_stage(staged):
    store = ResultStore(staged / "runs")
    configs = selection.configs("supcon", (0.0, 0.1, 0.5), "cosine", 3000)
    for c in configs:                                         # held-out R@1 = 70 + 10·η + seed/1000: η 0.5 best
        save(store, c, 70 + 10 * c.eta + (c.seed - 1000) / 1000)
    tier.export(store, configs, staged / "data" / "reference" / "decisive" / "review-selection")
    t = compare.eta_selection_table("decisive", losses=("supcon",))
    assert set(t["loss"]) == {"supcon"} and list(t["eta"]) == [0.0, 0.1, 0.5] and list(t["seeds"]) == [3] * 3
    assert t["heldout_R@1"].tolist() == pytest.approx([70.001, 71.001, 75.001])
    assert not t["chosen"].any()                                  # not chosen yet: choices.json has no supcon
    assert set(compare.eta_selection_table("decisive")["loss"]) == {"triplet"}      # the compare page's losses only
    assert compare.selection_flags("decisive", losses=("supcon",)) == (
        "The held-out η of supcon is not chosen yet: its selection is still training.")
    both = compare.selection_flags("decisive", losses=("triplet", "supcon"))
    assert both.startswith("Every η and L2 weight the decisive tier chose on held-out classes is interior to its "
                           "grid, and SEC was selected for every loss chosen so far.")
    decisive.record_choice("supcon", selection.Choice(0.5, 0.5, {}, (0.1, 0.5), "high", None))
    t = compare.eta_selection_table("decisive", losses=("supcon",))
    assert list(t["chosen"]) == [False, False, True]
    assert compare.selection_flags("decisive", losses=("supcon",)) == (
        "**Flagged by the held-out selection:**\n\n- **supcon** (η = 0.5 is tested): SEC's η: at the high edge of its grid "
        "after 2 extensions.")
    assert "supcon" not in compare.selection_flags("decisive")     # another page's loss stays off the compare page


def test_the_tiers_page_shows_the_last_quarter_gain_of_every_reported_decisive_run(staged):
    from sec_lib.chapters import tiers
    assert "no reported run (scored on the test classes) committed yet" in tiers.last_quarter_sentence(
        tiers.last_quarter("decisive"), "decisive")                # held-out runs only so far
    store = ResultStore(staged / "runs")
    sweep = ex.sweep_configs("eta", "decisive", store)
    for c in sweep:                                    # R@1 at 75% and at the end: rising by 0.5 where η > 0.1
        e = pd.DataFrame({"step": [c.iterations * 3 // 4, c.iterations], "R@1": [70.0, 70.5 if c.eta > 0.1 else 70.1]})
        store.save(RunResult(c, "done", {"R@1": 70.0}, e.iloc[:0], e.iloc[:0], e, pd.DataFrame(
            {"label": [0], "norm": [1.0], "hit@1": [1]}), e.iloc[:0], e.iloc[:0]))
    tier.export(store, sweep, staged / "data" / "reference" / "decisive" / "eta")
    lq = tiers.last_quarter("decisive")
    assert len(lq) == len(sweep) and (lq["iterations"] == 3000).all()
    assert lq["rising"].sum() == sum(c.eta > 0.1 for c in sweep) > 0
    assert set(lq["schedule"]) == {"cosine"}
    said = tiers.last_quarter_sentence(lq, "decisive")
    # a cosine run rises as its rate falls over the last quarter: flagged, and the page says what that rise means
    assert f"**{int(lq['rising'].sum())} of {len(sweep)} runs rise** by more than 0.3 points" in said
    assert "cosine decay to zero" in said and "still rise" not in said and "1.5× as long" in said
    constant = tiers.last_quarter_sentence(lq.assign(schedule="constant"), "decisive")
    assert f"**{int(lq['rising'].sum())} of {len(sweep)} runs still rise**" in constant and "annealing" not in constant


def test_a_pages_selection_sweep_does_not_keep_the_decisive_tier_from_covering_it(staged, monkeypatch):
    """In the decisive tier the held-out selections are stages its profile is written from, not chapters: a page
    reading ('selection', X) is covered once X's runs are all committed; ('selection',) alone covers nothing."""
    evidence._covers.cache_clear()
    monkeypatch.setattr(ex, "sweep_configs", lambda ch, profile, store: (
        pytest.fail("the selection sweep is not looked up in a staged tier") if ch == "selection" else
        [store.config(k) for k in store.keys()][:2]))
    assert evidence.covers("decisive", ("selection", "scale"))
    assert not evidence.covers("decisive", ("selection",))
    evidence._covers.cache_clear()
