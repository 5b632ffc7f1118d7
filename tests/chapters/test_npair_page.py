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
