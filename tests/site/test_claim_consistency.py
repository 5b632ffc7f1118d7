"""One claim, one verdict: every page that states a claim's verdict takes it from the one
record its owning page decides, so an id carries the same verdict on every page of the book.

Pages mark each verdict they state with ``data-claim`` / ``data-verdict`` (the badge of
:func:`sec_lib.report.claims.badge`, and the claims page's rows). Two checks:

* on the committed reference tier (profile ``cpu`` with an empty quick store: each page reads the
  reference tier where it holds the page's runs, and has no evidence where it does not), every page's
  claims box (from that page's own evidence object, as its notebook makes it), the claims page's
  scorecard and the landing page's primary-test badge are rendered, and compared;
* in the smoke book that ``test_book.py`` builds, every built page is read the same way.
"""
import dataclasses
import subprocess
from pathlib import Path

import pytest

from sec_lib.chapters import claims, evidence, home
from sec_lib.report.claims import ClaimRecord, badge, check_built_book, split_verdicts, stated_verdicts


def one_verdict_each(pages: dict[str, str]) -> dict:
    """{claim id: {verdict: [pages]}} for every id marked on ``pages`` ({page: html})."""
    return stated_verdicts(pages)


def record(verdict="reproduced") -> ClaimRecord:
    return ClaimRecord(id="C9", statement="s", page="p", href="p.html", family="f", unit="pp", expected_sign=1,
                       estimate=1.0, ci_lo=0.5, ci_hi=1.5, n=3, n_counts="seeds", p_value=0.01, p_adj=0.01, m=1,
                       mde=0.4, verdict=verdict)


def test_marks_are_found_and_disagreements_caught():
    r = record()
    seen = one_verdict_each({"a": badge(r), "b": badge(r).replace("reproduced", "inconclusive")})
    assert set(seen["C9"]) == {"reproduced", "inconclusive"}          # the check can fail
    assert split_verdicts({"a": badge(r), "b": badge(r)}) == {}
    assert split_verdicts({"a": badge(r), "b": badge(record("not reproduced"))}) == {
        "C9": {"reproduced": ["a"], "not reproduced": ["b"]}}


def _built(tmp_path, pages: dict) -> Path:
    html = tmp_path / "_build" / "html"
    for name, text in pages.items():
        (html / name).parent.mkdir(parents=True, exist_ok=True)
        (html / name).write_text(f"<html><body>{text}</body></html>")
    return html


def test_the_built_book_check_names_each_split_claim(tmp_path):
    html = _built(tmp_path, {"index.html": badge(record()), "book/nb/claims.html": badge(record()),
                             "book/nb/face.html": badge(record("inconclusive"))})
    with pytest.raises(ValueError, match=r"C9: 'reproduced' on book/nb/claims.html, index.html, 'inconclusive' on "
                                         r"book/nb/face.html"):
        check_built_book(html)
    (html / "book/nb/face.html").write_text(badge(record()))
    assert check_built_book(html) == 1
    with pytest.raises(ValueError, match="not a built book"):
        check_built_book(tmp_path / "nothing")


def test_build_fails_when_a_claim_has_two_verdicts(tmp_path, monkeypatch):
    """`sec-book build` runs the check on the book it built: a split claim fails the build, by name."""
    from sec_lib.site import runner
    (tmp_path / "_config.yml").write_text("title: t\n")
    (tmp_path / "notebooks").mkdir()
    monkeypatch.setattr(runner, "check_node_modules", lambda site: site)

    def fake_jb(cmd, text=True):
        _built(tmp_path, {"index.html": badge(record()), "book/nb/face.html": badge(record("inconclusive"))})
        return subprocess.CompletedProcess(cmd, 0)
    monkeypatch.setattr(runner.subprocess, "run", fake_jb)
    with pytest.raises(SystemExit, match="C9: 'inconclusive' on book/nb/face.html, 'reproduced' on index.html"):
        runner.build(tmp_path)


@pytest.fixture()
def fresh(monkeypatch, tmp_path):
    """No quick-tier runs (only the committed tier), and no evidence object left from another test."""
    monkeypatch.setenv("SEC_RUNS_DIR", str(tmp_path / "quick"))
    evidence.forget_pages()
    yield
    evidence.forget_pages()


