"""Font attributes of the glyph benchmark: which design draws each glyph image, and what each class is made of.

Every glyph image is drawn by one of the 23 font files of :data:`sec_lib.data.glyphs.FONT_FILES` (its index
is ``GlyphDataset.font_index``). For the fairness question of the review record (are unregularized norms,
or retrieval errors, tied to attributes of the samples?) each font file gets these attributes:

* ``family``: DejaVu Sans, DejaVu Sans Mono, DejaVu Serif, STIXGeneral, Computer Modern;
* ``design``: serif, sans, monospace or script;
* ``weight``: regular or bold; ``italic``: True for italic/oblique.

They are read from the font files' metadata with fontTools: the name table (family, subfamily), OS/2
(``usWeightClass``, ``fsSelection`` italic and bold bits, PANOSE family kind, serif style and proportion)
and post (``isFixedPitch``, ``italicAngle``). Rules: monospace if fixed pitch or PANOSE proportion 9;
script if PANOSE family kind 3 (hand-written); serif if PANOSE serif style 2-10, sans if 11-15; bold if
weight class >= 600 or the bold bit; italic if the italic bit or a non-zero italic angle.

The metadata is right for DejaVu, partly missing for STIX (PANOSE all zero) and wrong for the BaKoMa
Computer Modern files (every one claims PANOSE "sans", weight 400, upright). For those files
:data:`NAME_FACTS` states what TeX's font names say (cmr = roman, cmb = bold roman, cmss = sans serif,
cmti = text italic, cmtt = typewriter, cmmi = math italic, cmsy = symbols, of which the benchmark uses only
the calligraphic capitals); the table's ``source`` column names every field taken from there, and the raw
metadata stays in the table beside it.

The table is committed as ``glyph_fonts.csv`` next to this module (rebuild: ``python -m
sec_lib.data.fonts --rebuild``; a test checks that rebuilding gives the committed table).
:func:`font_attributes` reads it; :func:`instance_attributes` gives the attributes of every image of a
dataset; :func:`glyph_attributes` describes every class of a split (its Unicode script and kind, and the
share of each design among the fonts that render it).
"""
from __future__ import annotations

import argparse
import functools
import io
import unicodedata
from pathlib import Path

import numpy as np
import pandas as pd
from fontTools.ttLib import TTFont

from ..tempfiles import atomic_write_bytes
from .glyph_pool import PACKAGE_DIR, split_classes
from .glyph_render import FONT_FILES, font_dir

__all__ = ["FONT_TABLE", "NAME_FACTS", "DESIGNS", "build_font_table", "write_font_table", "font_attributes",
           "instance_attributes", "glyph_attributes"]

FONT_TABLE = PACKAGE_DIR / "glyph_fonts.csv"
DESIGNS = ("serif", "sans", "monospace", "script")

#: Facts from the font names where the metadata is missing or wrong (see the module docstring).
NAME_FACTS: dict[str, dict] = {
    "STIXGeneral.ttf": {"family": "STIXGeneral", "design": "serif"},
    "STIXGeneralBol.ttf": {"family": "STIXGeneral", "design": "serif"},
    "STIXGeneralItalic.ttf": {"family": "STIXGeneral", "design": "serif"},
    "STIXGeneralBolIta.ttf": {"family": "STIXGeneral", "design": "serif"},
    "cmr10.ttf": {"family": "Computer Modern", "design": "serif"},
    "cmb10.ttf": {"family": "Computer Modern", "design": "serif", "weight": "bold"},
    "cmss10.ttf": {"family": "Computer Modern", "design": "sans"},
    "cmti10.ttf": {"family": "Computer Modern", "design": "serif", "italic": True},
    "cmtt10.ttf": {"family": "Computer Modern", "design": "monospace"},
    "cmmi10.ttf": {"family": "Computer Modern", "design": "serif", "italic": True},
    "cmsy10.ttf": {"family": "Computer Modern", "design": "script"},
}

_COLUMNS = ["font_index", "file", "family", "design", "weight", "italic", "source", "name_family",
            "name_subfamily", "weight_class", "fs_italic", "fs_bold", "fixed_pitch", "italic_angle",
            "panose_family", "panose_serif", "panose_proportion"]


def _metadata(file: str) -> dict:
    """The raw metadata fields of one font file."""
    with TTFont(str(font_dir() / file), lazy=True) as tt:
        name, os2, post = tt["name"], tt["OS/2"], tt["post"]
        panose = os2.panose
        return {
            "name_family": name.getDebugName(16) or name.getDebugName(1),
            "name_subfamily": name.getDebugName(17) or name.getDebugName(2),
            "weight_class": int(os2.usWeightClass),
            "fs_italic": bool(os2.fsSelection & 1),
            "fs_bold": bool(os2.fsSelection & 32),
            "fixed_pitch": bool(post.isFixedPitch),
            "italic_angle": round(float(post.italicAngle), 3),
            "panose_family": int(panose.bFamilyType),
            "panose_serif": int(panose.bSerifStyle),
            "panose_proportion": int(panose.bProportion),
        }


