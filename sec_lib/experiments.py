"""What each chapter of the book trains, per profile: the single source of truth for the sweeps.

Every chapter asks this module for its list of :class:`~sec_lib.train.TrainConfig` and loads the
results from the store; the runner (``sec_lib.site.runner``) trains the union of all lists first, so a
run shared by two chapters (the main table's runs are also points of the η sweep) trains once.

Selection is explicit: :func:`chosen_lr` and :func:`chosen_eta` take the pilot / selection runs, and
:func:`tuned`, :func:`chapter_configs` and :func:`all_configs` take the
:class:`~sec_lib.store.ResultStore` to read them from. Nothing here opens a default store or trains;
a missing pilot or selection run is a KeyError that says which runner command makes it.

Profiles:

* ``smoke``: tiny settings that exercise every code path in seconds (tests);
* ``cpu``: what ``make book`` runs on a 2-core machine within its 20-minute budget;
* ``gpu``: larger images, a ResNet-18, more iterations and seeds; never needed for the build.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from .params import Choice
from .store import ResultStore, run_key
from .train import TrainConfig

MAIN_LOSSES = ("triplet", "semihard", "npair", "ms")
VARIANTS = ("none", "l2reg", "sec")
PROFILE_NAMES = ("smoke", "cpu", "gpu")

# SEC weight per loss used in the main table, fixed before any run (not tuned on our test data):
# semihard 0.5 is the rebuttal's Cars setting (rebuttal Table 2); triplet 1.0 is the authors' public
# example (Dyfine/SphericalEmbedding, mytrain.sh: --use_loss triplet --sec_wei 1.0); the others use 1.0.
# The eta chapter shows how the verdicts move with eta.
# L2-reg (μ = 0) weight 0.005: the rebuttal's Table 2 row that matches the paper's main-table
# semihard/Cars "l2reg" entry (R@1 82.60).
ETA_SEC = {"triplet": 1.0, "semihard": 0.5, "npair": 1.0, "ms": 1.0, "tml": 1.0, "cosface": 1.0}
# Losses the review asked about beyond the main four (tuplet margin; a cosine-softmax loss),
# trained on glyphs with and without SEC at the η chosen on held-out classes.
EXTRA_LOSSES = ("tml", "cosface")
ETA_L2 = 0.005


@dataclass(frozen=True)
class Profile:
    name: str
    base: dict                     # TrainConfig fields shared by every glyph run
    seeds: tuple
    eta_grid: tuple                # nonzero η values of the η sweep (must include the ETA_SEC values)
    l2_etas: tuple                 # μ = 0 weights of the "which μ" chapter (rebuttal Table 2)
    ema_momenta: tuple
    fixed_radii: tuple
    lr_pilot: dict                 # optimizer -> candidate learning rates
    pilot_seed: int = 1000         # a seed no reported run uses
    holdout_classes: int = 200     # training classes held out to choose η (never the test classes)
    jobs: int = 2
    toy: dict = field(default_factory=dict)
    toy_etas: tuple = ()
    toy_seeds: tuple = (0,)


PROFILES = {
    "smoke": Profile(
        name="smoke",
        base=dict(dataset="glyphs", image_size=32, train_classes=40, test_classes=20, iterations=6,
                  batch_size=24, eval_every=3, kmeans_n_init=1, track_every=2, track_samples=8, dtheta_every=2,
                  width=8, embed_dim=16),
        seeds=(0, 1), eta_grid=(0.05, 0.5, 1.0), l2_etas=(0.1, 0.005), ema_momenta=(0.1,),
        fixed_radii=(4.0,), lr_pilot={"adam": (1e-3,), "sgd": (0.05,)}, jobs=2, holdout_classes=10,
        toy=dict(dataset="toy", model="mlp", width=32, embed_dim=8, iterations=10, batch_size=24,
                 eval_every=5, track_every=2, track_samples=8, dtheta_every=2, lr=3e-3, data_kwargs={"noise": 0.15}, eval_clustering="final", kmeans_n_init=1),
        toy_etas=(0.1, 1.0), toy_seeds=(0,)),
    "cpu": Profile(
        name="cpu",
        base=dict(dataset="glyphs", image_size=32, test_classes=200, iterations=120, batch_size=60,
                  eval_every=40, eval_clustering="final", kmeans_n_init=1, track_every=5, track_samples=24,
                  dtheta_every=5, width=16, embed_dim=64),
        seeds=(0, 1, 2), eta_grid=(0.005, 0.05, 0.1, 0.5, 1.0, 5.0), l2_etas=(0.1, 0.01, 0.005, 0.001),
        ema_momenta=(0.1, 0.01), fixed_radii=(2.0, 8.0),
        lr_pilot={"adam": (3e-4, 1e-3, 3e-3), "sgd": (0.01, 0.03, 0.1)}, jobs=2,
        toy=dict(dataset="toy", model="mlp", width=64, embed_dim=16, iterations=150, batch_size=60,
                 eval_every=25, track_every=5, track_samples=24, dtheta_every=5, lr=3e-3, data_kwargs={"noise": 0.15}, eval_clustering="final", kmeans_n_init=1),
        toy_etas=(0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0), toy_seeds=(0,)),
    "gpu": Profile(
        name="gpu",
        base=dict(dataset="glyphs", image_size=64, model="resnet18s", width=64, embed_dim=128, iterations=3000,
                  batch_size=120, eval_every=250, track_every=20, track_samples=64, dtheta_every=10,
                  schedule="step", lr_milestones=(2000,), device="cuda"),
        seeds=(0, 1, 2, 3, 4), eta_grid=(0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0),
        l2_etas=(0.1, 0.01, 0.005, 0.001), ema_momenta=(0.1, 0.01), fixed_radii=(2.0, 8.0),
        lr_pilot={"adam": (1e-4, 3e-4, 1e-3), "sgd": (0.01, 0.03, 0.1, 0.3)}, jobs=1,
        toy=dict(dataset="toy", model="mlp", width=128, embed_dim=16, iterations=400, batch_size=120,
                 eval_every=50, track_every=5, track_samples=32, dtheta_every=5, lr=3e-3, data_kwargs={"noise": 0.15}, eval_clustering="final", kmeans_n_init=1),
        toy_etas=(0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0), toy_seeds=(0, 1, 2)),
}


def get_profile(name: str) -> Profile:
    Choice(PROFILE_NAMES).check("profile", name)
    return PROFILES[name]


def with_variant(base: dict, loss: str, variant: str = "none", **changes) -> dict:
    """The one rule from a variant to (η, μ, momentum): ``base`` (TrainConfig fields) with the
    variant's regulariser for ``loss`` (sec: η = ETA_SEC[loss], μ = batch mean; l2reg: η = ETA_L2,
    μ = 0; none: no regulariser), then ``changes``. Without SEC (η = 0) the μ settings are
    irrelevant and are reset, so a run has one store key."""
    Choice(VARIANTS).check("variant", variant)
    out = dict(base)
    if variant == "sec":
        out.update(eta=ETA_SEC.get(loss, 1.0), mu="batch")
    elif variant == "l2reg":
        out.update(eta=ETA_L2, mu="zero")
    out.update(changes)
    if out.get("eta", 0) == 0:
        out.update(eta=0.0, mu="batch", momentum=1.0)
    return out


def config(profile: Profile, loss: str, variant: str = "none", seed: int = 0, **changes) -> TrainConfig:
    """A glyph run of ``profile`` for ``loss`` in one of the paper's variants (none / l2reg / sec)."""
    return TrainConfig(**with_variant(dict(profile.base, loss=loss, seed=seed), loss, variant, **changes))


