"""What a run is: :class:`TrainConfig` (every setting of one training run, validated; its hash is the run's store
key, :func:`run_key`) and :class:`RunResult` (its final metrics and the tidy tables of what happened), with the tables' schema.
The loop that turns one into the other is :func:`sec_lib.runs.train.train`.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from .. import kernels
from ..data import DATASET_NAMES
from ..data.augment import check_view_settings
from ..losses import LOSS_NAMES, LOSS_SPECS
from ..models import ARCHS, HEADS
from ..params import Choice, Device, Mu, Number, ParameterError, check_fields

OPTIMIZERS = ("adam", "adamw", "sgd")
SCHEDULES = ("constant", "step", "cosine")
#: The embedding penalties a run can train: SEC (sec.SphericalEmbeddingConstraint, every variant but one) or PML's
#: CenterInvariantRegularizer (sec.CenterInvariantPenalty; the scale chapter's quick-tier arm).
PENALTIES = ("sec", "cir")


class TrainingDiverged(RuntimeError):
    """The loss became NaN or infinite."""


@dataclass
class TrainConfig:
    """Everything that determines a run. The hash of its canonical form is the run's store key."""
    # data
    dataset: str = "glyphs"
    data_root: str | None = None
    image_size: int = 32
    train_classes: int | None = None  # use only the first N training classes (None: all)
    test_classes: int | None = None   # evaluate on the first N test classes (None: all)
    holdout_classes: int = 0          # > 0: hold out the last N training classes and evaluate on them
                                      # instead of the test split (validation, for choosing hyperparameters)
    data_kwargs: dict = field(default_factory=dict)
    views: int = 0                    # >= 2: self-supervised, each batch = batch_size // views unlabeled images seen
                                      # through `views` augmentations, instance labels (sec_lib.data.augment)
    augment: dict = field(default_factory=dict)  # ViewAugment settings for views >= 2 (default: its defaults)
    # model
    model: str = "smallcnn"
    width: int = 16
    head: str = "paper"
    embed_dim: int = 64
    pretrained: str | None = None
    freeze_bn: bool = False
    # loss and SEC
    loss: str = "semihard"
    loss_kwargs: dict = field(default_factory=dict)
    eta: float = 0.0                  # SEC weight; 0 disables SEC
    mu: str | float = "batch"         # 'batch' | 'ema' | 'zero' (L2-reg) | fixed radius > 0
    momentum: float = 1.0             # EMA momentum ρ for mu='ema'
    relative: bool = False            # scale-free SEC: eta * mean((||f_i|| / mu - 1)^2), mu the live batch mean
                                      # (sec.SphericalEmbeddingConstraint(relative=True); needs mu='batch', eta > 0)
    penalty: str = "sec"              # 'sec', or 'cir': eta * PML's CenterInvariantRegularizer instead of SEC
                                      # (sec.CenterInvariantPenalty; needs mu='batch', eta > 0, relative False)
    # optimisation
    optimizer: str = "adam"
    lr: float = 1e-3                  # backbone learning rate
    lr_head: float | None = None      # head (and loss parameters); None: same as lr
    weight_decay: float = 0.0
    sgd_momentum: float = 0.9
    schedule: str = "constant"
    lr_milestones: tuple = ()
    lr_decay: float = 0.1
    iterations: int = 200
    schedule_iterations: int = 0      # the schedule's horizon (cosine's T), 0: the run's length; a longer horizon makes
                                      # this run the exact prefix of the longer run (experiments.early_twin)
    batch_size: int = 60              # P x K; K from the loss's paper setting unless batch_k is set
    batch_k: int | None = None
    seed: int = 0
    device: str = "cpu"
    # evaluation and instrumentation
    eval_every: int = 50              # 0: only at the end
    eval_ks: tuple = (1, 2, 4, 8)
    eval_clustering: str = "all"      # NMI/F1 at every evaluation ('all') or only at the end ('final')
    kmeans_n_init: int = 10           # k-means restarts for NMI/F1 (10 = scikit-learn's classic default)
    kmeans_workers: int = 1           # those restarts run on this many threads at once: the same clustering
                                      # (metrics.clustering.kmeans_labels, tested), so never part of the key
    instrument: bool = True
    stats_every: int = 1              # batch statistics (and their extra gradient) every this many steps
    dtheta_every: int = 5
    track_samples: int = 32
    track_every: int = 10
    num_threads: int = 1              # torch/OpenMP threads every run trains with (numbers depend on it;
                                      # part of the key when it is not 1, see store.run_key)
    # the device path (a GPU): none of these changes a CPU run's numbers at its default
    read_every: int = 1               # read the step values (losses, μ, monitor, tracked norms) to the host every
                                      # this many steps, and at the evaluations and the last step; 1: every step.
                                      # A non-finite loss stops the run at the next read (at most read_every - 1
                                      # updates late), with the same message; the tables are the same
    autocast: str = "none"            # 'bf16': the network's forward passes under bfloat16 autocast (losses,
                                      # SEC and the monitor stay float32); a different run, so part of the key
    channels_last: bool = False       # the network and its inputs in channels-last memory format (part of the key)

    def __post_init__(self):
        # JSON has no tuples: TrainConfig(**json.loads(row.config)) must rebuild the same config
        for name in ("lr_milestones", "eval_ks"):
            if isinstance(getattr(self, name), list):
                setattr(self, name, tuple(getattr(self, name)))

    # -- validation ---------------------------------------------------------------------------
    def validate(self) -> "TrainConfig":
        """Raise ParameterError naming the bad field and its valid values; return self."""
        Choice(DATASET_NAMES).check("dataset", self.dataset)
        Choice(ARCHS).check("model", self.model)
        Choice(HEADS).check("head", self.head)
        Choice(LOSS_NAMES).check("loss", self.loss)
        Choice(OPTIMIZERS).check("optimizer", self.optimizer)
        Choice(SCHEDULES).check("schedule", self.schedule)
        Choice(("all", "final")).check("eval_clustering", self.eval_clustering)
        Number(1, 1000, True).check("kmeans_n_init", self.kmeans_n_init)
        Mu().check("mu", self.mu)
        for name, spec in [("image_size", Number(8, 1024, True)), ("width", Number(1, 4096, True)),
                           ("embed_dim", Number(2, 8192, True)), ("eta", Number(0, math.inf)),
                           ("momentum", Number(1e-9, 1.0)), ("lr", Number(1e-12, 100)),
                           ("weight_decay", Number(0, 10)), ("sgd_momentum", Number(0, 0.999999)),
                           ("lr_decay", Number(1e-9, 1.0)), ("iterations", Number(1, 10**8, True)),
                           ("batch_size", Number(2, 100000, True)), ("seed", Number(0, 2**31 - 1, True)),
                           ("eval_every", Number(0, 10**8, True)), ("dtheta_every", Number(1, 10**8, True)),
                           ("stats_every", Number(1, 10**8, True)),
                           ("track_samples", Number(0, 100000, True)), ("track_every", Number(1, 10**8, True)),
                           ("num_threads", Number(1, 1024, True)), ("read_every", Number(1, 10**8, True)),
                           ("kmeans_workers", Number(1, 1024, True))]:
            spec.check(name, getattr(self, name))
        if self.lr_head is not None:
            Number(1e-12, 100).check("lr_head", self.lr_head)
        if self.batch_k is not None:
            Number(1, 10000, True).check("batch_k", self.batch_k)
        Number(0, 10**7, True).check("holdout_classes", self.holdout_classes)
        for opt in ("train_classes", "test_classes"):
            if getattr(self, opt) is not None:
                Number(2, 10**7, True).check(opt, getattr(self, opt))
        if self.batch_size // self.k < 2:
            raise ParameterError(f"parameter 'batch_size' = {self.batch_size} is too small: with K = {self.k} "
                                 f"instances per class it must hold at least 2 classes (>= {2 * self.k})")
        views = self.views if isinstance(self.views, int) and self.views >= 2 else 0   # checked below
        unit = views or self.k                # images per batch: P classes x K, or N images x views
        if self.batch_size % unit:
            lo = self.batch_size - self.batch_size % unit
            near = [b for b in (lo, lo + unit) if b >= 2 * unit]
            what = (f"N images x views = {unit}" if views else
                    f"P classes x K = {unit} instances ({'batch_k' if self.batch_k else f'the {self.loss} loss'})")
            raise ParameterError(f"parameter 'batch_size' = {self.batch_size} is not valid: a batch is {what}, so it "
                                 f"must be a multiple of {unit}; nearest valid sizes: " + ", ".join(map(str, near)))
        if self.momentum != 1.0 and self.mu != "ema":
            raise ParameterError(f"parameter 'momentum' = {self.momentum!r} is only used with mu = 'ema' (got mu = "
                                 f"{self.mu!r}); leave it at 1.0 or set mu='ema'")
        if not isinstance(self.relative, bool):
            raise ParameterError(f"parameter 'relative' = {self.relative!r} must be True or False")
        if self.relative and (self.eta == 0 or self.mu != "batch"):
            raise ParameterError(f"parameter 'relative' = True needs SEC with mu = 'batch' and eta > 0 (got eta = "
                                 f"{self.eta!r}, mu = {self.mu!r}); leave it False otherwise")
        Choice(PENALTIES).check("penalty", self.penalty)
        if self.penalty == "cir" and (self.eta == 0 or self.mu != "batch" or self.relative):
            raise ParameterError(f"parameter 'penalty' = 'cir' needs eta > 0, mu = 'batch' and relative = False (got "
                                 f"eta = {self.eta!r}, mu = {self.mu!r}, relative = {self.relative!r})")
        if any(not isinstance(m, int) or m < 1 for m in self.lr_milestones):
            raise ParameterError(f"parameter 'lr_milestones' = {self.lr_milestones!r} must be positive integers")
        Number(0, 10**8, True).check("schedule_iterations", self.schedule_iterations)
        if self.schedule_iterations and (self.schedule != "cosine" or self.schedule_iterations < self.iterations):
            raise ParameterError(f"parameter 'schedule_iterations' = {self.schedule_iterations!r} sets a cosine "
                                 f"schedule's horizon beyond the run (a prefix of a longer run): it needs schedule = "
                                 f"'cosine' and a value >= iterations = {self.iterations} (got schedule = "
                                 f"{self.schedule!r}); 0 means the run's own length")
        Device().check("device", self.device)
        Choice(AUTOCAST).check("autocast", self.autocast)
        if not isinstance(self.channels_last, bool):
            raise ParameterError(f"parameter 'channels_last' = {self.channels_last!r} must be True or False")
        if self.channels_last and self.model == "mlp":
            raise ParameterError("parameter 'channels_last' = True needs an image network (model = 'mlp' has no "
                                 f"channels); valid models: {', '.join(a for a in ARCHS if a != 'mlp')}")
        check_view_settings(self)
        return self

    @property
    def k(self) -> int:
        return self.batch_k or LOSS_SPECS[self.loss].k

    @property
    def variant(self) -> str:
        """The paper's naming: none (no regulariser), l2reg (μ = 0), sec (μ = batch mean), or sec-ema / sec-fixed /
        sec-relative (the scale-free SEC, ``relative``), or cir (PML's CenterInvariantRegularizer, ``penalty``)."""
        if self.eta == 0:
            return "none"
        if self.mu == "zero":
            return "l2reg"
        if self.penalty == "cir":
            return "cir"
        if self.mu == "batch":
            return "sec-relative" if self.relative else "sec"
        return "sec-ema" if self.mu == "ema" else "sec-fixed"

    def to_dict(self) -> dict:
        """The fields as a JSON-ready dict (the store key hashes it).

        Rule: a field listed in :data:`OMITTED_AT_DEFAULT` (one added after runs were stored) is left out
        while it equals its default, so adding a field never changes the key of an existing config;
        :meth:`from_dict` restores the default. A new field must be added to that list."""
        d = dataclasses.asdict(self)
        for name, default in OMITTED_AT_DEFAULT.items():
            if d[name] == default:
                del d[name]
        d["lr_milestones"] = list(self.lr_milestones)
        d["eval_ks"] = list(self.eval_ks)
        return d

    def canonical(self) -> dict:
        """The config as the store hashes it: numbers in their declared type (``eta=1`` and
        ``eta=1.0`` are one run; likewise a numeric ``mu``, ``iterations=1500.0``, ...), tuples as
        lists, ``num_threads`` only when it is not 1 (keys from before it existed stay valid), and never
        ``read_every`` (it moves the host's reads, not the numbers: a run's tables are the same at any value) or
        ``kmeans_workers`` (k-means' restarts at once, the same clustering). A config with
        ``pretrained`` set also holds its weights file's sha256 (:func:`weights_sha256`), so its key follows the
        file's content; one without (``pretrained=None``) keeps its key."""
        d = self.to_dict()
        for f in dataclasses.fields(self):
            if f.name not in d:                  # omitted at its default (see to_dict)
                continue
            v, kind = d[f.name], str(f.type)
            if isinstance(v, bool) or v is None:
                continue
            if kind.startswith("float") and isinstance(v, (int, float)):
                d[f.name] = float(v)
            elif kind.startswith("int") and isinstance(v, float) and v.is_integer():
                d[f.name] = int(v)
            elif f.name == "mu" and isinstance(v, (int, float)):
                d[f.name] = float(v)
        d["lr_milestones"] = [int(m) for m in d["lr_milestones"]]
        d["eval_ks"] = [int(k) for k in d["eval_ks"]]
        if d["num_threads"] in (1, None):
            del d["num_threads"]
        d.pop("read_every", None)               # when the host reads, not what is computed: the tables are the same
        d.pop("kmeans_workers", None)           # how many restarts run at once, not which: the same clustering
        if self.pretrained is not None:         # the weights' content, not only their name (None: no entry)
            d["pretrained_sha256"] = weights_sha256(self.pretrained)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "TrainConfig":
        d = dict(check_fields(cls, d))
        if d.get("num_threads", 1) is None:       # records written before threads were pinned
            d["num_threads"] = 1
        for key in ("lr_milestones", "eval_ks"):
            if key in d:
                d[key] = tuple(d[key])
        return cls(**d)

    def replace(self, **changes) -> "TrainConfig":
        return dataclasses.replace(self, **changes)


