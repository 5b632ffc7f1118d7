"""End to end: every notebook runs through papermill at smoke parameters, the smoke book builds with -W,
and headless Chromium finds the pages self-contained, error-free, with working widgets and figures.

The sweep runs once per test session, from a wheel of the checkout installed apart from it (tests/conftest.py),
into a temporary site and result store (nothing under data/runs or book/nb is touched); the glyph cache under
data/ is shared with the other tests.
"""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from sec_lib.params import ParameterError
from sec_lib.site import nbstyle, runner

REPO = Path(__file__).resolve().parents[2]


def site_env(tmp: Path) -> dict:
    """The environment of this file's commands: a result store of their own."""
    return dict(os.environ, SEC_RUNS_DIR=str(tmp / "runs"), PYTHONUNBUFFERED="1")


pytestmark = pytest.mark.slow


def test_every_notebook_executes_at_smoke_parameters(smoke_site):
    run = smoke_site["run"]
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "=== sec-book summary ===" in run.stdout and "0 failed" in run.stdout
    for page in runner.PAGES:
        nb = smoke_site["site"] / "book" / "nb" / f"{page.output}.ipynb"
        assert nb.exists(), page
        cells = json.loads(nb.read_text())["cells"]
        errors = [o for c in cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
        assert not errors, (page.output, errors[:1])
        assert any("injected-parameters" in c.get("metadata", {}).get("tags", []) for c in cells)
        # code folded behind toggles (or removed where it shows nothing), the run's parameters in the box at the end
        assert all(nbstyle.KEEP_TAGS & set(c["metadata"].get("tags", []))
                   for c in cells if c["cell_type"] == "code"), page
        box = [c for c in cells if nbstyle.PROVENANCE_TAG in c.get("metadata", {}).get("tags", [])]
        assert len(box) == 1 and box[0] is cells[-1] and "profile = \"smoke\"" in "".join(box[0]["source"]), page
    assert not list((smoke_site["site"] / "book" / "nb").rglob(".tmp-*")), "no half-written notebook is left"


def test_rerun_reuses_the_store(smoke_site, monkeypatch, capsys):
    """Training the compare page's runs again (the runner's train stages, in this process) trains nothing."""
    monkeypatch.setenv("SEC_RUNS_DIR", str(smoke_site["tmp"] / "runs"))
    assert runner.main(["train", "--profile", "smoke", "--sweeps", "compare", "selection"]) in (0, None)
    out = capsys.readouterr().out
    assert "runs: 0 trained" in out and "0 failed" in out, out[-2000:]


@pytest.fixture(scope="session")
def smoke_html(smoke_site):
    """The smoke site built (`python -m sec_lib.book build --site ...`, in the background once the sweep ran)."""
    assert smoke_site["run"].returncode == 0, "the smoke sweep failed; see the notebook test"
    build = smoke_site["build"]
    assert build is not None, "the smoke site was not built (no build.rc beside the sweep)"
    assert build.returncode == 0, build.stdout[-4000:] + build.stderr[-4000:]
    return smoke_site["site"] / "_build" / "html"


def test_smoke_book_builds_with_warnings_as_errors(smoke_html):
    for page in runner.PAGES:
        assert (smoke_html / "book" / "nb" / f"{page.output}.html").exists(), page
    for md in ("rerun", "gpu", "cite", "changelog"):
        assert (smoke_html / "book" / f"{md}.html").exists()
    # weight: no copies of the sources, and the whole site under 25 MB
    assert not (smoke_html / "_sources").exists()
    # every formula typeset: no page shows its TeX as text (a Markdown output read as CommonMark, theory's notes)
    from sec_lib.site.pagecheck import check_tex
    assert check_tex(smoke_html) == []
    size = sum(p.stat().st_size for p in smoke_html.rglob("*") if p.is_file())
    assert size < 25e6, f"the site is {size / 1e6:.1f} MB"
    # the runs page links its downloads as files the site serves, instead of carrying them in data: URIs
    page = (smoke_html / "book" / "nb" / "runs.html").read_text()
    served = {p.name for p in (smoke_html / "_static" / "downloads").iterdir()}
    assert {"smoke_runs.csv", "smoke_runs.parquet", "smoke_evals.parquet", "smoke_steps.parquet"} <= served
    assert all(f'href="../../_static/downloads/{name}"' in page for name in served)
    assert "base64" not in page.split("Per-run data to download")[-1]


CHECKED = ["book/nb/home.html", "book/nb/table1.html", "book/nb/data.html", "book/nb/theory.html", "book/nb/compare.html",
           "book/nb/norms.html", "book/nb/runs/train_semihard_sec.html", "book/nb/eta.html",
           "book/nb/claims.html", "book/nb/explore.html",
           # pages whose verdict tables take the book's display form (figures.tables.compact_verdict_table)
           "book/nb/bnwn.html", "book/nb/mu.html", "book/nb/optim.html", "book/nb/fairness.html",
           # prose with long inline code (the changelog's paths), and the decisive tier's tables
           "book/changelog.html", "book/nb/tiers.html"]
SLIDERS = ["book/nb/theory.html", "book/nb/explore.html"]


def test_pages_work_offline_in_headless_chromium(smoke_html):
    from sec_lib.site.pagecheck import check_book
    reports = check_book(smoke_html, pages=CHECKED, slider_pages=SLIDERS,
                         expect_widgets={"book/nb/theory.html": 1, "book/nb/explore.html": 2})
    bad = [(r.page, r.problems) for r in reports]
    # every check on every page, tables included: each fits the text column at 1,400 and 800 px
    # (folded secondary tables opened); at a phone width a wide one may scroll in its own box
    assert not [b for b in bad if b[1]], "\n".join(f"{page}: {probs}" for page, probs in bad if probs)
    assert all(r.widths == [1400, 800, 420] for r in reports)


def test_bad_papermill_parameter_fails_clearly_and_stores_nothing(tmp_path, monkeypatch, first_cells):
    """The papermill command line fails with the notebook's own message on stderr and stores nothing
    (one kernel); the message of each kind of bad parameter comes from the train page's first cells,
    run in this process the way papermill injects them (the same cells the kernel ran)."""
    env = site_env(tmp_path)
    out = tmp_path / "out.ipynb"
    proc = subprocess.run([sys.executable, "-m", "papermill", str(REPO / "notebooks" / "train.ipynb"), str(out),
                           "--kernel", "python3", "-p", "profile", "smoke", "-p", "loss", "nonsense"],
                          cwd=REPO, env=env, capture_output=True, text=True)
    assert proc.returncode != 0
    assert "ParameterError" in proc.stderr and "'loss'" in proc.stderr and "valid" in proc.stderr, proc.stderr[-1500:]
    monkeypatch.setenv("SEC_RUNS_DIR", str(tmp_path / "runs"))
    for params, fragment in [({"loss": "nonsense"}, "'loss'"), ({"profile": "fast"}, "'profile'"),
                             ({"etta": 0.5}, "unknown parameter")]:
        with pytest.raises(ParameterError) as err:
            first_cells(REPO / "notebooks" / "train.ipynb", {"profile": "smoke", **params})
        assert fragment in str(err.value) and "valid" in str(err.value), str(err.value)
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_runner_rejects_bad_arguments_before_any_work(tmp_path, monkeypatch, capsys):
    """In this process (the command line is ``runner.main``): no interpreter start per case."""
    monkeypatch.setenv("SEC_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.chdir(tmp_path)
    for args in (["--profile", "fast"], ["--only", "nonsense"], ["--jobs", "0"]):
        try:                                   # argparse exits; a checked option returns its exit code
            code = runner.main(["run", *args, "--site", str(tmp_path)])
        except SystemExit as e:
            code = e.code
        err = capsys.readouterr().err + str(code)
        assert code not in (0, None), args
        assert "invalid choice" in err or "'jobs'" in err, err[-800:]
    assert not (tmp_path / "runs").exists() and not (tmp_path / "book").exists()


def test_each_claim_has_one_verdict_on_every_built_page(smoke_html):
    """A claim id marked on several built pages (verdict badges, the scorecard's rows) carries
    one verdict everywhere (the check every ``sec-book build`` runs); the scorecard marks every claim, and each
    owning page marks its own."""
    from sec_lib.chapters import evidence
    from sec_lib.report.claims import check_built_book, stated_verdicts
    assert check_built_book(smoke_html) > 0
    pages = {p.stem: p.read_text() for p in (smoke_html / "book" / "nb").rglob("*.html")}
    seen = stated_verdicts(pages)
    for p in evidence.claim_pages():
        for c in evidence.page_claims(p):
            where = {pg for pgs in seen.get(c.id, {}).values() for pg in pgs}
            assert {p, "claims"} <= where, (c.id, sorted(where))
    assert "home" in {pg for pgs in seen["C4v"].values() for pg in pgs}


def test_the_smoke_landing_page_counts_the_claims_as_its_scorecard_does(smoke_html):
    """A smoke book reads its own runs: the landing page's tally says so and counts what the claims page's answer
    counts, instead of '0 in all' on the decisive tier."""
    import html as _html

    def text(page):
        raw = (smoke_html / "book" / "nb" / f"{page}.html").read_text(encoding="utf-8")
        return re.sub(r"\s+", " ", _html.unescape(re.sub(r"<[^>]+>", " ", raw))).replace("’", "'")
    home = re.search(r"decided on this book's own runs, (\d+) in all", text("home"))
    assert home, "the smoke landing page does not say that it counts its own runs"
    claims = re.search(r"Of the paper's claims and its reviewers' questions, (\d+) in all", text("claims"))
    assert claims and home.group(1) == claims.group(1), (home.group(0), claims and claims.group(0))
