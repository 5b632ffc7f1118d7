"""The two-part verdict (DESIGN.md, after LeBel et al. 2019): a signal, sized against the paper's values; the loss ×
arm test of a pooled row; the family rule's word beside a registered one; a failed no-change claim's direction."""
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from sec_lib import report as R
from sec_lib.report.claims import Claim, decide

PAPER = (1.66, 7.48)       # C4v's: the paper's per-loss, per-dataset SEC − none gains


@pytest.mark.parametrize("lo,hi,sign,paper,want", [
    (0.34, 0.65, +1, PAPER, "smaller than claimed"),          # C4v on the committed tier
    (0.34, 1.66, +1, PAPER, "reproduced"),                    # reaching the smallest value counts as consistent
    (0.34, 1.659, +1, PAPER, "smaller than claimed"),
    (2.0, 3.0, +1, PAPER, "reproduced"),
    (7.0, 9.0, +1, PAPER, "reproduced"),
    (7.49, 9.0, +1, PAPER, "larger than claimed"),
    (7.48, 9.0, +1, PAPER, "reproduced"),                     # the largest value, inclusive
    (0.34, 0.65, +1, None, "reproduced"),                     # no size in the paper: today's word
    (0.34, 0.65, +1, [], "reproduced"),
    (-0.65, -0.34, -1, (-7.48, -1.66), "smaller than claimed"),   # a decrease, sized in its own direction
    (-9.0, -7.6, -1, (-7.48, -1.66), "larger than claimed"),
    (0.34, 0.65, +1, 4.29, "smaller than claimed"),           # one value
])
def test_size_words_at_their_boundaries(lo, hi, sign, paper, want):
    assert R.size_word(lo, hi, sign, paper) == want
    assert R.verdict((lo + hi) / 2, lo, hi, sign, 0.3, n=5, p_adj=0.001, paper=paper) == want


@pytest.mark.parametrize("est,lo,hi,margin,p_adj,p_eq,want", [
    (0.49, 0.34, 0.65, 0.5, 0.001, 0.45, "smaller than claimed"),     # crosses the margin: a sized signal
    (0.3, 0.1, 0.45, 0.5, 0.001, 0.01, "negligible"),                 # a signal inside ±margin
    (0.3, 0.1, 0.45, 0.5, 0.001, 0.2, "inconclusive"),                # ... whose equivalence fails after Holm
    (0.05, -0.11, 0.20, 0.5, 0.5, 0.001, "not reproduced"),           # no effect (C5v)
    (-0.4, -0.67, -0.13, 0.5, 0.015, 0.2, "not reproduced"),          # the wrong side, p passes: opposite (P1 alone)
    (-0.4, -0.67, -0.13, 0.5, 0.077, 0.2, "inconclusive"),            # ... not after Holm over 5 (P1 registered)
    (-0.8, -1.1, -0.55, 0.5, 0.001, 1.0, "not reproduced"),
    (0.49, 0.34, 0.65, 0.5, 0.077, 0.45, "inconclusive"),             # a signal that Holm takes away
    (0.49, -0.1, 1.2, 0.5, 0.3, 0.9, "inconclusive"),
])
def test_signal_words_on_hand_made_intervals(est, lo, hi, margin, p_adj, p_eq, want):
    assert R.verdict(est, lo, hi, +1, margin, n=5, p_adj=p_adj, p_eq_adj=p_eq, paper=PAPER) == want


def test_an_estimate_that_grows_with_more_seeds_does_not_flip_to_not_reproduced():
    """The old rule ran backwards: the same mean with a shrinking interval went from 'reproduced' to 'not
    reproduced'. Now it goes from 'smaller than claimed' to 'negligible' (a signal too small), never 'no effect'."""
    words = []
    for half in (0.15, 0.05, 0.01):
        lo, hi = 0.45 - half, 0.45 + half
        words.append(R.verdict(0.45, lo, hi, +1, 0.5, n=30, p_adj=1e-6, p_eq_adj=1e-3, paper=PAPER))
    assert words == ["smaller than claimed", "negligible", "negligible"]


def test_refine_sizes_only_a_reproduced_word():
    assert R.refine("reproduced", 0.34, 0.65, +1, PAPER) == "smaller than claimed"
    for w in ("not reproduced", "inconclusive", "negligible", "not testable offline"):
        assert R.refine(w, 0.34, 0.65, +1, PAPER) == w
    assert R.refine("reproduced", 0.34, 0.65, +1, None) == "reproduced"
    with pytest.raises(ValueError, match="finite"):
        R.paper_range_of([1.0, float("nan")])


