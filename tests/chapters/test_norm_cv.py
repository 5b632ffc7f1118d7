"""Every norm variance the book shows has its scale-free counterpart, the coefficient of
variation CV = std / mean of the same norms, beside it. One helper computes it
(:func:`sec_lib.chapters.common.with_norm_cv`); these tests check it against numpy and check that the
chapters' tables and sentences that show a variance show the CV next to it, on hand-made frames."""
import numpy as np
import pandas as pd
import pytest

from sec_lib.chapters import common, compare, norms
from sec_lib.runs.store import Frames

RNG = np.random.default_rng(23)
#: variant -> (scale of the norms, relative spread): SEC shrinks the scale a lot, the relative spread less.
SHAPE = {"none": (14.6, 0.18), "l2reg": (0.6, 0.22), "sec": (0.41, 0.13)}


def _frames(losses=("triplet", "ms"), seeds=3, n_norms=40, train_mean=True):
    """Runs whose stored norm statistics are those of real (random) norms, as the training loop stores them:
    population variance (torch.var(unbiased=False)) and mean, of the train and of the test norms."""
    rows, tn = [], []
    for loss in losses:
        for v, (scale, cv) in SHAPE.items():
            for s in range(seeds):
                key = f"{loss}-{v}-{s}"
                test = scale * (1 + cv * RNG.standard_normal(n_norms))
                train = scale * (1 + cv * RNG.standard_normal(n_norms))
                r = dict(key=key, loss=loss, variant=v, seed=s, status="done", eta=0.1,
                         **{"R@1": 50 + RNG.normal(0, 1), "NMI": 40.0}, test_norm_var=test.var(),
                         test_norm_mean=test.mean(), train_norm_var=train.var(), train_norm_mean=train.mean())
                if not train_mean:
                    r.pop("train_norm_mean")
                rows.append(r)
                tn.append(pd.DataFrame({"key": key, "label": 0, "norm": test}))
    empty = {k: pd.DataFrame() for k in ("steps", "tracked", "evals", "cosines", "grad_scatter")}
    return Frames(runs=pd.DataFrame(rows), test_norms=pd.concat(tn, ignore_index=True), **empty)


def test_cv_from_var_is_numpy_std_over_mean():
    x = RNG.gamma(3.0, 2.0, size=500)
    assert common.cv_from_var(x.var(), x.mean()) == pytest.approx(np.std(x) / np.mean(x))
    v, m = pd.Series([4.0, 0.25]), pd.Series([10.0, 1.0])
    assert common.cv_from_var(v, m).tolist() == pytest.approx([0.2, 0.5])   # the variance alone ranks them the other way


def test_with_norm_cv_from_test_norms_and_runs_columns():
    F = _frames()
    out = common.with_norm_cv(F)
    by_key = F.test_norms.groupby("key")["norm"]
    want_test = {k: np.std(x.to_numpy()) / np.mean(x.to_numpy()) for k, x in by_key}
    assert out.set_index("key")["test_norm_cv"].to_dict() == pytest.approx(want_test)
    want_train = np.sqrt(F.runs["train_norm_var"]) / F.runs["train_norm_mean"]
    assert out["train_norm_cv"].to_numpy() == pytest.approx(want_train.to_numpy())
    # a runs frame alone: the test CV from test_norm_var and test_norm_mean, the same numbers
    alone = common.with_norm_cv(F.runs)
    assert alone["test_norm_cv"].to_numpy() == pytest.approx(out["test_norm_cv"].to_numpy())
    assert "test_norm_cv" not in F.runs.columns                                   # the input is not changed
    assert common.norm_cv_note(F) == ""


def test_missing_mean_degrades_with_a_note():
    F = _frames(train_mean=False)
    out = common.with_norm_cv(F.runs.drop(columns=["test_norm_mean"]))
    assert "train_norm_cv" not in out.columns and "test_norm_cv" not in out.columns
    note = common.norm_cv_note(F)
    assert "train_norm_var" in note and "train_norm_mean" in note and "test_norm_var" not in note
    assert common.beside_cv(["R@1", "test_norm_var", "train_norm_var"], common.with_norm_cv(F).columns) == [
        "R@1", "test_norm_var", "test_norm_cv", "train_norm_var"]


def test_var_cv_text():
    assert common.var_cv_text(14.6 ** 2 * 0.0324, 0.41 ** 2 * 0.0169, 0.18, 0.13) == "variance 6.91 → 0.00284 (CV 0.18 → 0.13)"
    assert common.var_cv_text(1.0, 0.5) == "variance 1 → 0.5 (CV n/a)"


def test_main_table_shows_each_cv_beside_its_variance():
    F = _frames()
    t = compare.main_table(F)
    cv = t[(t.loss == "ms") & (t.variant == "sec") & (t.metric == "train_norm_cv")].iloc[0]
    r = F.runs[(F.runs.loss == "ms") & (F.runs.variant == "sec")]
    assert cv["mean"] == pytest.approx(np.mean(np.sqrt(r.train_norm_var) / r.train_norm_mean))
    d = compare.main_table_display(t)
    cols = list(d.columns)
    for var, cv_col in common.NORM_CV.items():
        assert cols.index(cv_col) == cols.index(var) + 1
    (label, folded), = d.attrs["sec_folded_columns"].items()
    assert folded == ["test_norm_var", "test_norm_cv", "train_norm_var", "train_norm_cv"] and "CV" in label


