"""The face-loss page (meta-review: face recognition): SEC with the two cosine-softmax losses of face
recognition, CosFace (Wang et al. 2018, s = 30, m = 0.35) and ArcFace (Deng et al. 2019, s = 30, m = 0.5),
here on glyph retrieval (face data sets cannot be used offline). Each without and with SEC at the η
chosen on held-out training classes; the SEC term acts on the features before the classifier's normalization."""
from __future__ import annotations

import pandas as pd

from ..data.benchmarks import DISPLAY_NAMES
from ..runs import experiments as ex
from . import profile_param
from ..report.claims import Claim
from .review import family_rows, means_table, row_claim, sec_rows, verdict_sentence, wide_means

#: The notebook's parameters (checked by ``sec_lib.params.notebook_params``).
PARAMS = profile_param()
CHAPTER = "face"
LOSSES = ex.FACE_LOSSES
METRICS = ("R@1", "NMI", "F1", "test_norm_var")
FAMILY = "face page"
NAMES = {"cosface": "CosFace", "arcface": "ArcFace"}


def verdict_rows(runs: pd.DataFrame) -> pd.DataFrame:
    return family_rows([sec_rows(runs, "R@1", LOSSES)], FAMILY)


def table(runs: pd.DataFrame) -> pd.DataFrame:
    return wide_means(runs, METRICS, LOSSES)


def bars(runs: pd.DataFrame) -> pd.DataFrame:
    return means_table(runs, ("R@1",), LOSSES)


def opening(runs: pd.DataFrame) -> str:
    rows = verdict_rows(runs).set_index("loss")
    etas = runs[runs["variant"] == "sec"].groupby("loss")["eta"].first()
    parts = [f"{NAMES[l]} (η = {etas.get(l, float('nan')):g}) {rows.loc[l, 'estimate']:+.2f} points "
             f"(**{rows.loc[l, 'verdict']}**)" for l in LOSSES if l in rows.index]
    data = sorted({DISPLAY_NAMES.get(d, d) for d in runs["dataset"]}) if "dataset" in runs else []
    what = "glyph" if data in ([], ["glyphs"]) else " and ".join(data)
    return f"**Answer.** SEC changes {what} retrieval R@1 with " + " and with ".join(parts) + "."


def verdict(runs: pd.DataFrame) -> str:
    return "\n".join("- " + verdict_sentence(r, f"{NAMES[r['loss']]}: with SEC, R@1", f"SEC helps {NAMES[r['loss']]}")
                     for r in verdict_rows(runs).to_dict("records"))


def page_family(ev) -> pd.DataFrame:
    """:func:`verdict_rows` on the page's evidence."""
    return ev.derived("face_family", lambda: verdict_rows(ev.runs(CHAPTER)))


#: The claims this page decides: Q8c (ArcFace) and Q8d (CosFace), on image retrieval rather than faces.
CLAIMS = [
    Claim(id="Q8c", claim="SEC helps ArcFace, a face-recognition loss, here on image retrieval rather than faces",
          source="review Q8; meta-review (face recognition); paper Sec. 4.3",
          measured="R@1 SEC (η chosen on held-out classes) − none, ArcFace (s = 30, m = 0.5), paired on seed",
          expected_sign=+1, page="face", estimate=row_claim(page_family, loss="arcface")),
    Claim(id="Q8d", claim="SEC helps a cosine-softmax loss (CosFace), here on image retrieval rather than faces",
          source="review Q8; paper Sec. 4.3", measured="R@1 SEC (η chosen on held-out classes) − none, CosFace, "
          "paired on seed", expected_sign=+1, page="face", estimate=row_claim(page_family, loss="cosface")),
]


def compare_tier_sentence(profile: str, shown: str, root=None) -> str:
    """Where the compare page reads CosFace from another tier than this page's (``shown``): that tier's CosFace row,
    SEC at the held-out η − none, as the compare page's beyond table tests it (:func:`sec_lib.chapters.compare.
    beyond_gains`), so that a reader sees both numbers and which one the claim Q8d is decided on. '' where both pages
    read one tier, or the compare page has no CosFace runs."""
    from . import compare, evidence
    from .common import ci_text, mde_text, p_text
    ev = evidence.page_evidence("compare", profile, root)
    if ev.profile == shown:
        return ""
    try:
        g = compare.beyond_gains(ev.frames("beyond"), metrics=("R@1",))
    except (KeyError, ValueError):
        return ""
    r = g[(g["loss"] == "cosface") & g["variant"].isin((evidence.ETA_ARM_NAMES["selected"], "sec"))]
    if not len(r):
        return ""
    r = r.iloc[0]
    return (f"**CosFace in the {ev.profile} tier.** The compare page reads CosFace from the {ev.profile} tier, "
            "which does not hold ArcFace's runs yet: there SEC (η chosen on held-out classes) − none changes R@1 "
            f"by {ci_text(r['estimate'], r['ci_lo'], r['ci_hi'])} points over {int(r['n'])} seeds "
            f"({p_text(r['p_adj'], r['m'])} in the compare page's family of tuplet margin and CosFace; "
            f"{mde_text(r['mde'])}): "
            f"**{r['verdict']}** there. This page, and the claim Q8d, read the {shown} tier until the "
            f"{ev.profile} tier holds both losses' runs.")
