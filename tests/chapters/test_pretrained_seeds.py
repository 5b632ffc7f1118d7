"""P1c on the pretrained page (sec_lib/chapters/pretrained_seeds.py, sec_lib/figures/regime.py): the status while its
runs train, read from the real (still empty) folder; a synthetic complete P1c, confirmed and not, checked against an
independent scipy computation; the line on another tier; the figure read back from its artists."""
import json
import math

import numpy as np
import pandas as pd
import pytest
from matplotlib.collections import PolyCollection
from scipy import stats

from sec_lib.chapters import pretrained_seeds as ps
from sec_lib.figures import regime as regime_fig
from sec_lib.runs import regimeseeds as rs
from sec_lib.runs.store import run_key

#: P1's registered record as the page gives it (hand-made: the sentences must carry it through, not recompute it).
OLD = {"estimate": -0.3996, "ci_lo": -0.6733, "ci_hi": -0.1260, "p_value": 0.0154, "p_adj": 0.0771, "m": 5, "n": 5,
       "verdict": "inconclusive"}


def synthetic_runs(effect, noise=0.15, seed=7):
    """Every one of P1c's registered runs (its real configs) with a made-up R@1: SEC gains 0.5 from scratch and
    0.5 + ``effect`` fine-tuned, plus noise; the committed columns key, config, seed and R@1."""
    rng = np.random.default_rng(seed)
    rows = []
    for c in rs.test_configs():
        ft = c.pretrained is not None
        gain = (0.5 + (effect if ft else 0.0)) if c.eta else 0.0
        rows.append({"key": run_key(c), "config": json.dumps(c.to_dict(), sort_keys=True), "seed": c.seed,
                     "R@1": 70.0 + 5 * ft + gain + noise * rng.standard_normal()})
    return pd.DataFrame(rows)


def independent(raw):
    """Per seed, the pooled interaction computed directly from the configs (the loss, SEC or not, pretrained or not),
    then the scipy one-sided t-test and the 95% t interval."""
    per = {}
    for cfg, seed, r1 in zip(raw["config"], raw["seed"], raw["R@1"]):
        c = json.loads(cfg)
        sign = (1 if c.get("eta") else -1) * (1 if c.get("pretrained") else -1)
        per[seed] = per.get(seed, 0.0) + sign * r1 / len(rs.LOSSES)
    x = np.array([per[s] for s in sorted(per)])
    half = stats.t.ppf(0.975, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x))
    return x, x.mean() - half, x.mean() + half, stats.ttest_1samp(x, 0.0, alternative="less").pvalue


@pytest.fixture(params=[(-0.4, "confirmed", "not reproduced"), (0.1, "not confirmed", "inconclusive")],
                ids=["confirmed", "not-confirmed"])
def complete(request, monkeypatch):
    effect, verdict, reading = request.param
    raw = synthetic_runs(effect)
    monkeypatch.setattr(rs, "test_runs", lambda root=None: raw)
    return raw, verdict, reading


def test_a_complete_p1c_gives_scipys_numbers_and_its_registered_verdict(complete):
    raw, verdict, reading = complete
    x, lo, hi, p = independent(raw)
    res = ps.result()
    assert res["seeds"] == len(x) == rs.N_SEEDS and res["new_seeds"] == list(rs.SEEDS)
    assert res["estimate"] == pytest.approx(x.mean()) and res["lo"] == pytest.approx(lo)
    assert res["hi"] == pytest.approx(hi) and res["p_one_sided"] == pytest.approx(p)
    assert (res["verdict"], res["P1"]) == (verdict, reading) and (p < 0.05) == (verdict == "confirmed")
    table = res["table"]
    new = table[table["group"] == f"seeds 5–14, {rs.ID}"].set_index("seed")
    old = table[table["group"] == "seeds 0–4, registered"].set_index("seed")
    assert list(new.index) == list(rs.SEEDS) and list(old.index) == [0, 1, 2, 3, 4]
    np.testing.assert_allclose(new["interaction"], x)
    np.testing.assert_allclose(new["interaction"], new["SEC − none, fine-tuned"] - new["SEC − none, from scratch"])
    np.testing.assert_allclose(old["interaction"], rs.committed_interaction().loc[old.index])
    g = res["groups"].set_index("group")
    assert g.loc[f"seeds 5–14, {rs.ID}", "estimate"] == pytest.approx(x.mean())
    assert g.loc[f"seeds 5–14, {rs.ID}", "ci_lo"] == pytest.approx(lo)


