"""The tiers page: stage completeness and the pre-registered choices, from hand-made stored runs."""
import pandas as pd
import pytest

from sec_lib.runs import experiments as ex
from sec_lib.chapters import tiers
from sec_lib.runs.store import ResultStore
from sec_lib.runs.train import RunResult

E = pd.DataFrame()


def save(store, cfg, r1, curve=None):
    evals = pd.DataFrame({"step": [s for s, _ in curve], "R@1": [v for _, v in curve]}) if curve else E
    store.save(RunResult(cfg, "done", {"R@1": r1}, E, E, evals, E, E, E))


@pytest.fixture
def store(tmp_path, no_fsync):            # made-up records: no fsync (tests/conftest.py)
    return ResultStore(tmp_path)


def test_choices_are_pending_until_their_runs_exist_then_computed(store):
    p = ex.get_profile("smoke")
    pre = tiers.preregistration(p, store).set_index("choice")
    assert pre.loc["learning rate, adam", "value"] == "pending"
    for i, c in enumerate(ex.lr_pilot(p)):
        save(store, c, 50.0 + i)
    pre = tiers.preregistration(p, store).set_index("choice")
    assert pre.loc["learning rate, adam", "value"] == f"{p.lr_pilot['adam'][0]:g}"
    assert pre.loc["run length (iterations)", "value"] == str(p.base["iterations"])
    assert pre.loc["η (SEC), triplet", "value"] == "pending"
    q = ex.tuned(p, "adam", store)
    best = p.eta_grid[1]
    for c in ex.eta_selection(q):
        save(store, c, 70.0 if (c.loss == "triplet" and c.eta == best) else 60.0)
    pre = tiers.preregistration(p, store).set_index("choice")
    assert pre.loc["η (SEC), triplet", "value"] == f"{best:g}"
    assert pre.loc["η (SEC), triplet", "held-out R@1"] == 70.0
    assert pre.loc["η (SEC), ms", "value"] == f"{p.eta_grid[0]:g}"          # all tied: the smallest η
    assert pre.loc["η (SEC), triplet", "− no regularizer"] == 10.0           # against η = 0 of the same grid
    assert pre.loc["η (SEC), triplet", "note"] == ""
    assert pre.loc["η (SEC), ms", "note"].startswith("smallest value of the grid")


def test_a_refused_rate_is_shown_as_refused():
    p = ex.get_profile("cpu")
    store = _Fake([(c, 90.0 if c.lr == max(p.lr_pilot["adam"]) else 50.0) for c in ex.lr_pilot(p)])
    pre = tiers.preregistration(p, store).set_index("choice")
    assert pre.loc["learning rate, adam", "value"] == "refused"
    assert "largest rate" in pre.loc["learning rate, adam", "note"]


class _Fake:
    root = "(fake)"

    def __init__(self, scores):
        self.scores = {ex.run_key(c): (c, s) for c, s in scores}

    def get(self, cfg, tables=()):
        hit = self.scores.get(ex.run_key(cfg))
        return None if hit is None else RunResult(cfg, "done", {"R@1": hit[1]}, E, E, E, E, E, E)


def test_stages_count_present_runs(store):
    p = ex.get_profile("smoke")
    sgd = next(c for c in ex.lr_pilot(p) if c.optimizer == "sgd")
    save(store, sgd, 10.0)
    rows = {r["stage"]: r for r in tiers.stages(p, store)}
    pilot = rows["learning-rate and run-length pilot"]
    assert pilot["runs"] == f"1 of {len(ex.lr_pilot(p))}" and not pilot["complete"]
    assert rows["η and L2-weight selection (held-out classes)"]["runs"] == "not yet defined"   # needs Adam's pilot
    adam = next(c for c in ex.lr_pilot(p) if c.optimizer == "adam")
    save(store, adam, 20.0)
    rows = {r["stage"]: r for r in tiers.stages(p, store)}
    assert rows["η and L2-weight selection (held-out classes)"]["runs"].endswith(f"of {len(ex.eta_selection(ex.tuned(p, 'adam', store)))}")


