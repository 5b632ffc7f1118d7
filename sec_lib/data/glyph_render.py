"""Glyphs benchmark, fonts and rendering: the font files, one glyph rendered to its ink, and the
seeded augmentation of an instance (the rules: see :mod:`sec_lib.data.glyphs`)."""
from __future__ import annotations

import functools
import math
import unicodedata
from pathlib import Path
from typing import Sequence

import matplotlib
import numpy as np
import PIL
from fontTools.ttLib import TTFont
from PIL import Image, ImageDraw, ImageFilter, ImageFont, features

#: Font files used, in a fixed order (the font index stored with every instance refers to this list).
FONT_FILES: tuple[str, ...] = (
    "DejaVuSans.ttf", "DejaVuSans-Bold.ttf", "DejaVuSans-Oblique.ttf", "DejaVuSans-BoldOblique.ttf",
    "DejaVuSansMono.ttf", "DejaVuSansMono-Bold.ttf", "DejaVuSansMono-Oblique.ttf",
    "DejaVuSansMono-BoldOblique.ttf",
    "DejaVuSerif.ttf", "DejaVuSerif-Bold.ttf", "DejaVuSerif-Italic.ttf", "DejaVuSerif-BoldItalic.ttf",
    "STIXGeneral.ttf", "STIXGeneralBol.ttf", "STIXGeneralItalic.ttf", "STIXGeneralBolIta.ttf",
    "cmr10.ttf", "cmb10.ttf", "cmss10.ttf", "cmti10.ttf", "cmtt10.ttf", "cmmi10.ttf", "cmsy10.ttf",
)

_UPPER = set(range(0x41, 0x5B))
_LOWER = set(range(0x61, 0x7B))
_DIGITS = set(range(0x30, 0x3A))
# OT1 (cmr/cmb/cmss/cmti) agrees with ASCII on letters, digits and this punctuation (not on
# " < > \ _ { | } ^ and the quotes); cmti10 draws '$' as a pound sign, so it is left out everywhere.
_OT1_PUNCT = {ord(c) for c in "!%&()*+,-./:;=?@[]"}
#: Code points each Computer Modern font may contribute (TeX encodings differ from Unicode elsewhere).
CM_WHITELIST: dict[str, frozenset[int]] = {
    "cmr10.ttf": frozenset(_UPPER | _LOWER | _DIGITS | _OT1_PUNCT),
    "cmb10.ttf": frozenset(_UPPER | _LOWER | _DIGITS | _OT1_PUNCT),
    "cmss10.ttf": frozenset(_UPPER | _LOWER | _DIGITS | _OT1_PUNCT),
    "cmti10.ttf": frozenset(_UPPER | _LOWER | _DIGITS | _OT1_PUNCT),
    "cmtt10.ttf": frozenset(range(0x21, 0x7F)),        # typewriter encoding = printable ASCII
    "cmmi10.ttf": frozenset(_UPPER | _LOWER | _DIGITS),  # math italic letters, old-style digits
    "cmsy10.ttf": frozenset(_UPPER),                     # calligraphic capitals
}

#: The regular upright member of each font family (one per design) used by the variety check.
REGULAR_FONTS: tuple[str, ...] = ("DejaVuSans.ttf", "DejaVuSansMono.ttf", "DejaVuSerif.ttf", "STIXGeneral.ttf",
                                  "cmr10.ttf", "cmss10.ttf", "cmtt10.ttf", "cmmi10.ttf", "cmsy10.ttf")

#: A font renders a code point if it draws at least this many pixels above half intensity (rule 3).
MIN_INK = 4
#: Unicode categories never used as classes (rule 2).
EXCLUDED_CATEGORIES = ("Mn", "Mc", "Me", "Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co", "Cn")

