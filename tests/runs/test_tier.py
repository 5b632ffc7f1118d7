"""Committed tiers: a compact export of a store that reads back like the store, and any row retrains."""
import dataclasses
import functools
import json

import pandas as pd
import torch
import pytest

from kinds import each_vendor, other_kind  # noqa: F401  (each_vendor: a fixture, tests/kinds.py)
from sec_lib import kernels
from sec_lib.runs import experiments as ex
from sec_lib.runs import tier
from sec_lib.params import ParameterError
from sec_lib.runs.pool import run_all
from sec_lib.runs.store import ResultStore, run_key
from sec_lib.runs.train import TrainConfig


@pytest.fixture(scope="module")
def toy(toy):
    """The shared toy config (tests/conftest.py) with this file's longer schedule."""
    return functools.partial(toy, iterations=30, eval_every=10, track_every=2, dtheta_every=4)


@pytest.fixture(scope="module")
def exported(tmp_path_factory, toy):
    root = tmp_path_factory.mktemp("tier")
    store = ResultStore(root / "store")
    configs = [toy(), toy(seed=1), toy(eta=0.5, mu="batch"), toy(optimizer="sgd", lr=100.0, eta=50.0)]   # the last diverges
    run_all(configs, root=store.root, jobs=1)
    counts = tier.export(store, configs + [toy(seed=7)], root / "tier")
    return store, configs, root / "tier", counts


def test_export_writes_one_row_per_run_with_config_and_provenance(exported):
    store, configs, out, counts = exported
    assert counts == {"exported": 4, "missing": 1}
    runs = pd.read_parquet(out / "runs.parquet")
    assert list(runs["key"]) == [run_key(c) for c in configs]
    for row, cfg in zip(runs.itertuples(), configs):
        assert TrainConfig(**json.loads(row.config)) == cfg           # the row rebuilds the run
    assert {"R@1", "status", "commit", "device", "torch", "date", "wall_s"} <= set(runs.columns)
    assert runs["status"].tolist()[-1] == "failed" and runs["device"].eq("cpu").all()


def test_tier_reads_back_like_the_store(exported, toy):
    store, configs, out, _ = exported
    t = tier.TierStore(out)
    for cfg in configs:
        a, b = store.get(cfg), t.get(cfg)
        assert b.status == a.status and b.config == cfg
        assert b.metrics == pytest.approx(a.metrics, nan_ok=True)
        pd.testing.assert_frame_equal(b.evals.reset_index(drop=True), a.evals.reset_index(drop=True),
                                      check_dtype=False)
        assert set(b.steps["step"]) <= set(a.steps["step"])           # decimated, never invented
        assert b.steps["step"].max() == a.steps["step"].max()
    assert t.get(toy(seed=7)) is None and not t.has(toy(seed=7))


def test_every_store_answers_get_with_only_the_tables_asked_for(exported):
    """One interface: the store and the committed tier both take ``get(cfg or key, tables=...)``."""
    store, configs, out, _ = exported
    for s in (store, tier.TierStore(out)):
        r = s.get(configs[0], tables=("evals",))
        assert len(r.evals) and r.metrics["R@1"] == store.get(configs[0]).metrics["R@1"]
        assert all(getattr(r, t).empty for t in tier.TABLES if t != "evals"), type(s).__name__
        by_key = s.get(run_key(configs[0]), tables=())
        assert by_key.config == configs[0] and by_key.evals.empty
    with pytest.raises(ValueError, match="unknown tables.*valid: steps"):
        store.get(configs[0], tables=("evalz",))


def test_export_keeps_runs_the_store_no_longer_has(exported, tmp_path):
    store, configs, out, _ = exported
    again = tier.export(ResultStore(tmp_path / "empty"), configs, out)
    assert again == {"exported": 4, "missing": 0}