# -- the loss × arm test -------------------------------------------------------------------------------------------

def _runs(gains, seeds=5, noise=0.1, seed=0):
    rng = np.random.default_rng(seed)
    return pd.DataFrame([{"loss": l, "seed": s, "variant": v, "status": "done",
                          "R@1": 70 + rng.normal(0, 1) * 0 + (g if v == "sec" else 0) + rng.normal(0, noise)}
                         for s in range(seeds) for l, g in gains.items() for v in ("none", "sec")])


def test_a_pooled_row_of_losses_that_differ_is_flagged_and_names_the_one_apart():
    out = R.pooled_diff(_runs({"triplet": 0.6, "semihard": 0.7, "npair": 0.65, "ms": -0.3}), "variant", "none", "sec",
                        "R@1")
    assert out["groups_differ"] and out["groups_p"] < 1e-3
    assert out["apart"].startswith("ms stands apart: -0.")
    equal = R.pooled_diff(_runs({"triplet": 0.5, "semihard": 0.5, "npair": 0.5, "ms": 0.5}), "variant", "none", "sec",
                          "R@1")
    assert not equal["groups_differ"] and equal["apart"] == "" and equal["groups_p"] > 0.05


def test_the_loss_by_arm_test_is_a_repeated_measures_anova():
    anova = pytest.importorskip("statsmodels.stats.anova")
    rng = np.random.default_rng(3)
    d = pd.DataFrame([{"seed": s, "group": g, "diff": m + rng.normal(0, 0.4) + 0.3 * s}
                      for s in range(6) for g, m in (("a", 0.1), ("b", 0.5), ("c", 0.2), ("d", 0.9))])
    got = R.groups_differ(d)
    res = anova.AnovaRM(d, "diff", "seed", within=["group"]).fit().anova_table
    assert got["groups_p"] == pytest.approx(float(res["Pr > F"].iloc[0]), rel=1e-9)
    assert got["group_means"]["d"] == pytest.approx(d[d.group == "d"]["diff"].mean())
    assert math.isnan(R.groups_differ(d[d.group == "a"])["groups_p"])      # one group: no test


# -- records: the paper's size, the family rule, which way a no-change claim failed ----------------------------------

class _Ev:
    def __init__(self, values):
        self.values = values


def _claim(cid, values, sign=+1, **kw):
    def estimate(ev):
        x = np.asarray(values, float)
        lo, hi = stats.t.interval(0.95, len(x) - 1, loc=x.mean(), scale=stats.sem(x))
        return {"estimate": x.mean(), "ci_lo": lo, "ci_hi": hi, "n": len(x),
                "p_value": stats.ttest_1samp(x, 0).pvalue}
    return Claim(id=cid, claim=cid, estimate=estimate, expected_sign=sign, page="p", **kw)


def test_a_record_carries_the_papers_size_and_its_text():
    c = _claim("C", [0.4, 0.5, 0.6, 0.45, 0.55], paper_size=lambda: [1.66, 7.48, 3.0],
               paper_size_text=lambda v: f"the paper's {min(v):.1f}–{max(v):.1f} on CUB, Cars, SOP and In-Shop")
    (r,) = decide([c], _Ev(None))
    assert r.verdict == "smaller than claimed" and r.paper_range == (1.66, 7.48)
    assert r.paper_size_text == "the paper's 1.7–7.5 on CUB, Cars, SOP and In-Shop"
    (plain,) = decide([_claim("D", [0.4, 0.5, 0.6, 0.45, 0.55])], _Ev(None))
    assert plain.verdict == "reproduced" and plain.paper_range is None


def test_the_family_rule_shows_its_word_beside_a_registered_pooled_row():
    pooled = _claim("P", [-0.23, -0.11, -0.53, -0.65, -0.48], family="F", pooled=True, margin=0.5)
    comps = [_claim(f"P{i}", v, family="F", margin=0.5) for i, v in enumerate(
        ([0.1, -0.3, 0.2, 0.0, -0.1], [0.3, -0.2, 0.1, 0.2, -0.4], [0.0, 0.1, -0.2, 0.3, 0.1], [-0.1, 0.2, 0.0, 0.1, 0.3]))]
    recs = {r.id: r for r in decide([pooled, *comps], _Ev(None))}
    p = recs["P"]
    assert p.m == 5 and p.verdict == "inconclusive" and p.rule_verdict == "not reproduced"
    assert all(recs[f"P{i}"].rule_verdict == "" for i in range(4))     # only pooled rows are re-read


