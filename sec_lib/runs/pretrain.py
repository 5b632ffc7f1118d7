"""The glyph backbone pretrained here: the reference profile's trunk trained by softmax classification on glyph
classes that no split uses, and its committed checkpoint.

The paper fine-tunes an ImageNet-pretrained BN-Inception. The glyph book's counterpart is this module's
checkpoint: the ``smallcnn`` trunk of the reference profile (width 16, 32-px images; its pooled 64-d feature)
trained with cross-entropy through a linear classifier on the pretraining classes of
:mod:`sec_lib.data.glyph_pretrain` (disjoint from every train, held-out and test class by code point and by look).
Only the trunk is kept: ``data/reference/pretrained/glyph_smallcnn.pt`` is a plain ``state_dict`` of
:class:`~sec_lib.models.SmallCNN`, so ``build_model("smallcnn", pretrained=PATH)`` and
``TrainConfig(pretrained=PATH)`` read it like any local weights file (``torch.load(weights_only=True)``).
Beside it, ``glyph_smallcnn.json`` holds the provenance: the config, the git commit, the data and class-list hashes,
the seed, the CPU kind and kernels (:func:`sec_lib.kernels.provenance`), the weights hash and the Recall@1 of the
trunk's features on the 1,392 test classes before any fine-tuning (beside the same trunk at its random init).

Rebuild (about 15 minutes of one core; resumable: a state file under ``<data dir>/pretrain/`` is written
atomically every :data:`CHECKPOINT_EVERY` steps and a restart continues from it, to the same bits)::

    python -m sec_lib.book pretrain            # train what is missing, write the checkpoint and provenance
    python -m sec_lib.book pretrain --check    # retrain from the committed config and compare weights hashes

The gpu profile's counterpart: the same recipe for its trunk, ``resnet18s`` at width 64 on 64-px
images, trained on a GPU (:data:`GPU_CONFIG`; ``python -m sec_lib.book pretrain --profile gpu``; the gpu tier's
command runs it before its fine-tuning stages, :mod:`sec_lib.runs.gpu_tier`), saved in bfloat16
(:func:`saved_state`) to ``data/reference/pretrained/glyph_resnet18s_64px.pt`` with its provenance beside it
(:func:`checkpoint_path`).

Reproducibility (the contract of :mod:`sec_lib.kernels`): with the pinned kernels and one thread, retraining
from the committed config gives the same weights hash on the same CPU kind. tests/runs/test_pretrain.py retrains a
short prefix of the run (:data:`PREFIX_STEPS` steps) and compares its hash with the one recorded for this CPU kind
in ``tests/golden/pretrain_prefix.json`` (skipped on another kind).
"""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import io
import json
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

from .. import kernels
from .. import metrics as metrics_mod
from ..data.glyph_pool import default_data_dir
from ..data.glyph_pretrain import PRETRAIN_JSON, PRETRAIN_INSTANCES_PER_CLASS, load_pretrain_glyphs, pretrain_manifest
from ..data.glyphs import load_glyphs
from ..data.ondevice import on_device
from ..models import build_model
from ..params import Choice, Device, Number, check_fields
from ..tempfiles import atomic_write_bytes
from ..threads import torch_threads
from .provenance import git_commit, gpu_provenance

REPO = Path(__file__).resolve().parents[2]
#: The committed checkpoint and its provenance (repository-relative paths: they are what a config names).
CHECKPOINT = Path("data/reference/pretrained/glyph_smallcnn.pt")
PROVENANCE = CHECKPOINT.with_suffix(".json")
#: A resumable run writes its state this often.
CHECKPOINT_EVERY = 500
#: Steps of the prefix retrained by the test.
PREFIX_STEPS = 20
FORMAT = "sec_lib pretrained glyph backbone v1"


#: The trunks that can be pretrained: the reference profile's and the gpu profile's.
ARCHS = ("smallcnn", "resnet18s")
#: The dtypes a checkpoint's floating-point tensors can be saved in (:attr:`PretrainConfig.save_dtype`).
SAVE_DTYPES = ("float32", "bfloat16")


class PretrainStopped(Exception):
    """A pretraining run stopped at its deadline (``stop_at``) after saving its state: the next call resumes it."""

    def __init__(self, step: int, steps: int, state_path: Path):
        super().__init__(f"pretraining stopped at step {step} of {steps} (its state is in {state_path}; the next "
                         "call resumes from there)")
        self.step, self.steps = step, steps


