"""Shrink or equalize? The scale chapter's runs: the arms, relative SEC's own held-out η and the
fixed-scale control's radius. :func:`sec_lib.runs.experiments.scale` is the chapter's entry in ``SWEEPS``."""
from __future__ import annotations

import numpy as np

from . import sweeps as sw
from .sweeps import Profile, SelectionError, TrainConfig


#: The scale chapter's arms (``TrainConfig.variant``), in the page's order: no regularizer, L2-reg (μ = 0), plain
#: SEC at its selected η, relative SEC (scale-free, ``relative=True``) at its own selected η, and the fixed-scale
#: control (SEC toward a fixed radius, the loss's median norm without a regularizer, at plain SEC's η); in a profile
#: with ``cir_arm`` (the quick ones) also PML's CenterInvariantRegularizer (:func:`cir_eta`).
SCALE_ARMS = ("none", "l2reg", "sec", "sec-relative", "sec-fixed", "cir")


def relative_selection_runs(p: Profile, store) -> list:
    """The stored runs of relative SEC's η selection (:func:`sec_lib.runs.experiments.relative_selection`) with their η = 0 baselines."""
    need = [c for c in sw.eta_selection(p) if c.loss in sw.MAIN_LOSSES and (c.relative or c.eta == 0)]
    return sw.stored_runs(store, need, "relative SEC's η selection", p)


def chosen_relative_eta(profile: Profile, loss: str, selection_runs) -> float:
    """Relative SEC's weight of ``relative_eta_grid`` with the best held-out R@1 for ``loss`` (ties: the smaller),
    by the rule of :func:`chosen_eta`. ``selection_runs``: RunResults of :func:`relative_selection`."""
    cands = [(sw.run_score(r), r.config.eta) for r in selection_runs
             if r is not None and r.config.loss == loss and r.config.relative and r.config.eta > 0]
    if not cands:
        raise ValueError(f"no relative-SEC selection runs for loss {loss!r} (profile {profile.name!r}, "
                         f"relative_eta_grid {profile.relative_eta_grid})")
    return sw.best_setting(cands)


def fixed_scale_mu(p: Profile, loss: str, store) -> float:
    """The fixed-scale control's radius for ``loss``: the median raw-embedding norm of the η = 0 run of the η
    selection (held-out training classes, pilot seed: never the test classes), to 3 significant digits. SEC toward
    it equalizes the norms at the scale the loss reaches without a regularizer, so it does not shrink them."""
    if isinstance(store, sw.AnyChoice):      # checking configs before the selection exists: any radius will do
        return 1.0
    cfg = sw.config(p, loss, "none", p.pilot_seed, **sw.held_out(p))
    r = store.get(cfg, tables=("test_norms",))
    if r is None:
        raise KeyError(f"the η = 0 selection run of {loss!r} (profile {p.name!r}) is not in the result store "
                       f"{store.root}; run `python -m sec_lib.book run --profile {p.name} --only scale` first")
    norms = r.test_norms["norm"] if r.status == "done" and "norm" in r.test_norms else []
    med = float(np.median(np.asarray(norms, float))) if len(norms) else float("nan")
    if not (np.isfinite(med) and med > 0):
        raise SelectionError(f"profile {p.name!r}: the η = 0 selection run of {loss!r} has no positive median norm "
                             f"(status {r.status!r}, {len(norms)} norms): the fixed-scale control has no radius")
    return float(f"{med:.3g}")


def cir_eta(sec_eta: float, radius: float) -> float:
    """The CIR arm's weight: plain SEC's held-out η over the fixed-scale radius squared (to 3 significant digits).
    CIR is μ²·SEC up to a gap of order the CV (:func:`sec_lib.sec.center_invariant_penalty`), so at the scale the
    loss reaches without a regularizer (the radius, measured on held-out classes) this weight makes CIR's value
    SEC's: the arm asks what PML's regularizer does at SEC's strength, not at a weight tuned on its own."""
    if not (sec_eta > 0 and radius > 0):
        raise ValueError(f"the CIR arm needs SEC's η > 0 and a radius > 0, got η = {sec_eta!r}, radius = {radius!r}")
    return float(f"{sec_eta / radius ** 2:.3g}")


def scale(p: Profile, store) -> list[TrainConfig]:
    """Shrink or equalize? Every main loss over the table's seeds in the :data:`SCALE_ARMS`: none, L2-reg (the main
    table's weight), plain SEC at the η chosen on held-out classes, relative SEC at its own held-out choice
    (:func:`chosen_relative_eta`) and the fixed-scale control (:func:`fixed_scale_mu`, at plain SEC's η), and where
    the profile has ``cir_arm``, PML's CenterInvariantRegularizer at :func:`cir_eta`. The
    none, L2-reg and plain-SEC runs are those of the main table and the tuned chapter. A profile without a
    ``relative_eta_grid`` has no such chapter (no runs). A profile with ``fixed_choices`` (the decisive tier) takes
    relative SEC's η and the radius from them, and trains the arms over its ``floor_seeds``."""
    if not p.relative_eta_grid:
        return []
    if p.fixed_choices:       # chosen by selections of their own (the decisive tier): relative η and radius fixed
        sel = []
        relative = lambda loss: sw.fixed_choice(p, "relative", loss)         # noqa: E731
        radius = lambda loss: sw.fixed_choice(p, "radius", loss)            # noqa: E731
    else:
        sel, rel = sw.stored_selection(p, store), relative_selection_runs(p, store)
        relative = lambda loss: chosen_relative_eta(p, loss, rel)           # noqa: E731
        radius = lambda loss: fixed_scale_mu(p, loss, store)                # noqa: E731
    out = []
    for loss in sw.MAIN_LOSSES:
        eta = sw.chosen_eta(p, loss, sel)
        l2 = {"eta": sw.chosen_eta(p, loss, sel, "zero")} if p.main_seeds else {}
        arms = [("none", {}), ("l2reg", l2), ("sec", {"eta": eta}),
                ("sec", {"eta": relative(loss), "relative": True}), ("sec", {"eta": eta, "mu": radius(loss)})]
        if p.cir_arm:     # PML's CenterInvariantRegularizer at the weight whose value is SEC's at the radius
            arms.append(("sec", {"eta": cir_eta(eta, radius(loss)), "penalty": "cir"}))
        out += [sw.config(p, loss, v, s, **ch) for v, ch in arms for s in (p.floor_seeds or sw.table_seeds(p))]
    return out
