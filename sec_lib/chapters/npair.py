"""The N-pair page (reviewer 3, after the rebuttal): which N-pair loss did Sohn (NeurIPS 2016) define, and
does SEC help each reading? Four variants, each without and with SEC (η chosen on held-out classes):

* ``npair_ip_l2``: the rebuttal's reading of Sohn's Sec. 3.2.2: softmax over UNNORMALIZED inner products
  plus an l2 penalty on the embedding norms (λ = 0.002, TensorFlow's reference ``npairs_loss``);
* ``npair_ip``: the same inner-product N-pair-mc loss without that penalty (the SEC authors' ``normalized=False``);
* ``npair``: the reviewer's reading, l2-normalized embeddings with a fixed scale (the SEC paper's Eq. 3, s = 25);
* ``tml``: the tuplet margin loss (Yu & Tao 2019), a normalized N-pair loss with an angular margin.
"""
from __future__ import annotations

import pandas as pd

from .. import reference
from ..runs import experiments as ex
from . import profile_param
from ..report.claims import Claim, derived_family
from . import review
from ..figures import results as results_fig
from .common import record_row
from .evidence import claim_records
from .gains import other_tier_sentence, paper_sizes, sized_verdicts
from .review import family_rows, row_claim, sec_rows, verdict_sentence, wide_means

#: The notebook's parameters (checked by ``sec_lib.params.notebook_params``).
PARAMS = profile_param()
SWEEP = "npair"
LOSSES = ex.NPAIR_VARIANTS
METRICS = ("R@1", "NMI", "test_norm_mean", "test_norm_var")
FAMILY = "npair page"

#: Which reading of Sohn (2016) each variant implements (shown on the page as a table).
READINGS = {
    "npair_ip_l2": ("Sohn's N-pair-mc on inner products + l2 penalty on the norms (λ = 0.002)",
                    "the rebuttal's reading of Sohn Sec. 3.2.2", "no"),
    "npair_ip": ("N-pair-mc on inner products, no penalty", "Sohn's Eq. (N-pair-mc) without Sec. 3.2.2", "no"),
    "npair": ("softmax over 25·cos (l2-normalized embeddings)", "the reviewer's reading; the SEC paper's Eq. 3",
              "yes"),
    "tml": ("tuplet margin: normalized, angular margin 0.1, scale 64", "not Sohn's: Yu & Tao 2019", "yes"),
}


def readings_table() -> pd.DataFrame:
    return pd.DataFrame([{"variant": k, "loss": v[0], "which reading": v[1], "normalized": v[2]}
                         for k, v in READINGS.items()])


def verdict_rows(runs: pd.DataFrame) -> pd.DataFrame:
    """SEC − none of R@1 per variant, one Holm family; the normalized N-pair loss, the paper's own (NNP in its Table
    1), sized against the paper's gains for it (:func:`~sec_lib.chapters.gains.sized_verdicts`)."""
    rows = family_rows([sec_rows(runs, "R@1", LOSSES)], FAMILY)
    return rows.assign(verdict=sized_verdicts(rows, variant="sec"))


def table(runs: pd.DataFrame) -> pd.DataFrame:
    return wide_means(runs, METRICS, LOSSES)


def paired(runs: pd.DataFrame) -> pd.DataFrame:
    """The rows of the page's figure: :func:`verdict_rows` (SEC − none in R@1 per variant, paired on seed, with its
    95% interval), each variant under its key (the page's readings table names them) and with the η of its SEC
    runs (:func:`sec_lib.figures.results.family_paired_rows`)."""
    return results_fig.family_paired_rows(verdict_rows(runs), runs)


def figure(runs: pd.DataFrame):
    """The page's figure: SEC − none in R@1 per variant around 0, with 95% intervals (:func:`paired`)."""
    return results_fig.sec_paired_figure(paired(runs))


