"""The book's sources ship inside the wheel, so an installed ``sec_lib`` runs the book from any folder.

The notebooks (``notebooks/``), the Jupyter Book skeleton (``_config.yml``, ``_toc.yml``, ``book/``) and
the files its pages include (``CITATION.cff``, ``CHANGELOG.md``) and the pinned JavaScript
(``package.json``, ``package-lock.json``, for ``npm ci``) live once, at the root of the checkout. Building
a wheel copies them into ``sec_lib/site/project/`` (:data:`sec_lib.site.runner.PACKAGED`); an editable
install (``make setup``) reads them from the checkout instead. ``MANIFEST.in`` puts the same files in an
sdist. Everything else is in ``pyproject.toml``.
"""
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent

#: The book's sources, as globs relative to the checkout root (tests/test_packaging.py checks a wheel has them).
PROJECT_FILES = ("_config.yml", "_toc.yml", "CITATION.cff", "CHANGELOG.md", "package.json", "package-lock.json",
                 "notebooks/*.ipynb", "book/*.md", "book/*.bib", "book/_static/*.css")
PROJECT_PACKAGE_DIR = ("sec_lib", "site", "project")


class BuildPyWithProject(build_py):
    """``build_py``, plus the book's sources copied into ``sec_lib/site/project/`` of the build."""

    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):      # an editable install reads the checkout itself
            return
        dest = Path(self.build_lib).joinpath(*PROJECT_PACKAGE_DIR)
        for pattern in PROJECT_FILES:
            files = sorted(ROOT.glob(pattern))
            if not files:
                raise FileNotFoundError(f"setup.py: no file matches {pattern!r} under {ROOT}; the wheel would lack "
                                        "part of the book")
            for src in files:
                target = dest / src.relative_to(ROOT)
                self.mkpath(str(target.parent))
                self.copy_file(str(src), str(target))


if __name__ == "__main__":                  # setuptools runs this file as __main__; tests read PROJECT_FILES
    setup(cmdclass={"build_py": BuildPyWithProject})