def stored_runs(store: ResultStore, configs, what: str, profile: Profile) -> list:
    """The stored results of ``configs``; KeyError naming the runner command when one is missing."""
    runs = [store.get(c) for c in configs]
    missing = sum(r is None for r in runs)
    if missing:
        raise KeyError(f"{what} of profile {profile.name!r} is not in the result store {store.root} "
                       f"({missing} of {len(runs)} runs missing); run `python -m sec_lib.book run --profile "
                       f"{profile.name} --only PAGE` first (PAGE: the page you are building, e.g. compare)")
    return runs


# -- chapter sweeps -------------------------------------------------------------------------------

def lr_pilot(profile: Profile) -> list[TrainConfig]:
    """Learning-rate pilot: semihard without SEC, one seed that no reported run uses."""
    return [config(profile, "semihard", "none", profile.pilot_seed, optimizer=opt, lr=lr)
            for opt, lrs in profile.lr_pilot.items() for lr in lrs]


def chosen_lr(profile: Profile, optimizer: str, pilot_runs) -> float:
    """The pilot's learning rate with the best final R@1 (ties: the smaller rate).

    ``pilot_runs``: RunResults of :func:`lr_pilot` (e.g. ``stored_runs(store, lr_pilot(p), ...)``).
    """
    cands = [(r.metrics.get("R@1", float("-inf")) if r.status == "done" else float("-inf"), -r.config.lr, r.config.lr)
             for r in pilot_runs if r.config.optimizer == optimizer]
    if not cands:
        raise ValueError(f"no pilot runs for optimizer {optimizer!r}")
    return max(cands)[2]


