"""C3b, the registered follow-up to C3 (``sec_lib.runs.densecurves``): C3's prefixes retraced further with only the
run length changed; its committed runs count only when all are there; the convergence page splices them in place of
C3's prefixes and decides C3b in its own Holm family of 5, only on the decisive tier."""
import dataclasses
import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from sec_lib.chapters import convergence, evidence
from sec_lib.figures import sweeps
from sec_lib.runs import densecurves
from sec_lib.runs.experiments import run_key
from sec_lib.runs.store import Frames

REPO = Path(__file__).resolve().parents[2]
LOSSES = ("triplet", "semihard", "npair", "ms")


def test_the_runs_are_c3s_prefixes_with_only_their_length_and_spacing_changed():
    c3, dense = densecurves.c3_configs(), densecurves.test_configs()
    assert len(c3) == len(dense) == 40 and {c.loss for c in dense} == set(LOSSES)
    assert {(c.eta > 0, c.seed) for c in dense} == {(v, s) for v in (False, True) for s in range(5)}
    for a, b in zip(c3, dense):
        assert dataclasses.replace(a, iterations=densecurves.PREFIX, eval_every=densecurves.EVERY) == b
        assert b.schedule == "cosine" and b.schedule_iterations == a.schedule_iterations > densecurves.PREFIX
        assert a.iterations < densecurves.PREFIX and b.eval_every == a.eval_every   # as dense as C3's own prefixes
    assert not {run_key(c) for c in c3} & {run_key(c) for c in dense}


def test_a_prefix_that_would_not_be_shorter_than_its_run_is_refused(monkeypatch):
    monkeypatch.setattr(densecurves, "PREFIX", 13500)
    with pytest.raises(ValueError, match="needs 2000 < 13500 < the horizon 13500"):
        densecurves.test_configs()


def _root_with(tmp_path, n_committed: int) -> Path:
    """A repository root holding the decisive tier's C3 prefixes and ``n_committed`` of C3b's runs."""
    src = densecurves.c3_configs()
    conv = tmp_path / "data" / "reference" / "decisive" / "convergence"
    conv.mkdir(parents=True)
    shutil.copy(REPO / "data" / "reference" / "decisive" / "convergence" / "runs.parquet", conv / "runs.parquet")
    test = densecurves.folder(tmp_path) / "test"
    test.mkdir(parents=True)
    keys = [run_key(c) for c in densecurves.test_configs(tmp_path)][:n_committed]
    pd.DataFrame({"key": keys, "config": [json.dumps({})] * len(keys)}).to_parquet(test / "runs.parquet")
    assert len(src) == 40
    return tmp_path


def test_the_runs_count_only_once_all_are_committed(tmp_path):
    root = _root_with(tmp_path, 39)
    with pytest.raises(KeyError, match="39 of 40 are in"):
        densecurves.test_runs(root)
    (densecurves.folder(root) / "test" / "runs.parquet").unlink()
    with pytest.raises(KeyError, match="0 of 40 are in"):
        densecurves.test_runs(root)
    root2 = _root_with(tmp_path / "b", 40)
    assert len(densecurves.test_runs(root2)) == 40


def _reach_frame(shift: dict, seeds=range(5)) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rows = []
    for loss in LOSSES:
        for s in seeds:
            base = 3000 + 100 * s + rng.normal(0, 50)
            rows.append(dict(key=f"{loss}-none-{s}", loss=loss, variant="none", seed=s, reach=base))
            rows.append(dict(key=f"{loss}-sec-{s}", loss=loss, variant="sec", seed=s,
                             reach=base + shift[loss] + rng.normal(0, 80)))
    return pd.DataFrame(rows)