def _from_metadata(m: dict) -> dict:
    """family / design / weight / italic by the rules of the module docstring (design None if unknown)."""
    if m["fixed_pitch"] or m["panose_proportion"] == 9:
        design = "monospace"
    elif m["panose_family"] == 3:
        design = "script"
    elif 2 <= m["panose_serif"] <= 10:
        design = "serif"
    elif 11 <= m["panose_serif"] <= 15:
        design = "sans"
    else:
        design = None
    return {"family": m["name_family"], "design": design,
            "weight": "bold" if m["weight_class"] >= 600 or m["fs_bold"] else "regular",
            "italic": bool(m["fs_italic"] or m["italic_angle"] != 0)}


def build_font_table(files=FONT_FILES) -> pd.DataFrame:
    """The font attribute table, computed from the installed font files (one row per file, in order)."""
    rows = []
    for i, f in enumerate(files):
        meta = _metadata(f)
        attrs = _from_metadata(meta)
        facts = NAME_FACTS.get(f, {})
        changed = sorted(k for k, v in facts.items() if attrs[k] != v)
        attrs.update(facts)
        if attrs["design"] not in DESIGNS:
            raise ValueError(f"font {f}: its metadata gives no design and NAME_FACTS has none; valid designs: "
                             f"{', '.join(DESIGNS)}")
        rows.append({"font_index": i, "file": f, **attrs,
                     "source": "metadata" if not changed else "metadata; name: " + ", ".join(changed), **meta})
    return pd.DataFrame(rows, columns=_COLUMNS)


def _to_csv(table: pd.DataFrame) -> str:
    buf = io.StringIO()
    table.to_csv(buf, index=False, lineterminator="\n")
    return buf.getvalue()


def write_font_table(path: Path = FONT_TABLE) -> pd.DataFrame:
    """Rebuild the table from the installed fonts and write it (atomically) as CSV."""
    table = build_font_table()
    atomic_write_bytes(Path(path), _to_csv(table).encode("utf-8"))
    _read_table.cache_clear()
    return table


@functools.lru_cache(maxsize=2)
def _read_table(path: str) -> pd.DataFrame:
    table = pd.read_csv(path, keep_default_na=False)
    if list(table["file"]) != list(FONT_FILES):
        raise ValueError(f"{path} lists fonts {list(table['file'])}, expected FONT_FILES {list(FONT_FILES)}; "
                         "rebuild it with `python -m sec_lib.data.fonts --rebuild`")
    return table


def font_attributes(path: Path = FONT_TABLE) -> pd.DataFrame:
    """The committed font attribute table (a copy; one row per entry of FONT_FILES, in that order)."""
    return _read_table(str(path)).copy()


def instance_attributes(ds) -> pd.DataFrame:
    """One row per image of a glyph dataset (same order): ``label``, ``font`` (file) and the font's
    family, design, weight and italic. Needs ``ds.font_index`` (a GlyphDataset, or a class subset of one
    that keeps ``font_index``)."""
    font_index = getattr(ds, "font_index", None)
    if font_index is None:
        raise ValueError(f"{type(ds).__name__} has no font_index; font attributes exist only for glyph datasets")
    table = font_attributes()
    idx = np.asarray(font_index)
    rows = table.iloc[idx][["file", "family", "design", "weight", "italic"]].reset_index(drop=True)
    return pd.concat([pd.DataFrame({"label": np.asarray(ds.labels)}), rows.rename(columns={"file": "font"})], axis=1)


def _kind(cp: int) -> str:
    return {"L": "letter", "N": "number", "P": "punctuation", "S": "symbol"}.get(unicodedata.category(chr(cp))[0],
                                                                                 "other")


def glyph_attributes(split: str, max_classes: int | None = None) -> pd.DataFrame:
    """One row per class of a split (``label`` = the class index within the split), from the committed class
    list: ``codepoint``, ``class_name``, ``kind`` (letter / number / punctuation / symbol, from the Unicode
    category), ``script`` (first word of the Unicode name for letters: LATIN, GREEK, CYRILLIC, ...; "none"
    otherwise), ``n_fonts`` (fonts that render it), ``n_families``, and the share of those fonts that are
    ``serif`` / ``sans`` / ``monospace`` / ``script`` designs, ``bold`` and ``italic`` (columns
    ``share_<attribute>``), and ``computer_modern`` (whether a Computer Modern font renders it)."""
    table = font_attributes().set_index("file")
    rows = []
    for label, c in enumerate(split_classes(split, max_classes)):
        t = table.loc[list(c.fonts)]
        kind = _kind(c.codepoint)
        rows.append({
            "label": label, "codepoint": c.codepoint, "class_name": c.label, "kind": kind,
            "script": c.name.split()[0] if kind == "letter" else "none",
            "n_fonts": len(t), "n_families": int(t["family"].nunique()),
            **{f"share_{d}": float((t["design"] == d).mean()) for d in DESIGNS},
            "share_bold": float((t["weight"] == "bold").mean()), "share_italic": float(t["italic"].astype(bool).mean()),
            "computer_modern": bool((t["family"] == "Computer Modern").any()),
        })
    return pd.DataFrame(rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sec_lib.data.fonts", description=__doc__.split("\n")[0])
    ap.add_argument("--rebuild", action="store_true", help=f"rewrite {FONT_TABLE.name} from the installed fonts")
    args = ap.parse_args(argv)
    if not args.rebuild:
        ap.print_help()
        return 2
    print(write_font_table().to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
