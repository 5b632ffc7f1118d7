"""Fine-tuning the backbone pretrained here: the paper's protocol transposed to glyphs.

The paper fine-tunes an ImageNet-pretrained BN-Inception with a new embedding layer, separate learning rates for
the backbone and the head, frozen BatchNorm and a step schedule. On glyphs the backbone is the checkpoint of
:mod:`sec_lib.runs.pretrain` (the reference profile's ``smallcnn`` trunk, pretrained on classes no split uses):

* **a new embedding layer**: ``TrainConfig(pretrained=CHECKPOINT)`` loads the trunk; the head (the paper's
  BN1d -> Linear) starts from its seeded random init;
* **frozen BN** (``freeze_bn=True``): the trunk's BatchNorm layers keep the pretraining statistics and affine
  parameters, as the paper's BN-Inception does; the head's BatchNorm trains;
* **a step schedule**: one decay by 0.1 at 5/8 of the run, the rebuttal's CUB schedule (0.1 at 5k of 8k);
* **separate rates for trunk and head, chosen on held-out classes**: every pair of a trunk rate in
  :data:`TRUNK_LRS` and a head/trunk ratio in :data:`HEAD_RATIOS` trains semihard without SEC on the profile's
  held-out training classes with the pilot seed (as the profile's own learning-rate pilot); the pair with the best
  held-out R@1 is used for every loss and variant (ties: the smaller rates). The ratio grid is the rebuttal's:
  its Table 3 sets the head's rate at or below the backbone's in five of six rows (ratios 0.2, 0.5, 1; the sixth,
  CUB with MS, has 50), so the grid holds those three, plus 2, the head:backbone ratio of the authors' public code
  defaults (CUB head 1e-5, backbone 0.5e-5), which the rebuttal does not use. The numbers are copied below
  (:data:`REBUTTAL_TABLE3`) from ``../shared/reference/rebuttal_hyperparameters.md``; nothing reads that file.

Tiers: the quick tier (profile ``cpu``; ``smoke`` for the tests): the book's ``pretrained`` chapter
(:func:`sweep_runs`, after the selection's own wave, :func:`selection_runs`); and the decisive tier
(:mod:`sec_lib.runs.decisive`), under its own schedule, with 3 seeds a rate pair and a grid that grows at an edge
(``decisive_studies.select_finetune``), its rates then fixed in ``choices.json``. The from-scratch twin of every run
is the profile's main-table run (same loss, variant, seed, run length and data; the Adam rate of the profile's
own learning-rate pilot).

    python -m sec_lib.book finetune --profile cpu            # train the selection, then the fine-tuning runs

(the command is :func:`sec_lib.runs.commands.finetune_main`).
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
from scipy import stats

from ..params import Choice
from . import sweeps as sw
from .config import TrainConfig
from .pretrain import committed_provenance, provenance_path
from .selection import SEEDS
from .store import ResultStore

#: The SEC rebuttal's Table 3 (copied from ../shared/reference/rebuttal_hyperparameters.md): (dataset, losses) ->
#: (backbone lr, head lr, decay factor, decay iterations, iterations). T = triplet, SHT = semihard, NNP = N-pair.
REBUTTAL_TABLE3 = {
    ("CUB", "T, SHT"): (5e-6, 2.5e-6, 0.1, (5000,), 8000),
    ("CUB", "NNP"): (1e-5, 5e-6, 0.1, (5000,), 8000),
    ("CUB", "MS"): (5e-7, 2.5e-5, 0.1, (5000,), 8000),
    ("Cars", "T, SHT, NNP"): (1e-5, 1e-5, 0.5, (4000, 6000), 8000),
    ("Cars", "MS"): (4e-5, 4e-5, 0.1, (2000,), 8000),
    ("SOP, In-Shop", "T, SHT, NNP, MS"): (5e-4, 1e-4, 0.1, (6000,), 12000),
}
SOURCE = "SEC rebuttal, Table 3 (../shared/reference/rebuttal_hyperparameters.md)"
#: The head:backbone ratio of the authors' public code defaults (CUB: head 1e-5, backbone 0.5e-5).
AUTHORS_CODE_RATIO = 2.0
#: Head/trunk ratios of the held-out choice: the rebuttal's ratios at or below 1, and the authors' code default.
HEAD_RATIOS = tuple(sorted({round(h / b, 6) for b, h, *_ in REBUTTAL_TABLE3.values() if h <= b}
                           | {AUTHORS_CODE_RATIO}))
#: Trunk (Adam) rates of the held-out choice. First 3e-5 ... 1e-3 (the from-scratch pilot's grid moved down, for
#: weights that start trained); the quick tier chose 1e-3, its edge, so the grid now spans the from-scratch pilot's
#: rates too.
TRUNK_LRS = (1e-4, 3e-4, 1e-3, 3e-3, 1e-2)
#: The grid each profile's held-out selection trains: (trunk rates, head/trunk ratios). ``cpu`` (``make book``) keeps
#: the middle three trunk rates of :data:`TRUNK_LRS`, for the book's build time (12 runs instead of 20): on the full
#: grid (cpu profile, semihard, 200 held-out classes, pilot seed; trained once in a scratch store before the cut),
#: held-out R@1 peaked at trunk 1e-3 with ratio 0.2 (89.3) and both rates outside the kept three lost at every
#: ratio (1e-4: 87.2-87.6; 1e-2: 60.8-78.3), so the edge rule still brackets the choice. ``smoke`` (tests) trains
#: one rate and two ratios.
GRIDS = {"smoke": ((1e-3,), (0.2, AUTHORS_CODE_RATIO)), "cpu": (TRUNK_LRS[1:4], HEAD_RATIOS),
         "decisive": (TRUNK_LRS, HEAD_RATIOS),
         # the gpu tier: the cpu profile's 12 pairs, one seed a pair (as its η selection), about one GPU window
         "gpu": (TRUNK_LRS[1:4], HEAD_RATIOS)}
#: The decisive tier's trunk-rate grid grows by this factor at an edge (its rates are half-decades).
TRUNK_FACTOR = 3.0
#: The step schedule: one decay at this fraction of the run, by :data:`DECAY` (the rebuttal's CUB rows: 0.1 at 5k of 8k).
MILESTONE_FRACTION = 5 / 8
DECAY = 0.1
#: Profiles whose book chapter has a fine-tuning arm (the quick tier; smoke for the tests; the decisive tier,
#: :mod:`sec_lib.runs.decisive`).
FINETUNE_PROFILES = ("smoke", "cpu", "decisive")
#: Every profile that fine-tunes: those, and the gpu profile, whose fine-tuning runs are stages of the gpu tier
#: (:func:`sec_lib.runs.gpu_tier.stages`), not a chapter's.
PROFILES = FINETUNE_PROFILES + ("gpu",)
#: Whose pretrained trunk (:data:`sec_lib.runs.pretrain.PROFILE_CONFIGS`) each profile fine-tunes: the gpu profile its
#: ResNet-18's; every other one the reference profile's smallcnn.
TRUNKS = {"gpu": "gpu"}


def profile_of(profile) -> sw.Profile:
    """The fine-tuning profile named (or given) ``profile``; ParameterError naming the valid ones."""
    p = sw.glyph_profile(profile) if isinstance(profile, str) else profile
    Choice(PROFILES).check("profile", p.name)
    return p


def settings(profile, iterations: int | None = None) -> dict:
    """The TrainConfig settings every fine-tuning run of ``profile`` adds to the profile's base: the committed
    checkpoint of its trunk (:data:`TRUNKS`; repository-relative, so that the store key does not depend on the
    checkout's place) and the trunk's architecture, width and image size, frozen BN, Adam, the step schedule (the
    decisive and gpu tiers: their own schedule, so that a twin differs only in its start and the protocol).
    FileNotFoundError, naming the command, while that checkpoint is not committed."""
    p = profile_of(profile)
    trunk = TRUNKS.get(p.name, "reference")
    ck = committed_provenance(profile=trunk)["config"]   # as pretrained (read on any machine: a GPU's too)
    n = iterations or p.base["iterations"]
    if p.name in ("decisive", "gpu"):
        sched = {"schedule": p.base["schedule"], "lr_milestones": tuple(p.base.get("lr_milestones", ()))}
    else:
        sched = {"schedule": "step", "lr_milestones": (max(1, round(MILESTONE_FRACTION * n)),), "lr_decay": DECAY}
    return dict(pretrained=str(provenance_path(trunk).with_suffix(".pt")), model=ck["arch"], width=ck["width"],
                image_size=ck["image_size"], freeze_bn=True, optimizer="adam", **sched)


def grid(profile) -> tuple[tuple, tuple]:
    """(trunk rates, head/trunk ratios) that ``profile``'s selection trains (:data:`GRIDS`)."""
    return GRIDS[profile_of(profile).name]


def selection(profile, lrs=None) -> list[TrainConfig]:
    """The held-out choice of the two rates: semihard without SEC, every (trunk rate, head ratio) pair of the
    profile's :func:`grid` (``lrs``: these trunk rates instead, a grown grid), on its held-out training classes with
    its pilot seed (never the test classes); the decisive tier: 3 seeds a pair
    (:data:`sec_lib.runs.selection.SEEDS`), evaluated at the end only."""
    p = profile_of(profile)
    grid_lrs, ratios = grid(p)
    if p.name == "decisive":
        seeds, extra = SEEDS, {"eval_every": 0}
    else:
        seeds, extra = (p.pilot_seed,), {}
    return [sw.config(p, "semihard", "none", seed, **settings(p), holdout_classes=p.holdout_classes, lr=lr,
                      lr_head=lr * r, **extra) for lr in (lrs or grid_lrs) for r in ratios for seed in seeds]


def chosen_rates(profile, store: ResultStore) -> tuple[float, float]:
    """(trunk lr, head lr) with the best held-out R@1 of :func:`selection` (ties: smaller trunk rate, then smaller
    ratio). Raises :class:`~sec_lib.runs.experiments.SelectionError` when the trunk rate sits at an edge of its grid
    (the grid does not bracket the optimum), unless the profile turns that check off. The ratio is not a bracket
    search: its grid is the set of conventions the sources give (the rebuttal's ratios and the authors' code's),
    and the choice is among them."""
    p = profile_of(profile)
    lrs, ratios = grid(p)
    if p.fixed_choices:                      # the decisive tier: chosen by its own stage (decisive_studies.later_studies)
        return sw.fixed_choice(p, "lr", "finetune"), sw.fixed_choice(p, "lr", "finetune-head")
    if isinstance(store, sw.AnyChoice):      # checking configs before the selection exists: an interior pair
        return lrs[len(lrs) // 2], lrs[len(lrs) // 2] * ratios[0]
    runs = sw.stored_runs(store, selection(p), "the fine-tuning rate selection", p)
    best = max(runs, key=lambda r: (sw.run_score(r), -r.config.lr, -(r.config.lr_head / r.config.lr)))
    lr, ratio = best.config.lr, best.config.lr_head / best.config.lr
    if p.check_grid_edges:
        if np.isclose(lr, lrs[0]) or np.isclose(lr, lrs[-1]):
            raise sw.SelectionError(f"profile {p.name!r}: the fine-tuning selection chose trunk rate {lr:g} (head/trunk "
                                    f"ratio {ratio:g}), at an edge of its grid {lrs}; widen GRIDS[{p.name!r}] in "
                                    "sec_lib/runs/finetune.py")
    return lr, best.config.lr_head


def scratch_arms(p: sw.Profile, store) -> list[TrainConfig]:
    """The from-scratch runs the fine-tuning arm mirrors. The quick tier: its main table (none, L2-reg, SEC at the
    paper's η). The decisive tier: none, L2-reg
    and SEC at their held-out weights and relative SEC at its held-out η, 5 seeds each; every one is a run of its
    main comparison or of its scale chapter."""
    if p.name != "decisive":
        return sw.main_table(p, store)
    return [c for loss in sw.MAIN_LOSSES for s in p.floor_seeds for c in (
        sw.config(p, loss, "none", s), sw.config(p, loss, "l2reg", s, eta=sw.fixed_choice(p, "zero", loss)),
        sw.config(p, loss, "sec", s, eta=sw.fixed_choice(p, "sec", loss)),
        sw.config(p, loss, "sec", s, eta=sw.fixed_choice(p, "relative", loss), relative=True))]


def runs(profile, store: ResultStore) -> list[TrainConfig]:
    """The fine-tuning runs: each run of :func:`scratch_arms` started from the checkpoint instead, at the chosen
    rates; each has its from-scratch twin there (:func:`twin`)."""
    p = profile_of(profile)
    lr, lr_head = chosen_rates(p, store)
    return [dataclasses.replace(c, **settings(p), lr=lr, lr_head=lr_head) for c in scratch_arms(p, store)]


def scratch_config(q: sw.Profile, cfg: TrainConfig) -> TrainConfig:
    """The from-scratch run of ``q`` with ``cfg``'s loss, regularizer (η, μ = 0 or the batch mean, relative) and
    seed: a fine-tuning run's twin."""
    variant = "none" if cfg.eta == 0 else "l2reg" if cfg.mu == "zero" else "sec"
    extra = {"eta": cfg.eta} if cfg.eta else {}
    return sw.config(q, cfg.loss, variant, cfg.seed, **extra, **({"relative": True} if cfg.relative else {}))


def twin(profile, cfg: TrainConfig, store) -> TrainConfig:
    """The from-scratch run of the profile's main table that ``cfg`` (a fine-tuning run) is compared with: the
    book's own run, at the Adam rate and run length its learning-rate pilot chose on held-out classes
    (:func:`~sec_lib.runs.experiments.tuned`; ``store`` holds that pilot)."""
    return scratch_config(sw.tuned(profile_of(profile), "adam", store), cfg)


#: The two regimes of the chapter's runs (its sweep label ``regime``), in the page's order.
REGIMES = ("fine-tuned", "from scratch")


def sweep_runs(q: sw.Profile, store) -> list[tuple[TrainConfig, dict]]:
    """The ``pretrained`` chapter's runs with their sweep label ``{"regime": ...}``: each fine-tuning run of
    :func:`runs` and its from-scratch twin, the main-table run of the same loss, variant and seed at ``q``, the
    profile already tuned by its learning-rate pilot (``experiments.sweep_configs`` passes it), so the twins are
    the main table's own runs. A profile without a fine-tuning arm (not in :data:`FINETUNE_PROFILES`) has none."""
    if q.name not in FINETUNE_PROFILES:
        return []
    fine = runs(q, store)
    scratch = [scratch_config(q, c) for c in fine]
    return [(c, {"regime": REGIMES[0]}) for c in fine] + [(c, {"regime": REGIMES[1]}) for c in scratch]


def selection_runs(q: sw.Profile, store=None) -> list[TrainConfig]:
    """The held-out rate selection as a sweep (``experiments.SWEEPS['ftrates']``; trained in its own wave before
    the chapters' runs); none for a profile without a fine-tuning arm."""
    return selection(q) if q.name in FINETUNE_PROFILES else []


def scratch_pilot(profile) -> list[TrainConfig]:
    """The learning-rate pilot runs the from-scratch twins need (the Adam arm of the profile's pilot)."""
    return [c for c in sw.lr_pilot(profile_of(profile)) if c.optimizer == "adam" and c.eta == 0]


def _t_interval(x: np.ndarray, level: float = 0.95) -> tuple[float, float, float]:
    """(mean, lower, upper) of a t interval over ``x`` (NaN bounds with fewer than 2 values)."""
    x = np.asarray(x, float)
    m = float(x.mean())
    if len(x) < 2:
        return m, float("nan"), float("nan")
    h = float(stats.t.ppf(0.5 + level / 2, len(x) - 1) * x.std(ddof=1) / np.sqrt(len(x)))
    return m, m - h, m + h


def summary(profile, store) -> dict[str, pd.DataFrame]:
    """The fine-tuning runs beside their from-scratch twins, from the store (KeyError naming the command when one
    is missing). Returns ``{"runs": one row per run (regime, loss, variant, seed, R@1, the raw-norm mean, variance
    and CV of the first step's batch and of the test embeddings), "effects": per loss, variant (L2-reg, SEC) and
    regime the effect on R@1 against no regularizer, paired by seed (mean and 95% t interval), and per loss and
    variant the interaction (fine-tuned effect - from-scratch effect), also paired by seed}``. A summary for the
    quick tier, not the page's declared analysis."""
    p = profile_of(profile)
    rows = []
    for c in runs(p, store):
        for regime, cfg in (("fine-tuned", c), ("from scratch", twin(p, c, store))):
            r = store.get(cfg, tables=("steps",))
            if r is None:
                raise KeyError(f"run not in the store {store.root}: {cfg}; train it with `python -m "
                               f"sec_lib.runs.finetune --profile {p.name} --scratch`")
            first = r.steps.iloc[0]
            m = r.metrics
            rows.append({"regime": regime, "loss": cfg.loss, "variant": cfg.variant, "seed": cfg.seed, "R@1": m["R@1"],
                         "start_norm_mean": float(first["norm_mean"]), "start_norm_var": float(first["norm_var"]),
                         "start_norm_cv": float(np.sqrt(first["norm_var"]) / first["norm_mean"]),
                         "test_norm_mean": m["test_norm_mean"], "test_norm_var": m["test_norm_var"],
                         "test_norm_cv": float(np.sqrt(m["test_norm_var"]) / m["test_norm_mean"])})
    df = pd.DataFrame(rows)
    wide = df.pivot_table(index=["loss", "seed"], columns=["regime", "variant"], values="R@1")
    eff = []
    for loss in sw.MAIN_LOSSES:
        w = wide.loc[loss]
        for variant in ("l2reg", "sec"):
            d = {g: (w[(g, variant)] - w[(g, "none")]).to_numpy() for g in ("fine-tuned", "from scratch")}
            for what, x in (("fine-tuned", d["fine-tuned"]), ("from scratch", d["from scratch"]),
                            ("interaction", d["fine-tuned"] - d["from scratch"])):
                mean, lo, hi = _t_interval(x)
                eff.append({"loss": loss, "variant": variant, "effect": what, "mean": mean, "ci_low": lo, "ci_high": hi,
                            "seeds": len(x)})
    return {"runs": df, "effects": pd.DataFrame(eff)}