def test_a_directional_claim_that_fails_on_the_wrong_side_says_so_in_its_words():
    slower = ("SEC takes longer",)
    (wrong,) = decide([_claim("C3", [480, 350, 600, 520, 410], sign=-1, unit="iterations", failed_words=slower)],
                      _Ev(None))
    assert wrong.verdict == "not reproduced" and wrong.reading == "SEC takes longer"
    (unsure,) = decide([_claim("C3", [480, -350, 600, -520, 410], sign=-1, unit="iterations", failed_words=slower)],
                       _Ev(None))
    assert unsure.verdict == "inconclusive" and unsure.reading == ""
    (held,) = decide([_claim("C3", [-480, -350, -600, -520, -410], sign=-1, unit="iterations",
                             failed_words=slower)], _Ev(None))
    assert held.verdict == "reproduced" and held.reading == ""


def test_a_failed_no_change_claim_says_which_way_it_failed():
    words = ("a running mean does better than the batch mean", "the batch mean does better than a running mean")
    (below,) = decide([_claim("Q1", [-1.2, -1.6, -1.4, -1.7, -1.5], sign=0, failed_words=words)], _Ev(None))
    assert below.verdict == "not reproduced" and below.reading == words[1]
    (above,) = decide([_claim("Q1", [1.2, 1.6, 1.4, 1.7, 1.5], sign=0, failed_words=words)], _Ev(None))
    assert above.reading == words[0]
    (held,) = decide([_claim("Q1", [0.1, -0.1, 0.05, 0.0, -0.05], sign=0, failed_words=words)], _Ev(None))
    assert held.verdict == "reproduced" and held.reading == ""


# -- on the committed decisive tier --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def committed():
    """The records of the compare, pretrained and μ pages as the book decides them on the committed decisive tier."""
    from sec_lib.chapters import evidence
    out = {}
    for page in ("compare", "pretrained", "mu"):
        out.update({r.id: r for r in evidence.page_records(page, evidence.page_evidence(page, "cpu"))})
    if out["C4v"].tier != "decisive":
        pytest.skip("the decisive tier is not in this checkout")
    return out


def test_the_primary_test_reads_smaller_than_claimed_and_names_the_loss_apart(committed):
    r = committed["C4v"]
    assert r.evidence == "+0.49 [+0.34, +0.65]" and r.verdict == "smaller than claimed"
    assert r.paper_range == pytest.approx((1.66, 7.48))
    assert r.paper_size_text == "the paper's gains of +1.7 to +7.5 R@1 points on CUB, Cars, SOP and In-Shop (Table 1)"
    assert r.extra["groups_differ"] and r.extra["groups_p"] == pytest.approx(0.018, abs=0.001)
    assert r.extra["apart"].startswith("ms stands apart: -0.01 against +0.61 to +0.69")


def test_sec_against_l2_reg_at_the_held_out_arms_is_a_claim_of_its_own(committed):
    r = committed["C5v"]
    assert r.evidence == "+0.05 [-0.11, +0.20]" and r.verdict == "not reproduced" and r.m == 1
    assert r.added.startswith("added after the runs") and r.family == "SEC − L2-reg, held-out arms"
    assert committed["C5"].evidence == "-0.05 [-0.38, +0.27]"               # the paper's η, named as such
    assert "paper's η" in committed["C5"].statement


def test_the_regime_interaction_shows_its_registered_word_and_the_rules(committed):
    r = committed["P1"]
    assert r.verdict == "inconclusive" and r.m == 5 and r.rule_verdict == "not reproduced"
    from sec_lib.report.claims import badge
    assert "(registered; under the family rule, this row alone: not reproduced)" in badge(r)


def test_q1_says_the_batch_mean_does_better(committed):
    r = committed["Q1"]
    assert r.verdict == "not reproduced" and r.reading == "the batch mean does better than a running mean"