def test_rerun_retrains_a_row_and_matches(exported, tmp_path):
    _, configs, out, _ = exported
    fresh = ResultStore(tmp_path / "fresh")
    steps = []
    committed, retrained, result = tier.rerun(run_key(configs[2]), out, fresh,
                                              progress=lambda s, n: steps.append((s, n)))
    assert retrained == committed and result.status == "done"
    assert fresh.get(configs[2]).metrics["R@1"] == committed                 # saved where it was missing
    assert steps == [(s, configs[2].iterations) for s in range(1, configs[2].iterations + 1)]   # rerun's progress bar
    # "identical" is identical bits: the fresh run's step and evaluation tables, compacted as the tier keeps them,
    # hash as the committed rows do (read back from the tier's parquet files, among the other runs' rows)
    assert tier.result_hashes(result) == tier.committed_hashes(tier.TierStore(out), run_key(configs[2]))


def test_table_hash_reads_the_values_not_how_a_tier_stores_them():
    """One run's table hashes alike as trained and as committed (column order, the empty columns of the tier's union
    of columns, an integer column stored as float, a NaN's sign, the clock and the key left out); any changed value,
    row or column changes it."""
    import numpy as np
    df = pd.DataFrame({"step": [1, 2, 3], "loss_metric": [0.5, np.nan, 0.25], "grad_slope": [-np.nan, 1.0, 2.0],
                       "step_time": [0.1, 0.2, 0.3]})
    h = tier.table_hash(df)
    stored = df[["step_time", "grad_slope", "step", "loss_metric"]].assign(
        step=df["step"].astype(float), mu=np.nan, key="abc", step_time=[9.0, 9.0, 9.0],
        grad_slope=[np.nan, 1.0, 2.0]).set_axis([7, 8, 9])
    assert tier.table_hash(stored) == h and len(h) == 16
    assert tier.table_hash(df.assign(loss_metric=[0.5, np.nan, 0.25 + 1e-17])) == h            # the same double
    assert tier.table_hash(df.assign(loss_metric=[0.5, np.nan, np.nextafter(0.25, 1.0)])) != h  # one bit
    assert tier.table_hash(df.iloc[:2]) != h and tier.table_hash(df.rename(columns={"loss_metric": "loss"})) != h
    assert tier.table_hash(df.assign(extra=[0.0, 0.0, 0.0])) != h
    # per column too: where two tables differ, which columns do
    cols = tier.column_hashes(df)
    assert set(cols) == {"step", "loss_metric", "grad_slope"} and tier.column_hashes(stored) == cols
    changed = tier.column_hashes(df.assign(loss_metric=[0.5, np.nan, 0.3]))
    assert [c for c in cols if changed[c] != cols[c]] == ["loss_metric"]


def test_retrain_in_processes_reports_steps_and_the_tables_hashes(exported):
    """``retrain`` (the portability check's): each run's R@1, kind and table hashes, the same in one process and in
    two, and every step reported to the caller's progress callback."""
    _, configs, out, _ = exported
    keys = [run_key(configs[0]), run_key(configs[2])]
    seen = []
    got = tier.retrain(keys, out, jobs=2, progress=seen.append)
    assert sum(seen) == configs[0].iterations + configs[2].iterations and all(n > 0 for n in seen)
    t = tier.TierStore(out)
    for k in keys:
        r = got[k]
        assert r.r1 == t.get(k, tables=()).metrics["R@1"] and r.kind == kernels.this_kind()
        assert {f: getattr(r, f) for f in ("steps_hash", "steps_columns", "evals_hash", "evals_columns")} == \
            tier.committed_hashes(t, k)
    assert tier.retrain(keys[:1], out, jobs=1) == {keys[0]: got[keys[0]]}


