"""Serve the book's JavaScript from the book itself, so the site works from ``file://`` offline.

A small Sphinx extension (loaded by ``_config.yml``: ``sphinx: extra_extensions: [sec_lib.site.sitejs]``).

Why: myst-nb (``myst_nb/core/config.py: ipywidgets_js_factory``) loads require.js and the
``@jupyter-widgets/html-manager`` embed script from public CDNs, and Sphinx's math extension
loads MathJax from a CDN (``sphinx/ext/mathjax.py: MATHJAX_URL``). Without a network the widgets
then stay blank and the formulas stay raw TeX. The npm packages pinned in ``package.json``
(``npm ci`` puts them in ``node_modules/``) are copied into ``<outdir>/_static/sec-js/`` here, and
``_config.yml`` points ``nb_ipywidgets_js`` and ``mathjax_path`` at those copies with *relative*
paths. Sphinx prefixes such paths with ``_static/`` and writes them relative to each page
(``../../_static/sec-js/require.js`` on ``book/nb/runs/*.html``), so every page depth works from
``file://`` and over http alike.

The files are copied into the *output* folder rather than into a source ``_static/`` folder:
Jupyter Book 1 adds every ``.js`` file under a source ``_static/`` to every page
(``jupyter_book/config.py``), while myst-nb adds the widget scripts only to pages whose notebook
carries widget state (``myst_nb/core/render.py: render_nb_finalise``), and Sphinx adds MathJax only
to pages with math.

What is served (all from ``node_modules``):

- ``sec-js/require.js`` (npm ``requirejs``): the AMD loader that ``embed-amd.js`` expects on the page.
- ``sec-js/embed-amd.js`` (npm ``@jupyter-widgets/html-manager``, ``dist/embed-amd.js``): the AMD
  build of the widget manager with ``@jupyter-widgets/base`` (protocol 1.2.0 and 2.0.0),
  ``@jupyter-widgets/controls`` (1.5.0 and 2.0.0) and the output widget bundled; it renders every
  ``application/vnd.jupyter.widget-view+json`` script on the page on load. The manager carries its own copies
  of both protocols; the file also defines them again as AMD modules for third-party widget modules to import.
  The book has no third-party widget module, so the two protocol-1 AMD modules (``@jupyter-widgets/base7``,
  ``controls7``: 0.8 MB of the 3.6) are left out (:func:`trim_embed_amd`); ipywidgets 8 writes protocol 2. Widget modules that are
  not bundled would be requested under the ``data-jupyter-widgets-cdn`` prefix, which
  ``_config.yml`` sets to a local relative folder, so such a request fails locally (and
  ``sec_lib.site.pagecheck`` reports it) instead of leaving the machine.
- ``sec-js/widgets-setup.js`` (written here, :data:`WIDGETS_SETUP_JS`), loaded between the two:
  it sets require.js's ``baseUrl`` to ``_static/sec-js/`` so that the font files the widget CSS
  refers to (webpack resolves them against the AMD module URL, i.e. against ``baseUrl``) are found
  in ``sec-js/@jupyter-widgets/html-manager/dist/`` instead of next to each page, and it gives
  MathJax 3 the one MathJax 2 call (``MathJax.Hub.Queue``) with which ipywidgets 8 typesets widget
  labels whenever ``window.MathJax`` exists.
- ``sec-js/mathjax/`` (npm ``mathjax`` 3, from its ``es5`` folder): only what the book uses
  (:data:`MATHJAX_KEEP`): the combined ``tex-svg.js`` (core, loader, TeX input with AMS, SVG output
  with its font, the menu), the TeX extensions that its ``autoload`` fetches when a page uses one of
  their macros (``\\boldsymbol``, ``\\cancel``, ...), and the small ``ui/`` helpers. SVG output needs no
  web fonts. Left out (about 9 MB): the other combined bundles, the separate core/input/output
  components that ``tex-svg.js`` already contains, the CommonHTML output and its fonts, MathML and
  AsciiMath input, and the speech-rule engine (``sre/``, ``a11y/``) behind the menu's optional
  accessibility explorer.
"""
from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any

from sphinx.errors import ConfigError, ExtensionError

#: Folder under ``<outdir>/_static`` that receives the copies.
SITE_JS_DIR = "sec-js"

#: (source path inside node_modules, destination inside ``_static/sec-js``) for single files.
WIDGET_FILES: tuple[tuple[str, str], ...] = (
    ("requirejs/require.js", "require.js"),
    ("@jupyter-widgets/html-manager/dist/embed-amd.js", "embed-amd.js"),
)