def test_the_landing_answer_sets_sec_against_the_paper_and_l2_reg(committed):
    from sec_lib.chapters import home
    e = {"estimate": committed["C4v"].estimate, "ci_lo": committed["C4v"].ci_lo, "ci_hi": committed["C4v"].ci_hi,
         "n": committed["C4v"].n, "record": committed["C4v"], "versus_l2": committed["C5v"], "relative": None}
    s = home.answer_sentence(e, home.paper_headline())
    assert s.startswith("**On glyphs, SEC's effect on R@1 is real but smaller than the paper reports: +0.49 [+0.34, "
                        "+0.65] points")
    assert "A plain L2 penalty toward zero does as well." in s
    assert "SEC − L2-reg at the held-out arms: +0.05 [-0.11, +0.20] (claim C5v, *not reproduced*" in s
    assert "ms stands apart" in s
    block = home.answer_block(e, home.paper_headline())        # the same sentence, marked, with the primary's badge
    assert block.startswith('<div class="page-answer"><p><b>On glyphs, SEC\'s effect on R@1 is real but smaller')
    assert "(claim C5v, <i>not reproduced</i>" in block and "**" not in block
    assert 'data-claim="C4v" data-verdict="smaller than claimed"' in block and block.count("+0.49 [+0.34, +0.65]") >= 2


def test_the_scorecard_counts_questions_once_with_their_rows_beneath():
    from sec_lib.chapters import claims
    ids = ["C3", "C3b", "C4", "C4v", "C4a", "C5", "C5v", "Q2", "Q6b", "Q6c", "Q6d", "Q8a", "Q8a-r", "Q10a", "Q10b",
           "Q1", "Q9"]
    words = {"C3": "inconclusive", "C3b": "not reproduced", "C4": "reproduced", "C4v": "smaller than claimed",
             "C4a": "inconclusive", "C5": "not reproduced", "C5v": "not reproduced", "Q2": "inconclusive",
             "Q6b": "not reproduced", "Q6c": "not reproduced", "Q6d": "reproduced", "Q8a": "reproduced",
             "Q8a-r": "reproduced", "Q10a": "reproduced", "Q10b": "reproduced", "Q1": "not reproduced",
             "Q9": "inconclusive"}
    table = pd.DataFrame({"claim": ids, "text": ids, "verdict": [words[i] for i in ids], "tier": "decisive"})
    qs = claims.questions(table).set_index("key")
    assert qs.loc["C3", "decides"] == "C3b" and qs.loc["C3", "beneath"] == ["C3"]       # the follow-up decides
    assert qs.loc["Q6", "decides"] == "Q6d" and qs.loc["C4", "decides"] == "C4v"
    assert qs.loc["C4", "group"] == "holds in direction, smaller than the paper's"
    assert qs.loc["C5", "beneath"] == ["C5v", "Q2"] and qs.loc["Q10", "beyond"]
    assert claims.question_counts(claims.questions(table)) == {
        "holds": 2, "holds in direction, smaller than the paper's": 1, "fails": 3, "undecided": 1}   # Q10 apart
    assert claims.rows_beneath(claims.questions(table)) == 15        # 17 rows, Q10's 2 apart
    s = claims.questions_sentence(claims.questions(table), table)
    assert "7 in all: **2** hold, **1** holds in direction but is smaller than the paper's, **3** fail, **1** is " \
           "undecided" in s and "15 rows lie beneath them" in s and "on which the paper made no claim" in s


def test_the_scale_page_names_the_contrasts_whose_losses_differ():
    from sec_lib.chapters import scale
    fam = pd.DataFrame([{"comparison": "SEC − relative SEC", "groups_p": 0.01, "apart": "npair stands apart: -0.82 "
                         "against -0.1 to +0.58 for the others"},
                        {"comparison": "L2-reg − none", "groups_p": 0.4, "apart": ""}])
    s = scale.losses_differ_sentence(fam)
    assert "SEC − relative SEC (loss × arm test p = 0.01: npair stands apart" in s and "L2-reg" not in s
    assert scale.losses_differ_sentence(fam.assign(groups_p=0.5)) == ""


def test_the_landing_pages_regime_line_gives_both_words(committed):
    from sec_lib.chapters import home
    s = home.regime_sentence(committed["P1"])
    assert "**inconclusive**" in s and "under the book's family rule (a pooled row alone) it reads **not reproduced**" in s
    assert home.regime_sentence(committed["P1"], "Then P1c.") == s + " Then P1c."    # its follow-up's words, after it


