"""Train the registered follow-ups (C4L, C4W, P1c) with the code of the commit that registered them, and commit their
runs into this checkout as they are exported.

The follow-ups were registered before any of their runs (``data/followups/<name>/README.md``, added with their code
in one commit). Their training takes longer than a session, and the code of this checkout moves on meanwhile, so each
session resumes them from that commit, not from the checkout:

- a detached worktree of the registering commit (``--workdir``; made once, refused when it holds another commit);
- its ``data/followups/<name>/`` folders linked to this checkout's, so that the exports land here;
- that commit's own training modules (``python -m sec_lib.runs.<module> --jobs N``, what its ``make followup-*``
  targets run), in the registered order, on this checkout's interpreter (``make setup`` first) with the worktree first
  on ``PYTHONPATH``, and the checkout's result store (``SEC_RUNS_DIR``, default ``data/runs``): each trains what is
  missing and resumes. (Not its ``make`` targets: their ``setup`` would reinstall the checkout's editable package from
  the worktree.)
- with ``--commit-runs``, after every "N of M ... runs exported" line, one commit in this checkout of the follow-ups'
  folders only (``git commit -- <folders>``), named for the stage and the count; and one when a follow-up's held-out
  choices are written (``choices.json``), naming them.

    python tools/train_registered.py --dry-run                   # print the plan, change nothing
    python tools/train_registered.py --commit-runs               # train in the foreground, commit each export
    setsid nohup python tools/train_registered.py --commit-runs > train.log 2>&1 &    # in the background
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: The registered follow-ups in their registered order: folder under data/followups/ -> the registering commit's
#: training module (sec_lib.runs.<module>).
FOLLOWUPS = {"longer-runs": "longruns", "weight-decay": "weightdecay", "regime-seeds": "regimeseeds"}
#: What a study prints after each export (sec_lib/runs/study.py; at the registering commit, sec_lib/runs/commands.py).
EXPORTED = re.compile(r"^\s*(\d+) of (\d+) (\S+) (.+?) runs exported to ")
#: What a follow-up with a held-out selection prints once its ``choices.json`` is written.
CHOSEN = re.compile(r"^(\S+) choices: (.+)$")


def git(*args: str, cwd: Path = REPO) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def registering_commit(repo: Path = REPO) -> str:
    """The one commit that added every follow-up's README (their registration); a clear error where the history
    lacks it (a shallow clone) or where they were registered apart."""
    found = {}
    for name in FOLLOWUPS:
        readme = f"data/followups/{name}/README.md"
        added = git("log", "--diff-filter=A", "--format=%H", "--", readme, cwd=repo).split()
        if not added:
            raise SystemExit(f"no commit in this history adds {readme}: a shallow clone? (git fetch --unshallow)")
        found[name] = added[-1]
    if len(set(found.values())) != 1:
        raise SystemExit("the follow-ups were registered in different commits: "
                         + ", ".join(f"{n} {c[:7]}" for n, c in found.items()))
    return next(iter(found.values()))


def commit_message(line: str) -> str | None:
    """The commit message for a study's export line ('  72 of 87 C4W selection runs exported to ...') or for the line
    that says its held-out choices are written ('C4W choices: ...', with ``choices.json``), else None."""
    m = EXPORTED.match(line)
    if m:
        done, total, ident, stage = m.groups()
        return f"{ident}: {stage} runs as they finish ({done} of {total} exported)"
    m = CHOSEN.match(line)
    return f"{m.group(1)}: choices.json, written by the registered rule: {m.group(2).strip()}" if m else None


def prepare(workdir: Path, commit: str, repo: Path = REPO) -> list[str]:
    """Make (or check) the worktree of ``commit`` at ``workdir`` and its links into ``repo``; returns what it did."""
    done = []
    if workdir.exists():
        head = git("rev-parse", "HEAD", cwd=workdir)
        if head != commit:
            raise SystemExit(f"{workdir} holds commit {head[:7]}, not the registering commit {commit[:7]}; "
                             "remove it (git worktree remove) or pass another --workdir")
    else:
        git("worktree", "add", "--detach", str(workdir), commit, cwd=repo)
        done.append(f"worktree {workdir} at {commit[:7]}")
    for name in FOLLOWUPS:
        link, target = workdir / "data" / "followups" / name, repo / "data" / "followups" / name
        if link.is_symlink() and link.resolve() == target.resolve():
            continue
        if link.is_symlink() or link.is_file():
            link.unlink()
        elif link.exists():
            shutil.rmtree(link)
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(target)
        done.append(f"{link} -> {target}")
    return done


def commit_runs(message: str, repo: Path = REPO) -> bool:
    """Commit the follow-ups' folders alone (nothing else staged in ``repo`` goes with it); False when unchanged."""
    paths = [f"data/followups/{n}" for n in FOLLOWUPS]
    git("add", "--", *paths, cwd=repo)
    proc = subprocess.run(["git", "commit", "-q", "-m", message, "--", *paths], cwd=repo, capture_output=True,
                          text=True)
    return proc.returncode == 0


def commands(jobs: int, python: str = sys.executable) -> list[list[str]]:
    """The registering commit's training commands, in the registered order."""
    return [[python, "-m", f"sec_lib.runs.{module}", "--jobs", str(jobs)] for module in FOLLOWUPS.values()]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workdir", type=Path, default=None,
                    help="the registering commit's worktree (default: /tmp/sec-registered-<commit>)")
    ap.add_argument("--jobs", type=int, default=2, help="runs trained at once (default 2)")
    ap.add_argument("--commit-runs", action="store_true", help="commit the follow-ups' folders after each export")
    ap.add_argument("--dry-run", action="store_true", help="print the commit, the worktree and the commands; change nothing")
    args = ap.parse_args(argv)
    if args.jobs < 1:
        ap.error(f"--jobs {args.jobs} is not valid; expected 1 or more")
    commit = registering_commit()
    workdir = (args.workdir or Path(f"/tmp/sec-registered-{commit[:7]}")).resolve()
    env = dict(os.environ, SEC_RUNS_DIR=os.environ.get("SEC_RUNS_DIR") or str(REPO / "data" / "runs"),
               PYTHONPATH=str(workdir))
    cmds = commands(args.jobs)
    print(f"registering commit: {commit[:7]}\nworktree: {workdir}\nstore: {env['SEC_RUNS_DIR']}\n"
          + "".join(f"command: {' '.join(c)}\n" for c in cmds)
          + ("commits: one per export, of data/followups/{" + ",".join(FOLLOWUPS) + "}" if args.commit_runs
             else "commits: none (--commit-runs commits each export)"), flush=True)
    if args.dry_run:
        return 0
    for line in prepare(workdir, commit):
        print(f"made {line}", flush=True)
    for cmd in cmds:
        proc = subprocess.Popen(cmd, cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                bufsize=1)
        for line in proc.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            message = commit_message(line) if args.commit_runs else None
            if message and commit_runs(message):
                print(f"committed: {message}", flush=True)
        if proc.wait():
            return proc.returncode
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