def test_paired_gains_test_the_cv_with_the_variances():
    g = compare.sec_gain(_frames(seeds=4))
    norm_rows = g[g["metric"].isin(common.NORM_METRICS)]
    assert set(norm_rows["metric"]) == set(common.NORM_METRICS)
    fam = norm_rows[norm_rows["comparison"] == "SEC − none"]
    assert fam["family"].nunique() == 1 and int(fam["m"].iloc[0]) == len(fam) == 2 * 4   # losses x norm statistics
    sec_cv = fam[fam["metric"] == "train_norm_cv"]
    assert (sec_cv["estimate"] < 0).all()                                # SEC's CV is lower, by construction
    l2_cv = g[(g["comparison"] == "L2-reg − none") & (g["metric"] == "test_norm_cv")]
    l2_var = g[(g["comparison"] == "L2-reg − none") & (g["metric"] == "test_norm_var")]
    assert (l2_var["estimate"] < 0).all() and (l2_cv["estimate"] > 0).all()   # the variance falls with the scale only


def test_norms_page_tables_carry_train_cv():
    F = _frames()
    s = norms.norm_summary(F)
    assert {"test_norm_cv", "train_norm_cv"} <= set(s["metric"])
    red = norms.norm_reduction(F)
    assert {"test_norm_cv", "train_norm_cv"} <= set(red["metric"])
    vvg = norms.variance_vs_gain(F)
    ours = vvg[vvg.source == "ours"].set_index("loss")
    r = F.runs[(F.runs.loss == "triplet") & (F.runs.variant == "none")]
    assert ours.loc["triplet", "cv_none"] == pytest.approx(np.mean(np.sqrt(r.train_norm_var) / r.train_norm_mean))
    assert vvg[vvg.source == "rebuttal"]["cv_none"].isna().all()          # the rebuttal gives variances only
    assert list(vvg.columns[:6]) == ["source", "loss", "var_none", "var_sec", "cv_none", "cv_sec"]


def _eta_runs(losses=("semihard", "ms"), etas=(0.0, 0.1, 1.0), seeds=3, n_norms=60, train_mean=True):
    """An η sweep whose norms shrink with η (scale / (1 + 50 η)) while their CV falls only from 0.18 to 0.13."""
    rows = []
    for loss in losses:
        for e in etas:
            for s in range(seeds):
                scale, cv = 14.6 / (1 + 50 * e), 0.18 - 0.05 * (e > 0)
                x = scale * (1 + cv * RNG.standard_normal(n_norms))
                r = dict(key=f"{loss}-{e}-{s}", loss=loss, eta=e, seed=s, status="done",
                         **{"R@1": 50 + e + 0.1 * s}, train_norm_var=x.var(), train_norm_mean=x.mean(),
                         test_norm_var=x.var(), test_norm_mean=x.mean())
                if not train_mean:
                    r.pop("train_norm_mean")
                rows.append(r)
    return pd.DataFrame(rows)


def test_eta_page_shows_cv_beside_the_variance():
    from sec_lib.chapters import eta as eta_ch
    runs = _eta_runs()
    tbl = eta_ch.eta_table(runs)
    cols = list(tbl.columns)
    assert cols.index("train_norm_cv") == cols.index("train_norm_var") + 1
    assert cols.index("test_norm_cv") == cols.index("test_norm_var") + 1
    summary = eta_ch.eta_summary(runs)
    ends = eta_ch.norm_var_ends(summary)
    r = runs[(runs.loss == "ms") & (runs.eta == 1.0)]
    v0, v1, c0, c1 = ends["ms"]
    assert v1 == pytest.approx(r.train_norm_var.mean())
    assert c1 == pytest.approx(np.mean(np.sqrt(r.train_norm_var) / r.train_norm_mean))
    fam = eta_ch.eta_family(runs)
    text = eta_ch.page_reading(summary, fam["diffs"], eta_ch.eta_robustness(runs), fam["grid"])
    assert f"ms {common.var_cv_text(v0, v1, c0, c1)}" in text
    # without a mean norm the page says so instead of a CV
    bare = _eta_runs(train_mean=False).drop(columns=["test_norm_mean"])
    s2 = eta_ch.eta_summary(bare)
    assert set(s2["metric"]) == {"R@1", "train_norm_var", "test_norm_var"}
    fam2 = eta_ch.eta_family(bare)
    assert "store no mean norm" in eta_ch.page_reading(s2, fam2["diffs"], {}, fam2["grid"])


def _head_runs(col="head", groups=("paper", "bn_before_norm", "weightnorm", "nobn"), seeds=3):
    """Semihard runs per head (or μ setting) × variant with stored norm statistics of random norms; with BN
    right before the normalization the norms are 3× smaller at the same relative spread."""
    rows = []
    for g in groups:
        for v in ("none", "sec"):
            scale, cv = SHAPE[v]
            scale = scale / 3 if g == "bn_before_norm" else scale
            for s in range(seeds):
                x = scale * (1 + cv * RNG.standard_normal(80))
                rows.append({"key": f"{g}-{v}-{s}", col: g, "variant": v, "loss": "semihard", "seed": s,
                             "status": "done", "R@1": 60.0 + s, "NMI": 50.0, "F1": 20.0,
                             "train_norm_var": x.var(), "train_norm_mean": x.mean()})
    return pd.DataFrame(rows)


