"""The README is the front door: its first 30 lines hold the answer and the two commands, and its answer is the
landing page's, computed from the committed runs (tools/readme_answer.py writes it)."""
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import readme_answer as ra  # noqa: E402


def test_the_first_30_lines_hold_the_answer_and_the_two_commands():
    head = "\n".join((ROOT / "README.md").read_text(encoding="utf-8").splitlines()[:30])
    assert "<!-- /answer -->" in head and ra.readme_answer(head)
    assert "make book" in head and "make test" in head


def test_the_readme_answer_is_the_landing_pages():
    written = ra.readme_answer((ROOT / "README.md").read_text(encoding="utf-8"))
    assert written == ra.plain_answer(), "the README's answer is stale: run python tools/readme_answer.py --write"
    assert "+0.49 [+0.34, +0.65]" in written        # the committed primary test, as the landing page shows it


def test_the_answer_block_is_required_and_rewrapped(tmp_path):
    with pytest.raises(ValueError, match="no <!-- answer -->"):
        ra.readme_answer("# a README without the block\n")
    text = "x\n<!-- answer -->\nold\n<!-- /answer -->\ny\n"
    new = ra.BLOCK.sub(lambda m: m.group(1) + ra.wrap("word " * 40, width=30) + m.group(3), text)
    assert ra.readme_answer(new) == " ".join(["word"] * 40)
    assert max(len(line) for line in new.splitlines()) <= 30
