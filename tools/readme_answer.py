"""The README's answer, kept equal to the landing page's (``sec_lib.chapters.home.plain_answer``), and the paragraph
under it on the follow-ups that test it (``sec_lib.chapters.home.readme_followups``).

    python tools/readme_answer.py           # print both, as the landing page computes them from the committed runs
    python tools/readme_answer.py --write   # write them between README.md's answer and followups markers

``tests/site/test_readme.py`` fails when the two differ, naming this command.
"""
from __future__ import annotations

import re
import sys
import textwrap
from pathlib import Path

from sec_lib.chapters import home
from sec_lib.chapters.home import plain_answer    # the landing page's answer, on the committed runs

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCK = re.compile(r"(<!-- answer -->\n)(.*?)(<!-- /answer -->)", re.S)
FOLLOWUPS = re.compile(r"(<!-- followups -->\n)(.*?)(<!-- /followups -->)", re.S)


def readme_answer(text: str, block: re.Pattern = BLOCK) -> str:
    m = block.search(text)
    if m is None:
        name = re.search(r"<!-- (\w+) -->", block.pattern).group(1)
        raise ValueError(f"README.md has no <!-- {name} --> ... <!-- /{name} --> block")
    return " ".join(m.group(2).split())


def readme_followups(text: str) -> str:
    return readme_answer(text, FOLLOWUPS)


def wrap(sentence: str, width: int = 118) -> str:
    """``sentence`` in lines of at most ``width``, broken only at spaces (a hyphen or a long word stays whole)."""
    return textwrap.fill(sentence, width, break_long_words=False, break_on_hyphens=False) + "\n"


def computed_followups() -> str:
    """The paragraph under the answer, as the landing page's evidence gives it (:func:`home.readme_followups`)."""
    return home.readme_followups()


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    answer, followups = plain_answer(), computed_followups()
    if "--write" in argv:
        text = README.read_text(encoding="utf-8")
        for block, said in ((BLOCK, answer), (FOLLOWUPS, followups)):
            text = block.sub(lambda m: m.group(1) + wrap(said) + m.group(3), text, count=1)
        README.write_text(text, encoding="utf-8")
    print(answer, followups, sep="\n\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
