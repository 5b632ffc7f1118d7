"""The face-loss page (meta-review: face recognition): SEC with the two cosine-softmax losses of face
recognition, CosFace (Wang et al. 2018, s = 30, m = 0.35) and ArcFace (Deng et al. 2019, s = 30, m = 0.5),
here on glyph retrieval (face data sets cannot be used offline). Each without and with SEC at the η
chosen on held-out training classes; the SEC term acts on the features before the classifier's normalization."""
from __future__ import annotations

import pandas as pd

from ..data.benchmarks import DISPLAY_NAMES
from ..runs import experiments as ex
from . import profile_param
from ..report.claims import Claim, derived_family
from ..figures import results as results_fig
from .common import LOSS_TITLES, loss_noun
from .gains import other_tier_sentence
from .review import family_rows, row_claim, sec_rows, verdict_sentence, wide_means

#: The notebook's parameters (checked by ``sec_lib.params.notebook_params``).
PARAMS = profile_param()
SWEEP = "face"
LOSSES = ex.FACE_LOSSES
METRICS = ("R@1", "NMI", "F1", "test_norm_var")
FAMILY = "face page"


def verdict_rows(runs: pd.DataFrame) -> pd.DataFrame:
    return family_rows([sec_rows(runs, "R@1", LOSSES)], FAMILY)


def table(runs: pd.DataFrame) -> pd.DataFrame:
    return wide_means(runs, METRICS, LOSSES)


def paired(runs: pd.DataFrame) -> pd.DataFrame:
    """The rows of the page's figure: :func:`verdict_rows` (SEC − none in R@1 per loss, paired on seed, with its
    95% interval), each loss under its name and with the η of its SEC runs
    (:func:`sec_lib.figures.results.family_paired_rows`)."""
    return results_fig.family_paired_rows(verdict_rows(runs), runs, names={l: LOSS_TITLES.get(l, l) for l in LOSSES})


def figure(runs: pd.DataFrame):
    """The page's figure: SEC − none in R@1 per loss around 0, with 95% intervals (:func:`paired`)."""
    return results_fig.sec_paired_figure(paired(runs))


def opening(runs: pd.DataFrame) -> str:
    rows = verdict_rows(runs).set_index("loss")
    etas = runs[runs["variant"] == "sec"].groupby("loss")["eta"].first()
    parts = [f"{loss_noun(l)} (η = {etas.get(l, float('nan')):g}) {rows.loc[l, 'estimate']:+.2f} points "
             f"(**{rows.loc[l, 'verdict']}**)" for l in LOSSES if l in rows.index]
    data = sorted({DISPLAY_NAMES.get(d, d) for d in runs["dataset"]}) if "dataset" in runs else []
    what = "glyph" if data in ([], ["glyphs"]) else " and ".join(data)
    return f"**Answer.** SEC changes {what} retrieval R@1 with " + " and with ".join(parts) + "."


def verdict(runs: pd.DataFrame) -> str:
    return "\n".join("- " + verdict_sentence(r, f"{loss_noun(r['loss'])}: with SEC, R@1",
                                              f"SEC helps {loss_noun(r['loss'])}")
                     for r in verdict_rows(runs).to_dict("records"))


#: :func:`verdict_rows` on the page's evidence.
page_family = derived_family(__name__, "face_family", lambda ev: verdict_rows(ev.runs(SWEEP)))


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
    """CosFace's row of the compare page where that page reads it from another tier than this page's ``shown``
    (:func:`sec_lib.chapters.gains.other_tier_sentence`); '' where both read one tier."""
    return other_tier_sentence(profile, shown, ("cosface",), "the claim Q8d", root)