def test_bnwn_table_and_reading_show_cv_beside_the_variance():
    from sec_lib.chapters import bnwn
    runs = _head_runs()
    t = bnwn.bnwn_table(runs)
    cols = list(t.columns)
    assert cols.index("norm CV (train)") == cols.index("norm var (train)") + 1
    text = bnwn.page_reading(runs)
    r = common.with_norm_cv(runs).groupby(["head", "variant"])[["train_norm_var", "train_norm_cv"]].mean()
    pa, bn = r.loc[("paper", "none")], r.loc[("bn_before_norm", "none")]
    assert common.var_cv_text(pa.train_norm_var, bn.train_norm_var, pa.train_norm_cv, bn.train_norm_cv) in text
    assert "its CV (std / mean, scale-free) is" in text


def test_mu_tables_show_cv_beside_the_variance():
    from sec_lib.chapters import mu as mu_ch
    runs = _head_runs("setting", ("none", "batch mean", "zero η=0.005")).drop(columns="variant")
    t = mu_ch.mu_table(runs)
    cols = list(t.columns)
    assert cols.index("train_norm_cv") == cols.index("train_norm_var") + 1
    reb = mu_ch.mu_rebuttal_table(runs)
    cols = list(reb.columns)
    assert cols.index("norm CV (train)") == cols.index("norm var (train)") + 1


@pytest.mark.parametrize("page", ["ssl", "npair", "face"])
def test_review_page_tables_show_cv_beside_the_test_variance(page):
    import importlib
    mod = importlib.import_module(f"sec_lib.chapters.{page}")
    rows = []
    for loss in mod.LOSSES:
        for v in ("none", "sec"):
            scale, cv = SHAPE[v]
            for s in range(3):
                x = scale * (1 + cv * RNG.standard_normal(50))
                rows.append({"key": f"{loss}-{v}-{s}", "loss": loss, "variant": v, "seed": s, "status": "done",
                             "eta": 0.1, "R@1": 50.0 + s, "NMI": 40.0, "F1": 20.0, "probe_top1": 30.0,
                             "test_norm_var": x.var(), "test_norm_mean": x.mean()})
    runs = pd.DataFrame(rows)
    t = mod.table(runs)
    cols = list(t.columns)
    assert "test_norm_var" in mod.METRICS and cols.index("test_norm_cv") == cols.index("test_norm_var") + 1
    one = runs[(runs.loss == mod.LOSSES[0]) & (runs.variant == "sec")]
    want = np.mean(np.sqrt(one.test_norm_var) / one.test_norm_mean)
    cell = t[(t.loss == mod.LOSSES[0]) & (t.variant == "sec")]["test_norm_cv"].iloc[0]
    assert cell.startswith(f"{want:.2f}")


def test_normlayer_and_optim_tables_show_cv_beside_the_variances():
    from sec_lib.chapters import normlayer, optim
    runs = _head_runs(groups=("paper", "normalize")).assign(
        test_norm_var=lambda d: d["train_norm_var"] * 1.1, test_norm_mean=lambda d: d["train_norm_mean"])
    steps = pd.DataFrame([dict(key=k, step=i, grad_slope=-1.0) for k in runs["key"] for i in range(1, 4)])
    t = normlayer.normlayer_table(runs, steps)
    cols = list(t.columns)
    for var, cv in common.NORM_CV.items():
        assert cols.index(cv) == cols.index(var) + 1
    o = optim.optim_table(runs.assign(optimizer="adam", lr=1e-3))
    cols = list(o.columns)
    assert cols.index("train_norm_cv") == cols.index("train_norm_var") + 1


def test_run_index_shows_train_cv(monkeypatch):
    from types import SimpleNamespace
    from sec_lib.chapters import runs as runs_ch
    F = _frames()
    monkeypatch.setattr(runs_ch, "load", lambda *a, **k: SimpleNamespace(runs=F.runs))
    idx = runs_ch.run_index("smoke")
    cols = list(idx.columns)
    assert cols.index("train_norm_cv") == cols.index("train_norm_var") + 1
    row = idx.iloc[0]
    assert row["train_norm_cv"] == pytest.approx(np.sqrt(row["train_norm_var"]) / F.runs.set_index("key").loc[
        F.runs["key"][F.runs["key"].str[:12] == row["key"]].iloc[0], "train_norm_mean"])


