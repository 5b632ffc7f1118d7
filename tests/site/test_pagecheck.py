"""The book works offline: widgets render from the book's own JavaScript, a slider changes the image.

Builds a mini book in tmp_path with the real ``_config.yml`` (a papermill-executed notebook with an
``ipywidgets.SelectionSlider`` jslinked to the ``selected_index`` of an ``ipywidgets.Stack`` of two
different matplotlib PNGs, a plain matplotlib figure and a formula), builds it with
``jupyter-book build -W`` and opens it in headless Chromium from ``file://`` with
:mod:`sec_lib.site.pagecheck`. Fails if a widget does not render, if any request leaves the machine, or
if moving the slider does not change the shown image. Also checks that the checker itself catches
a CDN script, a missing image and a page whose widget manager is missing.

Needs ``node_modules`` (``make js``) and Chromium (``make browser``).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sec_lib.site import nbstyle, pagecheck, sitejs

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

REPO = Path(__file__).resolve().parents[2]
PAGE = "book/nb/runs/demo.html"          # as deep as the real per-run pages

NOTEBOOK_CELLS = [
    ("markdown", "# Widget demo\n\nA formula rendered by the served MathJax: $\\|f\\| = \\sqrt{f^\\top f}$.\n\n"
                 # \boldsymbol and \cancel come from TeX extensions that MathJax's autoload fetches
                 "$$\n\\begin{aligned} \\boldsymbol{f}' &= \\boldsymbol{f} - \\alpha \\nabla L \\\\\n"
                 "\\|\\boldsymbol{f}'\\|^2 &\\geq \\cancel{0} \\end{aligned}\n$$"),
    ("parameters", 'panel_label = "panel"'),
    ("code", """\
import io
import ipywidgets as widgets
import matplotlib
import matplotlib.pyplot as plt
from IPython.display import display

def png(color, label):
    fig, ax = plt.subplots(figsize=(2.4, 1.6), dpi=60)
    ax.add_patch(plt.Rectangle((0, 0), 1, 1, color=color))
    ax.text(0.5, 0.5, label, ha="center", va="center", fontsize=20)
    ax.set_axis_off()
    buf = io.BytesIO(); fig.savefig(buf, format="png"); plt.close(fig)
    return buf.getvalue()

images = [widgets.Image(value=png(c, l), format="png") for c, l in (("tab:red", "A"), ("tab:blue", "B"))]
stack = widgets.Stack(images, selected_index=0)
slider = widgets.SelectionSlider(options=["A", "B"], value="A", description=panel_label)
widgets.jslink((slider, "index"), (stack, "selected_index"))
display(widgets.VBox([slider, stack]))"""),
    ("code", """\