def test_the_complete_sentence_and_bullet_carry_the_numbers_the_verdict_and_the_earlier_test(complete, monkeypatch):
    raw, verdict, reading = complete
    x, lo, hi, p = independent(raw)
    monkeypatch.setattr(ps, "earlier", lambda ev: OLD)
    sec = ps.section("decisive", ev=None)
    for text in (sec.text, sec.bullet):
        assert f"{x.mean():+.2f} [{lo:+.2f}, {hi:+.2f}]" in text and f"p = {p:.2g}" in text
        assert f"**{verdict}**" in text and f"*{reading}*" in text
    assert f"{ps.result()['mde']:.2f}" in sec.text and "one-sided" in sec.text and "(5–14)" in sec.text
    assert "earlier registered test, P1's own on seeds 0–4, which keeps its verdict: -0.40 [-0.67, -0.13]" in sec.text
    assert "raw p 0.015, Holm p 0.077 over its family of 5: *inconclusive*" in sec.text
    assert ("opposite of P1's prediction" in sec.text) == (verdict == "confirmed")
    assert sec.bullet.startswith("- **") and "\n" not in sec.bullet
    assert len(sec.table) == 15 and list(sec.groups["n"]) == [5, 10]


def test_while_its_runs_train_the_page_counts_them_and_states_the_registered_plan():
    """The real folder while P1c trains: the count is the committed parquet's, the plan the registration's."""
    power = pytest.importorskip("statsmodels.stats.power")
    path = rs.folder() / "test" / "runs.parquet"
    k = len(pd.read_parquet(path, columns=["key"])) if path.exists() else 0
    if k == 160:
        pytest.skip("every P1c run is committed: this state is over (the complete one is tested on hand-made runs)")
    x = rs.committed_interaction().to_numpy()
    sd = x.std(ddof=1)
    mde = power.TTestPower().solve_power(nobs=10, alpha=0.05, power=0.8, alternative="larger") * sd
    sec = ps.section("decisive", ev=None)
    assert sec.table is None and sec.groups is None
    assert sec.text.startswith(f"**{rs.ID} is underway: {k} of 160 runs committed**" if k else
                               f"**{rs.ID} is registered; none of its 160 runs has trained yet**")
    assert f"{x.mean():+.2f} R@1 points with a per-seed SD of {sd:.2f}" in sec.text
    assert f"half of it, {abs(x.mean()) / 2:.2f} points" in sec.text and "one-sided" in sec.text
    assert f"10 seeds, {rs.ID}'s cap, which detect {mde:.2f} points" in sec.text
    assert "verdict waits for all 160 runs" in sec.text and "(5–14)?" in sec.text
    assert f"{k} of 160 committed" in sec.bullet and "not on the scorecard yet" in sec.bullet
    assert ps.verdict_bullet(None, OLD).endswith("P1 keeps its registered verdict, *inconclusive*.")


def test_p1s_registered_record_is_the_committed_seeds_interaction():
    """The earlier test beside P1c is P1's record on the page's evidence: on the decisive tier, seeds 0-4."""
    from sec_lib.chapters import evidence
    ev = evidence.page_evidence("pretrained", "decisive")
    old = ps.earlier(ev)
    x = rs.committed_interaction().to_numpy()
    assert old["n"] == len(x) == 5 and old["estimate"] == pytest.approx(x.mean())
    assert old["p_value"] == pytest.approx(stats.ttest_1samp(x, 0.0).pvalue) and old["m"] == 5
    assert old["p_adj"] >= old["p_value"] and old["verdict"] == "inconclusive"


