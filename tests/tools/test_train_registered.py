"""tools/train_registered.py: the registered follow-ups resume from the commit that registered them, their exports land
in the checkout, and each export is committed alone."""
import subprocess
import sys
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parents[2] / "tools"
sys.path.insert(0, str(TOOLS))
import train_registered as tr  # noqa: E402

NAMES = list(tr.FOLLOWUPS)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path, monkeypatch):
    """A repository whose second commit registers the three follow-ups (their READMEs) and whose third moves on."""
    for k, v in {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t",
                 "GIT_COMMITTER_EMAIL": "t@x"}.items():
        monkeypatch.setenv(k, v)
    r = tmp_path / "repo"
    r.mkdir()
    git(r, "init", "-q")
    (r / "code.py").write_text("x = 0\n")
    git(r, "add", ".")
    git(r, "commit", "-qm", "start")
    for n in NAMES:
        (r / "data" / "followups" / n).mkdir(parents=True)
        (r / "data" / "followups" / n / "README.md").write_text(f"# {n}, registered\n")
    git(r, "add", ".")
    git(r, "commit", "-qm", "register")
    (r / "code.py").write_text("x = 1\n")
    git(r, "commit", "-qam", "move on")
    return r


def test_the_export_lines_of_each_stage_name_their_commit_and_other_lines_none():
    assert tr.commit_message("  72 of 87 C4W selection runs exported to /x/selection (597 s for the last 2, 2 "
                             "processes)") == "C4W: selection runs as they finish (72 of 87 exported)"
    assert tr.commit_message("  4 of 160 P1c test runs exported to /x/test (500 s)") == \
        "P1c: test runs as they finish (4 of 160 exported)"
    assert tr.commit_message("C4W selection: 17 held-out runs to train") is None
    assert tr.commit_message("C4W choices: triplet weight decay 2.5e-05 η 0.005; ms weight decay 2.5e-05 η 1\n") == (
        "C4W: choices.json, written by the registered rule: triplet weight decay 2.5e-05 η 0.005; ms weight decay "
        "2.5e-05 η 1")
    assert tr.commit_message("gpu tier: 3 runs exported to /x") is None


def test_the_registering_commit_is_the_one_that_added_every_readme(repo):
    assert tr.registering_commit(repo) == git(repo, "rev-parse", "HEAD~1")
    (repo / "data" / "followups" / NAMES[0] / "README.md").unlink()
    git(repo, "commit", "-qam", "drop one")
    (repo / "data" / "followups" / NAMES[0] / "README.md").write_text("again\n")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "add it again")          # the first addition counts: the registration
    assert tr.registering_commit(repo) == git(repo, "rev-parse", "HEAD~3")


def test_follow_ups_registered_apart_or_missing_are_refused(repo):
    first, *rest = NAMES
    (repo / "data" / "followups" / first / "README.md").unlink()
    git(repo, "commit", "-qam", "drop one")
    assert tr.registering_commit(repo)                       # its first addition still names the registration
    fresh = repo.parent / "fresh"
    fresh.mkdir()
    git(fresh, "init", "-q")
    for group in (rest, [first]):                            # registered apart: two commits
        for n in group:
            (fresh / "data" / "followups" / n).mkdir(parents=True)
            (fresh / "data" / "followups" / n / "README.md").write_text(f"# {n}\n")
        git(fresh, "add", ".")
        git(fresh, "commit", "-qm", "some")
    with pytest.raises(SystemExit, match="registered in different commits"):
        tr.registering_commit(fresh)
    git(fresh, "rm", "-q", "-r", f"data/followups/{first}")
    with pytest.raises(SystemExit, match="registered in different commits"):
        tr.registering_commit(fresh)                          # removed later: its addition is in the history
    empty = repo.parent / "empty"
    empty.mkdir()
    git(empty, "init", "-q")
    (empty / "x").write_text("x\n")
    git(empty, "add", ".")
    git(empty, "commit", "-qm", "x")
    with pytest.raises(SystemExit, match=f"no commit in this history adds data/followups/{first}/README.md"):
        tr.registering_commit(empty)


def test_the_checkouts_own_history_names_the_registration(tmp_path):
    """The real follow-ups: one commit added the three READMEs and their training modules."""
    if git(TOOLS.parent, "rev-parse", "--is-shallow-repository") == "true":
        pytest.skip("a shallow clone lacks the registering commit")
    commit = tr.registering_commit()
    added = git(TOOLS.parent, "show", "--name-only", "--diff-filter=A", "--format=", commit).split()
    assert {f"data/followups/{n}/README.md" for n in NAMES} <= set(added)
    for module in tr.FOLLOWUPS.values():
        assert f"sec_lib/runs/{module}.py" in added
    assert [c[2] for c in tr.commands(2)] == [f"sec_lib.runs.{m}" for m in tr.FOLLOWUPS.values()]


def test_the_worktree_holds_the_registering_commit_with_the_checkouts_folders_linked(repo, tmp_path):
    commit = tr.registering_commit(repo)
    work = tmp_path / "work"
    made = tr.prepare(work, commit, repo)
    assert git(work, "rev-parse", "HEAD") == commit and (work / "code.py").read_text() == "x = 0\n"
    for n in NAMES:
        link = work / "data" / "followups" / n
        assert link.is_symlink() and link.resolve() == (repo / "data" / "followups" / n).resolve()
    assert len(made) == 1 + len(NAMES)
    assert tr.prepare(work, commit, repo) == []                      # a second session: nothing to do
    with pytest.raises(SystemExit, match="not the registering commit"):
        tr.prepare(work, git(repo, "rev-parse", "HEAD"), repo)


def test_an_export_is_committed_alone(repo):
    (repo / "data" / "followups" / NAMES[1] / "runs.parquet").write_bytes(b"runs")
    (repo / "notes.txt").write_text("work in progress\n")
    git(repo, "add", "notes.txt")                                     # staged, not the export's
    assert tr.commit_runs("C4W: selection runs as they finish (2 of 9 exported)", repo)
    assert git(repo, "log", "-1", "--format=%s") == "C4W: selection runs as they finish (2 of 9 exported)"
    assert git(repo, "show", "--name-only", "--format=", "HEAD").split() == [
        f"data/followups/{NAMES[1]}/runs.parquet"]
    assert git(repo, "diff", "--cached", "--name-only") == "notes.txt"
    assert not tr.commit_runs("nothing new", repo)                    # unchanged: no commit


def test_a_dry_run_prints_the_plan_and_changes_nothing(tmp_path, capsys):
    with pytest.raises(SystemExit):
        tr.main(["--jobs", "0"])                              # refused before anything is read
    capsys.readouterr()
    if git(TOOLS.parent, "rev-parse", "--is-shallow-repository") == "true":
        pytest.skip("a shallow clone lacks the registering commit")
    work = tmp_path / "work"
    assert tr.main(["--dry-run", "--workdir", str(work), "--commit-runs"]) == 0
    out = capsys.readouterr().out
    assert f"worktree: {work}" in out and "commits: one per export" in out
    assert [line.split()[-3] for line in out.splitlines() if line.startswith("command:")] == [
        f"sec_lib.runs.{m}" for m in tr.FOLLOWUPS.values()]
    assert not work.exists()