def test_the_family_is_c3s_reach_paired_per_loss_and_averaged_holm_adjusted_over_five():
    reach = _reach_frame({"triplet": 900, "semihard": 100, "npair": 0, "ms": 700})
    fam = convergence.reach_family(reach, densecurves.FAMILY)
    d, p = fam["diffs"], fam["pooled"].iloc[0]
    assert list(d["loss"]) == list(LOSSES) and set(d["metric"]) == {"reach"} and len(d) == 4
    raw = []
    for loss in LOSSES:
        w = reach[reach.loss == loss].pivot(index="seed", columns="variant", values="reach")
        t = stats.ttest_rel(w["sec"], w["none"])
        row = d[d.loss == loss].iloc[0]
        assert row["estimate"] == pytest.approx((w["sec"] - w["none"]).mean())
        assert row["p_value"] == pytest.approx(t.pvalue)
        raw.append(t.pvalue)
    per_seed = (reach.pivot_table(index=["seed", "loss"], columns="variant", values="reach")
                .eval("sec - none").groupby("seed").mean())
    t = stats.ttest_1samp(per_seed, 0.0)
    assert p["estimate"] == pytest.approx(per_seed.mean()) and p["p_value"] == pytest.approx(t.pvalue)
    raw.append(t.pvalue)
    order = np.argsort(raw)                                     # Holm, by hand
    holm = np.empty(5)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (5 - rank) * raw[i]))
        holm[i] = running
    assert list(d["p_adj"]) + [p["p_adj"]] == pytest.approx(list(holm))
    assert set(d["m"]) == {5} and p["m"] == 5 and set(d["family"]) == {densecurves.FAMILY}
    # SEC later: the expected sign is −1, so a significant positive difference is not a reproduction
    assert d.set_index("loss").loc["triplet", "verdict"] in ("not reproduced", "inconclusive")
    assert int(p["n_losses"]) == 4 and p["n"] == 5


def _fake_tier(crossing: dict):
    """The convergence page's frames (4 losses × none/SEC × 2 seeds: full runs of 13,500 iterations evaluated every
    1,687 and C3's 2,000-iteration prefixes every 100) and C3b's 5,000-iteration prefixes in a follow-up folder, all
    of the same linear-then-flat curves crossing 90% of the final R@1 at ``crossing[variant]``; C3b's as its
    frames."""
    ident = dict(dataset="glyphs", model="smallcnn", width=16, head="paper", embed_dim=64, optimizer="adam", lr=3e-3,
                 mu="batch", momentum=1.0, batch_size=60, image_size=32, device="cpu")
    runs, evals, steps, dense, dense_evals, dense_steps = [], [], [], [], [], []

    def curve(t, v):
        return min(90.0, 90.0 * t / crossing[v] * 0.9) if t < crossing[v] else min(90.0, 81.0 + (t - crossing[v]) / 100)
    for loss in LOSSES:
        for v in ("none", "sec"):
            for s in (0, 1):
                row = dict(ident, loss=loss, variant=v, eta=0.0 if v == "none" else 1.0, seed=s, status="done")
                full, c3, c3b = f"{loss}{v}{s}", f"{loss}{v}{s}-c3", f"{loss}{v}{s}-c3b"
                runs += [dict(row, key=full, iterations=13500), dict(row, key=c3, iterations=2000)]
                dense.append(dict(row, key=c3b, iterations=5000))
                evals += [dict(key=full, step=t, **{"R@1": curve(t, v)}) for t in (*range(0, 13500, 1687), 13500)]
                evals += [dict(key=c3, step=t, **{"R@1": curve(t, v)}) for t in range(0, 2001, 100)]
                dense_evals += [dict(key=c3b, step=t, **{"R@1": curve(t, v)}) for t in range(0, 5001, 100)]
                for k, n in ((full, 13500), (c3, 2000)):
                    steps += [dict(key=k, step=t, loss_metric=1.0 / t) for t in range(20, n + 1, 20)]
                dense_steps += [dict(key=c3b, step=t, loss_metric=1.0 / t) for t in range(20, 5001, 20)]
    def frames(r, e, st):
        return Frames(runs=pd.DataFrame(r), steps=pd.DataFrame(st), tracked=pd.DataFrame(), evals=pd.DataFrame(e),
                      test_norms=pd.DataFrame(), cosines=pd.DataFrame(), grad_scatter=pd.DataFrame())
    return frames(runs, evals, steps), frames(dense, dense_evals, dense_steps)