#: AMD modules of ``embed-amd.js`` the book does not serve (:func:`trim_embed_amd`): ipywidgets 7's base and
#: controls, defined for third-party widget modules written against protocol 1. The manager renders the book's
#: widgets (protocol 2) with its own bundled copies and never requests these by name.
UNSERVED_AMD_MODULES = ("@jupyter-widgets/base7", "@jupyter-widgets/controls7")
#: The AMD modules ``embed-amd.js`` must define, in this order, for :func:`trim_embed_amd` to trust its split.
EMBED_AMD_MODULES = ("@jupyter-widgets/base", "@jupyter-widgets/controls", "@jupyter-widgets/base7",
                     "@jupyter-widgets/controls7", "@jupyter-widgets/html-manager",
                     "@jupyter-widgets/html-manager/dist/libembed-amd")
_AMD_DEFINE = re.compile(r'^define\("([^"]+)",\[([^\]]*)\]', re.M)


def _with_licence(js: str, at: int) -> int:
    """Where the module whose ``define`` starts at ``at`` begins: at its licence comment when the line before is
    one (``/*! For license information please see base7.js.LICENSE.txt */``)."""
    prev = js.rfind("\n", 0, max(at - 1, 0)) + 1
    return prev if at > 0 and js[prev:at].startswith("/*!") else at


def amd_modules(js: str) -> list[tuple[str, tuple[str, ...], int, int]]:
    """(name, dependencies, start, end) of each top-level ``define("name", [deps], ...)`` of a concatenated AMD
    bundle, in order; a module runs from its licence comment (the line before its ``define``; the file's start for
    the first) to the next module."""
    found = [(m.group(1), tuple(re.findall(r'"([^"]+)"', m.group(2))), _with_licence(js, m.start()))
             for m in _AMD_DEFINE.finditer(js)]
    return [(name, deps, 0 if i == 0 else at, found[i + 1][2] if i + 1 < len(found) else len(js))
            for i, (name, deps, at) in enumerate(found)]


def trim_embed_amd(js: str, drop: tuple[str, ...] = UNSERVED_AMD_MODULES) -> str:
    """``embed-amd.js`` without the AMD modules in ``drop``, the others byte for byte. Raises ValueError when the
    file does not define :data:`EMBED_AMD_MODULES` in that order (a new html-manager release must be looked at
    before it is trimmed), or when a module kept lists a dropped one among its dependencies."""
    mods = amd_modules(js)
    names = tuple(m[0] for m in mods)
    if names != EMBED_AMD_MODULES:
        raise ValueError(f"embed-amd.js defines {list(names)}; sec_lib.site.sitejs.trim_embed_amd expects "
                         f"{list(EMBED_AMD_MODULES)} (a new @jupyter-widgets/html-manager: check which modules the "
                         f"manager loads by name before leaving any out)")
    unknown = [d for d in drop if d not in names]
    if unknown:
        raise ValueError(f"cannot leave out {unknown}: embed-amd.js defines {list(names)}")
    users = [(name, d) for name, deps, _, _ in mods if name not in drop for d in deps if d in drop]
    if users:
        raise ValueError(f"embed-amd.js: {users} (module, dependency): a module kept depends on one left out")
    return "".join(js[a:b] for name, _, a, b in mods if name not in drop)


#: Web fonts the widget CSS (Font Awesome 5) refers to; woff2 is the first source of every
#: @font-face, so only those are served. Kept where the widget manager looks for them.
WIDGET_FONTS_SRC = "@jupyter-widgets/html-manager/dist"
WIDGET_FONTS_DST = "@jupyter-widgets/html-manager/dist"
#: Widgets rendered inside Stack containers (the eta and norms explorers) ask for the same fonts
#: one folder up, under ``sec-js/@jupyter-widgets/``: served there too.
WIDGET_FONTS_ALSO = "@jupyter-widgets"

#: Loaded after require.js and before embed-amd.js on widget pages (see the module docstring).
WIDGETS_SETUP_JS = """\
/* sec-book: set up the offline widget manager (written by sec_lib/sitejs.py). */
(function () {
  "use strict";
  // 1. Resolve AMD module URLs (and with them the widget CSS's font files) inside _static/sec-js/.
  var me = document.currentScript && document.currentScript.src;
  if (me && window.require && window.require.config) {
    window.require.config({ baseUrl: new URL(".", me).href });
  }
  // 2. ipywidgets 8 typesets widget labels with MathJax 2's MathJax.Hub.Queue whenever
  //    window.MathJax exists; the book loads MathJax 3, which has typesetPromise instead.
  function hubShim() {
    var mj = window.MathJax;
    if (mj && mj.version && !mj.Hub) {
      mj.Hub = {
        Queue: function (job) {
          var el = job && job[2];
          if (el && mj.typesetPromise) { mj.typesetPromise([el]).catch(function () {}); }
        }
      };
    }
  }
  hubShim();
  window.addEventListener("DOMContentLoaded", hubShim);
  window.addEventListener("load", hubShim);
})();
"""