fig, ax = plt.subplots(figsize=(3, 2), dpi=60)
ax.plot([0, 1, 2], [1, 0, 1])
plt.show()"""),
]


def _node_modules() -> Path:
    try:
        return sitejs.find_node_modules(REPO)
    except FileNotFoundError as err:
        pytest.fail(f"{err}")


@pytest.fixture(scope="module")
def mini_book(tmp_path_factory) -> Path:
    """Build the mini book once; return its html folder."""
    import nbformat
    import papermill

    _node_modules()
    pagecheck.find_chromium()
    src = tmp_path_factory.mktemp("minibook")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(s) if kind == "markdown" else nbformat.v4.new_code_cell(s)
                for kind, s in NOTEBOOK_CELLS]
    for cell, (kind, _) in zip(nb.cells, NOTEBOOK_CELLS):
        if kind == "parameters":
            cell.metadata["tags"] = ["parameters"]
    nb.cells[-1].metadata["mystnb"] = {"figure": {"caption": "A line.", "name": "fig-demo-line"}}   # as the book's
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    raw = src / "demo_src.ipynb"
    nbformat.write(nb, raw)
    out = src / "book" / "nb" / "runs" / "demo.ipynb"
    out.parent.mkdir(parents=True)
    papermill.execute_notebook(str(raw), str(out), kernel_name="python3", cwd=str(src), progress_bar=False,
                               parameters={"panel_label": "η"})
    raw.unlink()
    nbstyle.style_notebook(out)            # as the runner does: code folded, the parameters in a box

    executed = nbformat.read(out, as_version=4)
    assert executed.metadata.get("widgets", {}).get(pagecheck.WIDGET_STATE_MIME, {}).get("state"), \
        "papermill did not store the widget state in the notebook"

    config = yaml.safe_load((REPO / "_config.yml").read_text(encoding="utf-8"))
    config["title"] = "mini book"
    (src / "_config.yml").write_text(yaml.safe_dump(config, allow_unicode=True, sort_keys=False), encoding="utf-8")
    shutil.copytree(REPO / "book" / "_static", src / "book" / "_static")      # sec.css
    for bib in config.get("bibtex_bibfiles", []):
        (src / bib).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / bib, src / bib)
    toc = {"format": "jb-book", "root": "book/intro",
           "parts": [{"caption": "Demo", "chapters": [{"file": "book/nb/runs/demo"}, {"file": "book/rerun"}]}]}
    (src / "_toc.yml").write_text(yaml.safe_dump(toc), encoding="utf-8")
    (src / "book" / "intro.md").write_text("# Mini book\n\nSee {doc}`nb/runs/demo`.\n", encoding="utf-8")
    (src / "book" / "rerun.md").write_text("# Rerun\n\nWith papermill.\n", encoding="utf-8")   # the box links it

    env = dict(os.environ, SEC_NODE_MODULES=str(_node_modules()))
    # sec_lib must be importable by jupyter-book (an editable install does that; PYTHONPATH for a checkout).
    env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), str(REPO)) if p)
    jb = Path(sys.executable).with_name("jupyter-book")
    cmd = [str(jb), "build", str(src), "-W", "-n", "--keep-going", "--builder", "html"]
    proc = subprocess.run(cmd, cwd=src, env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, f"jupyter-book build -W failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return src / "_build" / "html"


@pytest.fixture(scope="module")
def browser():
    """One headless Chromium for this file's page checks (each launch costs about a second of CPU); the
    command line and one ``check_page`` below still start Chromium of their own."""
    with pagecheck.Browser() as b:
        yield b


def test_scripts_are_served_by_the_book(mini_book):
    html = (mini_book / PAGE).read_text(encoding="utf-8")
    srcs = re.findall(r'<script[^>]*\bsrc="([^"]+)"', html)
    assert srcs, "no scripts on the widget page"
    remote = [s for s in srcs if "://" in s or s.startswith("//")]
    assert remote == [], f"scripts loaded from the network: {remote}"
    # page-relative URLs into _static/sec-js, three levels up from book/nb/runs/
    assert any(s.startswith("../../../_static/sec-js/require.js") for s in srcs), srcs
    assert any(s.startswith("../../../_static/sec-js/embed-amd.js") for s in srcs), srcs
    assert any(s.startswith("../../../_static/sec-js/mathjax/tex-svg.js") for s in srcs), srcs
    assert srcs.index(next(s for s in srcs if "require.js" in s)) < srcs.index(
        next(s for s in srcs if "embed-amd.js" in s)), "require.js must come before embed-amd.js"
    setup = next(s for s in srcs if "widgets-setup.js" in s)
    assert srcs.index(setup) == srcs.index(next(s for s in srcs if "require.js" in s)) + 1
    for rel in ("require.js", "widgets-setup.js", "embed-amd.js", "mathjax/tex-svg.js"):
        assert (mini_book / "_static" / "sec-js" / rel).is_file(), rel
    # pages without widgets do not load the widget manager
    intro = (mini_book / "book" / "intro.html").read_text(encoding="utf-8")
    assert "embed-amd.js" not in intro and "require.js" not in intro
    # the manager is served without the protocol-1 modules (the widgets test below shows it still renders), and
    # the theme's icon fonts as woff2 alone
    served = [m[0] for m in sitejs.amd_modules((mini_book / "_static" / "sec-js" / "embed-amd.js").read_text())]
    assert "@jupyter-widgets/html-manager" in served and not set(served) & set(sitejs.UNSERVED_AMD_MODULES)
    assert not list((mini_book / "_static" / "vendor").rglob("*.ttf"))
    assert list((mini_book / "_static" / "vendor").rglob("*.woff2"))


def test_widgets_render_offline_and_slider_changes_image(mini_book, tmp_path, browser):
    shot = tmp_path / "demo.png"
    rep = pagecheck.check_page(mini_book / PAGE, slider=1, expect_widgets=1, screenshot=shot, browser=browser)
    assert rep.external_requests == [], rep.external_requests
    assert all(u.startswith(pagecheck.LOCAL_SCHEMES) for u in rep.requests)
    assert any(u.endswith("embed-amd.js") or "embed-amd.js?" in u for u in rep.requests)
    assert rep.failed_requests == [] and rep.console_errors == [] and rep.page_errors == [], rep.problems
    assert rep.widget_views == 1 and rep.widgets_rendered == 1, rep.problems
    assert rep.widget_elements >= 3            # the box, the slider and the image at least
    assert rep.images >= 2 and rep.broken_images == []   # the widget image and the matplotlib figure
    assert rep.formulas == 2 and rep.formulas_typeset == 2  # by the book's own (trimmed) MathJax
    s = rep.slider
    assert s is not None and s.control == "slider" and s.moved, s
    assert s.images_before and s.images_after and s.image_changed, s
    assert rep.ok, rep.problems
    assert shot.stat().st_size > 5_000
    # the served MathJax fetched the TeX extensions the formula needs, from the book itself
    for ext in ("boldsymbol", "cancel"):
        assert any(f"mathjax/input/tex/extensions/{ext}.js" in u for u in rep.requests), ext
    assert rep.math_errors == 0
    # the layout was checked at every width, a screenshot each; the load time is measured, not judged
    assert rep.widths == list(pagecheck.WIDTHS)
    assert [o for o in rep.overflows if not o.allowed] == [] and rep.page_scrolls == []
    assert len(rep.screenshots) == len(pagecheck.WIDTHS) and all(Path(p).stat().st_size > 5_000 for p in rep.screenshots)
    assert rep.load_ms is not None and rep.load_ms > 0 and rep.typeset_ms is not None


def test_code_is_folded_and_the_parameters_are_in_the_box_at_the_end(mini_book, browser):
    """In the built page every code cell that shows something sits in a closed toggle (the parameters cell, which
    shows nothing, is gone), and the folded box at the page's end states the injected value."""
    html = (mini_book / PAGE).read_text(encoding="utf-8")
    assert "tag_injected-parameters" not in html            # removed: the box shows its assignment
    page = browser.browser.new_page(viewport={"width": 1400, "height": 900})    # a fresh context of its own
    try:
        page.goto((mini_book / PAGE).resolve().as_uri(), wait_until="load")
        cells = page.evaluate("""() => Array.from(document.querySelectorAll('div.cell')).map(c => ({
            toggle: !!c.querySelector(':scope > details.hide.above-input:not([open]) > summary'),
            codeShown: Array.from(c.querySelectorAll('div.cell_input')).some(e => e.checkVisibility()),
            summary: (c.querySelector('summary') || {}).innerText || ''}))""")
        box = page.evaluate("""() => { const b = document.querySelector('details.sec-provenance');
            if (!b) return null;
            const last = Array.from(document.querySelectorAll('article .cell, article details.sec-provenance')).pop();
            return {open: b.open, last: last === b, summary: b.querySelector('summary').innerText,
                    text: b.textContent}; }""")
        link = page.evaluate("() => document.querySelector('details.sec-provenance a').getAttribute('href')")
    finally:
        page.close()
    assert len(cells) == 2, cells                            # the widget and the figure
    assert all(c["toggle"] and not c["codeShown"] for c in cells), cells
    assert all("Show code cell source" in c["summary"] for c in cells)
    assert box is not None and not box["open"] and box["last"], box
    assert "How this page was made" in box["summary"]
    assert "This page was run with:" in box["text"] and 'panel_label = "η"' in box["text"], box
    assert link.endswith("rerun.html")