@dataclass(frozen=True)
class PretrainConfig:
    """Everything that determines the pretraining run (the trunk: the reference profile's ``model``/``width``;
    :data:`GPU_CONFIG` the gpu profile's)."""
    arch: str = "smallcnn"
    width: int = 16
    image_size: int = 32
    instances_per_class: int = PRETRAIN_INSTANCES_PER_CLASS
    data_seed: int = 0
    iterations: int = 6000
    batch_size: int = 128
    optimizer: str = "sgd"
    lr: float = 0.1
    momentum: float = 0.9
    weight_decay: float = 5e-4
    schedule: str = "cosine"
    seed: int = 0
    num_threads: int = 1
    device: str = "cpu"                  # not in to_dict while "cpu" (the committed configs predate it)
    save_dtype: str = "float32"          # the checkpoint's floating-point tensors (:func:`saved_state`); not in
                                         # to_dict while "float32" (the committed configs predate it)

    def validate(self) -> "PretrainConfig":
        Choice(ARCHS).check("arch", self.arch)
        Device().check("device", self.device)
        Choice(("sgd",)).check("optimizer", self.optimizer)
        Choice(("cosine", "constant")).check("schedule", self.schedule)
        Choice(SAVE_DTYPES).check("save_dtype", self.save_dtype)
        for name, spec in [("width", Number(1, 4096, True)), ("image_size", Number(16, 1024, True)),
                           ("instances_per_class", Number(1, 10000, True)), ("data_seed", Number(0, 2**31 - 1, True)),
                           ("iterations", Number(1, 10**7, True)), ("batch_size", Number(2, 100000, True)),
                           ("lr", Number(1e-9, 100)), ("momentum", Number(0, 0.999999)),
                           ("weight_decay", Number(0, 10)), ("seed", Number(0, 2**31 - 1, True)),
                           ("num_threads", Number(1, 1024, True))]:
            spec.check(name, getattr(self, name))
        return self

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        if d["device"] == "cpu":
            del d["device"]
        if d["save_dtype"] == "float32":
            del d["save_dtype"]
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "PretrainConfig":
        return cls(**check_fields(cls, d)).validate()


#: The gpu profile's trunk, pretrained the same way (same classes, recipe and seed) on a GPU, in float32, and saved
#: in bfloat16: 22 MB instead of 45, so that the checkpoint comes back from a lent machine (16 MiB a file there, so in
#: two parts) and travels to the next one with the tree (64 MiB in all). The gpu profile's runs compute under bf16
#: autocast; its fine-tuning starts from these rounded weights (the provenance holds both weights hashes).
GPU_CONFIG = PretrainConfig(arch="resnet18s", width=64, image_size=64, device="cuda", save_dtype="bfloat16")
#: Which pretraining config serves which profile's fine-tuning.
PROFILE_CONFIGS = {"reference": PretrainConfig(), "gpu": GPU_CONFIG}


def checkpoint_path(cfg: PretrainConfig) -> Path:
    """The repository-relative checkpoint of ``cfg``'s trunk: :data:`CHECKPOINT` for the smallcnn trunk, else
    ``data/reference/pretrained/glyph_<arch>_<size>px.pt`` (its provenance: the same name with ``.json``)."""
    if cfg.arch == "smallcnn":
        return CHECKPOINT
    return CHECKPOINT.with_name(f"glyph_{cfg.arch}_{cfg.image_size}px.pt")


def saved_state(trunk: dict, cfg: PretrainConfig) -> dict:
    """The trunk as its checkpoint holds it: the floating-point tensors in ``cfg.save_dtype``, the others (BatchNorm's
    ``num_batches_tracked``) as they are. A float32 trunk is returned unchanged."""
    dtype = getattr(torch, cfg.save_dtype)
    return {k: v.to(dtype) if v.is_floating_point() else v for k, v in trunk.items()}


