"""The data page: the glyph benchmark's splits, fonts and rendering, and what each profile trains on."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..runs import experiments as ex
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


def profile_table() -> pd.DataFrame:
    """What each profile trains on: classes, image size, model, iterations (a range: the candidates its pilot
    chooses from), batch, seeds ("5/3": the main comparison's, then the other chapters'), from
    experiments.PROFILES."""
    rows = []
    for name, p in ex.PROFILES.items():
        b = p.base
        rows.append({"profile": name, "dataset": b.get("dataset", "glyphs"),
                     "train classes": b.get("train_classes") or "all", "test classes": b.get("test_classes") or "all",
                     "image size": b.get("image_size"), "model": b.get("model", "smallcnn"),
                     "embedding dim": b.get("embed_dim"),
                     "iterations": (f"{min(p.iteration_grid)}–{max(p.iteration_grid)}"
                                    if p.iteration_grid else b.get("iterations")),
                     "batch": b.get("batch_size"),
                     "seeds": (f"{len(p.main_seeds)}/{len(p.seeds)}"
                               if p.main_seeds and len(p.main_seeds) != len(p.seeds) else len(p.seeds)),
                     "device": b.get("device", "cpu")})
    return pd.DataFrame(rows)