def test_only_the_mathjax_the_book_uses_is_served(mini_book):
    served = sorted(p.relative_to(mini_book / "_static" / "sec-js" / "mathjax").as_posix()
                    for p in (mini_book / "_static" / "sec-js" / "mathjax").rglob("*") if p.is_file())
    assert "tex-svg.js" in served and "input/tex/extensions/boldsymbol.js" in served
    assert not [p for p in served if p.startswith(("sre/", "output/", "a11y/")) or p in ("tex-chtml.js", "core.js")]
    size = sum((mini_book / "_static" / "sec-js" / "mathjax" / p).stat().st_size for p in served)
    assert size < 4_000_000, f"MathJax served: {size / 1e6:.1f} MB"
    assert not (mini_book / "_sources").exists(), "the page sources must not be copied into the site"
    assert not list((mini_book / "_static").rglob("*.js.map")), "source maps are for developer tools only"
    html = (mini_book / PAGE).read_text(encoding="utf-8")
    assert "_sources/" not in html and "download-source-button" not in html
    assert "download-pdf-button" in html                    # printing to PDF stays
    assert "_static/sec.css" in html


#: A table of 16 interval cells (wider than any text column) and a narrow one, as pandas writes them.
WIDE_TABLE = ('<table class="dataframe sec-table"><thead><tr>' + "".join(f"<th>column {i}</th>" for i in range(16))
              + "</tr></thead><tbody><tr>" + "".join("<td>65.1\u00a0[62.9,\u00a067.3]</td>" for _ in range(16))
              + "</tr></tbody></table>")
