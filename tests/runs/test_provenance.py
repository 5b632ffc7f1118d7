"""Where and how a run was trained (sec_lib.runs.provenance), which the store saves with every run."""
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from sec_lib import kernels
from sec_lib.runs import provenance as P
from sec_lib.runs.store import ResultStore, run_key
from sec_lib.runs.train import TrainConfig

REPO = Path(P.__file__).resolve().parents[2]


def test_the_commit_is_the_checkouts_head_and_the_environment_overrides_it(monkeypatch):
    monkeypatch.delenv("SEC_GIT_COMMIT", raising=False)
    if not (REPO / ".git").exists() or shutil.which("git") is None:
        pytest.skip("this copy of the package is not a git checkout (or git is missing): no HEAD to compare")
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert P.git_commit() == head
    monkeypatch.setenv("SEC_GIT_COMMIT", "f" * 40)     # a tree copied to another machine names its commit
    assert P.git_commit() == "f" * 40


def test_a_cpu_runs_provenance_names_the_cpu_kind_and_no_gpu(monkeypatch):
    monkeypatch.setenv("SEC_GIT_COMMIT", "a" * 40)
    prov = P.provenance(TrainConfig(dataset="toy", model="mlp", device="cpu"))
    assert prov["device"] == "cpu" and prov["commit"] == "a" * 40
    assert {k: prov[k] for k in kernels.provenance()} == kernels.provenance()
    assert not {"cuda", "driver", "cudnn"} & set(prov)


def test_the_store_saves_the_provenance_of_the_run(tmp_path, monkeypatch):
    monkeypatch.setenv("SEC_GIT_COMMIT", "b" * 40)
    cfg = TrainConfig(dataset="toy", model="mlp", width=16, embed_dim=8, iterations=2, batch_size=24, eval_every=2,
                      track_every=2, track_samples=4, dtheta_every=2, loss="npair", num_threads=1,
                      data_kwargs={"noise": 0.1, "num_classes": 60})
    ResultStore(tmp_path).run(cfg)
    saved = json.loads((tmp_path / run_key(cfg) / "result.json").read_text())["provenance"]
    assert saved["commit"] == "b" * 40 and saved["torch"] and saved["device"] == "cpu"


def test_the_pretrained_checkpoints_commit_is_the_runs_commit_and_says_dirty(monkeypatch, tmp_path):
    """The pretraining run records the commit every run records (``provenance.git_commit``), with ``+dirty`` when the
    code it executes differs from it; ``$SEC_GIT_COMMIT`` (a copied tree) is taken as it is."""
    from sec_lib.runs import pretrain
    head = P.git_commit()
    monkeypatch.delenv("SEC_GIT_COMMIT", raising=False)
    assert pretrain._git_commit().split("+")[0] == head
    monkeypatch.setattr(pretrain, "CODE_PATHS", ("tests/runs/test_provenance.py",))     # this file, as git sees it
    clean = subprocess.run(["git", "-C", str(pretrain.REPO), "status", "--porcelain", "--", "tests/runs/test_provenance.py"],
                           capture_output=True, text=True).stdout.strip() == ""
    assert pretrain._git_commit() == head + ("" if clean else "+dirty")
    monkeypatch.setenv("SEC_GIT_COMMIT", "f" * 40)
    assert pretrain._git_commit() == "f" * 40