def norm_growth(runs: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """Per loss × variant: the batch mean norm at the first and the last logged step (mean over seeds)
    and their ratio (how far the norms drift during training)."""
    review.check_cols(steps, ["key", "step", "norm_mean"], "steps")
    s = steps.dropna(subset=["norm_mean"]).sort_values("step")
    ends = s.groupby("key")["norm_mean"].agg(first="first", last="last").reset_index()
    d = runs[["key", "loss", "variant"]].merge(ends, on="key")
    out = d.groupby(["loss", "variant"], sort=False)[["first", "last"]].mean().reset_index()
    out["ratio"] = out["last"] / out["first"]
    order = {l: i for i, l in enumerate(LOSSES)}
    return out.assign(_o=out["loss"].map(order)).sort_values(["_o", "variant"]).drop(columns="_o").reset_index(drop=True)


#: The rows of this page that another page's claim decides: the tuplet margin loss is claim Q8b, decided on the compare
#: page (its Holm family: the losses beyond the four). This page shows that record, so that the loss carries one
#: verdict in the book; its runs still count in this page's family of four, which adjusts Q11a-c as declared.
ELSEWHERE = {"tml": "Q8b"}


def decided_elsewhere(profile: str, root=None) -> dict:
    """``{loss: ClaimRecord}``: the record of each :data:`ELSEWHERE` claim as the page that owns it decides it
    (:func:`sec_lib.chapters.evidence.claim_records`, the same object the claims page shows)."""
    recs = {r.id: r for r in claim_records(profile, root, pages=("compare",))}
    return {loss: recs[cid] for loss, cid in ELSEWHERE.items() if cid in recs}


def opening(runs: pd.DataFrame, steps: pd.DataFrame, elsewhere: dict | None = None) -> str:
    """The page's answer; ``elsewhere``: :func:`decided_elsewhere`, whose records replace those losses' rows."""
    rows = verdict_rows(runs).set_index("loss")
    g = norm_growth(runs, steps).set_index(["loss", "variant"])
    ip, ipl2 = ("npair_ip", "none"), ("npair_ip_l2", "none")
    drift = ""
    if ip in g.index and ipl2 in g.index:
        drift = (f"Without SEC, the batch mean norm ends training at {g.loc[ip, 'ratio']:.2g}× its starting value with "
                 f"the bare inner-product loss and at {g.loc[ipl2, 'ratio']:.2g}× with Sohn's l2 penalty. ")
    elsewhere = elsewhere or {}
    parts = [f"{v}: {elsewhere[v].estimate:+.2f} (**{elsewhere[v].verdict}**, claim {elsewhere[v].id})" if v in elsewhere
             else f"{v}: {rows.loc[v, 'estimate']:+.2f} (**{rows.loc[v, 'verdict']}**)" for v in LOSSES if v in rows.index]
    return "**Answer.** " + drift + "SEC changes R@1 by " + "; ".join(parts) + " points."


def verdict(runs: pd.DataFrame, elsewhere: dict | None = None) -> str:
    """One line per variant; a variant another page's claim decides (``elsewhere``: :func:`decided_elsewhere`)
    shows that claim's record, named, instead of this page's row."""
    elsewhere = elsewhere or {}
    lines = []
    for r in verdict_rows(runs).to_dict("records"):
        rec = elsewhere.get(r["loss"])
        if rec is None:
            lines.append("- " + verdict_sentence(r, f"`{r['loss']}`: with SEC, R@1", f"SEC helps {r['loss']}"))
        else:
            lines.append(f"- `{r['loss']}`, decided on the {rec.page} page as claim {rec.id} (Holm family: {rec.family}): "
                         + verdict_sentence(record_row(rec), "with SEC, R@1", rec.statement))
    return "\n".join(lines)


#: :func:`verdict_rows` on the page's evidence.
page_family = derived_family(__name__, "npair_family", lambda ev: verdict_rows(ev.runs(SWEEP)))


#: The claims this page decides (Q8b, the tuplet margin loss, is the compare page's).
CLAIMS = [
    Claim(id="Q11a", claim="SEC helps Sohn's inner-product N-pair loss with its l2 norm penalty (rebuttal's reading)",
          source="review (reviewer 3, after the rebuttal)", measured="R@1 SEC − none, npair_ip_l2, paired on seed",
          expected_sign=+1, page="npair", estimate=row_claim(page_family, loss="npair_ip_l2")),
    Claim(id="Q11b", claim="SEC helps the inner-product N-pair loss without a norm penalty",
          source="review (reviewer 3)", measured="R@1 SEC − none, npair_ip, paired on seed",
          expected_sign=+1, page="npair", estimate=row_claim(page_family, loss="npair_ip")),
    Claim(id="Q11c", claim="SEC helps the normalized N-pair loss (reviewer's reading; paper Eq. 3) at the selected η",
          source="review (reviewer 3); paper Table 1", measured="R@1 SEC (η chosen on held-out classes) − none, npair",
          expected_sign=+1, page="npair", estimate=row_claim(page_family, loss="npair"),
          paper=lambda: reference.paper_loss_gains_text("npair"), paper_size=lambda: paper_sizes("npair", "sec"),
          paper_size_text=lambda values: reference.paper_size_text(values)),
]


def compare_tier_sentence(profile: str, shown: str, root=None) -> str:
    """The normalized N-pair and tuplet margin rows of the compare page where that page reads them from another
    tier than this page's ``shown`` (:func:`sec_lib.chapters.gains.other_tier_sentence`); '' where both read one
    tier."""
    return other_tier_sentence(profile, shown, ("npair", "tml"), "the claim Q11c", root)