# --- augmentation parameters ---
FILL = 0.72           # longest side of the (unaugmented) glyph, as a fraction of image_size
ROTATION_DEG = 12.0
SCALE_RANGE = (0.85, 1.1)
ASPECT_JITTER = 0.08  # log-uniform anisotropic scale
SHEAR = 0.12
SHIFT = 0.08          # fraction of image_size
BLUR_MAX = 0.6        # Gaussian blur radius at output resolution, uniform in [0, BLUR_MAX]
OVERSAMPLE = 2       # glyphs are transformed at 2x and box-downsampled


# =============================================================================================
# Fonts and rendering
# =============================================================================================

@functools.lru_cache(maxsize=1)
def font_dir() -> Path:
    """matplotlib's bundled TrueType folder (``mpl-data/fonts/ttf``)."""
    return Path(matplotlib.get_data_path()) / "fonts" / "ttf"


@functools.lru_cache(maxsize=None)
def _font_meta(path: str) -> tuple[dict[int, str], str, str]:
    """(cmap code point -> glyph name, family+style name, version string) read with fontTools."""
    with TTFont(path, lazy=True) as tt:
        cmap = dict(tt.getBestCmap() or {})
        name = tt["name"]
        full = name.getDebugName(4) or Path(path).stem
        version = name.getDebugName(5) or "unknown"
    return cmap, full, version


def font_versions(files: Sequence[str] = FONT_FILES) -> list[dict]:
    """``[{"file", "name", "version"}]`` for the given font files (from each font's name table)."""
    out = []
    for f in files:
        p = font_dir() / f
        if not p.exists():
            raise FileNotFoundError(f"font file {p} not found (matplotlib {_mpl_version()} does not ship it)")
        _, full, version = _font_meta(str(p))
        out.append({"file": f, "name": full, "version": version})
    return out


def _mpl_version() -> str:
    return matplotlib.__version__


def font_library_versions() -> dict:
    return {"matplotlib": _mpl_version(), "pillow": PIL.__version__,
            "freetype": features.version("freetype2") or "unknown"}


@functools.lru_cache(maxsize=512)
def _pil_font(path: str, size: int):
    # BASIC layout: no shaping engine, so a single code point always maps to its cmap glyph.
    return ImageFont.truetype(path, size, layout_engine=ImageFont.Layout.BASIC)


