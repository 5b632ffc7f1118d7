"""The runs index: every seed of the main table's runs of the page's tier (the quick tier in the published book;
the twelve run pages show seed 0), which tier that is and which tier the book's verdicts come from, and the per-run
data of this build's tier and of the committed tiers (``data/reference/<tier>/``; the decisive tier's stage folders
joined into one file each, the retired tiers listed without downloads) and registered follow-ups
(``data/followups/<name>/``) to download: the runs table (one row per
run, its full config as JSON, final metrics, provenance), the evaluation curves and the per-step log (decimated),
as parquet files and the runs table as CSV."""
from __future__ import annotations

import io
import json

import pandas as pd

from ..runs import experiments as ex
from ..runs import tier
from ..runs.store import ResultStore, load_runs, run_key
from ..analysis.tiers import tier_label
from . import profile_param
from .common import MAIN_SWEEP, beside_cv, load, loss_noun, order_rows, with_norm_cv
from .evidence import LONG_TIERS, evidence_profile, page_of

#: The notebook's parameters (checked by ``sec_lib.params.notebook_params``).
PARAMS = profile_param()

#: Columns of the index (those present are shown); the train norm variance has its CV (std / mean) beside it.
INDEX_COLUMNS = ("loss", "variant", "eta", "seed", "status", "R@1", "NMI", "F1", "train_norm_var", "train_norm_cv")
#: The per-step log keeps at most this many steps per run in the download (first and last kept).
DOWNLOAD_STEPS = 50
#: The committed tiers' per-step log keeps at most this many steps per run in the download: the decisive tier has
#: nearly a thousand runs, and the whole log (about 250 steps a run) is in the repository.
COMMITTED_STEPS = 20
#: The committed tier files the page offers (the others are in the repository).
TIER_FILES = ("runs", "evals", "steps")
PAGE_SEED = 0          # the seed of the twelve run pages (chapters.TRAIN_PAGES)


def run_index(profile, root=None) -> pd.DataFrame:
    """Every run of the main table of ``profile``'s tier (every loss, variant and seed) with its final numbers, and
    whether a run page shows it (only seed 0 has one); ``attrs``: the tier's ``profile`` and its run length
    (``iterations``, a tuple), which the sentences that name the tier read."""
    runs = with_norm_cv(load(MAIN_SWEEP, profile, tables=(), root=root).runs)
    cols = [c for c in beside_cv(INDEX_COLUMNS, runs.columns) if c in runs.columns]
    out = order_rows(runs[cols + ["key"]].sort_values("seed", kind="stable"))
    out["run page"] = ["yes" if s == PAGE_SEED else "" for s in out["seed"]]
    out["key"] = out["key"].str[:12]
    out = out.reset_index(drop=True)
    # the tier and its run length, for the sentences that say which tier the index is (not columns: one value a tier)
    out.attrs["profile"] = profile if isinstance(profile, str) else profile.name
    out.attrs["iterations"] = (tuple(sorted(int(i) for i in runs["iterations"].dropna().unique()))
                               if "iterations" in runs else ())
    return out


def _parquet(df: pd.DataFrame) -> bytes:
    buf = io.BytesIO()
    df.to_parquet(buf, index=False, compression="zstd")
    return buf.getvalue()


def _decimate_steps(steps: pd.DataFrame, max_steps: int) -> pd.DataFrame:
    if steps.empty or "key" not in steps.columns:
        return steps
    return pd.concat([tier.decimate(g, "step", max_steps) for _, g in steps.groupby("key", sort=False)],
                     ignore_index=True)


def tier_frames(profile, root=None, max_steps: int = DOWNLOAD_STEPS) -> dict:
    """This build's runs of ``profile`` (every run the store holds for it, pilot and selection
    included) as {"runs", "evals", "steps"} frames; ``steps`` keeps at most ``max_steps`` steps per run."""
    if max_steps < 2:
        raise ValueError(f"max_steps = {max_steps!r} is not valid; expected an integer >= 2")
    store = ResultStore(root)
    uniq = {}
    for c in ex.profile_configs(profile, store):
        uniq.setdefault(run_key(c), c)
    frames = load_runs(list(uniq.values()), root=root, tables=("evals", "steps"), missing="skip")
    runs = frames.runs.copy()
    runs["config"] = [json.dumps(uniq[k].to_dict(), sort_keys=True, default=str) if k in uniq else ""
                      for k in runs["key"]]
    return {"runs": runs, "evals": frames.evals, "steps": _decimate_steps(frames.steps, max_steps)}


