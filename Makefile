# sec-book: `make book` builds the reproduction report, `make test` runs the test suite.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
JS_STAMP := node_modules/.installed
PROFILE ?= cpu

.PHONY: setup js browser test book book-html clean-book help

help:
	@echo "make book   - run every notebook (profile $(PROFILE)) and build _build/html"
	@echo "make test   - run the test suite (installs what is missing)"
	@echo "make setup  - create .venv and install sec_lib editable"

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -e .
	$(PY) -m ipykernel install --sys-prefix --name python3 >/dev/null
	touch $@

# The widget manager and require.js are served by the book itself (no CDN): pinned in package.json.
js: $(JS_STAMP)

$(JS_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

# Headless Chromium for the page checks (Debian package).
browser:
	@command -v chromium >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

test: setup js browser
	$(PY) -m pytest -q

book: setup js
	$(PY) -m sec_lib.book run --profile $(PROFILE)
	$(PY) -m sec_lib.book build

clean-book:
	rm -rf _build book/nb
