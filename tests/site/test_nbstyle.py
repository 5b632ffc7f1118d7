"""The site's reading aids: code folded behind toggles, the run's parameters in a box, verdict badges,
intervals that stay on one line, the source-download buttons and the BibTeX entry from CITATION.cff."""
from __future__ import annotations

import base64
import re
from pathlib import Path

import nbformat
import pytest
import yaml

from sec_lib.figures import tables as display
from sec_lib.site import nbstyle, sitepages
from sec_lib.report import VERDICTS

REPO = Path(__file__).resolve().parents[2]
CSS = REPO / "book" / "_static" / "sec.css"


def _out(text="1"):
    return [nbformat.v4.new_output("stream", name="stdout", text=text)]


def _notebook(injected: str | None = 'profile = "smoke"\nloss = "triplet"\n'):
    v4 = nbformat.v4
    nb = v4.new_notebook()
    nb.cells = [
        v4.new_markdown_cell("# One training run\n\nWhat happens inside training?"),
        v4.new_code_cell('profile = "cpu"\nloss = "semihard"\nseed = 0', metadata={"tags": ["parameters"]}),
        v4.new_code_cell("import numpy as np"),
        v4.new_code_cell("x = 1", metadata={"tags": ["remove-input"]}, outputs=_out()),
        v4.new_markdown_cell("Some text."),
        v4.new_code_cell("print(1)", metadata={"tags": ["show-input"]}, outputs=_out()),
        v4.new_code_cell("y", outputs=_out()),
        v4.new_code_cell("show_evidence()", outputs=[v4.new_output("display_data", data={
            "text/markdown": "**Evidence on this page: the decisive tier**, 115 runs"}), *_out("R@1 77.1"),
            v4.new_output("display_data", data={"text/markdown": "**Already in the decisive tier.** It holds C1"})]),
    ]
    if injected is not None:
        nb.cells.insert(2, v4.new_code_cell("# Parameters\n" + injected, metadata={"tags": ["injected-parameters"]}))
    return nb


def _tags(cell):
    return cell.get("metadata", {}).get("tags", [])


def test_every_code_cell_is_folded_unless_a_tag_decides_and_an_empty_one_is_removed(tmp_path):
    path = tmp_path / "page.ipynb"
    nbformat.write(_notebook(), path)
    nbstyle.style_notebook(path)
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    by_source = {c.source.splitlines()[0]: _tags(c) for c in code}
    assert by_source['profile = "cpu"'] == ["parameters", "remove-cell"]       # shows nothing: no empty bar
    assert by_source["# Parameters"] == ["injected-parameters", "remove-cell"]   # shown in the box instead
    assert by_source["import numpy as np"] == ["remove-cell"]
    assert by_source["y"] == ["hide-input"]                          # an ordinary cell with an output: folded
    assert by_source["x = 1"] == ["remove-input"]                   # already removed: left alone
    assert by_source["print(1)"] == ["show-input"]                  # explicitly shown: left alone
    assert by_source["show_evidence()"] == ["hide-input"]           # its other output stays on the page
    nbformat.validate(nb)


def test_the_parameters_and_the_tier_sentence_are_folded_in_one_box_at_the_end(tmp_path):
    path = tmp_path / "page.ipynb"
    nbformat.write(_notebook(), path)
    nbstyle.style_notebook(path)
    nbstyle.style_notebook(path)                      # twice: one box, the same sentences, no repeated tags
    nb = nbformat.read(path, as_version=4)
    boxes = [i for i, c in enumerate(nb.cells) if nbstyle.PROVENANCE_TAG in _tags(c)]
    assert boxes == [len(nb.cells) - 1], "one box, the page's last cell"
    assert not [c for c in nb.cells if nbstyle.PARAMS_BOX_TAG in _tags(c)]
    text = nb.cells[-1].source
    assert nb.cells[-1].cell_type == "markdown"
    assert text.startswith("::::{dropdown} How this page was made") and text.rstrip().endswith("::::")
    assert '`profile = "smoke"`' in text and '`loss = "triplet"`' in text
    assert "semihard" not in text                     # the default that papermill overrode is not shown
    assert "every other parameter at the notebook's default" in text   # seed was not injected
    assert "{doc}`how to rerun it </book/rerun>`" in text
    assert text.count("**Evidence on this page: the decisive tier**, 115 runs") == 1
    assert text.count("**Already in the decisive tier.** It holds C1") == 1
    assert "shows the **decisive tier**" in text      # read from the sentence, also once it sits in the box
    evidence_cell = next(c for c in nb.cells if c.cell_type == "code" and c.source == "show_evidence()")
    assert [o.get("text") for o in evidence_cell.outputs] == ["R@1 77.1"]
    assert all(_tags(c).count("hide-input") <= 1 for c in nb.cells)
    nbformat.validate(nb)


