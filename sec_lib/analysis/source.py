"""Where a page's runs come from: one :class:`RunSource` per tier a page shows, opened where the page loads its
evidence, so that the page never asks what kind of store is behind it.

A committed staged tier (the decisive tier) holds each held-out selection as stage folders, every grid point
trained with several seeds; any other store (the quick store, a flat committed tier, a store given by ``root``)
holds the profile's selection runs, one pilot seed a point. The source says which with
:attr:`RunSource.seeded_selection`, and reads a seeded selection with :meth:`RunSource.selection`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import pandas as pd

from ..runs.tier import StagedTier, store_for


@dataclass(frozen=True)
class RunSource:
    """The runs of tier ``name``: ``store`` (opened once, by :func:`run_source`) and how its held-out selections
    were trained (``seeded_selection``: as stage folders of several seeds a grid point)."""
    name: str
    store: object
    seeded_selection: bool

    def stage_runs(self, stages: Sequence[str]):
        """``(config, row)`` for every run of the stage folders ``stages`` (its ``runs.parquet`` row), in the
        store's stage order; none for a store without stages."""
        for part in getattr(self.store, "parts", ()):
            if part.root.name in stages:
                for r in part.runs.to_dict("records"):
                    yield part.config(r["key"]), r

    def selection(self, stages: Sequence[str], setting) -> pd.DataFrame:
        """A seeded held-out selection as committed: the runs of the stage folders ``stages`` grouped by
        ``setting(config)`` (a tuple of column name -> value, or None to leave a run out), one row per setting with
        the mean held-out R@1 over its finished runs (``held-out R@1``), its ``seeds`` and its ``status`` ('done',
        or how many of them failed)."""
        rows = []
        for cfg, r in self.stage_runs(stages):
            key = setting(cfg)
            if key is not None:
                rows.append({**dict(key), "_R@1": r["R@1"] if r["status"] == "done" else math.nan,
                             "_failed": r["status"] != "done"})
        if not rows:
            return pd.DataFrame()
        df = pd.DataFrame(rows)
        cols = [c for c in df.columns if not c.startswith("_")]
        g = df.groupby(cols, sort=True)
        out = g.agg(**{"held-out R@1": ("_R@1", "mean"), "seeds": ("_R@1", "size"), "failed": ("_failed", "sum")})
        out["status"] = ["done" if f == 0 else f"{int(f)} of {n} failed" for f, n in zip(out["failed"], out["seeds"])]
        return out.reset_index()


def run_source(profile: str, root=None) -> RunSource:
    """The runs a page of ``profile`` reads (:func:`sec_lib.runs.tier.store_for`: the store at ``root`` when given,
    else the committed tier of a long profile, else the quick store): the one place the kind of store is asked."""
    store = store_for(profile, root)
    return RunSource(profile, store, isinstance(store, StagedTier))
