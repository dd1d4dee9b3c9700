# python3 (>= 3.10) and make are the only prerequisites: each target installs what it runs.
#   make demo       a small venv with `pip install .` only (no dev tools, no torch), then the demo
#   make test       the dev venv (.venv), then lint, the docs build and the test-suite without `slow`
#   make test-slow  the `slow` tests (whole release trees from the package registry, clean-venv installs)
#   make docs       the documentation site (mkdocs build --strict, into build/site)
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
DEMO_VENV ?= build/demo-venv
DEMO_STAMP := $(DEMO_VENV)/.installed
# The probe's CPU tests need torch. A CPU build comes from a CPU index where one is reachable;
# otherwise the default index's torch is installed (on PyPI, a CUDA build of several GB).
TORCH_INDEX_URL ?= https://download.pytorch.org/whl/cpu
TORCH_VERSION ?= 2.13.0
# -n auto: one pytest worker per core (pytest-xdist)
PYTEST_ARGS ?= -n auto

.PHONY: setup demo test test-slow lint docs gpu-test

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q -e '.[dev]'
	@if $(PY) -c "import sys, urllib.request; urllib.request.urlopen(sys.argv[1].rstrip('/') + '/torch/', timeout=10)" '$(TORCH_INDEX_URL)' 2>/dev/null; then \
	  echo "torch: installing the CPU build of torch==$(TORCH_VERSION) from $(TORCH_INDEX_URL)"; \
	  $(PY) -m pip install -q --index-url '$(TORCH_INDEX_URL)' 'torch==$(TORCH_VERSION)'; \
	else \
	  echo "torch: $(TORCH_INDEX_URL) is not reachable; installing torch==$(TORCH_VERSION) from the default index instead (on PyPI that is a CUDA build)"; \
	  $(PY) -m pip install -q 'torch==$(TORCH_VERSION)' || echo "torch: not installed; the torch-dependent tests will skip"; \
	fi
	@$(PY) -c "import torch; print('torch: installed', torch.__version__)" 2>/dev/null || true
	touch $(STAMP)

setup: $(STAMP)

# A plain install of the package: what a user gets, and all the demo needs.
$(DEMO_STAMP): pyproject.toml $(shell find offlint rules fixtures -type f -not -path '*/__pycache__/*')
	python3 -m venv $(DEMO_VENV)
	$(DEMO_VENV)/bin/python -m pip install -q .
	touch $(DEMO_STAMP)

demo: $(DEMO_STAMP)
	$(DEMO_VENV)/bin/offlint check fixtures/ || true
	# the repo excludes fixtures/ from its own checks; a file named on the command line is checked
	$(DEMO_VENV)/bin/offlint fix fixtures/sglang_offloader_original.py || true

lint: setup
	$(VENV)/bin/ruff check offlint tests benchmarks
	$(VENV)/bin/mypy
	$(VENV)/bin/offlint check offlint

docs: setup
	$(PY) docs/rules/generate.py --check
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

test: setup lint docs
	$(PY) -m pytest -q -m "not slow" $(PYTEST_ARGS)

test-slow: setup
	$(PY) -m pytest -q -m slow $(PYTEST_ARGS)

gpu-test: setup
	$(PY) -m pytest -q -m gpu
