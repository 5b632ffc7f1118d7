"""Check built book pages in headless Chromium, offline, the way a reader opens them (``file://``).

For each page it records:

- every request the page makes; a request whose URL is not ``file:``, ``data:``, ``blob:`` (or
  ``about:``) is a failure ("no request leaves the machine"). Such requests are also aborted, so
  the check itself never reaches the network;
- failed requests (for example a ``file://`` script that is missing), JavaScript console errors
  and uncaught page errors;
- the embedded Jupyter widgets: how many widget views the page declares
  (``<script type="application/vnd.jupyter.widget-view+json">``) and how many the widget manager
  rendered (a ``.widget-subarea`` holding a ``.jupyter-widgets`` element);
- whether every ``<img>`` loaded (``naturalWidth > 0``) and every formula was typeset by MathJax;
- optionally, after moving the first slider (keyboard: focus the slider handle, press the arrow
  keys) or the first dropdown of the page, whether the image shown next to it changed;
- whether every table and every cell output fits the text column (tables folded in a
  ``details.sec-more`` opened first), at each of the ``widths``
  (default 1,400, 800 and 420 px). At a phone width (below :data:`PHONE_WIDTH`) a wide table or
  output may scroll inside its own box; at the other widths it must fit. A formula (display or
  inline) wider than its box or the column must scroll inside its own box at every width
  (``book/_static/sec.css`` gives it one), never be cut off. The page itself must never scroll sideways;
- how long the page took to load (the ``load`` event) and until MathJax had typeset it, in ms. This
  is reported, not judged, unless a limit is given (``max_load_ms``, ``--max-load-ms``).

Use it from Python (:func:`check_page`, :func:`check_book`) or from the shell::

    python -m sec_lib.site.pagecheck _build/html                      # every page
    python -m sec_lib.site.pagecheck _build/html book/nb/explore.html --screenshots /tmp/shots

The browser driving (Chromium, its contexts, moving a control) is :mod:`sec_lib.site.pagebrowser`; the
report and its verdicts are :mod:`sec_lib.site.pagereport`; this module holds the in-page probes, the
check of one page, :func:`check_book` and the command line, and re-exports the public names of both.

It needs the ``playwright`` Python package and a Chromium binary (Debian's ``chromium``, found at
``/usr/bin/chromium`` or via ``$SEC_CHROMIUM``; ``make browser`` installs it). It never downloads
a browser.
"""
from __future__ import annotations

import argparse
import contextlib
import html
import os
import re
import sys
from pathlib import Path
from typing import Iterable, Sequence

from .pagebrowser import CHROMIUM_ARGS, ENV_CHROMIUM, Browser, find_chromium, move_control, to_url
from .pagereport import ANSWER_WIDTH, PHONE_WIDTH, WIDTHS, Overflow, PageReport, SliderResult, format_table

__all__ = [
    "LOCAL_SCHEMES", "CHROMIUM_ARGS", "ENV_CHROMIUM", "WIDTHS", "PHONE_WIDTH", "WIDGET_VIEW_MIME",
    "WIDGET_STATE_MIME", "CONTROL_MODELS", "SITE_LIMIT", "site_bytes", "site_problem", "check_tex", "find_chromium",
    "Browser", "SliderResult", "Overflow", "PageReport", "check_page", "check_book", "list_pages", "format_table", "main",
]

#: URL schemes that stay on this machine.
LOCAL_SCHEMES = ("file:", "data:", "blob:", "about:")

WIDGET_VIEW_MIME = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE_MIME = "application/vnd.jupyter.widget-state+json"


# JavaScript run in the page -----------------------------------------------------------------

_JS_WIDGETS = """
() => {
  const views = document.querySelectorAll('script[type="%s"]').length;
  const state = document.querySelectorAll('script[type="%s"]').length > 0;
  let rendered = 0, elements = 0;
  for (const area of document.querySelectorAll('.widget-subarea')) {
    const n = area.querySelectorAll('.jupyter-widgets, [class*="widget-"]').length;
    if (area.querySelector('.jupyter-widgets')) rendered += 1;
    elements += n;
  }
  return {views, state, rendered, elements};
}
""" % (WIDGET_VIEW_MIME, WIDGET_STATE_MIME)