def tier_downloads(profile, root=None, max_steps: int = DOWNLOAD_STEPS) -> list[tuple[str, bytes, str]]:
    """(file name, bytes, what it is) for this build's tier: runs as CSV and parquet, curves as parquet."""
    f = tier_frames(profile, root, max_steps)
    n = len(f["runs"])
    return [(f"{profile}_runs.csv", f["runs"].to_csv(index=False).encode(), f"the {n} runs, one row each"),
            (f"{profile}_runs.parquet", _parquet(f["runs"]), "the same as parquet"),
            (f"{profile}_evals.parquet", _parquet(f["evals"]), f"evaluation curves ({len(f['evals'])} rows)"),
            (f"{profile}_steps.parquet", _parquet(f["steps"]),
             f"per-step log, at most {max_steps} steps per run ({len(f['steps'])} rows)")]


#: Registered follow-ups (``data/followups/<name>/``, each with its README) are listed with the committed tiers
#: under this prefix: ``followup-sgd-rates``, Q6c's.
FOLLOWUP = "followup-"


def committed_tiers(root=None) -> dict:
    """{tier: {file name: [(stage, path), ...]}} of the committed tiers present under ``data/reference/``, then of
    the registered follow-ups under ``data/followups/`` (named :data:`FOLLOWUP` + folder): a tier's own files (stage
    None), or for a staged tier (one folder per stage: the decisive tier, :func:`sec_lib.runs.tier.stage_dirs`)
    each stage's file, in stage order. Retired tiers are included (:data:`sec_lib.runs.tier.RETIRED_TIERS`:
    :func:`committed_summary` labels them, :func:`committed_downloads` leaves them out)."""
    base = tier.tier_dir("x", root).parent
    out = {}
    for prefix, where in (("", base), (FOLLOWUP, base.parent / "followups")):
        for d in sorted(where.iterdir()) if where.is_dir() else []:
            parts = [(None, d)] if (d / "runs.parquet").is_file() else [(s.name, s) for s in tier.stage_dirs(d)]
            name = prefix + d.name
            files = {f"{name}_{t}.parquet": [(stage, f / f"{t}.parquet") for stage, f in parts
                                             if (f / f"{t}.parquet").is_file()] for t in TIER_FILES}
            files = {n: found for n, found in files.items() if found}
            if files:
                out[name] = files
    return out


def folder_of(name: str) -> str:
    """The repository folder of a committed tier or follow-up named as :func:`committed_tiers` names it."""
    return (f"data/followups/{name[len(FOLLOWUP):]}/" if name.startswith(FOLLOWUP) else f"data/reference/{name}/")


def display_name(name: str) -> str:
    """'decisive tier', 'follow-up sgd-rates': how the page names what :func:`committed_tiers` lists."""
    return f"follow-up {name[len(FOLLOWUP):]}" if name.startswith(FOLLOWUP) else f"{name} tier"


def committed_table(parts: list, table: str) -> pd.DataFrame:
    """One table of a committed tier from its ``parts`` (:func:`committed_tiers`): the file itself, or a staged
    tier's stage files joined, each run's rows taken from the first stage whose runs table holds it (as
    :class:`sec_lib.runs.tier.StagedTier` reads it); a staged tier's runs table gains a ``stage`` column, the folder
    each run came from."""
    if len(parts) == 1 and parts[0][0] is None:
        return pd.read_parquet(parts[0][1])
    frames, owned = [], set()
    for stage, path in parts:
        df = pd.read_parquet(path)
        runs_file = path.parent / "runs.parquet"
        mine = set(pd.read_parquet(runs_file, columns=["key"])["key"]) if runs_file.is_file() else set()
        if "key" in df.columns:
            df = df[~df["key"].isin(owned)]
        if table == "runs" and stage is not None:
            df = df.assign(stage=stage)
            df = df[["key", "stage", *[c for c in df.columns if c not in ("key", "stage")]]]
        frames.append(df)
        owned |= mine
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _stages(files: dict) -> list:
    """The stage folders of a committed tier (:func:`committed_tiers`' entry), [] for a tier in one folder."""
    return [stage for stage, _ in next(iter(files.values())) if stage is not None]


def committed_downloads(root=None, max_steps: int = COMMITTED_STEPS) -> list[tuple[str, bytes, str]]:
    """(file name, bytes, what it is) of each current committed tier's runs table, evaluation curves and per-step
    log, the last thinned to at most ``max_steps`` steps per run (the full log is in the repository); a staged
    tier's stage folders joined into one file each (:func:`committed_table`). A retired tier
    (:data:`sec_lib.runs.tier.RETIRED_TIERS`) has none: no page reads it, and its files stay in the repository."""
    out = []
    for prof, files in committed_tiers(root).items():
        if prof in tier.RETIRED_TIERS:
            continue
        stages = _stages(files)
        joined = f", its {len(stages)} stage folders joined" if stages else ""
        for name, parts in files.items():
            table = name[len(prof) + 1:-len(".parquet")]
            what = {"runs": "runs table", "evals": "evaluation curves",
                    "steps": f"per-step log, at most {max_steps} steps per run"}.get(table, table)
            what = f"{display_name(prof)}, {what}{joined}" + (" (column stage: the folder)"
                                                      if stages and table == "runs" else "")
            if table == "steps":
                data = _parquet(_decimate_steps(committed_table(parts, table), max_steps))
            elif stages:
                data = _parquet(committed_table(parts, table))
            else:
                data = parts[0][1].read_bytes()
            out.append((name, data, what))
    return out