def _run_result(n=40):
    """One finished run whose batch norms shrink 36× while their CV falls from 0.18 to 0.13; returns
    (result, per-step CVs, the train norms behind train_norm_var / train_norm_mean)."""
    from sec_lib.runs.train import RunResult, TrainConfig
    mean = np.geomspace(14.6, 0.41, n)                     # the norms shrink ...
    cvs = np.linspace(0.18, 0.13, n)                       # ... their relative spread falls far less
    st = pd.DataFrame({"step": np.arange(1, n + 1), "loss_metric": 1.0, "loss_sec": 0.1, "norm_mean": mean,
                       "norm_var": (cvs * mean) ** 2, "mu": mean, "violations": 0.1, "grad_slope": -1.0,
                       "dtheta_mean": np.nan, "dtheta_std": np.nan, "dtheta_cv": np.nan})
    x = RNG.gamma(20.0, 0.02, size=300)
    res = RunResult(TrainConfig(loss="semihard", eta=1.0, iterations=n), "done",
                    {"R@1": 42.5, "test_norm_var": 0.25, "test_norm_mean": 2.0, "train_norm_var": x.var(),
                     "train_norm_mean": x.mean()}, st, pd.DataFrame(columns=["step", "sample", "norm"]),
                    pd.DataFrame({"step": [n], "R@1": [42.5]}), pd.DataFrame(columns=["label", "norm"]),
                    pd.DataFrame(columns=["kind", "cos"]), pd.DataFrame(columns=["step", "norm", "grad_norm"]),
                    wall_s=1.0)
    return res, cvs, x


def test_train_page_shows_batch_and_final_cv_beside_the_variance():
    from sec_lib.chapters import train as train_page
    from sec_lib.figures import run as run_fig
    res, cvs, x = _run_result()
    st, n = res.steps, len(res.steps)
    fm = train_page.final_metrics(res)
    names = list(fm["metric"])
    assert names.index("test_norm_cv") == names.index("test_norm_var") + 1
    assert names.index("train_norm_cv") == names.index("train_norm_var") + 1
    v = fm.set_index("metric")["value"]
    assert v["test_norm_cv"] == pytest.approx(0.25)                         # sqrt(0.25) / 2
    assert v["train_norm_cv"] == pytest.approx(np.std(x) / np.mean(x))
    k = n // 10
    reading = train_page.run_readings(res)["norm_var"]
    assert f"went from {cvs[:k].mean():.3g} to {cvs[-k:].mean():.3g}" in reading and "CV (std / mean)" in reading
    # the opening summary: the same window (the first and last tenth of the steps), the CV beside the variance
    assert common.var_cv_text(st.norm_var.iloc[:k].mean(), st.norm_var.iloc[-k:].mean(), cvs[:k].mean(),
                              cvs[-k:].mean()) in train_page.run_sentence(res)
    # the figure: the batch CV on a right-hand axis beside the variance
    steps = common.with_batch_cv(st)
    assert steps["norm_cv"].to_numpy() == pytest.approx(cvs)
    fig = run_fig.norm_variance(steps)
    left, right = fig.axes[:2]
    assert np.allclose(left.lines[0].get_ydata(), st["norm_var"]) and "CV" in right.get_ylabel()
    assert len(run_fig.norm_variance(st).axes) == 1                        # no norm_cv column: the variance alone


def _explore_grid():
    """A toy grid (semihard; μ batch / zero; η 0, 0.1, 1) of hand-made runs whose norms shrink with η."""
    from sec_lib.chapters import explore as X
    from sec_lib.runs.store import run_key
    from sec_lib.runs.train import TrainConfig
    from sec_lib.runs import experiments as ex
    toy = dict(ex.PROFILES["smoke"].toy, iterations=6, eval_every=0)
    cfgs = [TrainConfig(**dict(toy, loss=loss, eta=e, mu=mu if e else "batch"))
            for loss in ("semihard",) for mu in ("batch", "zero") for e in (0.0, 0.1, 1.0)]
    rows, steps = [], []
    for c in {run_key(c): c for c in cfgs}.values():
        scale = 14.6 / (1 + 20 * c.eta)
        cv = 0.18 - 0.05 * (c.eta > 0)
        x = scale * (1 + cv * RNG.standard_normal(100))
        rows.append({"key": run_key(c), "loss": c.loss, "eta": c.eta, "mu": c.mu, "seed": 0, "status": "done",
                     "R@1": 50 + c.eta, "NMI": 40.0, "train_norm_var": x.var(), "train_norm_mean": x.mean(),
                     "test_norm_var": x.var(), "test_norm_mean": x.mean()})
        steps += [{"key": run_key(c), "step": i, "norm_mean": scale, "norm_var": (cv * scale) ** 2} for i in range(1, 11)]
    empty = {k: pd.DataFrame() for k in ("tracked", "evals", "test_norms", "cosines", "grad_scatter")}
    return X.build_grid(cfgs, Frames(runs=pd.DataFrame(rows), steps=pd.DataFrame(steps), **empty), "tiny"), rows


def test_explore_grid_shows_cv_beside_the_variance():
    from sec_lib.chapters import explore as X
    grid, rows = _explore_grid()
    s = X.summary_table(grid)
    cols = list(s.columns)
    for var in ("train_norm_var", "test_norm_var", "batch_norm_var"):
        assert cols.index(var.replace("_var", "_cv")) == cols.index(var) + 1
    r = s[(s["mu"] == "zero") & (s["eta"] == 1.0)].iloc[0]
    assert r["batch_norm_cv"] == pytest.approx(0.13)
    assert r["train_norm_cv"] == pytest.approx(np.sqrt(r["train_norm_var"]) / rows[-1]["train_norm_mean"])
    text = X.reading(grid, s)
    base = s[s["eta"] == 0].iloc[0]
    assert common.var_cv_text(base["train_norm_var"], r["train_norm_var"], base["train_norm_cv"], r["train_norm_cv"]) in text
    assert "its CV (std / mean, scale-free) in" in text
    fig = X.overview_figure(grid, s)
    assert any("CV" in a.get_title() for a in fig.axes)
    cell = X.cell_figure(grid, 1.0, "zero", "semihard", s)
    assert any("CV" in a.get_ylabel() for a in cell.axes)                # the batch CV and the final CV, right axes


