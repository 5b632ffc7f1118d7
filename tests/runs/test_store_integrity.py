"""The store never lies: damaged records are found, reported, quarantined and trained again;
keys are checked; litter from interrupted runs is cleared (and only litter)."""
import json
import logging
import math
import os
import subprocess
import sys
import time

import pytest

import sec_lib.runs.store as S
from sec_lib.runs import commands
from sec_lib.site import runner as book
from sec_lib.params import ParameterError
from sec_lib.runs.pool import run_all
from sec_lib.runs.store import ResultStore, run_key
from sec_lib.tempfiles import clear_partial_notebooks, clear_partial_runs, host_name, temp_prefix


def numbers(metrics):
    """Metrics without the wall times (which differ between two trainings of one config)."""
    return {k: v for k, v in metrics.items() if "time" not in k}


def rewrite_result(folder, change, manifest=True):
    """Edit result.json and (``manifest``) make the manifest agree, so only the content is wrong."""
    meta = json.loads((folder / "result.json").read_text())
    change(meta)
    (folder / "result.json").write_text(json.dumps(meta))
    if manifest:
        blobs = {n: (folder / n).read_bytes() for n in S.FILES}
        (folder / S.MANIFEST).write_bytes(S._manifest(blobs))


def truncate(folder):
    f = folder / "steps.parquet"
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])


def garbage_json(folder):
    (folder / "result.json").write_bytes(b"\xff\xfe not json at all \x00")


