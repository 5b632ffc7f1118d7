"""The table of contents, written from the one list of pages: ``_toc.yml`` is :func:`render` of
:data:`sec_lib.chapters.PAGES` (each page's :attr:`~sec_lib.chapters.Page.part`) and
:data:`sec_lib.chapters.PARTS` (the parts' order and the markdown pages that close each).

    python -m sec_lib.book toc            # rewrite _toc.yml from PAGES
    python -m sec_lib.book toc --check    # exit 1 if _toc.yml is not what PAGES says

The landing page (the page without a part) is the book's root. A page whose output lies in another page's folder
(``runs/train_triplet_none`` in ``runs``) is a section of that page, titled by :func:`section_title`.
"""
from __future__ import annotations

from pathlib import Path

from ..chapters import PAGES, PARTS, Page
from ..chapters.common import LOSS_TITLES
from ..params import ParameterError

HEADER = """\
# Table of contents (Jupyter Book 1, jb-book format), written from sec_lib.chapters.PAGES and PARTS by
# `python -m sec_lib.book toc`: edit those, not this file (tests/site/test_toc.py checks the two agree).
# book/nb/ holds the notebooks after papermill ran them (`python -m sec_lib.book run`);
# the unexecuted sources are in notebooks/ and are not part of the site.
"""
#: How a run page's title names its variant.
RUN_VARIANTS = {"none": "no regularizer", "l2reg": "L2-reg (μ = 0)", "sec": "SEC"}


def section_title(page: Page) -> str:
    """A section page's title in the table of contents: a run page's loss and variant."""
    if page.source == "train":
        loss, variant = page.params["loss"], page.params["variant"]
        return f"Run: {LOSS_TITLES.get(loss, loss)}, {RUN_VARIANTS[variant]}"
    return page.output


def _quoted(text: str) -> str:
    return f'"{text}"' if any(ch in text for ch in ':#{}[],&*?|>!%@`"\'') else text


def render(pages=PAGES, parts=PARTS) -> str:
    """The text of ``_toc.yml``: the root, then each part of ``parts`` with its pages (in the order of ``pages``),
    each page's sections under it, then the part's markdown pages. ParameterError when a page's part is not one
    of ``parts``, when there is no root or more than one, or when a section's page is missing."""
    roots = [p for p in pages if p.part is None]
    if len(roots) != 1:
        raise ParameterError(f"the book needs exactly one page without a part (its root); got "
                             f"{[p.output for p in roots]}")
    captions = [c for c, _ in parts]
    outputs = {p.output for p in pages}
    sections: dict[str, list[Page]] = {}
    for p in pages:
        if p.part is not None and p.part not in captions:
            raise ParameterError(f"page {p.output!r} names the part {p.part!r}; parts: {', '.join(captions)}")
        parent = p.output.rsplit("/", 1)[0] if "/" in p.output else None
        if parent is not None:
            if parent not in outputs:
                raise ParameterError(f"page {p.output!r} lies in the folder of a page {parent!r} that PAGES lacks")
            sections.setdefault(parent, []).append(p)
    lines = [HEADER.rstrip("\n"), "format: jb-book", f"root: book/nb/{roots[0].output}", "parts:"]
    for caption, docs in parts:
        chapters = [p for p in pages if p.part == caption and "/" not in p.output]
        if not chapters and not docs:
            continue
        lines += [f"  - caption: {_quoted(caption)}", "    chapters:"]
        for p in chapters:
            lines.append(f"      - file: book/nb/{p.output}")
            if p.output in sections:
                lines.append("        sections:")
                for s in sections[p.output]:
                    lines += [f"          - file: book/nb/{s.output}", f"            title: {_quoted(section_title(s))}"]
        lines += [f"      - file: {doc}" for doc in docs]
    return "\n".join(lines) + "\n"


def write(site: Path) -> bool:
    """Write ``<site>/_toc.yml`` from :func:`render` when it differs (atomically); True when it changed."""
    path = Path(site) / "_toc.yml"
    text = render()
    if path.exists() and path.read_text(encoding="utf-8") == text:
        return False
    tmp = path.with_suffix(".yml.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    return True
