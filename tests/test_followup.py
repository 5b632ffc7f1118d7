"""What every registered follow-up's command shares (sec_lib.runs.followup): checked once for each follow-up."""
import pytest

from sec_lib.runs import sgdeta, sgdrates


@pytest.mark.parametrize("module", [sgdrates, sgdeta], ids=["Q6c", "Q6d"])
@pytest.mark.parametrize("jobs", ["0", "-2"])
def test_the_command_refuses_a_bad_jobs_count_before_any_work(module, jobs, capsys, monkeypatch):
    monkeypatch.setattr(module, "main", lambda jobs: pytest.fail("no work may start"))
    with pytest.raises(SystemExit) as e:
        module.cli(["--jobs", jobs])
    assert e.value.code == 2 and f"--jobs must be at least 1, got {jobs}" in capsys.readouterr().err


@pytest.mark.parametrize("module", [sgdrates, sgdeta], ids=["Q6c", "Q6d"])
def test_the_command_passes_its_jobs_count_to_the_driver(module, monkeypatch):
    seen = []
    monkeypatch.setattr(module, "main", lambda jobs: seen.append(jobs))
    assert module.cli(["--jobs", "3"]) == 0 and module.cli([]) == 0
    assert seen == [3, 2]                                 # 2 by default: one a core