def _render_ink(path: str, ch: str, size: int):
    """The glyph of ``ch`` at font size ``size`` cropped to its ink (PIL 'L' image, ink=255) or None."""
    font = _pil_font(path, size)
    left, top, right, bottom = font.getbbox(ch)
    pad = max(4, size // 4)
    w, h = max(1, right - left) + 2 * pad, max(1, bottom - top) + 2 * pad
    im = Image.new("L", (w, h), 0)
    ImageDraw.Draw(im).text((pad - left, pad - top), ch, font=font, fill=255)
    box = im.getbbox()
    return im.crop(box) if box else None


def render_glyph(font_file: str, codepoint: int, target: int):
    """Render ``codepoint`` with ``font_file`` cropped to its ink and resized so that its longer side is
    ``target`` pixels (aspect kept). The font size is chosen from the glyph's bounding box so that the
    ink is rasterised at about ``target`` pixels (small glyphs such as "." get a large font size), then
    a LANCZOS resize makes the fit exact. Returns a PIL 'L' image (ink 255) or None if the glyph has
    no ink (fewer than :data:`MIN_INK` pixels above half intensity)."""
    path = str(font_dir() / font_file)
    ch = chr(codepoint)
    ref = 4 * target
    left, top, right, bottom = _pil_font(path, ref).getbbox(ch)
    longest = max(right - left, bottom - top)
    if longest <= 0:
        return None
    size = max(4, min(64 * target, math.ceil(ref * target / longest)))
    ink = _render_ink(path, ch, size)
    if ink is None or int((np.asarray(ink) > 127).sum()) < MIN_INK:
        return None
    w, h = ink.size
    s = target / max(w, h)
    if abs(s - 1) < 1e-9:
        return ink
    return ink.resize((max(1, round(w * s)), max(1, round(h * s))), Image.Resampling.LANCZOS)


def centered(img, size: int) -> np.ndarray:
    """Paste a PIL image centred on a size x size black canvas; float32 array in [0, 1]."""
    out = np.zeros((size, size), np.float32)
    a = np.asarray(img, np.float32) / 255.0
    h, w = a.shape
    y0, x0 = (size - h) // 2, (size - w) // 2
    out[y0:y0 + h, x0:x0 + w] = a
    return out


def stretched_render(img, size: int) -> np.ndarray:
    """Box-resize a (larger) PIL image to fill a size x size square (aspect not kept); float32 in [0, 1]."""
    return np.asarray(img.resize((size, size), Image.Resampling.BOX), np.float32) / 255.0


def allowed_codepoints(font_file: str) -> dict[int, str]:
    """Candidate code points a font may contribute -> glyph name (rules 1-2 of the module docstring)."""
    cmap, _, _ = _font_meta(str(font_dir() / font_file))
    white = CM_WHITELIST.get(font_file)
    out = {}
    for cp, gname in cmap.items():
        if gname == ".notdef" or (white is not None and cp not in white):
            continue
        if unicodedata.category(chr(cp)) in EXCLUDED_CATEGORIES:
            continue
        out[cp] = gname
    return out


def char_name(cp: int) -> str:
    return unicodedata.name(chr(cp), f"<unnamed U+{cp:04X}>")


def augment_glyph(base, size: int, rng: np.random.Generator) -> np.ndarray:
    """One augmented instance (uint8 size x size) from a fitted glyph rendered at 2x resolution.

    Stroke weight (erode / keep / dilate with probabilities 1/4, 1/2, 1/4 by a k x k Min/Max filter at 2x,
    k = 3 at 32 px; erosion is skipped if it would remove half of the ink), then a random affine
    map about the centre (rotation, scale, aspect, shear, shift) at 2x, a 2x box downsample and a
    Gaussian blur."""
    big = size * OVERSAMPLE
    k = 2 * max(1, size // 32) + 1  # 3 at 32 px, 5 at 64 px: the same relative stroke change
    u = rng.random()
    if u < 0.25:
        thin = base.filter(ImageFilter.MinFilter(k))
        if np.asarray(thin, np.float32).sum() >= 0.5 * np.asarray(base, np.float32).sum():
            base = thin
    elif u >= 0.75:
        base = base.filter(ImageFilter.MaxFilter(k))
    theta = math.radians(rng.uniform(-ROTATION_DEG, ROTATION_DEG))
    s = rng.uniform(*SCALE_RANGE)
    asp = math.exp(rng.uniform(-ASPECT_JITTER, ASPECT_JITTER))
    sh = rng.uniform(-SHEAR, SHEAR)
    dx, dy = rng.uniform(-SHIFT, SHIFT, size=2) * big
    # forward map (output pixel of the big canvas <- base pixel): y = A (x - c_base) + c_out + shift,
    # A = R(theta) @ Shear(sh) @ diag(s*asp, s/asp). PIL wants the inverse: x = A^-1 (y - c_out - shift) + c_base.
    c, si = math.cos(theta), math.sin(theta)
    sx, sy = s * asp, s / asp
    a00, a01, a10, a11 = c * sx, (c * sh - si) * sy, si * sx, (si * sh + c) * sy
    det = a00 * a11 - a01 * a10
    i00, i01, i10, i11 = a11 / det, -a01 / det, -a10 / det, a00 / det
    ox, oy = big / 2 + dx, big / 2 + dy
    bx, by = base.size[0] / 2, base.size[1] / 2
    data = (i00, i01, bx - i00 * ox - i01 * oy, i10, i11, by - i10 * ox - i11 * oy)
    out = base.transform((big, big), Image.Transform.AFFINE, data, resample=Image.Resampling.BILINEAR,
                         fillcolor=0)
    out = out.reduce(OVERSAMPLE)
    r = rng.uniform(0.0, BLUR_MAX)
    if r > 0.05:
        out = out.filter(ImageFilter.GaussianBlur(r))
    return np.asarray(out, np.uint8)
