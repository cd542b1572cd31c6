# One-command setup over a local virtual environment (.venv).
# torch is installed first, pinned, so pip takes the CPU build on this disk
# instead of pulling gigabytes of CUDA wheels. --no-compile: Python compiles the
# modules a run imports on first use instead of every file of every package now.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
BIN := $(VENV)/bin
PYTEST_ARGS ?=
# Test files spread over this many pytest-xdist workers (a file's tests stay on one worker, so module and
# session fixtures are built once per worker). Many tests wait on subprocesses and servers: 2 workers on
# 2 cores took the suite from 10.7 to 6.2 minutes. Most of a test's wall time is waiting (a full run: 18 CPU-minutes
# in 45 wall minutes at load 22), so 4 workers overlap more of it on 2 cores. WORKERS=0 runs in one process.
WORKERS ?= 4
# --no-loadscope-reorder: xdist's loadfile scheduler otherwise hands out the files with the most tests first, which
# undoes tests/conftest.py's longest-file-first order and left the minutes-long crash and interrupt files for the end.
XDIST := $(if $(filter 0,$(WORKERS)),,-n $(WORKERS) --dist loadfile --no-loadscope-reorder)
# Python caches the bytecode of what it imports, whatever the shell says: with PYTHONDONTWRITEBYTECODE=1 (set on
# this project's machines) every `arl` process and test subprocess compiled torch, transformers, prefect and ARL from
# source again. Measured 2026-12-03: `arl run --profile quick --steps 1` took 85 CPU-s with the variable set, 45 CPU-s
# once the bytecode was cached (a third of the samples were in source_to_code).
PY_ENV := env -u PYTHONDONTWRITEBYTECODE

.PHONY: setup setup-dev run test test-fast test-slurm test-all clean

# What a run needs; `setup-dev` adds the test tools and the PostgreSQL and Dask extras on top
# (TRL, Playwright, ... take a minute more to install, which a first `make run` does not need to pay).
setup: $(VENV)/.installed
setup-dev: $(VENV)/.installed-dev

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet --no-compile torch==2.13.0
	$(BIN)/pip install --quiet --no-compile -e .
	touch $@

$(VENV)/.installed-dev: $(VENV)/.installed
	$(BIN)/pip install --quiet --no-compile -e '.[dev,postgres,dask]'
	touch $@

run: setup
	$(BIN)/arl db upgrade
	$(PY_ENV) $(BIN)/arl run

# CI's command: everything but the soak runs and the SLURM tests (`make test-slurm`): 1,611 tests in 11.7-13.1 minutes on a
# fresh clone (2026-12-07; 9-17 minutes on other machines of this project: docs/benchmarks.md "Test suite time").
test: setup-dev
	$(PY_ENV) $(BIN)/pytest $(XDIST) $(PYTEST_ARGS)

# The DFT tier on SLURM (a cluster that answers sinfo: .ci/slurm-up starts one); CI's own step after `make test`.
test-slurm: setup-dev
	$(PY_ENV) $(BIN)/pytest -m slurm $(PYTEST_ARGS) tests/arl_flows/test_slurm.py

# Skips the slow tests (each over about 5 s on an idle machine) too. Measured 2026-12-03 with the default two
# workers on 2 cores (load 2-5, one DFT benchmark running beside it): 1,402 tests in 5 min 45 s of wall time
# (9.6 CPU-min); most of the rest is waiting on subprocesses, sandboxes and servers, which the workers overlap.
test-fast: setup-dev
	$(PY_ENV) $(BIN)/pytest $(XDIST) -m 'not slow and not soak' $(PYTEST_ARGS)

# Everything, soak runs included (random SIGKILL trials, the 2,000-candidate fault run, 20k fuzzed inputs).
test-all: setup-dev
	$(PY_ENV) $(BIN)/pytest $(XDIST) -m '' $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
