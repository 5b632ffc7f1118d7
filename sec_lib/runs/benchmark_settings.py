"""The real-benchmark profiles' settings, each value with its source: the books of CUB-200-2011, Cars196, SOP and
In-Shop (:func:`benchmark_profile`, and :func:`smoke_profile` at fixture size), built from :data:`COMMON`,
:data:`DATASETS` and :data:`RATES` (:class:`Cited`): the paper's protocol (Zhang, Li & Zhang, NeurIPS 2020, Sec. 5,
as summarised in the project's reference notes), the rebuttal's Table 3 (learning rates, decay and iterations per
dataset and loss) and Table 4 (tuplet margin). Where the authors' public code (github.com/Dyfine/SphericalEmbedding,
``config.py``, ``mytrain.sh``, ``learner.py``) does something else, ``Cited.code`` says what. Values neither source
gives are marked ``OURS`` with the reason.

    python -m sec_lib.book benchmarks [PROFILE]      (these settings with their sources, and the expected cost)

:mod:`sec_lib.runs.benchmarks` reads the folders and the weights (and re-exports every name here); this module only
names settings, so that :func:`sec_lib.runs.experiments.get_profile` can build the profiles without importing the
runner's side of the benchmarks.
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ..losses import LOSS_NAMES, LOSS_SPECS
from ..params import Choice
from .profiles import SWEEP_NAMES, PROFILES, SSL_LOSSES, MAIN_LOSSES, Profile

PRETRAINED_ENV = "SEC_PRETRAINED"
BACKBONE_ENV = "SEC_BACKBONE"
#: Backbones a benchmark profile trains, with the input convention of their public ImageNet weights
#: (:data:`sec_lib.data.benchmarks.CONVENTIONS`).
BACKBONES = {"bninception": "bninception", "resnet50": "imagenet"}
#: Profile -> the dataset it reads; the four books and the fixture-size cub book.
DATASET_OF = {"cub": "cub", "cars": "cars", "sop": "sop", "inshop": "inshop", "cub-smoke": "cub"}
#: Profile -> the dataset's name in the paper's Table 1 (:func:`sec_lib.reference.paper_table`).
PAPER_DATASET = {"cub": "CUB", "cars": "Cars", "sop": "SOP", "inshop": "InShop", "cub-smoke": "CUB"}

# Where the values come from.
PAPER = "paper, Sec. 5 (implementation details)"
TABLE1 = "paper, Table 1 (its columns)"
TABLE3 = "rebuttal, Table 3"
TABLE4 = "rebuttal, Table 4 (tuplet margin loss)"
LOSSES = "paper, Sec. 5 / the losses' papers (K instances per class)"
CODE = "authors' code (Dyfine/SphericalEmbedding)"
OURS = "ours (neither the paper nor the rebuttal gives it)"


@dataclass(frozen=True)
class Cited:
    """A setting with its source; ``code``: what the authors' public code does instead ('' where it agrees or
    has no such setting)."""
    value: object
    source: str
    code: str = ""


#: Settings shared by the four datasets (TrainConfig fields, and ``convention`` / ``crop_scale`` of the loader).
COMMON = {
    "model": Cited("bninception", PAPER + ": ImageNet-pretrained BN-Inception",
                   "the same network (models/bninception.py, Cadene's module names)"),
    "freeze_bn": Cited(True, PAPER + ": frozen BN"),
    "head": Cited("paper", PAPER + ": pool -> BN(1024) -> FC(512)",
                  "the MS baseline without SEC drops the head's BN (the paper's notes: this confounds that "
                  "comparison); here every variant has the same head"),
    "embed_dim": Cited(512, PAPER + ": 512-d embedding"),
    "image_size": Cited(227, PAPER + ": 227-px crops",
                        "resizes the shorter side to 256 first; so does our test transform, while our training crop "
                        "is taken from the full image"),
    "batch_size": Cited(120, PAPER + ": batch 120 = P classes x K instances"),
    "optimizer": Cited("adam", PAPER + ": Adam with separate backbone and head learning rates"),
    "schedule": Cited("step", TABLE3 + ": step decay at the listed iterations"),
    "crop_scale": Cited((0.16, 1.0), CODE + ", config.py: RandomResizedCrop(scale=[0.16, 1], size=227); the paper "
                                            "does not give it"),
    "convention": Cited("bninception", "the weights' own input convention (Cadene's pretrainedmodels: BGR in "
                                       "[0, 255] minus the mean (104, 117, 128))",
                        "subtracts (104, 117, 123): 123 for red where the weights' publisher uses 128"),
}

#: Per-dataset settings.
DATASETS = {
    "cub": {
        "iterations": Cited(8000, TABLE3 + "; " + PAPER + ": 8k iterations on CUB and Cars"),
        "weight_decay": Cited(2.5e-3, CODE + ", config.py: weight_decay = 0.5 * 5e-3 (not in the paper or the "
                                             "rebuttal)", "applies it to the non-BN parameters only; here Adam's "
                                                          "weight decay applies to every trained parameter"),
        "eval_ks": Cited((1, 2, 4, 8), PAPER + ": R@1, 2, 4, 8 on CUB and Cars"),
        "clustering": Cited(True, TABLE1 + ": NMI and F1"),
        "split": Cited("classes 1-100 train, 101-200 test", PAPER + ": zero-shot split, 100/100"),
        "holdout_classes": Cited(20, OURS + ": the η selection's held-out training classes (the paper has no "
                                            "validation split)"),
        "eval_every": Cited(1000, OURS, "evaluates on the test classes every 100 iterations"),
    },
    "cars": {
        "iterations": Cited(8000, TABLE3 + "; " + PAPER + ": 8k iterations on CUB and Cars"),
        "weight_decay": Cited(2.5e-3, CODE + ", config.py: weight_decay = 0.5 * 5e-3 (not in the paper or the "
                                             "rebuttal)", "applies it to the non-BN parameters only"),
        "eval_ks": Cited((1, 2, 4, 8), PAPER + ": R@1, 2, 4, 8 on CUB and Cars"),
        "clustering": Cited(True, TABLE1 + ": NMI and F1"),
        "split": Cited("classes 1-98 train, 99-196 test", PAPER + ": zero-shot split, 98/98"),
        "holdout_classes": Cited(20, OURS + ": the η selection's held-out training classes"),
        "eval_every": Cited(1000, OURS, "evaluates every 100 iterations"),
    },
    "sop": {
        "iterations": Cited(12000, TABLE3 + "; " + PAPER + ": 12k iterations on SOP and In-Shop"),
        "weight_decay": Cited(1e-5, CODE + ", config.py: weight_decay = 1e-5 (not in the paper or the rebuttal)",
                              "applies it to the non-BN parameters only"),
        "eval_ks": Cited((1, 10, 100, 1000), PAPER + ": R@1, 10, 100, 1000 on SOP"),
        "clustering": Cited(True, TABLE1 + ": NMI and F1 (k-means with k = 11,316 test classes, one restart here)",
                            "learner.py reports NMI = F1 = 0 for SOP"),
        "split": Cited("Ebay_train.txt / Ebay_test.txt (11,318 / 11,316 products)", PAPER + ": official split"),
        "holdout_classes": Cited(1000, OURS + ": the η selection's held-out training classes"),
        "eval_every": Cited(3000, OURS, "evaluates every 500 iterations"),
    },
    "inshop": {
        "iterations": Cited(12000, TABLE3 + "; " + PAPER + ": 12k iterations on SOP and In-Shop"),
        "weight_decay": Cited(1e-5, CODE + ", config.py: weight_decay = 1e-5 (not in the paper or the rebuttal)",
                              "applies it to the non-BN parameters only"),
        "eval_ks": Cited((1, 10, 20, 30, 40, 50), PAPER + ": R@1, 10, 20, 30, 40, 50 on In-Shop, query vs gallery"),
        "clustering": Cited(False, TABLE1 + ": no NMI or F1 for In-Shop"),
        "split": Cited("list_eval_partition.txt: train / query / gallery", PAPER + ": official split"),
        "holdout_classes": Cited(400, OURS + ": the η selection's held-out training items"),
        "eval_every": Cited(2000, OURS, "evaluates every 200 iterations"),
    },
}

#: Adam's rates per (dataset, loss): (backbone lr, head lr, decay factor, decay iterations), with the source.
#: Our copy of Table 3 (``rebuttal_hyperparameters.md``) gives each pair as "backbone / head". The authors'
#: ``mytrain.sh`` trains CUB triplet with ``--lr 0.5e-5 --lr_p 0.25e-5``, where ``lr`` is the *head's* rate
#: and ``lr_p`` the backbone's (learner.py), i.e. the same two numbers in the other order; their In-Shop
#: defaults (head 5e-4, backbone 1e-4) read Table 3's SOP/In-Shop pair the same way. We follow the table as
#: recorded (backbone first) and say so in ``code``; the MS row (5e-7 / 2.5e-5) only makes sense backbone first.
RATES = {
    ("cub", "triplet"): Cited((5e-6, 2.5e-6, 0.1, (5000,)), TABLE3 + ": CUB, T",
                              "mytrain.sh: head 5e-6, backbone 2.5e-6 (the pair in the other order)"),
    ("cub", "semihard"): Cited((5e-6, 2.5e-6, 0.1, (5000,)), TABLE3 + ": CUB, SHT",
                               "config.py's CUB default: head 1e-5, backbone 5e-6"),
    ("cub", "npair"): Cited((1e-5, 5e-6, 0.1, (5000,)), TABLE3 + ": CUB, NNP",
                            "config.py's CUB default: head 1e-5, backbone 5e-6 (the pair in the other order)"),
    ("cub", "ms"): Cited((5e-7, 2.5e-5, 0.1, (5000,)), TABLE3 + ": CUB, MS",
                         "config.py decays MS on CUB at 3,000 and 6,000 (and 9,000, after the run ends)"),
    ("cub", "tml"): Cited((4e-5, 2e-5, 0.1, (5000,)), TABLE4 + ": CUB"),
    ("cars", "triplet"): Cited((1e-5, 1e-5, 0.5, (4000, 6000)), TABLE3 + ": Cars, T"),
    ("cars", "semihard"): Cited((1e-5, 1e-5, 0.5, (4000, 6000)), TABLE3 + ": Cars, SHT"),
    ("cars", "npair"): Cited((1e-5, 1e-5, 0.5, (4000, 6000)), TABLE3 + ": Cars, NNP"),
    ("cars", "ms"): Cited((4e-5, 4e-5, 0.1, (2000,)), TABLE3 + ": Cars, MS"),
    ("cars", "tml"): Cited((6e-5, 6e-5, 0.5, (4000, 6000)), TABLE4 + ": Cars"),
    **{("sop", loss): Cited((5e-4, 1e-4, 0.1, (6000,)), TABLE3 + ": SOP, " + short,
                            "config.py's SOP default: head 2.5e-4, backbone 5e-5")
       for loss, short in (("triplet", "T"), ("semihard", "SHT"), ("npair", "NNP"), ("ms", "MS"))},
    ("sop", "tml"): Cited((5e-4, 1e-4, 0.1, (6000,)), TABLE4 + ": SOP"),
    **{("inshop", loss): Cited((5e-4, 1e-4, 0.1, (6000,)), TABLE3 + ": In-Shop, " + short,
                               "config.py's In-Shop default: head 5e-4, backbone 1e-4 (the pair in the other order)")
       for loss, short in (("triplet", "T"), ("semihard", "SHT"), ("npair", "NNP"), ("ms", "MS"))},
    ("inshop", "tml"): Cited((5e-4, 1e-4, 0.1, (6000,)), OURS + ": Table 4 has no In-Shop row; the SOP/In-Shop row "
                                                                 "of Table 3"),
}
#: The row a loss without its own (dataset, loss) row trains with: the triplet row (the review's losses, CosFace,
#: ArcFace and the N-pair readings have no published rates).
DEFAULT_LOSS = "triplet"

#: Pages of the glyph book that a benchmark book does not train, and why; the runner writes each as a note.
NOT_APPLICABLE = {
    "pretrained": "this page fine-tunes the small glyph backbone pretrained here on glyph classes no split uses, "
                  "against the glyph book's from-scratch runs; the {name} book already fine-tunes an "
                  "ImageNet backbone in every run, the paper's own regime, so it has no from-scratch twin to "
                  "set beside it and trains none of this page's runs.",
    "scale": "this page's runs (relative SEC with its own held-out η, and the fixed-scale control) are planned for the "
             "glyph book only so far: the {name} book has no relative-SEC η grid "
             "(Profile.relative_eta_grid), so it trains none of them.",
    "data": "this page describes the generated glyph benchmark (its fonts, classes and images). The {name} "
            "book's data are the photographs under --data-root, read with the dataset's own split ({split}).",
    "fairness": "this page asks whether the embedding norms follow the fonts' attributes (family, design, weight, "
                "italic) of each test glyph. The {name} images have no such attributes, so there is nothing to "
                "compare.",
    "ssl": "SimCLR here draws its views with the glyph augmentations (affine, elastic, blur, noise on images in "
           "[0, 1]); the {name} images are normalised for a pretrained backbone, and the rebuttal's SimCLR "
           "experiment used CIFAR-10 with its own augmentations. The supervised-contrastive runs of this page are "
           "left out with it.",
}
#: The chapters of :data:`~sec_lib.runs.profiles.SWEEP_NAMES` a benchmark book does not train.
SKIPPED_SWEEPS = ("ssl",)


# -------------------------------------------------------------------------------------------------- profiles

def _env_backbone() -> str:
    name = os.environ.get(BACKBONE_ENV) or None
    if name is not None:
        Choice(tuple(BACKBONES)).check("backbone", name)
    return name


def _env_pretrained() -> str | None:
    path = os.environ.get(PRETRAINED_ENV) or None
    return str(Path(path).expanduser().resolve()) if path else None


def _rates(dataset: str, loss: str) -> dict:
    lr, lr_head, decay, milestones = RATES.get((dataset, loss), RATES[(dataset, DEFAULT_LOSS)]).value
    return dict(lr=lr, lr_head=lr_head, lr_decay=decay, lr_milestones=tuple(milestones))


def benchmark_profile(name: str) -> Profile:
    """The profile ``name`` (``cub``, ``cars``, ``sop``, ``inshop`` or ``cub-smoke``), with the backbone and the
    weights file of the environment (:func:`configure`)."""
    Choice(tuple(DATASET_OF)).check("profile", name)
    if name.endswith("-smoke"):
        return smoke_profile(DATASET_OF[name], name=name)
    d, c = DATASETS[name], COMMON
    backbone = _env_backbone() or c["model"].value
    base = dict(dataset=name, model=backbone, pretrained=_env_pretrained(), freeze_bn=c["freeze_bn"].value,
                head=c["head"].value, embed_dim=c["embed_dim"].value, image_size=c["image_size"].value,
                batch_size=c["batch_size"].value, optimizer=c["optimizer"].value, schedule=c["schedule"].value,
                weight_decay=d["weight_decay"].value, iterations=d["iterations"].value,
                eval_every=d["eval_every"].value, eval_ks=d["eval_ks"].value, eval_clustering="final",
                kmeans_n_init=1 if name == "sop" else 10,
                data_kwargs={"convention": BACKBONES[backbone], "crop_scale": c["crop_scale"].value},
                track_every=200, track_samples=64, dtheta_every=50, stats_every=10, device="cuda",
                # the schedule's shape for runs under another optimizer (the SGD arm): the triplet row's decay
                **{k: v for k, v in _rates(name, DEFAULT_LOSS).items() if k in ("lr_decay", "lr_milestones")})
    return Profile(
        name=name, base=base, seeds=(0, 1, 2), fixed_optimizer="adam",
        # Adam's rates, per loss: its own (dataset, loss) row of RATES, else the triplet row
        loss_base={loss: _rates(name, loss) for loss in LOSS_NAMES},
        # the η grid holds the paper's weights (ETA_SEC: 1.0, and 0.5 for semihard) and one smaller;
        # the μ = 0 weights are the rebuttal's Table 2 grid without 0.1 (which lost 4 points of R@1 there)
        eta_grid=(0.1, 0.5, 1.0), review_eta_grid=(0.1, 0.5, 1.0), l2_etas=(0.01, 0.005, 0.001),
        ema_momenta=(0.1,), fixed_radii=(2.0, 8.0),
        # SGD was never run by the paper: the optimizer chapter's SGD arm chooses its rate on held-out classes
        lr_pilot={"sgd": (3e-4, 1e-3, 3e-3, 1e-2)}, holdout_classes=d["holdout_classes"].value, jobs=4,
        toy=dict(PROFILES["cpu"].toy), toy_etas=PROFILES["cpu"].toy_etas, toy_seeds=(0,),
        sweeps=tuple(ch for ch in SWEEP_NAMES if ch not in SKIPPED_SWEEPS),
        excluded_losses=SSL_LOSSES)


def smoke_profile(dataset: str = "cub", name: str | None = None) -> Profile:
    """The profile of ``dataset`` at fixture size, on the CPU: what the tests train on generated folders. The
    same chapters, losses, rates (scaled to four iterations) and held-out selection as the real profile; 32-px
    images, a batch of 12, a 4-wide ResNet-50 unless ``$SEC_BACKBONE`` names another, R@K for K <= 4."""
    Choice(tuple(DATASETS)).check("dataset", dataset)
    real = benchmark_profile(dataset)
    backbone = _env_backbone() or "resnet50"
    base = dict(real.base, model=backbone, width=4, image_size=32, batch_size=12, iterations=4, eval_every=2,
                eval_ks=tuple(k for k in real.base["eval_ks"] if k <= 4), kmeans_n_init=1, lr_milestones=(3,),
                track_every=2, track_samples=8, dtheta_every=2, stats_every=1, device="cpu",
                data_kwargs=dict(real.base["data_kwargs"], convention=BACKBONES[backbone]))
    loss_base = {loss: dict(r, lr_milestones=(3,)) for loss, r in real.loss_base.items()}
    return dataclasses.replace(real, name=name or f"{dataset}-smoke", base=base, loss_base=loss_base, seeds=(0, 1),
                               eta_grid=(0.5, 1.0), review_eta_grid=(0.5, 1.0), l2_etas=(0.005,),
                               fixed_radii=(4.0,), lr_pilot={"sgd": (0.05,)}, holdout_classes=2, jobs=2,
                               check_grid_edges=False, toy=dict(PROFILES["smoke"].toy),
                               toy_etas=PROFILES["smoke"].toy_etas)


def settings_table(dataset: str) -> pd.DataFrame:
    """Every setting of ``dataset``'s profile with its source and where the authors' code differs."""
    Choice(tuple(DATASETS)).check("dataset", dataset)
    rows = [{"setting": k, "value": v.value, "source": v.source, "authors' code": v.code}
            for k, v in {**COMMON, **DATASETS[dataset]}.items()]
    for (ds, loss), v in RATES.items():
        if ds == dataset:
            lr, head, decay, ms = v.value
            rows.append({"setting": f"{loss}: lr backbone / head, decay @ iterations",
                         "value": f"{lr:g} / {head:g}, x{decay:g} @ {', '.join(map(str, ms))}",
                         "source": v.source, "authors' code": v.code})
    rows.append({"setting": "K instances per class", "value": ", ".join(
        f"{loss} {LOSS_SPECS[loss].k}" for loss in (*MAIN_LOSSES, "tml")), "source": LOSSES, "authors' code": ""})
    return pd.DataFrame(rows)
