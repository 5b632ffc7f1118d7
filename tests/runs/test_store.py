"""The result store: keyed by config, atomic, resumable, and it never holds half a run."""
import json
import os

import pytest

import sec_lib.runs.store as S
from sec_lib.params import ParameterError
from sec_lib.runs.pool import run_all
from sec_lib.runs.store import ResultStore, load_runs, run_key
from sec_lib.runs.train import TrainConfig


KEY_OF_TOY_BEFORE = "3fd8d53f2e0ce685"   # run_key(toy()) on commit 07a626a, before canonical keys


def toy(**kw):
    base = dict(dataset="toy", model="mlp", width=16, embed_dim=8, iterations=8, batch_size=24, eval_every=4,
                track_every=4, track_samples=4, dtheta_every=4, lr=3e-3, loss="npair", num_threads=1,
                data_kwargs={"noise": 0.1, "num_classes": 60})
    base.update(kw)
    return TrainConfig(**base)


def test_key_depends_on_config_and_on_the_thread_count():
    assert run_key(toy()) != run_key(toy(num_threads=2))      # threads change the numbers (see below)
    assert run_key(toy()) != run_key(toy(seed=1))
    assert run_key(toy()) != run_key(toy(eta=0.1))
    assert len(run_key(toy())) == 16


def test_run_saves_and_a_rerun_returns_the_stored_result(tmp_path, monkeypatch):
    store = ResultStore(tmp_path)
    first = store.run(toy())
    folder = tmp_path / run_key(toy())
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        ["config.json", "result.json", "manifest.json"] + [f"{t}.parquet" for t in S.TABLES])
    meta = json.loads((folder / "result.json").read_text())
    assert meta["status"] == "done" and meta["provenance"]["device"] == "cpu"

    monkeypatch.setattr(S, "train", lambda *a, **k: pytest.fail("a completed run must not train again"))
    again = store.run(toy())
    assert again.metrics == pytest.approx(first.metrics)
    assert again.steps.shape == first.steps.shape


def test_interrupted_save_leaves_nothing_that_looks_complete(tmp_path, monkeypatch):
    store = ResultStore(tmp_path)
    result = S.train(toy())
    real = result.evals.to_parquet

    def crash(*a, **k):
        raise KeyboardInterrupt("power cut")
    monkeypatch.setattr(result.evals, "to_parquet", crash)
    with pytest.raises(KeyboardInterrupt):
        store.save(result)
    assert store.keys() == []
    assert not (tmp_path / run_key(toy())).exists()
    assert [p for p in tmp_path.iterdir()] == []          # the temporary folder is gone too
    monkeypatch.setattr(result.evals, "to_parquet", real)
    store.save(result)
    assert store.keys() == [run_key(toy())]


def test_a_rename_that_loses_to_a_replacing_writer_tries_again(tmp_path, monkeypatch):
    """The race a fresh-clone CI run hit once: our rename onto the key fails with ENOTEMPTY because a
    record is there, and before we look, a replacing writer has moved that record aside. The save
    must try again (and publish), not raise the ENOTEMPTY."""
    import errno
    store = ResultStore(tmp_path)
    result = S.train(toy())
    final = tmp_path / run_key(toy())
    real, calls = os.rename, []

    def racing_rename(src, dst):
        calls.append((str(src), str(dst)))
        if len(calls) == 1:                     # the record was there a moment ago, and is gone now
            raise OSError(errno.ENOTEMPTY, "Directory not empty", str(dst))
        return real(src, dst)
    monkeypatch.setattr(S.os, "rename", racing_rename)
    store.save(result, replace=True)
    assert len(calls) == 2 and calls[1][1] == str(final)
    assert store.get(toy()).metrics == pytest.approx(result.metrics)
    assert [p.name for p in tmp_path.iterdir()] == [final.name]     # no temporary folder left


def test_a_permission_error_with_nothing_in_the_way_is_raised(tmp_path, monkeypatch):
    import errno
    store = ResultStore(tmp_path)
    result = S.train(toy())

    def denied(src, dst):
        raise PermissionError(errno.EACCES, "Permission denied", str(dst))
    monkeypatch.setattr(S.os, "rename", denied)
    with pytest.raises(PermissionError):
        store.save(result)
    assert list(tmp_path.iterdir()) == []


