"""The data page: the glyph benchmark's splits, fonts and rendering, and what each profile trains on."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..figures.tables import fold_columns
from ..runs import decisive, tier
from ..runs import experiments as ex
from ..runs.train import TrainConfig
from . import profile_param

#: The notebook's parameters (checked by ``sec_lib.params.notebook_params``).
PARAMS = profile_param()


def data_summary(train_ds, test_ds) -> pd.DataFrame:
    """Class and instance counts of the two splits of a dataset (computed from the dataset objects)."""
    rows = []
    for name, ds in (("train", train_ds), ("test", test_ds)):
        counts = np.bincount(np.asarray(ds.labels), minlength=int(ds.num_classes))
        shape = tuple(ds.x.shape[1:]) if hasattr(ds, "x") else tuple(ds[0][0].shape)
        rows.append({"split": name, "classes": int(ds.num_classes), "samples": int(len(ds)),
                     "per_class_min": int(counts.min()), "per_class_max": int(counts.max()),
                     "sample_shape": " × ".join(map(str, shape))})
    return pd.DataFrame(rows)


def font_table(ds) -> pd.DataFrame:
    """Fonts of a glyph dataset with their versions (from the cache manifest) and how many images
    of the dataset each one drew."""
    manifest = getattr(ds, "manifest", None) or {}
    fonts = manifest.get("fonts")
    if not fonts:
        raise ValueError("the dataset has no manifest with a 'fonts' list (only the glyphs dataset has one)")
    df = pd.DataFrame(fonts)
    if hasattr(ds, "font_index"):
        counts = np.bincount(np.asarray(ds.font_index), minlength=len(df))
        df["images"] = counts[: len(df)]
    return df


def data_sentence(train_ds, test_ds, profile) -> str:
    """A computed summary of a dataset's split and of what ``profile`` (a Profile) uses of it."""
    shared = len(set(train_ds.class_names) & set(test_ds.class_names))
    b = profile.base
    tc, vc = b.get("train_classes"), b.get("test_classes")
    return (f"The benchmark has **{train_ds.num_classes} training classes** ({len(train_ds)} images) and "
            f"**{test_ds.num_classes} test classes** ({len(test_ds)} images); {shared} classes appear in both "
            f"splits. The `{profile.name}` profile trains on "
            f"{'all' if tc is None else f'the first {min(tc, train_ds.num_classes)}'} training classes and tests on "
            f"{'all' if vc is None else f'the first {min(vc, test_ds.num_classes)}'} test classes, at "
            f"{b.get('image_size')} × {b.get('image_size')} pixels.")


def render_info(ds) -> pd.DataFrame:
    """How a glyph dataset's cached images were made (setting, value), from its cache manifest."""
    m = getattr(ds, "manifest", None) or {}
    if not m:
        raise ValueError("the dataset has no cache manifest (only the glyphs dataset has one)")
    rows = [(k, m.get(k)) for k in ("format", "generator_version", "image_size", "instances_per_class", "seed",
                                    "num_train_classes", "num_test_classes", "num_images", "generation_seconds",
                                    "tensor_file", "sha256") if k in m]
    rows += [(f"{k} version", v) for k, v in (m.get("versions") or {}).items()]
    return pd.DataFrame([{"setting": k, "value": str(v)} for k, v in rows])


#: The profile ``make book`` trains (the Makefile's ``PROFILE``): the quick tier.
QUICK_PROFILE = "cpu"
#: What a profile trains where it is not a committed tier's: the test suite's book, the quick tier.
ROLES = {"smoke": "none: the test suite's book", QUICK_PROFILE: "quick tier (make book)"}


def built_profile(name: str) -> tuple[ex.Profile, str]:
    """The settings that profile ``name`` trains now, and the tier they make. A profile whose committed tier was
    retired trains the tier that replaced it (:data:`sec_lib.runs.tier.REPLACED_BY`: the ``reference`` profile's
    network and data make the decisive tier, whose schedule, length and seeds its committed plan fixes:
    :func:`sec_lib.runs.decisive.profile`); before that tier has a plan, the profile's own settings, and the tier
    named as not planned yet. A long profile (``gpu``) makes its own committed tier."""
    p = ex.PROFILES[name]
    if name in tier.REPLACED_BY:
        new = tier.REPLACED_BY[name]
        try:
            return ex.get_profile(new), f"{new} tier (data/reference/{new}/)"
        except KeyError:
            return p, f"{new} tier (not planned yet)"
    if name in tier.TIER_PROFILES:
        return p, f"{name} tier (data/reference/{name}/)"
    return p, ROLES.get(name, "")