_JS_IMAGES = """
() => Array.from(document.images).map(img => ({
  src: img.currentSrc || img.src || '', ok: img.complete && img.naturalWidth > 0,
  lazy: img.loading === 'lazy',
  // a figure a cell drew (not a widget's frame) without a caption of its own
  uncaptioned: img.closest('div.cell_output') !== null && img.closest('.widget-subarea, .jupyter-widgets') === null
    && !(img.closest('figure') && img.closest('figure').querySelector('figcaption'))}))
"""


# Tables and cell outputs wider than the text column (the article's content box). Hidden elements
# (folded code, closed toggles) have no layout and are skipped; an output that only holds a wide
# table is reported once, as the table.
_JS_LAYOUT = """
() => {
  const col = document.querySelector('article.bd-article') || document.querySelector('main') || document.body;
  const cs = getComputedStyle(col);
  const colW = col.getBoundingClientRect().width - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight);
  const visible = (el) => (!el.checkVisibility || el.checkVisibility())
      && el.getClientRects().length > 0 && el.getBoundingClientRect().width > 0;
  const scrolls = (el) => ['auto', 'scroll'].includes(getComputedStyle(el).overflowX);
  const label = (el) => (el.innerText || el.textContent || '').replace(/\\s+/g, ' ').trim().slice(0, 60);
  const fullWidth = (el) => Math.max(el.scrollWidth, el.getBoundingClientRect().width);
  const inOwnBox = (el) => {           // el, or an ancestor inside the column, scrolls and fits the column
    for (let a = el; a && a !== col; a = a.parentElement)
      if (scrolls(a) && a.getBoundingClientRect().width <= colW + 1) return true;
    return false;
  };
  const wide = [];
  const tables = Array.from(col.querySelectorAll('table')).filter(visible);
  for (const t of tables) {
    const w = fullWidth(t);
    if (w > colW + 1) wide.push({what: 'table "' + label(t) + '"', content: w, box: inOwnBox(t.parentElement), el: t});
  }
  for (const o of Array.from(col.querySelectorAll('div.cell_output > *')).filter(visible)) {
    const w = fullWidth(o);
    if (w <= colW + 1 || wide.some((x) => o.contains(x.el))) continue;
    wide.push({what: 'output "' + label(o) + '"', content: w, box: inOwnBox(o), el: o});
  }
  // A formula (display or inline: Sphinx's div.math / span.math, MathJax 3's mjx-container, MathJax 2's
  // .MathJax_Display) whose typeset content is wider than its box or than the column: it must scroll in its
  // own box, else it is cut off (the theme clips span.math) or pushes the column sideways. Reported once,
  // at the outermost box that overflows.
  const maths = Array.from(col.querySelectorAll('div.math, span.math, mjx-container, .MathJax_Display')).filter(visible);
  const over = [];
  for (const m of maths) {
    const content = Math.max(m.scrollWidth, ...Array.from(m.children).map((c) => c.getBoundingClientRect().width));
    const room = Math.min(m.clientWidth || m.getBoundingClientRect().width, colW);
    if (content > room + 1 && !over.some((x) => x.el.contains(m))) over.push({el: m, content: content});
  }
  for (const x of over) {
    const inline = x.el.closest('span.math') !== null
        || (x.el.tagName === 'MJX-CONTAINER' && x.el.getAttribute('display') !== 'true');
    const tex = (x.el.querySelector('mjx-assistive-mml') || x.el).textContent.replace(/\\s+/g, ' ').trim().slice(0, 40);
    wide.push({what: 'formula' + (inline ? ' (inline)' : '') + ' "' + tex + '"', content: x.content,
               box: inOwnBox(x.el), el: x.el});
  }
  const article = document.querySelector('.bd-article-container');
  const pageScrolls = document.documentElement.scrollWidth > window.innerWidth + 1
      || (article !== null && article.scrollWidth > article.clientWidth + 1);
  return {column: colW, pageScrolls,
          wide: wide.map((x) => ({what: x.what, content: x.content, box: x.box}))};
}
"""

