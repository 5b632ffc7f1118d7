"""The N-pair page's answer: one space after its bold lead, with and without the norm-drift sentence."""
import pandas as pd
from sec_lib.chapters import npair


def frames(losses):
    rows, steps = [], []
    for loss in losses:
        for variant in ("none", "sec"):
            for seed in range(3):
                key = f"{loss}-{variant}-{seed}"
                rows.append({"key": key, "loss": loss, "variant": variant, "seed": seed, "status": "done",
                             "eta": 0.5 if variant == "sec" else 0.0, "R@1": 70 + (variant == "sec") + seed / 10})
                steps += [{"key": key, "step": 0, "norm_mean": 1.0}, {"key": key, "step": 10, "norm_mean": 3.0}]
    return pd.DataFrame(rows), pd.DataFrame(steps)


def test_the_npair_answer_reads_with_and_without_the_norm_drift_sentence():
    runs, steps = frames(("npair",))                       # a tier without the inner-product readings yet
    said = npair.opening(runs, steps)
    assert said.startswith("**Answer.** SEC changes R@1 by npair_ip_l2: +nan") and "npair: +1.00" in said
    runs, steps = frames(("npair_ip_l2", "npair_ip", "npair"))
    assert npair.opening(runs, steps).startswith("**Answer.** Without SEC, the batch mean norm ends training at 3× "
                                                 "its starting value with the bare inner-product loss")


def test_the_tuplet_margin_row_shows_the_compare_pages_claim_not_a_second_verdict():
    """tml's SEC − none is claim Q8b, decided on the compare page (Holm over tml and CosFace). This page's family of
    four gave the same runs another adjusted p, and so on the decisive tier another verdict ('inconclusive' here,
    'not reproduced' there); the page now shows Q8b's record, named, wherever that record exists."""
    from sec_lib.report.claims import ClaimRecord
    runs, steps = frames(("npair_ip_l2", "npair_ip", "npair", "tml"))
    own = npair.verdict(runs)
    assert "`tml`: with SEC, R@1 changes by +1.00" in own
    q8b = ClaimRecord(id="Q8b", statement="SEC helps the tuplet margin loss", page="compare", href="compare.html",
                      family="losses beyond the four", unit="pp", expected_sign=1, estimate=-0.44, ci_lo=-0.80,
                      ci_hi=-0.08, n=5, n_counts="seeds", p_value=0.028, p_adj=0.028, m=2, mde=0.60,
                      verdict="not reproduced")
    said = npair.verdict(runs, {"tml": q8b})
    line = said.splitlines()[-1]
    assert line.startswith("- `tml`, decided on the compare page as claim Q8b (Holm family: losses beyond the four)")
    assert "-0.44 points (95% CI [-0.80, -0.08]" in line and "over 2 comparisons" in line
    assert line.endswith("Verdict for *SEC helps the tuplet margin loss*: **not reproduced**.")
    assert said.splitlines()[:3] == own.splitlines()[:3]        # the other rows, and their family of four, unchanged
    assert "tml: -0.44 (**not reproduced**, claim Q8b)" in npair.opening(runs, steps, {"tml": q8b})
    from sec_lib.chapters import compare
    assert npair.ELSEWHERE == {"tml": "Q8b"} and "Q8b" in {c.id for c in compare.CLAIMS}   # a claim the compare page owns
    # the page's family table too: tml's row carries Q8b's verdict, named; its numbers stay this family's
    from sec_lib.chapters import common
    fam = npair.verdict_rows(runs)
    shown = common.decided_elsewhere(fam, {"tml": q8b}, "loss")
    assert shown.loc[shown["loss"] == "tml", "verdict"].tolist() == ["Q8b (compare page): not reproduced"]
    assert shown.drop(columns="verdict").equals(fam.drop(columns="verdict"))
    assert shown.loc[shown["loss"] != "tml", "verdict"].equals(fam.loc[fam["loss"] != "tml", "verdict"])
