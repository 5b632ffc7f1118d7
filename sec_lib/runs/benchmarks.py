"""The real-benchmark books: the book's chapters trained on CUB-200-2011, Cars196, SOP or In-Shop with the
paper's settings, from folders and a weights file on your disk (nothing is downloaded).

    python -m sec_lib.book run --profile cub --data-root /data/dml --pretrained /weights/bn_inception-52deb4733.pth
    python -m sec_lib.book benchmarks [PROFILE]      (the settings with their sources, and the expected cost)

Each profile (``cub``, ``cars``, ``sop``, ``inshop``) is an :class:`~sec_lib.runs.experiments.Profile` built
in :mod:`sec_lib.runs.benchmark_settings` (re-exported here) from :data:`COMMON`, :data:`DATASETS` and :data:`RATES`,
every value with its source (:class:`Cited`):
the paper's protocol (Zhang, Li & Zhang, NeurIPS 2020, Sec. 5, as summarised in the project's reference notes),
the rebuttal's Table 3 (learning rates, decay and iterations per dataset and loss) and Table 4 (tuplet margin).
Where the authors' public code (github.com/Dyfine/SphericalEmbedding, ``config.py``, ``mytrain.sh``,
``learner.py``) does something else, ``Cited.code`` says what. Values neither source gives are marked
``OURS`` with the reason.

What a benchmark book trains is the glyph book's design on the paper's data: every main-table cell over three
seeds (the paper reports single runs), the η sweep, the μ, BN/WN and normalize-layer ablations, the η selection
on held-out *training* classes (``holdout_classes``, never the test classes), tuplet margin and the
cosine-softmax losses. Two things differ from the glyph profiles:

* the Adam learning rates are the paper's, fixed per loss (``fixed_optimizer``, ``loss_base``), so there is no
  Adam pilot; the optimizer chapter's SGD arm, which the paper never ran, has its own pilot on held-out classes;
* the chapters that do not apply to photographs are not trained (:data:`NOT_APPLICABLE`): the runner writes
  those pages as a note that says why.

The data root and the weights come from the command line (``--data-root``, ``--pretrained``, ``--backbone``)
or the environment (:data:`sec_lib.data.ROOT_ENV`, :data:`PRETRAINED_ENV`, :data:`BACKBONE_ENV`);
:func:`configure` sets the environment so that the training processes and the notebooks' kernels see the
same profile. The weights file's absolute path is part of every run's configuration (and so of its store
key): keep the file where it was when the runs trained. :func:`preflight` checks the folders, every listed
image and the weights before anything trains, and stops with the expected layout or the mismatching keys.

``cub-smoke`` (and :func:`smoke_profile` for any of the four) is the same profile at fixture size: 32-px
images, a batch of 12, four iterations, two seeds, a 4-wide ResNet-50 by default, on the CPU. The tests run
it on folders generated in the datasets' exact layouts (``tests/fixtures/benchmark_folders.py``).
"""
from __future__ import annotations

import argparse
import math
import os
from pathlib import Path

import pandas as pd

from ..data import LAYOUTS, ROOT_ENV, get_dataset
from ..data.benchmarks import DISPLAY_NAMES
from ..losses import LOSS_SPECS
from ..models import build_model
from ..params import Choice, ParameterError
from . import experiments as ex
from .benchmark_settings import (  # noqa: F401 - re-exported: the runner, the pages and the tests read them here
    PRETRAINED_ENV, BACKBONE_ENV, BACKBONES, DATASET_OF, PAPER_DATASET, PAPER, TABLE1, TABLE3, TABLE4, LOSSES, CODE,
    OURS, Cited, COMMON, DATASETS, RATES, DEFAULT_LOSS, NOT_APPLICABLE, SKIPPED_SWEEPS, benchmark_profile,
    smoke_profile, settings_table)
from .config import RunResult
from .store import run_key
from .tier import STAGED_TIERS

__all__ = ["Cited", "COMMON", "DATASETS", "RATES", "NOT_APPLICABLE", "PAPER_DATASET", "BACKBONES", "PRETRAINED_ENV",
           "BACKBONE_ENV", "benchmark_profile", "smoke_profile", "settings_table", "configure", "preflight",
           "page_note", "data_name", "paper_datasets", "paper_metrics", "plan", "estimate"]

# -------------------------------------------------------------------------------------------------- inputs