def test_parameter_box_without_injected_values_says_defaults():
    injected, defaults = nbstyle.run_parameters(_notebook(injected=None))
    assert injected == {} and defaults == {"profile": '"cpu"', "loss": '"semihard"', "seed": "0"}
    assert "default parameters" in nbstyle.params_markdown(injected, defaults)
    assert "no parameters" in nbstyle.params_markdown({}, {})
    # all injected: no "every other parameter" clause
    text = nbstyle.params_markdown({"profile": '"cpu"'}, {"profile": '"cpu"'})
    assert "every other" not in text and '`profile = "cpu"`' in text and "tier" not in text


def test_parameter_box_names_the_tier_the_page_shows():
    """Run with profile cpu, a page showing the reference tier says so in its banner."""
    nb = _notebook(injected='profile = "cpu"\n')
    nb.cells = nb.cells[:-1]                          # without the fixture's decisive-tier sentence
    nb.cells.append(nbformat.v4.new_code_cell("x", outputs=[nbformat.v4.new_output(
        "display_data", data={"text/markdown": "**Evidence on this page: the reference tier**, 120 runs"})]))
    assert nbstyle.shown_tier(nb) == "reference"
    text = nbstyle.params_markdown({"profile": '"cpu"'}, {}, tier=nbstyle.shown_tier(nb))
    assert "shows the **reference tier**" in text
    assert "tier" not in nbstyle.params_markdown({"profile": '"cpu"'}, {}, tier="cpu")
    bare = _notebook(injected=None)
    bare.cells = bare.cells[:-1]
    assert nbstyle.shown_tier(bare) is None


def test_parameter_values_are_read_as_written_not_evaluated():
    src = 'profile = "gpu"\neta = 0.5\nlr_milestones = (5000, 8000)\nx: int = 3\nimport os\nprint(eta)'
    assert nbstyle._assignments(src) == {"profile": '"gpu"', "eta": "0.5",
                                         "lr_milestones": "(5000, 8000)", "x": "3"}
    assert nbstyle._assignments('label = "\\u03b7"\nname = \'a\'') == {"label": '"η"', "name": '"a"'}
    with pytest.raises(ValueError, match="not valid Python"):
        nbstyle._assignments("profile = ")


def test_runner_styles_every_executed_page():
    from sec_lib.site import runner as book
    assert book.style_notebook is nbstyle.style_notebook


@pytest.mark.parametrize("verdict", VERDICTS)
def test_badge_for_every_verdict_word_has_css(verdict):
    html = nbstyle.badge(verdict)
    cls = nbstyle.verdict_class(verdict)
    assert html == f'<span class="sec-verdict {cls}">{verdict}</span>'
    assert re.fullmatch(r"sec-verdict(-[a-z]+)+", cls)
    css = CSS.read_text(encoding="utf-8")
    assert re.search(r"\." + re.escape(cls) + r"\s*\{", css), f"book/_static/sec.css has no rule for .{cls}"
    assert not re.search(r"[\U0001F300-\U0001FAFF\u2600-\u27BF]", html), "a badge must not need an emoji font"


def test_css_styles_the_four_verdict_words_of_the_design():
    css = CSS.read_text(encoding="utf-8")
    for word in ("reproduced", "not reproduced", "inconclusive", "not testable offline"):
        assert "." + nbstyle.verdict_class(word) + " " in css, word
    assert not re.search(r"[\U0001F300-\U0001FAFF\u2600-\u27BF]", css)


def test_badge_refuses_other_words_and_normalises_case():
    assert nbstyle.badge(" Reproduced ") == nbstyle.badge("reproduced")
    for bad in ("yes", "", None, 1):
        with pytest.raises(ValueError, match="expected one of"):
            nbstyle.badge(bad)


def test_css_is_registered_and_sources_are_not_copied():
    cfg = yaml.safe_load((REPO / "_config.yml").read_text(encoding="utf-8"))["sphinx"]
    conf = cfg["config"]
    assert "sec.css" in conf["html_css_files"]
    assert all((REPO / d / "sec.css").is_file() for d in conf["html_static_path"])
    assert conf["html_copy_source"] is False and conf["html_show_sourcelink"] is False
    assert "sec_lib.site.sitepages" in cfg["extra_extensions"]
    css = CSS.read_text(encoding="utf-8")
    assert "tabular-nums" in css and "@media (max-width: 600px)" in css