def test_the_kind_table_reads_each_rows_kind_or_kinds_csv(tmp_path):
    """Runs trained under the contract carry their kind; older batches take kinds.csv's, else 'unknown'."""
    from sec_lib.chapters import tiers
    d = tmp_path / "data" / "reference" / "reference"
    d.mkdir(parents=True)
    pd.DataFrame({"key": ["a", "b", "c"], "commit": ["c1" * 20, "c2" * 20, "c3" * 20],
                  "date": ["2026-01-01", "2026-01-02", "2026-01-03"],
                  "cpu_kind": [None, None, "AMD/AVX2/avx2"]}).to_parquet(d / "runs.parquet")
    pd.DataFrame({"commit": ["c1" * 20], "cpu_kind": ["AMD/AVX512/native"], "evidence": ["rerun x identical"]}).to_csv(
        d / "kinds.csv", index=False)
    t = tiers.kind_table("reference", tmp_path)
    assert t["CPU kind"].tolist() == ["AMD/AVX512/native", "unknown", "AMD/AVX2/avx2"]
    assert t["evidence"].tolist()[0] == "rerun x identical" and t["runs"].tolist() == [1, 1, 1]


def test_last_quarter_flags_the_runs_of_the_committed_tier_that_still_rise():
    from sec_lib.chapters import tiers
    from sec_lib.runs import tier
    if not tier.has_tier("reference"):
        pytest.skip("no committed reference tier")
    lq = tiers.last_quarter("reference")
    t = tier.open_tier(tier.tier_dir("reference"))
    key = lq["key"].iloc[0]
    ev = t.get(key, tables=("evals",)).evals.set_index("step")["R@1"]
    n = int(lq["iterations"].iloc[0])
    assert lq["gain"].iloc[0] == pytest.approx(ev.loc[n] - ev.loc[max(s for s in ev.index if s <= 0.75 * n)])
    assert (lq["rising"] == (lq["gain"] > tiers.RISING)).all()
    assert f"{int(lq['rising'].sum())} of {len(lq)} runs still rise" in tiers.last_quarter_sentence(lq)


def test_the_schedule_pilot_section_reads_the_committed_pilot(tmp_path):
    from sec_lib.chapters import tiers
    df, text = tiers.schedule_pilot(tmp_path)
    assert df.empty and "no committed run yet" in text
    from sec_lib.runs import pilot, tier
    if not (tier.tier_dir(pilot.TIER) / "pilot" / "runs.parquet").exists():
        pytest.skip("no committed pilot")
    df, text = tiers.schedule_pilot()
    assert "pilot runs are committed (held-out classes)" in text and pilot.RULE in text
    if len(df):
        assert set(df["shape"]) <= set(pilot.SHAPES) and "gain" in df


def test_the_schedule_pilot_section_names_the_fallback_when_nothing_converged(tmp_path, no_fsync):
    """Every length pair complete, no shape converged: the page says which shape the tier trains, at which
    length, and that it is not converged."""
    from sec_lib.chapters import tiers
    from sec_lib.runs import pilot, tier
    from sec_lib.runs.store import ResultStore
    from sec_lib.runs.train import RunResult
    store = ResultStore(tmp_path / "store")
    e = pd.DataFrame({"step": [1], "R@1": [1.0]})
    for c in pilot.configs(pairs=len(pilot.LENGTH_PAIRS)):
        score = 80.0 + c.iterations / 1000 + (0.5 if c.schedule == "step" else 0.0) + c.seed / 1e4   # +1 per 1.5x
        store.save(RunResult(c, "done", {"R@1": score}, e.iloc[:0], e.iloc[:0], e, e.iloc[:0], e.iloc[:0], e.iloc[:0]))
    tier.export(store, pilot.configs(pairs=len(pilot.LENGTH_PAIRS)), tier.tier_dir(pilot.TIER, tmp_path) / "pilot")
    df, text = tiers.schedule_pilot(tmp_path)
    assert len(df) == 2 * len(pilot.LENGTH_PAIRS) and not df["converged"].any()
    assert "By the registered fallback" in text and "trains **step** at 13,500 iterations" in text


