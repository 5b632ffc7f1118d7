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


def test_the_readme_follow_ups_paragraph_is_the_computed_one():
    written = ra.readme_followups((ROOT / "README.md").read_text(encoding="utf-8"))
    assert written == ra.computed_followups(), ("the README's follow-ups paragraph is stale (a follow-up completed?): "
                                                "run python tools/readme_answer.py --write")


def test_the_follow_ups_paragraph_says_what_the_complete_ones_found_and_which_still_train(monkeypatch):
    from sec_lib.chapters import home
    status = lambda done: [{"id": i, "question": q, "committed": 9 if i in done else 1, "runs": 9}   # noqa: E731
                           for i, q in (("C4L", "C4"), ("C4W", "C4"), ("P1c", "P1"))]
    monkeypatch.setattr(home, "followup_status", lambda root=None: status(()))
    monkeypatch.setattr(home, "followup_brief", lambda tier, root=None: "")
    monkeypatch.setattr(home.pretrained_seeds, "readme_brief", lambda tier, root=None: "")
    said = home.readme_followups()
    assert said.endswith("They are training; the landing page says how far, and their verdicts join the answer once "
                         "all their runs are committed.")
    monkeypatch.setattr(home, "followup_status", lambda root=None: status(("C4L",)))
    monkeypatch.setattr(home, "followup_brief", lambda tier, root=None: "Trained 1.5 times as long, it reads +1.")
    said = home.readme_followups()
    assert "What they found: trained 1.5 times as long, it reads +1. The weight-decay runs still train;" in said
    assert said.endswith("its verdict joins the answer once all its runs are committed.")
    monkeypatch.setattr(home, "followup_status", lambda root=None: status(("C4L", "C4W")))
    said = home.readme_followups()
    assert said.endswith("What they found: trained 1.5 times as long, it reads +1.")       # nothing left training
    monkeypatch.setattr(home.pretrained_seeds, "readme_brief", lambda tier, root=None: "On fresh seeds, -1.")
    assert home.readme_followups().endswith("it reads +1. On fresh seeds, -1.")              # the third, once complete
    with pytest.raises(ValueError, match="no <!-- followups -->"):
        ra.readme_followups("# a README without the block\n")