def test_rerun_trains_even_when_the_store_holds_the_key(exported, tmp_path, monkeypatch):
    """After ``make decisive`` restores the tier, the local store holds every committed key: a rerun
    that returned the stored copy would always 'match'. It must train, and leave the stored copy alone."""
    _, configs, out, _ = exported
    store = ResultStore(tmp_path / "restored")
    tier.restore(out, store)
    key = run_key(configs[2])
    calls = []
    real_train = tier.train
    monkeypatch.setattr(tier, "train", lambda cfg: calls.append(run_key(cfg)) or real_train(cfg))
    committed, retrained, result = tier.rerun(key, out, store)
    assert calls == [key] and retrained == committed and result.status == "done"
    # a tampered committed number is caught, not echoed back from the restored copy
    monkeypatch.setattr(tier.TierStore, "get", lambda self, cfg, tables=(): dataclasses.replace(
        result, metrics={**result.metrics, "R@1": result.metrics["R@1"] + 1.0}))
    committed2, retrained2, _ = tier.rerun(key, out, store)
    assert committed2 == retrained2 + 1.0


def test_unknown_key_is_a_clear_error(exported):
    _, _, out, _ = exported
    with pytest.raises(ParameterError, match="not in the tier"):
        tier.TierStore(out).config("0123456789abcdef")
    with pytest.raises(FileNotFoundError, match="runs.parquet"):
        tier.TierStore(out / "nothing")


def test_profile_configs_grow_stage_by_stage(tmp_path):
    store = ResultStore(tmp_path)
    p = ex.get_profile("smoke")
    assert ex.profile_configs(p, store) == ex.lr_pilot(p)          # nothing trained: only the pilot


def test_restore_seeds_a_fresh_store_so_training_resumes(exported, tmp_path):
    store, configs, out, _ = exported
    fresh = ResultStore(tmp_path / "fresh")
    assert tier.restore(out, fresh) == 4
    assert tier.restore(out, fresh) == 0                               # only what the store lacks
    t = tier.TierStore(out)
    for cfg in configs:
        key = run_key(cfg)
        assert fresh.get(cfg).status == store.get(cfg).status
        assert fresh.get(cfg).metrics == pytest.approx(store.get(cfg).metrics, nan_ok=True)
        assert fresh.meta(key)["provenance"]["date"] == str(t.meta(key)["provenance"]["date"])   # not "now"
    events = []
    run_all(configs, root=fresh.root, jobs=1, progress=lambda event, n, total: events.append(event))
    assert "trained" not in events                                     # nothing retrains
    assert tier.restore(tmp_path / "no-tier", fresh) == 0


# --- the reproducibility contract: rerun tells the truth -------------------------------------------------

def _tier_copy(out, tmp_path, name="tier", **columns):
    """A copy of the exported tier (at ``tmp_path / name``) with some provenance columns rewritten (and R@1 shifted
    where asked)."""
    import shutil
    dst = tmp_path / name
    shutil.copytree(out, dst)
    runs = pd.read_parquet(dst / "runs.parquet")
    shift = columns.pop("shift_r1", 0.0)
    runs["R@1"] = runs["R@1"] + shift
    for k, v in columns.items():
        runs[k] = v
    runs.to_parquet(dst / "runs.parquet", index=False)
    return dst


def test_exported_rows_record_the_cpu_kind_and_kernel_settings(exported):
    from sec_lib import kernels
    runs = pd.read_parquet(exported[2] / "runs.parquet")
    assert {"cpu_vendor", "cpu_model", "cpu_isa", "aten_capability", "mkl", "onednn", "kernel_pin", "kernel_env",
            "cpu_kind"} <= set(runs.columns)
    assert runs["cpu_kind"].eq(kernels.this_kind()).all() and runs["kernel_pin"].eq(kernels.pin_name()).all()
    assert json.loads(runs["kernel_env"].iloc[0])["ATEN_CPU_CAPABILITY"] == "avx2"


