# Two entry points, both self-installing into .venv/:  make demo  |  make test
# `make check` is the fast tier for everyday work (no model, no Chroma, no browser); `make test` runs everything.
# Every install goes through the lock (constraints.txt); `make lock` regenerates it from constraints.in.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
LOCK := constraints.txt
# The lock also pins what pip installs to build sdists (setuptools, scikit-build-core for llama-cpp-python).
PIP_INSTALL := $(PY) -m pip install -q -c $(LOCK) --build-constraint $(LOCK)

.PHONY: install demo test check check-lock docs lint bench lock clean

$(STAMP): pyproject.toml constraints.in $(LOCK)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -c $(LOCK) --upgrade pip
	$(PIP_INSTALL) -r constraints.in
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/conformal-rag demo

check-lock: $(STAMP)
	$(PY) .ci/check_lock.py $(LOCK)

# The fast tier: ruff, the documentation site (about 7 s), then every test without the `integration` or
# `statistical` marker (unit, command-line and the package's doctests). tests/conftest.py fails an unmarked test that loads MiniLM, opens Chroma or loads Gemma.
check: check-lock
	$(VENV)/bin/ruff check .
	$(MKDOCS_BUILD)
	$(PY) -m pytest -q -m "not integration and not statistical"

# `make test` also builds the documentation site (below) before the tests, so a broken link fails in seconds.
test: check-lock
	$(VENV)/bin/ruff check .
	$(MKDOCS_BUILD)
	sh .ci/ensure_chromium.sh
	CONFORMAL_RAG_REQUIRE_BROWSER=1 $(PY) -m pytest -q

# The documentation site (mkdocs.yml, docs/) into site/; --strict fails on a broken link, anchor or API reference.
MKDOCS_BUILD := NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir site
docs: $(STAMP)
	$(MKDOCS_BUILD)

bench: $(STAMP)
	$(PY) benchmarks/retrieval.py

# Resolve constraints.in (the project, all extras, dev and build tools, held pins) into the lock.
lock:
	rm -rf .lock-venv
	$(PYTHON) -m venv .lock-venv
	.lock-venv/bin/python -m pip install -q --upgrade pip
	.lock-venv/bin/python -m pip install -q --dry-run --ignore-installed --report .lock-venv/report.json -r constraints.in
	.lock-venv/bin/python .ci/write_lock.py .lock-venv/report.json $(LOCK)
	rm -rf .lock-venv

clean:
	rm -rf $(VENV) .pytest_cache site
