"""The face-loss page (meta-review: face recognition): SEC with the two cosine-softmax losses of face
recognition, CosFace (Wang et al. 2018, s = 30, m = 0.35) and ArcFace (Deng et al. 2019, s = 30, m = 0.5),
here on glyph retrieval (face data sets cannot be used offline). Each without and with SEC at the η
chosen on held-out training classes; the SEC term acts on the features before the classifier's normalization."""
from __future__ import annotations

import pandas as pd

from ..runs import experiments as ex
from . import profile_param
from . import review
from .review import family_rows, loss_claim, means_table, sec_rows, verdict_sentence, wide_means

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
    return "**Answer.** SEC changes glyph retrieval R@1 with " + " and with ".join(parts) + "."


def verdict(runs: pd.DataFrame) -> str:
    return "\n".join("- " + verdict_sentence(r, f"{NAMES[r['loss']]}: with SEC, R@1", f"SEC helps {NAMES[r['loss']]}")
                     for r in verdict_rows(runs).to_dict("records"))


#: Claims for the claims page: Q8c replaces the old "not testable offline" face row (glyphs, not faces);
#: Q8d (CosFace) keeps its id and now reads this page's runs (the same runs as the compare page's "beyond").
CLAIMS = [
    dict(id="Q8c", claim="SEC helps ArcFace, a face-recognition loss, here on glyph retrieval rather than faces",
         source="review Q8; meta-review (face recognition); paper Sec. 4.3",
         measured="R@1 SEC (η chosen on held-out classes) − none, ArcFace (s = 30, m = 0.5), paired on seed",
         unit="pp", expected_sign=+1, estimate=loss_claim(CHAPTER, "arcface"), paper=None, link="face.html"),
    dict(id="Q8d", claim="SEC helps a cosine-softmax loss (CosFace), here on glyph retrieval rather than faces",
         source="review Q8; paper Sec. 4.3", measured="R@1 SEC (η chosen on held-out classes) − none, CosFace, "
         "paired on seed", unit="pp", expected_sign=+1, estimate=loss_claim(CHAPTER, "cosface"), paper=None,
         link="face.html"),
]


def claim_rows(ev) -> list[dict]:
    return review.claim_rows(ev, CLAIMS)