#: Fields left out of :meth:`TrainConfig.to_dict` while they equal their default (fields added later).
OMITTED_AT_DEFAULT: dict = {"views": 0, "augment": {}, "stats_every": 1, "relative": False, "schedule_iterations": 0,
                             "read_every": 1, "autocast": "none", "channels_last": False, "penalty": "sec",
                             "kmeans_workers": 1}
#: The values of :attr:`TrainConfig.autocast`.
AUTOCAST = ("none", "bf16")


@dataclass
class RunResult:
    """What a run produced. Tables are tidy pandas frames; ``metrics`` holds the final numbers."""
    config: TrainConfig
    status: str                      # "done" | "failed"
    metrics: dict
    steps: pd.DataFrame
    tracked: pd.DataFrame
    evals: pd.DataFrame
    test_norms: pd.DataFrame         # one row per test sample: label, norm, hit@1 (nearest neighbour same class)
    cosines: pd.DataFrame            # sampled test pairs: kind ('pos'|'neg'), cos
    grad_scatter: pd.DataFrame       # per-sample (step, norm, grad_norm) at a few steps
    error: str | None = None
    wall_s: float = 0.0
    key: str | None = None
    failed_step: int | None = None   # the step whose loss was not finite (failed runs)

    @property
    def failure(self) -> str | None:
        """'failed at step N: reason' for a failed run, None for a finished one."""
        if self.status == "done":
            return None
        step = self.failed_step if self.failed_step is not None else failed_step_of(self.steps)
        reason = NONFINITE.sub(r"non-finite loss, \2", self.error or "no reason recorded")
        return f"failed at step {step}: {reason}"


