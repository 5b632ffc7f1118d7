"""Pretrained backbone weights: the input convention of the public ImageNet files, and their loader."""
from __future__ import annotations

import os

import torch
import torch.nn as nn

#: Input convention of the public ImageNet weights of the two pretrained backbones (for the data pipeline).
PRETRAINED_INPUT = {
    # torchvision: RGB in [0, 1], then per-channel standardization.
    "resnet50": {"space": "RGB", "range": (0.0, 1.0), "mean": (0.485, 0.456, 0.406), "std": (0.229, 0.224, 0.225)},
    # Cadene pretrainedmodels bninception (ported from Caffe): BGR in [0, 255], mean subtracted, std 1.
    "bninception": {"space": "BGR", "range": (0.0, 255.0), "mean": (104.0, 117.0, 128.0), "std": (1.0, 1.0, 1.0)},
}

#: Keys of the classifier layer of the pretrained ImageNet files; they are dropped when loading a backbone.
CLASSIFIER_PREFIXES = {"resnet50": ("fc.",), "bninception": ("last_linear.",)}


def load_backbone_weights(backbone: nn.Module, path, ignore_prefixes: tuple[str, ...] = ()) -> None:
    """Load a ``state_dict`` file into ``backbone`` with ``torch.load(path, map_location="cpu", weights_only=True)``.

    A leading ``"module."`` (DataParallel) or ``"backbone."`` prefix is stripped, keys starting with one of
    ``ignore_prefixes`` (the ImageNet classifier) are dropped, and BatchNorm ``num_batches_tracked`` buffers may be
    absent (files saved by PyTorch < 0.4). Anything else that does not fit raises ValueError listing the missing,
    unexpected and wrongly shaped keys.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"pretrained={str(path)!r}: no such file")
    state = torch.load(path, map_location="cpu", weights_only=True)
    if isinstance(state, dict) and "state_dict" in state and isinstance(state["state_dict"], dict):
        state = state["state_dict"]
    if not isinstance(state, dict):
        raise ValueError(f"pretrained={str(path)!r} does not hold a state_dict (got {type(state).__name__})")
    cleaned = {}
    for k, v in state.items():
        for prefix in ("module.", "backbone."):
            if k.startswith(prefix):
                k = k[len(prefix):]
        if any(k.startswith(p) for p in ignore_prefixes):
            continue
        cleaned[k] = v
    own = backbone.state_dict()
    missing = sorted(k for k in own if k not in cleaned and not k.endswith("num_batches_tracked"))
    unexpected = sorted(k for k in cleaned if k not in own)
    wrong_shape = sorted(
        f"{k}: file {tuple(cleaned[k].shape)} vs model {tuple(own[k].shape)}"
        for k in cleaned
        if k in own and tuple(cleaned[k].shape) != tuple(own[k].shape)
    )
    if missing or unexpected or wrong_shape:
        raise ValueError(
            f"pretrained={str(path)!r} does not fit the {type(backbone).__name__} backbone: "
            f"missing keys {missing[:20]}{' ...' if len(missing) > 20 else ''} ({len(missing)}), "
            f"unexpected keys {unexpected[:20]}{' ...' if len(unexpected) > 20 else ''} ({len(unexpected)}), "
            f"shape mismatches {wrong_shape[:20]} ({len(wrong_shape)})"
        )
    backbone.load_state_dict(cleaned, strict=False)