def configure(profile: str, data_root=None, pretrained=None, backbone=None) -> None:
    """Put the command line's ``--data-root``, ``--pretrained`` and ``--backbone`` into the environment (as
    absolute paths), where the profile, the training processes and the notebooks' kernels read them. A value
    left out keeps the environment's. Refused for a glyph profile (they read no folders or weights)."""
    given = {k: v for k, v in (("--data-root", data_root), ("--pretrained", pretrained), ("--backbone", backbone))
             if v is not None}
    if profile not in DATASET_OF:
        if given:
            raise ParameterError(f"{', '.join(given)} {'applies' if len(given) == 1 else 'apply'} only to the "
                                 f"real-benchmark profiles "
                                 f"({', '.join(DATASET_OF)}); profile {profile!r} trains on generated data")
        return
    if backbone is not None:
        os.environ[BACKBONE_ENV] = Choice(tuple(BACKBONES)).check("backbone", backbone)
    if data_root is not None:
        os.environ[ROOT_ENV] = str(Path(data_root).expanduser().resolve())
    if pretrained is not None:
        os.environ[PRETRAINED_ENV] = str(Path(pretrained).expanduser().resolve())


def _missing_images(ds, show: int = 5) -> list[str]:
    paths = [p for p in getattr(ds, "paths", []) if p]
    return [p for p in paths if not os.path.exists(p)][:show]