def test_selection_prediction_against_scipy():
    """The tiers page says how well held-out gains predicted test gains (Pearson r with a Fisher-z interval,
    Spearman, and whether the held-out choice is the test's best η)."""
    import math
    from scipy import stats
    rng = __import__("numpy").random.default_rng(3)
    rows = [{"loss": l, "eta": e, "heldout_gain": h, "heldout_seeds": 1, "test_gain": h * 0.5 + rng.normal(0, 0.3),
             "test_seeds": 5} for l in ("triplet", "ms") for e, h in zip((0.005, 0.05, 0.5), rng.normal(0, 1, 3))]
    df = pd.DataFrame(rows)
    s = tiers.prediction_sentence(df, "cpu")                  # a tier that selects with one seed
    r = stats.pearsonr(df["heldout_gain"], df["test_gain"])[0]
    z, se = math.atanh(r), 1 / math.sqrt(len(df) - 3)
    assert f"r = {r:+.2f} [{math.tanh(z - 1.96 * se):+.2f}, {math.tanh(z + 1.96 * se):+.2f}]" in s
    assert f"Spearman {stats.spearmanr(df['heldout_gain'], df['test_gain'])[0]:+.2f}" in s
    assert "one selection seed" not in s and "mean over 1 selection seed per cell" in s
    same = sum(g.loc[g["heldout_gain"].idxmax(), "eta"] == g.loc[g["test_gain"].idxmax(), "eta"]
               for _, g in df.groupby("loss"))
    assert f"for {same} of the 2 losses with more than one cell" in s and "come from" not in s
    # within each loss: the partial correlation given the loss, against scipy on the residuals of a loss-only fit
    import numpy as np
    X = pd.get_dummies(df["loss"]).astype(float).to_numpy()
    res = {c: df[c] - X @ np.linalg.lstsq(X, df[c], rcond=None)[0] for c in ("heldout_gain", "test_gain")}
    rw = stats.pearsonr(res["heldout_gain"], res["test_gain"])[0]
    zw, sew = math.atanh(rw), 1 / math.sqrt(len(df) - 3 - 1)
    assert (f"over the 6 cells of the 2 losses with more than one), r = {rw:+.2f} [{math.tanh(zw - 1.96 * sew):+.2f}, "
            f"{math.tanh(zw + 1.96 * sew):+.2f}]") in s
    # the main comparison's cells (before the η sweep): a loss with one cell has no choice to get right
    main = pd.DataFrame({"loss": ["triplet", "triplet", "ms", "npair"], "eta": [0.05, 1.0, 1.0, 0.1],
                         "heldout_gain": [1.0, 0.5, 0.3, 0.2], "heldout_seeds": 3,
                         "test_gain": [0.2, 0.6, 0.1, 0.0], "test_seeds": 5, "test_runs": "main comparison"})
    t = tiers.prediction_sentence(main, "decisive")
    assert "for 0 of the 1 losses with more than one cell" in t and "come from the main comparison" in t
    assert "Within each loss" not in t                          # one loss with more than one cell: nothing to centre
    assert "The η sweep, which tests every η of the grid for the four main losses, is not committed yet." in t
    mixed = pd.concat([df.assign(test_runs="η sweep"), main.iloc[3:].assign(loss="supcon", test_runs="review chapters")])
    assert tiers.prediction_sentence(mixed, "decisive").endswith(
        "The test gains come from the η sweep (every η of the grid) for triplet and ms and the review chapters (SEC at "
        "the selected η: one cell per loss) for supcon.")
    assert "cannot be measured yet" in tiers.prediction_sentence(df.iloc[:3], "cpu")
    assert list(tiers.selection_prediction("smoke", root="/nonexistent").columns) == tiers.COLUMNS