@pytest.mark.slow
def test_every_claim_has_one_verdict_across_pages_on_the_committed_tiers(fresh):
    if not any(evidence.has_tier(t) for t in evidence.MAIN_TIERS):
        pytest.skip("no committed tier")
    # each page renders its claims box from its own evidence object, as its notebook does; the scorecard and
    # the landing page's primary badge go through the claims page's and the landing page's own calls
    pages = {p: evidence.claims_box(p, "cpu") for p in evidence.claim_pages()}
    table = claims.claims_frame(claims.records("cpu"))
    pages["claims (scorecard)"] = claims.claims_html(table)
    pages["home"] = home.primary_badge(home.primary("cpu"))
    seen = one_verdict_each(pages)
    split = {c: dict(v) for c, v in seen.items() if len(v) > 1}
    assert not split, f"claims with more than one verdict across pages: {split}"
    # every claim is marked on the page that owns it and on the scorecard; the primary test on the landing page
    for p in evidence.claim_pages():
        for c in evidence.page_claims(p):
            where = [pg for v in seen[c.id].values() for pg in v]
            assert p in where and "claims (scorecard)" in where, (c.id, where)
    assert "home" in [pg for v in seen["C4v"].values() for pg in v]
    # the committed tiers decide the pages they cover: their records say so
    ref = table[table["tier"].isin(evidence.MAIN_TIERS)]
    assert {"C4a", "C4v", "C1"} <= set(ref["claim"]), table[["claim", "tier"]]


def test_a_pages_answer_states_what_its_claims_box_states():
    """The answer a page opens with reads the same records as its claims box: the same ids with the same verdicts,
    the detectable effect beside an inconclusive claim only, and nothing for a page that decides no claim."""
    from sec_lib.report.claims import answer, box
    recs = [record(), dataclasses.replace(record("inconclusive"), id="C10", mde=2.5)]
    text = answer(recs)
    assert {c: set(v) for c, v in stated_verdicts({"p": text}).items()} == {"C9": {"reproduced"},
                                                                             "C10": {"inconclusive"}}
    assert {c: set(v) for c, v in stated_verdicts({"p": box(recs)}).items()} == {"C9": {"reproduced"},
                                                                                 "C10": {"inconclusive"}}
    assert "ours +1.00 [+0.50, +1.50] pp" in text and text.count("could detect") == 1 and "could detect ≥ 2.50" in text
    assert split_verdicts({"answer": text, "box": box(recs)}) == {}
    assert answer([]) == ""
    # a signed difference says what it subtracts: the first clause of the record's measured
    said = answer([dataclasses.replace(record(), measured="R@1 EMA − batch mean, mean over the losses; equivalence")])
    assert "pp (R@1 EMA − batch mean, mean over the losses)" in said and "equivalence" not in said


def test_an_answer_of_several_claims_is_a_list_and_the_detectable_effect_keeps_its_unit():
    """A page deciding several claims opens with one bullet a claim (one sentence joined by semicolons read as a wall);
    one claim stays a sentence. A detectable effect beyond a correlation's range says that no r could be detected, and
    a one-comparison family is not called Holm-adjusted."""
    from sec_lib.report.claims import answer, box
    one, two = record(), dataclasses.replace(record("inconclusive"), id="C10", mde=2.5)
    many = answer([one, two])
    assert many.startswith('<div class="page-answer"><p><b>The answer on these runs</b>') and many.count("<li>") == 2
    assert answer([one]).startswith('<p class="page-answer">') and "<li>" not in answer([one])
    r = dataclasses.replace(record("inconclusive"), unit="r", mde=1.487)
    assert r.detectable == "none (≥ 1.487 is beyond the range of r)"
    assert dataclasses.replace(r, mde=0.6).detectable == "≥ 0.600" and dataclasses.replace(r, mde=float("nan")).detectable == ""
    assert "could detect none (≥ 1.487 is beyond the range of r)" in answer([r])
    assert "p = 0.01, the only comparison of the family <i>f</i>" in box([one]) and "Holm-adjusted" not in box([one])
    assert "Holm-adjusted p = 0.01 over 3 in the family" in box([dataclasses.replace(one, m=3)])


def test_the_scorecard_shows_the_equivalence_tests_p_beside_a_verdict_it_decided():
    """'not reproduced' beside the difference test's p = 0.66 reads as a contradiction: where the equivalence test
    (the interval inside ±margin) decided the verdict, the scorecard's p cell shows its adjusted p too."""
    from sec_lib.chapters.claims import claims_frame, p_cell
    null = dataclasses.replace(record("not reproduced"), estimate=-0.05, ci_lo=-0.38, ci_hi=0.27, p_adj=0.66,
                               p_eq_adj=0.011, margin=0.5)
    assert p_cell(null) == "0.66 (equivalence: 0.011)"
    assert p_cell(record()) == "0.01"                                        # decided by the interval's side
    wrong_side = dataclasses.replace(record("not reproduced"), estimate=-1.0, ci_lo=-1.5, ci_hi=-0.6, margin=0.5,
                                     p_eq_adj=0.9)
    assert p_cell(wrong_side) == "0.01"
    assert list(claims_frame([null, record()])["p"]) == ["0.66 (equivalence: 0.011)", "0.01"]