#: Where the page's marked answer starts (document px), whether it carries a verdict and an interval, and whether
#: the page decides claims (it shows a claims box, :func:`sec_lib.report.claims.box`).
_JS_ANSWER = r"""
() => { const claims = document.querySelector('ul.claims-box') !== null;
        const a = document.querySelector('.page-answer');
        if (!a) return {claims: claims, y: null, marked: false, before: '', fig: null, wantsFig: false};
        const interval = /\[\s*[−+-]?\d[\d.,]*\s*,\s*[−+-]?\d[\d.,]*\s*\]/.test(a.textContent);
        // the text a reader sees above the answer: visible text nodes only (folded code is not read)
        const article = document.querySelector('article.bd-article') || document.body;
        const walk = document.createTreeWalker(article, NodeFilter.SHOW_TEXT);
        const seen = [];
        for (let n = walk.nextNode(); n; n = walk.nextNode()) {
          if (a.contains(n) || (a.compareDocumentPosition(n) & Node.DOCUMENT_POSITION_FOLLOWING)) break;
          if (n.parentElement && n.parentElement.checkVisibility()) seen.push(n.textContent);
        }
        // the first image after the answer (its figure), and whether the page asks for it on the first screen
        const img = Array.from(article.querySelectorAll('img')).find(
            (i) => (a.compareDocumentPosition(i) & Node.DOCUMENT_POSITION_FOLLOWING)
                   && i.getBoundingClientRect().height > 0);
        const r = img ? img.getBoundingClientRect() : null;
        return {claims: claims, y: a.getBoundingClientRect().top + window.scrollY,
                marked: (interval || a.dataset.interval === 'none') && a.querySelector('[data-verdict]') !== null,
                before: seen.join(' '), wantsFig: a.dataset.figure === 'first-screen',
                fig: r ? {top: r.top + window.scrollY, height: r.height} : null}; }
"""
#: What a reader should not meet before a page's answer (the glossary defines them; the answer must not need them):
#: a claim id (C4v, P1, Q10a, S1), a tier's name, a Holm family.
JARGON = re.compile(r"\b(?:[CPQS]\d{1,2}[a-z]?\b|(?:decisive|quick|reference|retired|gpu) tier|Holm|famil(?:y|ies)\b)")


def jargon(text: str) -> list[str]:
    """The distinct jargon words of :data:`JARGON` in ``text``, in the order they first appear."""
    return list(dict.fromkeys(m.group(0) for m in JARGON.finditer(text)))

_JS_LOAD_MS = """
() => { const n = performance.getEntriesByType('navigation')[0];
        return n && n.loadEventEnd > 0 ? n.loadEventEnd : null; }
"""


def _check_layout(page, rep: PageReport, widths: Sequence[int], screenshot: str | os.PathLike | None) -> None:
    """Resize the page to each width and record what does not fit (and a screenshot per width). Tables
    folded under a table (``details.sec-more``, :func:`sec_lib.figures.tables.fold_columns`) are opened
    first: they must fit too."""
    height = page.viewport_size["height"] if page.viewport_size else 900
    page.evaluate("() => document.querySelectorAll('details.sec-more').forEach((d) => { d.open = true; })")
    for w in widths:
        page.set_viewport_size({"width": int(w), "height": height})
        page.wait_for_timeout(150)
        lay = page.evaluate(_JS_LAYOUT)
        rep.widths.append(int(w))
        rep.overflows += [Overflow(int(w), x["what"], x["content"], lay["column"], x["box"]) for x in lay["wide"]]
        if lay["pageScrolls"]:
            rep.page_scrolls.append(int(w))
        if screenshot is not None:
            shot = Path(screenshot)
            shot = shot.with_name(f"{shot.stem}@{int(w)}px{shot.suffix or '.png'}")
            page.screenshot(path=str(shot), full_page=True)
            rep.screenshots.append(str(shot))