def tuned(profile: Profile, optimizer: str, store: ResultStore) -> Profile:
    """The profile with the pilot-chosen learning rate for ``optimizer`` in its base config; the
    pilot's runs are read from ``store``."""
    pilot = stored_runs(store, lr_pilot(profile), "the learning-rate pilot", profile)
    base = dict(profile.base, optimizer=optimizer, lr=chosen_lr(profile, optimizer, pilot))
    return dataclasses.replace(profile, base=base)


def eta_selection(p: Profile) -> list[TrainConfig]:
    """Choosing η without the test classes: every main loss at every η of the grid, trained on the
    training classes minus ``holdout_classes`` and evaluated on those held-out classes (pilot seed)."""
    return [config(p, loss, "sec", p.pilot_seed, eta=eta, holdout_classes=p.holdout_classes)
            for loss in (*MAIN_LOSSES, *EXTRA_LOSSES) for eta in (0.0, *p.eta_grid)]


def chosen_eta(profile: Profile, loss: str, selection_runs) -> float:
    """The nonzero η of the grid with the best held-out R@1 for ``loss`` (ties: the smaller η).

    ``selection_runs``: RunResults of :func:`eta_selection` (for ``tuned(profile, "adam", store)``;
    see :func:`selection_runs`).
    """
    cands = [(r.metrics.get("R@1", float("-inf")) if r.status == "done" else float("-inf"), -r.config.eta, r.config.eta)
             for r in selection_runs if r.config.loss == loss and r.config.eta > 0]
    if not cands:
        raise ValueError(f"no η selection runs for loss {loss!r}")
    return max(cands)[2]


def selection_runs(p: Profile, store: ResultStore) -> list:
    """The stored η selection runs (:func:`eta_selection` at the pilot's Adam rate)."""
    return stored_runs(store, eta_selection(tuned(p, "adam", store)), "the η selection", p)


def tuned_sec(p: Profile, store: ResultStore) -> list[TrainConfig]:
    """The main table's SEC cells again, at the η chosen on held-out classes (plus the none baseline)."""
    sel = selection_runs(p, store)
    return [config(p, loss, "sec", s, eta=chosen_eta(p, loss, sel)) for loss in MAIN_LOSSES for s in p.seeds] + \
        [config(p, loss, "none", s) for loss in MAIN_LOSSES for s in p.seeds]


def beyond(p: Profile, store: ResultStore) -> list[TrainConfig]:
    """Tuplet margin and CosFace, without and with SEC (η chosen on held-out classes)."""
    sel = selection_runs(p, store)
    return [config(p, loss, "sec", s, eta=chosen_eta(p, loss, sel)) for loss in EXTRA_LOSSES for s in p.seeds] + \
        [config(p, loss, "none", s) for loss in EXTRA_LOSSES for s in p.seeds]


def main_table(p: Profile) -> list[TrainConfig]:
    return [config(p, loss, v, s) for loss in MAIN_LOSSES for v in VARIANTS for s in p.seeds]