def test_rerun_on_the_same_kind_demands_identity(exported, tmp_path, capsys, monkeypatch, each_vendor):
    """As this machine and as the other vendor's (``each_vendor``): a run committed on the kind this process
    presents must retrain identically."""
    from sec_lib.runs import commands
    monkeypatch.setenv("SEC_RUNS_DIR", str(tmp_path / "runs"))
    _, configs, out, _ = exported
    key = run_key(configs[2])
    mine = _tier_copy(out, tmp_path, name="mine", cpu_kind=each_vendor)   # committed on the kind presented here
    assert commands.rerun_command(key, "smoke", mine) == 0
    said = capsys.readouterr()
    assert "(identical)" in said.out and f"committed on CPU kind {each_vendor}; this machine is {each_vendor}" in said.out
    n = configs[2].iterations                                           # its progress bar, on stderr
    assert f"rerun {key} ({configs[2].loss} {configs[2].variant} seed {configs[2].seed})" in said.err
    assert f"{n}/{n}" in said.err and "step" in said.err
    tampered = _tier_copy(out, tmp_path, shift_r1=0.5, cpu_kind=each_vendor)
    assert commands.rerun_command(key, "smoke", tampered) == 1          # same kind, other number: a failure
    assert "same CPU kind" in capsys.readouterr().out
    staged = tmp_path / "staged"                                        # a staged tier: the stage that holds the run
    store, _, _, _ = exported
    tier.export(store, configs[:2], staged / "pilot")
    tier.export(store, configs[2:], staged / "selection")
    assert commands.rerun_command(key, "smoke", staged) == 0
    assert "(identical)" in capsys.readouterr().out
    assert commands.rerun_command("0" * 16, "smoke", staged) == 2      # in no stage: the clear error, nothing trains
    assert "is in no stage of the tier" in capsys.readouterr().err


def test_the_retired_reference_tier_is_not_exported_and_rerun_reads_its_successor(capsys, monkeypatch, tmp_path):
    """The reference tier is retired: `export --profile reference` refuses (naming the commit that holds it whole and
    the tier that replaced it) before it reads any store, and `rerun KEY` of the reference profile looks in the
    decisive tier, with a clear error for a key it does not hold."""
    from sec_lib.runs import commands
    monkeypatch.setenv("SEC_RUNS_DIR", str(tmp_path / "runs"))
    assert tuple(tier.RETIRED) == tier.RETIRED_TIERS == ("reference",) and "reference" not in tier.TIER_PROFILES
    assert commands.export_command("reference") == 2
    err = capsys.readouterr().err
    assert "retired" in err and tier.RETIRED["reference"].at in err and "make decisive" in err
    assert f"retired on {tier.RETIRED['reference'].on}" in err
    assert not (tmp_path / "runs").exists()
    if not tier.stage_dirs(tier.tier_dir("decisive")):
        pytest.skip("no committed decisive tier in this checkout")
    assert commands.rerun_command("0" * 16, "reference") == 2
    assert "data/reference/decisive" in capsys.readouterr().err


def test_rerun_on_another_kind_reports_seed_sds_and_exits_0(exported, tmp_path, capsys, monkeypatch, each_vendor):
    """The committed row names a kind other than the one this process presents (derived from it, never named: an
    Intel machine's own kind is ``Intel/AVX2/avx2``), as this machine and as the other vendor's (``each_vendor``:
    there, the row's kind is this machine's real one)."""
    from sec_lib.runs import commands
    monkeypatch.setenv("SEC_RUNS_DIR", str(tmp_path / "runs"))
    _, configs, out, _ = exported
    theirs = other_kind()
    assert theirs != kernels.this_kind() == each_vendor
    other = _tier_copy(out, tmp_path, shift_r1=0.5, cpu_kind=theirs)
    assert commands.rerun_command(run_key(configs[0]), "smoke", other) == 0
    said = capsys.readouterr().out
    assert "differs by -0.5000" in said and "seed SDs" in said and "not expected" in said
    assert f"committed on CPU kind {theirs}; this machine is {each_vendor}" in said
    assert f"another CPU kind ({theirs})" in said