def weights_hash(state: dict) -> str:
    """sha256 (first 16 hex digits) of a state_dict's names, dtypes, shapes and bytes, in key order."""
    h = hashlib.sha256()
    for k in sorted(state):
        t = state[k].detach().cpu().contiguous()
        h.update(f"{k}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.numpy().tobytes() if t.dtype != torch.bfloat16 else t.view(torch.int16).numpy().tobytes())
    return h.hexdigest()[:16]


def _file_sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


#: The code the pretraining run executes (a change to any of it, uncommitted, marks the commit "+dirty").
CODE_PATHS = ("sec_lib/runs/pretrain.py", "sec_lib/data", "sec_lib/models", "sec_lib/kernels.py", "sec_lib/metrics",
              "sec_lib/params.py", "sec_lib/threads.py", "sec_lib/tempfiles.py", "sec_lib/__init__.py")


def _git_commit() -> str:
    """The commit of the code as every run records it (:func:`sec_lib.runs.provenance.git_commit`: ``$SEC_GIT_COMMIT``
    when set, a tree copied to another machine), with ``+dirty`` when :data:`CODE_PATHS` differ from it in this
    checkout; "unknown" without either."""
    commit = git_commit()
    if commit is None:
        return "unknown"
    if os.environ.get("SEC_GIT_COMMIT"):            # a copied tree: its git, if any, is not the code's
        return commit
    try:
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--", *CODE_PATHS],
                               capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return commit
    return commit + ("+dirty" if dirty.returncode == 0 and dirty.stdout.strip() else "")


class _Batches:
    """Seeded epochs of shuffled indices, cut into batches (a new permutation when one runs out); its whole state
    is (generator state, permutation, position), saved and restored by a resumable run."""

    def __init__(self, n: int, batch_size: int, seed: int):
        self.n, self.batch_size = n, batch_size
        self.gen = torch.Generator().manual_seed(seed)
        self.perm, self.pos = torch.randperm(n, generator=self.gen), 0

    def next(self) -> torch.Tensor:
        if self.pos + self.batch_size > self.n:
            self.perm, self.pos = torch.randperm(self.n, generator=self.gen), 0
        idx = self.perm[self.pos:self.pos + self.batch_size]
        self.pos += self.batch_size
        return idx

    def state(self) -> dict:
        return {"gen": self.gen.get_state(), "perm": self.perm.clone(), "pos": self.pos}

    def load(self, s: dict) -> None:
        self.gen.set_state(s["gen"])
        self.perm, self.pos = s["perm"], int(s["pos"])


def _build(cfg: PretrainConfig, num_classes: int):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        trunk = build_model(cfg.arch, head="nobn", width=cfg.width, image_size=cfg.image_size).backbone
        classifier = nn.Linear(trunk.feature_dim, num_classes)
    return trunk, classifier


def _optimizer(cfg: PretrainConfig, params):
    opt = torch.optim.SGD(params, lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay, nesterov=True)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=cfg.iterations) if cfg.schedule == "cosine" else None
    return opt, sched


def pretrain(cfg: PretrainConfig, steps: int | None = None, state_path: Path | None = None,
             log_every: int = 0, stop_at: float | None = None) -> dict:
    """Train ``cfg`` (its first ``steps`` steps, default all) and return ``{"trunk": state_dict, "steps",
    "train_loss", "train_acc", "seconds"}``. With ``state_path`` the run saves its whole state there every
    :data:`CHECKPOINT_EVERY` steps (atomically) and resumes from it if it exists (for the same config); a resumed
    run ends with the same weights as an uninterrupted one. ``stop_at`` (a ``time.monotonic()`` value, with
    ``state_path``): past it, the run stops at its next state save and raises :class:`PretrainStopped` (a lent GPU's
    command ends; the next one resumes)."""
    cfg.validate()
    kernels.check()
    steps = cfg.iterations if steps is None else int(Number(1, cfg.iterations, True).check("steps", steps))
    if stop_at is not None and state_path is None:
        raise ValueError("stop_at needs a state_path: a run that stops early must save its state to resume from")
    with torch_threads(cfg.num_threads):
        return _pretrain(cfg, steps, state_path, log_every, stop_at)