#: A non-finite loss's error message, as the training loop writes it ('non-finite loss at step N: ...'): its
#: step and its details. The one parser of that message (:attr:`RunResult.failure`, :func:`nonfinite_step`).
NONFINITE = re.compile(r"^non-finite loss at step (\d+): (.*)$")


def nonfinite_step(error) -> int | None:
    """The step at which a run's loss became non-finite, read from its ``error``; None for any other error."""
    m = NONFINITE.match(str(error)) if error is not None else None
    return int(m.group(1)) if m else None


def failed_step_of(steps: pd.DataFrame) -> int:
    """The step a run stopped at: one past the last step it recorded."""
    return int(steps["step"].max()) + 1 if len(steps) and "step" in steps else 1


#: Columns every table of a run has, even when empty (a run that failed at its first step). The
#: instrument columns of ``steps`` are there when ``cfg.instrument`` is set; evals also get R@k.
TABLE_COLUMNS = {
    "steps": ("step", "loss_metric", "loss_sec", "mu", "step_time"),
    "tracked": ("step", "sample", "norm"),
    "evals": ("step",),
    "test_norms": ("label", "norm", "hit@1"),
    "cosines": ("kind", "cos"),
    "grad_scatter": ("step", "norm", "grad_norm"),
}
INSTRUMENT_COLUMNS = ("norm_mean", "norm_var", "pos_cos", "neg_cos", "violations", "grad_slope", "grad_r2",
                      "grad_norm_cv", "dtheta_mean", "dtheta_std", "dtheta_cv")