def test_a_row_from_before_the_contract_retrains_under_the_legacy_pin_in_a_child(exported, tmp_path, capfd, monkeypatch):
    """No kernel_pin recorded: nothing was pinned then, so the rerun starts a process under the 'native' pin,
    and its kind is what kinds.csv knows of the row's commit, else unknown."""
    from sec_lib.runs import commands
    monkeypatch.setenv("SEC_RUNS_DIR", str(tmp_path / "runs"))
    _, configs, out, _ = exported
    legacy = _tier_copy(out, tmp_path, kernel_pin=None, cpu_kind=None)
    assert tier.committed_kind(tier.TierStore(legacy), run_key(configs[0])) == tier.UNKNOWN_KIND
    assert commands.rerun_command(run_key(configs[0]), "smoke", legacy) == 0
    said = capfd.readouterr().out
    assert "under the kernel pin 'native'" in said and "committed on CPU kind unknown" in said
    commit = pd.read_parquet(legacy / "runs.parquet")["commit"].iloc[0]
    pd.DataFrame({"commit": [commit], "cpu_kind": ["AMD/AVX512/native"], "evidence": ["test"]}).to_csv(
        legacy / tier.KINDS_FILE, index=False)
    assert tier.committed_kind(tier.TierStore(legacy), run_key(configs[0])) == "AMD/AVX512/native"


def test_seed_sd_is_the_arms_own_or_the_pooled_sd_of_its_loss(exported):
    import numpy as np
    _, configs, out, _ = exported
    t = tier.TierStore(out)
    sd, what = tier.seed_sd(t, run_key(configs[0]))          # configs 0 and 1: one arm, two seeds
    r1 = t.runs.set_index("key").loc[[run_key(configs[0]), run_key(configs[1])], "R@1"]
    assert sd == pytest.approx(np.std(r1, ddof=1)) and "2 seeds" in what
    sd2, what2 = tier.seed_sd(t, run_key(configs[2]))        # a one-seed arm: the pooled SD of its loss's arms
    assert sd2 == pytest.approx(sd) and "pooled" in what2


def test_a_staged_tier_reads_its_stage_folders_as_one_store(exported, tmp_path, monkeypatch):
    """The decisive tier is committed one folder per stage; store_for reads them as one store (a run found in the
    stage that holds it, each run once), and its profile is the plan's (none before the plan is written)."""
    store, configs, _, _ = exported
    monkeypatch.setattr(tier, "REPO", tmp_path)
    assert not tier.has_tier("decisive") and isinstance(tier.store_for("decisive"), ResultStore)
    root = tier.tier_dir("decisive")
    tier.export(store, configs[:2], root / "pilot")
    tier.export(store, configs[2:], root / "selection")
    (root / "empty").mkdir()                                        # a folder without runs is no stage
    assert tier.has_tier("decisive") and [d.name for d in tier.stage_dirs(root)] == ["pilot", "selection"]
    staged = tier.store_for("decisive")
    assert isinstance(staged, tier.StagedTier) and tier.store_for("decisive") is staged      # opened once
    assert staged.keys() == sorted(run_key(c) for c in configs) and len(staged.runs) == 4
    for c in configs:
        assert staged.has(c) and staged.get(c, tables=("evals",)).metrics == store.get(c).metrics
        assert staged.config(run_key(c)) == c and "cpu_kind" in staged.meta(run_key(c))["provenance"]
    assert staged.get(dataclasses.replace(configs[0], seed=99)) is None
    with pytest.raises(ParameterError, match="not in the staged tier .*pilot, selection"):
        staged.config("0" * 16)
    with pytest.raises(KeyError, match="no plan yet"):
        ex.get_profile("decisive")


