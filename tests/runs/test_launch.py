"""Launchers: submitit's local executor trains exactly what the local pool trains, packs runs into
the expected number of jobs, reports a failing job with its error, refuses bad options and GPU
indices before anything is submitted, and the dependent waves compute each wave from the last
one's stored results. Two launchers writing one store at once leave every record complete."""
import contextlib
import dataclasses
import io
import json
import math
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

import sec_lib.site.runner as book
import sec_lib.runs.experiments as ex
import sec_lib.runs.store as store_module
from sec_lib.runs.launch import (LaunchError, Launcher, PoolLauncher, SubmititLauncher, check_device, make_launcher,
                            pack, train_batch)
from sec_lib.runs.waves import train_stages
from sec_lib.params import ParameterError
from sec_lib.runs.store import TABLES, ResultStore, run_key
from sec_lib.runs.train import RunResult, TrainConfig

pytest.importorskip("submitit")

REPO = Path(__file__).resolve().parents[2]


def toy(**kw):
    base = dict(dataset="toy", model="mlp", width=16, embed_dim=8, iterations=4, batch_size=24, eval_every=2,
                track_every=2, track_samples=4, dtheta_every=2, lr=3e-3, loss="npair", num_threads=1,
                eval_clustering="final", kmeans_n_init=1, data_kwargs={"noise": 0.1, "num_classes": 60})
    base.update(kw)
    return TrainConfig(**base)


CONFIGS = [toy(seed=0), toy(seed=1), toy(eta=0.5, mu="batch"), toy(seed=0)]     # the last one repeats the first


def comparable(metrics: dict) -> dict:
    return {k: v for k, v in metrics.items() if "time" not in k}


def test_runs_per_job_packs_runs_into_ceil_n_over_r_jobs():
    for n in range(0, 12):
        for r in range(1, 6):
            groups = pack(list(range(n)), r)
            assert len(groups) == math.ceil(n / r)
            assert [x for g in groups for x in g] == list(range(n))      # every run once, in order
            assert all(1 <= len(g) <= r for g in groups)
    # the jobs a launcher really submitted: test_the_runner_packs_runs_into_ceil_n_over_r_jobs_and_reports_each_run_once


def test_a_failing_job_is_reported_with_its_error_and_its_other_runs_are_stored(tmp_path):
    good, bad = toy(seed=7), toy(seed=8, data_kwargs={"noise": 0.1, "bogus_option": 1})
    launcher = SubmititLauncher(folder=tmp_path / "submitit", cluster="local", runs_per_job=2, poll_s=0.2)
    with pytest.raises(LaunchError) as err:
        launcher.run([bad, good], tmp_path / "runs")
    msg = str(err.value)
    job = launcher.jobs[0]
    assert len(launcher.jobs) == 1
    assert "1 of 1 job(s) failed" in msg and f"job {job.job_id}" in msg
    assert "bogus_option" in msg and "TypeError" in msg                  # the run's own error, from stderr
    assert run_key(bad) in msg
    store = ResultStore(tmp_path / "runs")
    assert store.has(good) and not store.has(bad)                        # the job went on after the failure


@pytest.mark.parametrize("device", ["cuda:0", "cuda:1", "gpu", "cuda "])
def test_a_config_naming_a_gpu_is_refused_before_anything_trains(tmp_path, device):
    bad = toy(device=device)
    with pytest.raises(ParameterError, match="CUDA_VISIBLE_DEVICES") as err:
        PoolLauncher(1).run([toy(), bad], tmp_path)
    assert repr(device) in str(err.value)
    with pytest.raises(ParameterError, match="CUDA_VISIBLE_DEVICES"):
        SubmititLauncher(folder=tmp_path / "s", cluster="slurm", gpus_per_job=1).run([bad], tmp_path)
    with pytest.raises(ParameterError):
        train_batch([bad], str(tmp_path))                                # and inside a job
    assert not tmp_path.exists() or ResultStore(tmp_path).keys() == []


def test_the_store_key_of_a_gpu_run_does_not_depend_on_the_gpu_that_ran_it(monkeypatch):
    cfg = toy(device="cuda")
    keys = set()
    for visible in ("0", "3", "1,2", ""):
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
        keys.add(run_key(check_device(cfg)))
    assert len(keys) == 1
    assert run_key(cfg) != run_key(toy(device="cpu"))