def test_the_landing_first_screen_answers_in_plain_words_and_the_claims_follow_below_the_figure(committed):
    from sec_lib.chapters import home
    e = {"estimate": committed["C4v"].estimate, "ci_lo": committed["C4v"].ci_lo, "ci_hi": committed["C4v"].ci_hi,
         "n": committed["C4v"].n, "record": committed["C4v"], "versus_l2": committed["C5v"], "relative": None}
    paper = home.paper_headline()
    plain = home.plain_answer_text(e, paper)
    assert plain.startswith(home.answer_sentence(e, paper).partition(".**")[0])     # the same bold sentence
    assert "A plain L2 penalty toward zero does as well (SEC − L2: +0.05 [-0.11, +0.20] points)." in plain
    assert "ms stands apart" in plain
    for jargon in ("claim", "C4v", "C5v", "tier", "family", "Holm"):                 # nothing the glossary must explain
        assert jargon not in plain, jargon
    block = home.answer_block(e, paper, details=False)
    assert block.startswith('<div class="page-answer" data-figure="first-screen"><p><b>On <a href="data.html" '
                            f'title="{home.GLYPHS_TITLE}">glyphs</a>, SEC')       # the newcomer's word, linked
    assert "data-claim" not in block and 'is <span data-verdict="smaller than claimed">real but smaller' in block
    details = home.answer_details(e)                                                # below the figure
    assert "(claim C5v, <i>not reproduced</i>" in details and 'data-claim="C4v"' in details


def test_a_gains_tables_reproduced_r1_rows_are_sized_against_the_papers_gains_for_their_loss_and_arm():
    """The compare page's tables say what the scorecard says: a per-loss R@1 signal wholly below the paper's smallest
    Table 1 gain for that loss and arm reads *smaller than claimed*; a row that reaches the paper's range, another
    metric, a loss or baseline the paper does not report, and the other words stay."""
    from sec_lib import reference
    from sec_lib.chapters import gains
    assert gains.paper_sizes("triplet", "sec") == reference.paper_gain_values("none", "sec", "triplet")
    assert gains.paper_sizes("npair", "sec, selected η") == gains.paper_sizes("npair", "sec") != []
    assert gains.paper_sizes("ms", "l2reg") == reference.paper_gain_values("none", "l2reg", "ms")
    assert gains.paper_sizes("tml", "sec") == gains.paper_sizes("triplet", "sec", "l2reg") == []
    assert gains.paper_sizes("triplet", "sec-relative") == []
    lo_t = min(gains.paper_sizes("triplet", "sec"))               # 3.17: the paper's smallest triplet gain
    rows = pd.DataFrame([
        ("triplet", "sec", "none", "R@1", 0.47, 0.75, "reproduced"),      # below every paper gain
        ("triplet", "sec", "none", "R@1", 0.5, lo_t + 0.1, "reproduced"),  # reaches the paper's range
        ("triplet", "sec", "none", "NMI", 0.47, 0.75, "reproduced"),      # not the primary metric
        ("tml", "sec", "none", "R@1", 0.47, 0.75, "reproduced"),          # no paper row
        ("triplet", "sec", "l2reg", "R@1", 0.47, 0.75, "reproduced"),     # another baseline
        ("semihard", "sec", "none", "R@1", -0.2, 0.75, "inconclusive")],  # not a signal
        columns=["loss", "variant", "baseline", "metric", "ci_lo", "ci_hi", "verdict"]).assign(expected_sign=1)
    assert gains.sized_verdicts(rows) == ["smaller than claimed", "reproduced", "reproduced", "reproduced",
                                          "reproduced", "inconclusive"]
    bare = rows.drop(columns=["variant", "baseline"]).iloc[:1]           # a page's SEC − none rows (review.sec_rows)
    assert gains.sized_verdicts(bare, variant="sec") == ["smaller than claimed"]


def test_the_compare_pages_per_loss_rows_and_q11c_are_sized_on_the_decisive_tier(committed):
    from sec_lib.chapters import compare, evidence, npair
    ev = evidence.page_evidence("compare", "cpu")
    tuned = compare.sec_gain(ev.frames("tuned"), variants=("sec",), metrics=("R@1",)).set_index("loss")
    assert tuned.loc["triplet", "ci_lo"] > 0 and tuned.loc["triplet", "ci_hi"] < 3.17
    assert list(tuned.loc[["triplet", "semihard", "npair"], "verdict"]) == ["smaller than claimed"] * 3
    assert tuned.loc["ms", "verdict"] == "inconclusive"
    main = compare.sec_gain(ev.frames("compare"), variants=("sec",), metrics=("R@1",)).set_index("loss")
    for c, loss in zip("abcd", compare.ex.MAIN_LOSSES):  # the table at the paper's η says what each claim C4a-d says
        assert main.loc[loss, "verdict"] == committed[f"C4{c}"].verdict
    recs = {r.id: r for r in evidence.page_records("npair", evidence.page_evidence("npair", "cpu"))}
    q = recs["Q11c"]
    assert q.evidence == "+0.68 [+0.35, +1.00]" and q.verdict == "smaller than claimed"
    assert q.paper_size_text == "the paper's gains of +2.2 to +4.6 R@1 points on CUB, Cars, SOP and In-Shop (Table 1)"
    rows = npair.verdict_rows(evidence.page_evidence("npair", "cpu").runs(npair.SWEEP)).set_index("loss")
    assert rows.loc["npair", "verdict"] == "smaller than claimed"
    assert "smaller than claimed" not in set(rows.drop(index="npair")["verdict"])     # Sohn's readings: no paper size


