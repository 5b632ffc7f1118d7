"""How an executed notebook reads on the site: code folded away, the run's parameters in a box, verdict badges.

The runner (``python -m sec_lib.book run``) calls :func:`style_notebook` on every notebook that papermill
executed, before the notebook is moved into ``book/nb/``:

- every code cell gets the ``hide-input`` tag: Jupyter Book (myst-nb with sphinx-togglebutton) shows
  the outputs and folds the code behind a "Show code cell source" toggle. Cells tagged
  ``remove-input``, ``remove-cell``, ``hide-cell`` or ``show-input`` keep what they say. Papermill's
  ``injected-parameters`` cell is removed from the page instead (``remove-cell``): the box below
  shows its assignments verbatim;
- a code cell that shows nothing (its setup, its imports) is removed from the page (``remove-cell``), so no empty
  "Show code cell source" bar stands between the title and the answer; the notebook in ``notebooks/`` keeps it;
- the page's provenance goes last, folded in one box, "How this page was made" (:func:`fold_provenance`): the
  parameters papermill injected ("This page was run with: profile = "cpu", ...", read from papermill's
  ``injected-parameters`` cell, never typed, with a link to the page that explains how to rerun it) and the tier
  sentence the page printed ("Evidence on this page: the decisive tier, 115 runs ... run-hours ... torch ...").

Applying it twice gives the same notebook (the box is replaced, tags are not repeated).

:func:`badge` draws a verdict word as a CSS badge (``book/_static/sec.css``), with no emoji font needed.
"""
from __future__ import annotations

import ast
import html
import json
import os
import re
from pathlib import Path

import nbformat

from ..report import VERDICTS

#: Tag of the parameter box an earlier style put under a page's title (:func:`fold_provenance` drops it).
PARAMS_BOX_TAG = "sec-run-params"
#: Tag (and metadata key) of the folded box at the end of a page that holds its provenance (:func:`fold_provenance`).
PROVENANCE_TAG = "sec-provenance"
#: The title of that box.
PROVENANCE_TITLE = "How this page was made"
#: Tags that already decide how a cell's code is shown; such cells are left as they are.
KEEP_TAGS = frozenset({"hide-input", "remove-input", "remove-cell", "hide-cell", "show-input"})
#: The page that explains how to rerun a notebook with other parameters (a Sphinx docname).
RERUN_DOC = "/book/rerun"


def hide_code_inputs(nb) -> int:
    """Tag every code cell ``hide-input`` (unless a tag in :data:`KEEP_TAGS` says otherwise), and papermill's
    injected-parameters cell and every cell without outputs ``remove-cell`` (unless it is tagged ``show-input``,
    or removed already); return how many cells were tagged."""
    n = 0
    for cell in nb.cells:
        if cell.get("cell_type") != "code":
            continue
        meta = cell.setdefault("metadata", {})
        tags = list(meta.get("tags", []))
        if not cell.get("outputs") and not {"show-input", "remove-cell"} & set(tags):
            meta["tags"] = [t for t in tags if t not in ("hide-input", "remove-input")] + ["remove-cell"]
            n += 1
            continue
        if KEEP_TAGS & set(tags):
            continue
        meta["tags"] = [*tags, "remove-cell" if "injected-parameters" in tags else "hide-input"]
        n += 1
    return n


def _cell_source(cell) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def _readable(value_source: str) -> str:
    """A value as written, except that a string literal is shown with its characters, not escapes
    (papermill writes ``"\\u03b7"`` for ``"η"``)."""
    try:
        value = ast.literal_eval(value_source)
    except (ValueError, SyntaxError):
        return value_source
    return json.dumps(value, ensure_ascii=False) if isinstance(value, str) else value_source


def _assignments(source: str) -> dict[str, str]:
    """``name = value`` lines of a parameter cell, in order, each value as written (Python source;
    strings with their characters rather than escapes). Nothing is executed."""
    try:
        tree = ast.parse(source)
    except SyntaxError as err:
        raise ValueError(f"the parameter cell is not valid Python ({err.msg}, line {err.lineno}):\n{source}") from None
    out: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            value = _readable(ast.get_source_segment(source, node.value)) if node.value is not None else ""
            for t in targets:
                if isinstance(t, ast.Name):
                    out[t.id] = value
    return out


def run_parameters(nb) -> tuple[dict[str, str], dict[str, str]]:
    """(injected, defaults): the values papermill injected and those of the ``parameters`` cell."""
    injected: dict[str, str] = {}
    defaults: dict[str, str] = {}
    for cell in nb.cells:
        tags = set(cell.get("metadata", {}).get("tags", []))
        if cell.get("cell_type") != "code":
            continue
        if "injected-parameters" in tags:
            injected.update(_assignments(_cell_source(cell)))
        elif "parameters" in tags:
            defaults.update(_assignments(_cell_source(cell)))
    return injected, defaults