def test_a_gpu_run_has_a_gpu_kind_and_is_not_retrained_without_a_gpu(capsys):
    """The committed gpu tier's runs: their kind is the GPU's (tier.gpu_kind), with the versions their row records
    and the settings that change their kernels; `rerun` of one on a machine without a GPU stops before training,
    naming the kind."""
    from sec_lib.runs import commands
    t = tier.TierStore(tier.tier_dir("gpu"))
    rows = t.runs
    bf16 = rows["config"].str.contains('"autocast": "bf16"')
    new = rows[rows["cuda"].notna() & ~bf16].iloc[0]["key"]
    old = rows[rows["cuda"].isna()].iloc[0]["key"]
    assert tier.committed_kind(t, new) == "gpu:NVIDIA H100 80GB HBM3/torch 2.11.0+cu130/cuda 13.0/cudnn 91900"
    assert tier.committed_kind(t, rows[bf16].iloc[0]["key"]) == \
        "gpu:NVIDIA H100 80GB HBM3/torch 2.11.0+cu130/cuda 13.0/cudnn 91900/bf16/channels_last"
    assert tier.committed_kind(t, old) == "gpu:NVIDIA H100 80GB HBM3/torch 2.11.0+cu130"   # before the columns
    cfg = t.config(new)
    prov = {"device": "X", "torch": "t", "cuda": "c", "cudnn": 1, "runs_together": 4}
    assert tier.gpu_kind(cfg.replace(autocast="bf16", channels_last=True), prov) == \
        "gpu:X/torch t/cuda c/cudnn 1/bf16/channels_last/together"
    if not torch.cuda.is_available():
        assert commands.rerun_command(new, "gpu") == 2
        assert "was trained on a GPU (gpu:NVIDIA H100" in capsys.readouterr().err


def _logged_every(n_steps=13_500, stats=20, dtheta=25):
    """A per-step log as a run of the decisive tier writes it: the loss every step, the batch statistics every
    ``stats`` steps (and at step 1), Δθ every ``dtheta`` steps, μ never (no SEC)."""
    step = pd.RangeIndex(1, n_steps + 1)
    nan = float("nan")
    return pd.DataFrame({"step": step, "loss_metric": 1.0 / step, "mu": nan,
                         "grad_slope": [-1.0 if (s % stats == 0 or s == 1) else nan for s in step],
                         "dtheta_mean": [0.1 if s % dtheta == 0 else nan for s in step]})


def test_decimated_steps_keep_the_rows_of_columns_logged_every_k_steps():
    df = _logged_every()
    old = tier.decimate(df, "step", tier.STEP_ROWS)
    assert old["grad_slope"].notna().sum() < 20                 # evenly spaced steps of the whole run: few stats
    d = tier.decimate_steps(df)
    assert len(d) <= tier.STEP_ROWS and {1, 13_500} <= set(d["step"])
    inner = d[~d["step"].isin([1, 13_500])]
    assert len(inner) >= 130 and inner["grad_slope"].notna().all() and inner["dtheta_mean"].notna().all()
    assert (inner["step"] % 100 == 0).all()                     # the steps that log both
    assert (d["loss_metric"] == 1.0 / d["step"]).all()          # rows are kept whole, never invented
    sparse = _logged_every(n_steps=2_000, stats=1, dtheta=1)    # every column on every row: plain decimation
    pd.testing.assert_frame_equal(tier.decimate_steps(sparse), tier.decimate(sparse, "step", tier.STEP_ROWS))
    short = _logged_every(n_steps=200)                           # fewer steps than the cap: all kept
    pd.testing.assert_frame_equal(tier.decimate_steps(short), short)


