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

from sec_lib.site import pagecheck, sitejs

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

REPO = Path(__file__).resolve().parents[2]
PAGE = "book/nb/runs/demo.html"          # as deep as the real per-run pages

NOTEBOOK_CELLS = [
    ("markdown", "# Widget demo\n\nA formula rendered by the served MathJax: $\\|f\\| = \\sqrt{f^\\top f}$."),
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
slider = widgets.SelectionSlider(options=["A", "B"], value="A", description="panel")
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
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    raw = src / "demo_src.ipynb"
    nbformat.write(nb, raw)
    out = src / "book" / "nb" / "runs" / "demo.ipynb"
    out.parent.mkdir(parents=True)
    papermill.execute_notebook(str(raw), str(out), kernel_name="python3", cwd=str(src), progress_bar=False)
    raw.unlink()

    executed = nbformat.read(out, as_version=4)
    assert executed.metadata.get("widgets", {}).get(pagecheck.WIDGET_STATE_MIME, {}).get("state"), \
        "papermill did not store the widget state in the notebook"

    config = yaml.safe_load((REPO / "_config.yml").read_text(encoding="utf-8"))
    config["title"] = "mini book"
    (src / "_config.yml").write_text(yaml.safe_dump(config, allow_unicode=True, sort_keys=False), encoding="utf-8")
    for bib in config.get("bibtex_bibfiles", []):
        (src / bib).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / bib, src / bib)
    toc = {"format": "jb-book", "root": "book/intro",
           "parts": [{"caption": "Demo", "chapters": [{"file": "book/nb/runs/demo"}]}]}
    (src / "_toc.yml").write_text(yaml.safe_dump(toc), encoding="utf-8")
    (src / "book" / "intro.md").write_text("# Mini book\n\nSee {doc}`nb/runs/demo`.\n", encoding="utf-8")

    env = dict(os.environ, SEC_NODE_MODULES=str(_node_modules()))
    # sec_lib must be importable by jupyter-book (an editable install does that; PYTHONPATH for a checkout).
    env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), str(REPO)) if p)
    jb = Path(sys.executable).with_name("jupyter-book")
    cmd = [str(jb), "build", str(src), "-W", "-n", "--keep-going", "--builder", "html"]
    proc = subprocess.run(cmd, cwd=src, env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, f"jupyter-book build -W failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return src / "_build" / "html"


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


def test_widgets_render_offline_and_slider_changes_image(mini_book, tmp_path):
    shot = tmp_path / "demo.png"
    rep = pagecheck.check_page(mini_book / PAGE, slider=1, expect_widgets=1, screenshot=shot)
    assert rep.external_requests == [], rep.external_requests
    assert all(u.startswith(pagecheck.LOCAL_SCHEMES) for u in rep.requests)
    assert any(u.endswith("embed-amd.js") or "embed-amd.js?" in u for u in rep.requests)
    assert rep.failed_requests == [] and rep.console_errors == [] and rep.page_errors == [], rep.problems
    assert rep.widget_views == 1 and rep.widgets_rendered == 1, rep.problems
    assert rep.widget_elements >= 3            # the box, the slider and the image at least
    assert rep.images >= 2 and rep.broken_images == []   # the widget image and the matplotlib figure
    assert rep.formulas == 1 and rep.formulas_typeset == 1  # by the book's own MathJax
    s = rep.slider
    assert s is not None and s.control == "slider" and s.moved, s
    assert s.images_before and s.images_after and s.image_changed, s
    assert rep.ok, rep.problems
    assert shot.stat().st_size > 5_000


def test_checker_catches_network_broken_images_and_missing_manager(mini_book, tmp_path):
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
                                    slider_pages=[pages["nomanager"], pages["unlinked"]], timeout_s=6)
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