def test_theory_toy_reports_cv_beside_the_variance():
    from sec_lib.chapters import theory as T
    from sec_lib.figures import theory as theory_fig
    small = dict(n_classes=3, dim=6, seed=1)
    facts = T.gradient_facts("triplet", scales=(0.5, 1.0, 2.0), **small)
    growth = T.sgd_norm_growth("triplet", steps=5, lr=0.5, **small)
    angles = T.angle_change("triplet", lr=0.5, scales=(0.5, 1.0, 2.0), **small)
    toys = T.toy_2d(steps=5, lr=0.5)
    s = T.summary(facts, growth, angles, toys)
    for key, t in toys.items():
        n = t.norms()[-1]
        assert s[f"toy_norm_cv_end_{key}"] == pytest.approx(np.std(n) / np.mean(n))
    line = next(text for _, text in T.verdict_lines(s) if text.startswith("2-D toy"))
    assert f"CV (std / mean, scale-free) {s['toy_norm_cv_end_none']:.3g} without" in line
    fig = theory_fig.plot_norm_growth(growth)
    assert all("var(‖f‖)" in a.get_title() and "CV" in a.get_title() for a in fig.axes if a.get_title())
    fig = theory_fig.plot_toy(toys)
    assert any("CV" in a.get_ylabel() for a in fig.axes)


def test_batch_cv_trajectory_figure():
    from sec_lib.figures import results
    F = _frames(losses=("ms",), seeds=2)
    steps = pd.DataFrame([{"key": k, "step": i, "norm_mean": 2.0 / i, "norm_var": (0.2 * 2.0 / i) ** 2}
                          for k in F.runs["key"] for i in range(1, 6)])
    fig = results.norm_trajectories(common.with_batch_cv(steps), F.runs, "norm_cv", log=False)
    assert "CV" in fig.axes[0].get_ylabel()
    assert np.allclose(fig.axes[0].lines[0].get_ydata(), 0.2)           # the same relative spread at every scale


def test_eta_slider_panel_draws_the_batch_cv_beside_the_variance():
    from sec_lib.chapters import eta as eta_ch
    from sec_lib.figures import sweeps
    runs = _eta_runs(losses=("ms",), etas=(0.0, 1.0), seeds=2)
    steps = pd.DataFrame([{"key": k, "step": i, "norm_mean": 3.0, "norm_var": 0.09 * (1 + e)}
                          for k, e in zip(runs["key"], runs["eta"]) for i in range(1, 6)])
    fig = sweeps.eta_panel(eta_ch.eta_summary(runs), common.with_batch_cv(steps), runs, 1.0)
    right = [a for a in fig.axes if "CV" in a.get_ylabel()]
    assert len(right) == 1 and np.allclose(right[0].lines[0].get_ydata(), np.sqrt(0.18) / 3.0)
    assert eta_ch.eta_explorer(eta_ch.eta_summary(runs), runs, steps) is not None


# ------------------------------------------------------------------ the repository check: every page, every place
#
# Which functions must show a CV: every function a notebook calls on a chapter or figure module whose source reads
# a norm variance (the column, a Var(‖f‖) label, or a module constant listing a norm variance, such as
# ssl.METRICS). Each must have a case below that calls it on hand-made frames as its page does; the case's output
# (a table, a tidy table or CSV frame, sentences, figures) is then checked: no norm variance without its CV.

import ast
import importlib
import inspect
import json
import pathlib
import re

from matplotlib.figure import Figure

NOTEBOOKS = pathlib.Path(__file__).resolve().parents[2] / "notebooks"
_VAR_NAMES = ("train_norm_var", "test_norm_var", "norm_var")


def _reads_a_variance(fn) -> bool:
    """Whether ``fn``'s source reads a norm variance: the name itself, a Var(‖f‖) label, or a constant of its
    module whose value lists a norm variance."""
    try:
        src = inspect.getsource(fn)
    except (OSError, TypeError):
        return False
    if re.search(r"norm_var|[vV]ar\(‖", src):
        return True
    mod = inspect.getmodule(fn)
    consts = {k for k, v in vars(mod).items() if k.isupper() and isinstance(v, (tuple, list, frozenset, set))
              and any(isinstance(x, str) and x in _VAR_NAMES for x in v)}      # metric lists, not label maps
    return any(re.search(rf"\b{re.escape(c)}\b", src) for c in consts)