NARROW_TABLE = '<table class="dataframe sec-table"><tr><th>loss</th><th>R@1</th></tr><tr><td>ms</td><td>65.1</td></tr></table>'


def _output(inner: str) -> str:
    return f'<div class="cell_output docutils container"><div class="output text_html">{inner}</div></div>'


def test_checker_fails_tables_and_outputs_wider_than_the_column(mini_book, browser):
    html = (mini_book / PAGE).read_text(encoding="utf-8")
    m = re.search(r'<article class="bd-article"[^>]*>', html)
    assert m, "no article element on the page"

    def page_with(content: str) -> str:
        return html[:m.end()] + content + html[m.end():]

    variants = {
        "wideout": page_with(_output(WIDE_TABLE)),            # a wide table in a cell output
        "widebare": page_with(WIDE_TABLE),                    # a wide table straight in the text
        "widebox": page_with(_output('<div style="width: 1500px">a widget laid out 1,500 px wide</div>')),
        "narrow": page_with(_output(NARROW_TABLE)),
    }
    pages = {k: PAGE.replace("demo.html", f"{k}.html") for k in variants}
    try:
        for k, text in variants.items():
            (mini_book / pages[k]).write_text(text, encoding="utf-8")
        reps = dict(zip(variants, pagecheck.check_book(mini_book, list(pages.values()), timeout_s=10,
                                                       browser=browser)))
    finally:
        for p in pages.values():
            (mini_book / p).unlink(missing_ok=True)

    out, bare, box, narrow = reps["wideout"], reps["widebare"], reps["widebox"], reps["narrow"]
    for r in (out, bare, box, narrow):
        assert r.widths == [1400, 800, 420]
    # at 1,400 and 800 px a wide table fails, even though the theme lets it scroll sideways
    assert not out.ok and any("wider than the text column" in p for p in out.problems), out.problems
    assert {o.width for o in out.overflows if not o.allowed} == {1400, 800}
    assert all(o.what.startswith("table") and o.content_px > o.column_px for o in out.overflows)
    assert len([o for o in out.overflows if o.width == 1400]) == 1, "one table, reported once"
    # at phone width it may scroll in its own box ...
    assert [o.allowed for o in out.overflows if o.width == 420] == [True]
    # ... but a table with no box of its own pushes the text column sideways
    assert [o.allowed for o in bare.overflows if o.width == 420] == [False]
    assert 420 in bare.page_scrolls
    # an output wider than the column that is not a table fails too
    assert not box.ok and {o.width for o in box.overflows if not o.allowed} == {1400, 800}
    assert all(o.what.startswith("output") for o in box.overflows)
    # a table that fits passes at every width
    assert narrow.overflows == [] and narrow.page_scrolls == [] and narrow.ok, narrow.problems
    assert "wide" in pagecheck.format_table(list(reps.values())) and "load time" in pagecheck.format_table([narrow])