def test_the_decisive_selection_section_shows_each_point_and_the_rules_choice(tmp_path, no_fsync):
    """Each grid point's mean held-out R@1 over its seeds, with how many of the 3 are in; a loss's choice by the
    registered rule once every point has its seeds (growing the grid at an edge), 'pending' before; a failed run
    counts as -inf."""
    from sec_lib.chapters import tiers
    from sec_lib.runs import pilot, selection, tier
    from sec_lib.runs.store import ResultStore
    from sec_lib.runs.train import RunResult
    assert "no committed run yet" in tiers.decisive_selection(tmp_path)[2]
    store = ResultStore(tmp_path / "store")
    e = pd.DataFrame({"step": [1], "R@1": [1.0]})
    peak = {"triplet": 0.05, "ms": 0.005}                     # ms peaks at the grid's low edge: it grows
    named = []
    for loss in ("triplet", "ms"):
        for c in selection.configs(loss, (0.0, *selection.ETA_GRID), "cosine", 300):
            score = 80.0 - abs(c.eta - peak[loss]) * 10 + (c.seed - 1001) / 1e4
            failed = loss == "triplet" and c.eta == 1.0 and c.seed == 1000
            store.save(RunResult(c, "failed" if failed else "done", {} if failed else {"R@1": score}, e.iloc[:0],
                                 e.iloc[:0], e, e.iloc[:0], e.iloc[:0], e.iloc[:0]))
            named.append(c)
    l2 = selection.configs("triplet", (0.005,), "cosine", 300, "l2reg")[:2]            # 2 of the 3 seeds
    for c in l2:
        store.save(RunResult(c, "done", {"R@1": 79.0}, e.iloc[:0], e.iloc[:0], e, e.iloc[:0], e.iloc[:0], e.iloc[:0]))
    tier.export(store, named + l2, tier.tier_dir(pilot.TIER, tmp_path) / "selection")
    eta, l2t, text = tiers.decisive_selection(tmp_path)
    t = eta.set_index("loss")
    assert t.loc["triplet", "choice"] == "0.05" and t.loc["triplet", "0.05"] == "80.00 (3 of 3)"
    assert t.loc["triplet", "1"] == "-inf (3 of 3)"                                 # a failed run cannot win
    assert t.loc["ms", "choice"] == "0.005; grows to 0.0005" and t.loc["semihard", "choice"] == "pending"
    assert l2t.set_index("loss").loc["triplet", "0.005"] == "79.00 (2 of 3)"
    assert "Final choices: triplet SEC η 0.05." in text and "Pending: semihard SEC η" in text
    assert "Growing at an edge: ms SEC η (to 0.0005)." in text
    assert not eta.isna().any().any() and not l2t.isna().any().any()


def test_the_decisive_progress_table_counts_each_stage_once_the_plan_fixes_it(tmp_path):
    """Before the plan: the stages after the selection show no count. With a plan: the main comparison's count, and
    each later stage's runs that no earlier stage names, where the choices it needs exist (else still none)."""
    from sec_lib.chapters import tiers
    from sec_lib.runs import decisive, mainstage
    from sec_lib.runs import experiments as ex
    df, text = tiers.decisive_progress(tmp_path)
    assert df["committed"].eq(0).all() and (df.set_index("stage").loc["main", "named"] == tiers.MISSING)
    assert "written when the held-out selection is final" in text and not df.isna().any().any()
    plan = mainstage.Plan("cosine", 9000, 7, 0.45, 0.4, {}, {l: 0.1 for l in ex.MAIN_LOSSES},
                          {l: 0.005 for l in ex.MAIN_LOSSES}, {})
    mainstage.write_plan(plan, decisive.plan_path(tmp_path))
    df, text = tiers.decisive_progress(tmp_path)
    t = df.set_index("stage")
    assert t.loc["main", "named"] == len(mainstage.configs(plan)) and "7 seeds for the primary arms" in text
    assert t.loc["extra", "named"] == tiers.MISSING                     # tml and cosface are not selected yet
    # every held-out selection's first round is known: tml and CosFace 2 losses × (η = 0, 5 η, 3 L2 weights) × 3
    # seeds; relative SEC 4 losses × (η = 0 and 3 η) × 3 seeds; the fine-tuning rates 5 trunk rates × 4 head ratios
    # × 3 seeds; SGD's rates 2 arms × 5 rates × 3 seeds; the review losses 5 × (η = 0 and 3 η) × 3 seeds
    assert t.loc["extra-selection", "named"] == "54 (first round)" == f"{2 * 9 * 3} (first round)"
    assert t.loc["scale-selection", "named"] == f"{4 * 4 * 3} (first round)"
    assert t.loc["finetune-selection", "named"] == f"{5 * 4 * 3} (first round)"
    assert t.loc["sgd-selection", "named"] == f"{2 * 5 * 3} (first round)"
    assert t.loc["review-selection", "named"] == f"{5 * 4 * 3} (first round)"
    with pytest.raises(ValueError, match="unknown stage 'nope'; the stages after the main comparison: extra-sel"):
        decisive.first_round("nope", plan=plan)
    with pytest.raises(ValueError, match="stage 'eta' is not a held-out selection"):
        decisive.first_round("eta", plan=plan)
    # the η sweep: 4 losses × (η = 0 and 5 η) × 3 seeds, less the main comparison's runs at seeds 0-2 (η = 0, the
    # selected 0.1 and the paper's η, each on the grid)
    assert t.loc["eta", "named"] == 4 * 6 * 3 - 4 * 3 * 3


