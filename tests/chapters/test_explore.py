"""Tests for sec_lib.chapters.explore (the η/μ explorer page).

The grid is a handful of tiny toy runs trained into a temporary store; one cell is left untrained
to check the placeholders. The static explorer is checked on the widget state a kernel-free page
loads (ipywidgets.embed): one jslink per Stack from the right control, Stack sizes equal to the
axes, and each leaf the figure of its own cell. The live runner is driven without a frontend.

The slow test executes notebooks/explore.ipynb with the papermill CLI (as the book's runner does) at
profile smoke with SEC_RUNS_DIR pointing to an empty folder: the notebook trains the missing smoke
runs itself (its ``missing="train"`` default, through ``pool.run_all``), and the kernel's parent is
papermill, so ``mode="auto"`` must choose the static page.
"""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import ipywidgets as widgets
import pytest

from sec_lib.threads import torch_threads
import torch
from ipywidgets.embed import dependency_state, embed_data

from sec_lib.runs import experiments as ex
from sec_lib.chapters import explore as X
from sec_lib.figures import explore as explore_fig
from sec_lib.figures import widgets as W
from sec_lib.params import ParameterError
from sec_lib.runs.store import ResultStore, load_runs, results_to_frames, run_key
from sec_lib.runs.train import TrainConfig

ROOT = pathlib.Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "notebooks" / "explore.ipynb"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
WEBP_MAGIC = b"WEBP"           # bytes 8-12 of a WebP file (after "RIFF" and the length)

TINY = dict(ex.PROFILES["smoke"].toy, iterations=6, eval_every=0, kmeans_n_init=1, track_every=2, track_samples=6)
ETAS, MUS, LOSSES = (0.0, 0.5), ("batch", "zero"), ("semihard", "npair")
UNTRAINED_ETA = 2.0      # in the grid's configs, never trained: its cells must be placeholders


def _cfg(loss, eta, mu):
    return TrainConfig(**dict(TINY, loss=loss, eta=eta, mu=mu if eta else "batch"))


def _configs():
    """Like experiments.toy_grid: one config per (loss, μ, η), η = 0 repeated for every μ."""
    return [_cfg(loss, eta, mu) for loss in LOSSES for mu in MUS for eta in (*ETAS, UNTRAINED_ETA)]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    store = ResultStore(root)
    configs = _configs()
    trained = {run_key(c): c for c in configs if c.eta != UNTRAINED_ETA}
    with torch_threads(1):
        for c in trained.values():
            store.run(c)
    frames = load_runs(list(trained.values()), root=root)
    grid = X.build_grid(configs, frames, "tiny")
    box = X.explorer_widget(grid, dpi=50)
    # a grid with the same axes and no runs: every cell a placeholder (cheap controls for the live tests)
    empty = X.build_grid(configs, results_to_frames([]), "tiny")
    return dict(root=root, store=store, configs=configs, grid=grid, box=box, empty=empty, n_trained=len(trained))


# ------------------------------------------------------------------------------- the grid

