# Two entry points, both self-installing into .venv/:  make demo  |  make test
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install demo test lint bench clean

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c constraints.txt -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/conformal-rag demo

test: $(STAMP)
	$(VENV)/bin/ruff check .
	sh .ci/ensure_chromium.sh
	CONFORMAL_RAG_REQUIRE_BROWSER=1 $(PY) -m pytest -q

bench: $(STAMP)
	$(PY) benchmarks/retrieval.py

clean:
	rm -rf $(VENV) .pytest_cache