def notebook_functions() -> dict:
    """{'module.function': {notebooks}} for every sec_lib function the notebooks call through a module alias."""
    calls = {}
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        nb, aliases = json.loads(path.read_text()), {}
        for cell in nb["cells"]:
            if cell["cell_type"] != "code":
                continue
            src = "\n".join(l for l in "".join(cell["source"]).splitlines() if not l.lstrip().startswith(("%", "!")))
            tree = ast.parse(src)
            for n in ast.walk(tree):
                if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("sec_lib"):
                    aliases.update({a.asname or a.name: f"{n.module}.{a.name}" for a in n.names})
                elif isinstance(n, ast.Import):
                    aliases.update({a.asname or a.name: a.name for a in n.names if a.name.startswith("sec_lib")})
            for n in ast.walk(tree):
                if (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name)
                        and n.func.value.id in aliases):
                    calls.setdefault(f"{aliases[n.func.value.id]}.{n.func.attr}", set()).add(path.name)
    return calls


def variance_functions() -> dict:
    out = {}
    for name, pages in notebook_functions().items():
        mod, attr = name.rsplit(".", 1)
        try:
            fn = getattr(importlib.import_module(mod), attr)
        except (ImportError, AttributeError):
            continue
        if callable(fn) and _reads_a_variance(fn):
            out[name] = pages
    return out


_VAR_TEXT = re.compile(r"variance|[vV]ar\(‖|norm_var|norm var", re.I)
_CV_TEXT = re.compile(r"\bCV\b|_cv\b|norm CV")


def _cv_name(name: str) -> str:
    return name.replace("norm_var", "norm_cv").replace("norm var", "norm CV").replace("var_", "cv_")


def problems(out) -> list[str]:
    """Where ``out`` shows a norm variance without its CV beside it (empty: none)."""
    if isinstance(out, pd.DataFrame):
        bad = []
        if "metric" in out.columns:                           # a tidy table (and its CSV download)
            metrics = set(out["metric"].astype(str))
            bad += [f"metric {m} without {_cv_name(m)}" for m in sorted(metrics)
                    if re.search(r"norm_var", m) and _cv_name(m) not in metrics]
        cols = [str(c) for c in out.columns]
        bad += [f"column {c!r} without {_cv_name(c)!r}" for c in cols
                if (re.search(r"norm_var|norm var", c) or c.startswith("var_")) and not c.startswith("rebuttal")
                and _cv_name(c) not in cols]                 # the rebuttal gives variances only
        return bad
    if isinstance(out, Figure) or (isinstance(out, list) and out and all(isinstance(o, Figure) for o in out)):
        figs = out if isinstance(out, list) else [out]      # one display unit: a page's figures shown together
        texts = [t for f in figs for a in f.axes for t in (a.get_title(), a.get_ylabel(), a.get_xlabel(),
                 *(x.get_text() for x in (a.get_legend().get_texts() if a.get_legend() else ())))]
        texts += [f._suptitle.get_text() for f in figs if f._suptitle is not None]
        shows_var = any(_VAR_TEXT.search(t) for t in texts)
        return ["a figure shows a norm variance and no CV"] if shows_var and not any(_CV_TEXT.search(t) for t in texts) else []
    if isinstance(out, dict):
        return [p for v in out.values() for p in problems(v)]
    if isinstance(out, (list, tuple)):
        return [p for v in out for p in problems(v[1] if isinstance(v, tuple) else v)]
    if isinstance(out, str):                                  # sentences: a line with a variance's number has a CV
        return [f"sentence without a CV: {line[:160]!r}" for line in out.splitlines()
                if _VAR_TEXT.search(line) and re.search(r"\d", line) and not _CV_TEXT.search(line)]
    return []


def _eta_case(monkeypatch):
    from sec_lib.chapters import eta as eta_ch
    runs = _eta_runs()
    summary = eta_ch.eta_summary(runs)
    fam = eta_ch.eta_family(runs)
    steps = pd.DataFrame([{"key": k, "step": i, "norm_mean": 3.0 / (1 + e), "norm_var": (0.2 * 3.0 / (1 + e)) ** 2}
                          for k, e in zip(runs["key"], runs["eta"]) for i in range(1, 6)])
    monkeypatch.setattr(eta_ch.widgets, "slider_stack", lambda figs, *a, **k: figs)
    return dict(summary=summary, table=eta_ch.eta_table(runs),
                reading=eta_ch.page_reading(summary, fam["diffs"], eta_ch.eta_robustness(runs), fam["grid"]),
                explorer=eta_ch.eta_explorer(summary, runs, steps), figure=__import__(
                    "sec_lib.figures.sweeps", fromlist=["x"]).eta_figure(summary))


def _norms_case(monkeypatch):
    from types import SimpleNamespace
    from sec_lib.chapters import norms as N
    F = _frames(losses=("triplet", "semihard", "npair", "ms"))
    steps = pd.DataFrame([{"key": k, "step": i, "norm_mean": 2.0 / i, "norm_var": (0.2 * 2.0 / i) ** 2,
                           "grad_slope": -1.0, "grad_r2": 0.5} for k in F.runs["key"] for i in range(1, 6)])
    F = SimpleNamespace(runs=F.runs, test_norms=F.test_norms, steps=steps)
    red = N.norm_reduction(F)
    corr = N.q4_table(F.runs)
    per_run = N.grad_slopes_per_run(F)
    monkeypatch.setattr(N.widgets, "linked_explorer", lambda grid, *a, **k: list(grid.values()))
    from sec_lib.figures import results
    return dict(summary=N.norm_summary(F), shown=compare.main_table_display(N.norm_summary(F), digits=3),
                reduction=red, sentences=N.norm_sentences(red, "test_norm_cv", "sec"), q4=corr,
                vvg=N.variance_vs_gain(F), verdict=N.norms_verdict(red, corr, per_run),
                explorer=N.norms_explorer(F),
                trajectories=[results.norm_trajectories(steps, F.runs, "norm_var"),
                              results.norm_trajectories(common.with_batch_cv(steps), F.runs, "norm_cv", log=False)])