def _check(browser: Browser, page_name: str, url: str, *, slider: int | None, expect_widgets: int | None,
           screenshot: str | os.PathLike | None, timeout_s: float, viewport: tuple[int, int],
           widths: Sequence[int] = WIDTHS, max_load_ms: float | None = None) -> PageReport:
    rep = PageReport(page=page_name, url=url, expect_widgets=expect_widgets, max_load_ms=max_load_ms)
    page = browser.context(viewport).new_page()

    def is_local(u: str) -> bool:
        return u.startswith(LOCAL_SCHEMES)

    def block(route):
        rep.external_requests.append(route.request.url)
        route.abort()

    page.route(lambda u: not is_local(u), block)
    page.on("request", lambda r: rep.requests.append(r.url))
    page.on("requestfailed", lambda r: None if not is_local(r.url)
            else rep.failed_requests.append(f"{r.url} ({r.failure})"))
    page.on("console", lambda m: rep.console_errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: rep.page_errors.append(str(e).splitlines()[0] if str(e) else repr(e)))
    page.on("websocket", lambda ws: rep.external_requests.append(ws.url))
    try:
        page.goto(url, wait_until="load", timeout=int(timeout_s * 1000))
        # Wait for MathJax to finish typesetting, where the page loads it. A page that redirects
        # (the book's index.html) destroys the context once: wait for the target and retry.
        for attempt in range(3):
            try:
                rep.typeset_ms = page.evaluate("""async () => { const mj = window.MathJax;
                    if (mj && mj.startup && mj.startup.promise) await mj.startup.promise;
                    return performance.now(); }""")
                break
            except Exception as err:
                if "context was destroyed" in str(err) and attempt < 2:
                    page.wait_for_load_state("load", timeout=int(timeout_s * 1000))
                    continue
                rep.page_errors.append(f"MathJax did not start: {err}".splitlines()[0])
                break
        # Wait for the widget manager to render every declared view (or time out and report).
        try:
            page.wait_for_function(
                """([vmime]) => {
                     const n = document.querySelectorAll('script[type="' + vmime + '"]').length;
                     let r = 0;
                     for (const a of document.querySelectorAll('.widget-subarea'))
                       if (a.querySelector('.jupyter-widgets')) r += 1;
                     return r >= n && Array.from(document.images).every(i => i.complete || i.loading === 'lazy');
                   }""", arg=[WIDGET_VIEW_MIME], timeout=int(timeout_s * 1000))
        except Exception:
            pass
        page.wait_for_timeout(100)
        rep.load_ms = page.evaluate(_JS_LOAD_MS)
        rep.title = page.title()
        w = page.evaluate(_JS_WIDGETS)
        rep.widget_views, rep.widgets_rendered = w["views"], w["rendered"]
        rep.widget_elements, rep.has_widget_state = w["elements"], w["state"]
        math = page.evaluate("""() => { const els = Array.from(document.querySelectorAll('.math'));
            return [els.length, els.filter(e => e.querySelector('mjx-container')).length,
                    els.filter(e => e.querySelector('[data-mjx-error], mjx-merror')).length]; }""")
        rep.formulas, rep.formulas_typeset, rep.math_errors = math
        if slider is not None:
            rep.slider = move_control(page, slider, settle_ms=500)
        # Lazy images load once scrolled into view: scroll through the page before judging images.
        page.evaluate("""async () => { for (const i of document.images) { i.loading = 'eager'; } }""")
        try:
            page.wait_for_function("() => Array.from(document.images).every(i => i.complete)", timeout=10_000)
        except Exception:
            pass
        imgs = page.evaluate(_JS_IMAGES)
        rep.images = len(imgs)
        rep.broken_images = [i["src"][:120] for i in imgs if not i["ok"]]
        rep.uncaptioned_figures = [i["src"].rsplit("/", 1)[-1][:80] for i in imgs if i["uncaptioned"]]
        if screenshot is not None:
            Path(screenshot).parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(screenshot), full_page=True)
            rep.screenshot = str(screenshot)
        height = page.viewport_size["height"] if page.viewport_size else 900
        page.set_viewport_size({"width": ANSWER_WIDTH, "height": height})
        page.wait_for_timeout(150)
        ans = page.evaluate(_JS_ANSWER)
        rep.decides_claims, rep.answer_y, rep.answer_marked = ans["claims"], ans["y"], ans["marked"]
        rep.jargon_before_answer = jargon(ans["before"])
        rep.figure_first_screen = ans["wantsFig"]
        if ans["fig"] is not None:
            rep.figure_y, rep.figure_h = ans["fig"]["top"], ans["fig"]["height"]
        _check_layout(page, rep, widths, screenshot)
    except Exception as err:
        rep.page_errors.append(f"could not check the page: {type(err).__name__}: {err}".splitlines()[0])
    finally:
        page.close()
    return rep