def test_the_page_splices_c3bs_prefixes_in_place_of_c3s_and_measures_the_crossing(monkeypatch):
    frames, dense = _fake_tier({"none": 2500, "sec": 3300})
    monkeypatch.setattr(densecurves, "test_frames", lambda root=None: dense)
    ev = evidence.Evidence.from_frames({"convergence": frames}, profile="decisive")
    runs, evals, check = convergence.dense_frames(ev)
    assert len(runs) == 16 and (runs["iterations"] == 13500).all()
    c = check.set_index("key")
    assert set(c["prefix_key"].str.endswith("-c3b")) == {True} and set(c["prefix_last"]) == {5000}
    assert set(c["prefix_every"]) == {100} and set(c["logged_steps"]) == {250} and set(c["max |Δloss|"]) == {0.0}
    reach = convergence.reach_table(runs, evals)
    assert reach.groupby("variant")["reach"].mean().to_dict() == pytest.approx({"none": 2500.0, "sec": 3300.0})
    # with C3's 2,000-iteration prefixes the same curves are interpolated across the 1,687-iteration gap
    r3, e3, _ = convergence.splice_early(frames.runs[frames.runs["variant"].isin(["none", "sec"])], frames.evals)
    coarse = convergence.reach_table(r3, e3).groupby("variant")["reach"].mean()
    assert abs(coarse["none"] - 2500.0) > 50
    fam = convergence.dense_family(ev)
    assert fam["pooled"].iloc[0]["estimate"] == pytest.approx(800.0)     # no spread here: the family test is above
    assert set(fam["diffs"]["family"]) == {densecurves.FAMILY} and list(fam["diffs"]["loss"]) == list(LOSSES)
    said = convergence.dense_sentence(ev)
    assert "to iteration 5,000 and evaluated every 100 iterations there" in said
    assert "Every run reaches 90% of its final R@1 within its dense start" in said
    assert "And R@1 agrees exactly with C3's prefix of the same run at the 21 evaluations each pair shares." in said
    pairs = convergence.dense_pairs(ev, convergence.reach_table(r3, e3))
    assert len(pairs) == 16 and pairs.groupby("variant")["reach_C3b"].mean().to_dict() == pytest.approx(
        {"none": 2500.0, "sec": 3300.0})
    assert (pairs["reach_C3"] != pairs["reach_C3b"]).all()
    fig = sweeps.reach_pairs_figure(pairs)
    ax = fig.axes[0]
    points = np.concatenate([c.get_offsets() for c in ax.collections])
    assert len(points) == 16 and sorted(points[:, 1]) == pytest.approx(sorted(pairs["reach_C3b"]))
    (diag,) = ax.get_lines()
    assert diag.get_label() == "y = x" and list(diag.get_xdata()) == list(diag.get_ydata())
    with pytest.raises(ValueError, match=r"pairs lacks column\(s\) \['reach_C3b'\]"):
        sweeps.reach_pairs_figure(pairs.drop(columns="reach_C3b"))
    assert convergence.dense_ready(ev)


def test_c3b_has_no_evidence_on_another_tier_or_before_all_its_runs_are_committed(monkeypatch):
    frames, _ = _fake_tier({"none": 2500, "sec": 3300})
    quick = evidence.Evidence.from_frames({"convergence": frames}, profile="cpu")
    with pytest.raises(KeyError, match="C3b is a follow-up on the decisive tier's runs; the cpu tier has none"):
        convergence.dense_frames(quick)
    assert not convergence.dense_ready(quick) and convergence.dense_reading(quick) == ""
    assert convergence.dense_sentence(quick).startswith("C3b is a follow-up on the decisive tier's runs; this page "
                                                       "shows the cpu tier")

    def missing(root=None):
        raise KeyError("C3b's runs are not all committed yet: 12 of 40 are in data/followups/dense-curves/test")
    monkeypatch.setattr(densecurves, "test_runs", missing)           # test_frames reads it first
    ev = evidence.Evidence.from_frames({"convergence": frames}, profile="decisive")
    assert not convergence.dense_ready(ev)
    assert convergence.dense_sentence(ev) == ("**C3b has no evidence here yet.** C3b's runs are not all committed yet: "
                                             "12 of 40 are in data/followups/dense-curves/test.")


def test_c3b_is_on_the_scorecard_exactly_when_all_its_runs_are_committed():
    try:
        densecurves.test_runs()
        complete = True
    except KeyError:
        complete = False
    assert ("C3b" in {c.id for c in convergence.CLAIMS}) == complete
