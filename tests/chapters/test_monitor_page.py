"""The "Check your own model" page (notebooks/monitor.ipynb, sec_lib.chapters.monitor): its loss parameter is
checked with a clear error, its loop attaches the monitor in three lines, and its pieces run on a tiny loop.
(tests/site/test_book.py executes the page itself at smoke parameters, with every other page.)"""
from pathlib import Path

import nbformat
import pytest
import torch
from matplotlib.figure import Figure

from sec_lib.chapters import PAGE_NAMES
from sec_lib.chapters import monitor as page
from sec_lib.monitor import NormMonitor
from sec_lib.params import ParameterError
from sec_lib.sec import SECRegularizer

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "monitor.ipynb"


def test_a_bad_loss_fails_with_the_valid_choices(first_cells):
    with pytest.raises(ParameterError) as err:
        first_cells(NOTEBOOK, {"profile": "smoke", "loss": "tripplet"})
    msg = str(err.value)
    assert "'loss'" in msg and all(f"'{name}'" in msg for name in page.LOSSES)
    with pytest.raises(ParameterError, match="'eta'"):
        first_cells(NOTEBOOK, {"profile": "smoke", "eta": 0})
    first_cells(NOTEBOOK, {"profile": "smoke", "loss": "supcon"})        # a valid choice passes


def test_the_page_is_listed_and_its_loop_attaches_the_monitor_in_three_lines():
    assert "monitor" in PAGE_NAMES
    assert "file: book/nb/monitor" in (NOTEBOOK.parents[1] / "_toc.yml").read_text(encoding="utf-8")
    cells = [c for c in nbformat.read(NOTEBOOK, as_version=4).cells if c.cell_type == "code"]
    loop = next(c for c in cells if "NormMonitor.attach" in c.source)
    assert "show-input" in loop.metadata.get("tags", [])               # the reader sees the loop's code
    assert sum("# + monitor" in line for line in loop.source.splitlines()) == 3
    assert sum("monitor" in line.lower() for line in loop.source.splitlines()) == 3


def test_the_pages_pieces_on_a_tiny_loop():
    sizes = {**page.profile_sizes("smoke"), "steps": 4, "every": 2}
    assert isinstance(page.make_loss("triplet", eta=0.5).embedding_regularizer, SECRegularizer)
    assert page.make_loss("triplet").embedding_regularizer is None
    frames, samples = {}, {}
    for name, eta in (("none", 0.0), ("sec", 1.0)):
        torch.manual_seed(0)
        model, loss_fn = page.make_model(sizes), page.make_loss("triplet", eta=eta)
        opt = torch.optim.Adam(model.parameters(), lr=sizes["lr"])
        mon = NormMonitor.attach(model, optimizer=opt, every=sizes["every"])
        if eta:
            loss_fn = mon.wrap(loss_fn)
        for x, y in page.glyph_batches(sizes, 0):
            loss = loss_fn(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        frames[name], samples[name] = mon.frame(), mon.samples()
    assert [list(f["step"]) for f in frames.values()] == [[2, 4], [2, 4]]
    s = page.summary(frames)
    assert list(s["run"]) == [page.RUNS["none"], page.RUNS["sec"]]
    text = page.comparison_sentence(frames)
    assert f"{s['CV of ‖f‖'].iloc[0]:.3f} in your loop" in text and f"{s['CV of ‖f‖'].iloc[1]:.3f} with SEC" in text
    assert isinstance(page.curves_figure(frames), Figure) and isinstance(page.scatter_figure(samples), Figure)
    ds = page._glyphs(sizes)                                                           # read from the data
    sentence = page.data_sentence(sizes, "triplet")
    assert f"{len(ds):,} training glyphs" in sentence and f"{ds.num_classes:,} classes" in sentence
    assert f"{sizes['p']} classes × {sizes['k']} instances" in sentence