_INT_COLUMNS = {"step", "sample", "label"}


def table_columns(table: str, cfg: "TrainConfig") -> tuple:
    """The columns ``table`` of a run of ``cfg`` always has."""
    cols = TABLE_COLUMNS[table]
    if table == "steps" and cfg.instrument:
        cols = cols[:-1] + INSTRUMENT_COLUMNS + cols[-1:]
    if table == "evals":
        cols = cols + tuple(f"R@{k}" for k in cfg.eval_ks)
    return cols


def with_schema(df: pd.DataFrame, table: str, cfg: "TrainConfig") -> pd.DataFrame:
    """``df`` with every column of :func:`table_columns` (missing ones added, empty or NaN)."""
    missing = [c for c in table_columns(table, cfg) if c not in df.columns]
    if not missing:
        return df
    df = df.copy()
    for c in missing:
        dtype = "int64" if (c in _INT_COLUMNS and len(df) == 0) else "object" if c == "kind" else "float64"
        df[c] = pd.Series(index=df.index, dtype=dtype)
    return df


def weights_path(path: str | None) -> str | None:
    """``cfg.pretrained`` as a file to open: an absolute path or one that exists from the working directory as it
    is; else, if it exists relative to the repository (a committed checkpoint such as
    ``data/reference/pretrained/glyph_smallcnn.pt``, named that way so that the store key does not depend on
    where the checkout lies), that file. Otherwise unchanged (build_model then names the missing file)."""
    if path is None or os.path.isabs(path) or os.path.isfile(path):
        return path
    in_repo = Path(__file__).resolve().parents[2] / path
    return str(in_repo) if in_repo.is_file() else path


