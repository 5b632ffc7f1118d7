"""``python -m sec_lib.book run|build ...``: the book runner, kept at this name for the Makefile, README and
tests. The code is :mod:`sec_lib.site.runner`."""
import sys

from .site.runner import main

if __name__ == "__main__":
    sys.exit(main())
