"""Static (kernel-free) explorers for the rendered book.

Readers of the static HTML book have no kernel, so nothing can be recomputed when a control
moves. Instead every figure is precomputed, rendered to a small PNG inside an
:class:`ipywidgets.Image`, and the images are put into :class:`ipywidgets.Stack` containers.
A control's ``index`` is linked to the stacks' ``selected_index`` with
:func:`ipywidgets.jslink`, a link that lives entirely in the browser (a ``LinkModel`` in the
saved widget state). When papermill executes the notebook it stores the widget state in the
notebook metadata, so the page can switch figures without Python.

Public functions
----------------
- :func:`fig_to_image` -- matplotlib Figure -> ``ipywidgets.Image`` (small palette PNG or lossless WebP; closes
  the figure).
- :func:`slider_stack` -- one SelectionSlider driving one Stack of figures.
- :func:`linked_explorer` -- several dropdowns/sliders driving nested Stacks (one ``jslink`` per Stack).
- :func:`linked_stacks` -- more nested Stacks driven by controls an explorer already has.
- :func:`live_note` -- an HTML note saying that live (recomputing) controls need a running kernel.
- :func:`link_records` -- the ``(source_id, source_attr, target_id, target_attr)`` of a box's links (for tests).
"""
from __future__ import annotations

import io
import itertools
from typing import Mapping, Sequence

import ipywidgets as widgets
import numpy as np
from matplotlib.figure import Figure
from PIL import Image as _PILImage

__all__ = ["fig_to_image", "slider_stack", "linked_explorer", "linked_stacks", "live_note", "placeholder_image",
           "link_records", "CONTROL_KINDS", "IMAGE_FORMATS"]

#: The control kinds :func:`linked_explorer` accepts (both expose an integer ``index``).
CONTROL_KINDS = ("dropdown", "slider")
#: The image formats :func:`fig_to_image` writes (both lossless; every current browser shows both).
IMAGE_FORMATS = ("png", "webp")
#: A palette of fewer than 256 colours is kept only if every colour covering at least this share of the render
#: (background, bands, the main lines) stays within :data:`PALETTE_TOLERANCE` of its value in each channel;
#: else the image gets 256 colours. Anti-aliased edges may move further: they are the smaller palette's saving.
FREQUENT_SHARE = 0.002
PALETTE_TOLERANCE = 24

PLACEHOLDER_TEXT = "not computed in this profile"


def _keeps_frequent_colours(rgb: _PILImage.Image, reduced: _PILImage.Image) -> bool:
    """Whether ``reduced`` (a palette image of ``rgb``) keeps every frequent colour of ``rgb``: each colour covering
    at least :data:`FREQUENT_SHARE` of the pixels is within :data:`PALETTE_TOLERANCE` of itself in every channel."""
    a = np.asarray(rgb, np.int32)
    b = np.asarray(reduced.convert("RGB"), np.int32)
    packed = ((a[..., 0] << 16) | (a[..., 1] << 8) | a[..., 2]).ravel()
    values, where, counts = np.unique(packed, return_inverse=True, return_counts=True)
    worst = np.zeros(len(values), np.int32)
    np.maximum.at(worst, where, np.abs(a - b).max(axis=2).ravel())
    return bool((worst[counts >= FREQUENT_SHARE * packed.size] <= PALETTE_TOLERANCE).all())


def _palette(rgb: _PILImage.Image, colors: int) -> _PILImage.Image:
    """``rgb`` reduced to a palette of ``colors`` colours (no dithering); 256 where fewer would shift a frequent
    colour (:func:`_keeps_frequent_colours`)."""
    def reduce(n):
        return rgb.quantize(colors=n, method=_PILImage.Quantize.FASTOCTREE, dither=_PILImage.Dither.NONE)
    img = reduce(colors)
    return img if colors >= 256 or _keeps_frequent_colours(rgb, img) else reduce(256)


