"""The follow-ups' command, ``python -m sec_lib.book study NAME ... [--jobs N]``: checked once for every follow-up."""
import pytest

from sec_lib.runs import studies, study
from sec_lib.site import runner


@pytest.mark.parametrize("jobs", ["0", "-2"])
def test_the_command_refuses_a_bad_jobs_count_before_any_work(jobs, capsys, monkeypatch):
    monkeypatch.setattr(study, "run", lambda *a, **k: pytest.fail("no work may start"))
    with pytest.raises(SystemExit) as e:
        runner.main(["study", "sgd-rates", "--jobs", jobs])
    assert e.value.code == 2 and f"--jobs must be at least 1, got {jobs}" in capsys.readouterr().err


def test_the_command_trains_the_named_studies_in_order_with_its_jobs_count(monkeypatch):
    seen = []
    monkeypatch.setattr(study, "run", lambda ss, jobs: seen.append(([s.name for s in ss], jobs)))
    assert runner.main(["study", "sgd-eta", "sgd-rates", "--jobs", "3"]) == 0
    assert runner.main(["study", "longer-runs"]) == 0
    assert seen == [(["sgd-eta", "sgd-rates"], 3), (["longer-runs"], 2)]      # 2 by default: one a core


def test_every_follow_up_is_a_study_in_its_own_folder():
    assert list(studies.FOLLOWUPS) == ["sgd-rates", "sgd-eta", "dense-curves", "longer-runs", "weight-decay",
                                       "regime-seeds"]
    for name, s in studies.FOLLOWUPS.items():
        assert s.path() == study.folder_of(name) and s.path().is_dir()


def test_a_study_of_fixed_runs_trains_what_the_store_lacks_into_its_stage(monkeypatch, tmp_path, capsys):
    """``study.fixed_runs``: the runs registered for a study, those the store lacks trained, all of them exported to the
    study's stage folder, through the driver."""
    calls = []
    monkeypatch.setattr(study, "train_exporting", lambda todo, configs, out, store, jobs, label:
                        calls.append((list(todo), list(configs), out, jobs, label)))

    class Store:
        def has(self, cfg):
            return cfg == "done"

    s = study.Study("demo", ("demo",), "A demo.", study.fixed_runs(lambda: ["done", "new"], "demo test"), stages=("test",))
    monkeypatch.setattr(study, "restore_committed", lambda store, committed: None)
    study.run([s], jobs=3, store=Store())
    assert calls == [(["new"], ["done", "new"], s.path() / "test", 3, "demo test")]
    assert "demo test: 2 runs, 1 done" in capsys.readouterr().out