def check_page(path_or_url: str | os.PathLike, *, slider: int | None = None, expect_widgets: int | None = None,
               screenshot: str | os.PathLike | None = None, timeout_s: float = 20.0,
               viewport: tuple[int, int] = (1280, 900), executable: str | None = None,
               widths: Sequence[int] = WIDTHS, max_load_ms: float | None = None,
               browser: Browser | None = None) -> PageReport:
    """Open one page in headless Chromium from ``file://`` and report what it did.

    - ``slider``: None leaves the controls alone; an int moves the first slider of the page by that
      many steps (arrow keys; negative = left), or picks the option that many places further in the
      first dropdown, and records whether the image shown in that widget changed.
    - ``expect_widgets``: also require at least this many rendered widget views (every declared
      view must render in any case).
    - ``screenshot``: save a full-page PNG there, and one per checked width next to it
      (``<name>@1400px.png``, ...).
    - ``widths``: viewport widths at which every table and output must fit the text column (below
      :data:`PHONE_WIDTH` they may scroll in their own box); ``()`` skips the layout check.
    - ``max_load_ms``: when given, a page whose ``load`` event comes later is a problem (the load
      time is always reported in ``load_ms``).
    - ``browser``: an open :class:`Browser` to check the page in (left open, for the caller's next
      checks); None starts Chromium (``executable``) for this check and closes it.
    """
    if slider is not None and (not isinstance(slider, int) or isinstance(slider, bool)):
        raise ValueError(f"slider={slider!r} is not valid; use None (do not move) or an int number of steps")
    if expect_widgets is not None and (not isinstance(expect_widgets, int) or expect_widgets < 0):
        raise ValueError(f"expect_widgets={expect_widgets!r} is not valid; use None or an int >= 0")
    _check_widths(widths)
    url = to_url(path_or_url)
    with _open(browser, executable) as browser:
        return _check(browser, os.fspath(path_or_url), url, slider=slider, expect_widgets=expect_widgets,
                      screenshot=screenshot, timeout_s=timeout_s, viewport=viewport, widths=widths,
                      max_load_ms=max_load_ms)


def _open(browser: Browser | None, executable: str | None):
    """The caller's open browser, left open; else a Chromium of this call's own, closed at its end."""
    return contextlib.nullcontext(browser) if browser is not None else Browser(executable)


def _check_widths(widths) -> None:
    if isinstance(widths, (str, bytes)) or not all(isinstance(w, int) and not isinstance(w, bool) and 200 <= w <= 4000
                                                   for w in widths):
        raise ValueError(f"widths={widths!r} is not valid; use a sequence of viewport widths in px, "
                         f"integers from 200 to 4000, e.g. {WIDTHS}")


def list_pages(html_dir: str | os.PathLike) -> list[str]:
    """Every book page under ``html_dir`` (relative paths), leaving out Sphinx's _static/_sources/_images."""
    root = Path(html_dir)
    skip = {"_static", "_sources", "_images", "_sphinx_design_static"}
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*.html")
                  if not (set(p.relative_to(root).parts) & skip))


def check_book(html_dir: str | os.PathLike, pages: Iterable[str] = (), slider_pages: Iterable[str] | str = (), *,
               expect_widgets: dict[str, int] | None = None, screenshot_dir: str | os.PathLike | None = None,
               timeout_s: float = 20.0, executable: str | None = None, widths: Sequence[int] = WIDTHS,
               max_load_ms: float | None = None, browser: Browser | None = None) -> list[PageReport]:
    """Check several pages of a built book with one browser.

    - ``pages``: paths relative to ``html_dir`` (e.g. ``"book/intro.html"``); empty = every page.
    - ``slider_pages``: pages on which to move the first slider one step and require the shown image
      to change; the string ``"auto"`` means every checked page that has a rendered slider/dropdown.
    - ``expect_widgets``: {page: minimum number of rendered widget views}.
    - ``widths``, ``max_load_ms``, ``browser``: as in :func:`check_page`.
    """
    _check_widths(widths)
    root = Path(html_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"html_dir {os.fspath(html_dir)!r} is not a folder (build the book first)")
    pages = list(pages) or list_pages(root)
    missing = [p for p in pages if not (root / p).is_file()]
    if missing:
        raise FileNotFoundError(f"pages not found under {root}: {missing}; pages there: {list_pages(root)[:20]}")
    auto = slider_pages == "auto"
    sliders = set() if auto else set(slider_pages)
    unknown = sliders - set(pages)
    if unknown:
        raise ValueError(f"slider_pages {sorted(unknown)} are not among the checked pages {pages}")
    expect_widgets = expect_widgets or {}
    reports = []
    with _open(browser, executable) as browser:
        for p in pages:
            shot = None
            if screenshot_dir is not None:
                shot = Path(screenshot_dir) / (p.replace("/", "__").removesuffix(".html") + ".png")
            steps = 1 if p in sliders else None
            if auto and _has_control(root / p):
                steps = 1
            reports.append(_check(browser, p, (root / p).resolve().as_uri(), slider=steps,
                                  expect_widgets=expect_widgets.get(p), screenshot=shot, timeout_s=timeout_s,
                                  viewport=(1280, 900), widths=widths, max_load_ms=max_load_ms))
    return reports