def committed_summary(root=None) -> pd.DataFrame:
    """Per committed tier: how many runs, losses and seeds its runs table holds (a staged tier's stages joined),
    its folder, and whether it is current or retired (:func:`sec_lib.analysis.tiers.tier_label`; a retired tier with
    the tier that replaced it and the last commit that holds it whole)."""
    rows = []
    for prof, files in committed_tiers(root).items():
        name = f"{prof}_runs.parquet"
        runs = committed_table(files[name], "runs") if name in files else pd.DataFrame()
        stages = _stages(files)
        folder = folder_of(prof) + (f" ({len(stages)} stage folder{'s' * (len(stages) != 1)})" if stages else "")
        if prof in tier.RETIRED_TIERS:
            status = "retired" + (f": replaced by the {tier.REPLACED_BY[prof]} tier" if prof in tier.REPLACED_BY
                                  else "") + (f"; whole at commit {tier.RETIRED_AT[prof]}" if prof in tier.RETIRED_AT
                                              else "") + "; no downloads here"
        elif prof.startswith(FOLLOWUP):
            status = f"a registered follow-up: its README ({folder_of(prof)}README.md) holds its plan"
        else:
            status = "current"
        rows.append({"tier": display_name(prof) if prof.startswith(FOLLOWUP) else tier_label(prof), "runs": len(runs),
                     "done": int((runs["status"] == "done").sum()) if "status" in runs else 0,
                     "losses": runs["loss"].nunique() if "loss" in runs else 0,
                     "seeds": runs["seed"].nunique() if "seed" in runs else 0,
                     "folder": folder, "status": status})
    return pd.DataFrame(rows, columns=["tier", "runs", "done", "losses", "seeds", "folder", "status"])


def committed_sentence(root=None) -> str:
    """What the committed tiers' downloads are, computed from what is committed: a staged tier's stages joined,
    a retired tier left out (and where it is kept)."""
    tiers = committed_tiers(root)
    if not tiers:
        return "No tier is committed in this checkout."
    out = []
    for prof, files in tiers.items():
        stages = _stages(files)
        if prof in tier.RETIRED_TIERS:
            at = (f" (commit `{tier.RETIRED_AT[prof]}` holds it whole; see its README)"
                  if prof in tier.RETIRED_AT else "")
            by = f", replaced by the {tier.REPLACED_BY[prof]} tier" if prof in tier.REPLACED_BY else ""
            out.append(f"The {prof} tier is retired{by}: no page reads it, so it is listed for its history only and "
                       f"its files are not among the downloads; they stay in the repository under "
                       f"`{folder_of(prof)}`{at}.")
        elif stages:
            out.append(f"The {display_name(prof)} is committed one folder per stage ({len(stages)} stage "
                       f"folder{'s' * (len(stages) != 1)}); each of "
                       "its downloads joins them into one file, each run once, and its runs table's `stage` column "
                       "names the folder a run came from.")
    return " ".join(out)


def tier_name(profile: str, iterations=()) -> str:
    """How the page names the tier of ``profile``'s runs: a committed long tier with its folder, else the quick tier
    of that profile (trained by ``make book``), with the run length where it is known."""
    its = f", {'/'.join(f'{int(i):,}' for i in iterations)} iterations" if len(iterations) else ""
    if profile in LONG_TIERS:
        return f"the {profile} tier (committed under `data/reference/{profile}/`{its})"
    return f"the quick tier (profile `{profile}`{its}, trained by `make book`)"


def verdict_tier(profile: str, root=None) -> str:
    """The tier whose runs the compare page's main comparison reads when the book runs at ``profile`` (the tier
    of the book's verdicts: :func:`sec_lib.chapters.evidence.evidence_profile`)."""
    try:
        return evidence_profile(profile, page_of("compare").evidence_sweeps, root)
    except (KeyError, ValueError):
        return profile


def verdict_index(profile: str, root=None) -> pd.DataFrame | None:
    """:func:`run_index` of the tier the book's verdicts come from (:func:`verdict_tier`), or None where that is
    ``profile``'s own tier. Its ``attrs["profile"]`` names the tier."""
    shown = verdict_tier(profile, root)
    return None if shown == profile else run_index(shown, root)


