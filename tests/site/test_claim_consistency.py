"""One claim, one verdict (issue 22): every page that states a claim's verdict takes it from the one
record its owning page decides, so an id carries the same verdict on every page of the book.

Pages mark each verdict they state with ``data-claim`` / ``data-verdict`` (the badge of
:func:`sec_lib.report.claims.badge`, and the claims page's rows). Two checks:

* on the committed reference tier (profile ``cpu`` with an empty quick store: each page reads the
  reference tier where it holds the page's runs, and has no evidence where it does not), every page's
  claims box (from that page's own evidence object, as its notebook makes it), the claims page's
  scorecard and the landing page's primary-test badge are rendered, and compared;
* in the smoke book that ``test_book.py`` builds, every built page is read the same way.
"""
import re
from collections import defaultdict

import pytest

from sec_lib.chapters import claims, evidence, home

MARK = re.compile(r'data-claim="([^"]+)"[^>]*?data-verdict="([^"]+)"')


def marks(html: str) -> list[tuple[str, str]]:
    return MARK.findall(html)


def one_verdict_each(pages: dict[str, str]) -> dict:
    """{claim id: {verdict: [pages]}} for every id marked on ``pages`` ({page: html})."""
    seen = defaultdict(lambda: defaultdict(list))
    for page, html in pages.items():
        for cid, v in marks(html):
            seen[cid][v].append(page)
    return seen


def test_marks_are_found_and_disagreements_caught():
    from sec_lib.report.claims import ClaimRecord, badge
    r = ClaimRecord(id="C9", statement="s", page="p", href="p.html", family="f", unit="pp", expected_sign=1,
                    estimate=1.0, ci_lo=0.5, ci_hi=1.5, n=3, n_counts="seeds", p_value=0.01, p_adj=0.01, m=1,
                    mde=0.4, verdict="reproduced")
    seen = one_verdict_each({"a": badge(r), "b": badge(r).replace("reproduced", "inconclusive")})
    assert set(seen["C9"]) == {"reproduced", "inconclusive"}          # the check can fail


@pytest.fixture()
def fresh(monkeypatch, tmp_path):
    """No quick-tier runs (only the committed tier), and no evidence object left from another test."""
    monkeypatch.setenv("SEC_RUNS_DIR", str(tmp_path / "quick"))
    evidence._PAGE_EVIDENCE.clear()
    yield
    evidence._PAGE_EVIDENCE.clear()


@pytest.mark.slow
def test_every_claim_has_one_verdict_across_pages_on_the_reference_tier(fresh):
    if not evidence.has_tier(evidence.MAIN_TIER):
        pytest.skip("no committed reference tier")
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
    # the reference tier decides the pages it covers: their records say so
    ref = table[table["tier"] == evidence.MAIN_TIER]
    assert {"C4a", "C4v", "C1"} <= set(ref["claim"]), table[["claim", "tier"]]