def eta_sweep(p: Profile) -> list[TrainConfig]:
    return [config(p, loss, "sec", s, eta=eta) for loss in MAIN_LOSSES for eta in (0.0, *p.eta_grid)
            for s in p.seeds]


MU_LOSSES = ("semihard", "ms")


def mu_settings(p: Profile, loss: str) -> list[tuple[str, dict]]:
    """(label, config changes) for the "which μ" chapter."""
    eta = ETA_SEC[loss]
    out = [("none", dict(eta=0.0)), ("batch mean", dict(eta=eta, mu="batch"))]
    out += [(f"EMA ρ={m:g}", dict(eta=eta, mu="ema", momentum=m)) for m in p.ema_momenta]
    out += [(f"zero η={e:g}", dict(eta=e, mu="zero")) for e in p.l2_etas]
    out += [(f"fixed r={r:g}", dict(eta=eta, mu=r)) for r in p.fixed_radii]
    return out


def mu_ablation(p: Profile) -> list[TrainConfig]:
    return [config(p, loss, "none", s, **ch) for loss in MU_LOSSES for _, ch in mu_settings(p, loss) for s in p.seeds]


BN_HEADS = ("nobn", "paper", "bn_before_norm", "weightnorm")


def bn_wn(p: Profile) -> list[TrainConfig]:
    return [config(p, "semihard", v, s, head=h) for h in BN_HEADS for v in ("none", "sec") for s in p.seeds]


def norm_layer(p: Profile) -> list[TrainConfig]:
    return [config(p, "semihard", v, s, head=h) for h in ("paper", "normalize") for v in ("none", "sec")
            for s in p.seeds]


def optim(p: Profile, store: ResultStore) -> list[TrainConfig]:
    """Every main loss, with and without SEC, under Adam and SGD (each at its pilot-chosen rate)."""
    out = []
    for opt in ("adam", "sgd"):
        q = tuned(p, opt, store)
        out += [config(q, loss, v, s) for loss in MAIN_LOSSES for v in ("none", "sec") for s in p.seeds]
    return out


def toy_grid(p: Profile) -> list[TrainConfig]:
    """The explorer's dense grid on the toy data: η (0 and toy_etas) × μ mode × loss."""
    out = []
    for loss in ("semihard", "npair"):
        for mu in ("batch", "ema", "zero", 4.0):
            for eta in (0.0, *p.toy_etas):
                for s in p.toy_seeds:
                    out.append(TrainConfig(**with_variant(dict(p.toy, loss=loss, seed=s), loss, "none", eta=eta,
                                                          mu=mu, momentum=0.1 if mu == "ema" else 1.0)))
    return out


CHAPTERS = {
    "compare": main_table, "tuned": tuned_sec, "selection": eta_selection, "beyond": beyond, "norms": main_table, "convergence": main_table, "instability": main_table,
    "eta": eta_sweep, "mu": mu_ablation, "bnwn": bn_wn, "normlayer": norm_layer, "optim": optim,
    "explore": toy_grid,
}


#: Chapter sweeps that read selection runs (the pilot's or the η selection's) from the store.
_READS_STORE = (tuned_sec, beyond, optim)


def chapter_configs(chapter: str, profile: "Profile | str", store: ResultStore) -> list[TrainConfig]:
    """The runs a chapter shows. Adam runs use the learning-rate pilot's choice, so the pilot
    (:func:`lr_pilot`) must be in ``store`` first; ``optim`` and the toy grid handle rates themselves."""
    Choice(tuple(CHAPTERS)).check("chapter", chapter)
    p = get_profile(profile) if isinstance(profile, str) else profile
    fn = CHAPTERS[chapter]
    if fn is toy_grid:
        return fn(p)
    q = p if fn is optim else tuned(p, "adam", store)
    return fn(q, store) if fn in _READS_STORE else fn(q)


def all_configs(profile: "Profile | str", store: ResultStore, chapters=None) -> list[TrainConfig]:
    """The union of the chapters' runs (each run once), after the pilot has run."""
    out = {}
    for ch in chapters or CHAPTERS:
        for c in chapter_configs(ch, profile, store):
            out.setdefault(run_key(c), c)
    return list(out.values())
