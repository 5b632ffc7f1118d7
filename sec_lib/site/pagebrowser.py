"""Driving headless Chromium through playwright, offline: finding the binary (:func:`find_chromium`), one
browser session with a context per viewport (:class:`Browser`), and moving a page's first slider or
dropdown while recording the images it shows (:func:`move_control`). The checks that use it are in
:mod:`sec_lib.site.pagecheck`. It never downloads a browser.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import threading
from pathlib import Path

from .pagereport import SliderResult

#: Chromium flags that work headless on a sandbox-less CI machine without a GPU or network.
CHROMIUM_ARGS = (
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
)

ENV_CHROMIUM = "SEC_CHROMIUM"


def find_chromium(executable: str | None = None) -> str:
    """Path of the Chromium binary: ``executable``, ``$SEC_CHROMIUM``, /usr/bin/chromium, or on PATH."""
    for cand in (executable, os.environ.get(ENV_CHROMIUM), "/usr/bin/chromium"):
        if cand and Path(cand).is_file():
            return str(cand)
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    raise FileNotFoundError(
        "no Chromium found (looked at the executable argument, $SEC_CHROMIUM, /usr/bin/chromium and "
        "chromium/chromium-browser/google-chrome on PATH); install Debian's chromium (`make browser`)")


def to_url(path_or_url: str | os.PathLike) -> str:
    s = os.fspath(path_or_url)
    if s.startswith(("file:", "http:", "https:")):
        return s
    p = Path(s)
    if not p.is_file():
        raise FileNotFoundError(f"page {s!r} does not exist (path_or_url must be an existing .html file or a URL)")
    return p.resolve().as_uri()


# Shown images inside the widget view that holds the control; each with a content signature:
# the pixels (via a canvas) when the browser allows reading them, else the src.
_JS_SHOWN_IMAGES = """
(area) => Array.from(area.querySelectorAll('img')).filter(img => {
    const r = img.getBoundingClientRect(); const cs = getComputedStyle(img);
    return r.width > 0 && r.height > 0 && cs.visibility !== 'hidden' && cs.display !== 'none';
  }).map(img => {
    let sig = '';
    if (img.complete && img.naturalWidth > 0) {
      try {
        const c = document.createElement('canvas');
        c.width = img.naturalWidth; c.height = img.naturalHeight;
        c.getContext('2d').drawImage(img, 0, 0);
        sig = 'pixels:' + c.toDataURL('image/png');
      } catch (e) { sig = 'src:' + (img.currentSrc || img.src); }
    }
    return {src: img.currentSrc || img.src, sig};
  })
