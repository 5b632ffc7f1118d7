"""Sphinx extension for the site's weight and citation (``_config.yml``: ``sphinx: extra_extensions``).

- With ``html_copy_source: false`` (the book does not ship ``_sources/``, 14 MB of page sources and
  executed notebooks), sphinx-book-theme would still offer "download .ipynb / .md" buttons that point
  into the missing ``_sources/``; they are removed here, and "print to PDF" stays.
- The themes' JavaScript and CSS source maps (``_static/**/*.map``, about 3.4 MB) are deleted after
  the build: a browser fetches them only for its developer tools, never to show a page.
- The figures (``_images/*.png``, rendered by matplotlib in 24-bit colour) are stored with a palette of
  at most 256 colours after the build (:func:`palette_png`; median cut, no dithering): charts of flat
  colours on white look the same and take about a third of the bytes (7.6 MB → 3.1 MB in the cpu
  build). An image with transparency, or one the palette would not make smaller, is left as it is.
- The theme's icon fonts (Font Awesome, under ``_static/vendor/``) are served as woff2 alone
  (:func:`drop_truetype_fallbacks`): every ``@font-face`` names the woff2 file first, which every browser the
  book supports reads, so the TrueType copy after it (0.7 MB) is never fetched; it and its ``url(…)`` go.
- ``{sec-bibtex} CITATION.cff``: a BibTeX entry generated at build time from the repository's
  ``CITATION.cff`` (used by ``book/cite.md``), so no number of the citation is typed twice.
"""
from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import yaml
from docutils import nodes
from PIL import Image
from sphinx.util.docutils import SphinxDirective

from ..tempfiles import atomic_write_bytes

#: Header buttons of sphinx-book-theme that link into ``_sources/``.
SOURCE_BUTTONS = frozenset({"download-source-button", "download-notebook-button"})


def prune_source_buttons(buttons: list) -> list:
    """``buttons`` without the entries (at any depth of button groups) that download a page's source."""
    out = []
    for b in buttons:
        if not isinstance(b, dict):
            out.append(b)
            continue
        if b.get("label") in SOURCE_BUTTONS:
            continue
        if b.get("type") == "group":
            b = dict(b, buttons=prune_source_buttons(b.get("buttons", [])))
            if not b["buttons"]:
                continue
        out.append(b)
    return out


def _drop_source_buttons(app: Any, pagename: str, templatename: str, context: dict, doctree: Any) -> None:
    if app.config.html_copy_source or "header_buttons" not in context:
        return
    context["header_buttons"][:] = prune_source_buttons(context["header_buttons"])


def drop_source_maps(static_dir: str | Path) -> list[Path]:
    """Delete the ``*.js.map`` / ``*.css.map`` files under ``static_dir``; return what was deleted."""
    gone = [p for p in sorted(Path(static_dir).rglob("*.map")) if p.is_file() and p.name.endswith((".js.map", ".css.map"))]
    for p in gone:
        p.unlink()
    return gone


def _drop_source_maps(app: Any, exception: Exception | None) -> None:
    if exception is None and getattr(app.builder, "format", None) == "html":
        drop_source_maps(Path(app.outdir) / "_static")


#: A TrueType source listed after a woff2 one in an ``@font-face`` rule (pydata-sphinx-theme's Font Awesome).
_TTF_AFTER_WOFF2 = re.compile(r'(url\(([^)]*?)\.woff2\) format\("woff2"\)),url\(\2\.ttf\) format\("truetype"\)')


def drop_truetype_fallbacks(static_dir: str | Path) -> list[Path]:
    """In the style sheets under ``static_dir``, drop each TrueType source that follows a woff2 copy of the same
    font, and delete those ``.ttf`` files once no style sheet names them; return the files deleted. A ``.ttf``
    without a woff2 sibling, or one a style sheet still names, is kept."""
    static_dir = Path(static_dir)
    named = set()
    for css in sorted(static_dir.rglob("*.css")):
        text = css.read_text(encoding="utf-8")
        new = _TTF_AFTER_WOFF2.sub(r"\1", text)
        if new != text:
            for m in _TTF_AFTER_WOFF2.finditer(text):
                named.add((css.parent / f"{m.group(2)}.ttf").resolve())
            atomic_write_bytes(css, new.encode("utf-8"))
    still = set()
    for css in sorted(static_dir.rglob("*.css")):
        for m in re.finditer(r"url\(([^)]*?\.ttf)\)", css.read_text(encoding="utf-8")):
            still.add((css.parent / m.group(1)).resolve())
    gone = [p for p in sorted(named) if p.is_file() and p.with_suffix(".woff2").is_file() and p not in still]
    for p in gone:
        p.unlink()
    return gone


def _drop_truetype_fallbacks(app: Any, exception: Exception | None) -> None:
    if exception is None and getattr(app.builder, "format", None) == "html":
        drop_truetype_fallbacks(Path(app.outdir) / "_static")


#: Colours of the palette :func:`palette_png` stores an image with.
PALETTE_COLORS = 256