@pytest.mark.parametrize("profile", ["smoke", "cpu", "cub"])
def test_another_tier_shows_one_line_and_no_bullet(profile):
    sec = ps.section(profile, ev=None)
    assert "\n" not in sec.text and f"the {profile} tier" in sec.text and rs.ID in sec.text
    assert sec.table is None and sec.bullet == ""
    with pytest.raises(ValueError, match="valid values"):
        ps.section("imagenet", ev=None)
    with pytest.raises(ValueError, match="applies to the decisive tier"):
        ps.absent_line("decisive")


def test_bad_input_is_refused_naming_the_valid_choices():
    runs = pd.DataFrame({"seed": [5], "loss": ["ms"], "arm": ["l2reg"], "regime": ["fine-tuned"], "R@1": [1.0]})
    with pytest.raises(ValueError, match=r"valid: \['none', 'sec'\]"):
        ps.per_seed(runs)
    with pytest.raises(ValueError, match="lacks columns"):
        ps.per_seed(runs.drop(columns="regime"))
    res = {"estimate": 0.0, "lo": -1, "hi": 1, "p_one_sided": 0.5, "seeds": 10, "mde": 0.2, "verdict": "maybe",
           "P1": "x"}
    with pytest.raises(ValueError, match="expected one of"):
        ps.result_sentence(res, OLD)
    assert ps.seeds_text([5, 6, 7]) == "5–7" and ps.seeds_text([0, 2]) == "0 and 2"


def test_the_figure_draws_every_seed_and_both_groups_intervals_around_0(complete):
    res = ps.result()
    table, groups = res["table"], res["groups"]
    fig = regime_fig.seeds_figure(table, groups)
    ax = fig.axes[0]
    by_gid = {a.get_gid(): a for a in [*ax.lines, *ax.collections] if a.get_gid()}
    drawn = []
    for name, sub in table.groupby("group", sort=False):
        dots = by_gid[f"seeds:{name}"]
        drawn += list(dots.get_xdata())
        np.testing.assert_allclose(dots.get_ydata(), sub.sort_values("seed")["interaction"])
        g = groups.set_index("group").loc[name]
        band = by_gid[f"interval:{name}"]
        assert isinstance(band, PolyCollection)
        ys = band.get_paths()[0].vertices[:, 1]
        assert ys.min() == pytest.approx(g["ci_lo"]) and ys.max() == pytest.approx(g["ci_hi"])
        np.testing.assert_allclose(by_gid[f"mean:{name}"].get_ydata(), g["estimate"])
    assert sorted(drawn) == list(range(15))
    lo, hi = ax.get_ylim()
    assert lo < min(0, table["interaction"].min(), groups["ci_lo"].min())
    assert hi > max(0, table["interaction"].max(), groups["ci_hi"].max())
    assert hi - lo < 1.5 * (max(0, table["interaction"].max(), groups["ci_hi"].max())
                            - min(0, table["interaction"].min(), groups["ci_lo"].min()))     # fitted, not padded out
    cap = regime_fig.seeds_caption(table, groups)
    assert "(10 seeds)" in cap and "(5 seeds)" in cap and f"{groups['estimate'].iloc[1]:+.2f}" in cap
    with pytest.raises(ValueError, match="lacks groups"):
        regime_fig.seeds_figure(table, groups.iloc[:1])


def test_its_claim_carries_p1s_reading_of_the_registered_result(complete):
    """pretrained_seeds.CLAIM, decided by the scorecard's machinery, carries the new seeds' interval, the one-sided p
    and P1's registered reading as its verdict; on another tier it has no evidence."""
    from sec_lib.chapters.evidence import Evidence
    from sec_lib.report.claims import decide
    raw, verdict, reading = complete
    x, lo, hi, p = independent(raw)
    (rec,) = decide([ps.CLAIM], Evidence.from_frames({"pretrained": None}, "decisive"))
    assert rec.id == "P1c" and rec.page == "pretrained" and rec.m == 1
    assert (rec.estimate, rec.ci_lo, rec.ci_hi, rec.p_adj) == pytest.approx((x.mean(), lo, hi, p))
    assert rec.verdict == reading and f"P1c is {verdict}" in rec.note
    (none,) = decide([ps.CLAIM], Evidence.from_frames({"pretrained": None}, "cpu"))
    assert none.verdict == "not testable offline"