_HREF = re.compile(r'<a\b[^>]*?\bhref="([^"]*)"', re.I)
_ID = re.compile(r'\b(?:id|name)="([^"]+)"')


def check_links(html_dir: str | os.PathLike, pages: Iterable[str] = ()) -> list[str]:
    """Every broken link of the built book, as 'page: href (why)': a link within the book (no scheme) whose file is
    missing, or whose #anchor no element of that file carries. Links with a scheme (https:, mailto:, data:) are not
    followed: the book is read offline. Reads the HTML files; needs no browser."""
    root = Path(html_dir)
    pages = list(pages) or list_pages(root)
    ids: dict[Path, set[str]] = {}

    def anchors(path: Path) -> set[str]:
        if path not in ids:
            ids[path] = set(_ID.findall(path.read_text(encoding="utf-8", errors="replace")))
        return ids[path]
    broken = []
    for page in pages:
        path = root / page
        for href in dict.fromkeys(_HREF.findall(path.read_text(encoding="utf-8", errors="replace"))):
            href = html.unescape(href)
            if not href or re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", href):
                continue
            target, _, frag = href.partition("#")
            target = target.split("?", 1)[0]
            file = (path.parent / target).resolve() if target else path.resolve()
            if file.is_dir():
                file = file / "index.html"
            if not file.is_file():
                broken.append(f"{page}: {href} (no file {os.path.relpath(file, root.resolve())})")
            elif frag and file.suffix == ".html" and frag not in anchors(file):
                broken.append(f"{page}: {href} (no #{frag} in {os.path.relpath(file, root.resolve())})")
    return broken


#: TeX shown as text: a $…$ span with a control word in it, left in a page's text (code and scripts removed).
_RAW_TEX = re.compile(r"\$[^$\n]{0,300}?\\[A-Za-z]+[^$\n]{0,300}?\$")
_NOT_TEXT = re.compile(r"(?is)<(script|style|pre|code|textarea)\b.*?</\1\s*>")


def check_tex(html_dir: str | os.PathLike, pages: Iterable[str] = ()) -> list[str]:
    """Every formula the built book shows as raw TeX, as 'page: $…$'. A page's Markdown cells go through MyST's
    dollarmath, so their $…$ become typeset math; a Markdown *output* (``display(Markdown(...))``) is read as
    CommonMark unless its notebook asks for MyST (``mystnb: render_markdown_format: myst`` in its metadata), and
    then its $…$ stay text. Code, scripts and styles are not text. Reads the HTML files; needs no browser."""
    root = Path(html_dir)
    found = []
    for page in list(pages) or list_pages(root):
        text = _NOT_TEXT.sub(" ", (root / page).read_text(encoding="utf-8", errors="replace"))
        text = html.unescape(re.sub(r"<[^>]+>", "", text))
        found += [f"{page}: {m.group(0)[:80]}" for m in _RAW_TEX.finditer(text)]
    return found


#: The most bytes the built site may weigh, all its files together (issue #61: 25 MB).
SITE_LIMIT = 25_000_000


def _folder_bytes(html_dir: str | os.PathLike) -> dict[str, int]:
    """{top-level entry of ``html_dir``: the sizes of the files under it added up} (links not followed)."""
    root = Path(html_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"html_dir {os.fspath(html_dir)!r} is not a folder (build the book first)")
    out: dict[str, int] = {}
    for f in root.rglob("*"):
        if f.is_file() and not f.is_symlink():
            top = f.relative_to(root).parts[0]
            out[top] = out.get(top, 0) + f.stat().st_size
    return out


