"""Tests for sec_lib.figures.widgets: the static explorers must survive a kernel-free render, i.e. the saved
widget state (ipywidgets.embed) must hold the jslinks (LinkModel) with the right model ids and attribute
names, the Stacks with the right children, and non-empty PNG images."""
from __future__ import annotations

import base64

import ipywidgets as widgets
import pytest
from ipywidgets.embed import embed_data
from matplotlib.figure import Figure

from sec_lib.figures import widgets as W

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _fig(text: str, size=(3.0, 2.0)) -> Figure:
    fig = Figure(figsize=size)
    ax = fig.subplots()
    ax.plot([0, 1, 2], [0, len(text), 1])
    ax.set_title(text)
    return fig


def _state(box) -> dict:
    """The widget state a static page would load (all live widgets, as papermill/nbclient saves them)."""
    return embed_data(views=[box])["manager_state"]["state"]


def _png(state: dict, model_id: str) -> bytes:
    entry = state[model_id]
    assert entry["model_name"] == "ImageModel"
    bufs = {tuple(b["path"]): b for b in entry.get("buffers", [])}
    assert ("value",) in bufs, "image bytes must be stored in the widget state"
    b = bufs[("value",)]
    return base64.b64decode(b["data"]) if b.get("encoding", "base64") == "base64" else b["data"]


def _ref(model_id: str) -> str:
    return f"IPY_MODEL_{model_id}"


def _links_in_state(state: dict) -> set[tuple]:
    out = set()
    for v in state.values():
        if v["model_name"] == "LinkModel":
            s, t = v["state"]["source"], v["state"]["target"]
            out.add((s[0], s[1], t[0], t[1]))
    return out


def test_fig_to_image_small_png_and_closes_pyplot_figures():
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(6, 4))
    fig.add_subplot().plot(range(100), [i ** 0.5 for i in range(100)])
    num = fig.number
    img = W.fig_to_image(fig, dpi=80)
    assert isinstance(img, widgets.Image) and img.format == "png"
    value = bytes(img.value)
    assert value.startswith(PNG_MAGIC) and 0 < len(value) < 80_000
    assert not plt.fignum_exists(num)
    # quantized PNG is smaller than the raw one and decodes to the same size
    raw = W.fig_to_image(_fig("x", (6, 4)), dpi=80, quantize=False)
    small = W.fig_to_image(_fig("x", (6, 4)), dpi=80)
    assert len(small.value) <= len(raw.value)
    from PIL import Image
    import io

    assert Image.open(io.BytesIO(small.value)).size == Image.open(io.BytesIO(raw.value)).size == (480, 320)
    assert W.fig_to_image(img) is img
    with pytest.raises(ValueError, match="matplotlib Figure"):
        W.fig_to_image("not a figure")


def _busy_fig(size=(6, 4)) -> Figure:
    """A figure with many colours: a light band, lines of a colour map, anti-aliased text."""
    import numpy as np
    fig = Figure(figsize=size)
    ax = fig.subplots()
    x = np.linspace(0, 10, 200)
    ax.fill_between(x, np.sin(x) - 1, np.sin(x) + 1, color="#cfe0f0")
    for i in range(12):
        ax.plot(x, np.sin(x + i / 3), color=f"C{i % 10}", lw=1)
    ax.set_title("a title with text")
    return fig


def test_fig_to_image_webp_and_fewer_colours():
    from PIL import Image
    import io

    png = W.fig_to_image(_busy_fig(), dpi=80)
    webp = W.fig_to_image(_busy_fig(), dpi=80, format="webp", colors=48)
    assert webp.format == "webp" and bytes(webp.value)[8:12] == b"WEBP"
    decoded = Image.open(io.BytesIO(bytes(webp.value)))
    assert decoded.format == "WEBP" and decoded.size == (480, 320)
    assert len(decoded.convert("RGB").getcolors(256) or []) <= 48
    assert len(webp.value) < 0.8 * len(png.value)
    # the light band survives the smaller palette: the pixels of its colour stay that colour (within tolerance)
    raw = Image.open(io.BytesIO(bytes(W.fig_to_image(_busy_fig(), dpi=80, quantize=False).value))).convert("RGB")
    import numpy as np
    a, b = np.asarray(raw, int), np.asarray(decoded.convert("RGB"), int)
    band = (a == (0xcf, 0xe0, 0xf0)).all(axis=2)
    assert band.sum() > 1000 and np.abs(a[band] - b[band]).max() <= W.PALETTE_TOLERANCE
    for bad, match in ((dict(format="jpeg"), "'png', 'webp'"), (dict(colors=1), r"\[2, 256\]"),
                       (dict(colors=300), r"\[2, 256\]"), (dict(colors=4.0), "integer")):
        with pytest.raises(ValueError, match=match):
            W.fig_to_image(_fig("x"), **bad)