def test_a_pace_of_another_kind_of_runs_predicts_with_a_margin(monkeypatch, tmp_path):
    """The H200 window of 2026-11-28 on a fake clock: the selection's last chunk (3 runs on 3 processes, 126 s)
    set the pace, and the main comparison's first chunk (4 runs on 4 processes) was predicted from it at 168 s;
    it took more than 200 (its last evaluation clusters 1,392 test classes, the selection's 400), and the call's
    time limit killed it. Predicted from another kind's pace, a chunk now gets :data:`OTHER_KIND_MARGIN`, so with
    the 165 s that call had left none starts; once a chunk of the kind has set its own pace, no margin."""
    from types import SimpleNamespace
    from sec_lib.runs import launch, pool, study
    clock = SimpleNamespace(t=0.0)
    monkeypatch.setattr(launch, "check_device", lambda c: c)
    monkeypatch.setattr(study, "time", SimpleNamespace(monotonic=lambda: clock.t, perf_counter=lambda: clock.t))
    trained = []

    def fake_run_all(cfgs, root=None, jobs=1, together=1, **kw):       # a main-comparison run: 215 s on 4 processes
        trained.append(len(cfgs))
        clock.t += 215.0
    monkeypatch.setattr(pool, "run_all", fake_run_all)
    monkeypatch.setattr(study.tier, "export", lambda store, named, out: {"exported": 0})
    st = SimpleNamespace(root=tmp_path)
    pace = {"s": 126.0, "run": 42.0, "processes": 3, "kind": "selection"}
    assert study.chunk_seconds(4, 4, 1, pace, "selection") == 168.0
    assert study.chunk_seconds(4, 4, 1, pace, "main") == 168.0 * study.OTHER_KIND_MARGIN == 252.0
    assert not study.train_exporting(list(range(40)), [], tmp_path, st, 4, "t", 1, deadline=165.0, pace=pace,
                                        kind="main")
    assert trained == [] and clock.t == 0.0                    # before: a chunk of 4 started, and was killed at 215 s
    assert not study.train_exporting(list(range(40)), [], tmp_path, st, 4, "t", 1, deadline=500.0, pace=pace,
                                        kind="main")
    # the first chunk (predicted 252 s) fits; then its own pace, 215 s, lets a second one start and not a third
    assert trained == [4, 4] and clock.t == 430.0
    assert pace["kind"] == "main" and study.chunk_seconds(4, 4, 1, pace, "main") == 215.0


def test_a_chunk_does_not_split_a_unit_of_runs(monkeypatch, tmp_path):
    """``unit=2`` (the gpu tier's pairs of a seed's none and SEC runs): a chunk the deadline cuts to 3 runs trains
    2, an odd number of processes trains whole pairs, and the last runs of the list go as they are."""
    from types import SimpleNamespace
    from sec_lib.runs import launch, pool, study
    clock = SimpleNamespace(t=0.0)
    monkeypatch.setattr(launch, "check_device", lambda c: c)
    monkeypatch.setattr(study, "time", SimpleNamespace(monotonic=lambda: clock.t, perf_counter=lambda: clock.t))
    trained = []

    def fake_run_all(cfgs, root=None, jobs=1, together=1, **kw):       # 10 s a run, the processes in turn
        trained.append(list(cfgs))
        clock.t += 10.0 * len(cfgs)
    monkeypatch.setattr(pool, "run_all", fake_run_all)
    monkeypatch.setattr(study.tier, "export", lambda store, named, out: {"exported": 0})
    st = SimpleNamespace(root=tmp_path)

    def pace():
        return {"s": 10.0, "run": 10.0, "processes": 1, "kind": "k"}      # n runs on n processes: 10 n s
    assert study.chunk_seconds(3, 4, 1, pace(), "k") == 30.0
    assert not study.train_exporting(list(range(8)), [], tmp_path, st, 4, "t", 1, deadline=35.0, pace=pace(),
                                        kind="k")
    assert trained == [[0, 1, 2]]                                         # without a unit: 3 runs
    trained.clear()
    clock.t = 0.0
    assert not study.train_exporting(list(range(8)), [], tmp_path, st, 4, "t", 1, deadline=35.0, pace=pace(),
                                        kind="k", unit=2)
    assert trained == [[0, 1]]                                            # then 20 + 20 > 35: stopped
    trained.clear()
    assert study.train_exporting(list(range(5)), [], tmp_path, st, 3, "t", 1, unit=2)
    assert trained == [[0, 1], [2, 3, 4]]                                 # 3 processes: a pair, then the last 3
    trained.clear()
    assert study.train_exporting(list(range(3)), [], tmp_path, st, 1, "t", 1, unit=2)
    assert trained == [[0], [1], [2]]                                     # one process: smaller than a pair