def test_numbers_and_intervals_are_marked_to_stay_on_one_line_text_still_wraps():
    import pandas as pd
    df = pd.DataFrame({"loss": ["semihard triplet"], "R@1": ["65.11 ± 2.23"], "ci": ["65.1 [62.9, 67.3]"],
                       "var": ["4e-05 ± 0.00"], "verdict": ["not reproduced"], "p": [0.0123], "n": [5]})
    html = display.table_html(df, "t")
    cells = re.findall(r"<td(?: class=\"([^\"]*)\")?>(.*?)</td>", html)
    text = [re.sub(r"<[^>]+>", "", t) for _, t in cells]
    assert text == ["semihard triplet", "65.11 ± 2.23", "65.1 [62.9, 67.3]", "4e-05 ± 0.00", "not reproduced", "0.012", "5"]
    assert [c for c, _ in cells] == ["", "sec-num sec-wrap", "sec-num sec-wrap", "sec-num sec-wrap", "", "sec-num", "sec-num"]
    # an interval may move whole under its estimate, never break inside a number or its brackets
    assert re.findall(r"<span>([^<]*)</span>", cells[2][1]) == ["65.1", "[62.9, 67.3]"]
    assert re.search(r"td\.sec-num\s*\{[^}]*white-space:\s*nowrap", CSS.read_text(encoding="utf-8"))
    csv = base64.b64decode(re.search(r"base64,([^\"]+)", html).group(1)).decode()
    assert "65.11 ± 2.23" in csv                                           # the CSV keeps the raw text


def test_headers_may_break_after_underscores_csv_keeps_names():
    import pandas as pd
    df = pd.DataFrame({"test_norm_var": [0.5], "loss": ["ms"]})
    html = display.table_html(df, "t")
    assert "<th>test_\u200bnorm_\u200bvar</th>" in html and "<th>loss</th>" in html
    csv = base64.b64decode(re.search(r"base64,([^\"]+)", html).group(1)).decode()
    assert csv.splitlines()[0] == "test_norm_var,loss"


def test_source_download_buttons_are_pruned_and_pdf_stays():
    buttons = [{"type": "group", "label": "download-buttons", "buttons": [
        {"type": "link", "label": "download-notebook-button"},
        {"type": "link", "label": "download-source-button"},
        {"type": "javascript", "label": "download-pdf-button"}]},
        {"type": "javascript", "label": "fullscreen-button"},
        {"type": "group", "label": "only-sources", "buttons": [{"label": "download-source-button"}]}]
    out = sitepages.prune_source_buttons(buttons)
    assert [b["label"] for b in out] == ["download-buttons", "fullscreen-button"]
    assert [b["label"] for b in out[0]["buttons"]] == ["download-pdf-button"]
    assert len(buttons[0]["buttons"]) == 3        # the input is not changed


def test_source_maps_are_dropped_and_nothing_else(tmp_path):
    for name in ("scripts/a.js", "scripts/a.js.map", "styles/b.css.map", "styles/b.css", "data/keep.map"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x")
    gone = sitepages.drop_source_maps(tmp_path)
    assert sorted(p.relative_to(tmp_path).as_posix() for p in gone) == ["scripts/a.js.map", "styles/b.css.map"]
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()) == [
        "data/keep.map", "scripts/a.js", "styles/b.css"]


def test_bibtex_comes_from_citation_cff():
    cff = yaml.safe_load((REPO / "CITATION.cff").read_text(encoding="utf-8"))
    bib = sitepages.cff_to_bibtex(cff)
    assert bib.startswith("@software{") and bib.endswith("}")
    assert "title = {{" + cff["title"] + "}}" in bib
    assert f"version = {{{cff['version']}}}" in bib
    assert f"year = {{{str(cff['date-released'])[:4]}}}" in bib
    two = sitepages.cff_to_bibtex({"title": "T", "date-released": "2024-01-02",
                                   "authors": [{"family-names": "Doe", "given-names": "Jane"}, {"name": "ACME"}]})
    assert "author = {Doe, Jane and {ACME}}" in two and "year = {2024}" in two
    with pytest.raises(ValueError, match="lacks"):
        sitepages.cff_to_bibtex({"title": "no authors"})


