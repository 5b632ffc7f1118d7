"""The tiers page: what each tier is for and whether its verdicts depend on the CPU (:func:`opening`, the page's
findings), then which evidence each tier holds, what it cost, and the choices made before any test run (the
pre-registration), read from the quick store and the committed tiers."""
from __future__ import annotations

import math
import numbers

import pandas as pd

from ..analysis.tiers import MISSING, decisive_progress, note_of, tier_label  # noqa: F401 (the page's API)
from ..figures.tables import fold_columns
from ..runs import decisive, gpu_tier, pilot, selection
from ..runs import experiments as ex
from ..runs.pilot import last_quarter_gain
from ..runs.store import ResultStore
from ..runs.tier import (KINDS_FILE, REPLACED_BY, RETIRED_TIERS, TIER_PROFILES, UNKNOWN_KIND, StagedTier, has_tier,
                         open_tier, stage_dirs, tier_dir)
from . import PAGES, profile_param
from .evidence import MAIN_TIERS, PIPELINE_PROFILES, evidence_profile, lacking
from .portability import findings
from .tiers_prediction import (COLUMNS, TEST_SOURCES, prediction_sentence,  # noqa: F401 (the page's API)
                               selection_prediction)

#: The notebook's parameters (checked by ``sec_lib.params.notebook_params``).
PARAMS = profile_param()


def stores(profile: str, root=None) -> dict:
    """Tier name -> store: the quick tier of ``profile`` and every committed tier."""
    out = {f"quick ({profile})": (ex.get_profile(profile), ResultStore(root))}
    for name in TIER_PROFILES:
        if has_tier(name):
            out[name] = (ex.get_profile(name), open_tier(tier_dir(name)))
    return out


def _have(store, configs) -> tuple[int, int]:
    return sum(store.get(c) is not None for c in configs), len(configs)


#: The summary's column for the pretrained regime of the long tiers: its held-out rate selection and its fine-tuned runs.
PRETRAINED = "pretrained regime"


def stages(p: ex.Profile, store) -> list[dict]:
    """One row per stage of ``p`` (pilot, selection, main comparison): runs present of runs planned.
    A later stage is 'not yet defined' while the choices it needs are missing. The gpu tier counts the stages it
    trains (:func:`sec_lib.runs.gpu_tier.stages`: Adam's pilot, the main losses' selection, the main comparison),
    each named in its cell, and its pretrained regime (the fine-tuning rates, then the fine-tuned runs) in one
    more row, :data:`PRETRAINED`."""
    rows = [("learning-rate and run-length pilot", lambda: ex.lr_pilot(p)),
            ("η and L2-weight selection (held-out classes)", lambda: ex.sweep_configs("selection", p, store)),
            ("main comparison" if p.main_seeds else "main table", lambda: ex.sweep_configs(
                "main" if p.main_seeds else "compare", p, store))]
    what = ["", "", ""]
    if p.name == "gpu":
        plan = gpu_tier.stages(p, store)
        rows = [(name, configs) for (name, _), (_, configs) in zip(rows, plan)]
        what = [f" ({label})" for label, _ in plan[:2]] + [""]
    out = []
    for (name, configs), label in zip(rows, what):
        try:
            have, need = _have(store, configs())
            out.append({"stage": name, "runs": f"{have} of {need}{label}", "complete": have == need})
        except (KeyError, ex.SelectionError) as e:
            out.append({"stage": name, "runs": "not yet defined", "complete": False,
                        "note": note_of(e)})
    if p.name == "gpu":
        out.append(_pretrained_stages([configs for _, configs in plan[3:]], store))
    return out