def test_a_palette_that_loses_a_frequent_colour_falls_back_to_256():
    """Too few colours merge the light band into the background: the image then gets 256 colours instead."""
    from PIL import Image
    import io

    buf = io.BytesIO()
    _busy_fig().savefig(buf, format="png", dpi=80, facecolor="white")
    rgb = Image.open(buf).convert("RGB")
    four = rgb.quantize(colors=4, method=Image.Quantize.FASTOCTREE, dither=Image.Dither.NONE)
    assert not W._keeps_frequent_colours(rgb, four)
    assert W._keeps_frequent_colours(rgb, rgb.quantize(colors=256, method=Image.Quantize.FASTOCTREE,
                                                        dither=Image.Dither.NONE))
    assert len(W._palette(rgb, 4).getpalette()) // 3 > 4


def test_linked_stacks_follow_some_of_an_explorers_controls():
    """Figures that depend on the second axis only: one Stack, linked to the explorer's second control."""
    grid = {(a, b): _fig(f"{a}{b}") for a in "xy" for b in "pq"}
    box = W.linked_explorer(grid, [("a", ["x", "y"], "slider"), ("b", ["p", "q"], "dropdown")], dpi=30)
    rows = W.linked_stacks({"p": _fig("p")}, box.controls[1:], dpi=30, image=dict(format="webp", colors=64))
    assert len(rows.children) == 2 and rows.children[0].format == "webp"
    assert rows.children[1].value == W.placeholder_image(dpi=30).value          # "q" has no figure
    state = _state(widgets.VBox([box, rows]))
    assert (_ref(box.controls[1].model_id), "index", _ref(rows.model_id), "selected_index") in _links_in_state(state)
    assert not any(_ref(box.controls[0].model_id) == s and t == _ref(rows.model_id)
                   for s, _, t, _ in _links_in_state(state))
    with pytest.raises(ValueError, match="not combinations"):
        W.linked_stacks({"z": _fig("z")}, box.controls[1:])
    with pytest.raises(ValueError, match="Dropdowns or SelectionSliders"):
        W.linked_stacks({}, [widgets.Button()])


def test_slider_stack_state_has_jslink_stack_and_images():
    labels = ["step 0", "step 5", "step 10"]
    box = W.slider_stack([_fig(t) for t in labels], labels, description="step", dpi=50)
    slider, stack = box.children
    assert isinstance(slider, widgets.SelectionSlider) and list(slider.options) == labels
    assert isinstance(stack, widgets.Stack) and stack.selected_index == 0
    state = _state(box)
    # the stack in the saved state has three image children with real PNG bytes
    st = state[stack.model_id]["state"]
    assert st["children"] == [_ref(c.model_id) for c in stack.children] and len(st["children"]) == 3
    pngs = [_png(state, c.model_id) for c in stack.children]
    assert all(p.startswith(PNG_MAGIC) and len(p) > 500 for p in pngs)
    assert len(set(pngs)) == 3  # distinct figures
    # the client-side link: slider.index -> stack.selected_index
    assert (_ref(slider.model_id), "index", _ref(stack.model_id), "selected_index") in _links_in_state(state)
    assert W.link_records(box) == [(slider.model_id, "index", stack.model_id, "selected_index")]