def test_grid_axes_cells_and_summary(tiny):
    g = tiny["grid"]
    assert g.axes.etas == (0.0, 0.5, UNTRAINED_ETA)
    assert g.axes.mus == MUS and g.axes.losses == LOSSES
    assert g.axes.eta_labels == ("0", "0.5", "2") and g.axes.mu_labels == ("batch mean", "zero (L2-reg)")
    assert g.axes.eta_of("0.5") == 0.5 and g.axes.mu_of("zero (L2-reg)") == "zero"
    # η = 0 is one run per loss, shared by every μ mode; the others are their own runs
    for loss in LOSSES:
        k0 = run_key(_cfg(loss, 0.0, "batch"))
        assert all(g.cells[(0.0, mu, loss)] == [k0] for mu in MUS)
        assert g.cells[(0.5, "zero", loss)] == [run_key(_cfg(loss, 0.5, "zero"))]
    assert len(g.frames.runs) == tiny["n_trained"] == 2 * (1 + len(MUS))

    s = X.summary_table(g)
    assert len(s) == len(ETAS + (UNTRAINED_ETA,)) * len(MUS) * len(LOSSES)
    assert set(s[s["eta"] == UNTRAINED_ETA]["status"]) == {"not computed"}
    assert set(s[s["eta"] != UNTRAINED_ETA]["status"]) == {"done"}
    # the numbers are the stored runs' final metrics (read back independently from the store)
    for loss in LOSSES:
        for mu in MUS:
            r = tiny["store"].get(_cfg(loss, 0.5, mu))
            row = s[(s["loss"] == loss) & (s["mu"] == mu) & (s["eta"] == 0.5)].iloc[0]
            assert row["R@1"] == pytest.approx(r.metrics["R@1"]) and row["NMI"] == pytest.approx(r.metrics["NMI"])
            assert row["train_norm_var"] == pytest.approx(r.metrics["train_norm_var"])
            tail = r.steps.sort_values("step")["norm_var"].tail(1).mean()
            assert row["batch_norm_var"] == pytest.approx(tail)
        zero = s[(s["loss"] == loss) & (s["eta"] == 0)]
        assert zero["R@1"].nunique() == 1


def test_reading_and_describe_are_computed(tiny):
    g = tiny["grid"]
    s = X.summary_table(g)
    text = X.reading(g, s)
    for loss in LOSSES:
        d = s[(s["loss"] == loss) & (s["mu"] == "zero") & (s["eta"] > 0) & (s["status"] == "done")]
        best = d.loc[d["R@1"].idxmax()]
        assert f"best R@1 {best['R@1']:.1f}% at η = {X.eta_label(best['eta'])}" in text
        base = s[(s["loss"] == loss) & (s["eta"] == 0)]["R@1"].iloc[0]
        assert f"η = 0: R@1 {base:.1f}%" in text
    assert "optimistic" in text
    desc = X.describe(g, "static")
    assert "= 12 cells" in desc and "8 cells computed" in desc and "4 not computed" in desc and "**static**" in desc


def test_figures_small_and_placeholders(tiny):
    g, box = tiny["grid"], tiny["box"]
    computed = {(X.eta_label(e), X.mu_label(m), l) for (e, m, l) in g.cells if e != UNTRAINED_ETA}
    figs = X.grid_figures(g)
    assert set(figs) == computed and len(figs) == 8
    placeholder = W.placeholder_image(dpi=50).value
    frames = {k: bytes(img.value) for k, img in box.cells.items()}
    assert len(frames) == 12
    for k, frame in frames.items():
        if k in computed:                                          # lossless WebP (CELL_IMAGE)
            assert frame[8:12] == WEBP_MAGIC and box.cells[k].format == "webp" and 1_000 < len(frame) < 30_000
        else:
            assert frame == placeholder and frame[:8] == PNG_MAGIC
    assert len({frames[k] for k in computed}) == len(computed)       # every cell its own figure
    assert X.cell_figure(g, UNTRAINED_ETA, "batch", "npair") is None
    assert X.run_figure(g, UNTRAINED_ETA, "batch", "npair") is None
    # the grid's rows: one image per (μ, loss), every one computed here (η = 0.5 and η = 0 finished)
    assert set(X.RowFigures(g)) == {(X.mu_label(m), l) for m in MUS for l in LOSSES} == set(box.rows)
    assert all(bytes(img.value)[8:12] == WEBP_MAGIC for img in box.rows.values())
    # building the explorer creates exactly one Image per cell: no throw-away widgets, which papermill
    # would save into the page as well
    def live_images():
        state = widgets.Widget.get_manager_state(widgets=None)["state"]   # every widget alive in this process
        return {k for k, v in state.items() if v["model_name"] == "ImageModel"}

    before = live_images()
    sub = X.build_grid([c for c in tiny["configs"] if c.loss == "npair" and c.mu == "batch"], g.frames)
    small = X.explorer_widget(sub, dpi=40)
    assert len(small.cells) == 3 and len(small.rows) == 1
    assert len(live_images() - before) == len(small.cells) + len(small.rows)