def _pretrained_stages(namings, store) -> dict:
    """The gpu tier's :data:`PRETRAINED` row: its fine-tuning rate selection and its fine-tuned runs, present of
    planned, or 'not yet defined' from the first that waits (for the pretrained trunk, or for the chosen rates)."""
    parts, complete = [], True
    for label, naming in zip(("rates", "fine-tuned"), namings):
        try:
            have, need = _have(store, naming())
        except gpu_tier.WAITING as e:
            why = "the trunk is not pretrained yet" if isinstance(e, FileNotFoundError) else "not yet defined"
            return {"stage": PRETRAINED, "runs": "; ".join(parts + [f"{label}: {why}"]), "complete": False,
                    "note": note_of(e)}
        parts.append(f"{label}: {have} of {need}")
        complete &= have == need
    return {"stage": PRETRAINED, "runs": "; ".join(parts), "complete": complete}


def summary_table(profile: str = "cpu", root=None, progress: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per tier: runs held, failed runs, wall hours of training (one thread per CPU run, so CPU
    run-hours are core-hours), devices, torch versions and dates, and each stage's completeness. ``progress`` is
    :func:`decisive_progress`'s table when the caller has it already (the tiers page shows it too), so that it is
    counted once."""
    rows = []
    for i, (name, (p, store)) in enumerate(stores(profile, root).items()):
        runs = _quick_runs(p, store) if i == 0 else store.runs      # the quick store first, then committed tiers
        row = {"tier": name, "runs": len(runs),
               "failed": int((runs["status"] != "done").sum()) if len(runs) else 0,
               "run-hours": round(float(runs["wall_s"].sum()) / 3600, 2) if len(runs) else 0.0,
               "device": _joined(runs, "device"), "torch": _joined(runs, "torch"), "dates": _dates(runs) or MISSING}
        for st in stages(p, store):
            row[st["stage"]] = st["runs"]
        rows.append(row)
    staged = _decisive_row(progress)
    if staged:
        rows.append(staged)
    # a stage one tier has and another has not (the quick tiers' "main table", the long tiers' "main
    # comparison") is MISSING there, not NaN
    # where and when each tier trained, folded under the table, so that it fits the text column (the CSV keeps all)
    return fold_columns(pd.DataFrame(rows).fillna(MISSING), ["tier"],
                        {"Where and when each tier trained (device, torch, dates)": ["device", "torch", "dates"]})


def _decisive_row(progress: pd.DataFrame | None = None) -> dict | None:
    """The decisive tier's row of :func:`summary_table` (None before it has a committed stage): its runs over every
    stage folder, and its pilot, selection and main comparison as :func:`decisive_progress` counts them (its later
    stages are that table's)."""
    if not has_tier(pilot.TIER):
        return None
    runs = open_tier(tier_dir(pilot.TIER)).runs
    prog = (decisive_progress()[0] if progress is None else progress).set_index("stage")

    def of(stage: str) -> str:
        have, named = int(prog.loc[stage, "committed"]), prog.loc[stage, "named"]
        return f"{have} of {named}" if isinstance(named, numbers.Real) and not isinstance(named, bool) else str(have)
    return {"tier": pilot.TIER, "runs": len(runs), "failed": int((runs["status"] != "done").sum()),
            "run-hours": round(float(runs["wall_s"].sum()) / 3600, 2), "device": _joined(runs, "device"),
            "torch": _joined(runs, "torch"), "dates": _dates(runs) or MISSING,
            "learning-rate and run-length pilot": f"{of('pilot')} (schedule pilot)",
            "η and L2-weight selection (held-out classes)": of("selection"), "main comparison": of("main"),
            PRETRAINED: f"rates: {of('finetune-selection')}; fine-tuned: {of('pretrained')}"}


def _joined(runs: pd.DataFrame, col: str) -> str:
    vals = sorted(map(str, runs[col].dropna().unique())) if col in runs else []
    return ", ".join(vals) if vals else MISSING


def _quick_runs(p: ex.Profile, store: ResultStore) -> pd.DataFrame:
    rows = []
    for key in store.keys():
        try:
            meta = store.meta(key)
        except (OSError, ValueError):
            continue
        prov = meta.get("provenance", {})
        rows.append({"key": key, "status": meta.get("status"), "wall_s": meta.get("wall_s", math.nan),
                     "device": prov.get("device"), "torch": prov.get("torch"), "date": prov.get("date")})
    return pd.DataFrame(rows, columns=["key", "status", "wall_s", "device", "torch", "date"])


def _dates(runs: pd.DataFrame) -> str:
    if "date" not in runs or not runs["date"].notna().any():
        return ""
    d = runs["date"].dropna().astype(str).str[:10]
    return d.min() if d.min() == d.max() else f"{d.min()} to {d.max()}"


def preregistration(p: ex.Profile, store) -> pd.DataFrame:
    """The choices made on held-out training classes before any test run: each learning rate
    (per optimizer and arm, with its grid), the run length, and each loss's η and L2 weight.
    A choice whose runs are not all in ``store`` yet is shown as pending."""
    rows = []
    arms = [(opt, False) for opt in p.lr_pilot] + ([("sgd", True)] if "sgd" in p.lr_pilot else [])
    for opt, sec in arms:
        what = f"learning rate, {opt}" + (" + SEC" if sec else "")
        grid = tuple(p.lr_pilot[opt])
        try:
            runs = ex.pilot_runs(p, store, opt, sec)
            lr = ex.chosen_lr(p, opt, runs, sec)
            score = next(r.metrics.get("R@1") for r in runs if r.config.optimizer == opt
                         and (r.config.eta > 0) == sec and r.config.lr == lr)
            rows.append({"choice": what, "value": f"{lr:g}", "grid": _fmt_grid(grid), "held-out R@1": score,
                         "note": ""})
        except (KeyError, ex.SelectionError) as e:
            rows.append({"choice": what, "value": "pending" if isinstance(e, KeyError) else "refused",
                         "grid": _fmt_grid(grid), "held-out R@1": math.nan, "note": note_of(e)})
    try:
        runs = ex.pilot_runs(p, store, "adam")
        rows.append({"choice": "run length (iterations)", "value": str(ex.chosen_iterations(p, runs)),
                     "grid": _fmt_grid(p.iteration_grid or (p.base["iterations"],)), "held-out R@1": math.nan,
                     "note": "read from the pilot's curves (below), not from one score"})
        q = ex.tuned(p, "adam", store)
    except (KeyError, ex.SelectionError):
        return _no_nan_text(pd.DataFrame(rows))
    sel = [store.get(c) for c in ex.eta_selection(q)]
    for loss in (*ex.MAIN_LOSSES, *ex.EXTRA_LOSSES):
        for mu, label, grid in (("batch", "η (SEC)", p.eta_grid), ("zero", "L2-reg weight", p.l2_etas if p.main_seeds else ())):
            if not grid:
                continue
            mine = [r for r, c in zip(sel, ex.eta_selection(q)) if c.loss == loss and (c.eta == 0 or c.mu == mu)
                    and not c.relative]
            what = f"{label}, {loss}"
            if any(r is None for r in mine):
                done = sum(r is not None for r in mine)
                rows.append({"choice": what, "value": "pending", "grid": _fmt_grid(grid), "held-out R@1": math.nan,
                             "note": f"{done} of {len(mine)} selection runs trained"})
                continue
            eta = ex.chosen_eta(p, loss, mine, mu)
            score = next(r.metrics.get("R@1") for r in mine if r.config.eta == eta and r.config.mu == mu)
            zero = next((r.metrics.get("R@1") for r in mine if r.config.eta == 0), math.nan)
            rows.append({"choice": what, "value": f"{eta:g}", "grid": _fmt_grid(grid), "held-out R@1": score,
                         "− no regularizer": score - zero, "note": _edge_note(eta, grid)})
    return _no_nan_text(pd.DataFrame(rows))


def _no_nan_text(table: pd.DataFrame) -> pd.DataFrame:
    """The text columns of a table without NaN: a row with nothing to say there shows a blank. (The number
    columns keep NaN, which the page shows as a blank cell and the CSV as an empty field.)"""
    text = [c for c in table.columns if not pd.api.types.is_numeric_dtype(table[c])]
    return table.fillna({c: "" for c in text})


def _edge_note(value: float, grid) -> str:
    """Say when a choice sits at an edge of its grid (the best value may lie beyond it)."""
    if len(grid) < 2:
        return ""
    if value == min(grid):
        return "smallest value of the grid: a smaller one was not tried"
    if value == max(grid):
        return "largest value of the grid: a larger one was not tried"
    return ""


def _fmt_grid(grid) -> str:
    return ", ".join(f"{g:g}" for g in grid)


def status_sentence(summary: pd.DataFrame) -> str:
    """What the committed tiers hold, computed from :func:`summary_table`."""
    parts = []
    for row in summary.to_dict("records"):
        if row["tier"].startswith("quick"):
            continue
        stages_ = {k: v for k, v in row.items() if ("pilot" in k or "selection" in k or "main" in k or k == PRETRAINED)
                   and isinstance(v, str) and v != MISSING}
        have = "; ".join(f"{k}: {v}" for k, v in stages_.items())
        parts.append(f"The **{row['tier']}** tier holds {row['runs']} runs ({row['failed']} failed, "
                     f"{row['run-hours']} run-hours on {row['device']}): {have}.")
    if not parts:
        return "No long tier is committed yet; every page shows the quick tier."
    return " ".join(parts) + (" A page shows the decisive tier as soon as that tier holds every run the page needs, "
                              "and the quick tier until then; the box at each page's end, 'How this page was made', "
                              "says which.")


def _runs_text(row: dict) -> str:
    """"957 runs, 86.82 run-hours on cpu" from a row of :func:`summary_table`."""
    return f"{int(row['runs']):,} runs, {row['run-hours']:g} run-hours on {row['device']}"


def opening(summary: pd.DataFrame, pages: pd.DataFrame, profile: str = "cpu", root=None) -> str:
    """The page's findings, first (markdown): what each tier is for and which one decides the verdicts, computed from
    :func:`summary_table` and :func:`page_tiers` (which pages still read the quick tier), then what the committed
    portability reports found for the decisive and the retired tier (:func:`sec_lib.chapters.portability.findings`).
    A tier that is not committed is said to be missing, not described. A book whose pages read their own runs (the
    smoke book, a real-benchmark book: ``PIPELINE_PROFILES``) says so first: the committed tiers are the glyph
    book's."""
    rows = {str(r["tier"]): r for r in summary.to_dict("records")}
    first = MAIN_TIERS[0]
    own = profile in PIPELINE_PROFILES
    col = "tier shown"
    waiting = sorted(pages.loc[pages[col] != first, "page"]) if len(pages) and col in pages and not own else []
    parts = [f"This book (profile `{profile}`) reads its own runs, the quick tier's, on every page; the committed "
             "tiers are the glyph book's evidence."] if own else []
    if first in rows:
        which = ("every verdict of the glyph book" if own else
                 "every verdict of the book" if not waiting else "the verdicts of every page whose runs it holds")
        parts.append(f"The **{first} tier** decides {which} ({_runs_text(rows[first])}): its choices were made on "
                     "held-out training classes and its design registered before any run on the test classes.")
    else:
        parts.append(f"No {first} tier is committed yet, so every verdict is read from the quick tier.")
    quick = next((r for name, r in rows.items() if name.startswith("quick")), None)
    if quick is not None:
        reads = ("every page of this book reads it" if own else "no page's verdict reads it" if not waiting else
                 f"{len(waiting)} {'page reads' if len(waiting) == 1 else 'pages read'} it until the {first} tier "
                 f"holds {'its' if len(waiting) == 1 else 'their'} runs ({', '.join(waiting)})")
        parts.append(f"The **quick tier** ({_runs_text(quick)}) is what `make book` trains in minutes to show that the "
                     f"whole pipeline runs; {reads}.")
    for name, row in rows.items():
        if name in TIER_PROFILES:
            main = row.get("main comparison", MISSING)
            parts.append(f"The **{name} tier** ({_runs_text(row)}) trains the main comparison at a larger scale on "
                         f"lent GPUs, beside the {first} tier; its main comparison holds {main} runs.")
    for name in RETIRED_TIERS:
        label = tier_label(name)
        d = tier_dir(name, root)
        n = len(open_tier(d).runs) if (d / "runs.parquet").exists() else 0
        parts.append(f"The **{label} tier** ({n:,} runs), which the {REPLACED_BY[name]} tier replaced, is kept for "
                     "the record; no verdict reads it." if n else f"The {label} tier's runs are not in this checkout.")
    return "**What each tier is for.** " + " ".join(parts) + "\n\n" + findings(root)


def page_tiers(profile: str = "cpu") -> pd.DataFrame:
    """Which tier each chapter page shows now: :func:`sec_lib.chapters.evidence.evidence_profile` over the
    sweeps the page reads, as declared in ``PAGES`` (``Page.evidence_sweeps``; the selection runs they
    need are implied and not listed), and which of those sweeps the first long tier (:data:`~sec_lib.chapters.
    evidence.MAIN_TIERS`, the decisive tier) does not hold yet: what the page waits for before it shows that tier."""
    first = MAIN_TIERS[0]
    rows, seen = [], set()
    for page in PAGES:
        sweeps = tuple(c for c in page.evidence_sweeps if c in ex.SWEEPS)
        if page.source in seen or not sweeps or page.source in ("runs", "train", "tiers", "explore", "claims"):
            continue
        seen.add(page.source)
        shown = evidence_profile(profile, sweeps)
        missing = [] if shown == first else lacking(first, sweeps)
        rows.append({"page": page.source, "reads": ", ".join(c for c in sweeps if c != "selection"),
                     "tier shown": shown, f"not yet in the {first} tier": ", ".join(missing) or "—"})
    return pd.DataFrame(rows)


# -- the reproducibility contract and the flatness of every reported run ------------------------------------

#: A reported run whose R@1 gained more than this over its last quarter is flagged as still rising (the
#: decisive tier's convergence margin, :data:`sec_lib.runs.pilot.CONVERGED_GAIN`).
RISING = 0.3


def kind_table(profile: str = "reference", root=None) -> pd.DataFrame:
    """What is known of the CPU kind of each batch of a committed tier: the rows' own ``cpu_kind`` where they
    record it (runs trained under the contract), else ``kinds.csv`` beside the tier; one row per committing
    commit with its run count, first run date and evidence. A staged tier (the decisive tier): one row per stage
    (:func:`_staged_kinds`)."""
    d = tier_dir(profile, root)
    if not (d / "runs.parquet").exists():
        if stage_dirs(d):
            return _staged_kinds(StagedTier(d))
        return pd.DataFrame(columns=["commit", "runs", "first run", "CPU kind", "evidence"])
    runs = open_tier(d).runs
    own = runs["cpu_kind"] if "cpu_kind" in runs else pd.Series(None, index=runs.index)
    g = runs.assign(_kind=own).groupby("commit", sort=False).agg(runs=("key", "size"), first=("date", "min"),
                                                                 kind=("_kind", "first")).reset_index()
    known = pd.read_csv(d / KINDS_FILE, dtype=str).set_index("commit") if (d / KINDS_FILE).exists() else None
    rows = []
    for r in g.sort_values("first").itertuples():
        kind, ev = r.kind, "recorded by each run (the contract's provenance)"
        if not isinstance(kind, str) or not kind:
            kind = known.loc[r.commit, "cpu_kind"] if known is not None and r.commit in known.index else UNKNOWN_KIND
            ev = known.loc[r.commit, "evidence"] if known is not None and r.commit in known.index else "not checked"
        rows.append({"commit": r.commit[:10], "runs": int(r.runs), "first run": str(r.first)[:16], "CPU kind": kind,
                     "evidence": ev})
    return pd.DataFrame(rows)


def _staged_kinds(store: StagedTier) -> pd.DataFrame:
    """:func:`kind_table` of a staged tier: per stage folder, its runs, the first and last run dates, the CPU kinds
    its runs recorded (``cpu_kind``, the contract's provenance; each with its count) and how many trained on a CPU
    with AVX2 only and with AVX-512 (the ISA each run recorded) under the same pin."""
    rows = []
    for part in store.parts:
        r = _with_kind(part.runs)
        kinds = r["_kind"].value_counts()
        rows.append({"stage": part.root.name, "runs": len(r), "first run": str(r["date"].min())[:16],
                     "last run": str(r["date"].max())[:16],
                     "CPU kind": ", ".join(f"{k} ({n})" for k, n in kinds.items()),
                     "AVX2 only": int((~r["_avx512"]).sum()), "with AVX-512": int(r["_avx512"].sum())})
    return pd.DataFrame(rows).sort_values("first run", kind="stable").reset_index(drop=True)


def _with_kind(runs: pd.DataFrame) -> pd.DataFrame:
    """``runs`` with ``_kind`` (its recorded CPU kind, :data:`UNRECORDED` where none) and ``_avx512`` (whether its
    recorded ISA has avx512f)."""
    kind = runs["cpu_kind"] if "cpu_kind" in runs else pd.Series(None, index=runs.index, dtype=object)
    isa = runs["cpu_isa"] if "cpu_isa" in runs else pd.Series("", index=runs.index)
    return runs.assign(_kind=kind.fillna(UNRECORDED),
                       _avx512=isa.fillna("").astype(str).str.split().map(lambda flags: "avx512f" in flags))


def staged_kind_sentence(profile: str = "decisive", root=None) -> str:
    """How many of a staged tier's runs recorded which CPU kind, and how many trained on a CPU with AVX2 only and
    with AVX-512 under the same pin (computed from every stage's runs, each run once)."""
    try:
        store = StagedTier(tier_dir(profile, root))
    except FileNotFoundError:
        return f"The {profile} tier has no committed run yet."
    r = _with_kind(store.runs)
    kinds = r["_kind"].value_counts()
    head = (f"All {len(r):,} runs of the {profile} tier recorded one CPU kind, **{kinds.index[0]}**"
            if len(kinds) == 1 else
            f"The {len(r):,} runs of the {profile} tier recorded {len(kinds)} CPU kinds: "
            + ", ".join(f"{k} ({n})" for k, n in kinds.items()))
    return (head + f"; {int((~r['_avx512']).sum()):,} trained on a CPU with AVX2 only and {int(r['_avx512'].sum()):,} "
            "on CPUs with AVX-512 under the same pin, which gives the same bits (`data/reference/crosscpu/`).")


#: The CPU kind of a staged run that did not record one (none of the decisive tier's: it trained under the contract).
UNRECORDED = "not recorded"


def last_quarter(profile: str = "reference", root=None) -> pd.DataFrame:
    """Every reported run of a committed tier (scored on the test classes; every stage of the staged decisive tier)
    with its R@1 gain over the last quarter of the run (:func:`sec_lib.runs.pilot.last_quarter_gain`) and whether it
    still rises (gain > :data:`RISING`)."""
    d = tier_dir(profile, root)
    if not (d / "runs.parquet").exists() and not stage_dirs(d):
        return pd.DataFrame(columns=["key", "loss", "variant", "iterations", "schedule", "gain", "rising"])
    t = open_tier(d)
    runs = t.runs[(t.runs["status"] == "done") & (t.runs["holdout_classes"] == 0)]
    rows = []
    for r in runs.itertuples():
        e = t.get(r.key, tables=("evals",)).evals
        g = last_quarter_gain(e, int(r.iterations))
        rows.append({"key": r.key, "loss": r.loss, "variant": r.variant, "iterations": int(r.iterations),
                     "schedule": t.config(r.key).schedule, "gain": g, "rising": bool(g > RISING) if g == g else False})
    return pd.DataFrame(rows, columns=["key", "loss", "variant", "iterations", "schedule", "gain", "rising"])


def last_quarter_sentence(df: pd.DataFrame, profile: str = "reference") -> str:
    """A computed sentence on :func:`last_quarter`."""
    if df.empty:
        return f"The {profile} tier has no reported run (scored on the test classes) committed yet."
    g = df["gain"].dropna()
    if g.empty:
        return f"The {profile} tier has no reported run with an evaluation at 75% of its length."
    q1, med, q3 = g.quantile([0.25, 0.5, 0.75])
    n = int(df["rising"].sum())
    s = (f"Over the last quarter of each of the {len(g)} reported runs of the {profile} tier, R@1 changed by a "
         f"median of {med:+.2f} points (IQR {q1:+.2f} to {q3:+.2f}). ")
    decaying = sorted(set(df.loc[df["rising"], "schedule"].dropna()) - {"constant"}) if "schedule" in df else []
    if n and decaying:                 # a decaying schedule raises R@1 as its rate falls: that rise is not a cut-off
        s += (f"**{n} of {len(g)} runs rise** by more than {RISING} points over it: they are flagged. Their learning "
              f"rate follows a {' or '.join(decaying)} decay to zero over exactly that stretch, so a rise there is the "
              "annealing the schedule is built to give, not by itself a sign of a run stopped early: a decaying "
              "schedule flattens any curve at its end, and rises before that. Whether these runs are long enough is "
              "the schedule pilot's rule instead (runs 1.5× as long, same schedule shape, held-out classes): see "
              "“The decisive tier's schedule” on this page.")
        return s
    s += (f"**{n} of {len(g)} runs still rise** (more than {RISING} points): they are flagged, and their final "
          f"numbers are points on a rising curve, not plateaus." if n else
          f"No run gains more than {RISING} points: every reported run is flat at its end.")
    return s


def last_quarter_summary(df: pd.DataFrame) -> pd.DataFrame:
    """:func:`last_quarter` by loss, variant and length: runs, median and largest gain, runs still rising."""
    if df.empty:
        return df
    return (df.groupby(["loss", "variant", "iterations"]).agg(runs=("key", "size"), median_gain=("gain", "median"),
                                                             max_gain=("gain", "max"), rising=("rising", "sum"))
            .reset_index())


def schedule_pilot(root=None) -> tuple[pd.DataFrame, str]:
    """The decisive tier's schedule pilot as committed (``data/reference/decisive/pilot/``): its convergence
    table at each length pair with runs (:func:`sec_lib.runs.pilot.convergence`) and a computed sentence."""
    d = tier_dir(pilot.TIER, root) / "pilot"
    if not (d / "runs.parquet").exists():
        return pd.DataFrame(), "The decisive tier's schedule pilot has no committed run yet."
    t = open_tier(d)
    table = pilot.table(t.get(k, tables=("evals",)) for k in t.keys())
    parts, said = [], []
    for pair in pilot.LENGTH_PAIRS:
        conv = pilot.convergence(table, pair)
        if not conv.get("pairs", pd.Series(dtype=int)).gt(0).any():
            continue
        parts.append(conv.assign(T=pair[0]))
        shape = pilot.choice(conv, pair)
        complete = bool(conv["pairs"].eq(len(pilot.LOSSES) * len(pilot.SEEDS)).all())
        said.append(f"{'at' if said else 'At'} T = {pair[0]:,}: " + (f"**{shape}** is chosen" if shape else
                                                "no shape converged" if complete else "no shape has converged yet"))
    n, full = len(table), len(pilot.configs(pairs=len(pilot.LENGTH_PAIRS) if len(parts) > 1 else 1))
    last = pilot.LENGTH_PAIRS[-1]
    fallen = pilot.fallback(pilot.convergence(table, last), last) if len(parts) == len(pilot.LENGTH_PAIRS) else None
    text = (f"{n} of {full} pilot runs are committed (held-out classes). Rule: {pilot.RULE}. "
            + ("; ".join(said) if said else "No length pair is complete yet") + "."
            + (f" By the registered fallback (no shape converged at the last pair, T = {last[0]:,}) the tier trains "
               f"**{fallen}** at {last[0]:,} iterations, not converged by the rule: its remaining gain is the last "
               f"row's." if fallen else ""))
    return (pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()), text


# -- did the held-out selection predict the test classes? lives in sec_lib.chapters.tiers_prediction --------


# -- the decisive tier's held-out selection -----------------------------------------------------------------

def decisive_selection(root=None) -> tuple[pd.DataFrame, pd.DataFrame, str]:
    """The decisive tier's held-out η and L2 selection as committed (``data/reference/decisive/selection/``):
    one table per regularizer (SEC's η, the L2 weight), a row per main loss, a column per grid point (η = 0, the
    registered grid and any extension trained), each cell the mean held-out R@1 over the seeds trained and how many
    of the 3 (:data:`MISSING` where none), and the choice by the registered rule
    (:func:`sec_lib.runs.selection.choose`) once every point has its seeds, with its flags; and a computed sentence."""
    d = tier_dir(pilot.TIER, root) / "selection"
    if not (d / "runs.parquet").exists():
        return pd.DataFrame(), pd.DataFrame(), "The decisive tier's held-out selection has no committed run yet."
    runs = open_tier(d).runs
    runs = runs.assign(score=runs["R@1"].where(runs["status"] == "done", -math.inf))
    tables, chosen, pending, growing = [], [], [], []
    for kind, mu, base, name in (("SEC η", "batch", selection.ETA_GRID, selection.KIND_NAMES["sec"]),
                                 ("L2 weight", "zero", selection.L2_GRID, selection.KIND_NAMES["l2reg"])):
        rows = []
        for loss in ex.MAIN_LOSSES:
            sub = runs[(runs["loss"] == loss) & ((runs["eta"] == 0) | (runs["mu"] == mu))]
            scores = selection.scores_of(sub.assign(**{"R@1": sub["score"]}))    # a failed run scores -inf
            grid = (0.0, *selection.grid_after(base, {w: 0 for w in sub["eta"]}))
            row = {"loss": loss}
            for w in grid:
                pt = sub[sub["eta"] == w]
                row[f"{w:g}"] = MISSING if not len(pt) else f"{pt['score'].mean():.2f} ({len(pt)} of {len(selection.SEEDS)})"
            if all(w in scores for w in grid):
                c = selection.choose(scores, base)
                row["choice"] = (f"{c.weight:g}" + (f"; grows to {c.needs:g}" if c.needs else "")
                                 + "".join(f"; {f}" for f in c.flags_for(name)))
                if c.needs is None:
                    chosen.append(f"{loss} {kind} {c.weight:g}")
                else:
                    growing.append(f"{loss} {kind} (to {c.needs:g})")
            else:
                row["choice"] = "pending"
                pending.append(f"{loss} {kind}")
            rows.append(row)
        t = pd.DataFrame(rows).fillna(MISSING)
        tables.append(t[["loss", *[c for c in t.columns if c not in ("loss", "choice")], "choice"]])
    n = len(runs)
    first = selection.first_round(len(ex.MAIN_LOSSES))
    text = (f"{n} held-out selection runs are committed (the first round names {first}: {len(ex.MAIN_LOSSES)} losses × "
            f"η = 0, {len(selection.ETA_GRID)} η and {len(selection.L2_GRID)} L2 weights × {len(selection.SEEDS)} "
            f"seeds; a grid grows by a point while its best weight sits at an edge). "
            + (f"Final choices: {', '.join(chosen)}. " if chosen else "No choice is final yet. ")
            + (f"Growing at an edge: {', '.join(growing)}. " if growing else "")
            + (f"Pending: {', '.join(pending)}." if pending else "Every choice is made; " + (
                "the plan is written from them (`plan.json`, below)." if decisive.plan_path(root).exists() else
                "the plan is written next.")))
    return tables[0], tables[1], text


