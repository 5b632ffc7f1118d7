"""The committed tiers as the pages name them: a tier's label (:func:`tier_label`), an error as a table cell
(:func:`note_of`), and where the decisive tier stands stage by stage (:func:`decisive_progress`), which the tiers
page shows and the pretrained page cites.
"""
from __future__ import annotations

import pandas as pd

from ..runs import decisive, mainstage, pilot, selection
from ..runs import experiments as ex
from ..runs import tier as tier_mod
from ..runs.store import run_key
from ..runs.tier import RETIRED_TIERS, TierStore, open_tier, tier_dir


#: What a table of the tiers page shows where a tier has no value (no run, or a stage the tier does not have):
#: never NaN or None (the page's caption says what it means).
MISSING = "—"


def note_of(e: Exception) -> str:
    """An exception's first clause as a table cell: quotes stripped, paths inside the repository made relative to it
    (a reader's checkout is not this one)."""
    return str(e).strip('"').split(";")[0].replace(f"{tier_mod.REPO}/", "")


def tier_label(name: str) -> str:
    """How the page names a committed tier: 'retired reference' for a retired one (:data:`~sec_lib.runs.tier.
    RETIRED_TIERS`), else its name."""
    return f"retired {name}" if name in RETIRED_TIERS else name


def decisive_progress(root=None) -> tuple[pd.DataFrame, str]:
    """The decisive tier stage by stage, in training order (:data:`sec_lib.runs.decisive.STAGES` after the pilot,
    the selection and the main comparison): what each stage is, how many runs its folder holds, how many it names
    where that can be known yet (a stage's runs depend on the choices made before it; :data:`MISSING` until then),
    and whether ``plan.json`` is written; and a computed sentence."""
    base = tier_dir(pilot.TIER, root)

    def held(stage: str) -> int:
        d = base / stage
        return len(TierStore(d).runs) if (d / "runs.parquet").exists() else 0

    try:
        plan = decisive.read_plan(root)
    except KeyError:
        plan = None
    first = selection.first_round(len(ex.MAIN_LOSSES))
    rows = [{"stage": "pilot", "what": "the schedule pilot (held-out classes)", "committed": held("pilot"),
             "named": len(pilot.configs(pairs=len(pilot.LENGTH_PAIRS)))},
            {"stage": "selection", "what": "η and L2 of the four main losses (held-out, 3 seeds a point)",
             "committed": held("selection"), "named": f"{first} (first round)"},
            {"stage": "main", "what": "the main comparison (test classes)", "committed": held("main"),
             "named": len(mainstage.configs(plan)) if plan else MISSING}]
    earlier = {run_key(c) for c in mainstage.configs(plan)} if plan else set()
    profile = decisive.profile(plan, decisive.read_choices(root)) if plan else None     # read once, not per stage
    for stage, what, (kind, *args) in decisive.STAGES:
        named = MISSING
        if plan is not None and kind == "train":
            try:
                cfgs = [c for c in ex.stage_configs(profile, args[0])
                        if run_key(c) not in earlier]
                earlier |= {run_key(c) for c in cfgs}
                named = len(cfgs)
            except KeyError:                 # a choice it needs is not made yet
                pass
        elif kind.startswith("select") and plan is not None:          # the grids' first round is known
            named = f"{decisive.first_round(stage, profile, plan)} (first round)"
        rows.append({"stage": stage, "what": what, "committed": held(stage), "named": named})
    df = pd.DataFrame(rows, columns=["stage", "what", "committed", "named"])
    total = int(df["committed"].sum())
    distinct = len(open_tier(base).runs) if total else 0       # a run two stages share is one run
    shared = (f" (the table's {total:,}: {total - distinct} of its rows repeat a run another stage folder holds too)"
              if total > distinct else "")
    text = (f"{distinct:,} runs of the decisive tier are committed{shared}. "
            + (f"The plan is written (`plan.json`): {plan.seeds} seeds for the primary arms, {plan.shape} at "
               f"{plan.length:,} iterations." if plan else
               "The plan (`plan.json`: the seed count, η and L2 weight of each main loss) is written when the "
               "held-out selection is final, before any run on the test classes; the counts it fixes show '"
               + MISSING + "' until then."))
    return df, text