def same_size_flip(folder):
    f = folder / "evals.parquet"
    b = bytearray(f.read_bytes())
    b[len(b) // 2] ^= 0xFF
    f.write_bytes(bytes(b))


def delete_evals(folder):
    (folder / "evals.parquet").unlink()


def string_metric(folder):
    rewrite_result(folder, lambda m: m["metrics"].update({"R@1": "excellent"}))


def inf_metric(folder):
    rewrite_result(folder, lambda m: m["metrics"].update({"NMI": math.inf}))


DAMAGE = {"truncated parquet": truncate, "garbage result.json": garbage_json, "flipped byte": same_size_flip,
          "deleted evals.parquet": delete_evals, "string metric": string_metric, "infinite metric": inf_metric}


@pytest.mark.parametrize("how", list(DAMAGE))
def test_each_kind_of_damage_is_reported_quarantined_and_retrained(tmp_path, how, caplog, toy):
    store = ResultStore(tmp_path)
    cfg = toy()
    first = store.run(cfg)
    key = run_key(cfg)
    DAMAGE[how](tmp_path / key)
    with caplog.at_level(logging.WARNING, logger="sec_lib.runs.store"):
        assert store.get(cfg) is None                       # treated as missing, never half-loaded
    assert len(store.quarantined) == 1
    qkey, qpath, reason, moved = store.quarantined[0]
    assert qkey == key and qpath == tmp_path / key and reason
    assert moved.parent == tmp_path / ".quarantine" and moved.name.startswith(f"{key}-")
    assert key in caplog.text and str(tmp_path / key) in caplog.text
    assert not (tmp_path / key).exists() and moved.exists()
    again = store.run(cfg)                                   # trains it again
    assert numbers(again.metrics) == numbers(first.metrics)
    assert store.get(cfg).metrics == again.metrics


def test_has_checks_sizes_and_get_checks_checksums(tmp_path, toy):
    store = ResultStore(tmp_path)
    cfg = toy()
    store.run(cfg)
    same_size_flip(tmp_path / run_key(cfg))
    assert store.has(cfg)                  # sizes agree: the cheap check passes
    assert store.get(cfg) is None          # the checksum does not
    assert not store.has(cfg) and len(store.quarantined) == 1
    truncate_store = ResultStore(tmp_path / "b")
    truncate_store.run(cfg)
    truncate(truncate_store.path(cfg))
    assert not truncate_store.has(cfg)


def test_a_get_of_some_tables_parses_only_those_and_still_checks_every_file(tmp_path, toy, monkeypatch):
    """``get(tables=...)`` parses only the tables asked for (a page's tally reads hundreds of records), but a damaged
    file it did not ask for is still found by its checksum; a record from before manifests is parsed in full,
    since parsing is its only check."""
    store = ResultStore(tmp_path)
    cfg = toy()
    full = store.run(cfg)
    parsed = []
    real = S.pd.read_parquet
    monkeypatch.setattr(S.pd, "read_parquet", lambda *a, **k: parsed.append(1) or real(*a, **k))
    got = store.get(cfg, tables=("evals",))
    assert len(parsed) == 1 and got.evals.equals(full.evals) and got.steps.empty and got.metrics == full.metrics
    parsed.clear()
    assert store.get(cfg, tables=()).metrics == full.metrics and not parsed
    same_size_flip(store.path(cfg))                            # evals.parquet: asked for by nobody below
    assert store.get(cfg, tables=("steps",)) is None and store.quarantined[0][2].startswith("evals.parquet")
    old = ResultStore(tmp_path / "old")
    old.run(cfg)
    (old.path(cfg) / S.MANIFEST).unlink()
    truncate(old.path(cfg))                                    # steps.parquet, in a record without a manifest
    assert old.get(cfg, tables=("evals",)) is None and old.quarantined[0][2].startswith("steps.parquet")


def test_an_old_record_without_manifest_is_accepted_when_it_loads_and_gets_one(tmp_path, toy):
    store = ResultStore(tmp_path)
    cfg = toy()
    first = store.run(cfg)
    (store.path(cfg) / S.MANIFEST).unlink()
    assert store.get(cfg).metrics == first.metrics
    assert (store.path(cfg) / S.MANIFEST).exists()
    (store.path(cfg) / S.MANIFEST).unlink()                  # an old record that is damaged
    rewrite_result(store.path(cfg), lambda m: m["metrics"].update({"R@1": [1, 2]}), manifest=False)
    assert not store.has(cfg) and store.quarantined[0][2].startswith("result.json")


def test_the_runner_retrains_every_damaged_record_and_counts_them(tmp_path, monkeypatch, toy):
    monkeypatch.setenv("SEC_RUNS_DIR", str(tmp_path))
    cfgs = [toy(seed=s) for s in range(len(DAMAGE))]
    first = run_all(cfgs, root=tmp_path)
    for cfg, damage in zip(cfgs, DAMAGE.values()):
        damage(tmp_path / run_key(cfg))
    summary = book.Summary()
    commands.train_sweep("test", cfgs, 1, summary)                 # the runner's own sweep: it must not stop
    assert summary.quarantined == len(DAMAGE) and summary.trained == len(DAMAGE) and summary.reused == 0
    assert len(list((tmp_path / ".quarantine").iterdir())) == len(DAMAGE)
    after = [ResultStore(tmp_path).get(c) for c in cfgs]
    assert [numbers(r.metrics) for r in after] == [numbers(r.metrics) for r in first]
    out = __import__("io").StringIO()
    summary.print(out)
    assert f"{len(DAMAGE)} corrupt records quarantined and retrained" in out.getvalue()


def test_a_file_or_empty_folder_in_a_keys_place_is_quarantined_and_the_run_saved(tmp_path, toy):
    store = ResultStore(tmp_path)
    cfg = toy()
    result = S.train(cfg)
    store.path(cfg).mkdir(parents=True)                       # an empty folder: os.rename replaces it
    store.save(result)
    assert store.get(cfg).metrics == result.metrics
    import shutil
    shutil.rmtree(store.path(cfg))
    store.path(cfg).write_text("not a run")                  # a file
    assert not store.has(cfg)
    store.save(result)
    assert store.get(cfg).metrics == result.metrics


def test_a_second_writer_keeps_the_stored_record_unless_replacing_a_failed_run(tmp_path, toy):
    store = ResultStore(tmp_path)
    cfg = toy()
    result = S.train(cfg)
    store.save(result)
    stamp = (store.path(cfg) / "result.json").read_bytes()
    other = S.train(cfg)
    other.wall_s = 12345.0
    store.save(other)                                      # a complete record is there: kept
    assert (store.path(cfg) / "result.json").read_bytes() == stamp
    store.save(other, replace=True)                        # a retried run replaces it
    assert store.get(cfg).wall_s == 12345.0
    assert [p.name for p in tmp_path.iterdir()] == [run_key(cfg)]    # nothing left aside


def test_only_well_formed_keys_are_paths(tmp_path):
    store = ResultStore(tmp_path)
    for bad in ("../../etc", "ABCDEF0123456789", "0123", "0123456789abcdef/..", ""):
        with pytest.raises(ParameterError, match="store key") as e:
            store.path(bad)
        assert repr(bad) in str(e.value)
        with pytest.raises(ParameterError):
            store.get(bad)
    assert store.path("0123456789abcdef") == tmp_path / "0123456789abcdef"


def test_save_refuses_metrics_that_load_would_reject(tmp_path, toy):
    result = S.train(toy())
    result.metrics["R@1"] = "high"
    with pytest.raises(ValueError, match="'R@1'"):
        ResultStore(tmp_path).save(result)
    assert not any(tmp_path.iterdir()) if tmp_path.exists() else True


# -- litter ------------------------------------------------------------------------------------

def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_partial_runs_and_notebooks_of_dead_processes_are_cleared_and_nothing_else(tmp_path):
    key, host, old = "0123456789abcdef", host_name(), time.time() - 10 * 24 * 3600
    runs = tmp_path / "runs"
    names = {
        f".tmp-{key}-{host}-{dead_pid()}-ab12cd_3": False,        # this host, process gone: litter
        f"{temp_prefix(key)}ab12cd_3": True,                       # this process: being written
        f".tmp-{key}-k2j3h4g5": False,                             # the old naming: litter
        f".tmp-{key}-otherhost-123-zz": True,                      # another host, recent: maybe live
        f".tmp-{key}-stalehost-123-zz": False,                     # another host, days old: litter
        key: True,                                                  # a record: never touched
        ".quarantine": True,
    }
    for n in names:
        (runs / n).mkdir(parents=True)
        (runs / n / "x").write_text("x")
    os.utime(runs / f".tmp-{key}-stalehost-123-zz", (old, old))
    nb = tmp_path / "site" / "book" / "nb"
    (nb / "runs").mkdir(parents=True)
    nbs = {"runs/.tmp-abcd1234.ipynb": False, f"runs/.tmp-{host}-{dead_pid()}-x1y2.ipynb": False,
           f"{temp_prefix()}q9.ipynb": True, "compare.ipynb": True, ".tmp-notes.txt": True}
    for n in nbs:
        (nb / n).write_text("{}")
    assert clear_partial_runs(runs) == 3
    assert clear_partial_notebooks(nb) == 2
    assert {n for n in names if (runs / n).exists()} == {n for n, keep in names.items() if keep}
    assert {n for n in nbs if (nb / n).exists()} == {n for n, keep in nbs.items() if keep}


def test_the_runner_clears_litter_at_the_start_and_counts_it(tmp_path, monkeypatch):
    monkeypatch.setenv("SEC_RUNS_DIR", str(tmp_path / "runs"))
    (tmp_path / "runs" / f".tmp-0123456789abcdef-{host_name()}-{dead_pid()}-aa").mkdir(parents=True)
    (tmp_path / "book" / "nb").mkdir(parents=True)
    (tmp_path / "book" / "nb" / ".tmp-abcdefgh.ipynb").write_text("{}")
    assert book.clear_litter(tmp_path) == (1, 1)
    assert book.clear_litter(tmp_path) == (0, 0)


def test_a_corrupt_record_that_cannot_be_moved_is_reported_and_treated_as_missing(tmp_path, monkeypatch, caplog, toy):
    store = ResultStore(tmp_path)
    cfg = toy()
    store.run(cfg)
    delete_evals(store.path(cfg))

    def read_only(src, dst):
        raise PermissionError(13, "Read-only file system")
    monkeypatch.setattr(S.os, "rename", read_only)
    with caplog.at_level(logging.WARNING, logger="sec_lib.runs.store"):
        assert store.get(cfg) is None and not store.has(cfg)
    assert "cannot be moved" in caplog.text and run_key(cfg) in caplog.text
    assert store.path(cfg).exists()


def test_the_train_command_checks_configs_and_clears_partial_runs_first(tmp_path, monkeypatch, capfd):
    monkeypatch.setenv("SEC_RUNS_DIR", str(tmp_path / "runs"))
    litter = tmp_path / "runs" / f".tmp-0123456789abcdef-{host_name()}-{dead_pid()}-aa"
    litter.mkdir(parents=True)
    import dataclasses
    from sec_lib.runs import experiments as ex
    smoke = ex.get_profile("smoke")
    monkeypatch.setitem(ex.PROFILES, "smoke", dataclasses.replace(smoke, base=dict(smoke.base, device="gpu")))
    monkeypatch.setattr(book, "prepare_data", lambda p: pytest.fail("nothing may run"))
    assert book.main(["train", "--profile", "smoke", "--sweeps", "compare"]) == 2
    assert "'device' = 'gpu'" in capfd.readouterr().err
    assert litter.exists()                          # refused before touching anything
    monkeypatch.setitem(ex.PROFILES, "smoke", smoke)
    from sec_lib.runs import commands             # the train command lives in the runs wing
    monkeypatch.setattr(commands, "train_stages", lambda *a, **k: None)
    monkeypatch.setattr(commands, "prepare_data", lambda p: None)
    printed = []
    monkeypatch.setattr(book.Summary, "print", lambda self, out=None: printed.append(self))
    assert book.main(["train", "--profile", "smoke", "--sweeps", "compare"]) == 0
    assert not litter.exists() and printed[0].cleared == (1, 0)