def _image_bytes(fig, dpi: int, quantize: bool, tight: bool = False, fmt: str = "png", colors: int = 256) -> bytes:
    """Render ``fig`` as ``fmt`` (PNG or lossless WebP) bytes; with ``quantize``, on a palette of ``colors``
    colours (:func:`_palette`). A palette PNG larger than the full-colour one is not used."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight" if tight else None, facecolor="white")
    data = buf.getvalue()
    if fmt == "png" and not quantize:
        return data
    img = _PILImage.open(io.BytesIO(data)).convert("RGB")
    if quantize:
        img = _palette(img, colors)
    out = io.BytesIO()
    if fmt == "webp":
        img.save(out, format="webp", lossless=True, quality=100, method=4)
        return out.getvalue()
    img.save(out, format="png")
    return out.getvalue() if len(out.getvalue()) < len(data) else data


def _png_bytes(fig, dpi: int, quantize: bool, tight: bool = False) -> bytes:
    """Render ``fig`` to PNG bytes; optionally reduced to a 256-colour palette (≈3x smaller)."""
    return _image_bytes(fig, dpi, quantize, tight)


def _check_image_options(dpi, fmt, colors) -> None:
    """A clear error for a resolution, format or palette size :func:`fig_to_image` cannot use."""
    if not (isinstance(dpi, (int, float)) and 10 <= dpi <= 600):
        raise ValueError(f"dpi = {dpi!r} is not valid; expected a number in [10, 600]")
    if fmt not in IMAGE_FORMATS:
        raise ValueError(f"format = {fmt!r} is not valid; valid formats: {', '.join(map(repr, IMAGE_FORMATS))}")
    if not (isinstance(colors, int) and not isinstance(colors, bool) and 2 <= colors <= 256):
        raise ValueError(f"colors = {colors!r} is not valid; expected an integer in [2, 256]")


def fig_to_image(fig, dpi: int = 80, quantize: bool = True, width: str | None = None, tight: bool = False,
                 format: str = "png", colors: int = 256):
    """Render a matplotlib Figure to an :class:`ipywidgets.Image` holding PNG or lossless WebP bytes.

    The figure is closed afterwards (so a loop of figures does not pile up in pyplot). With
    ``quantize=True`` the image is reduced to a palette of ``colors`` colours (256 by default, which keeps a
    typical 6x4-inch figure at 80 dpi far below 80 KB; fewer only where the frequent colours survive, see
    :func:`_palette`). ``format``: one of :data:`IMAGE_FORMATS`; lossless WebP of the same palette is about a
    fifth smaller than PNG. ``width`` (e.g. ``"100%"``) sets the CSS width;
    ``tight=True`` crops to the drawn area (slower; figures with a constrained layout do not need it).

    Passing an existing ``ipywidgets.Image`` returns it unchanged; raw PNG ``bytes`` are wrapped.
    """
    if isinstance(fig, widgets.Image):
        return fig
    if isinstance(fig, (bytes, bytearray, memoryview)):
        data, format = bytes(fig), "png"
    else:
        if not hasattr(fig, "savefig"):
            raise ValueError(f"fig must be a matplotlib Figure, an ipywidgets.Image or PNG bytes; got {type(fig).__name__}")
        _check_image_options(dpi, format, colors)
        try:
            data = _image_bytes(fig, int(dpi), quantize, tight, format, colors)
        finally:
            if getattr(getattr(fig, "canvas", None), "manager", None) is not None:  # a pyplot figure
                import matplotlib.pyplot as plt  # local: importing pyplot selects a backend; only its figures need it
                plt.close(fig)
    kw = {"layout": widgets.Layout(width=width, max_width="100%")} if width else {}
    return widgets.Image(value=data, format=format, **kw)


_PLACEHOLDER_CACHE: dict = {}


def placeholder_image(text: str = PLACEHOLDER_TEXT, dpi: int = 80):
    """A small image saying ``text`` (default: "not computed in this profile")."""
    key = (text, dpi)
    if key not in _PLACEHOLDER_CACHE:
        fig = Figure(figsize=(4.0, 1.2))
        fig.text(0.5, 0.5, text, ha="center", va="center", fontsize=12, color="0.35")
        _PLACEHOLDER_CACHE[key] = _png_bytes(fig, dpi, True)
    return widgets.Image(value=_PLACEHOLDER_CACHE[key], format="png")


def _as_widget(item, dpi: int, image: Mapping | None = None):
    """A grid cell -> a widget: Figures/bytes become Images (``image``: more :func:`fig_to_image` options, e.g.
    ``format`` and ``colors``), widgets pass through."""
    if isinstance(item, widgets.Widget):
        return item
    return fig_to_image(item, dpi=dpi, **(image or {}))


def _labels(values: Sequence, what: str) -> list[str]:
    labels = [str(v) for v in values]
    if not labels:
        raise ValueError(f"{what}: needs at least one value; got none")
    dup = sorted({x for x in labels if labels.count(x) > 1})
    if dup:
        raise ValueError(f"{what}: labels must be distinct as strings; duplicated: {dup}")
    return labels


def _make_control(kind: str, labels: list[str], description: str):
    style = {"description_width": "initial"}
    if kind == "slider":
        return widgets.SelectionSlider(options=labels, value=labels[0], description=description,
                                       continuous_update=True, style=style,
                                       layout=widgets.Layout(width="min(100%, 36em)"))
    if kind == "dropdown":
        return widgets.Dropdown(options=labels, value=labels[0], description=description, style=style)
    raise ValueError(f"control kind {kind!r} is not valid; valid kinds: {', '.join(map(repr, CONTROL_KINDS))}")


def _link(control, stack):
    return widgets.jslink((control, "index"), (stack, "selected_index"))


def slider_stack(figures: Sequence, labels: Sequence, description: str = "step", dpi: int = 80):
    """A SelectionSlider over ``labels`` whose ``index`` is jslinked to a Stack of ``figures``.

    ``figures`` are matplotlib Figures (rendered with :func:`fig_to_image` and closed), Images,
    PNG bytes or any widgets. Returns ``VBox([slider, stack])``; the link widget is kept on
    ``box.links`` (and in the kernel's widget registry, hence in the saved widget state).
    """
    figures = list(figures)
    labels = _labels(labels, "slider_stack labels")
    if len(figures) != len(labels):
        raise ValueError(f"slider_stack: figures and labels must have the same length; got {len(figures)} figures "
                         f"and {len(labels)} labels")
    children = [_as_widget(f, dpi) for f in figures]
    stack = widgets.Stack(children=children, selected_index=0)
    slider = _make_control("slider", labels, description)
    box = widgets.VBox([slider, stack])
    box.links = [_link(slider, stack)]
    box.controls = [slider]
    box.stacks = [[stack]]
    return box


def _check_axes(axes: Sequence) -> tuple[list, list, list]:
    """The names, value lists and control kinds of an explorer's ``(name, values, kind)`` axes."""
    axes = list(axes)
    if not axes:
        raise ValueError("linked_explorer: axes must list at least one (name, values, kind)")
    names, value_lists, kinds = [], [], []
    for i, ax in enumerate(axes):
        if not (isinstance(ax, (tuple, list)) and len(ax) == 3):
            raise ValueError(f"linked_explorer: axes[{i}] = {ax!r} is not valid; expected (name, values, kind) "
                             f"with kind in {CONTROL_KINDS}")
        name, values, kind = ax
        if kind not in CONTROL_KINDS:
            raise ValueError(f"linked_explorer: axes[{i}] kind {kind!r} is not valid; valid kinds: "
                             + ", ".join(map(repr, CONTROL_KINDS)))
        values = list(values)
        _labels(values, f"linked_explorer axis {name!r}")
        names.append(str(name))
        value_lists.append(values)
        kinds.append(kind)
    return names, value_lists, kinds


def _nested_stacks(grid: Mapping, names: list, value_lists: list, dpi: int, missing_text: str,
                   image: Mapping | None, who: str):
    """The outer Stack of nested Stacks over ``value_lists`` (leaves: ``grid``'s cells, placeholders where
    missing) and the Stacks of each level."""
    single = len(value_lists) == 1
    keys = {(k if isinstance(k, tuple) and not single else (k,)) for k in grid}
    valid = set(itertools.product(*value_lists))
    unknown = [k for k in keys if k not in valid]
    if unknown:
        raise ValueError(f"{who}: grid keys {sorted(map(str, unknown))[:5]} are not combinations of the "
                         f"axes' values; valid values per axis: "
                         + "; ".join(f"{n}: {v}" for n, v in zip(names, value_lists)))

    def cell(key):
        item = grid.get(key[0] if single else key)
        return placeholder_image(missing_text, dpi) if item is None else _as_widget(item, dpi, image)

    stacks: list[list] = [[] for _ in value_lists]

    def build(level: int, prefix: tuple):
        children = []
        for v in value_lists[level]:
            key = prefix + (v,)
            children.append(cell(key) if level == len(value_lists) - 1 else build(level + 1, key))
        st = widgets.Stack(children=children, selected_index=0)
        stacks[level].append(st)
        return st

    return build(0, ()), stacks


def _link_levels(controls: Sequence, stacks: list[list]) -> list:
    return [_link(ctrl, st) for ctrl, level_stacks in zip(controls, stacks) for st in level_stacks]


def linked_explorer(grid: Mapping, axes: Sequence, dpi: int = 80, missing_text: str = PLACEHOLDER_TEXT,
                    image: Mapping | None = None):
    """Controls over several axes switching precomputed figures without a kernel.

    ``axes`` is an ordered list of ``(name, values, kind)`` with ``kind`` in :data:`CONTROL_KINDS`.
    ``grid`` maps a tuple of values (one per axis, in axis order; a bare value when there is one
    axis) to a Figure, Image, PNG bytes or widget. The result nests Stacks: the outer Stack has one
    child per value of the first axis, each a Stack over the second axis, and so on; the leaves
    are the images. The control of axis ``k`` is jslinked to **every** Stack of level ``k`` (one
    ``jslink`` per Stack), so moving one dropdown switches all branches consistently. Cells missing
    from ``grid`` show a placeholder image ("not computed in this profile"). ``image``: more options of
    :func:`fig_to_image` for the Figures (e.g. ``{"format": "webp", "colors": 48}``).

    Returns ``VBox([HBox(controls), outer_stack])`` with ``.links``, ``.controls`` and ``.stacks``
    (a list per level) attached for inspection.
    """
    names, value_lists, kinds = _check_axes(axes)
    outer, stacks = _nested_stacks(grid, names, value_lists, dpi, missing_text, image, "linked_explorer")
    controls = [_make_control(k, [str(v) for v in vals], n) for n, vals, k in zip(names, value_lists, kinds)]
    box = widgets.VBox([widgets.HBox(controls, layout=widgets.Layout(flex_flow="row wrap")), outer])
    box.links = _link_levels(controls, stacks)
    box.controls = controls
    box.stacks = stacks
    return box


def linked_stacks(grid: Mapping, controls: Sequence, dpi: int = 80, missing_text: str = PLACEHOLDER_TEXT,
                  image: Mapping | None = None):
    """Nested Stacks over the values of existing ``controls`` (each a Dropdown or SelectionSlider, e.g. some of
    a :func:`linked_explorer`'s ``.controls``), jslinked to them: figures that depend on only some of an
    explorer's axes, switched by the same controls.

    ``grid`` maps a tuple of the controls' option labels (a bare label for one control) to a Figure, Image,
    PNG bytes or widget, as in :func:`linked_explorer`. Returns the outer Stack with ``.links`` and ``.stacks``.
    """
    controls = list(controls)
    if not controls or not all(isinstance(c, (widgets.Dropdown, widgets.SelectionSlider)) for c in controls):
        raise ValueError(f"linked_stacks: controls must be one or more Dropdowns or SelectionSliders; got "
                         f"{[type(c).__name__ for c in controls]}")
    names = [c.description for c in controls]
    value_lists = [list(c.options) for c in controls]
    outer, stacks = _nested_stacks(grid, names, value_lists, dpi, missing_text, image, "linked_stacks")
    outer.links = _link_levels(controls, stacks)
    outer.stacks = stacks
    return outer


def live_note(text: str | None = None):
    """An HTML note telling static-page readers that these controls only switch precomputed figures.

    Live controls (recomputing with new values) need a running kernel: open the notebook in
    Jupyter, or re-run it with papermill ``-p`` parameters.
    """
    msg = text or ("These controls switch between <b>precomputed</b> figures and work in the static page. "
                   "<b>Live controls need a running kernel</b>: to compute other settings, open this notebook in "
                   "Jupyter (or re-run it with <code>papermill ... -p name value</code>).")
    return widgets.HTML(value=f'<div class="sec-live-note" style="font-size:90%;color:#555;'
                              f'border-left:3px solid #bbb;padding-left:0.6em">{msg}</div>')


def link_records(box) -> list[tuple[str, str, str, str]]:
    """``(source_model_id, source_attr, target_model_id, target_attr)`` for each link of a box built here."""
    return [(lk.source[0].model_id, lk.source[1], lk.target[0].model_id, lk.target[1]) for lk in box.links]