#: MathJax 3 ``es5`` folder and the combined bundle the book uses.
MATHJAX_SRC = "mathjax/es5"
MATHJAX_ENTRY = "tex-svg.js"
#: What is served from mathjax/es5 (paths relative to it; a trailing "/" keeps the whole folder).
MATHJAX_KEEP: tuple[str, ...] = (MATHJAX_ENTRY, "input/tex/extensions/", "ui/lazy.js", "ui/safe.js")


def mathjax_files(mathjax_dir: str | os.PathLike) -> list[Path]:
    """The files of ``mathjax_dir`` (npm mathjax's ``es5``) that :data:`MATHJAX_KEEP` selects, relative to it."""
    root = Path(mathjax_dir)
    out = []
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if path.is_file() and any(rel.as_posix() == k or (k.endswith("/") and rel.as_posix().startswith(k))
                                  for k in MATHJAX_KEEP):
            out.append(rel)
    return out


#: The URLs to use in ``_config.yml`` (relative to ``_static``; Sphinx makes them page-relative).
REQUIRE_JS_URL = f"{SITE_JS_DIR}/require.js"
WIDGETS_SETUP_URL = f"{SITE_JS_DIR}/widgets-setup.js"
EMBED_AMD_URL = f"{SITE_JS_DIR}/embed-amd.js"
MATHJAX_URL = f"{SITE_JS_DIR}/mathjax/{MATHJAX_ENTRY}"

ENV_NODE_MODULES = "SEC_NODE_MODULES"


def find_node_modules(srcdir: str | os.PathLike | None = None, configured: str | None = None) -> Path:
    """Locate the ``node_modules`` folder that holds the packages of ``package.json``.

    Order: ``configured`` (the ``sec_js_node_modules`` Sphinx setting), ``$SEC_NODE_MODULES``,
    ``<srcdir>/node_modules``, then the repository that holds this package (editable install).
    Raises FileNotFoundError naming every place looked at, with the command that fills it.
    """
    candidates: list[Path] = []
    if configured:
        candidates.append(Path(configured))
    if os.environ.get(ENV_NODE_MODULES):
        candidates.append(Path(os.environ[ENV_NODE_MODULES]))
    if srcdir is not None:
        candidates.append(Path(srcdir) / "node_modules")
    candidates.append(Path(__file__).resolve().parents[2] / "node_modules")
    for cand in candidates:
        if all((cand / src).is_file() for src, _ in WIDGET_FILES) and (cand / MATHJAX_SRC / MATHJAX_ENTRY).is_file():
            return cand
    looked = ", ".join(str(c) for c in candidates)
    raise FileNotFoundError(
        "sec_lib.site.sitejs: node_modules with requirejs, @jupyter-widgets/html-manager and mathjax not found "
        f"(looked in: {looked}). Run `make js` (npm ci) in the repository root, or set "
        f"${ENV_NODE_MODULES} / the Sphinx setting sec_js_node_modules to the folder.")


def _copy_if_changed(src: Path, dst: Path) -> bool:
    """Copy ``src`` to ``dst`` unless an identical-looking copy (size and mtime) is there."""
    try:
        s, d = src.stat(), dst.stat()
        if s.st_size == d.st_size and int(s.st_mtime) == int(d.st_mtime):
            return False
    except FileNotFoundError:
        pass
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(src, dst)
    return True


