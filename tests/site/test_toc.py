"""The table of contents is written from the one list of pages (``sec_lib.site.toc``): the committed ``_toc.yml``
is what ``PAGES`` and ``PARTS`` say, every page is listed once, and a page with a wrong part is refused."""
from pathlib import Path

import pytest
import yaml

from sec_lib.chapters import PAGES, PARTS, Page
from sec_lib.params import ParameterError
from sec_lib.site import runner, toc

REPO = Path(__file__).resolve().parents[2]


def test_the_committed_toc_is_written_from_the_pages():
    assert (REPO / "_toc.yml").read_text(encoding="utf-8") == toc.render(), \
        "_toc.yml differs from sec_lib.chapters.PAGES: run python -m sec_lib.book toc"


def test_every_page_and_every_markdown_page_is_listed_once_and_exists():
    data = yaml.safe_load(toc.render())
    files = []

    def walk(entries):
        for e in entries:
            files.append(e["file"])
            walk(e.get("sections", []))
    for part in data["parts"]:
        walk(part["chapters"])
    assert data["root"] == "book/nb/home"
    assert sorted(files) == sorted([f"book/nb/{p.output}" for p in PAGES if p.part is not None]
                                   + [d for _, docs in PARTS for d in docs])
    assert [p["caption"] for p in data["parts"]] == [c for c, _ in PARTS]
    for _, docs in PARTS:
        for d in docs:
            assert (REPO / f"{d}.md").is_file(), d
    runs = next(e for part in data["parts"] for e in part["chapters"] if e["file"] == "book/nb/runs")
    assert [s["title"] for s in runs["sections"]][:3] == ["Run: Triplet, no regularizer", "Run: Triplet, L2-reg (μ = 0)",
                                                          "Run: Triplet, SEC"]


def test_a_page_names_a_part_that_exists_and_the_book_has_one_root():
    with pytest.raises(ParameterError, match="part.*'Reproduction'"):
        Page("x", "x", part="Reproductoin")
    with pytest.raises(ParameterError, match="exactly one page without a part"):
        toc.render(pages=(Page("home", "home"), Page("data", "data")))
    with pytest.raises(ParameterError, match="lacks"):
        toc.render(pages=(Page("home", "home"), Page("train", "runs/a", part="Reproduction")))


def test_the_toc_command_checks_and_writes(tmp_path, capsys):
    (tmp_path / "_toc.yml").write_text("format: jb-book\n", encoding="utf-8")
    assert runner.toc_command(tmp_path, check=True) == 1
    assert runner.toc_command(tmp_path, check=False) == 0
    assert (tmp_path / "_toc.yml").read_text(encoding="utf-8") == toc.render()
    assert runner.toc_command(tmp_path, check=True) == 0
    assert "current" in capsys.readouterr().out
