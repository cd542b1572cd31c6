# One-command setup over a local virtual environment (.venv).
# torch is installed first, pinned, so pip takes the CPU build on this disk
# instead of pulling gigabytes of CUDA wheels.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
BIN := $(VENV)/bin
PYTEST_ARGS ?=

.PHONY: setup run test test-fast test-all clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e '.[dev,postgres,dask]'
	touch $@

run: setup
	$(BIN)/arl db upgrade
	$(BIN)/arl run

# CI's command: everything but the soak runs (about 10 minutes on 2 cores).
test: setup
	$(BIN)/pytest $(PYTEST_ARGS)

# Skips the slow tests too (a couple of minutes).
test-fast: setup
	$(BIN)/pytest -m 'not slow and not soak' $(PYTEST_ARGS)

# Everything, soak runs included (random SIGKILL trials, the 2,000-candidate fault run, 20k fuzzed inputs).
test-all: setup
	$(BIN)/pytest -m '' $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