#: A 1 x 1 PNG, inline.
DOT = ("data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5"
       "ErkJggg==")
ANSWER = ('<p class="page-answer"><b>The answer</b>: <a class="claim-ref" data-claim="C1" data-verdict="reproduced">'
          'C1: <b>reproduced</b></a>: ours +0.49 [+0.34, +0.65] points.</p>')
CLAIMS_BOX = '<ul class="claims-box"><li>C1</li></ul>'
#: The landing page's kind of answer: it asks for its figure on the first screen.
FIG_ANSWER = ('<div class="page-answer" data-figure="first-screen"><p><b>SEC is <span data-verdict="reproduced">'
              'as large as the paper reports</span>: +0.49 [+0.34, +0.65] points.</b></p></div>')


def test_a_page_that_decides_claims_must_show_its_marked_answer_on_the_first_screen(mini_book, browser):
    """The checker finds the marked answer (.page-answer) of a page that shows a claims box and measures where it
    starts at 1,400 px wide: above 1,000 px passes; below it, missing, or without its verdict and interval fails.
    A page without a claims box is not judged."""
    html = (mini_book / PAGE).read_text(encoding="utf-8")
    m = re.search(r'<article class="bd-article"[^>]*>', html)

    def page_with(content: str) -> str:
        return html[:m.end()] + content + html[m.end():]

    variants = {
        "top": page_with(ANSWER + CLAIMS_BOX),
        "low": page_with('<div style="height: 1500px">the bookkeeping first</div>' + ANSWER + CLAIMS_BOX),
        "none": page_with(CLAIMS_BOX),
        "bare": page_with(ANSWER.replace("[+0.34, +0.65]", "") + CLAIMS_BOX),
        "count": page_with(ANSWER.replace("[+0.34, +0.65]", "").replace('class="page-answer"',
                                                                          'class="page-answer" data-interval="none"')
                           + CLAIMS_BOX),
        "noclaims": page_with('<div style="height: 1500px">a page that decides nothing</div>'),
        "nocaption": page_with(ANSWER + CLAIMS_BOX + _output(f'<img src="{DOT}" alt="a figure">')
                               + f'<figure>{_output(f"<img src={DOT!r}>")}<figcaption>Fig. 1 a caption</figcaption>'
                               + "</figure>"),
        "jargon": page_with("<p>Claim C4v of the decisive tier, Holm over its family:</p>" + ANSWER + CLAIMS_BOX
                            + "<p>After the answer, C5 and the quick tier may be named.</p>"),
        # a landing page asks for its figure on the first screen: right after the answer, or 1,500 px further down
        "fig": page_with(FIG_ANSWER + f'<img src="{DOT}" alt="" style="width: 400px; height: 300px">'),
        "figlow": page_with(FIG_ANSWER + '<div style="height: 1500px">the details first</div>'
                            + f'<img src="{DOT}" alt="" style="width: 400px; height: 300px">'),
    }
    pages = {k: PAGE.replace("demo.html", f"ans{k}.html") for k in variants}
    try:
        for k, text in variants.items():
            (mini_book / pages[k]).write_text(text, encoding="utf-8")
        reps = dict(zip(variants, pagecheck.check_book(mini_book, list(pages.values()), timeout_s=10,
                                                       browser=browser, widths=(1400,))))
    finally:
        for p in pages.values():
            (mini_book / p).unlink(missing_ok=True)
    top, low, none, bare, count, noclaims, nocaption, jargon = (reps[k] for k in list(variants)[:8])
    fig, figlow = reps["fig"], reps["figlow"]
    assert fig.figure_first_screen and fig.figure_y < 1000 and fig.figure_h == 300 and fig.ok, fig.problems
    assert figlow.figure_y > 1500 and any("of the figure after its answer is on the first" in p
                                          for p in figlow.problems), figlow.problems
    fignone = pagecheck.PageReport(page="x", url="x", figure_first_screen=True)   # the demo page has images after
    assert any("no image follows it" in p for p in fignone.problems), fignone.problems
    assert top.figure_first_screen is False and top.ok      # a page that does not ask is not judged on it
    assert len(nocaption.uncaptioned_figures) == 1 and any("without a caption" in p for p in nocaption.problems)
    assert top.uncaptioned_figures == []
    assert count.ok, count.problems                   # a statistic without an interval says so
    assert top.jargon_before_answer == []
    assert jargon.jargon_before_answer == ["C4v", "decisive tier", "Holm", "family"], jargon.jargon_before_answer
    assert any("before its answer the page uses C4v" in p for p in jargon.problems), jargon.problems
    assert top.decides_claims and top.answer_marked and top.answer_y < 1000 and top.ok, top.problems
    assert low.answer_y > 1500 and any("the answer starts" in p for p in low.problems), low.problems
    assert any("no marked answer" in p for p in none.problems), none.problems
    assert any("lacks its verdict" in p for p in bare.problems), bare.problems
    assert not noclaims.decides_claims and noclaims.ok, noclaims.problems
    assert "answer" in pagecheck.format_table([top])


