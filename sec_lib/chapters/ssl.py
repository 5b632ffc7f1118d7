"""The SimCLR / supervised-contrastive page (reviewer 2; rebuttal Table 1): does SEC help NT-Xent without
labels (SimCLR: two augmented views of each image, temperature 0.5) and with labels (SupCon, Khosla et al.
2020, temperature 0.1)? Zero-shot retrieval R@1 on the test classes for both, plus a linear probe's top-1
for SimCLR; SEC at the η chosen on held-out training classes."""
from __future__ import annotations

import pandas as pd

from ..runs import experiments as ex
from .. import reference
from . import profile_param
from ..report.claims import Claim, derived_family
from ..figures import results as results_fig
from .review import family_rows, row_claim, sec_rows, verdict_sentence, wide_means

#: The notebook's parameters (checked by ``sec_lib.params.notebook_params``).
PARAMS = profile_param()
SWEEP = "ssl"
LOSSES = ex.SSL_LOSSES
METRICS = ("R@1", "probe_top1", "NMI", "test_norm_var")
FAMILY = "ssl page"
#: Each loss's name on the page (its verdict lines and its figure).
NAMES = {"ntxent": "SimCLR (NT-Xent, no labels)", "supcon": "Supervised contrastive"}
#: Each measure's name in the figure.
MEASURES = {"R@1": "R@1", "probe_top1": "probe top-1"}


def rebuttal_simclr() -> dict:
    """Rebuttal Table 1 (SimCLR on CIFAR-10, linear-probe top-1) from the package data: none, sec, η, gain."""
    reb = reference.rebuttal_all()
    s = reb[reb["table"] == "simclr"].set_index("setting")
    return {"none": float(s.loc["none", "top1"]), "sec": float(s.loc["sec", "top1"]),
            "eta": float(s.loc["sec", "eta"]), "gain": float(s.loc["sec", "top1"] - s.loc["none", "top1"])}


def rebuttal_gain() -> float:
    return rebuttal_simclr()["gain"]


def verdict_rows(runs: pd.DataFrame) -> pd.DataFrame:
    """The page's family: R@1 for SimCLR and SupCon, and SimCLR's linear-probe top-1 (SEC − none, Holm)."""
    parts = [sec_rows(runs, "R@1", LOSSES)]
    if "probe_top1" in runs.columns:
        parts.append(sec_rows(runs[runs["loss"] == "ntxent"], "probe_top1", ("ntxent",)))
    return family_rows(parts, FAMILY)


def table(runs: pd.DataFrame) -> pd.DataFrame:
    return wide_means(runs, METRICS, LOSSES)


def paired(runs: pd.DataFrame) -> pd.DataFrame:
    """The rows of the page's figure: :func:`verdict_rows` (SEC − none per loss in R@1, and for SimCLR in the
    linear probe's top-1, paired on seed, with its 95% interval), each loss under its name and with the η of its SEC
    runs (:func:`sec_lib.figures.results.family_paired_rows`)."""
    return results_fig.family_paired_rows(verdict_rows(runs), runs, names=NAMES, metric_names=MEASURES)


def figure(runs: pd.DataFrame):
    """The page's figure: SEC − none per loss and measure around 0, with 95% intervals (:func:`paired`)."""
    return results_fig.sec_paired_figure(paired(runs))


def chosen_etas(runs: pd.DataFrame) -> dict:
    """The η of the SEC runs per loss (chosen on held-out classes)."""
    s = runs[runs["variant"] == "sec"]
    return s.groupby("loss")["eta"].first().to_dict()


def opening(runs: pd.DataFrame) -> str:
    rows = verdict_rows(runs)
    get = lambda loss, m: rows[(rows["loss"] == loss) & (rows["metric"] == m)].iloc[0]
    reb = rebuttal_simclr()
    probe = get("ntxent", "probe_top1") if ((rows["loss"] == "ntxent") & (rows["metric"] == "probe_top1")).any() else None
    etas = chosen_etas(runs)
    out = [f"**Answer.** With SimCLR (NT-Xent, no labels) SEC at η = {etas.get('ntxent', float('nan')):g} "
           f"changes the test R@1 by {get('ntxent', 'R@1')['estimate']:+.2f} points (verdict: "
           f"**{get('ntxent', 'R@1')['verdict']}**)"]
    if probe is not None:
        same = (probe["estimate"] > 0) == (reb["gain"] > 0)
        out.append(f" and the linear probe's top-1 by {probe['estimate']:+.2f} points (**{probe['verdict']}**); "
                   f"the rebuttal's Table 1 reports {reb['none']:.2f} → {reb['sec']:.2f} ({reb['gain']:+.2f}) on "
                   f"CIFAR-10 with {reb['eta']:g}·SEC, so our direction {'agrees' if same else 'disagrees'}")
    out.append(f". With supervised contrastive learning SEC at η = {etas.get('supcon', float('nan')):g} changes R@1 by "
               f"{get('supcon', 'R@1')['estimate']:+.2f} points (**{get('supcon', 'R@1')['verdict']}**).")
    return "".join(out)


def verdict(runs: pd.DataFrame) -> str:
    rows = verdict_rows(runs)
    lines = []
    for r in rows.to_dict("records"):
        name = NAMES[r["loss"]]
        what = "the linear probe's top-1" if r["metric"] == "probe_top1" else "test R@1"
        lines.append("- " + verdict_sentence(r, f"{name}: with SEC, {what}", f"SEC helps {name}"))
    return "\n".join(lines)


#: :func:`verdict_rows` on the page's evidence.
page_family = derived_family(__name__, "ssl_family", lambda ev: verdict_rows(ev.runs(SWEEP)))


#: The claims this page decides.
CLAIMS = [
    Claim(id="Q8a", claim="SEC helps contrastive self-supervised learning (SimCLR), here on glyphs",
          source="review Q8 (reviewer 2); rebuttal Table 1",
          measured="top-1 of a linear probe on frozen test embeddings, SEC (η chosen on held-out classes) − none, "
                   "paired on seed; paper: CIFAR-10 top-1", expected_sign=+1, page="ssl",
          estimate=row_claim(page_family, loss="ntxent", metric="probe_top1"), paper=rebuttal_gain),
    Claim(id="Q8a-r", claim="SEC helps SimCLR's zero-shot retrieval (R@1 on unseen glyph classes)",
          source="review Q8 (reviewer 2)", measured="R@1 SEC − none, NT-Xent with two views, paired on seed",
          expected_sign=+1, page="ssl", estimate=row_claim(page_family, loss="ntxent", metric="R@1")),
    Claim(id="Q8e", claim="SEC helps supervised contrastive learning (Khosla et al. 2020)",
          source="review (reviewer 2)", measured="R@1 SEC − none, SupCon (temperature 0.1), paired on seed",
          expected_sign=+1, page="ssl", estimate=row_claim(page_family, loss="supcon", metric="R@1")),
]