def _pretrain(cfg: PretrainConfig, steps: int, state_path: Path | None, log_every: int,
              stop_at: float | None = None) -> dict:
    t0 = time.perf_counter()
    ds = load_pretrain_glyphs(cfg.image_size, cfg.instances_per_class, cfg.data_seed)
    device = torch.device(cfg.device)
    trunk, classifier = (m.to(device) for m in _build(cfg, ds.num_classes))
    xs, ys = (ds.x, ds.labels) if device.type == "cpu" else on_device(ds, device)
    opt, sched = _optimizer(cfg, list(trunk.parameters()) + list(classifier.parameters()))
    batches = _Batches(len(ds), cfg.batch_size, cfg.seed)
    done, loss_sum, correct, seen = 0, 0.0, 0, 0
    if state_path is not None and Path(state_path).exists():
        s = torch.load(state_path, map_location=device, weights_only=True)
        if s["config"] != json.dumps(cfg.to_dict(), sort_keys=True) or s["data_sha256"] != ds.manifest["sha256"]:
            raise ValueError(f"{state_path} holds the state of another pretraining config or data; remove it to "
                             "start over")
        trunk.load_state_dict(s["trunk"])
        classifier.load_state_dict(s["classifier"])
        opt.load_state_dict(s["opt"])
        if sched is not None:
            sched.load_state_dict(s["sched"])
        batches.load({k: (v.cpu() if isinstance(v, torch.Tensor) else v) for k, v in s["batches"].items()})
        done = int(s["step"])
    trunk.train()
    classifier.train()
    for step in range(done + 1, steps + 1):
        idx = batches.next()
        idx = idx if device.type == "cpu" else idx.to(device)
        x, y = xs[idx], ys[idx]
        logits = classifier(trunk(x))
        loss = F.cross_entropy(logits, y)
        if not torch.isfinite(loss):
            raise FloatingPointError(f"pretraining loss is {loss.item()} at step {step}; lower lr={cfg.lr}")
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if sched is not None:
            sched.step()
        if step > steps - 200:               # the last 200 steps' training loss and accuracy
            loss_sum += loss.item() * len(y)
            correct += int((logits.argmax(1) == y).sum())
            seen += len(y)
        if log_every and step % log_every == 0:
            print(f"  step {step}/{steps} loss {loss.item():.3f} lr {opt.param_groups[0]['lr']:.4g} "
                  f"({time.perf_counter() - t0:.0f} s)", flush=True)
        if state_path is not None and (step % CHECKPOINT_EVERY == 0 and step < steps):
            buf = io.BytesIO()
            torch.save({"config": json.dumps(cfg.to_dict(), sort_keys=True), "data_sha256": ds.manifest["sha256"],
                        "step": step, "trunk": trunk.state_dict(), "classifier": classifier.state_dict(),
                        "opt": opt.state_dict(), "sched": sched.state_dict() if sched is not None else None,
                        "batches": batches.state()}, buf)
            atomic_write_bytes(Path(state_path), buf.getvalue())
            if stop_at is not None and time.monotonic() > stop_at:
                raise PretrainStopped(step, steps, Path(state_path))
    return {"trunk": {k: v.detach().cpu().clone() for k, v in trunk.state_dict().items()}, "steps": steps,
            "train_loss": loss_sum / seen if seen else float("nan"),
            "train_acc": 100.0 * correct / seen if seen else float("nan"),
            "seconds": round(time.perf_counter() - t0, 1), "data_sha256": ds.manifest["sha256"],
            "num_classes": ds.num_classes, "num_images": len(ds)}


@torch.no_grad()
def feature_recall(trunk_state: dict | None, cfg: PretrainConfig, ks=(1, 2, 4, 8)) -> dict:
    """Recall@K (percent) of the trunk's pooled features on all test classes of the benchmark (the committed
    test half, 12 instances each, eval-mode BatchNorm); ``trunk_state`` None: the trunk at its random init."""
    test = load_glyphs("test", image_size=cfg.image_size)
    trunk, _ = _build(cfg, 2)
    if trunk_state is not None:
        trunk.load_state_dict(trunk_state)
    trunk = trunk.to(cfg.device).eval()
    with torch_threads(cfg.num_threads):
        feats = torch.cat([trunk(x.to(cfg.device)).cpu() for x in test.x.split(1000)])
        rec = metrics_mod.recall_at_k(feats, test.labels, ks=tuple(ks))
    return {"classes": test.num_classes, "images": len(test), **{f"R@{k}": float(v) for k, v in rec.items()}}


def _state_path(cfg: PretrainConfig = PretrainConfig()) -> Path:
    return default_data_dir() / "pretrain" / checkpoint_path(cfg).with_suffix(".state.pt").name