def _check_classes(p: ex.Profile, n_train: int) -> None:
    """Enough training classes for every loss's P x K batch, with and without the held-out classes."""
    need = max(p.base["batch_size"] // LOSS_SPECS[loss].k for loss in (*ex.MAIN_LOSSES, *ex.EXTRA_LOSSES))
    if n_train - p.holdout_classes < need:
        raise ParameterError(f"{DISPLAY_NAMES[p.base['dataset']]}: {n_train} training classes, {p.holdout_classes} "
                             f"of them held out for the η selection, leave {n_train - p.holdout_classes}; a batch of "
                             f"{p.base['batch_size']} with K = 2 needs {need}. Is the folder the whole dataset?")


def check_weights(p: ex.Profile) -> str:
    """The weights file fits the profile's backbone: build it with the file (the key check of
    :func:`sec_lib.models.load_backbone_weights`); a ParameterError names the missing, unexpected and
    wrongly shaped keys, and the backbone the file fits, if it fits the other one."""
    path, arch = p.base.get("pretrained"), p.base["model"]
    if not path:
        raise ParameterError(f"profile {p.name!r} fine-tunes an ImageNet-pretrained backbone ({arch}), as the paper "
                             "does: pass "
                             f"--pretrained PATH (or set ${PRETRAINED_ENV}) with its weights, a plain state_dict "
                             "file; nothing is downloaded. BN-Inception: Cadene's pretrainedmodels file "
                             "bn_inception-52deb4733.pth; ResNet-50: torchvision's resnet50-*.pth with --backbone "
                             "resnet50")
    kw = dict(head=p.base["head"], embed_dim=p.base["embed_dim"], in_channels=3, image_size=p.base["image_size"],
              width=p.base.get("width", 64))
    try:
        build_model(arch, pretrained=path, **kw)
    except FileNotFoundError as e:
        raise ParameterError(f"--pretrained: {e}") from None
    except (ValueError, RuntimeError, OSError) as e:     # a mismatch, or a file that is no state_dict
        hint = ""
        for other in BACKBONES:
            if other == arch:
                continue
            try:
                build_model(other, pretrained=path, **dict(kw, width=64))
                hint = f" The file fits the {other} backbone: pass --backbone {other}."
            except Exception:                            # noqa: BLE001  (only a hint)
                pass
        raise ParameterError(f"--pretrained {path} does not fit the {arch} backbone of profile {p.name!r}: {e}."
                             + hint) from None
    return path


def preflight(profile: "str | ex.Profile", weights: bool = True) -> dict:
    """Check everything a benchmark book reads before anything trains: the data root (``$SEC_DATA_ROOT``), the
    dataset's index files and every image they list, enough classes for the batches, and (``weights``) the
    weights file against the backbone. Raises ParameterError with the expected on-disk layout, the missing
    files or the mismatching keys; returns the split sizes."""
    p = ex.get_profile(profile) if isinstance(profile, str) else profile
    name = p.base["dataset"]
    root = os.environ.get(ROOT_ENV) or None
    if root is None:
        raise ParameterError(f"profile {p.name!r} reads {DISPLAY_NAMES[name]} from disk: pass --data-root DIR (or set "
                             f"${ROOT_ENV}); nothing is downloaded. Expected layout:\n{LAYOUTS[name]}")
    splits = ("train", "query", "gallery") if name == "inshop" else ("train", "test")
    sizes = {}
    kw = {k: v for k, v in p.base.get("data_kwargs", {}).items()}
    for split in splits:
        try:
            ds = get_dataset(name, split, root=root, image_size=p.base["image_size"], **kw)
        except (FileNotFoundError, ValueError) as e:
            raise ParameterError(str(e)) from None
        missing = _missing_images(ds)
        if missing:
            n = sum(not os.path.exists(q) for q in ds.paths)
            raise ParameterError(f"{DISPLAY_NAMES[name]}: {n} of the {len(ds)} images of the {split} split listed in "
                                 f"the index files are missing under {root}, e.g. {missing[0]}. Expected layout:\n"
                                 f"{LAYOUTS[name]}")
        sizes[split] = (len(ds), ds.num_classes)
    _check_classes(p, sizes["train"][1])
    if weights:
        check_weights(p)
    return sizes


def page_note(profile: str, page: str) -> str | None:
    """Why ``page`` (a notebook name) does not apply to ``profile``'s book, or None (it applies: every page of a
    glyph profile, and the benchmark pages not in :data:`NOT_APPLICABLE`)."""
    if profile not in DATASET_OF or page not in NOT_APPLICABLE:
        return None
    name = DATASET_OF[profile]
    return NOT_APPLICABLE[page].format(name=DISPLAY_NAMES[name], split=DATASETS[name]["split"].value)


def data_name(profile: str) -> str:
    """What a page calls the profile's data: "glyphs" for the glyph profiles and the committed glyph tiers a page may
    show (the staged decisive tier among them), else the dataset's name ("CUB-200-2011", ...)."""
    Choice((*ex.PROFILE_NAMES, *STAGED_TIERS)).check("profile", profile)
    return DISPLAY_NAMES[DATASET_OF[profile]] if profile in DATASET_OF else "glyphs"


def paper_datasets(profile: str) -> tuple:
    """The datasets of the paper's Table 1 a page sets beside the profile's numbers (names of
    :func:`sec_lib.reference.paper_table`): the book's own dataset for a benchmark profile, CUB and Cars (the
    two fine-grained ones, closest to what a CPU can run) for the glyph profiles."""
    return (PAPER_DATASET[profile],) if profile in PAPER_DATASET else ("CUB", "Cars")


def paper_metrics(profile: str) -> tuple:
    """The metric columns of the paper's Table 1 for the profile's dataset, in the table's order: NMI and F1
    where the paper reports them (not for In-Shop), then R@K at the paper's K (CUB's for the glyph profiles)."""
    d = DATASETS[DATASET_OF.get(profile, "cub")]
    return ("NMI", "F1") * d["clustering"].value + tuple(f"R@{k}" for k in d["eval_ks"].value)


# -------------------------------------------------------------------------------------------------- cost

class _PlanStore:
    """A stand-in store for :func:`plan`: every pilot and selection run 'exists', its score peaking inside
    each grid, so the chapters name the runs a real store would (the counts do not depend on the choices)."""
    root = "(plan)"

    def get(self, cfg, tables=()):
        e = pd.DataFrame()
        score = -abs(math.log(cfg.lr / 1e-3)) - abs(math.log((cfg.eta + 1e-6) / 0.5))
        return RunResult(cfg, "done", {"R@1": score}, e, e, e, e, e, e)


def plan(profile: "str | ex.Profile") -> pd.DataFrame:
    """The runs the profile's book trains, stage by stage (the pilot, the η selection, then each chapter's new
    runs, each run counted once): stage, runs, iterations (total), with their estimated hours (:func:`estimate`)."""
    p = ex.get_profile(profile) if isinstance(profile, str) else profile
    store, seen, rows = _PlanStore(), set(), []

    def stage(what, configs):
        new = [c for c in {run_key(c): c for c in configs}.values() if run_key(c) not in seen]
        seen.update(run_key(c) for c in new)
        if new:
            rows.append({"stage": what, "runs": len(new), "iterations": sum(c.iterations for c in new),
                         "hours": sum(estimate(c) for c in new)})

    stage("lr pilot (SGD, held-out classes)", ex.lr_pilot(p))
    stage("η selection (held-out classes)", ex.sweep_configs("selection", p, store))
    for ch in ex.profile_sweeps(p):
        stage(ch, ex.sweep_configs(ch, p, store))
    return pd.DataFrame(rows, columns=["stage", "runs", "iterations", "hours"])


#: Train / test images per dataset (the standard splits; In-Shop's test = its 14,218 queries + 12,612 gallery
#: images), and the images of the held-out classes a selection run evaluates on (about holdout_classes x the mean
#: images per training class).
IMAGES = {"cub": (5864, 5924), "cars": (8054, 8131), "sop": (59551, 60502), "inshop": (25882, 26830)}
#: Seconds of one CPU core to read one image and make a 227-px crop (PIL decode of a 500 x 375 JPEG, random
#: resized crop, tensor, normalise): 6.15 ms, measured on this project's 2-core AMD EPYC machine (PIL 13). The
#: training loop reads a batch's images in its own process, one after the other, so this bounds a step.
LOAD_S = 0.0062
#: Forward multiply-adds per 227-px image, counted over the convolutions of our modules: BN-Inception 2.05 G,
#: ResNet-50 4.63 G. A training image costs about 3 forwards; at an assumed 25 TFLOP/s sustained on an
#: A100/H100 (TF32; an assumption, not a measurement) that is 0.5 ms (BN-Inception) or 1.1 ms (ResNet-50).
GPU_S_TRAIN = {"bninception": 3 * 2 * 2.05e9 / 25e12, "resnet50": 3 * 2 * 4.63e9 / 25e12}
#: Final k-means (NMI, F1) in hours: seconds for CUB / Cars, tens of minutes for SOP's 11,316 clusters on one core.
KMEANS_H = {"cub": 0.01, "cars": 0.01, "sop": 0.5, "inshop": 0.0}


def estimate(cfg) -> float:
    """Estimated hours of one benchmark run on one GPU with one CPU core reading its images (0 for the CPU toy
    runs): the steps (reading ``batch_size`` images each, and the GPU's share), the evaluations (reading and
    embedding the test images, every ``eval_every`` iterations and at the end), the tracked samples, the
    final embedding of 2,000 training images and k-means. The basis is in :data:`LOAD_S`, :data:`GPU_S_TRAIN`,
    :data:`IMAGES` and :data:`KMEANS_H`."""
    if cfg.dataset not in IMAGES:
        return 0.0
    gpu = GPU_S_TRAIN.get(cfg.model, GPU_S_TRAIN["resnet50"])
    n_train, n_test = IMAGES[cfg.dataset]
    if cfg.holdout_classes:                       # evaluated on the held-out training classes
        per_class = n_train / {"cub": 100, "cars": 98, "sop": 11318, "inshop": 3997}[cfg.dataset]
        n_test = int(cfg.holdout_classes * per_class)
    per_image_eval = LOAD_S + gpu / 3
    steps = cfg.iterations * cfg.batch_size * (LOAD_S + gpu)
    evals = ((cfg.iterations // cfg.eval_every if cfg.eval_every else 0) + 1) * n_test * per_image_eval
    tracked = (cfg.iterations // cfg.track_every + 1) * cfg.track_samples * per_image_eval if cfg.track_samples else 0
    finish = 2000 * per_image_eval
    kmeans = KMEANS_H[cfg.dataset] * 3600 if cfg.eval_clustering and not cfg.holdout_classes else 0
    return (steps + evals + tracked + finish + kmeans) / 3600


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sec_lib.book benchmarks", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("profiles", nargs="*", default=list(DATASETS), help=f"some of {', '.join(DATASETS)} (default: all)")
    args = ap.parse_args(argv)
    for name in args.profiles:
        Choice(tuple(DATASETS)).check("profile", name)
    pd.set_option("display.width", 200)
    pd.set_option("display.max_colwidth", 90)
    for name in args.profiles:
        print(f"\n== {name}: {DISPLAY_NAMES[name]} ==")
        print(settings_table(name).to_string(index=False))
        pl = plan(name)
        print(pl.to_string(index=False, formatters={"hours": "{:.0f}".format}))
        print(f"total: {pl['runs'].sum()} runs, about {pl['hours'].sum():.0f} run-hours (one run per GPU at a time)")
    return 0
