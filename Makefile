# Two entry points (see README, Quickstart):
#   make demo   set up .venv and run `posenc demo`
#   make test   set up .venv and run lint, type checks, the whole test suite and a quick
#               benchmark smoke run
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint typecheck pytest bench-quick clean

$(STAMP): requirements-dev.txt requirements-nodeps.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps -r requirements-nodeps.txt
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps -e .
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/posenc demo

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks examples docs tools
	$(BIN)/ruff format --check src tests benchmarks examples docs tools

typecheck: $(STAMP)
	$(BIN)/mypy

pytest: $(STAMP)
	$(BIN)/python -m pytest

# Smoke test of the benchmark suite (it must run; its numbers are not checked here).
bench-quick: $(STAMP)
	$(BIN)/python -m benchmarks --quick

test: lint typecheck pytest bench-quick

clean:
	rm -rf $(VENV) build dist .pytest_cache .mypy_cache .ruff_cache .hypothesis
