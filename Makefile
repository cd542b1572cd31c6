# One-command setup over a local virtual environment (.venv).
# torch is installed first, pinned, so pip takes the CPU build on this disk
# instead of pulling gigabytes of CUDA wheels.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
BIN := $(VENV)/bin
PYTEST_ARGS ?=

.PHONY: setup run test test-fast clean

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

test: setup
	$(BIN)/pytest -m '' $(PYTEST_ARGS)

test-fast: setup
	$(BIN)/pytest $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
