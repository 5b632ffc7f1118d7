"""A run's tables hashed so that a retrained run and its committed rows hash alike exactly when their values are the
same bits: what ``python -m sec_lib.book portability`` and ``rerun`` compare (:mod:`sec_lib.runs.tier` re-exports it).
"""
from __future__ import annotations

import hashlib
import json

import numpy as np
import pandas as pd


#: The tables a retrained run is compared on, bit for bit, with its committed copy (:func:`table_hash`).
HASHED_TABLES = ("steps", "evals")
#: Columns no hash reads: the clock (a run's timing differs on every machine and every run) and the run's key.
UNHASHED_COLUMNS = ("step_time", "wall_s", "key")


def _hashed_columns(df: pd.DataFrame) -> list:
    """The columns :func:`table_hash` reads, in name order."""
    return sorted((c for c in df.columns if c not in UNHASHED_COLUMNS and df[c].notna().any()), key=str)


def _column_bytes(v: pd.Series) -> bytes:
    """A column's values as :func:`table_hash` reads them: numbers as float64 with one NaN, anything else as text."""
    if pd.api.types.is_bool_dtype(v) or pd.api.types.is_numeric_dtype(v):
        a = np.array(v.to_numpy(dtype=np.float64, na_value=np.nan), dtype=np.float64, copy=True)
        a[np.isnan(a)] = np.nan
        return a.tobytes()
    return json.dumps([None if pd.isna(x) else str(x) for x in v]).encode()


def table_hash(df: pd.DataFrame) -> str:
    """sha256 (first 16 hex digits) of one run's table as a committed tier keeps it, so that a retrained run's
    table (compacted as :func:`export` compacts it: :func:`compacted`) and its committed rows hash alike exactly
    when their values are the same bits. Read: the columns in name order, without :data:`UNHASHED_COLUMNS` and
    without a column that is empty for this run (a tier's table holds the union of its runs' columns); each
    number as float64 (a tier's concatenated table stores an integer column that some run lacks as float), every
    NaN as one NaN (the parquet file stores a NaN as a null, whatever its sign bit was); any other column as text."""
    df = df.reset_index(drop=True)
    cols = _hashed_columns(df)
    h = hashlib.sha256(json.dumps([[str(c) for c in cols], len(df)]).encode())
    for c in cols:
        h.update(_column_bytes(df[c]))
    return h.hexdigest()[:16]


def column_hashes(df: pd.DataFrame) -> dict[str, str]:
    """``{column: hash}`` of the columns :func:`table_hash` reads, each hashed alone (with the row count): where two
    tables' hashes differ, the columns that differ."""
    df = df.reset_index(drop=True)
    return {str(c): hashlib.sha256(str(len(df)).encode() + _column_bytes(df[c])).hexdigest()[:16]
            for c in _hashed_columns(df)}
