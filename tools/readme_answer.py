"""The README's answer, kept equal to the landing page's (``sec_lib.chapters.home.plain_answer``).

    python tools/readme_answer.py           # print the answer the landing page computes from the committed runs
    python tools/readme_answer.py --write   # write it between README.md's answer markers

``tests/site/test_readme.py`` fails when the two differ, naming this command.
"""
from __future__ import annotations

import re
import sys
import textwrap
from pathlib import Path

from sec_lib.chapters.home import plain_answer    # the landing page's answer, on the committed runs

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCK = re.compile(r"(<!-- answer -->\n)(.*?)(<!-- /answer -->)", re.S)


def readme_answer(text: str) -> str:
    m = BLOCK.search(text)
    if m is None:
        raise ValueError("README.md has no <!-- answer --> ... <!-- /answer --> block")
    return " ".join(m.group(2).split())


def wrap(sentence: str, width: int = 118) -> str:
    """``sentence`` in lines of at most ``width``, broken only at spaces (a hyphen or a long word stays whole)."""
    return textwrap.fill(sentence, width, break_long_words=False, break_on_hyphens=False) + "\n"


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    answer = plain_answer()
    if "--write" in argv:
        text = README.read_text(encoding="utf-8")
        README.write_text(BLOCK.sub(lambda m: m.group(1) + wrap(answer) + m.group(3), text, count=1), encoding="utf-8")
    print(answer)
    return 0


if __name__ == "__main__":
    sys.exit(main())