#: Size and mtime of each weights file hashed by :func:`weights_sha256` in this process, with its sha256.
_WEIGHTS_SHA256: dict = {}


def weights_sha256(path: str) -> str:
    """The sha256 of the weights file ``path`` names (:func:`weights_path`), part of the store key of every run
    with ``pretrained`` set (:meth:`TrainConfig.canonical`): retraining a checkpoint in place gives its runs new
    keys, so a run fine-tuned from the old weights is never read as one of the new. Hashed once per process while
    the file's size and mtime stay the same. A file that is not there hashes to ``"missing"`` (such a run cannot
    train: :func:`~sec_lib.models.build_model` names the missing file)."""
    f = weights_path(path)
    try:
        st = os.stat(f)
    except (OSError, TypeError):
        return "missing"
    stamp = (os.path.realpath(f), st.st_size, st.st_mtime_ns)
    if stamp not in _WEIGHTS_SHA256:
        h = hashlib.sha256()
        with open(f, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
        _WEIGHTS_SHA256[stamp] = h.hexdigest()
    return _WEIGHTS_SHA256[stamp]


def run_key(cfg: TrainConfig) -> str:
    """A stable 16-hex-digit key from the config's canonical form (:meth:`TrainConfig.canonical`) and, under a kernel
    pin whose numbers differ from the default's (``SEC_KERNELS=portable``), the pin (:func:`sec_lib.kernels.key_fields`:
    left out under ``avx2`` and ``native``, so every key made before that pin existed is unchanged)."""
    blob = json.dumps({**cfg.canonical(), **kernels.key_fields()}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]