def site_bytes(html_dir: str | os.PathLike) -> int:
    """The built site's weight: the sizes of every file under ``html_dir`` added up (links not followed)."""
    return sum(_folder_bytes(html_dir).values())


def site_problem(html_dir: str | os.PathLike, limit: int = SITE_LIMIT) -> str:
    """'' where the site weighs at most ``limit`` bytes, else what is wrong and its heaviest folders."""
    by = _folder_bytes(html_dir)
    total = sum(by.values())
    if total <= limit:
        return ""
    heavy = ", ".join(f"{k} {v:,}" for k, v in sorted(by.items(), key=lambda kv: -kv[1])[:3])
    return f"the site weighs {total:,} bytes, over the limit of {limit:,} (heaviest: {heavy})"


#: Widget models whose first instance ``slider_pages="auto"`` moves.
CONTROL_MODELS = ("SelectionSliderModel", "IntSliderModel", "FloatSliderModel", "DropdownModel")


def _has_control(path: Path) -> bool:
    """Whether the page's saved widget state holds a slider or a dropdown."""
    text = path.read_text(encoding="utf-8", errors="replace")
    return WIDGET_STATE_MIME in text and any(f'"{m}"' in text for m in CONTROL_MODELS)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m sec_lib.site.pagecheck",
        description="Open built book pages in headless Chromium from file:// (offline) and check that no "
                    "request leaves the machine, no script fails, every widget renders, every image loads, "
                    "that moving a slider changes the image it controls, and that every table and output "
                    "fits the text column at each width; reports each page's load time.")
    ap.add_argument("html_dir", help="the built site, e.g. _build/html")
    ap.add_argument("pages", nargs="*", help="pages relative to html_dir (default: every page)")
    ap.add_argument("--no-slider", action="store_true",
                    help="do not move sliders (default: move the first slider/dropdown on every page that has one)")
    ap.add_argument("--screenshots", metavar="DIR", help="save a full-page PNG of every page here")
    ap.add_argument("--timeout", type=float, default=20.0, help="seconds to wait for a page and its widgets")
    ap.add_argument("--chromium", help="Chromium binary (default: $SEC_CHROMIUM or /usr/bin/chromium)")
    ap.add_argument("--widths", type=int, nargs="*", default=list(WIDTHS),
                    help=f"viewport widths (px) at which tables and outputs must fit the text column "
                         f"(default {' '.join(map(str, WIDTHS))}; below {PHONE_WIDTH} they may scroll in their own box)")
    ap.add_argument("--max-site-bytes", type=int, default=SITE_LIMIT,
                    help=f"fail when the whole site (every file under html_dir) weighs more (default {SITE_LIMIT:,}); "
                         "checked only when no pages are named")
    ap.add_argument("--max-load-ms", type=float, default=None,
                    help="fail a page whose load event comes later than this (default: only report load times)")
    args = ap.parse_args(argv)
    try:
        reports = check_book(args.html_dir, args.pages, () if args.no_slider else "auto",
                             screenshot_dir=args.screenshots, timeout_s=args.timeout, executable=args.chromium,
                             widths=args.widths, max_load_ms=args.max_load_ms)
    except (FileNotFoundError, ValueError) as err:
        print(f"pagecheck: {err}", file=sys.stderr)
        return 2
    print(format_table(reports))
    broken = check_links(args.html_dir, args.pages)
    print(f"\nlinks: {len(broken)} broken" + "".join(f"\n  {b}" for b in broken[:40]))
    tex = check_tex(args.html_dir, args.pages)
    print(f"raw TeX: {len(tex)} formulas shown as text" + "".join(f"\n  {t}" for t in tex[:40]))
    heavy = "" if args.pages else site_problem(args.html_dir, args.max_site_bytes)
    if not args.pages:
        print(f"site: {site_bytes(args.html_dir):,} bytes (limit {args.max_site_bytes:,})"
              + (f": {heavy}" if heavy else ""))
    return 0 if all(r.ok for r in reports) and not broken and not tex and not heavy else 1


if __name__ == "__main__":
    sys.exit(main())
