"""sec_lib.figures on small hand-made frames: every figure function returns a Figure with the expected
axes and artists, numbers printed in legends match an independent computation, bad input raises
ValueError, and nothing leaks into matplotlib's global state."""
import io
from types import SimpleNamespace

import matplotlib
import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

from sec_lib.figures import data as data_fig
from sec_lib.figures import results as results_fig
from sec_lib.figures import run as run_fig

LOSSES = ("triplet", "ms")
VARIANTS = ("none", "l2reg", "sec")
SEEDS = (0, 1, 2)
N_STEPS = 30


def make_frames(losses=LOSSES, variants=VARIANTS, seeds=SEEDS, n_steps=N_STEPS, seed=0):
    """Tidy frames shaped like store.load_runs output (values are arbitrary but deterministic)."""
    rng = np.random.default_rng(seed)
    runs, steps, tracked, evals, tn, cos, gs = [], [], [], [], [], [], []
    for li, loss in enumerate(losses):
        for v in variants:
            scale = {"none": 5.0, "l2reg": 0.5, "sec": 3.0}[v]
            spread = {"none": 0.4, "l2reg": 0.3, "sec": 0.05}[v]
            for s in seeds:
                key = f"{loss}-{v}-{s}"
                r1 = 50 + 2 * li + {"none": 0, "l2reg": 0.5, "sec": 2}[v] + rng.normal(0, 0.5)
                runs.append(dict(key=key, status="done", dataset="glyphs", loss=loss, variant=v, seed=s,
                                 **{"R@1": r1, "R@2": r1 + 8, "R@4": r1 + 15, "R@8": r1 + 20, "NMI": 60.0, "F1": 30.0},
                                 test_norm_var=(scale * spread) ** 2, train_norm_var=(scale * spread) ** 2))
                st = np.arange(1, n_steps + 1)
                nm = scale * (1 + 0.5 * st / n_steps)
                every5 = st % 5 == 0
                steps.append(pd.DataFrame(dict(
                    key=key, step=st, loss_metric=1 / np.sqrt(st), loss_sec=0.01 * (v != "none") * np.ones(n_steps),
                    norm_mean=nm, norm_var=(nm * spread) ** 2, mu=nm if v == "sec" else np.nan,
                    violations=0.3 * np.exp(-st / 10), grad_slope=-0.8 + 0.1 * rng.normal(size=n_steps),
                    grad_r2=rng.random(n_steps), dtheta_mean=np.where(every5, 0.02, np.nan),
                    dtheta_std=np.where(every5, 0.01, np.nan), dtheta_cv=np.where(every5, 0.5, np.nan))))
                for t in range(0, n_steps + 1, 10):
                    for smp in range(6):
                        tracked.append(dict(key=key, step=t, sample=smp, norm=scale * (1 + smp * spread) * (1 + t / n_steps)))
                for t in (0, n_steps // 2, n_steps):
                    evals.append(dict(key=key, step=t, **{"R@1": r1 * t / n_steps, "R@2": r1, "R@4": r1, "R@8": r1,
                                                          "NMI": 50.0, "F1": 20.0}))
                tn.append(pd.DataFrame(dict(key=key, label=np.arange(50) % 5, norm=scale * np.exp(spread * rng.normal(size=50)))))
                cos.append(pd.DataFrame(dict(key=key, kind=["pos"] * 40 + ["neg"] * 60,
                                             cos=np.r_[rng.uniform(0.2, 1, 40), rng.uniform(-0.5, 0.5, 60)])))
                for t in (1, n_steps // 2, n_steps):
                    nn = scale * np.exp(spread * rng.normal(size=12))
                    gs.append(pd.DataFrame(dict(key=key, step=t, norm=nn, grad_norm=np.exp(0.1 * rng.normal(size=12)) / nn)))
    return SimpleNamespace(runs=pd.DataFrame(runs), steps=pd.concat(steps, ignore_index=True),
                           tracked=pd.DataFrame(tracked), evals=pd.DataFrame(evals),
                           test_norms=pd.concat(tn, ignore_index=True), cosines=pd.concat(cos, ignore_index=True),
                           grad_scatter=pd.concat(gs, ignore_index=True))


@pytest.fixture(scope="module")
def F():
    return make_frames()


@pytest.fixture(scope="module")
def one(F):
    key = "triplet-sec-0"
    return SimpleNamespace(**{t: getattr(F, t)[getattr(F, t)["key"] == key]
                              for t in ("steps", "tracked", "evals", "cosines", "grad_scatter", "test_norms")},
                           runs=F.runs[F.runs["key"] == key])


@pytest.fixture(autouse=True)
def no_global_state():
    """Figures are built without pyplot and the style is scoped: rcParams and pyplot's registry stay untouched."""
    import matplotlib.pyplot as plt
    before = dict(matplotlib.rcParams)
    n_figs = len(plt.get_fignums())
    yield
    assert len(plt.get_fignums()) == n_figs
    after = dict(matplotlib.rcParams)
    changed = [k for k in before if str(before[k]) != str(after[k])]
    assert not changed, f"rcParams changed by a plot function: {changed}"
    plt.close("all")


def n_axes(fig):
    return len(fig.axes)


def legend_texts(ax):
    leg = ax.get_legend()
    return [t.get_text() for t in leg.get_texts()] if leg else []


# ------------------------------------------------------------------------------------ run level


def test_loss_parts_two_lines_per_run(one):
    fig = run_fig.loss_parts(one.steps)
    assert isinstance(fig, Figure) and n_axes(fig) == 1
    labels = legend_texts(fig.axes[0])
    assert any("metric" in t for t in labels) and any("L_sec" in t for t in labels)
    assert len(fig.axes[0].lines) == 2          # 30 steps: no smoothing, one line per part


def test_loss_parts_without_regulariser_draws_only_the_metric(F):
    fig = run_fig.loss_parts(F.steps[F.steps["key"] == "triplet-none-0"])
    assert len(fig.axes[0].lines) == 1


def test_tracked_norms_one_line_per_sample(one):
    fig = run_fig.tracked_norms(one.tracked)
    assert len(fig.axes[0].lines) == one.tracked["sample"].nunique() == 6
    ys = sorted(tuple(l.get_ydata()) for l in fig.axes[0].lines)
    expected = sorted(tuple(g.sort_values("step")["norm"]) for _, g in one.tracked.groupby("sample"))
    assert np.allclose(np.array(ys), np.array(expected))


def test_batch_mean_norm_shows_mu_for_sec_only(F, one):
    fig = run_fig.batch_mean_norm(one.steps)
    assert any("μ" in t for t in legend_texts(fig.axes[0]))
    fig = run_fig.batch_mean_norm(F.steps[F.steps["key"] == "triplet-none-0"])
    assert not any("μ" in t for t in legend_texts(fig.axes[0]))


def test_norm_variance_log_axis(one):
    fig = run_fig.norm_variance(one.steps)
    assert fig.axes[0].get_yscale() == "log"
    assert np.allclose(fig.axes[0].lines[0].get_ydata(), one.steps.sort_values("step")["norm_var"])


def test_grad_vs_norm_slopes_in_legend_match_polyfit(one):
    fig = run_fig.grad_vs_norm(one.grad_scatter)
    ax = fig.axes[0]
    steps = sorted(one.grad_scatter["step"].unique())
    assert len(ax.collections) == len(steps)                 # one scatter per step
    texts = legend_texts(ax)
    for st in steps:
        d = one.grad_scatter[one.grad_scatter["step"] == st]
        slope = np.polyfit(np.log(d["norm"]), np.log(d["grad_norm"]), 1)[0]   # independent fit
        assert any(t.startswith(f"step {st}: slope {slope:.2f}") for t in texts), texts
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"


def test_grad_slope_curve_and_violations(one):
    assert n_axes(run_fig.grad_slope_curve(one.steps)) == 1
    fig = run_fig.violations(one.steps)
    assert fig.axes[0].get_ylim()[0] == 0


def test_angle_spread_two_panels_skip_nan_steps(one):
    fig = run_fig.angle_spread(one.steps)
    assert n_axes(fig) == 2
    x = fig.axes[1].lines[0].get_xdata()
    assert list(x) == [5, 10, 15, 20, 25, 30]                  # only the steps that measured Δθ
    assert np.allclose(fig.axes[0].lines[0].get_ydata(), np.degrees(0.02))


def test_cosine_hist_means_in_legend(one):
    fig = run_fig.cosine_hist(one.cosines)
    texts = legend_texts(fig.axes[0])
    pos = one.cosines[one.cosines["kind"] == "pos"]["cos"].mean()
    assert any(f"mean {pos:.2f}, n=40" in t for t in texts)
    assert fig.axes[0].get_xlim() == (-1, 1)


def test_eval_curves_two_panels(one):
    fig = run_fig.eval_curves(one.evals)
    assert n_axes(fig) == 2
    assert len(fig.axes[0].lines) == 4 and len(fig.axes[1].lines) == 2


def test_run_dashboard_has_every_instrument_and_renders(one):
    fig = run_fig.run_dashboard(one, title="t")
    assert n_axes(fig) == 12
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=30)
    assert buf.tell() > 1000
    with pytest.raises(ValueError, match="lacks the table 'tracked'"):
        run_fig.run_dashboard(SimpleNamespace(steps=one.steps))


def test_empty_frames_of_a_failed_run_do_not_crash():
    empty = pd.DataFrame(columns=["key", "step", "sample", "norm", "grad_norm", "kind", "cos"])
    assert n_axes(run_fig.tracked_norms(empty)) == 1
    assert n_axes(run_fig.grad_vs_norm(empty)) == 1
    assert n_axes(run_fig.cosine_hist(empty)) == 1


def test_missing_columns_raise_valueerror(one):
    with pytest.raises(ValueError, match="norm_var"):
        run_fig.norm_variance(one.steps.drop(columns="norm_var"))
    with pytest.raises(ValueError, match="DataFrame"):
        run_fig.loss_parts({"step": [1]})


# ------------------------------------------------------------------------------------ across runs


def summary(F, metric="R@1"):
    rows = []
    for (loss, v), g in F.runs.groupby(["loss", "variant"], sort=False):
        x = g[metric].to_numpy()
        h = 4.302652729749464 * x.std(ddof=1) / np.sqrt(len(x))     # t_{0.975, 2}
        rows.append(dict(loss=loss, variant=v, metric=metric, mean=x.mean(), ci_lo=x.mean() - h, ci_hi=x.mean() + h, n=3))
    return pd.DataFrame(rows)


def test_metric_bars_one_bar_per_cell_with_variant_colours(F):
    t = summary(F)
    fig = results_fig.metric_bars(t, "R@1")
    ax = fig.axes[0]
    assert len(ax.patches) == len(LOSSES) * len(VARIANTS)
    heights = sorted(p.get_height() for p in ax.patches)
    assert np.allclose(heights, sorted(t["mean"]))
    colours = {matplotlib.colors.to_hex(p.get_facecolor()) for p in ax.patches}
    assert colours == {matplotlib.colors.to_hex(results_fig.VARIANT_COLORS[v]) for v in VARIANTS}
    assert ax.get_ylim()[0] == 0          # bars start at 0 (no truncated axis)
    with pytest.raises(ValueError, match="NMI"):
        results_fig.metric_bars(t, "NMI")


def test_gains_vs_paper_one_panel_per_dataset():
    rows = [dict(dataset=ds, loss=l, variant=v, metric="R@1", ours=1.0, ours_ci_lo=-1.0, ours_ci_hi=3.0, paper=2.0)
            for ds in ("CUB", "Cars") for l in LOSSES for v in ("sec", "l2reg")]
    fig = results_fig.gains_vs_paper(pd.DataFrame(rows))
    assert n_axes(fig) == 2
    for ax in fig.axes:
        assert len(ax.containers) == len(LOSSES) * 2          # one errorbar point per loss × comparison
    assert "CUB" in fig.axes[0].get_title() and "Cars" in fig.axes[1].get_title()


def test_norm_distributions_grid_and_cv(F):
    fig = results_fig.norm_distributions(F.test_norms, F.runs)
    assert n_axes(fig) == 2 * len(LOSSES)
    texts = legend_texts(fig.axes[len(LOSSES)])        # bottom-left panel: first loss, relative norms
    d = F.test_norms.merge(F.runs[["key", "loss", "variant"]], on="key")
    d = d[(d["loss"] == LOSSES[0]) & (d["variant"] == "sec")]
    cv = (d.groupby("key")["norm"].std() / d.groupby("key")["norm"].mean()).mean()
    assert f"sec: CV {cv:.2f}" in texts
    with pytest.raises(ValueError, match="no test norms"):
        results_fig.norm_distributions(F.test_norms.assign(key="other"), F.runs)


def test_norm_trajectories_panel_per_loss_line_per_variant(F):
    fig = results_fig.norm_trajectories(F.steps, F.runs, "norm_var")
    assert n_axes(fig) == len(LOSSES)
    assert all(len(ax.lines) == len(VARIANTS) for ax in fig.axes)
    # the plotted line is the mean over seeds (30 steps: rolling window 1)
    sec = F.steps.merge(F.runs[["key", "loss", "variant"]], on="key")
    sec = sec[(sec["loss"] == LOSSES[0]) & (sec["variant"] == "sec")].groupby("step")["norm_var"].mean()
    assert np.allclose(fig.axes[0].lines[2].get_ydata(), sec.to_numpy())


def test_variance_vs_gain_two_panels():
    vvg = pd.DataFrame([dict(source=s, loss=l, reduction=1.0 + i, log10_ratio=0.3 * i, gain=0.5 * i,
                             reduction_ci_lo=np.nan, reduction_ci_hi=np.nan, gain_ci_lo=np.nan, gain_ci_hi=np.nan)
                        for s in ("ours", "rebuttal") for i, l in enumerate(LOSSES)])
    fig = results_fig.variance_vs_gain(vvg)
    assert n_axes(fig) == 2
    assert [len(ax.texts) for ax in fig.axes] == [len(LOSSES), len(LOSSES)]     # one label per loss
    # x is the log10 variance ratio of the Q4 definition, not the raw reduction
    assert [t.xy[0] for t in fig.axes[0].texts] == pytest.approx([0.3 * i for i in range(len(LOSSES))])
    assert "log10" in fig.axes[0].get_xlabel()


def test_grad_slope_stats_panels(F):
    per = F.runs[["key", "loss", "variant", "seed"]].assign(slope_median=-0.9)
    assert n_axes(results_fig.grad_slope_stats(per)) == 1
    fig = results_fig.grad_slope_stats(per, F.steps, F.runs)
    assert n_axes(fig) == 2
    from matplotlib.collections import PathCollection
    dots = [c for c in fig.axes[0].collections if isinstance(c, PathCollection)]
    assert len(dots) == len(LOSSES) * len(VARIANTS)                         # one dot group per cell
    assert all(np.allclose(c.get_offsets()[:, 1], -0.9) for c in dots)


# ------------------------------------------------------------------------------------ data page


def test_glyph_grid_mosaic():
    rng = np.random.default_rng(0)
    imgs = rng.random((10, 1, 8, 8))
    labels = np.array([0] * 4 + [2] * 6)
    fig = data_fig.glyph_grid(imgs, labels, ["a", "b", "c"])
    ax = fig.axes[0]
    assert n_axes(fig) == 1 and len(ax.images) == 1
    mosaic = ax.images[0].get_array()
    gap = 1
    assert mosaic.shape == (2 * 8 + gap, 6 * 8 + gap * 5)
    assert np.allclose(mosaic[:8, :8], imgs[0, 0])                 # first class, first instance
    assert np.ma.is_masked(mosaic[0, 4 * 9])                        # class 0 has only 4 instances
    assert [t.get_text() for t in ax.get_yticklabels()] == ["a", "c"]
    with pytest.raises(ValueError, match="class_names"):
        data_fig.glyph_grid(imgs, labels, ["a"])
    with pytest.raises(ValueError, match="shape"):
        data_fig.glyph_grid(rng.random((10, 8)), labels, ["a", "b", "c"])


def test_eval_curves_with_final_clustering_only(one):
    ev = one.evals.copy()
    ev.loc[ev["step"] < ev["step"].max(), ["NMI", "F1"]] = np.nan
    fig = run_fig.eval_curves(ev)
    a1, a2 = fig.axes
    assert [len(l.get_xdata()) for l in a2.lines] == [1, 1]
    assert a2.get_xlim() == a1.get_xlim()
    assert "end only" in a2.get_title() and "NMI = 50.0" in legend_texts(a2)


def test_draw_line_smooths_long_series_without_shadowing():
    """A series longer than 50 points gets a faint raw line plus its rolling mean (the smoke profile's
    6-step runs never reach that branch; the cpu profile's 120 steps do)."""
    import matplotlib.pyplot as plt
    import numpy as np

    from sec_lib.figures.style import draw_line, smooth
    fig, ax = plt.subplots()
    y = np.sin(np.arange(120) / 5.0)
    line = draw_line(ax, np.arange(120), y, "loss")
    assert len(ax.lines) == 2 and line.get_label() == "loss"
    assert np.allclose(line.get_ydata(), smooth(__import__("pandas").Series(y)).to_numpy())
    plt.close(fig)


def test_grad_scatter_moves_a_run_whose_last_batch_has_no_gradient_to_its_latest_step_with_one(F):
    """Converged semihard runs end with no semihard triplet in the logged batch: every per-sample gradient is 0 at the
    last step. The panel plots those runs at their latest step that has a gradient and says so, instead of a log axis
    over no data (which matplotlib refuses when the figure is drawn)."""
    from sec_lib.figures import sweeps
    runs = F.runs[F.runs["loss"] == "triplet"]
    gs = F.grad_scatter[F.grad_scatter["key"].isin(runs["key"])].copy()
    last = gs["step"] == gs.groupby("key")["step"].transform("max")
    mid = N_STEPS // 2
    zero_none = last & gs["key"].str.contains("-none-")
    gs.loc[zero_none, "grad_norm"] = 0.0                       # every 'none' run: nothing at its last step
    gs.loc[gs["key"].str.contains("-l2reg-"), "grad_norm"] = 0.0   # 'l2reg': nothing at any step
    fig = sweeps.grad_scatter_figure(runs, gs, facet="variant")
    fig.savefig(io.BytesIO(), format="png")                     # draws (the log axes would raise on no data)
    titles = {ax.get_title().split("\n")[0]: ax for ax in fig.axes}
    none_ax = titles["variant = none"]
    n_none = runs["variant"].eq("none").sum()
    assert f"{n_none} of {n_none} runs shown at step {mid:,}: no nonzero gradient at their last step" in \
        none_ax.get_title().replace("\n", " ")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    FigureCanvasAgg(fig).draw()                                 # the wrapped note stays over its own panel
    r = fig.canvas.get_renderer()
    boxes = [ax.title.get_window_extent(r) for ax in fig.axes if ax.get_title()]
    assert all(a.x1 <= b.x0 or b.x1 <= a.x0 for a, b in zip(boxes, boxes[1:])), boxes
    pts = none_ax.collections[0].get_offsets()
    want = gs[gs["key"].str.contains("-none-") & (gs["step"] == mid)]
    assert len(pts) == len(want) and np.allclose(np.sort(pts[:, 0]), np.sort(want["norm"]))
    assert "no sample with a nonzero gradient" in titles["variant = l2reg:"].get_title()
    assert "\n" not in titles["variant = sec"].get_title()       # nothing moved: the plain title


def test_the_rate_selection_figure_draws_each_arm_and_marks_its_failed_rates():
    """One line per arm (the SGD panel used to join both arms' points into one line), an × per failed rate on the
    panel's floor, a circle on each arm's chosen rate."""
    from sec_lib.figures import sweeps
    t = pd.DataFrame({"optimizer": ["adam"] * 2 + ["sgd"] * 6, "arm": ["none"] * 5 + ["sec"] * 3,
                      "lr": [1e-3, 3e-3, 0.03, 0.1, 0.3, 0.03, 0.1, 0.3],
                      "R@1": [88.0, 88.5, 87.0, 89.0, 88.9, 88.2, 88.8, np.nan],
                      "status": ["done"] * 7 + ["3 of 3 failed"], "chosen": [False, True, False, True, False,
                                                                            False, True, False]})
    fig = sweeps.pilot_figure(t)
    adam, sgd = fig.axes[:2]
    lines = [ln for ln in sgd.get_lines() if len(ln.get_xdata())]
    assert sorted(len(ln.get_xdata()) for ln in lines) == [2, 3]            # the arms apart: none 3 rates, SEC 2
    xs = [c for c in sgd.collections if c.get_offsets().shape[0]]
    failed = [c for c in xs if list(c.get_offsets()[:, 0]) == [0.3] and c.get_offsets()[0, 1] == pytest.approx(87.0)]
    assert len(failed) == 1                                                # the failed rate, on the floor (87.0)
    assert sorted(tuple(c.get_offsets()[0]) for c in xs if c not in failed) == [(0.1, 88.8), (0.1, 89.0)]
    assert [ln.get_label() for ln in adam.get_lines()] == ["without SEC"]


def test_the_convergence_figure_spreads_a_dense_start_on_a_log_axis_and_keeps_short_curves_linear():
    from sec_lib.figures import sweeps
    def band(steps):
        return pd.DataFrame([dict(loss=loss, variant=v, step=t, mean=float(t) ** 0.3, min=0.0, max=1.0)
                             for loss in ("triplet", "ms") for v in ("none", "sec") for t in steps])
    long_ = sweeps.convergence_figure(band([0, 100, 200, 2000, 13500]))
    ax = long_.axes[0]
    assert ax.get_xscale() == "symlog" and ax.get_xlabel() == "iteration (log > 100)" and ax.get_xlim()[0] == 0
    short = sweeps.convergence_figure(band([0, 20, 40, 120]))
    assert short.axes[0].get_xscale() == "linear" and short.axes[0].get_xlabel() == "iteration"
