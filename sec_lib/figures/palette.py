"""The book's one palette: a colour means one thing on every page.

* Variants and μ targets share one set of colours, because they are the same thing seen twice:
  none (grey), L2-reg / μ = 0 (blue), SEC with the batch mean (vermilion), SEC with an EMA (green),
  SEC with a fixed radius (pink), relative (scale-free) SEC (orange). These are Okabe-Ito colours.
* Losses, optimizers and verdicts each have their own colours, none of which is a variant colour, so
  a vermilion line is always SEC and never "semihard".

Labels (how a page names a variant, a μ mode or a steps column) live here too.
"""
from __future__ import annotations

__all__ = ["VARIANT_COLORS", "VARIANT_LABELS", "MU_COLORS", "MU_LABELS", "LOSS_COLORS", "LOSS_MARKERS",
           "OPTIM_COLORS", "VERDICT_COLORS", "CLASS_COLORS", "METRIC_STYLES", "REF_COLOR", "POS_COLOR", "NEG_COLOR", "STEP_LABELS", "METRIC_LABELS",
           "variant_color", "class_color", "mu_color", "setting_color", "mu_label", "eta_label", "color_of"]

#: Okabe-Ito colours per variant (the same on every page); the order is the book's variant order.
VARIANT_COLORS = {"none": "#4d4d4d", "l2reg": "#0072B2", "sec": "#D55E00", "sec-ema": "#009E73",
                  "sec-fixed": "#CC79A7", "sec-relative": "#E69F00", "cir": "#56B4E9"}
VARIANT_LABELS = {"none": "none", "l2reg": "L2-reg (μ = 0)", "sec": "SEC (μ = batch mean)",
                  "sec-ema": "SEC (μ = EMA)", "sec-fixed": "SEC (fixed μ)", "sec-relative": "relative SEC (CV²)",
                  "cir": "CIR (PML's CenterInvariantRegularizer)"}
#: One colour per μ mode: the variant colour of that target.
MU_COLORS = {"batch": VARIANT_COLORS["sec"], "ema": VARIANT_COLORS["sec-ema"], "zero": VARIANT_COLORS["l2reg"],
             "fixed": VARIANT_COLORS["sec-fixed"]}
#: Dropdown labels of the μ modes (keys: ``str(cfg.mu)``); fixed radii are labelled "fixed r".
MU_LABELS = {"batch": "batch mean", "ema": "EMA", "zero": "zero (L2-reg)"}

#: Colours per loss (Paul Tol's muted set: none of them is a variant colour).
LOSS_COLORS = {"triplet": "#DDAA33", "semihard": "#88CCEE", "npair": "#882255", "ms": "#44AA99",
               "tml": "#999933", "cosface": "#332288", "ntxent": "#AA4499", "contrastive": "#117733",
               "supcon": "#CC6677", "npair_ip_l2": "#661100", "npair_ip": "#6699CC", "arcface": "#5D6D7E"}
#: Marker per loss; the order is the book's loss order (the paper's four losses first).
LOSS_MARKERS = {"triplet": "o", "semihard": "s", "npair": "^", "ms": "D", "tml": "v", "ntxent": "P",
                "supcon": "X", "npair_ip_l2": "<", "npair_ip": ">", "cosface": "p", "arcface": "h"}
#: Colours per optimizer (neither a variant nor a loss colour, and no orange: orange-red is SEC).
OPTIM_COLORS = {"adam": "#6F4E7C", "sgd": "#663333", "adamw": "#5B8E7D"}
#: Colours per verdict word.
VERDICT_COLORS = {"reproduced": "#1B7837", "larger than claimed": "#1B7837", "smaller than claimed": "#8C9F2E",
                  "negligible": "#C98A3A", "inconclusive": "#E6AB02", "not reproduced": "#B2182B",
                  "not testable offline": "#7f7f7f"}
#: Classes of the theory page's 2-D toy (Paul Tol's dark set: no variant, loss or optimizer colour).
CLASS_COLORS = ("#222255", "#225555", "#225522", "#666633", "#555555")
#: Metrics on one axis are told apart by line style and marker, never by colour (colours are taken).
METRIC_STYLES = {"R@1": ("-", "o"), "R@2": ("--", "s"), "R@4": ("-.", "^"), "R@8": (":", "D"),
                 "NMI": ("-", "o"), "F1": ("--", "s")}
#: Reference lines (theory's −1, zero, the diagonal) are black.
REF_COLOR = "#000000"
#: Positive and negative pairs (cosine histograms).
POS_COLOR, NEG_COLOR = "#1B7837", "#B2182B"

#: Axis labels of the steps table's columns.
STEP_LABELS = {"norm_var": "Var(‖f‖) in the batch", "norm_cv": "CV (std / mean) of ‖f‖ in the batch",
               "norm_mean": "mean ‖f‖ in the batch", "mu": "μ",
               "grad_slope": "gradient-vs-norm slope", "dtheta_cv": "CV of Δθ", "dtheta_mean": "mean Δθ [rad]",
               "violations": "violating triplets", "loss_metric": "metric loss", "pos_cos": "mean positive cosine",
               "neg_cos": "mean negative cosine", "grad_norm_cv": "CV of ‖∂L/∂f‖"}
#: Axis labels of the review chapters' metrics.
METRIC_LABELS = {"R@1": "R@1 (%)", "train_norm_var": "norm variance (train)", "test_norm_var": "norm variance (test)",
                 "train_norm_cv": "norm CV, std / mean (train)", "test_norm_cv": "norm CV, std / mean (test)",
                 "grad_slope": "slope of log‖∂L/∂f‖ vs log‖f‖", "dtheta_cv": "CV of per-sample Δθ",
                 "grad_norm_cv": "CV of per-sample ‖∂L/∂f‖"}

_FALLBACK = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf"]


def variant_color(variant: str) -> str:
    """The colour of a variant (grey-black for unknown ones)."""
    return VARIANT_COLORS.get(str(variant), "#000000")


def mu_color(key: str) -> str:
    """The colour of a μ key ('batch', 'ema', 'zero' or a fixed radius)."""
    return MU_COLORS.get(key, MU_COLORS["fixed"])


def setting_color(setting: str) -> str:
    """The colour of a "which μ" setting label ('none', 'batch mean', 'EMA ρ=0.1', 'zero η=0.005', 'fixed r=4')."""
    s = str(setting)
    if s == "none":
        return VARIANT_COLORS["none"]
    if s == "batch mean":
        return MU_COLORS["batch"]
    if s.startswith("EMA"):
        return MU_COLORS["ema"]
    if s.startswith("zero"):
        return MU_COLORS["zero"]
    return MU_COLORS["fixed"]


def class_color(label) -> str:
    """The colour of a toy class (cycling through :data:`CLASS_COLORS`)."""
    return CLASS_COLORS[int(label) % len(CLASS_COLORS)]


def color_of(name, palette: dict, i: int) -> str:
    """``palette[name]``, or the ``i``-th of a fallback cycle for names the palette does not know."""
    return palette.get(name, _FALLBACK[i % len(_FALLBACK)])


def mu_label(key: str) -> str:
    """Dropdown label of a μ key ('batch mean', 'EMA', 'zero (L2-reg)', 'fixed 4')."""
    return MU_LABELS.get(key) or f"fixed {float(key):g}"


def eta_label(eta: float) -> str:
    return f"{float(eta):g}"