def _shape(index: pd.DataFrame) -> str:
    return (f"{index['loss'].nunique()} losses × {index['variant'].nunique()} variants × "
            f"{index['seed'].nunique()} seeds")


def tier_answer(index: pd.DataFrame, profile: str, verdicts: pd.DataFrame | None = None) -> str:
    """The page's answer: which tier its run pages and index show (``index``: :func:`run_index` of ``profile``),
    and which tier the book's verdicts come from (``verdicts``: :func:`verdict_index`; None: the same tier)."""
    pages = int((index["run page"] == "yes").sum()) if "run page" in index else 0
    text = (f"**Which runs these are.** The {pages} run pages of this section and the table of every seed below "
            f"show {tier_name(profile, index.attrs.get('iterations', ()))}")
    if verdicts is None:
        return text + ". The main comparison on [the compare page](compare.html) reads the same runs."
    shown = verdicts.attrs.get("profile", "decisive")
    its = verdicts.attrs.get("iterations", ())
    length = f" of {'/'.join(f'{int(i):,}' for i in its)} iterations" if len(its) else ""
    return (text + ". The book's verdicts do not come from these runs: they come from the **"
            f"{shown} tier**, whose main comparison on [the compare page](compare.html) holds {len(verdicts)} "
            f"runs{length} ({_shape(verdicts)}), committed under `data/reference/{shown}/`, with its run length and "
            "weights chosen on held-out training classes. Its per-run data is among the downloads at the end of "
            "this page.")


def _weights(index: pd.DataFrame, variant: str) -> pd.Series:
    rows = index[index["variant"] == variant]
    return rows.groupby("loss", sort=False)["eta"].first() if len(rows) else pd.Series(dtype=float)


def _listed(weights: pd.Series) -> str:
    return ", ".join(f"{loss_noun(loss)} {w:g}" for loss, w in weights.items())


def weights_sentence(index: pd.DataFrame, verdicts: pd.DataFrame | None = None) -> str:
    """How the regularizer weights of the index's runs were set, read from their own η: SEC at the paper's η
    (:data:`sec_lib.runs.experiments.ETA_SEC`) or not, L2-reg at the fixed :data:`~sec_lib.runs.experiments.ETA_L2`
    or at weights chosen on held-out classes; and, where the book's verdicts come from another tier (``verdicts``:
    :func:`verdict_index`), how that tier set its weights."""
    sec, l2 = _weights(index, "sec"), _weights(index, "l2reg")
    paper = all(w == ex.ETA_SEC.get(loss) for loss, w in sec.items())
    fixed = bool(len(l2)) and (l2 == ex.ETA_L2).all()
    parts = []
    if len(sec):
        parts.append(f"SEC at the paper's η for each loss ({_listed(sec)})" if paper
                     else f"SEC at η chosen on held-out training classes ({_listed(sec)})")
    if len(l2):
        parts.append(f"L2-reg at η = {ex.ETA_L2:g} for every loss" if fixed
                     else f"L2-reg at weights chosen on held-out training classes ({_listed(l2)})")
    if not parts:
        return "These runs have no regularizer weights."
    how = ("were fixed before any run and tuned on no classes at all" if paper and (fixed or not len(l2))
           else "were set before any test run; none was tuned on the test classes")
    text = f"The regularizer weights of these runs {how}: {' and '.join(parts)}."
    if verdicts is None:
        return text
    shown = verdicts.attrs.get("profile", "decisive")
    vl2 = _weights(verdicts, "l2reg")
    chosen = {}
    try:
        p = ex.get_profile(shown)
        chosen = {loss: p.fixed_choices[("sec", loss)] for loss in sec.index if ("sec", loss) in p.fixed_choices}
    except (KeyError, ValueError):
        pass
    l2_txt = f" ({_listed(vl2)})" if len(vl2) else ""
    sec_txt = f" ({_listed(pd.Series(chosen))})" if chosen else ""
    return (text + f" The {shown} tier, whose runs give the book's verdicts, chose its weights on held-out training "
            f"classes instead: its L2-reg weights{l2_txt} and the η of its primary arm, SEC at the selected "
            f"η{sec_txt}; SEC at the paper's η is a secondary arm there ([the compare page](compare.html)).")


def index_sentence(index: pd.DataFrame, profile: str) -> str:
    """What the index shows, computed from it: which tier (:func:`tier_name`), how many runs, and which seed the
    run pages show."""
    pages = int((index["run page"] == "yes").sum())
    failed = int((index["status"] != "done").sum()) if "status" in index else 0
    return (f"The table lists all **{len(index)} runs** of the main table of "
            f"{tier_name(profile, index.attrs.get('iterations', ()))}: {_shape(index)} ({failed} failed). The "
            f"{pages} run pages show seed {PAGE_SEED} only; every other seed is a row here and in the downloads "
            "below.")