#: A display formula and an inline one, each far wider than a phone's column (and than a laptop's).
_TERMS = " + ".join(f"a_{{{i}}} b_{{{i}}}" for i in range(70))
LONG_DISPLAY = f'<div class="math notranslate nohighlight">\\[{_TERMS}\\]</div>'
LONG_INLINE = f'<p>An inline formula <span class="math notranslate nohighlight">\\({_TERMS}\\)</span> in the text.</p>'


def test_long_formulas_scroll_in_their_own_box_and_clipped_ones_fail(mini_book, browser):
    """The theme clips span.math and div.math, which cuts a wide equation off at 420 px. With the book's CSS
    (book/_static/sec.css, section 5) a formula wider than the column, display or inline, scrolls sideways in
    its own box at every width; one whose box clips it (overflow hidden) fails the check, and so does the page
    without the book's CSS (its inline formula is cut off)."""
    html = (mini_book / PAGE).read_text(encoding="utf-8")

    def page_with(content: str, base: str = html) -> str:
        m = re.search(r'<article class="bd-article"[^>]*>', base)
        assert m, "no article element on the page"
        return base[:m.end()] + content + base[m.end():]

    clip = ('<style>.bd-article div.math, .bd-article span.math, .bd-article mjx-container '
            '{ overflow: hidden !important; }</style>')
    no_css = re.sub(r'<link[^>]*_static/sec\.css[^>]*>', "", html)
    assert no_css != html
    variants = {"mathscroll": page_with(LONG_DISPLAY + LONG_INLINE), "mathclip": page_with(clip + LONG_DISPLAY + LONG_INLINE),
                "mathnocss": page_with(LONG_DISPLAY + LONG_INLINE, no_css)}
    pages = {k: PAGE.replace("demo.html", f"{k}.html") for k in variants}
    try:
        for k, text in variants.items():
            (mini_book / pages[k]).write_text(text, encoding="utf-8")
        reps = dict(zip(variants, pagecheck.check_book(mini_book, list(pages.values()), timeout_s=10,
                                                       browser=browser)))
    finally:
        for p in pages.values():
            (mini_book / p).unlink(missing_ok=True)

    ok, clipped, bare = reps["mathscroll"], reps["mathclip"], reps["mathnocss"]
    for r in (ok, clipped, bare):
        assert r.formulas == 4 and r.formulas_typeset == 4 and r.math_errors == 0, r.problems
    formulas = lambda r, w, kind: [o for o in r.overflows if o.width == w and o.what.startswith(kind)]
    # the book's CSS: both are wider than the column at every width, and each scrolls in its own box
    for w in pagecheck.WIDTHS:
        for kind in ('formula "', "formula (inline)"):
            assert len(formulas(ok, w, kind)) == 1 and formulas(ok, w, kind)[0].allowed, (w, kind, ok.overflows)
    assert ok.page_scrolls == [] and ok.ok, ok.problems
    # cut off by their boxes: a problem at every width
    assert not clipped.ok and any("formula" in p for p in clipped.problems), clipped.problems
    assert {o.width for o in clipped.overflows if o.what.startswith("formula") and not o.allowed} == set(pagecheck.WIDTHS)
    # without the book's CSS (the theme's alone) the inline formula is cut off at 420 px
    assert not bare.ok and [o.allowed for o in formulas(bare, 420, "formula (inline)")] == [False], bare.overflows