def test_a_chunk_starts_only_if_its_pace_says_it_ends_before_the_deadline(monkeypatch, tmp_path):
    """`train_exporting` on a fake clock: a process trains a run in 10 s while at most 4 processes share the GPU,
    and more processes slow each other down in proportion. The pace of a chunk of 4 runs on 4 processes (1 each)
    predicts 40 s for one of 16 (4 each); a chunk that would end after the deadline gives way to the largest
    smaller one that would not; the pace carries over between calls; and 8 runs on 8 processes are predicted from
    the seconds per run of the chunk (20 s), not from one process's pace (10 s), which is what the lent H100 did
    on 2026-11-27 (8 processes trained 6 runs in the 330 s in which 4 had trained 4 in 176)."""
    from types import SimpleNamespace
    from sec_lib.runs import launch, pool, study
    from sec_lib.runs.many import process_groups
    clock = SimpleNamespace(t=0.0)
    fake_time = SimpleNamespace(monotonic=lambda: clock.t, perf_counter=lambda: clock.t)
    trained = []

    def fake_run_all(cfgs, root=None, jobs=1, together=1, **kw):
        groups = process_groups(list(cfgs), jobs, together)
        trained.append(len(cfgs))
        clock.t += 10.0 * max(map(len, groups)) * max(1.0, len(groups) / 4)
    monkeypatch.setattr(launch, "check_device", lambda c: c)
    monkeypatch.setattr(study, "time", fake_time)
    monkeypatch.setattr(pool, "run_all", fake_run_all)
    monkeypatch.setattr(study.tier, "export", lambda store, named, out: {"exported": 0})
    st, pace = SimpleNamespace(root=tmp_path), {}
    assert study.train_exporting(list(range(4)), [], tmp_path, st, 4, "t", 4, deadline=45.0, pace=pace)
    assert trained == [4] and clock.t == 10.0 and pace == {"s": 10.0, "run": 2.5, "processes": 4, "kind": None}
    assert study.chunk_seconds(16, 4, 4, pace) == 40.0
    # 16 runs (4 per process, 40 s) would end at 50 > 45; 12 (3 each, 30 s) end at 40; then nothing fits in 5 s
    assert not study.train_exporting(list(range(32)), [], tmp_path, st, 4, "t", 4, deadline=45.0, pace=pace)
    assert trained == [4, 12] and clock.t == 40.0
    assert study.train_exporting(list(range(20)), [], tmp_path, st, 4, "t", 4, deadline=95.0, pace=pace)
    assert trained == [4, 12, 16, 4] and clock.t == 90.0     # 16 runs: 40 s; the last 4 (1 each): 10 s
    # 8 processes after a pace of 4: 8 x 2.5 = 20 s, not 10; 6 processes (15 s) fit in 15 s and take 15
    assert study.chunk_seconds(8, 8, 1, pace) == 20.0
    assert not study.train_exporting(list(range(8)), [], tmp_path, st, 8, "t", 1, deadline=105.0, pace=pace)
    assert trained == [4, 12, 16, 4, 6] and clock.t == 105.0
    assert study.chunk_seconds(1, 8, 1, {}) == 0.0
    # the pace kept in a file reaches the next process: a second command on a warm machine starts no chunk its
    # window cannot hold (without the file it would start one, with no pace to go by)
    f = tmp_path / "gpu_pace.json"
    assert study.train_exporting(list(range(4)), [], tmp_path, st, 4, "t", 1, deadline=200.0, pace={},
                                     pace_file=f, kind="selection")
    import json
    kept = json.loads(f.read_text())
    assert kept == {"s": 10.0, "run": 2.5, "processes": 4, "kind": "selection"}
    start = clock.t
    assert not study.train_exporting(list(range(4)), [], tmp_path, st, 4, "t", 1, deadline=start + 5.0,
                                         pace=kept, pace_file=f, kind="selection")
    assert clock.t == start