def test_a_pending_choices_note_names_repository_paths_relative_to_it():
    """The tiers page's notes come from exceptions that name a store; a reader's checkout is not this one."""
    from sec_lib.runs import tier
    e = KeyError(f"the learning-rate pilot of profile 'gpu' is not in the result store {tier.REPO}/data/reference/gpu "
                 "(4 of 8 runs missing); run `python -m sec_lib.book run --profile gpu` first")
    assert tiers.note_of(e) == ("the learning-rate pilot of profile 'gpu' is not in the result store "
                                "data/reference/gpu (4 of 8 runs missing)")


def _summary(**decisive):
    return pd.DataFrame([{"tier": "quick (cpu)", "runs": 468, "run-hours": 15.04, "device": "cpu"},
                         {"tier": "gpu", "runs": 61, "run-hours": 4.62, "device": "NVIDIA H200",
                          "main comparison": "0 of 40"},
                         {"tier": "decisive", "runs": 957, "run-hours": 86.82, "device": "cpu", **decisive}])


def test_the_opening_states_each_tiers_use_then_the_portability_findings(tmp_path):
    """The tiers page opens with its findings: which tier decides the verdicts, what the quick, gpu and retired tiers
    are for (computed from the summary and the pages' tiers), then the portability paragraph of both tiers."""
    from sec_lib.chapters import portability
    pages = pd.DataFrame({"page": ["compare", "mu"], "tier shown": ["decisive", "decisive"]})
    text = tiers.opening(_summary(), pages, root=tmp_path)
    head, findings = text.split("\n\n")
    assert head.startswith("**What each tier is for.** The **decisive tier** decides every verdict of the book "
                           "(957 runs, 86.82 run-hours on cpu)")
    assert "The **quick tier** (468 runs, 15.04 run-hours on cpu)" in head and "no page's verdict reads it" in head
    assert "The **gpu tier** (61 runs, 4.62 run-hours on NVIDIA H200)" in head and "holds 0 of 40 runs" in head
    assert "retired reference tier's runs are not in this checkout" in head          # no runs under tmp_path
    assert findings == portability.findings(tmp_path)
    waiting = tiers.opening(_summary(), pages.assign(**{"tier shown": ["decisive", "cpu"]}), root=tmp_path)
    assert "1 page reads it until the decisive tier holds its runs (mu)" in waiting
    assert "decides the verdicts of every page whose runs it holds" in waiting
    smoke = tiers.opening(_summary(), pages.assign(**{"tier shown": "smoke"}), "smoke", root=tmp_path)
    assert smoke.startswith("**What each tier is for.** This book (profile `smoke`) reads its own runs")
    assert "every page of this book reads it" in smoke and "pages read it until" not in smoke
    assert "decides every verdict of the glyph book" in smoke
    none = tiers.opening(_summary().iloc[:2], pages.iloc[:0], root=tmp_path)
    assert none.startswith("**What each tier is for.** No decisive tier is committed yet")