"""

_JS_CONTROL = """
() => {
  for (const area of document.querySelectorAll('.widget-subarea')) {
    const handle = area.querySelector('.noUi-handle');
    if (handle) return {kind: 'slider'};
    const range = area.querySelector('input[type=range]');
    if (range) return {kind: 'range'};
    const sel = area.querySelector('select');
    if (sel) return {kind: 'dropdown'};
  }
  return {kind: ''};
}
"""


def _area_with(page, selector: str):
    """The first rendered widget view that contains ``selector``."""
    return page.evaluate_handle(
        """(sel) => { for (const a of document.querySelectorAll('.widget-subarea'))
                       if (a.querySelector(sel)) return a; return null; }""", selector)


def _readout(page, area) -> str:
    return page.evaluate(
        """(area) => { const h = area.querySelector('.noUi-handle');
             const r = area.querySelector('.widget-readout');
             const s = area.querySelector('select'); const i = area.querySelector('input[type=range]');
             return [h ? h.getAttribute('aria-valuenow') : '', r ? r.textContent : '',
                     s ? String(s.selectedIndex) : '', i ? i.value : ''].join('|'); }""", area)


def _sig(shown: list[dict]) -> list[str]:
    return [hashlib.sha256(s["sig"].encode()).hexdigest()[:16] if s["sig"] else "" for s in shown]


def move_control(page, steps: int, settle_ms: int) -> SliderResult:
    kind = page.evaluate(_JS_CONTROL)["kind"]
    if not kind:
        return SliderResult(control="", steps=steps, error="the page has no rendered slider or dropdown")
    selector = {"slider": ".noUi-handle", "range": "input[type=range]", "dropdown": "select"}[kind]
    area = _area_with(page, selector)
    res = SliderResult(control="dropdown" if kind == "dropdown" else "slider", steps=steps)
    shown = page.evaluate(_JS_SHOWN_IMAGES, area)
    res.images_before, res.srcs_before = _sig(shown), [s["src"][:80] for s in shown]
    res.value_before = _readout(page, area)
    try:
        ctl = area.as_element().query_selector(selector)
        if kind == "dropdown":
            n = page.evaluate("(s) => s.options.length", ctl)
            cur = page.evaluate("(s) => s.selectedIndex", ctl)
            ctl.select_option(index=(cur + steps) % max(n, 1))
        else:
            ctl.focus()
            keys = ("ArrowRight", "ArrowLeft") if steps >= 0 else ("ArrowLeft", "ArrowRight")
            for _ in range(abs(steps)):
                page.keyboard.press(keys[0])
            if _readout(page, area) == res.value_before:     # already at the end: go the other way
                for _ in range(abs(steps)):
                    page.keyboard.press(keys[1])
        page.wait_for_timeout(settle_ms)
        # wait until the newly shown images have loaded
        page.wait_for_function(
            """(area) => Array.from(area.querySelectorAll('img')).every(i => i.complete)""",
            arg=area, timeout=10_000)
    except Exception as err:  # report, do not crash the whole check
        res.error = f"{type(err).__name__}: {err}".splitlines()[0]
    res.value_after = _readout(page, area)
    shown = page.evaluate(_JS_SHOWN_IMAGES, area)
    res.images_after, res.srcs_after = _sig(shown), [s["src"][:80] for s in shown]
    return res


#: The playwright driver of each thread while some :class:`Browser` of it is open: [driver, open browsers].
#: Playwright's sync API refuses a second driver in a thread that runs one, so a Browser opened while
#: another is open (a page check inside a caller's own session) shares its driver.
_DRIVERS: dict[int, list] = {}


def _driver():
    """This thread's playwright driver, started on first use; release it with :func:`_release`."""
    entry = _DRIVERS.get(threading.get_ident())
    if entry is None:
        from playwright.sync_api import sync_playwright  # local: 0.4 s to import (measured), only a check needs it

        entry = _DRIVERS[threading.get_ident()] = [sync_playwright().start(), 0]
    entry[1] += 1
    return entry[0]


def _release(thread: int) -> None:
    """One open browser of ``thread`` fewer; the last one stops the thread's driver."""
    entry = _DRIVERS[thread]
    entry[1] -= 1
    if entry[1] == 0:
        del _DRIVERS[thread]
        entry[0].stop()


class Browser:
    """One headless Chromium for several pages (a browser context, i.e. profile, per viewport size)."""

    def __init__(self, executable: str | None = None):
        self._thread = threading.get_ident()
        self._pw = _driver()
        try:
            self.browser = self._pw.chromium.launch(
                executable_path=find_chromium(executable), headless=True, args=list(CHROMIUM_ARGS))
        except BaseException:
            _release(self._thread)
            raise

        self._contexts: dict = {}

    def context(self, viewport: tuple[int, int]):
        """A browser context (profile) per viewport size, shared by the pages checked with it."""
        if viewport not in self._contexts:
            self._contexts[viewport] = self.browser.new_context(
                viewport={"width": viewport[0], "height": viewport[1]}, service_workers="block")
        return self._contexts[viewport]

    def close(self) -> None:
        if self._pw is None:
            return
        try:
            self.browser.close()
        finally:
            self._pw = None
            _release(self._thread)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