def _train_case(monkeypatch):
    from sec_lib.chapters import train as train_page
    from sec_lib.figures import run as run_fig
    res, _, _ = _run_result()
    return dict(metrics=train_page.final_metrics(res), readings=train_page.run_readings(res),
                sentence=train_page.run_sentence(res), mean=run_fig.batch_mean_norm(res.steps),
                variance=run_fig.norm_variance(common.with_batch_cv(res.steps)))


def _explore_case(monkeypatch):
    from sec_lib.chapters import explore as X
    grid, _ = _explore_grid()
    s = X.summary_table(grid)
    return dict(summary=s, reading=X.reading(grid, s), overview=X.overview_figure(grid, s),
                cell=X.cell_figure(grid, 1.0, "zero", "semihard", s))


def _theory_case(monkeypatch):
    from sec_lib.chapters import theory as T
    from sec_lib.figures import theory as theory_fig
    small = dict(n_classes=3, dim=6, seed=1)
    growth = T.sgd_norm_growth("triplet", steps=5, lr=0.5, **small)
    toys = T.toy_2d(steps=5, lr=0.5)
    s = T.summary(T.gradient_facts("triplet", scales=(0.5, 1.0, 2.0), **small), growth,
                  T.angle_change("triplet", lr=0.5, scales=(0.5, 1.0, 2.0), **small), toys)
    lin = T.linear_scale_runs("triplet", steps=8, lr=0.01, eta=1.0, seed=0)
    return dict(verdict=T.verdict_lines(s), growth=theory_fig.plot_norm_growth(growth), toy=theory_fig.plot_toy(toys),
                linear=T.plot_linear_scale(lin))


def _tables_case(monkeypatch):
    from types import SimpleNamespace
    from sec_lib.chapters import bnwn, mu as mu_ch, normlayer, optim, runs as runs_ch, face, npair, ssl
    heads = _head_runs()
    mu_runs = _head_runs("setting", ("none", "batch mean", "zero η=0.005")).drop(columns="variant")
    nl = _head_runs(groups=("paper", "normalize")).assign(test_norm_var=lambda d: d["train_norm_var"],
                                                          test_norm_mean=lambda d: d["train_norm_mean"])
    nl_steps = pd.DataFrame([dict(key=k, step=i, grad_slope=-1.0) for k in nl["key"] for i in range(1, 3)])
    F = _frames()
    monkeypatch.setattr(runs_ch, "load", lambda *a, **k: SimpleNamespace(runs=F.runs))
    out = dict(bnwn=bnwn.bnwn_table(heads), bnwn_reading=bnwn.page_reading(heads), mu=mu_ch.mu_table(mu_runs),
               mu_rebuttal=mu_ch.mu_rebuttal_table(mu_runs), normlayer=normlayer.normlayer_table(nl, nl_steps),
               optim=optim.optim_table(nl.assign(optimizer="adam", lr=1e-3)), index=runs_ch.run_index("smoke"),
               main=compare.main_table(F), main_shown=compare.main_table_display(compare.main_table(F)),
               gains=compare.sec_gain(F), beyond=compare.beyond_gains(F))
    for mod in (face, npair, ssl):
        rows = [{"key": f"{l}-{v}-{s}", "loss": l, "variant": v, "seed": s, "status": "done", "eta": 0.1,
                 "R@1": 50.0, "NMI": 40.0, "F1": 20.0, "probe_top1": 30.0, "test_norm_var": 0.04 * (1 + s),
                 "test_norm_mean": 1.0 + s} for l in mod.LOSSES for v in ("none", "sec") for s in range(2)]
        out[mod.__name__] = mod.table(pd.DataFrame(rows))
    return out


def _scale_case(monkeypatch):
    from sec_lib.chapters import scale
    from test_scale import arm_frames
    runs, _ = arm_frames()
    reb = scale.rebuttal_cv_table(runs)
    return dict(arms=scale.arm_table(runs), rebuttal=reb, rebuttal_sentence=scale.rebuttal_sentence(reb))


def _pretrained_case(monkeypatch):
    from sec_lib.chapters import pretrained as pt
    from test_pretrained import regime_frames
    runs, steps = regime_frames()
    start = pt.start_norms(pt.regime_runs(runs), steps)
    return dict(start_norms=start[["regime", "start_norm_var", "start_norm_cv"]], table=pt.start_table(start),
                sentence=pt.start_sentence(start))


