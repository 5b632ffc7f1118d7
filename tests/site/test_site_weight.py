"""What the site leaves out to keep its weight: the widget manager's protocol-1 AMD modules and the icon fonts'
TrueType copies. Each cut must keep what a page uses, byte for byte."""
from pathlib import Path

import pytest

from sec_lib.site import sitejs, sitepages

REPO = Path(__file__).resolve().parents[2]
EMBED_AMD = REPO / "node_modules" / "@jupyter-widgets" / "html-manager" / "dist" / "embed-amd.js"


def _bundle(mods) -> str:
    """A concatenated AMD bundle as html-manager writes it: a licence line, then each module's define line."""
    out = []
    for name, deps, body in mods:
        dep_list = ",".join(f'"{d}"' for d in ("module", *deps))
        out.append(f"/*! For license information please see {name.split('/')[-1]}.js.LICENSE.txt */\n"
                   f'define("{name}",[{dep_list}],(e=>{body}));\n//# sourceMappingURL=x.js.map;\n\n')
    return "".join(out)


FAKE = [("@jupyter-widgets/base", (), "1"), ("@jupyter-widgets/controls", ("@jupyter-widgets/base",), "2"),
        ("@jupyter-widgets/base7", (), "3"), ("@jupyter-widgets/controls7", (), "4"),
        ("@jupyter-widgets/html-manager", ("@jupyter-widgets/base", "@jupyter-widgets/controls"), "5"),
        ("@jupyter-widgets/html-manager/dist/libembed-amd", (), "6")]


def test_trim_keeps_every_other_module_byte_for_byte_with_its_licence():
    js = _bundle(FAKE)
    trimmed = sitejs.trim_embed_amd(js)
    assert trimmed == _bundle([m for m in FAKE if not m[0].endswith("7")])
    assert [m[0] for m in sitejs.amd_modules(trimmed)] == [m[0] for m in FAKE if not m[0].endswith("7")]
    assert "base7.js.LICENSE" not in trimmed and "index.js.LICENSE" not in trimmed
    assert trimmed.count("LICENSE.txt") == 4


def test_trim_refuses_an_unexpected_bundle_or_a_dependency_on_what_it_drops():
    with pytest.raises(ValueError, match="expects"):
        sitejs.trim_embed_amd(_bundle(FAKE[:3]))
    needs7 = [m if m[0] != "@jupyter-widgets/html-manager" else (m[0], m[1] + ("@jupyter-widgets/base7",), m[2])
              for m in FAKE]
    with pytest.raises(ValueError, match="depends on one left out"):
        sitejs.trim_embed_amd(_bundle(needs7))
    with pytest.raises(ValueError, match="cannot leave out"):
        sitejs.trim_embed_amd(_bundle(FAKE), drop=("@jupyter-widgets/output",))


@pytest.mark.skipif(not EMBED_AMD.is_file(), reason="node_modules not installed (make js)")
def test_the_installed_widget_manager_trims_to_what_the_book_loads():
    js = EMBED_AMD.read_text(encoding="utf-8")
    trimmed = sitejs.trim_embed_amd(js)
    kept = {name: deps for name, deps, _, _ in sitejs.amd_modules(trimmed)}
    assert set(kept) == set(sitejs.EMBED_AMD_MODULES) - set(sitejs.UNSERVED_AMD_MODULES)
    assert not {d for deps in kept.values() for d in deps} & set(sitejs.UNSERVED_AMD_MODULES)
    assert len(trimmed) < len(js) - 700_000
    for name, _, a, b in sitejs.amd_modules(js):      # what stays is the original text
        if name in kept:
            assert js[a:b] in trimmed


CSS = ('@font-face{font-family:A;src:url(../f/a.woff2) format("woff2"),url(../f/a.ttf) format("truetype")}'
       '@font-face{font-family:B;src:url(../f/b.ttf) format("truetype")}')


def test_truetype_copies_of_woff2_fonts_go_and_the_rest_stays(tmp_path):
    (tmp_path / "css").mkdir()
    (tmp_path / "f").mkdir()
    (tmp_path / "css" / "theme.css").write_text(CSS, encoding="utf-8")
    for name in ("a.woff2", "a.ttf", "b.ttf"):
        (tmp_path / "f" / name).write_bytes(b"font")
    gone = sitepages.drop_truetype_fallbacks(tmp_path)
    assert gone == [(tmp_path / "f" / "a.ttf").resolve()]
    css = (tmp_path / "css" / "theme.css").read_text(encoding="utf-8")
    assert 'src:url(../f/a.woff2) format("woff2")}' in css and "a.ttf" not in css
    assert 'url(../f/b.ttf) format("truetype")' in css               # no woff2 copy: kept, and its file
    assert (tmp_path / "f" / "b.ttf").is_file() and (tmp_path / "f" / "a.woff2").is_file()
    assert sitepages.drop_truetype_fallbacks(tmp_path) == []


def test_a_truetype_file_another_style_sheet_still_names_is_kept(tmp_path):
    (tmp_path / "f").mkdir()
    (tmp_path / "one.css").write_text(CSS.replace("../f/", "f/"), encoding="utf-8")
    (tmp_path / "two.css").write_text("@font-face{src:url(f/a.ttf)}", encoding="utf-8")
    for name in ("a.woff2", "a.ttf"):
        (tmp_path / "f" / name).write_bytes(b"font")
    assert sitepages.drop_truetype_fallbacks(tmp_path) == []
    assert (tmp_path / "f" / "a.ttf").is_file()