def test_gpu_runs_need_gpus_per_job_and_are_validated_without_a_local_gpu(tmp_path):
    # the submitting machine (a login node) needs no GPU; the other checks still apply
    with pytest.raises(ParameterError, match="gpus_per_job = 0"):
        SubmititLauncher(folder=tmp_path, cluster="slurm", gpus_per_job=0).run([toy(device="cuda")], tmp_path)
    with pytest.raises(ParameterError, match="'loss'"):
        SubmititLauncher(folder=tmp_path, cluster="slurm", gpus_per_job=1).run([toy(device="cuda", loss="nope")],
                                                                                tmp_path)


def test_the_gpu_profile_without_gpus_per_job_stops_before_the_first_wave(tmp_path):
    launcher = SubmititLauncher(folder=tmp_path / "submitit", cluster="slurm")
    with pytest.raises(ParameterError, match="gpus_per_job = 0"):
        train_stages(ex.get_profile("gpu"), ["compare"], launcher, ResultStore(tmp_path / "runs"))
    assert launcher.jobs == [] and list(tmp_path.iterdir()) == []          # nothing submitted, nothing written


@pytest.mark.parametrize("kwargs, words", [
    (dict(runs_per_job=0), ["'runs_per_job' = 0"]),
    (dict(gpus_per_job=-1), ["'gpus_per_job' = -1"]),
    (dict(timeout_min=0), ["'timeout_min' = 0"]),
    (dict(array_parallelism=0), ["'array_parallelism' = 0"]),
    (dict(cluster="kubernetes"), ["'cluster' = 'kubernetes'", "'local'", "'slurm'"]),
    (dict(partition=""), ["'partition' = ''"]),
])
def test_bad_submitit_options_are_refused_naming_the_value(kwargs, words):
    with pytest.raises(ParameterError) as err:
        SubmititLauncher(**kwargs)
    for w in words:
        assert w in str(err.value)


def test_make_launcher_names_the_launchers_and_refuses_submitit_options_for_the_pool():
    with pytest.raises(ParameterError, match="'slurm'.*'pool', 'submitit'"):
        make_launcher("slurm")
    with pytest.raises(ParameterError, match="partition.*only to launcher 'submitit'"):
        make_launcher("pool", 2, partition="gpu")
    with pytest.raises(ParameterError, match="'jobs' = 0"):
        make_launcher("pool", 0)
    assert isinstance(make_launcher("pool", 2), PoolLauncher)
    sub = make_launcher("submitit", 2, partition="gpu", gpus_per_job=1, runs_per_job=8, cluster="local")
    assert (sub.partition, sub.gpus_per_job, sub.runs_per_job) == ("gpu", 1, 8)


@pytest.mark.parametrize("argv, words", [
    (["run", "--launcher", "slurm"], ["'launcher' = 'slurm'", "'pool'", "'submitit'"]),
    (["run", "--launcher", "submitit", "--runs-per-job", "0"], ["'runs_per_job' = 0"]),
    (["train", "--launcher", "submitit", "--gpus-per-job", "-2"], ["'gpus_per_job' = -2"]),
    (["train", "--slurm-partition", "gpu"], ["partition", "'submitit'"]),
    (["run", "--launcher", "submitit", "--cluster", "k8s"], ["'cluster' = 'k8s'"]),
])
def test_the_runner_validates_launcher_options_before_any_work(argv, words, capsys, monkeypatch):
    monkeypatch.setattr(book, "prepare_data", lambda p: pytest.fail("nothing may start before the options are checked"))
    assert book.main(argv) == 2
    err = capsys.readouterr().err
    for w in words:
        assert w in err