def _iterations(p: ex.Profile):
    return f"{min(p.iteration_grid)}–{max(p.iteration_grid)}" if p.iteration_grid else p.base.get("iterations")


def profile_table() -> pd.DataFrame:
    """What each profile trains (:func:`built_profile`: the ``reference`` profile, the decisive tier's settings from
    its committed plan): the tier it makes, classes, image size, model, iterations (a range: the candidates its pilot
    chooses from) and learning-rate schedule, batch, seeds ("5/3": the main comparison's, then the other
    chapters'), from experiments.PROFILES."""
    rows = []
    for name in ex.PROFILES:
        p, made = built_profile(name)
        b = p.base
        rows.append({"profile": name, "tier": made, "dataset": b.get("dataset", "glyphs"),
                     "train classes": b.get("train_classes") or "all", "test classes": b.get("test_classes") or "all",
                     "image size": b.get("image_size"), "model": b.get("model", "smallcnn"),
                     "embedding dim": b.get("embed_dim"), "iterations": _iterations(p),
                     "schedule": b.get("schedule") or TrainConfig.schedule,
                     "batch": b.get("batch_size"),
                     "seeds": (f"{len(p.main_seeds)}/{len(p.seeds)}"
                               if p.main_seeds and len(p.main_seeds) != len(p.seeds) else len(p.seeds)),
                     "device": b.get("device", "cpu")})
    # the data set and device folded under the table, so that it fits the text column (the CSV keeps every column)
    return fold_columns(pd.DataFrame(rows), ["profile"], {"Data set and device per profile": ["dataset", "device"]})


def profile_sentence() -> str:
    """What each profile is for and which one the published book's verdicts come from, computed from the profiles
    and the decisive tier's committed plan."""
    names = list(ex.PROFILES)
    quick = ex.PROFILES[QUICK_PROFILE].base.get("iterations")
    parts = ["`smoke` only checks that every page executes" if "smoke" in names else "",
             f"`{QUICK_PROFILE}` is the quick tier, what `make book` trains in minutes on two cores ({quick:,} "
             "iterations a run, far from converged)",
             "`gpu` is the larger setting for a machine with a GPU" if "gpu" in names else ""]
    verdicts = ""
    for name, new in tier.REPLACED_BY.items():
        if name not in names:
            continue
        try:
            plan = decisive.read_plan() if new == decisive.TIER else None
        except KeyError:
            plan = None
        if plan is None:
            parts.append(f"`{name}` is the network and data of the {new} tier, which has no plan yet")
            continue
        p = ex.get_profile(new)
        seeds = (f"{plan.seeds} seeds" if len(p.seeds) == plan.seeds
                 else f"{plan.seeds} seeds for the main comparison's primary arms, {len(p.seeds)} for the rest")
        if p.sweep_seeds and len(p.sweep_seeds) != len(p.seeds):
            seeds += f" ({len(p.sweep_seeds)} a point of the η sweep)"
        parts.append(f"`{name}` is the network and data of the **{new} tier** (`make {new}` trains it), committed "
                     f"under `data/reference/{new}/`: a {plan.shape} learning-rate schedule over {plan.length:,} "
                     f"iterations, the schedule and length its schedule pilot chose on held-out training classes, and "
                     f"{seeds}. The profile keeps its name from the retired {name} tier it trained first, a different "
                     "set of runs")
        verdicts = (f" The published book (`make book`, profile `{QUICK_PROFILE}`) takes its verdicts from the {new} "
                    "tier: a page shows that tier's evidence wherever it holds the runs the page needs, with the quick "
                    f"tier beside it, and the quick tier alone where the {new} tier does not cover a page "
                    "([the tiers page](tiers.html) lists which page reads which tier).")
    parts = [x for x in parts if x]
    return (f"The book has **{len(names)} profiles**, one row each below. " + "; ".join(parts) + "." + verdicts)