def test_diverged_cell_is_shown_and_reported(tiny):
    """A run that diverges (a non-finite loss) is a result: its cell shows what was recorded, with the error."""
    from sec_lib.runs.train import train
    bad = TrainConfig(**dict(TINY, loss="npair", eta=1e6, mu="zero", optimizer="sgd", lr=10.0))
    res = train(bad)
    assert res.status == "failed"
    ok = [tiny["store"].get(_cfg("npair", e, "zero")) for e in ETAS]
    g = X.build_grid([_cfg("npair", e, "zero") for e in ETAS] + [bad], results_to_frames(ok + [res]))
    s = X.summary_table(g)
    row = s[s["eta"] == 1e6].iloc[0]
    assert row["status"] == "diverged" and row["runs"] == 1 and row["done"] == 0
    fig = X.cell_figure(g, 1e6, "zero", "npair", s)
    assert "diverged" in fig._suptitle.get_text()
    assert any("non-finite loss" in t.get_text() for a in fig.axes for t in a.texts)
    assert "1 of 3 cells diverged" in X.reading(g, s) and "1 diverged" in X.describe(g)


# ------------------------------------------------------------------------------- the static widget

def _state(box) -> dict:
    """The saved widget state of ``box`` and everything it references (what a static page loads)."""
    return embed_data(views=[box], state=dependency_state([box]))["manager_state"]["state"]


def _ref(w) -> str:
    return f"IPY_MODEL_{w.model_id}"


def test_explorer_widget_state_links_every_stack(tiny):
    g, box = tiny["grid"], tiny["box"]
    eta_c, mu_c, loss_c = box.controls
    assert isinstance(eta_c, widgets.SelectionSlider) and isinstance(mu_c, widgets.Dropdown)
    assert list(eta_c.options) == list(g.axes.eta_labels) and list(mu_c.options) == list(g.axes.mu_labels)
    assert list(loss_c.options) == list(LOSSES)
    state = _state(box)
    links = {}
    for v in state.values():
        if v["model_name"] == "LinkModel":
            (src, sattr), (tgt, tattr) = v["state"]["source"], v["state"]["target"]
            assert (sattr, tattr) == ("index", "selected_index")
            links.setdefault(src, set()).add(tgt)
    n_eta, n_mu, n_loss = len(g.axes.etas), len(g.axes.mus), len(g.axes.losses)
    # the η slider drives the outer Stack, μ one Stack per η, the loss one Stack per (η, μ)
    controls, figures = box.children
    outer, rows = figures.children
    assert (outer, rows) == (box.cell_stack, box.row_stack) and list(controls.children) == box.controls
    assert outer.layout.min_width == rows.layout.min_width == X.FRAME_MIN_WIDTH
    assert links[_ref(eta_c)] == {_ref(outer)}
    assert {_ref(s) for s in outer.children} <= links[_ref(mu_c)] and len(outer.children) == n_eta
    leaves = {_ref(s2) for s in outer.children for s2 in s.children}
    assert leaves <= links[_ref(loss_c)] and len(leaves) == n_eta * n_mu
    # the grid's rows below: μ drives their outer Stack too, the loss each of its Stacks; the η slider none
    assert _ref(rows) in links[_ref(mu_c)] and {_ref(s) for s in rows.children} <= links[_ref(loss_c)]
    assert links[_ref(mu_c)] == {_ref(s) for s in outer.children} | {_ref(rows)}
    assert links[_ref(loss_c)] == leaves | {_ref(s) for s in rows.children}
    for j, m in enumerate(g.axes.mu_labels):
        for k, loss in enumerate(g.axes.losses):
            assert rows.children[j].children[k] is box.rows[(m, loss)]
    # every Stack in the saved state has the size of its axis
    stacks = [v for v in state.values() if v["model_name"] == "StackModel"]
    assert len(stacks) == 1 + n_eta + n_eta * n_mu + 1 + n_mu
    sizes = sorted(len(v["state"]["children"]) for v in stacks)
    assert sizes == sorted([n_eta] + [n_mu] * n_eta + [n_loss] * n_eta * n_mu + [n_mu] + [n_loss] * n_mu)
    # the leaf at (η, μ, loss) is that cell's image, in the saved state too
    for i, e in enumerate(g.axes.eta_labels):
        for j, m in enumerate(g.axes.mu_labels):
            for k, loss in enumerate(g.axes.losses):
                img = outer.children[i].children[j].children[k]
                assert isinstance(img, widgets.Image) and img is box.cells[(e, m, loss)]
                assert state[img.model_id]["model_name"] == "ImageModel"
    # and its title names the cell (rendered figure of one computed cell, checked on the Figure)
    for fig in (X.cell_figure(g, 0.5, "zero", "npair"), X.run_figure(g, 0.5, "zero", "npair")):
        assert fig._suptitle.get_text().startswith("npair, μ = zero (L2-reg), η = 0.5:")
    assert X.grid_row_figure(g, "zero", "npair")._suptitle.get_text() == X.grid_row_title("zero", "npair")