def test_p1c_joins_the_scorecard_with_its_committed_runs_not_before():
    from sec_lib.chapters import pretrained
    try:
        rs.test_runs()
        committed = True
    except KeyError:
        committed = False
    ids = {c.id for c in pretrained.CLAIMS}
    if committed:
        assert rs.ID in ids, "P1c's runs are committed: add pretrained_seeds.CLAIM to pretrained.CLAIMS"
    else:
        assert rs.ID not in ids


def test_the_landing_page_gives_p1cs_result_in_plain_words_once_complete(complete):
    """After P1's line on the landing page: the new seeds' interval and one-sided p (scipy's), what the registered
    result means for P1 in the scorecard's word, and the detectable effect where it is not confirmed; nothing on
    another tier."""
    from sec_lib.chapters import home
    raw, verdict, reading = complete
    x, lo, hi, p = independent(raw)
    text = ps.fresh_seeds_sentence("decisive")
    assert text.startswith(f"On fresh seeds (5–14), a follow-up registered before its runs trained ({rs.ID}) reads "
                           f"{x.mean():+.2f} [{lo:+.2f}, {hi:+.2f}] R@1 points over 10 seeds (one-sided p = {p:.2g})")
    assert f"**{reading}**" in text and ("could have gone unseen" in text) == (verdict != "confirmed")
    assert ("it confirms that SEC gains less when fine-tuning" in text) == (verdict == "confirmed")
    assert f"{ps.result()['mde']:.2f} points" in text or verdict == "confirmed"
    assert ps.fresh_seeds_sentence("cpu") == ""
    with pytest.raises(ValueError, match="'confirmed'"):
        ps.fresh_seeds_sentence("decisive", res={**ps.result(), "verdict": "maybe"})

    class Rec:                      # P1's record as the landing page gets it: decided on the decisive tier
        has_estimate, tier = True, "decisive"
    assert home.regime_followup(Rec()) == text
    Rec.tier = "cpu"
    assert home.regime_followup(Rec()) == "" == home.regime_followup(None)


def test_while_p1c_trains_the_landing_page_keeps_its_words(monkeypatch):
    def missing(root=None):
        raise KeyError("P1c's runs are not all committed")
    monkeypatch.setattr(rs, "test_runs", missing)
    assert ps.fresh_seeds_sentence("decisive") == ps.PENDING == "A registered follow-up on fresh seeds (P1c) will decide it."


def test_the_readme_line_says_whether_fresh_seeds_confirm_the_hint_once_complete(complete, monkeypatch):
    raw, verdict, reading = complete
    x, lo, hi, _ = independent(raw)
    text = ps.readme_brief("decisive")
    assert text.startswith("On fresh seeds, the runs " + ("confirm" if verdict == "confirmed" else "do not confirm"))
    assert text.endswith(f"({x.mean():+.2f} [{lo:+.2f}, {hi:+.2f}] R@1 points).") and ps.readme_brief("cpu") == ""
    with pytest.raises(ValueError, match="'confirmed', 'not confirmed'"):
        ps.readme_brief("decisive", res={**ps.result(), "verdict": "maybe"})

    def missing(root=None):
        raise KeyError("P1c's runs are not all committed")
    monkeypatch.setattr(rs, "test_runs", missing)
    assert ps.readme_brief("decisive") == ""


def test_the_pretrained_page_gives_p1cs_words_under_its_answer_before_its_figure():
    """The page's answer cell shows P1c's sentence right after P1's answer, on the first screen, not only in P1c's own
    section further down."""
    from pathlib import Path
    cells = json.loads((Path(__file__).resolve().parents[2] / "notebooks" / "pretrained.ipynb").read_text())["cells"]
    src = ["".join(c["source"]) for c in cells]
    answer = next(i for i, s in enumerate(src) if "pretrained.answer_sentence(eff, fam)" in s)
    figure = next(i for i, s in enumerate(src) if "interaction_figure(" in s)
    assert "pretrained_seeds.fresh_seeds_sentence(T)" in src[answer] and answer < figure
