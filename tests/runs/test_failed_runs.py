"""A diverged run renders: its tables keep their columns (in memory and in the store), and the train
page's readings, tables and figures say "failed at step N: reason" instead of crashing."""
import json
import time

import matplotlib
import pandas as pd
import pytest

matplotlib.use("Agg")

from sec_lib.chapters import compare, norms, train as train_page  # noqa: E402
from sec_lib.figures import run as plots  # noqa: E402
from sec_lib.runs.store import ResultStore, results_to_frames, run_key  # noqa: E402
from sec_lib.runs.config import table_columns  # noqa: E402
from sec_lib.runs.train import Recorder, TrainConfig, failed, train  # noqa: E402

TABLES = ("steps", "tracked", "evals", "test_norms", "cosines", "grad_scatter")


def toy(**kw):
    base = dict(dataset="toy", model="mlp", width=16, embed_dim=8, iterations=30, batch_size=24, eval_every=10,
                track_every=4, track_samples=4, dtheta_every=4, loss="npair", data_kwargs={"noise": 0.1, "num_classes": 60})
    base.update(kw)
    return TrainConfig(**base)


DIVERGES = dict(optimizer="sgd", lr=100.0, eta=1e4, mu=100.0)      # SGD at lr 100 with a huge SEC weight


@pytest.fixture(scope="module")
def diverged():
    r = train(toy(**DIVERGES))
    assert r.status == "failed" and 1 < r.failed_step <= 30
    return r


def at_first_step():
    """A run that failed before recording any step (built by train's own failed())."""
    return failed(toy(), Recorder(), "non-finite loss at step 1: metric=nan, sec=0 (try a smaller learning rate "
                  "or eta)", time.perf_counter())


def page(result):
    """Everything the train page does with a run, from its frames."""
    frames = results_to_frames([result])
    readings = train_page.run_readings(result)
    text = [train_page.run_header(result, True, "smoke"), train_page.run_sentence(result), *readings.values()]
    for fig in (plots.loss_parts(frames.steps), plots.tracked_norms(frames.tracked),
                plots.batch_mean_norm(frames.steps), plots.norm_variance(frames.steps),
                plots.grad_vs_norm(frames.grad_scatter), plots.grad_slope_curve(frames.steps),
                plots.angle_spread(frames.steps), plots.violations(frames.steps), plots.cosine_hist(frames.cosines),
                plots.eval_curves(frames.evals)):
        assert fig.axes
    return text, train_page.final_metrics(result), train_page.config_table(result.config)


def test_every_table_of_a_failed_run_has_its_columns(diverged):
    for r in (diverged, at_first_step()):
        for t in TABLES:
            assert set(table_columns(t, r.config)) <= set(getattr(r, t).columns), t
    assert len(at_first_step().steps) == 0 and at_first_step().failed_step == 1


def test_the_train_page_renders_a_diverged_run(diverged):
    text, metrics, config = page(diverged)
    n = diverged.failed_step
    assert f"failed at step {n}: non-finite loss" in text[0] and f"failed at step {n}" in text[1]
    assert "try a smaller learning rate" in text[1]
    assert metrics.set_index("metric").loc["failed at step", "value"] == n
    assert len(config)


def test_the_train_page_renders_a_run_that_failed_at_its_first_step():
    text, metrics, _ = page(at_first_step())
    assert "failed at step 1" in text[1] and "failed at step 1" in text[2]


def test_a_stored_failed_run_loads_with_its_columns_and_its_step(tmp_path, diverged):
    store = ResultStore(tmp_path)
    store.save(diverged)
    back = store.get(diverged.config)
    assert back.status == "failed" and back.failed_step == diverged.failed_step
    assert back.failure == diverged.failure
    for t in TABLES:
        assert list(getattr(back, t).columns) == list(getattr(diverged, t).columns), t
    page(back)


def test_a_failed_run_stored_before_schemas_renders_too(tmp_path):
    """Records written before this change have column-less empty tables and no failed_step."""
    store = ResultStore(tmp_path)
    r = at_first_step()
    for t in ("steps", "evals", "cosines", "test_norms", "grad_scatter", "tracked"):
        setattr(r, t, pd.DataFrame())
    r.failed_step = None
    folder = store.save(r)
    meta = json.loads((folder / "result.json").read_text())
    assert meta["failed_step"] is None
    back = store.get(r.config)
    assert back.failed_step == 1 and "cos" in back.cosines.columns and "loss_metric" in back.steps.columns
    page(back)
    assert run_key(back.config) == folder.name


def test_the_compare_page_tables_count_a_failed_run_and_do_not_crash(diverged):
    done = [train(toy(seed=s, iterations=8, eval_every=4)) for s in (0, 1)]
    frames = results_to_frames(done + [diverged])
    table = compare.main_table(frames)
    assert table["n_failed"].sum() > 0 and table["n_runs"].max() >= 1
    assert "1 of them failed" in compare.setup_sentence(frames.runs)
    for fn in (norms.norm_summary, norms.grad_slopes_per_run, compare.sec_gain, norms.norm_reduction):
        fn(frames)