def test_load_time_is_reported_and_judged_only_on_request(mini_book, browser):
    rep = pagecheck.check_page(mini_book / "book" / "intro.html", widths=())     # in a Chromium of its own,
    assert rep.ok and rep.widths == [] and rep.load_ms is not None and rep.load_ms > 0   # while `browser` is open
    strict = pagecheck.check_page(mini_book / "book" / "intro.html", widths=(), max_load_ms=0.001, browser=browser)
    assert not strict.ok and any("to load" in p for p in strict.problems)
    for bad in ((100,), "1400", (1400.0,), (True,)):
        with pytest.raises(ValueError, match="widths"):
            pagecheck.check_page(mini_book / "book" / "intro.html", widths=bad)


def test_checker_catches_network_broken_images_and_missing_manager(mini_book, tmp_path, browser):
    page = mini_book / PAGE
    html = page.read_text(encoding="utf-8")
    # 1. a CDN script, a missing image and a remote image
    bad = '''<html><body><script src="https://cdn.jsdelivr.net/npm/x@1/x.js"></script>
<img src="missing.png"><img src="http://example.invalid/a.png"></body></html>'''
    # 2. the widget page without its widget manager: views declared, none rendered
    nomanager = re.sub(r'<script[^>]*embed-amd\.js[^>]*></script>', "", html)
    assert nomanager != html
    # 3. the widget page with the slider -> stack link removed: the slider moves, the image stays
    m = re.search(r'<script type="%s">(.*?)</script>' % re.escape(pagecheck.WIDGET_STATE_MIME), html, re.S)
    state = json.loads(m.group(1))
    links = [k for k, v in state["state"].items() if v["model_name"] == "LinkModel"]
    assert len(links) == 1
    del state["state"][links[0]]
    unlinked = html[:m.start(1)] + json.dumps(state) + html[m.end(1):]

    names = {"bad": bad, "nomanager": nomanager, "unlinked": unlinked}
    pages = {k: PAGE.replace("demo.html", f"{k}.html") for k in names}
    try:
        for k, text in names.items():
            (mini_book / pages[k]).write_text(text, encoding="utf-8")
        reps = pagecheck.check_book(mini_book, list(pages.values()),
                                    slider_pages=[pages["nomanager"], pages["unlinked"]], timeout_s=6,
                                    browser=browser)
    finally:
        for p in pages.values():
            (mini_book / p).unlink(missing_ok=True)
    r_bad, r_nomgr, r_unlinked = reps
    assert not r_bad.ok and r_bad.slider is None
    assert any("cdn.jsdelivr.net" in u for u in r_bad.external_requests)
    assert any("example.invalid" in u for u in r_bad.external_requests)
    assert len(r_bad.broken_images) == 2

    assert r_nomgr.widget_views == 1 and r_nomgr.widgets_rendered == 0
    assert not r_nomgr.ok and not r_nomgr.slider.image_changed

    assert r_unlinked.widgets_rendered == 1 and r_unlinked.slider.moved and not r_unlinked.slider.image_changed
    assert not r_unlinked.ok and any("did not change the shown image" in p for p in r_unlinked.problems)

    with pytest.raises(ValueError, match="slider"):
        pagecheck.check_page(page, slider="yes")
    browser.browser.new_page().close()                      # a caller's browser stays open after its checks
    with pytest.raises(FileNotFoundError, match="does not exist"):
        pagecheck.check_page(tmp_path / "nope.html")
    with pytest.raises(ValueError, match="slider_pages"):
        pagecheck.check_book(mini_book, [PAGE], slider_pages=["book/intro.html"])


