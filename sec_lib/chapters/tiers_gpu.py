"""The tiers page's section on the gpu tier's main comparison: each main loss with and without SEC at its
held-out η, trained on a GPU, with the verdict the compare page would give it.

The runs are :data:`sec_lib.runs.gpu_tier.MAIN_STAGE`'s, named by :func:`sec_lib.runs.gpu_tier.stages` from the
tier's own held-out selection. The statistics are the compare page's (:func:`sec_lib.chapters.gains.sec_gain`:
paired on the seed, one Holm family per role of metric, R@1 the primary metric). The section shows a verdict only
when every pair of the comparison is committed: a table of part of the seeds would be a look at the data before the
registered sample is in.
"""
from __future__ import annotations

import pandas as pd

from ..reference import RETRIEVAL_METRICS
from ..runs import experiments as ex
from ..runs import gpu_tier
from ..runs.store import load_runs
from ..runs.tier import store_for
from ..analysis.tiers import note_of
from .gain_words import overall_sentence
from .gains import sec_gain, sec_gain_display


def main_comparison(root=None) -> tuple[pd.DataFrame, str]:
    """(the display table, a sentence) of the gpu tier's main comparison, read from the committed tier (or the store
    at ``root``). The table is empty, and the sentence says why, while the comparison cannot be named yet or any of
    its runs is missing."""
    p = ex.get_profile("gpu")
    store = store_for("gpu", root)
    try:
        cfgs = dict(gpu_tier.stages(p, store))[gpu_tier.MAIN_STAGE]()
    except gpu_tier.WAITING as e:
        return pd.DataFrame(), (f"The gpu tier's main comparison cannot be named yet: its held-out selection is not "
                                f"complete ({note_of(e)}).")
    etas = ", ".join(f"{c.loss} {c.eta:g}" for c in cfgs if c.variant == "sec" and c.seed == p.main_seeds[0])
    frames = load_runs(cfgs, tables=(), store=store, missing="skip")        # one read: the count and the runs
    runs = frames.runs
    if len(runs) < len(cfgs):
        return pd.DataFrame(), (
            f"The gpu tier's main comparison (the {len(ex.MAIN_LOSSES)} main losses × none and SEC at the held-out η "
            f"× {len(p.main_seeds)} seeds; η: {etas}) holds {len(runs)} of its {len(cfgs)} runs. Its verdicts are "
            f"shown here once every pair is committed (`data/reference/gpu/README.md` says how the rest train).")
    gains = sec_gain(frames, variants=("sec",), metrics=RETRIEVAL_METRICS)
    gpus = ", ".join(sorted(runs["device"].dropna().astype(str).unique())) if "device" in runs else "unknown"
    failed = int((runs["status"] != "done").sum())
    sentence = (f"The gpu tier's main comparison: {len(runs)} runs ({len(p.main_seeds)} seeds a loss and arm; η: "
                f"{etas}), trained on {gpus}" + (f", {failed} of them failed" if failed else "") + ". "
                + overall_sentence(gains))
    return sec_gain_display(gains), sentence