def build_checkpoint(cfg: PretrainConfig = PretrainConfig(), out: Path | None = None, log_every: int = 500,
                     stop_at: float | None = None) -> dict:
    """Train (resuming where a previous attempt stopped), then write the checkpoint (:func:`saved_state`) and its
    provenance (each atomically; the weights first). Returns the provenance. ``stop_at``: as :func:`pretrain`'s
    (raises :class:`PretrainStopped`, nothing written but the state)."""
    out = REPO / checkpoint_path(cfg) if out is None else Path(out)
    commit = _git_commit()                  # the code as the run starts (others may commit while it trains)
    res = pretrain(cfg, state_path=_state_path(cfg), log_every=log_every, stop_at=stop_at)
    saved = saved_state(res["trunk"], cfg)
    buf = io.BytesIO()
    torch.save(saved, buf)
    atomic_write_bytes(out, buf.getvalue())
    man = pretrain_manifest()
    prov = {
        "format": FORMAT,
        "description": f"{cfg.arch} trunk (the {'reference' if cfg.arch == 'smallcnn' else 'gpu'} profile's model) "
                       "pretrained by softmax classification on glyph classes no split uses "
                       f"(sec_lib.data.glyph_pretrain); a plain state_dict of its backbone",
        "config": cfg.to_dict(),
        "git_commit": commit,
        "classes": {"file": str(PRETRAIN_JSON.relative_to(REPO)), "sha256": _file_sha256(PRETRAIN_JSON),
                    "count": res["num_classes"], "stats": man["stats"], "rule": man["rule"]},
        "data": {"sha256": res["data_sha256"], "images": res["num_images"],
                 "instances_per_class": cfg.instances_per_class, "image_size": cfg.image_size, "seed": cfg.data_seed},
        "seed": cfg.seed,
        "kernels": kernels.provenance(),
        **({"device": torch.cuda.get_device_name(), **gpu_provenance()} if cfg.device.startswith("cuda") else {}),
        "weights_hash": weights_hash(saved),
        **({"trained_weights_hash": weights_hash(res["trunk"])} if cfg.save_dtype != "float32" else {}),
        "file_sha256": _file_sha256(out),
        "train": {"steps": res["steps"], "last200_loss": res["train_loss"], "last200_acc": res["train_acc"],
                  "seconds": res["seconds"]},
        "test_features": {"pretrained": feature_recall(saved, cfg), "random_init": feature_recall(None, cfg)},
    }
    atomic_write_bytes(out.with_suffix(".json"), (json.dumps(prov, indent=1) + "\n").encode("utf-8"))
    _state_path(cfg).unlink(missing_ok=True)
    return prov


def provenance_path(profile: str = "reference") -> Path:
    """The repository-relative provenance file of ``profile``'s trunk (:data:`PROFILE_CONFIGS`)."""
    return checkpoint_path(PROFILE_CONFIGS[Choice(tuple(PROFILE_CONFIGS)).check("profile", profile)]).with_suffix(".json")


def committed_provenance(path: Path | None = None, profile: str = "reference") -> dict:
    """The committed checkpoint's provenance: ``path``, else that of ``profile``'s trunk (:func:`provenance_path`).
    FileNotFoundError, naming the command that builds it, where it is not committed."""
    p = REPO / provenance_path(profile) if path is None else Path(path)
    if not p.exists():
        if path is None and not (REPO / "pyproject.toml").is_file():     # an installed package, not a checkout
            fix = ("a wheel carries it at that path beside the package (setup.py's REPO_FILES): install one built from "
                   "a checkout that has it" if profile == "reference" else "a wheel carries only the reference "
                   "profile's (setup.py's REPO_FILES): run this profile from a checkout")
            raise FileNotFoundError(f"{p} does not exist: this installed sec_lib lacks the committed checkpoint "
                                    f"{checkpoint_path(PROFILE_CONFIGS[profile])} and its provenance; {fix}")
        raise FileNotFoundError(f"{p} does not exist; build it with `python -m sec_lib.book pretrain"
                                f"{'' if profile == 'reference' else ' --profile ' + profile}`")
    return json.loads(p.read_text(encoding="utf-8"))


def committed_config(profile: str = "reference") -> PretrainConfig:
    """The config of ``profile``'s committed checkpoint (the reference profile's smallcnn trunk by default)."""
    return PretrainConfig.from_dict(committed_provenance(profile=profile)["config"])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sec_lib.book pretrain", description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true",
                    help="retrain the profile's trunk from its committed config and compare the weights hash with the "
                         "committed one")
    ap.add_argument("--steps", type=int, default=None, help="with --check: only the first N steps (prints the hash)")
    ap.add_argument("--profile", default="reference", choices=sorted(PROFILE_CONFIGS),
                    help="whose trunk to pretrain: the reference profile's smallcnn (default, a CPU) or the gpu "
                         "profile's resnet18s (a GPU)")
    args = ap.parse_args(argv)
    if args.check:
        cfg = committed_config(args.profile)
        res = pretrain(cfg, steps=args.steps, log_every=500)
        got = weights_hash(saved_state(res["trunk"], cfg))
        prov = committed_provenance(profile=args.profile)
        print(json.dumps({"cpu_kind": kernels.this_kind(), "steps": res["steps"], "weights_hash": got,
                          "committed": prov["weights_hash"], "committed_cpu_kind": prov["kernels"]["cpu_kind"]}))
        if args.steps is None:
            return 0 if got == prov["weights_hash"] else 1
        return 0
    prov = build_checkpoint(PROFILE_CONFIGS[args.profile].validate())
    print(json.dumps({k: prov[k] for k in ("weights_hash", "train", "test_features")}, indent=1))
    return 0
