"""The pretrained page's figure of P1c: the regime interaction seed by seed, the registered seeds beside P1c's fresh
ones, each group's mean with its 95% interval (:func:`seeds_figure`, :func:`seeds_caption`). Built from
:func:`sec_lib.chapters.pretrained_seeds.seed_table` and :func:`~sec_lib.chapters.pretrained_seeds.group_summary`
(frames; it loads nothing)."""
from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from .style import BOOK_WIDTH, figure, need, styled

#: Colours of the groups in order: the registered seeds muted, the follow-up's darker.
GROUP_COLORS = ("#7f9fbf", "#d62728")


def _groups(table: pd.DataFrame, groups: pd.DataFrame) -> list[str]:
    need(table, ["group", "seed", "interaction"], "seed table")
    need(groups, ["group", "estimate", "ci_lo", "ci_hi"], "group summary")
    names = list(dict.fromkeys(table["group"]))
    if len(names) > len(GROUP_COLORS):
        raise ValueError(f"the figure draws at most {len(GROUP_COLORS)} groups of seeds; got {names}")
    missing = sorted(set(names) - set(groups["group"]))
    if missing:
        raise ValueError(f"group summary lacks groups {missing}; it has {list(groups['group'])}")
    return names


@styled
def seeds_figure(table: pd.DataFrame, groups: pd.DataFrame, unit: str = "R@1 points") -> Figure:
    """Per seed (x), the pooled interaction (SEC − none fine-tuned) − (SEC − none from scratch) (dots), one colour per
    group of seeds; each group's mean over its seeds (a line across its seeds) with its 95% interval (a band), around
    0. The y axis fits the dots, the intervals and 0; the legend sits below the axes, where no dot can fall under it.
    Artists carry ``gid`` 'seeds:<group>', 'mean:<group>' and 'interval:<group>'."""
    names = _groups(table, groups)
    g = groups.set_index("group")
    fig = figure(min(BOOK_WIDTH, 2.2 + 0.33 * table["seed"].nunique()), 3.7)
    ax = fig.add_subplot()
    for name, colour in zip(names, GROUP_COLORS):
        sub = table[table["group"] == name].sort_values("seed")
        x = sub["seed"].to_numpy(float)
        left, right = x.min() - 0.4, x.max() + 0.4
        row = g.loc[name]
        if np.isfinite(row["ci_lo"]) and np.isfinite(row["ci_hi"]):
            ax.fill_between([left, right], row["ci_lo"], row["ci_hi"], color=colour, alpha=0.18, lw=0,
                            gid=f"interval:{name}")
        ax.plot([left, right], [row["estimate"]] * 2, color=colour, lw=1.6, gid=f"mean:{name}",
                label=f"{name}: mean {row['estimate']:+.2f} [{row['ci_lo']:+.2f}, {row['ci_hi']:+.2f}]")
        ax.plot(x, sub["interaction"].to_numpy(float), "o", color=colour, ms=5, gid=f"seeds:{name}")
    ax.axhline(0, color="#555555", lw=0.9)
    vals = np.concatenate([table["interaction"].to_numpy(float), g.loc[names, ["ci_lo", "ci_hi"]].to_numpy(float).ravel(),
                           [0.0]])
    lo, hi = np.nanmin(vals), np.nanmax(vals)
    pad = 0.1 * max(hi - lo, 1e-9)
    ax.set_ylim(lo - pad, hi + pad)
    seeds = sorted(set(table["seed"].astype(int)))
    ax.set_xticks(seeds)
    ax.set_xlim(seeds[0] - 0.8, seeds[-1] + 0.8)
    ax.set_xlabel("seed")
    ax.set_ylabel(f"interaction, {unit}")
    fig.legend(loc="outside lower center", fontsize=9, frameon=False)   # below the axes: over no seed's dot
    return fig


def seeds_caption(table: pd.DataFrame, groups: pd.DataFrame) -> str:
    """What :func:`seeds_figure` draws, with each group's seeds and mean counted from the frames."""
    names = _groups(table, groups)
    g = groups.set_index("group")
    parts = "; ".join(f"{name} ({(table['group'] == name).sum()} seeds), mean {g.loc[name, 'estimate']:+.2f} "
                      f"[{g.loc[name, 'ci_lo']:+.2f}, {g.loc[name, 'ci_hi']:+.2f}]" for name in names)
    return ("Per seed (dots), the regime interaction (SEC − none fine-tuned) − (SEC − none from scratch) in R@1 "
            "points, averaged over the four main losses; the line across each group of seeds is its mean, the band "
            f"its 95% t interval: {parts}. Below 0, SEC gains less when fine-tuning than from scratch.")
