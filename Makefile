# Everything a fresh machine needs is installed here: python3 is the only prerequisite.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup demo test lint gpu-test

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	# CPU build of torch for the probe's CPU tests (the GPU tests run on a GPU machine)
	$(PY) -m pip install -q 'torch==2.13.0' || echo "torch not installed: torch-dependent tests will skip"
	touch $(STAMP)

setup: $(STAMP)

demo: setup
	$(VENV)/bin/offlint check fixtures/ || true
	# the repo excludes fixtures/ from its own checks; named here on purpose
	$(VENV)/bin/offlint fix --no-force-exclude fixtures/sglang_offloader_original.py || true

lint: setup
	$(VENV)/bin/ruff check offlint tests benchmarks
	$(VENV)/bin/mypy
	$(VENV)/bin/offlint check offlint

test: setup lint
	$(PY) -m pytest -q

gpu-test: setup
	$(PY) -m pytest -q -m gpu
