"""The committed font attribute table (sec_lib/data/glyph_fonts.csv) and the per-class / per-image accessors."""
import pandas as pd
import pytest

from sec_lib.data import fonts as FT
from sec_lib.data import glyphs as G


def test_rebuilding_the_table_from_the_fonts_gives_the_committed_file():
    assert FT._to_csv(FT.build_font_table()) == FT.FONT_TABLE.read_text(encoding="utf-8")


def test_table_values():
    t = FT.font_attributes().set_index("file")
    assert list(t.index) == list(G.FONT_FILES)
    assert set(t["design"]) == set(FT.DESIGNS)
    assert t.loc["DejaVuSansMono-BoldOblique.ttf", ["family", "design", "weight"]].tolist() == [
        "DejaVu Sans Mono", "monospace", "bold"]
    assert bool(t.loc["DejaVuSansMono-BoldOblique.ttf", "italic"])
    assert t.loc["DejaVuSerif.ttf", ["design", "weight"]].tolist() == ["serif", "regular"]
    assert t.loc["cmtt10.ttf", "design"] == "monospace" and t.loc["cmsy10.ttf", "design"] == "script"
    assert t.loc["cmb10.ttf", "weight"] == "bold" and bool(t.loc["cmti10.ttf", "italic"])
    # every DejaVu attribute comes from the metadata alone
    assert (t.loc[[f for f in t.index if f.startswith("DejaVu")], "source"] == "metadata").all()


def test_name_facts_are_used_only_where_the_metadata_is_missing_or_wrong():
    for f, facts in FT.NAME_FACTS.items():
        derived = FT._from_metadata(FT._metadata(f))
        assert any(derived[k] != v for k, v in facts.items()), f"{f}: NAME_FACTS repeats the metadata"
    # e.g. the BaKoMa cmr10 claims PANOSE sans serif, and cmb10 weight 400
    assert FT._from_metadata(FT._metadata("cmr10.ttf"))["design"] == "sans"
    assert FT._from_metadata(FT._metadata("cmb10.ttf"))["weight"] == "regular"


def test_glyph_attributes_per_class():
    test = FT.glyph_attributes("test")
    assert len(test) == len(G.split_classes("test")) and test["label"].tolist() == list(range(len(test)))
    classes = G.split_classes("test")
    table = FT.font_attributes().set_index("file")
    for i in (0, 17, len(test) - 1):
        row, c = test.iloc[i], classes[i]
        assert row["codepoint"] == c.codepoint and row["n_fonts"] == len(c.fonts)
        designs = table.loc[list(c.fonts), "design"]
        assert row["share_serif"] == pytest.approx((designs == "serif").mean())
    shares = test[[f"share_{d}" for d in FT.DESIGNS]].sum(axis=1)
    assert ((shares - 1).abs() < 1e-12).all()
    latin_a = FT.glyph_attributes("train").query("codepoint == 0x41")
    if len(latin_a):
        assert latin_a["script"].iloc[0] == "LATIN" and latin_a["kind"].iloc[0] == "letter"
    assert set(test["kind"]) <= {"letter", "number", "punctuation", "symbol", "other"}
    assert test["computer_modern"].any() and not test["computer_modern"].all()


def test_instance_attributes_follow_the_font_index(tmp_path):
    ds = G.load_glyphs("test", instances_per_class=4, max_classes=3, cache_dir=tmp_path)
    att = FT.instance_attributes(ds)
    assert len(att) == len(ds) and att["label"].tolist() == ds.labels.tolist()
    assert att["font"].tolist() == [G.FONT_FILES[i] for i in ds.font_index.tolist()]
    with pytest.raises(ValueError, match="font_index"):
        FT.instance_attributes(pd.DataFrame({"labels": [0]}))