@pytest.fixture(scope="session")         # not module: its second user runs at the session's end
def submitit_sweep(tmp_path_factory):
    """The runner's `train --profile smoke --sweeps normlayer --launcher submitit --cluster local` (the
    pilot wave, then the chapter wave; ``runner.main`` in this process, each job a process of its own):
    {"code": its exit code, "out": its stdout, "tmp": the folder holding ``runs/`` and ``submitit/``,
    "waves": per wave the launcher, its configs, its jobs and the progress events it reported}. Its own
    fixture, used first by a test that does not read the smoke sweep, so that it trains while the sweep
    does. It is also this file's only training through submitit that succeeds: the packing, progress and
    rerun checks read it instead of training a sweep of their own."""
    tmp = tmp_path_factory.mktemp("submitit-chapter")
    mp = pytest.MonkeyPatch()
    mp.setenv("SEC_RUNS_DIR", str(tmp / "runs"))
    mp.setenv("PYTHONPATH", f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")   # the jobs' sec_lib
    waves, real_run = [], SubmititLauncher.run

    def recording_run(self, configs, root=None, progress=None):    # the real run; its progress also recorded
        configs, events = list(configs), []
        self.poll_s = 0.5          # not the runner's 10 s (meant for Slurm): the test sees each job end at once

        def record(*e):
            events.append(e)
            if progress is not None:
                progress(*e)
        try:
            real_run(self, configs, root, record)
        finally:
            waves.append(dict(launcher=self, configs=configs, jobs=list(self.jobs), events=events))

    mp.setattr(SubmititLauncher, "run", recording_run)
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            code = book.main(["train", "--profile", "smoke", "--sweeps", "normlayer", "--launcher", "submitit",
                              "--cluster", "local", "--runs-per-job", "4", "--array-parallelism", "2"])
    finally:
        mp.undo()
    return dict(code=code, out=out.getvalue(), tmp=tmp, waves=waves)


def _normlayer_configs(store):
    p = ex.get_profile("smoke")
    return ex.lr_pilot(p) + ex.sweep_configs("normlayer", p, store)


def _normlayer_keys(store):
    return sorted({run_key(c) for c in _normlayer_configs(store)})


@pytest.mark.slow
def test_the_runner_trains_a_smoke_chapter_through_submitit(submitit_sweep):
    """The pilot and the chapter's runs are stored, none failed, the jobs' logs are beside the store."""
    code, out, tmp = submitit_sweep["code"], submitit_sweep["out"], submitit_sweep["tmp"]
    assert code == 0 and "0 failed" in out, out[-3000:]
    sub = ResultStore(tmp / "runs")
    assert sub.keys() == _normlayer_keys(sub) and len(sub.keys()) > len(ex.lr_pilot(ex.get_profile("smoke")))
    assert all(sub.meta(k)["status"] == "done" for k in sub.keys())
    assert all(sub.meta(k)["provenance"]["device"] == "cpu" for k in sub.keys())
    assert list((tmp / "submitit").iterdir())                             # the jobs' logs, next to the store


@pytest.mark.slow
def test_the_runner_packs_runs_into_ceil_n_over_r_jobs_and_reports_each_run_once(submitit_sweep):
    """Two waves (the pilot, then the chapter), each packed into ceil(runs / 4) jobs (the chapter's two
    jobs alive at once: --array-parallelism 2); each job returns the keys it trained; progress reports
    the wave's distinct runs once each."""
    waves = submitit_sweep["waves"]
    assert submitit_sweep["code"] == 0, submitit_sweep["out"][-3000:]
    assert len(waves) == 2 and len(waves[1]["configs"]) > 1
    stored = set(ResultStore(submitit_sweep["tmp"] / "runs").keys())
    for w in waves:
        n = len({run_key(c) for c in w["configs"]})
        assert n == len(w["configs"])                                    # the runner sends each run once
        assert w["launcher"].runs_per_job == 4 and w["launcher"].array_parallelism == 2
        assert len(w["jobs"]) == math.ceil(n / 4)
        results = [j.result() for j in w["jobs"]]                        # each job returns the keys it trained
        assert sorted(len(r) for r in results) == sorted(len(g) for g in pack(list(range(n)), 4))
        assert sorted(k for r in results for k in r) == sorted(run_key(c) for c in w["configs"])
        assert set(k for r in results for k in r) <= stored
        events = w["events"]
        assert events[0] == ("reused", 0, n)
        assert sum(k for e, k, _ in events if e == "trained") == n
        assert {t for _, _, t in events} == {n}


@pytest.mark.slow
def test_a_rerun_submits_nothing_and_reuses_every_run(submitit_sweep):
    """Every run of the chapter again (one of them twice): counted once, reused, no job submitted."""
    tmp = submitit_sweep["tmp"]
    assert submitit_sweep["code"] == 0, submitit_sweep["out"][-3000:]
    configs = _normlayer_configs(ResultStore(tmp / "runs"))
    n = len({run_key(c) for c in configs})
    events = []
    again = SubmititLauncher(folder=tmp / "submitit", cluster="local", poll_s=0.2)
    again.run(configs + configs[:1], tmp / "runs", progress=lambda *e: events.append(e))
    assert again.jobs == [] and events == [("reused", n, n)]


@pytest.mark.slow
def test_the_runner_trains_a_smoke_chapter_through_submitit_exactly_as_through_the_pool(submitit_sweep, smoke_site):
    """The submitit store of the test above against what the local pool stored for the same runs in the
    smoke sweep (tests/conftest.py's ``smoke_site``: `python -m sec_lib.book run --profile smoke`, the
    default pool launcher), instead of training the pilot and the chapter through the pool a second
    time here: the same runs (the same chapter configs from either store's pilot), the same status,
    bit-identical metrics and bit-identical evaluation and tracked-sample tables (timings aside)."""
    assert smoke_site["run"].returncode == 0, "the smoke sweep failed; see tests/site/test_book.py"
    code, out, tmp = submitit_sweep["code"], submitit_sweep["out"], submitit_sweep["tmp"]
    assert code == 0, out[-3000:]
    pool, sub = ResultStore(smoke_site["tmp"] / "runs"), ResultStore(tmp / "runs")
    want = _normlayer_keys(sub)
    assert want == _normlayer_keys(pool) and sub.keys() == want and set(want) <= set(pool.keys())
    untimed = lambda df: df.drop(columns=[c for c in df if "time" in c])
    for key in want:
        a, b = pool.meta(key), sub.meta(key)
        assert comparable(b["metrics"]) == comparable(a["metrics"]) and b["status"] == a["status"]
        assert comparable(b["metrics"])                                   # (not an empty comparison)
        ra, rb = pool.get(key), sub.get(key)
        assert len(rb.evals) and len(rb.tracked)                          # (not empty comparisons)
        pd.testing.assert_frame_equal(untimed(rb.evals), untimed(ra.evals))    # exact, not approx
        pd.testing.assert_frame_equal(rb.tracked, ra.tracked)


# -- dependent waves ----------------------------------------------------------------------------------

def fake_result(cfg: TrainConfig, score: float) -> RunResult:
    empty = [pd.DataFrame({"step": pd.Series([], dtype="int64")}) for _ in TABLES]
    return RunResult(cfg, "done", {"R@1": score}, *empty)


class Recording(Launcher):
    """Stores a made-up result for each config (held-out R@1 favours lr 3e-3 and η 0.5) and
    records the waves it was given and what the store held when each began."""

    def __init__(self, one_wave_per_stage):
        self.one_wave_per_stage = one_wave_per_stage
        self.waves, self.held_before = [], []

    def run(self, configs, root=None, progress=None):
        store = ResultStore(root)
        self.held_before.append(set(store.keys()))
        self.waves.append(list(configs))
        for c in configs:
            store.save(fake_result(c, 50.0 + 10 * (c.lr == 3e-3) + 5 * (c.eta == 0.5)))


@pytest.mark.parametrize("one_wave", [True, False])
def test_waves_run_in_order_and_each_is_computed_from_the_last_ones_results(tmp_path, monkeypatch, one_wave):
    # the made-up records need not reach the disk before they are published (hundreds of fsyncs: most of
    # this test's time); the store's own writes are tests/test_store*.py's
    monkeypatch.setattr(store_module.os, "fsync", lambda fd: None)
    p = dataclasses.replace(ex.get_profile("smoke"), lr_pilot={"adam": (1e-3, 3e-3), "sgd": (0.05,)})
    sweeps = ["main", "compare", "tuned", "eta"]
    store = ResultStore(tmp_path)
    rec = Recording(one_wave)
    train_stages(p, sweeps, rec, store)
    pilot, selection, *rest = rec.waves
    assert [run_key(c) for c in pilot] == [run_key(c) for c in ex.lr_pilot(p)]
    assert rec.held_before[0] == set()
    assert rec.held_before[1] >= {run_key(c) for c in pilot}                   # the selection waited for the pilot
    assert {c.lr for c in selection} == {3e-3}                                # ... and used the pilot's choice
    assert all(c.holdout_classes == p.holdout_classes for c in pilot + selection)
    assert len(rest) == (1 if one_wave else 3)                                 # main is empty for smoke
    sweep_runs = [c for w in rest for c in w]
    assert rec.held_before[2] >= {run_key(c) for c in selection}              # the chapters waited for it
    tuned = [c for c in sweep_runs if c.eta > 0 and c.mu == "batch" and c.seed in p.seeds]
    assert any(c.eta == 0.5 for c in tuned)                                   # the selected η reached the chapters
    keys = [run_key(c) for w in rec.waves for c in w]
    assert len(keys) == len(set(keys))                                        # every run in one wave only
    want = {run_key(c) for ch in sweeps for c in ex.sweep_configs(ch, p, store)}
    assert want <= set(keys)


# -- one store, two writers ---------------------------------------------------------------------------
# Two processes each run a PoolLauncher over overlapping lists; both decide to train the shared runs
# (neither is stored when they start). In "together" mode both finish each shared run at the same
# moment and save it at once; in "after" mode the second writer saves only once the first one's
# record is published (its copy must not replace it). A reader (a thread of the test's process) loads the
# shared runs all along. The same two processes write both modes, one store each, one mode after the
# other (two processes instead of four, each importing torch and the library once).

WRITER = r"""
import glob, json, os, sys, time
import sec_lib.runs.store as S
from sec_lib.runs.launch import PoolLauncher
from sec_lib.runs.train import TrainConfig

real = S.train
root = sync = mode = shared = None

def train(cfg, progress=None):
    result = real(cfg, progress)
    key = S.run_key(cfg)
    t0 = time.time()
    if key in shared and mode == "together":          # both writers leave here at the same moment
        open(os.path.join(sync, f"{key}.{os.getpid()}"), "w").close()
        while len(glob.glob(os.path.join(sync, f"{key}.*"))) < 2 and time.time() - t0 < 120:
            time.sleep(0.001)
    elif key in shared and mode == "after":           # save only once the other writer's record is there
        meta = os.path.join(root, key, "result.json")
        while not os.path.exists(meta) and time.time() - t0 < 120:
            time.sleep(0.01)
        time.sleep(0.2)
        with open(os.path.join(sync, f"{key}.first"), "w") as f:
            f.write(open(meta).read())
    return result

S.train = train
for phase in json.loads(sys.argv[1]):                 # [{"root", "sync", "mode", "configs", "shared"}, ...]
    root, sync, mode, shared = phase["root"], phase["sync"], phase["mode"], set(phase["shared"])
    PoolLauncher(1).run([TrainConfig.from_dict(d) for d in phase["configs"]], root)
"""

TWO_WRITER_MODES = {"together": ["together", "together"], "after": ["first", "after"]}   # each writer's mode


def read_until(root, stop, configs, out):
    """The reader, a thread of this process (the writers are processes): loads every config again and
    again until ``stop`` is set; appends the number of whole records it loaded, or its error, to ``out``."""
    try:
        store, loads = ResultStore(root), 0
        while not stop.is_set():
            for c in configs:
                r = store.get(c)                             # None, or a whole record: never an error
                if r is not None:
                    assert r.status == "done" and r.metrics and len(r.evals), r
                    loads += 1
            time.sleep(0.02)
        out.append(loads)
    except BaseException as e:  # noqa: BLE001 - reported by the test
        out.append(e)


def python(code, *args, env):
    return subprocess.Popen([sys.executable, "-c", code, *map(str, args)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


@pytest.fixture(scope="module")
def two_writers(tmp_path_factory):
    """Both modes, written by the same two writer processes ("together", then "after"), each mode into a
    store of its own read all along by a reader thread: {mode: {"root", "sync", "loads"}, "lists",
    "shared", "writers": [(returncode, stderr)]}."""
    tmp = tmp_path_factory.mktemp("two-writers")
    shared = [toy(seed=20), toy(seed=21, eta=0.5), toy(seed=22)]
    lists = [[toy(seed=10)] + shared, [toy(seed=11)] + shared]
    env = dict(os.environ, PYTHONPATH=f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    stop, readers, got = threading.Event(), [], {}
    for mode in TWO_WRITER_MODES:
        got[mode] = dict(root=tmp / mode / "runs", sync=tmp / mode / "sync", loads=[])
        got[mode]["sync"].mkdir(parents=True)
        readers.append(threading.Thread(target=read_until, args=(got[mode]["root"], stop, shared, got[mode]["loads"]),
                                        daemon=True))
        readers[-1].start()
    phases = [[dict(root=str(got[mode]["root"]), sync=str(got[mode]["sync"]), mode=modes[i],
                    configs=[c.to_dict() for c in cfgs], shared=[run_key(c) for c in shared])
               for mode, modes in TWO_WRITER_MODES.items()] for i, cfgs in enumerate(lists)]
    writers = [python(WRITER, json.dumps(ph), env=env) for ph in phases]
    try:
        outs = [w.communicate(timeout=600) for w in writers]
    finally:
        stop.set()
    for r in readers:
        r.join(timeout=120)
    return dict(got, lists=lists, shared=shared, writers=[(w.returncode, err) for w, (_, err) in zip(writers, outs)])


@pytest.mark.parametrize("mode", list(TWO_WRITER_MODES))
def test_two_launchers_writing_one_store_at_once_leave_every_record_complete(two_writers, mode):
    for code, err in two_writers["writers"]:
        assert code == 0, err[-3000:]
    root, sync, loads = two_writers[mode]["root"], two_writers[mode]["sync"], two_writers[mode]["loads"]
    assert len(loads) == 1 and not isinstance(loads[0], BaseException), loads
    assert loads[0] > 0                                                   # the reader did see records
    store = ResultStore(root)
    everything = {run_key(c): c for cfgs in two_writers["lists"] for c in cfgs}
    assert store.keys() == sorted(everything)
    for key, cfg in everything.items():
        folder = store.root / key
        assert json.loads((folder / "config.json").read_text()) == json.loads(json.dumps(cfg.to_dict(), default=str))
        result = store.load(folder)                                   # every table is there and readable
        assert result.status == "done" and result.metrics and len(result.evals)
        assert store.meta(key)["key"] == key
    if mode == "together":                               # both writers did meet at every shared run
        for c in two_writers["shared"]:
            assert len(list(sync.glob(f"{run_key(c)}.*"))) == 2
    if mode == "after":                                  # the first published record was never replaced
        for c in two_writers["shared"]:                  # (a second writer that found it complete reused it
            mark = sync / f"{run_key(c)}.first"          #  and wrote no mark; one that trained kept it)
            if mark.exists():
                assert store.meta(run_key(c)) == json.loads(mark.read_text())


def _worker_pid(_):
    return os.getpid()


def test_the_pool_launcher_keeps_one_set_of_workers_for_every_wave_until_closed(tmp_path):
    """The launcher's workers (each importing torch and the library once) serve every wave of the local pool,
    train the same runs, and end at close(). Progress counts
    each distinct run once, in the workers and in this process (``PoolLauncher(1)``)."""
    lau, events = PoolLauncher(2), []
    lau.run(CONFIGS[:2] + CONFIGS[:1], tmp_path / "a", progress=lambda *e: events.append(e))   # one run twice
    assert events[0] == ("reused", 0, 2) and sum(n for e, n, _ in events if e == "trained") == 2
    assert {t for _, _, t in events} == {2}
    first = lau._pool
    pids = set(first.map(_worker_pid, range(8)))
    lau.run(CONFIGS[2:3], tmp_path / "a")                       # a one-run wave goes to the same workers
    assert lau._pool is first and set(first.map(_worker_pid, range(8))) <= pids
    lau.close()
    assert lau._pool is None
    with pytest.raises(RuntimeError):
        first.submit(_worker_pid, 0)                            # shut down
    assert all(ResultStore(tmp_path / "a").get(c).status == "done" for c in CONFIGS[:3])
    # in this process: two runs stored above, one run twice, one new run trained here
    events, here = [], [CONFIGS[0], toy(seed=2), CONFIGS[1], CONFIGS[0]]
    PoolLauncher(1).run(here, tmp_path / "a", progress=lambda *e: events.append(e))
    assert events == [("reused", 2, 3), ("trained", 1, 3)]
    assert ResultStore(tmp_path / "a").get(toy(seed=2)).status == "done"
    # (a pool's runs equal serial ones: tests/runs/test_store.py::test_parallel_sweep_matches_serial)


def test_train_stages_closes_the_launcher_even_when_a_wave_fails(tmp_path, monkeypatch):
    closed = []

    class Failing(PoolLauncher):
        def run(self, configs, root=None, progress=None):
            raise RuntimeError("wave failed")

        def close(self):
            closed.append(True)

    with pytest.raises(RuntimeError, match="wave failed"):
        train_stages(ex.get_profile("smoke"), ["compare"], Failing(2), ResultStore(tmp_path))
    assert closed == [True]