def test_bad_config_writes_nothing(tmp_path):
    store = ResultStore(tmp_path / "runs")
    with pytest.raises(ParameterError, match="'loss'"):
        store.run(toy(loss="nonsense"))
    with pytest.raises(ParameterError, match="'eta'"):
        run_all([toy(), toy(eta=-0.5)], root=tmp_path / "runs")
    assert not (tmp_path / "runs").exists()


def test_load_runs_gives_tidy_frames(tmp_path):
    cfgs = [toy(), toy(eta=0.5), toy(eta=0.005, mu="zero")]
    run_all(cfgs, root=tmp_path)
    f = load_runs(cfgs, root=tmp_path)
    assert list(f.runs["variant"]) == ["none", "sec", "l2reg"]
    assert {"R@1", "NMI", "F1", "test_norm_var", "train_norm_var", "key", "seed", "loss"} <= set(f.runs.columns)
    assert set(f.steps["key"]) == set(f.runs["key"])
    assert len(f.evals) == 3 * 3                     # steps 0, 4, 8
    with pytest.raises(KeyError, match="not in the store"):
        load_runs([toy(seed=9)], root=tmp_path)
    assert len(load_runs([toy(seed=9)], root=tmp_path, missing="skip").runs) == 0
    assert len(load_runs(root=tmp_path).runs) == 3


#: The runs the spawned workers train, shared by the two tests that compare them with other paths.
POOLED = [toy(iterations=12, eval_every=6, seed=s) for s in (0, 1)]


@pytest.fixture(scope="module")
def pooled(tmp_path_factory):
    """``POOLED`` trained by ``run_all(jobs=2)`` (a pool of its own: two spawned workers, each importing
    torch and the library, once for this file): (the results, the store's folder)."""
    root = tmp_path_factory.mktemp("pooled")
    return run_all(POOLED, root=root, jobs=2), root


def test_parallel_sweep_matches_serial(tmp_path, pooled):
    par, root = pooled
    ser = run_all(POOLED, root=tmp_path / "ser", jobs=1)
    for a, b in zip(par, ser):
        assert a.metrics["R@1"] == b.metrics["R@1"]
    assert not any(p.name.startswith(".tmp") for p in root.iterdir())


def test_equal_configs_get_one_key_whatever_the_number_types():
    assert run_key(toy(eta=1, mu="batch")) == run_key(toy(eta=1.0, mu="batch"))
    assert run_key(toy(eta=0.1, mu=4)) == run_key(toy(eta=0.1, mu=4.0))
    assert run_key(toy(iterations=8.0)) == run_key(toy(iterations=8))
    assert run_key(toy(lr=1)) == run_key(toy(lr=1.0))
    assert run_key(toy(lr_milestones=[4])) == run_key(toy(lr_milestones=(4,)))
    # a record written before threads were pinned (num_threads None) has the 1-thread key
    d = toy().to_dict()
    d["num_threads"] = None
    assert run_key(TrainConfig.from_dict(d)) == run_key(toy())


def test_keys_of_correctly_typed_configs_did_not_change():
    """Canonical keys kept every key the store had for configs written with their declared types:
    this is the key of ``toy()`` before canonicalization (computed on the commit before it)."""
    assert run_key(toy()) == KEY_OF_TOY_BEFORE


def test_a_run_gives_bit_identical_numbers_in_process_and_in_a_worker(pooled):
    """Whatever path trains it (in-process under any torch thread setting, or a sweep worker),
    a config gives the same numbers, because train() pins the run's own thread count."""
    import torch
    cfg = POOLED[0]
    old = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        in_process = S.train(cfg)
        assert torch.get_num_threads() == 2                      # the caller's setting is restored
    finally:
        torch.set_num_threads(old)
    worker = ResultStore(pooled[1]).get(cfg)                   # trained by a spawned worker
    numbers = lambda m: {k: v for k, v in m.items() if "time" not in k}     # wall times differ, of course
    assert numbers(worker.metrics) == numbers(in_process.metrics) and "NMI" in worker.metrics
    assert worker.evals.equals(in_process.evals)
    two = S.train(cfg.replace(num_threads=2))                   # another identity, its own key
    assert run_key(two.config) != run_key(cfg)