# ------------------------------------------------------------------------------- mode detection

def _fake_proc(tmp_path, chain):
    """A /proc look-alike: chain = [(pid, ppid, argv), ...]."""
    for pid, ppid, argv in chain:
        d = tmp_path / str(pid)
        d.mkdir()
        (d / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
        (d / "stat").write_text(f"{pid} (py (x) thing) S {ppid} 1 1 0\n")
    return tmp_path


def test_detect_mode_from_parent_command_line(tmp_path):
    proc = _fake_proc(tmp_path, [(50, 40, ["python", "-m", "papermill", "nb.ipynb", "out.ipynb"]),
                                 (60, 55, ["/usr/bin/python3", "/usr/bin/jupyter-lab", "--no-browser"]),
                                 (55, 1, ["bash"]),
                                 (70, 71, ["/usr/bin/timeout", "600", "python"]),
                                 (71, 1, ["/usr/bin/papermill", "a.ipynb", "b.ipynb"])])
    assert X.detect_mode("auto", ppid=50, proc=proc) == "static"
    assert X.detect_mode("auto", ppid=60, proc=proc) == "live"
    assert X.detect_mode("auto", ppid=70, proc=proc) == "static"       # papermill one level up
    assert X.parent_cmdlines(60, proc) == ["/usr/bin/python3 /usr/bin/jupyter-lab --no-browser", "bash"]
    # explicit modes win; no /proc: the environment decides (static only with a papermill hint)
    assert X.detect_mode("live", ppid=50, proc=proc) == "live"
    assert X.detect_mode("static", ppid=60, proc=proc) == "static"
    assert X.detect_mode("auto", ppid=99, proc=proc, environ={}) == "live"
    assert X.detect_mode("auto", ppid=99, proc=proc, environ={"_": "/opt/bin/papermill"}) == "static"
    assert X.detect_mode("auto", ppid=99, proc=tmp_path / "nope", environ={"PAPERMILL_X": "1"}) == "static"
    # the book's runner executes pages in warm kernels whose parents are pool workers: it says so in the environment
    assert X.detect_mode("auto", ppid=60, proc=proc, environ={X.RENDER_ENV: "1"}) == "static"
    assert X.detect_mode("live", ppid=60, proc=proc, environ={X.RENDER_ENV: "1"}) == "live"
    with pytest.raises(ParameterError) as e:
        X.detect_mode("kernel")
    assert "'mode'" in str(e.value) and "'auto'" in str(e.value) and "'live'" in str(e.value)


@pytest.mark.skipif(not pathlib.Path("/proc/self/cmdline").exists(), reason="needs Linux /proc")
def test_detect_mode_reads_the_real_proc():
    """Against the real /proc: a process whose command line names papermill (an extra argv of a bare
    interpreter, which imports nothing) makes a kernel under it static; this process's own ancestors
    decide the default (the parent of this process)."""
    child = subprocess.Popen([sys.executable, "-c", "import sys; print('up', flush=True); sys.stdin.read()",
                              "papermill"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=ROOT)
    try:
        assert child.stdout.readline() == b"up\n"          # running its own command line now
        assert "papermill" in X.parent_cmdlines(child.pid)[0]
        assert X.detect_mode(ppid=child.pid) == "static"
    finally:
        child.communicate(input=b"", timeout=60)
    here = X.parent_cmdlines()                               # this process's parent and its ancestors
    assert here and "pytest" in X.parent_cmdlines(os.getpid())[0]      # /proc read for this process too
    assert X.detect_mode() == ("static" if any("papermill" in line for line in here) else "live")


# ------------------------------------------------------------------------------- live mode

def test_live_config_follows_the_grid_and_validates():
    c = X.live_config("smoke", 0.3, "ema", "npair", "sgd", iterations=7)
    toy = ex.PROFILES["smoke"].toy
    assert (c.dataset, c.model, c.width, c.embed_dim) == (toy["dataset"], toy["model"], toy["width"], toy["embed_dim"])
    assert (c.eta, c.mu, c.momentum, c.optimizer, c.lr, c.iterations) == (0.3, "ema", 0.1, "sgd", X.LIVE_LR["sgd"], 7)
    assert c.eval_every == 0
    a = X.live_config("smoke", 0.0, 4.0, "semihard")
    assert (a.eta, a.mu, a.momentum, a.lr) == (0.0, "batch", 1.0, toy["lr"])     # η = 0: μ irrelevant
    assert X.live_config("smoke", 1.0, "4.0", "semihard").mu == 4.0
    for kw, words in ((dict(optimizer="rmsprop"), ("'optimizer'", "'adam'", "'sgd'")),
                      (dict(profile="huge"), ("'profile'", "'smoke'")),
                      (dict(mu="median"), ("'mu'", "'batch'")),
                      (dict(eta=-1.0), ("'eta'",))):
        args = dict(profile="smoke", eta=0.5, mu="batch", loss="semihard", **{})
        args.update(kw)
        with pytest.raises(ParameterError) as e:
            X.live_config(**args)
        assert all(w in str(e.value) for w in words), str(e.value)
    with pytest.raises(ValueError, match="every"):
        X.run_live(a, every=0)


def test_run_live_trains_and_reports_progress():
    calls = []
    threads = torch.get_num_threads()
    cfg = X.live_config("smoke", 0.5, "batch", "semihard", iterations=7)
    res = X.run_live(cfg, progress=lambda s, t: calls.append((s, t)), every=3)
    assert calls == [(3, 7), (6, 7), (7, 7)]
    assert res.status == "done" and len(res.steps) == 7 and 0 <= res.metrics["R@1"] <= 100
    assert res.steps["loss_sec"].gt(0).any()                 # SEC was on
    assert torch.get_num_threads() == threads                # the thread setting is restored
    fig = X.live_figure(res)
    assert len(fig.axes) >= 6


def test_live_panel_trains_what_the_controls_select(tiny):
    g = tiny["grid"]
    box = X.explorer_widget(tiny["empty"])
    panel = X.live_panel(box, g, "smoke", every=2, iterations=5)
    box.controls[0].value = "0.5"
    box.controls[1].value = "zero (L2-reg)"
    box.controls[2].value = "npair"
    panel.optimizer.value = "adamw"
    assert panel.selected() == {"eta": 0.5, "mu": "zero", "loss": "npair", "optimizer": "adamw", "relative": False}
    seen = []
    panel.progress.observe(lambda ch: seen.append(ch["new"]), "value")
    res = panel.train_selected()
    assert (res.config.eta, res.config.mu, res.config.loss, res.config.optimizer, res.config.iterations) == \
        (0.5, "zero", "npair", "adamw", 5)
    assert seen[-1] == 1.0 and len(seen) >= 3                 # updated during training, complete at the end
    assert "R@1" in panel.status.value and panel.progress.bar_style == "success"
    (img,) = panel.figure_box.children
    assert isinstance(img, widgets.Image) and img.value[:8] == PNG_MAGIC
    assert not panel.button.disabled


def test_the_live_panel_trains_relative_sec_and_refuses_it_off_the_batch_mean(tiny):
    """The explorer's relative switch: the scale page's scale-free SEC, live, with μ = batch mean only."""
    c = X.live_config("smoke", 5.0, "batch", "semihard", relative=True, iterations=4)
    assert c.relative and c.variant == "sec-relative" and (c.eta, c.mu) == (5.0, "batch")
    assert not X.live_config("smoke", 0.0, "batch", "semihard", relative=True).relative   # η = 0: no SEC to make relative
    with pytest.raises(ParameterError, match="relative"):
        X.live_config("smoke", 1.0, "batch", "semihard", relative="yes")
    g = tiny["grid"]
    box = X.explorer_widget(tiny["empty"])
    panel = X.live_panel(box, g, "smoke", every=2, iterations=4)
    box.controls[0].value, box.controls[1].value, box.controls[2].value = "0.5", "batch mean", "semihard"
    panel.relative.value = True
    res = panel.train_selected()
    assert res.config.relative and res.status == "done" and "R@1" in panel.status.value
    assert res.steps["loss_sec"].gt(0).any()
    box.controls[1].value = "zero (L2-reg)"
    with pytest.raises(ParameterError, match="mu = 'batch'"):
        panel.train_selected()
    assert "mu = &#x27;batch&#x27;" in panel.status.value or "mu = 'batch'" in panel.status.value


def test_live_section_static_note_or_live_button(tiny):
    g = tiny["grid"]
    box = X.explorer_widget(tiny["empty"])
    note = X.live_section(box, g, "smoke", "static")
    assert isinstance(note, widgets.HTML) and "running kernel" in note.value
    assert not any(v["model_name"] == "ButtonModel" for v in _state(note).values())
    live = X.live_section(box, g, "smoke", "live")
    assert any(v["model_name"] == "ButtonModel" for v in _state(live).values())
    assert live.panel.eta_control is box.controls[0]
    with pytest.raises(ParameterError, match="'mode'"):
        X.live_section(box, g, "smoke", "auto")


def test_bad_inputs_name_the_valid_choices(tmp_path):
    with pytest.raises(ParameterError) as e:
        X.load_grid("huge", root=tmp_path)
    assert "'profile'" in str(e.value) and "'cpu'" in str(e.value)
    with pytest.raises(ParameterError) as e:
        X.load_grid("smoke", missing="ignore", root=tmp_path)
    assert "'missing'" in str(e.value) and "'skip'" in str(e.value)
    with pytest.raises(ValueError, match="at least one"):
        X.grid_axes([])
    assert not any(tmp_path.iterdir())                        # nothing was trained or written


def test_load_grid_skip_shows_placeholders_without_training(tmp_path):
    g = X.load_grid("smoke", missing="skip", root=tmp_path)
    s = X.summary_table(g)
    assert set(s["status"]) == {"not computed"} and g.trained == 0
    assert len(g.axes.etas) == 1 + len(ex.PROFILES["smoke"].toy_etas)
    assert len(X.grid_figures(g)) == 0
    assert len(X.RowFigures(g)) == 0
    box = X.explorer_widget(g)
    n_eta, n_mu = len(g.axes.etas), len(g.axes.mus)
    assert len(box.links) == (1 + n_eta + n_eta * n_mu) + (1 + n_mu)     # the cells' Stacks, then the rows'
    shown = {bytes(i.value) for i in [*box.cells.values(), *box.rows.values()]}
    assert shown == {W.placeholder_image(dpi=explore_fig.CELL_DPI).value}
    assert "placeholders" in X.describe(g) and not any(tmp_path.iterdir())


# ------------------------------------------------------------------------------- the notebook


def test_notebook_structure_and_parameter_check(first_cells):
    import nbformat

    assert X.PARAMS["profile"].values == ex.PROFILE_NAMES
    nb = nbformat.read(NOTEBOOK, as_version=4)
    assert nb.metadata["kernelspec"]["name"] == "python3"
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert "parameters" in code[0].metadata.get("tags", [])
    assert 'mode: str = "auto"' in code[0].source and 'profile: str = "cpu"' in code[0].source
    assert code[1].source.startswith("import sec_lib.params as _p, sec_lib.chapters.explore as _x")
    assert "notebook_params(globals(), _x.PARAMS)" in code[1].source
    assert all(not c.get("outputs") and c.get("execution_count") is None for c in code)
    assert nb.cells[0].cell_type == "markdown" and "?" in nb.cells[0].source.splitlines()[0]
    first_cells(NOTEBOOK, {"profile": "smoke", "mode": "static"})
    with pytest.raises(ParameterError) as e:
        first_cells(NOTEBOOK, {"mode": "kernel"})
    assert "'mode'" in str(e.value) and "'live'" in str(e.value)
    with pytest.raises(ParameterError) as e:
        first_cells(NOTEBOOK, {"bogus": 1})
    assert "bogus" in str(e.value) and "'profile'" in str(e.value)


@pytest.mark.slow
def test_notebook_runs_at_smoke_static_under_papermill(smoke_site):
    """The page as the smoke sweep executed it (tests/conftest.py: papermill, profile smoke)."""
    runs = smoke_site["tmp"] / "runs"
    out = smoke_site["site"] / "book" / "nb" / "explore.ipynb"
    assert smoke_site["run"].returncode == 0, smoke_site["run"].stderr[-3000:]
    nb = json.loads(out.read_text())
    text = "".join(str(o.get("text", "")) + str(o.get("data", {}).get("text/markdown", ""))
                   + str(o.get("data", {}).get("text/html", ""))
                   for c in nb["cells"] if c["cell_type"] == "code" for o in c.get("outputs", []))
    assert "Mode: **static**" in text and "not computed (placeholders)" in text
    assert "best R@1" in text and "optimistic" in text
    cfgs = ex.sweep_configs("explore", "smoke", ResultStore(runs))
    assert all(ResultStore(runs).has(c) for c in cfgs)
    state = nb["metadata"]["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    p = ex.PROFILES["smoke"]
    n_eta, n_mu = 1 + len(p.toy_etas), 4
    links = [v for v in state.values() if v["model_name"] == "LinkModel"]
    assert len(links) == (1 + n_eta + n_eta * n_mu) + (1 + n_mu)     # the cells' Stacks, then the grid rows'
    frames = [v for v in state.values() if v["model_name"] == "ImageModel" and v["state"].get("format") == "webp"]
    assert len(frames) >= n_eta * n_mu                                  # the computed cells' runs and grid rows
    assert not any(v["model_name"] == "ButtonModel" for v in state.values())   # static: no live controls
    assert any(v["model_name"] == "HTMLModel" and "running kernel" in v["state"].get("value", "")
               for v in state.values())
    assert out.stat().st_size < 3_000_000


def test_the_overview_figure_keeps_a_readable_width_on_a_phone():
    """The overview's panels sit side by side: at phone width its cell (tagged wide-figure, which myst-nb turns into
    the class tag_wide-figure) keeps the image 560 px wide and scrolls in the figure's own box."""
    import re
    from pathlib import Path
    import nbformat
    repo = Path(__file__).resolve().parents[2]
    nb = nbformat.read(repo / "notebooks" / "explore.ipynb", as_version=4)
    cell = next(c for c in nb.cells if c.cell_type == "code" and "overview_figure(" in c.source)
    assert "wide-figure" in cell.metadata.get("tags", [])
    css = (repo / "book" / "_static" / "sec.css").read_text(encoding="utf-8")
    phone = css[css.index("@media (max-width: 600px)"):]
    phone = phone[:phone.index("\n}\n")]
    assert re.search(r"\.tag_wide-figure div\.cell_output img \{ width: 560px; min-width: 560px; max-width: none; \}",
                     phone)
    # the figure (image and caption) is its own scroll box, never the page (the page checker measures the built page)
    assert re.search(r"\.tag_wide-figure div\.cell_output > figure,\s*\.bd-article \.tag_wide-figure "
                     r"div\.cell_output > \.output \{ display: block; max-width: 100%; overflow-x: auto; \}", phone)
