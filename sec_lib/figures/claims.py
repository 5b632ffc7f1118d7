"""The claims page's figure: every claim measured in one unit as a forest plot, each row labelled with the claim's id
and words (:func:`claim_label`), our estimate and interval coloured by its verdict, the paper's number beside it."""
from __future__ import annotations

import re
import textwrap

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import RendererAgg
from matplotlib.figure import Figure

from .palette import VERDICT_COLORS
from .style import BOOK_WIDTH, figure, need, styled


#: The claims figure's label column: characters per line of a claim's words, and lines at most.
CLAIM_LABEL_CHARS, CLAIM_LABEL_LINES = 56, 2
#: The claims figure's row heights (inches): per line of its label, and the space between rows.
_CLAIM_LINE_IN, _CLAIM_GAP_IN = 0.145, 0.075


def claim_label(claim: str, text: str, chars: int = CLAIM_LABEL_CHARS, lines: int = CLAIM_LABEL_LINES) -> str:
    """A claim's row label on the claims figure: its id, then its words wrapped to ``chars`` characters per line, in
    at most ``lines`` lines. Words too long for that lose their parenthetical asides first, then their end (…)."""
    def wrap(words):
        return textwrap.wrap(f"{claim}: {words}", chars, break_on_hyphens=False)
    words = " ".join(str(text).split())
    out = wrap(words)
    if len(out) > lines:
        bare = " ".join(re.sub(r"\s*\([^()]*\)", "", words).split())
        out = wrap(bare) if bare else out
    if len(out) > lines:
        out = out[:lines]
        last = out[-1].split(" ")
        while len(last) > 1 and len(" ".join(last)) + 2 > chars:
            last.pop()
        out[-1] = " ".join(last).rstrip(",;:") + " …"
    return "\n".join(out)


def _claims_xlim(t: pd.DataFrame, stretch: float = 1.5) -> tuple[float, float]:
    """The claims figure's x range: 0 and every estimate and interval, widened to take in the paper's numbers
    nearest to them as long as the range grows to at most ``stretch`` times its width (farther ones are drawn at
    the edge, with their value); a 6% margin each side."""
    core = np.concatenate([t[c].to_numpy(float) for c in ("estimate", "ci_lo", "ci_hi")] + [np.zeros(1)])
    core = core[np.isfinite(core)]
    lo, hi = float(core.min()), float(core.max())
    limit = stretch * (hi - lo or 1.0)
    pv = t["paper_value"].to_numpy(float) if "paper_value" in t.columns else np.array([])
    for v in sorted(pv[np.isfinite(pv)], key=lambda v: max(lo - v, v - hi, 0.0)):
        if max(hi, v) - min(lo, v) <= limit:
            lo, hi = min(lo, v), max(hi, v)
    pad = 0.06 * (hi - lo or 1.0)
    return lo - pad, hi + pad


def _left_align_ytick_labels(ax, gap_pt: float = 4.0) -> None:
    """Set the y tick labels flush left, in one column ending ``gap_pt`` points left of the axes."""
    fig = ax.figure
    renderer = RendererAgg(fig.bbox.width, fig.bbox.height, fig.dpi)      # measures text as the page's PNG draws it
    width = max((t.get_window_extent(renderer).width for t in ax.get_yticklabels() if t.get_text()), default=0.0)
    ax.tick_params(axis="y", length=0, pad=width * 72 / fig.dpi + gap_pt)
    for t in ax.get_yticklabels():
        t.set_horizontalalignment("left")


@styled
def claims_figure(table: pd.DataFrame, unit: str = "pp") -> Figure:
    """Forest plot of the claims measured in ``unit``: per claim (rows, in the table's order) our estimate (dot)
    and 95% interval (line), coloured by its verdict, whose word stands at the row's right end; the claim's id and
    words on the left (:func:`claim_label`); the paper's or rebuttal's number as an open diamond. The x axis fits
    our intervals (:func:`_claims_xlim`); a paper number beyond it is drawn at the edge as an arrow with its value.
    Each row is as tall as its label."""
    need(table, ["claim", "unit", "estimate", "ci_lo", "ci_hi", "verdict", "expected_sign"], "table")
    t = table[(table["unit"] == unit) & table["estimate"].notna()].reset_index(drop=True)
    texts = t["text"] if "text" in t.columns else pd.Series([""] * len(t))
    labels = [claim_label(c, w) for c, w in zip(t["claim"], texts)]
    heights = [_CLAIM_LINE_IN * (lab.count("\n") + 1) + _CLAIM_GAP_IN for lab in labels]
    ys = np.cumsum(heights) - np.asarray(heights) / 2               # row centres, in inches from the top
    total = float(sum(heights)) if heights else 1.0
    fig = figure(BOOK_WIDTH, total + 0.75)
    ax = fig.subplots()
    xlim = _claims_xlim(t)
    for y, (_, r) in zip(ys, t.iterrows()):
        c = VERDICT_COLORS.get(r["verdict"], "k")
        lo = r["ci_lo"] if pd.notna(r["ci_lo"]) else r["estimate"]
        hi = r["ci_hi"] if pd.notna(r["ci_hi"]) else r["estimate"]
        ax.plot([lo, hi], [y, y], color=c, lw=2)
        ax.plot([r["estimate"]], [y], "o", color=c, ms=5.5)
        pv = r.get("paper_value", np.nan)
        if pd.notna(pv) and xlim[0] <= pv <= xlim[1]:
            ax.plot([pv], [y], "D", mfc="none", mec="k", ms=6)
        elif pd.notna(pv):                    # beyond the axis: an arrow at the edge, with the paper's number
            left = pv < xlim[0]
            edge = xlim[0] if left else xlim[1]
            ax.annotate(f"{pv:+.3g}".replace("-", "−"), (edge, y), xytext=(14 if left else -14, 0), textcoords="offset points",
                        ha="left" if left else "right", va="center", fontsize=9,
                        arrowprops=dict(arrowstyle="-|>", color="k", lw=0.9, shrinkA=0, shrinkB=0))
        ax.annotate(r["verdict"], (1.01, y), xycoords=("axes fraction", "data"), va="center", ha="left",
                    fontsize=9, color=c, annotation_clip=False)
    for k in range(1, len(ys), 2):            # every other row shaded, so a label leads the eye to its line
        ax.axhspan(ys[k] - heights[k] / 2, ys[k] + heights[k] / 2, color="0.95", lw=0, zorder=0)
    ax.axvline(0, color="k", lw=0.8)
    ax.set_xlim(*xlim)
    ax.set_yticks(ys, labels, linespacing=1.05)
    _left_align_ytick_labels(ax)
    ax.grid(axis="y", visible=False)
    ax.set_ylim(total, 0)
    ax.set_xlabel(f"our estimate ({unit}) and 95% interval; ◇ the paper's or rebuttal's number")
    return fig