#: How a page states the tier it shows (``sec_lib.chapters.evidence.tier_sentence``).
_TIER_SHOWN = re.compile(r"Evidence on this page: the (\w[\w-]*) tier")
#: An output that is a page's tier sentence, or its note on what the first long tier already decides while the page
#: shows another (:func:`sec_lib.chapters.evidence.waiting_sentence`): moved into its provenance box.
_TIER_SENTENCE = re.compile(r"\s*\*\*(?:Evidence on this page:|Already in the [\w-]+ tier\.\*\*)")


def _tier_in(texts) -> str | None:
    """The tier the first tier sentence among ``texts`` names, or None."""
    for text in texts:
        m = _TIER_SHOWN.search(text)
        if m:
            return m.group(1)
    return None


def shown_tier(nb) -> str | None:
    """The tier an executed page says it shows in what it printed (its tier sentence), or None."""
    return _tier_in(_output_text(out) for cell in nb.cells for out in cell.get("outputs", []))


def params_markdown(injected: dict[str, str], defaults: dict[str, str], tier: str | None = None) -> str:
    """The sentence on the page's parameters (MyST markdown, for its provenance box); ``tier``: the evidence tier the
    page shows, named when it is not the profile the page was run with (the decisive tier where it holds the page's
    runs)."""
    rerun = f"{{doc}}`how to rerun it <{RERUN_DOC}>`"
    if injected:
        values = ", ".join(f"`{k} = {v}`" for k, v in injected.items())
        rest = [k for k in defaults if k not in injected]
        tail = "; every other parameter at the notebook's default" if rest else ""
        shows = ""
        if tier and injected.get("profile", "").strip("\"'") != tier:
            shows = f"; it shows the **{tier} tier**, the committed runs that hold its evidence"
        return f"**This page was run with:** {values}{tail}{shows} ({rerun})."
    if defaults:
        return f"**This page was run with the notebook's default parameters** ({rerun})."
    return f"**This page takes no parameters** ({rerun})."


def _output_text(out) -> str:
    text = out.get("data", {}).get("text/markdown", "") or out.get("text", "")
    return "".join(text) if isinstance(text, list) else str(text)


def fold_provenance(nb) -> None:
    """Put the page's provenance at its end, folded in one box (a ``{dropdown}``, tagged :data:`PROVENANCE_TAG`):
    the sentence on its parameters (:func:`params_markdown`, read from papermill's cells) and every tier sentence a
    code cell printed ("**Evidence on this page: ...", "**Already in the decisive tier.** ...", taken out of that
    cell's outputs). Applying it again gives the same page: the box keeps the sentences it took (in its metadata)
    and is rebuilt. A parameter box an earlier style put under the title (:data:`PARAMS_BOX_TAG`) is dropped."""
    taken: list[str] = []
    for cell in [c for c in nb.cells if PROVENANCE_TAG in c.get("metadata", {}).get("tags", [])]:
        taken += cell.metadata.get(PROVENANCE_TAG, [])
    nb.cells = [c for c in nb.cells if not {PROVENANCE_TAG, PARAMS_BOX_TAG} & set(c.get("metadata", {}).get("tags", []))]
    for cell in nb.cells:
        if cell.get("cell_type") != "code":
            continue
        keep = []
        for out in cell.get("outputs", []):
            text = _output_text(out)
            if "data" in out and _TIER_SENTENCE.match(text):
                taken.append(text.strip())
            else:
                keep.append(out)
        cell["outputs"] = keep
    body = "\n\n".join([params_markdown(*run_parameters(nb), tier=_tier_in(taken)), *taken])
    cell = nbformat.v4.new_markdown_cell(f"::::{{dropdown}} {PROVENANCE_TITLE}\n:class-container: {PROVENANCE_TAG}\n\n"
                                         f"{body}\n::::")
    cell.metadata["tags"] = [PROVENANCE_TAG]
    cell.metadata[PROVENANCE_TAG] = taken
    nb.cells.append(cell)


def style_notebook(path: str | os.PathLike) -> None:
    """Fold the page's parameters and tier sentence into the provenance box at its end, then fold every code cell
    and remove the empty ones, in place (the runner calls it after papermill)."""
    path = Path(path)
    nb = nbformat.read(path, as_version=4)
    fold_provenance(nb)
    hide_code_inputs(nb)
    nbformat.write(nb, path)


def verdict_class(verdict: str) -> str:
    """CSS class of a verdict word: ``"not reproduced"`` -> ``"sec-verdict-not-reproduced"``."""
    return "sec-verdict-" + "-".join(verdict.split())


def badge(verdict: str) -> str:
    """The verdict word as an HTML badge (``<span class="sec-verdict sec-verdict-...">word</span>``).

    Drawn by ``book/_static/sec.css`` (colour and a CSS-drawn mark), so it needs no emoji font.
    Raises ValueError for a word that is not one of :data:`sec_lib.report.VERDICTS`.
    """
    if not isinstance(verdict, str) or verdict.strip().lower() not in VERDICTS:
        raise ValueError(f"verdict {verdict!r} is not valid; expected one of {list(VERDICTS)}")
    word = verdict.strip().lower()
    return f'<span class="sec-verdict {verdict_class(word)}">{html.escape(word)}</span>'