def test_a_span_without_an_interval_reads_unsigned_and_an_estimate_keeps_its_sign():
    """Q9's estimate is the decades of η its gain spans: '0.0 decades', not '+0.000'; other units keep their sign."""
    span = Claim(id="Q9", claim="wide", expected_sign=+1, page="eta", unit="decades",
                 estimate=lambda ev: {"estimate": 0.0, "ci_lo": math.nan, "ci_hi": math.nan, "n": 3,
                                      "p_value": math.nan, "m": 25, "verdict": "inconclusive"})
    (r,) = decide([span], _Ev(None))
    assert r.evidence == "0.0" and r.verdict == "inconclusive"
    (two,) = decide([_claim("C", [0.4, 0.5, 0.6, 0.45, 0.55])], _Ev(None))
    assert two.evidence == "+0.50 [+0.40, +0.60]"                    # scipy: t(4) interval of the five


def test_iterations_read_in_whole_steps():
    c = Claim(id="C3", claim="faster", expected_sign=-1, page="convergence", unit="iterations",
              estimate=lambda ev: {"estimate": 483.41, "ci_lo": 172.69, "ci_hi": 794.13, "n": 5, "p_value": 0.01,
                                   "mde": 956.85})
    (r,) = decide([c], _Ev(None))
    assert r.evidence == "+483 [+173, +794]" and r.detectable == "≥ 957"


def test_a_narrow_interval_gets_the_decimals_that_keep_it_apart_from_its_estimate():
    narrow = Claim(id="Q10g", claim="gap", expected_sign=0, page="fairness", unit="r",
                   estimate=lambda ev: {"estimate": 0.0027, "ci_lo": 0.0023, "ci_hi": 0.0031, "n": 5, "p_value": 0.01})
    (r,) = decide([narrow], _Ev(None))
    assert r.evidence == "+0.0027 [+0.0023, +0.0031]"                    # not '+0.003 [+0.002, +0.003]'
    (wide,) = decide([_claim("C", [0.4, 0.5, 0.6, 0.45, 0.55])], _Ev(None))
    assert wide.evidence == "+0.50 [+0.40, +0.60]"


def test_the_eta_pages_row_at_the_papers_eta_is_sized_as_the_compare_page_sizes_it():
    """At the paper's η for a loss the η page's row is the paper's Table 1 setting, and a signal below its gains reads
    smaller than claimed; at another η, which the paper does not report, and for another metric, the word stays."""
    from sec_lib.chapters import eta
    from sec_lib.runs.experiments import ETA_SEC
    rows = pd.DataFrame({"loss": ["triplet", "triplet", "npair"], "eta": [ETA_SEC["triplet"], 0.1, 0.005],
                         "verdict": ["reproduced", "reproduced", "not reproduced"], "ci_lo": [0.41, 0.41, -0.73],
                         "ci_hi": [0.57, 0.57, -0.50]})
    assert eta.at_papers_eta_sized(rows)["verdict"].tolist() == ["smaller than claimed", "reproduced", "not reproduced"]
    assert eta.at_papers_eta_sized(rows, "NMI")["verdict"].tolist() == rows["verdict"].tolist()
    fam = {"grid": pd.DataFrame({"eta": [0.1, 1.0], "estimate": [0.3, 0.2], "ci_lo": [-0.1, -0.2], "ci_hi": [0.7, 0.6],
                                 "verdict": ["inconclusive"] * 2, "m": [5, 5], "n": [3, 3], "mde": [1.4, 2.0]}),
           "diffs": eta.at_papers_eta_sized(rows)}
    said = eta.answer_sentence(fam)
    assert ("reproduced: 1 (triplet at η = 0.1); smaller than claimed: 1 (triplet at η = 1: the paper's η, set "
            "against its Table 1 gains for the loss); not reproduced: 1 (npair at η = 0.005)") in said