def test_cite_page_includes_citation_cff_and_links_the_changelog():
    toc = (REPO / "_toc.yml").read_text(encoding="utf-8")
    assert "file: book/cite" in toc and "file: book/changelog" in toc
    cite = (REPO / "book" / "cite.md").read_text(encoding="utf-8")
    assert "{literalinclude} ../CITATION.cff" in cite and "{sec-bibtex} ../CITATION.cff" in cite
    assert "{doc}`changelog`" in cite
    assert "{include} ../CHANGELOG.md" in (REPO / "book" / "changelog.md").read_text(encoding="utf-8")
    version = yaml.safe_load((REPO / "CITATION.cff").read_text(encoding="utf-8"))["version"]
    assert str(version) not in cite, "the page must not retype CITATION.cff's numbers"


def test_palette_png_keeps_a_chart_and_shrinks_it(tmp_path):
    """A matplotlib chart (flat colours, faint grid, anti-aliased lines and text) stored with a 256-colour
    palette: smaller, and no pixel moves by more than a few levels of 255."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from PIL import Image

    from sec_lib.site.sitepages import palette_png

    fig, ax = plt.subplots(figsize=(6, 4), dpi=100)
    x = np.linspace(0, 5000, 400)
    for i in range(12):
        ax.plot(x, np.sin(x / 400 + i) * (1 + i / 10) + i, lw=0.8, color=plt.cm.viridis(i / 12))
    ax.grid(color="#eeeeee")
    ax.set_title("a chart with 12 colours and a faint grid")
    png = tmp_path / "chart.png"
    fig.savefig(png, facecolor="white")
    plt.close(fig)
    before_pixels = np.asarray(Image.open(png).convert("RGB"), dtype=int)
    old, new = palette_png(png)
    assert new < old and png.stat().st_size == new and Image.open(png).mode == "P"
    after = np.asarray(Image.open(png).convert("RGB"), dtype=int)
    assert np.abs(after - before_pixels).mean() < 1.0                  # on average under one level
    grid = (before_pixels == [238, 238, 238]).all(axis=2)
    assert grid.any() and (np.abs(after[grid] - 238) <= 4).all()       # the faint grid survives
    assert not list(tmp_path.glob(".tmp-*"))


def test_palette_png_leaves_transparent_and_palette_images_alone(tmp_path):
    from PIL import Image

    from sec_lib.site.sitepages import palette_png

    clear = tmp_path / "clear.png"
    Image.new("RGBA", (40, 40), (255, 0, 0, 0)).save(clear)
    size = clear.stat().st_size
    assert palette_png(clear) == (size, size) and Image.open(clear).mode == "RGBA"
    pal = tmp_path / "pal.png"
    Image.new("P", (40, 40)).save(pal)
    size = pal.stat().st_size
    assert palette_png(pal) == (size, size)


def test_a_figure_cell_shows_only_its_figure():
    """myst-nb names every output of a cell with figure metadata: a second output (a displayed note) would give
    the book a duplicate target and fail the -W build. Notes go in the next cell."""
    import json
    repo = Path(__file__).resolve().parents[2]
    for path in sorted((repo / "notebooks").glob("*.ipynb")):
        for c in json.loads(path.read_text())["cells"]:
            src = "".join(c["source"])
            if c["cell_type"] == "code" and "figure" in c.get("metadata", {}).get("mystnb", {}):
                assert "display(" not in src and "print(" not in src, (path.name, src[:200])


def test_figures_are_numbered_from_one_on_each_page_and_references_follow(tmp_path):
    """Sphinx numbers figures through the whole book; the site numbers them per page, captions and references."""
    def fig(n):
        return f'<figcaption><p><span class="caption-number">Fig. {n} </span><span class="caption-text">x</span></p>'

    def ref(n, href="#fig-x"):
        return f'<a class="reference internal" href="{href}"><span class="std std-numref">Fig. {n}</span></a>'
    (tmp_path / "a.html").write_text(fig(1) + fig(2) + ref(2), encoding="utf-8")
    (tmp_path / "nb").mkdir()
    (tmp_path / "nb" / "b.html").write_text(ref(41) + fig(41) + fig(42) + ref(1, "../a.html#fig-x"), encoding="utf-8")
    (tmp_path / "c.html").write_text("<p>Fig. 41 in prose is left alone</p>", encoding="utf-8")
    assert sitepages.renumber_figures(tmp_path) == {"a.html": 2, "nb/b.html": 2}
    assert (tmp_path / "a.html").read_text(encoding="utf-8") == fig(1) + fig(2) + ref(2)
    assert (tmp_path / "nb" / "b.html").read_text(encoding="utf-8") == ref(1) + fig(1) + fig(2) + ref(1, "../a.html#fig-x")
    assert (tmp_path / "c.html").read_text(encoding="utf-8") == "<p>Fig. 41 in prose is left alone</p>"