def copy_site_js(node_modules: str | os.PathLike, static_dir: str | os.PathLike) -> list[Path]:
    """Copy the served files from ``node_modules`` into ``static_dir/sec-js``; return the files written."""
    node_modules, out = Path(node_modules), Path(static_dir) / SITE_JS_DIR
    written = []
    for src, dst in WIDGET_FILES:
        if dst == "embed-amd.js":
            text = trim_embed_amd((node_modules / src).read_text(encoding="utf-8"))
            if not (out / dst).is_file() or (out / dst).read_text(encoding="utf-8") != text:
                (out / dst).parent.mkdir(parents=True, exist_ok=True)
                (out / dst).write_text(text, encoding="utf-8")
                written.append(out / dst)
        elif _copy_if_changed(node_modules / src, out / dst):
            written.append(out / dst)
    for font in sorted((node_modules / WIDGET_FONTS_SRC).glob("*.woff2")):
        for dst in (WIDGET_FONTS_DST, WIDGET_FONTS_ALSO):
            if _copy_if_changed(font, out / dst / font.name):
                written.append(out / dst / font.name)
    setup_js = out / "widgets-setup.js"
    if not setup_js.is_file() or setup_js.read_text(encoding="utf-8") != WIDGETS_SETUP_JS:
        setup_js.parent.mkdir(parents=True, exist_ok=True)
        setup_js.write_text(WIDGETS_SETUP_JS, encoding="utf-8")
        written.append(setup_js)
    mj = node_modules / MATHJAX_SRC
    keep = mathjax_files(mj)
    for rel in keep:
        if _copy_if_changed(mj / rel, out / "mathjax" / rel):
            written.append(out / "mathjax" / rel)
    # drop what an earlier build served beyond MATHJAX_KEEP (the output folder is reused)
    kept = set(keep)
    for path in sorted((out / "mathjax").rglob("*")):
        if path.is_file() and path.relative_to(out / "mathjax") not in kept:
            path.unlink()
    return written


def _check_local(app: Any, config: Any) -> None:
    """Refuse a configuration that would load any script from the network."""
    urls = list(getattr(config, "nb_ipywidgets_js", {}) or {})
    mathjax = getattr(config, "mathjax_path", "") or ""
    for url in urls + [mathjax]:
        if "://" in url or url.startswith("//"):
            raise ConfigError(
                f"sec_lib.site.sitejs: {url!r} would load a script from the network; the book serves "
                f"its own copies: use {REQUIRE_JS_URL!r}, {EMBED_AMD_URL!r} (nb_ipywidgets_js) and "
                f"{MATHJAX_URL!r} (mathjax_path)")
    expected = [REQUIRE_JS_URL, WIDGETS_SETUP_URL, EMBED_AMD_URL]
    if urls != expected:
        raise ConfigError(
            f"sec_lib.site.sitejs: nb_ipywidgets_js must list exactly {expected}, in this order (the widget "
            f"manager needs the AMD loader and its setup on the page first); got {urls}")
    for url, attrs in (getattr(config, "nb_ipywidgets_js", {}) or {}).items():
        if "crossorigin" in (attrs or {}):
            raise ConfigError(
                f"sec_lib.site.sitejs: nb_ipywidgets_js[{url!r}] sets 'crossorigin', which makes Chromium "
                "refuse the script under file://; remove it")


def _copy_on_init(app: Any) -> None:
    if getattr(app.builder, "format", None) != "html":
        return

    try:
        node_modules = find_node_modules(app.srcdir, app.config.sec_js_node_modules or None)
    except FileNotFoundError as err:
        raise ExtensionError(str(err)) from None
    copy_site_js(node_modules, Path(app.outdir) / "_static")


def _dedupe_scripts(app: Any, pagename: str, templatename: str, context: dict, doctree: Any) -> None:
    """Drop repeated identical <script> entries of a page.

    Under Jupyter Book 1 the inline scripts that extensions add while reading (sphinx-thebe's
    ``const THEBE_JS_URL = ...``, sphinx-togglebutton's settings) end up twice on every page; the
    second ``const`` declaration is a JavaScript error ("Identifier 'THEBE_JS_URL' has already been
    declared").
    """
    scripts = context.get("script_files")
    if not isinstance(scripts, list):
        return
    seen, keep = set(), []
    for js in scripts:
        attrs = getattr(js, "attributes", {}) or {}
        # an inline script is registered once with filename None and once with '' (Sphinx registry)
        key = (str(getattr(js, "filename", js) or ""), tuple(sorted((k, str(v)) for k, v in attrs.items())))
        if key in seen:
            continue
        seen.add(key)
        keep.append(js)
    scripts[:] = keep


def setup(app: Any) -> dict[str, Any]:
    """Sphinx entry point."""
    app.add_config_value("sec_js_node_modules", "", "env", [str])
    app.connect("config-inited", _check_local)
    # builder-inited runs before any page is written, so Sphinx can add ?v=<checksum> to the URLs.
    app.connect("builder-inited", _copy_on_init)
    app.connect("html-page-context", _dedupe_scripts, priority=900)
    return {"version": "0.1.0", "parallel_read_safe": True, "parallel_write_safe": True}
