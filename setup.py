"""The book's sources ship inside the wheel, so an installed ``sec_lib`` runs the book from any folder.

The notebooks (``notebooks/``), the Jupyter Book skeleton (``_config.yml``, ``_toc.yml``, ``book/``) and
the files its pages include (``CITATION.cff``, ``CHANGELOG.md``) and the pinned JavaScript
(``package.json``, ``package-lock.json``, for ``npm ci``) live once, at the root of the checkout. Building
a wheel copies them into ``sec_lib/site/project/`` (:data:`sec_lib.site.runner.PACKAGED`); an editable
install (``make setup``) reads them from the checkout instead. ``MANIFEST.in`` puts the same files in an
sdist. Everything else is in ``pyproject.toml``.

The committed glyph backbone (``data/reference/pretrained/glyph_smallcnn.pt`` and its provenance) ships too, at
the same repository-relative path under the wheel's root (:data:`REPO_FILES`): installed, it lies beside the
``sec_lib`` package, in the folder the library takes for its repository (``Path(sec_lib.__file__).parents[1]``,
``REPO`` in its modules). A fine-tuning config names it by that path string (``TrainConfig.pretrained``, part of
the run's store key), and ``sec_lib.runs.train.weights_path`` and ``sec_lib.runs.pretrain.committed_provenance``
look it up relative to that folder, so an installed package finds it, with the same store keys as a checkout.
"""
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent

#: The book's sources, as globs relative to the checkout root (tests/test_packaging.py checks a wheel has them).
PROJECT_FILES = ("_config.yml", "_toc.yml", "CITATION.cff", "CHANGELOG.md", "package.json", "package-lock.json",
                 "notebooks/*.ipynb", "book/*.md", "book/*.bib", "book/_static/*.css",
                 "data/reference/decisive/README.md")     # the pre-registration page includes it
PROJECT_PACKAGE_DIR = ("sec_lib", "site", "project")
#: Committed files the library reads by their repository-relative path, copied to that path under the wheel's root
#: (tests/test_packaging.py checks a wheel has them): the glyph backbone the fine-tuning runs start from (see above).
REPO_FILES = ("data/reference/pretrained/glyph_smallcnn.pt", "data/reference/pretrained/glyph_smallcnn.json")


class BuildPyWithProject(build_py):
    """``build_py``, plus the book's sources copied into ``sec_lib/site/project/`` of the build and
    :data:`REPO_FILES` to their own paths at its root."""

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
        for name in REPO_FILES:
            src = ROOT / name
            if not src.is_file():           # never pretrained here: that is 15 minutes of training
                raise FileNotFoundError(f"setup.py: {src} does not exist; the wheel would lack the glyph backbone the "
                                        "fine-tuning runs start from: build it with `python -m sec_lib.book pretrain` "
                                        "(or restore the committed file)")
            target = Path(self.build_lib) / name
            self.mkpath(str(target.parent))
            self.copy_file(str(src), str(target))


if __name__ == "__main__":      # setuptools runs this file as __main__; tests read PROJECT_FILES and REPO_FILES
    setup(cmdclass={"build_py": BuildPyWithProject})