def palette_png(path: str | Path) -> tuple[int, int]:
    """Re-store the PNG at ``path`` with a palette of at most :data:`PALETTE_COLORS` colours (median cut,
    no dithering) when that makes it smaller and it is opaque; return its (old, new) size in bytes."""
    path = Path(path)
    before = path.stat().st_size
    with Image.open(path) as im:
        im.load()
    if im.mode in ("RGBA", "LA") and im.getchannel("A").getextrema()[0] < 255:
        return before, before                      # transparency: a palette would flatten it
    if im.mode == "P":
        return before, before
    q = im.convert("RGB").quantize(colors=PALETTE_COLORS, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    buf = io.BytesIO()
    q.save(buf, "PNG", optimize=True)
    if buf.tell() >= before:
        return before, before
    atomic_write_bytes(path, buf.getvalue())
    return before, buf.tell()


def _palette_images(app: Any, exception: Exception | None) -> None:
    if exception is None and getattr(app.builder, "format", None) == "html":
        for png in sorted((Path(app.outdir) / "_images").glob("*.png")):
            palette_png(png)


#: A figure's number in its caption, and a reference to a figure by number (Sphinx's numfig): "Fig. 143".
_CAPTION_NUMBER = re.compile(r'(<span class="caption-number">Fig\. )(\d+)( </span>)')
_NUMREF = re.compile(r'(<span class="std std-numref">Fig\. )(\d+)(</span>)')


def renumber_figures(html_dir: str | Path) -> dict[str, int]:
    """Number the figures of each page from 1, in the order the page shows them, where Sphinx numbers them through
    the whole book (Fig. 143 on the 20th page): every caption's number, and every reference to a figure by its
    number, on any page (a reference to another page's figure gets that figure's number on its own page).
    Rewrites the HTML files under ``html_dir`` in place (atomically); returns {page: its figures}."""
    html_dir = Path(html_dir)
    texts = {page: page.read_text(encoding="utf-8") for page in sorted(html_dir.rglob("*.html"))}
    new: dict[str, str] = {}
    counts: dict[str, int] = {}
    for page, text in texts.items():
        numbers = _CAPTION_NUMBER.findall(text)
        for i, (_, old, _) in enumerate(numbers, start=1):
            new[old] = str(i)
        if numbers:
            counts[page.relative_to(html_dir).as_posix()] = len(numbers)
    for page, text in texts.items():
        out = _CAPTION_NUMBER.sub(lambda m: m.group(1) + new.get(m.group(2), m.group(2)) + m.group(3), text)
        out = _NUMREF.sub(lambda m: m.group(1) + new.get(m.group(2), m.group(2)) + m.group(3), out)
        if out != text:
            atomic_write_bytes(page, out.encode("utf-8"))
    return counts


def _renumber_figures(app: Any, exception: Exception | None) -> None:
    if exception is None and getattr(app.builder, "format", None) == "html":
        renumber_figures(app.outdir)


def _bibtex_key(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "", text.lower())


def cff_to_bibtex(cff: dict) -> str:
    """A ``@software`` BibTeX entry from the fields of a CITATION.cff mapping (title, authors, version,
    date-released, url / repository-code, doi, license). Raises ValueError when ``title`` or
    ``authors`` is missing, naming the fields found."""
    missing = [k for k in ("title", "authors") if not cff.get(k)]
    if missing:
        raise ValueError(f"CITATION.cff lacks {missing}; fields found: {sorted(cff)}")
    names = []
    for a in cff["authors"]:
        if a.get("family-names"):
            names.append(f"{a['family-names']}, {a.get('given-names', '')}".strip(", "))
        elif a.get("name"):
            names.append("{" + str(a["name"]) + "}")
    date = str(cff.get("date-released", ""))
    year = date[:4] if re.match(r"\d{4}", date) else ""
    fields = [("title", "{" + str(cff["title"]) + "}"), ("author", " and ".join(names))]
    fields += [(k, v) for k, v in (("version", cff.get("version")), ("year", year), ("date", date or None),
                                   ("url", cff.get("url") or cff.get("repository-code")),
                                   ("doi", cff.get("doi")), ("license", cff.get("license"))) if v]
    first = _bibtex_key(names[0]) if names else "anon"
    key = f"{first[:20]}{year}{_bibtex_key(str(cff['title']).split(':')[0])[:12]}"
    body = ",\n".join(f"  {k} = {{{v}}}" for k, v in fields)
    return f"@software{{{key},\n{body}\n}}"


class CffBibtex(SphinxDirective):
    """``{sec-bibtex} <path to CITATION.cff, relative to the page>``: the entry as a BibTeX code block."""
    required_arguments = 1

    def run(self):
        rel, path = self.env.relfn2path(self.arguments[0])
        path = Path(path)
        if not path.is_file():
            raise self.error(f"sec-bibtex: {self.arguments[0]!r} not found (looked at {path})")
        self.env.note_dependency(rel)
        cff = yaml.safe_load(path.read_text(encoding="utf-8"))
        try:
            text = cff_to_bibtex(cff)
        except ValueError as err:
            raise self.error(f"sec-bibtex: {err}") from None
        block = nodes.literal_block(text, text)
        block["language"] = "bibtex"
        return [block]


def setup(app: Any) -> dict[str, Any]:
    """Sphinx entry point."""
    app.connect("html-page-context", _drop_source_buttons, priority=600)   # after sphinx-book-theme (501)
    app.connect("build-finished", _drop_source_maps)
    app.connect("build-finished", _drop_truetype_fallbacks)
    app.connect("build-finished", _palette_images)
    app.connect("build-finished", _renumber_figures)
    app.add_directive("sec-bibtex", CffBibtex)
    return {"version": "0.1.0", "parallel_read_safe": True, "parallel_write_safe": True}