def test_cli_summary(mini_book, capsys):
    code = pagecheck.main([str(mini_book), "book/intro.html", PAGE])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "pages ok: 2 of 2" in out and "changed" in out
    assert pagecheck.main([str(mini_book), "book/missing.html"]) == 2
    # the whole book: the site's weight is checked too (here against a limit it cannot meet)
    code = pagecheck.main([str(mini_book), "--no-slider", "--max-site-bytes", "1000"])
    out = capsys.readouterr().out
    weight = pagecheck.site_bytes(mini_book)
    assert code == 1 and f"site: {weight:,} bytes (limit 1,000): the site weighs {weight:,} bytes, over" in out, out


def test_links_within_the_book_must_reach_a_file_and_its_anchor(tmp_path):
    """A link to a missing file or a missing #anchor is broken; a link with a scheme is not followed (offline)."""
    (tmp_path / "nb").mkdir()
    (tmp_path / "index.html").write_text('<a href="nb/a.html#x">ok</a><a href="nb/a.html#gone">no anchor</a>'
                                         '<a href="nb/missing.html">no file</a><a href="https://doi.org/1">web</a>'
                                         '<a href="#top">self</a><a href="mailto:a@b">mail</a>'
                                         '<span id="top"></span>', encoding="utf-8")
    (tmp_path / "nb" / "a.html").write_text('<h1 id="x">A</h1><a href="../index.html?v=1#top">back</a>'
                                            '<a href="../_static/data.csv">data</a>', encoding="utf-8")
    broken = pagecheck.check_links(tmp_path)
    assert broken == ["index.html: nb/a.html#gone (no #gone in nb/a.html)",
                      "index.html: nb/missing.html (no file nb/missing.html)",
                      "nb/a.html: ../_static/data.csv (no file _static/data.csv)"], broken
    (tmp_path / "_static").mkdir()
    (tmp_path / "_static" / "data.csv").write_text("a,b\n")
    assert len(pagecheck.check_links(tmp_path)) == 2



def test_tex_shown_as_text_is_found_and_typeset_math_code_and_scripts_are_not(tmp_path):
    """A $…$ with a control word left in a page's text is raw TeX (a Markdown output read as CommonMark); typeset
    math (MathJax's \\(…\\) in a math span), code, scripts and a price are not."""
    (tmp_path / "nb").mkdir()
    (tmp_path / "nb" / "t.html").write_text(
        '<p>The vector form $\\lVert g(f)\\rVert = 1$ holds.</p>'
        '<p><span class="math">\\(\\lVert f\\rVert\\)</span> is typeset; it costs $5 and $6.</p>'
        '<pre>x = "$\\alpha$"</pre><code>$\\beta$</code>'
        '<script type="application/vnd.jupyter.widget-state+json">{"a": "$\\gamma$"}</script>'
        '<p>$\\tan\\Delta\\theta$ on &#36;\\lVert f\\rVert$</p>', encoding="utf-8")
    (tmp_path / "index.html").write_text("<p>no formula</p>", encoding="utf-8")
    assert pagecheck.check_tex(tmp_path) == ["nb/t.html: $\\lVert g(f)\\rVert = 1$", "nb/t.html: $\\tan\\Delta\\theta$",
                                             "nb/t.html: $\\lVert f\\rVert$"]
    assert pagecheck.check_tex(tmp_path, ["index.html"]) == []


def test_the_site_weight_is_every_file_added_up_and_fails_over_the_limit(tmp_path):
    site = tmp_path / "html"
    (site / "_static").mkdir(parents=True)
    (site / "index.html").write_bytes(b"x" * 1000)
    (site / "_static" / "big.js").write_bytes(b"y" * 24_000)
    (site / "_static" / "link.js").symlink_to(site / "_static" / "big.js")     # a link is not counted twice
    assert pagecheck.site_bytes(site) == 25_000 and pagecheck.SITE_LIMIT == 25_000_000
    assert pagecheck.site_problem(site) == "" and pagecheck.site_problem(site, limit=25_000) == ""
    said = pagecheck.site_problem(site, limit=24_999)
    assert said.startswith("the site weighs 25,000 bytes, over the limit of 24,999") and "_static 24,000" in said
    with pytest.raises(FileNotFoundError, match="build the book first"):
        pagecheck.site_bytes(tmp_path / "missing")