def test_slider_stack_bad_input():
    with pytest.raises(ValueError, match="same length"):
        W.slider_stack([_fig("a")], ["a", "b"])
    with pytest.raises(ValueError, match="distinct"):
        W.slider_stack([_fig("a"), _fig("b")], ["a", "a"])


def test_linked_explorer_nested_stacks_one_link_per_stack():
    losses, etas = ["triplet", "npair"], [0.0, 0.1, 1.0]
    pngs = {}
    grid = {}
    for lo in losses:
        for e in etas:
            if (lo, e) == ("npair", 1.0):
                continue  # missing cell -> placeholder
            img = W.fig_to_image(_fig(f"{lo} {e}"), dpi=40)
            pngs[(lo, e)] = bytes(img.value)
            grid[(lo, e)] = bytes(img.value)  # bytes are accepted as cells
    box = W.linked_explorer(grid, [("loss", losses, "dropdown"), ("eta", etas, "slider")], dpi=40)
    controls_box, outer = box.children
    dd, sl = controls_box.children
    assert isinstance(dd, widgets.Dropdown) and isinstance(sl, widgets.SelectionSlider)
    assert list(dd.options) == losses and list(sl.options) == ["0.0", "0.1", "1.0"]
    state = _state(box)
    assert len(state[outer.model_id]["state"]["children"]) == 2
    inner = list(outer.children)
    links = _links_in_state(state)
    # dropdown drives the outer stack; the slider drives EVERY inner stack (one jslink each)
    assert (_ref(dd.model_id), "index", _ref(outer.model_id), "selected_index") in links
    for st in inner:
        assert isinstance(st, widgets.Stack)
        assert len(state[st.model_id]["state"]["children"]) == 3
        assert (_ref(sl.model_id), "index", _ref(st.model_id), "selected_index") in links
    assert len(W.link_records(box)) == 1 + len(inner)
    # leaf [i][j] is grid[(losses[i], etas[j])]; the missing one is the placeholder
    for i, lo in enumerate(losses):
        for j, e in enumerate(etas):
            data = _png(state, inner[i].children[j].model_id)
            assert data.startswith(PNG_MAGIC) and len(data) > 100
            if (lo, e) in pngs:
                assert data == pngs[(lo, e)]
            else:
                assert data == bytes(W.placeholder_image(dpi=40).value)


def test_linked_explorer_three_levels_and_single_axis():
    a, b, c = ["x", "y"], [1, 2, 3], ["p", "q"]
    grid = {(i, j, k): _fig(f"{i}{j}{k}", (1.5, 1.0)) for i in a for j in b for k in c if j != 2}
    box = W.linked_explorer(grid, [("a", a, "dropdown"), ("b", b, "slider"), ("c", c, "dropdown")], dpi=30)
    assert [len(level) for level in box.stacks] == [1, 2, 6]
    recs = W.link_records(box)
    assert len(recs) == 1 + 2 + 6
    ids = [ctrl.model_id for ctrl in box.controls]
    for level, ctrl_id in enumerate(ids):
        targets = {r[2] for r in recs if r[0] == ctrl_id}
        assert targets == {st.model_id for st in box.stacks[level]}
    links = _links_in_state(_state(box))
    assert all((_ref(s), sa, _ref(t), ta) in links for s, sa, t, ta in recs)
    one = W.linked_explorer({"u": _fig("u"), "v": _fig("v")}, [("which", ["u", "v"], "dropdown")], dpi=30)
    assert len(one.children[1].children) == 2 and len(W.link_records(one)) == 1


def test_linked_explorer_bad_input_names_valid_choices():
    with pytest.raises(ValueError, match="'knob'.*'dropdown', 'slider'"):
        W.linked_explorer({}, [("a", [1, 2], "knob")])
    with pytest.raises(ValueError, match="not combinations"):
        W.linked_explorer({(3,): _fig("z")}, [("a", [1, 2], "dropdown")])
    with pytest.raises(ValueError, match="at least one"):
        W.linked_explorer({}, [])


def test_live_note_mentions_kernel():
    note = W.live_note()
    assert isinstance(note, widgets.HTML)
    assert "running kernel" in note.value
