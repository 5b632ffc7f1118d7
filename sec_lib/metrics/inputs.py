"""Argument checks shared by the metrics of :mod:`sec_lib.metrics`."""
from __future__ import annotations

import numpy as np
import torch


def to_float_tensor(x, name: str) -> torch.Tensor:
    if isinstance(x, torch.Tensor):
        t = x.detach()
    else:
        try:
            t = torch.as_tensor(np.asarray(x))
        except (TypeError, ValueError) as err:  # pragma: no cover - exotic inputs
            raise ValueError(f"{name} must be a 2-D float array or tensor, got {type(x).__name__}") from err
    if t.ndim != 2:
        raise ValueError(f"{name} must be 2-D (N x D), got shape {tuple(t.shape)}")
    if t.shape[0] == 0 or t.shape[1] == 0:
        raise ValueError(f"{name} must be non-empty (N >= 1 rows, D >= 1 columns), got shape {tuple(t.shape)}")
    if not (t.is_floating_point() or t.dtype in (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8)):
        raise ValueError(f"{name} must hold real numbers, got dtype {t.dtype}")
    t = t.to(device="cpu", dtype=torch.float32)
    if not torch.isfinite(t).all():
        raise ValueError(f"{name} contains NaN or inf; valid embeddings are finite")
    return t


def to_label_array(labels, name: str, n: int | None, embedding_name: str) -> np.ndarray:
    """1-D label array (numpy) of length n (unchecked when n is None)."""
    if isinstance(labels, torch.Tensor):
        arr = labels.detach().cpu().numpy()
    else:
        arr = np.asarray(labels)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D (N,), got shape {arr.shape}")
    if n is not None and arr.shape[0] != n:
        raise ValueError(f"{name} has length {arr.shape[0]} but {embedding_name} has {n} rows; they must match")
    return arr


def to_codes(labels, name: str, n: int, embedding_name: str) -> np.ndarray:
    """Labels of any hashable dtype -> np.int64 codes (order-preserving); length must be n."""
    arr = to_label_array(labels, name, n, embedding_name)
    _, codes = np.unique(arr, return_inverse=True)
    return codes.astype(np.int64).reshape(-1)


def check_ks(ks, n_candidates: int) -> tuple[int, ...]:
    if isinstance(ks, (int, np.integer)):
        ks = (int(ks),)
    try:
        ks = tuple(ks)
    except TypeError as err:
        raise ValueError(f"ks must be a sequence of integers >= 1, got {ks!r}") from err
    if len(ks) == 0:
        raise ValueError("ks must contain at least one k; valid values are integers 1 <= k < number of candidates")
    out = []
    for k in ks:
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
            raise ValueError(f"ks must hold integers, got {k!r}; valid values are 1 <= k < {n_candidates}")
        k = int(k)
        if k < 1 or k >= n_candidates:
            raise ValueError(
                f"k={k} is out of range: valid values are 1 <= k < number of candidates ({n_candidates})"
            )
        out.append(k)
    return tuple(out)


def check_chunk_size(chunk_size) -> int | None:
    if chunk_size is None:
        return None
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, (int, np.integer)) or chunk_size < 1:
        raise ValueError(f"chunk_size must be None (automatic) or an integer >= 1, got {chunk_size!r}")
    return int(chunk_size)


def check_device(device) -> torch.device:
    try:
        return torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise ValueError(f"device must be a torch device or string such as 'cpu' or 'cuda:0', got {device!r}") from err