#: Each function the notebooks call that reads a norm variance -> the case whose output shows it as its page does.
COVERED = {
    "sec_lib.chapters.bnwn.bnwn_table": _tables_case, "sec_lib.chapters.bnwn.page_reading": _tables_case,
    "sec_lib.chapters.compare.main_table": _tables_case, "sec_lib.chapters.compare.main_table_display": _tables_case,
    "sec_lib.chapters.compare.sec_gain": _tables_case, "sec_lib.chapters.mu.mu_table": _tables_case,
    "sec_lib.chapters.compare.beyond_gains": _tables_case,
    "sec_lib.chapters.mu.mu_rebuttal_table": _tables_case, "sec_lib.chapters.normlayer.normlayer_table": _tables_case,
    "sec_lib.chapters.optim.optim_table": _tables_case, "sec_lib.chapters.runs.run_index": _tables_case,
    "sec_lib.chapters.face.table": _tables_case, "sec_lib.chapters.npair.table": _tables_case,
    "sec_lib.chapters.ssl.table": _tables_case,
    "sec_lib.chapters.eta.eta_summary": _eta_case, "sec_lib.chapters.eta.eta_table": _eta_case,
    "sec_lib.chapters.eta.page_reading": _eta_case, "sec_lib.chapters.eta.eta_explorer": _eta_case,
    "sec_lib.figures.sweeps.eta_figure": _eta_case,
    "sec_lib.chapters.norms.norm_summary": _norms_case, "sec_lib.chapters.norms.norm_reduction": _norms_case,
    "sec_lib.chapters.norms.norm_sentences": _norms_case, "sec_lib.chapters.norms.norms_explorer": _norms_case,
    "sec_lib.chapters.norms.norms_verdict": _norms_case, "sec_lib.chapters.norms.q4_table": _norms_case,
    "sec_lib.chapters.norms.variance_vs_gain": _norms_case,
    "sec_lib.figures.results.norm_trajectories": _norms_case,
    "sec_lib.chapters.train.final_metrics": _train_case, "sec_lib.chapters.train.run_readings": _train_case,
    "sec_lib.chapters.train.run_sentence": _train_case, "sec_lib.figures.run.batch_mean_norm": _train_case,
    "sec_lib.figures.run.norm_variance": _train_case,
    "sec_lib.chapters.explore.reading": _explore_case, "sec_lib.chapters.explore.summary_table": _explore_case,
    "sec_lib.chapters.theory.verdict_lines": _theory_case, "sec_lib.figures.theory.plot_toy": _theory_case,
    "sec_lib.figures.theory.plot_norm_growth": _theory_case, "sec_lib.chapters.theory.plot_linear_scale": _theory_case,
    "sec_lib.chapters.scale.arm_table": _scale_case, "sec_lib.chapters.scale.rebuttal_cv_table": _scale_case,
    "sec_lib.chapters.scale.rebuttal_sentence": _scale_case,
    "sec_lib.chapters.pretrained.start_norms": _pretrained_case, "sec_lib.chapters.pretrained.start_table":
        _pretrained_case, "sec_lib.chapters.pretrained.start_sentence": _pretrained_case,
}
#: Functions that read a norm variance but show none themselves, or only numbers no CV can be given for, and why.
NOT_SHOWN = {
    "sec_lib.reference.rebuttal_variance_note": "the rebuttal's own two variances, given without their means (no CV "
                                                 "can be computed); the tables it captions give ours with their CV",
    "sec_lib.chapters.common.norm_cv_note": "the note that says which CV is missing",
    "sec_lib.chapters.common.with_batch_cv": "adds the batch CV; the figures it feeds are covered",
    "sec_lib.chapters.theory.summary": "the numbers verdict_lines states; its lines are covered",
}


def test_every_function_a_page_calls_on_a_norm_variance_is_checked():
    found = variance_functions()
    assert {"sec_lib.chapters.ssl.table", "sec_lib.chapters.compare.main_table_display",
            "sec_lib.figures.run.norm_variance"} <= set(found)        # the scan sees constants, columns and labels
    unchecked = {f: sorted(p) for f, p in found.items() if f not in COVERED and f not in NOT_SHOWN}
    assert not unchecked, f"add a case for these (their pages show a norm variance): {unchecked}"


@pytest.mark.parametrize("case", sorted({c.__name__ for c in COVERED.values()}))
def test_no_page_shows_a_norm_variance_without_its_cv(case, monkeypatch):
    out = globals()[case](monkeypatch)
    bad = {k: problems(v) for k, v in out.items()}
    assert not {k: v for k, v in bad.items() if v}


def test_the_check_fails_a_variance_alone():
    runs = _frames().runs
    assert problems(runs[["loss", "train_norm_var"]]) and not problems(common.with_norm_cv(runs)[
        ["loss", "train_norm_var", "train_norm_cv"]])
    assert problems("The variance went from 4.1 to 0.002.") and not problems(common.var_cv_text(4.1, 0.002, 0.18, 0.13))
    assert problems(pd.DataFrame({"metric": ["test_norm_var"], "mean": [1.0]}))
    from sec_lib.figures import run as run_fig
    res, _, _ = _run_result()
    assert problems(run_fig.norm_variance(res.steps)) and not problems(run_fig.norm_variance(common.with_batch_cv(res.steps)))
