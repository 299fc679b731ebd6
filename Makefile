# posenc's make targets. README, "Quickstart", has the first two.
#   make demo          .venv with posenc, PyTorch (CPU), NumPy, matplotlib and Flask, then `posenc demo`
#   make test          .venv with the whole development stack, then what CI runs: lint, types,
#                      the whole suite (sweep and browser included) on two workers, the tests
#                      marked kernel_sets under two more CPU kernel sets, a benchmark smoke run,
#                      and the NumPy-only suite under Python 3.10 beside them
#   make check         before a commit: lint, types and every folder's tests with fewer
#                      hypothesis examples; no sweep, browser, slow or kernel-set runs
#   make test-compat   the tests marked compat under the newest transformers (.venv-compat)
#   make test-kernels  the tests marked kernel_sets under ATen's default and avx2 CPU kernels
#   make test-sweep    only the sweep: swap_positions on every causal LM of transformers
#   make docs          the documentation site, strict, into site/
#   make clean         remove the environments and every build output
#
# What a target runs is chosen by markers, which folders set (tests/folders.py): a test file
# in the right folder is picked up with no edit here. Three environments: .venv (development;
# the pins need Python 3.11), .venv-compat (the newest transformers) and .venv-py310 (NumPy
# only, the oldest Python requires-python names). An environment records the Python and the
# requirement files it was made from; when either changes, the next make rebuilds it.

PYTHON     ?= python3
PYTHON310  ?= python3.10
VENV       ?= .venv
VENV310    ?= .venv-py310
VENVCOMPAT ?= .venv-compat
WORKERS    ?= 2
BIN        := $(VENV)/bin
# --no-compile: pip writes no bytecode for the thousands of modules that are never imported
# (it took half of each install); a module is compiled when a make target first imports it.
PIP        := -m pip install --quiet --disable-pip-version-check --no-compile
PYTEST     := -m pytest -q -p no:cacheprovider
# The test processes that run side by side (the $(WORKERS) workers, the two kernel-set runs) run
# one intra-op thread each: together they fill the cores, and a second thread in each made them
# wait for one another (the suite took about 10 % longer, the kernel-set runs 60 %).
SIDE_BY_SIDE := OMP_NUM_THREADS=1
# pytest-xdist's workers; an idle one takes tests queued for the other (worksteal), so the run
# does not wait at its end on one worker's queue of slow tests.
XDIST := -n $(WORKERS) --dist worksteal
REQUIRED_PYTHON := 3.11

.DEFAULT_GOAL := help

# A test run starts many Python processes (pytest's workers, the kernel-set runs, the CLI and
# the explorer under test) that import the same modules of posenc, its tests and the installed
# packages (which pip leaves uncompiled, see PIP): the first to import a module keeps its
# bytecode (__pycache__/, ignored by git) even where the environment sets
# PYTHONDONTWRITEBYTECODE, which would make every process compile them all again.
unexport PYTHONDONTWRITEBYTECODE
.NOTPARALLEL:
.PHONY: help demo test check test-compat test-kernels test-sweep test-py310 lint typecheck \
	warm suite browser bench-quick docs clean FORCE

help:
	@sed -n '2,13s/^#   //p' Makefile

# -- the Python the pins need ---------------------------------------------------------------------
# Goals that use .venv stop here, with one line and before installing anything, under any other.
python_id = $(shell $(1) -c 'import platform, sys; print(platform.python_version(), sys.executable)' 2>/dev/null)
files_hash = $(shell cat $(1) | sha256sum | cut -c1-16)
PYTHON_ID := $(call python_id,$(PYTHON))
VENV_GOALS := demo test check test-compat test-kernels test-sweep lint typecheck warm suite docs \
	bench-quick
ifneq ($(filter $(VENV_GOALS),$(MAKECMDGOALS)),)
ifeq ($(filter $(REQUIRED_PYTHON).%,$(firstword $(PYTHON_ID))),)
$(error posenc's pinned environment needs Python $(REQUIRED_PYTHON), but $(PYTHON) is $(if $(PYTHON_ID),Python $(firstword $(PYTHON_ID)),not a working Python): run make $(MAKECMDGOALS) PYTHON=python$(REQUIRED_PYTHON))
endif
endif

# -- .venv: the demo's packages, then the development stack -------------------------------------
# A stamp holds what its environment was made from; one that differs from what this Makefile
# expects is remade. A .venv with older requirements is rebuilt from scratch, so that nothing
# dropped from the pins stays installed.
DEMO_STAMP := $(VENV)/.posenc-demo
DEV_STAMP  := $(VENV)/.posenc-dev
EDITABLE   := $(VENV)/.posenc-editable
DEMO_ID := python $(PYTHON_ID) | demo $(call files_hash,requirements-demo.txt)
DEV_ID  := $(DEMO_ID) | dev $(call files_hash,requirements-dev.txt requirements-nodeps.txt)
ifneq ($(file <$(DEMO_STAMP)),$(DEMO_ID))
$(DEMO_STAMP): FORCE
endif
ifneq ($(file <$(DEV_STAMP)),$(DEV_ID))
$(DEV_STAMP): FORCE
endif

NEW_DEMO_ENV = rm -rf $(VENV) \
	&& echo 'make: creating $(VENV) with $(PYTHON)' \
	&& $(PYTHON) -m venv $(VENV) \
	&& echo 'make: pip install PyTorch (CPU), NumPy, matplotlib and Flask (requirements-demo.txt; pip stays quiet until it is done)' \
	&& $(BIN)/python $(PIP) -r requirements-demo.txt \
	&& echo 'make: pip install posenc from this clone (editable, no dependencies)' \
	&& $(BIN)/python $(PIP) --no-deps -e . \
	&& touch $(EDITABLE) \
	&& echo '$(DEMO_ID)' > $(DEMO_STAMP)

$(DEMO_STAMP):
	@$(NEW_DEMO_ENV)

# The package's metadata (entry points, version) changed: reinstall posenc only.
$(EDITABLE): pyproject.toml | $(DEMO_STAMP)
	@echo 'make: pip install posenc again (pyproject.toml changed)' \
	&& $(BIN)/python $(PIP) --no-deps -e .
	@touch $@

# The reference libraries of requirements-nodeps.txt go in without their dependencies (the
# file says why).
$(DEV_STAMP): $(DEMO_STAMP)
	@if [ -e $@ ]; then $(NEW_DEMO_ENV); fi
	@echo 'make: pip install the test, lint, docs and reference tools (requirements-dev.txt; pip stays quiet until it is done)' \
	&& $(BIN)/python $(PIP) -r requirements-dev.txt
	@echo 'make: pip install the reference libraries without their dependencies (requirements-nodeps.txt)' \
	&& $(BIN)/python $(PIP) --no-deps -r requirements-nodeps.txt
	@echo '$(DEV_ID)' > $@

DEV := $(DEV_STAMP) $(EDITABLE)

# The explorer's browser tests drive Debian's chromium and chromium-driver: installed here with
# apt-get when running as root (as CI does) and missing; otherwise those tests skip (fail under CI).
browser:
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null \
	    && ! { [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; }; then \
	  echo "installing chromium and chromium-driver (apt-get) for the explorer's browser tests"; \
	  apt-get update -qq && apt-get install -y -qq chromium chromium-driver >/dev/null; \
	fi

# -- the targets --------------------------------------------------------------------------------
demo: $(DEMO_STAMP) $(EDITABLE)
	@echo 'make: running posenc demo (about ten seconds; figures to ./posenc-demo/)' \
	&& $(BIN)/posenc demo --force

lint: $(DEV)
	$(BIN)/ruff check src tests benchmarks examples docs tools conftest.py
	$(BIN)/ruff format --check src tests benchmarks examples docs tools conftest.py

typecheck: $(DEV)
	$(BIN)/mypy

# The Python 3.10 run (its own small environment, one process, NumPy only) starts first, in the
# background, and its output is printed at the end: it keeps the second core busy while pip,
# ruff and mypy use one. Beside ruff and mypy, one collection of the suite (warm) compiles the
# bytecode its imports need, once: the suite's two workers would each compile it. The benchmark
# smoke run (one process, its numbers not checked) runs beside the two kernel-set runs, its
# output printed after theirs. make test fails if any side failed; Ctrl-C (or SIGTERM) stops
# them all.
test:
	@log=$$(mktemp); bench=$$(mktemp); benchpid=; warmpid=; \
	$(MAKE) --no-print-directory test-py310 > $$log 2>&1 & py310=$$!; \
	trap 'kill $$py310 $$benchpid $$warmpid 2>/dev/null; rm -f $$log $$bench; exit 130' INT TERM; \
	$(MAKE) --no-print-directory browser $(DEV); rest=$$?; \
	if [ $$rest -eq 0 ]; then \
	  $(MAKE) --no-print-directory warm & warmpid=$$!; \
	  $(MAKE) --no-print-directory lint typecheck; rest=$$?; \
	  wait $$warmpid; \
	fi; \
	if [ $$rest -eq 0 ]; then $(MAKE) --no-print-directory suite; rest=$$?; fi; \
	if [ $$rest -eq 0 ]; then \
	  $(MAKE) --no-print-directory bench-quick > $$bench 2>&1 & benchpid=$$!; \
	  $(MAKE) --no-print-directory test-kernels; rest=$$?; \
	  wait $$benchpid || rest=1; \
	  echo "make test: the benchmark smoke run (beside the kernel sets):"; cat $$bench; \
	fi; \
	wait $$py310; status=$$?; \
	echo "make test: the Python 3.10 run (beside the steps above):"; cat $$log; rm -f $$log $$bench; \
	test $$rest -eq 0 -a $$status -eq 0

# One collection of the suite, nothing run: the modules it imports get their bytecode (pip
# writes none, see PIP), so the suite's workers load it instead of each compiling it.
warm: $(DEV)
	@POSENC_SWEEP=1 $(BIN)/python $(PYTEST) --collect-only > /dev/null 2>&1 || true

# The whole suite on $(WORKERS) workers (pytest-xdist): the sweep included (a bare pytest leaves
# it out) and the strict docs build (tests/docs/test_site.py).
suite: $(DEV)
	POSENC_SWEEP=1 $(SIDE_BY_SIDE) $(BIN)/python $(PYTEST) $(XDIST)

check: lint typecheck
	POSENC_FUZZ=quick $(SIDE_BY_SIDE) $(BIN)/python $(PYTEST) $(XDIST) -m "not browser and not slow"

# The tests marked kernel_sets (comparisons with the real libraries, the Hugging Face layer and
# the fast paths) under the CPU kernels ATen would pick on an older or plainer machine: each
# kernel set in its own pytest process (torch reads the variable once, when it loads), the two
# side by side, their outputs printed when both are done. Only the folders whose conftest sets
# the marker are collected (tests/folders.py prints them), not every test module. An unsupported capability is refused
# by torch with a warning: the line before each run prints the one torch uses.
KERNEL_SETS := default avx2
test-kernels: $(DEV)
	@logs=$$(mktemp -d); pids=; \
	for set in $(KERNEL_SETS); do \
	  ( export ATEN_CPU_CAPABILITY=$$set $(SIDE_BY_SIDE); echo "make test-kernels: ATEN_CPU_CAPABILITY=$$set" \
	    && $(BIN)/python -c 'import torch; print("torch uses", torch.backends.cpu.get_cpu_capability())' \
	    && $(BIN)/python $(PYTEST) -m kernel_sets $$($(BIN)/python -m tests.folders kernel_sets) \
	  ) > $$logs/$$set 2>&1 & pids="$$pids $$!"; \
	done; \
	trap 'kill $$pids 2>/dev/null; rm -rf $$logs; exit 130' INT TERM; \
	status=0; for pid in $$pids; do wait $$pid || status=1; done; \
	cat $$logs/*; rm -rf $$logs; test $$status -eq 0

test-sweep: $(DEV)
	$(BIN)/python $(PYTEST) -m sweep

# Every section of the benchmark suite runs once (numbers are not checked).
bench-quick: $(DEV)
	$(BIN)/python -m benchmarks --smoke

docs: $(DEV)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

# -- .venv-compat: the newest transformers --------------------------------------------------------
# pip's choice of transformers today, not the pin; torch, NumPy and the test tools stay at the
# pins through constraints-compat.txt (an unconstrained torch is a multi-GB CUDA build). Only
# what the compat tests need is installed, so CI is cleared: the other tests' missing
# libraries skip, as under Python 3.10. Under the pinned release the tables of these tests are
# exact; under another, what that release adds and posenc does not cover is listed by name
# (skipped), and what the pinned release has must still pass.
COMPAT_STAMP := $(VENVCOMPAT)/.posenc-compat
COMPAT_ID := python $(PYTHON_ID) | compat $(call files_hash,constraints-compat.txt pyproject.toml)
ifneq ($(file <$(COMPAT_STAMP)),$(COMPAT_ID))
$(COMPAT_STAMP): FORCE
endif

$(COMPAT_STAMP):
	rm -rf $(VENVCOMPAT)
	echo 'make: creating $(VENVCOMPAT) with $(PYTHON)' \
	&& $(PYTHON) -m venv $(VENVCOMPAT) \
	&& echo 'make: pip install posenc from this clone into $(VENVCOMPAT) (editable, no dependencies)' \
	&& $(VENVCOMPAT)/bin/python $(PIP) --no-deps -e .
	echo '$(COMPAT_ID)' > $@

test-compat: $(COMPAT_STAMP)
	echo 'make: pip install the newest transformers into $(VENVCOMPAT), torch held at the pinned CPU build (constraints-compat.txt; pip stays quiet until it is done)' \
	&& $(VENVCOMPAT)/bin/python $(PIP) --upgrade -c constraints-compat.txt \
	  transformers torch numpy pytest pytest-xdist hypothesis mpmath
	$(VENVCOMPAT)/bin/python -c 'import transformers, torch; print(f"make test-compat: transformers {transformers.__version__} (pinned: see requirements-dev.txt), torch {torch.__version__}")'
	CI= POSENC_SWEEP=1 $(SIDE_BY_SIDE) $(VENVCOMPAT)/bin/python $(PYTEST) $(XDIST) -m compat

# -- .venv-py310: NumPy only under Python 3.10 ----------------------------------------------------
# requires-python names 3.10: the NumPy-only tests (torch and matplotlib tests skip) run under
# it in their own small environment. A pyenv shim answers "command not found" unless 3.10 is
# selected, so for the default PYTHON310 pyenv's own 3.10 is tried too.
ifneq ($(filter test test-py310,$(MAKECMDGOALS)),)
PY310_ID := $(call python_id,$(PYTHON310))
ifeq ($(PY310_ID)$(filter-out python3.10,$(PYTHON310)),)
PY310_ID := $(call python_id,"$$(pyenv prefix 3.10 2>/dev/null)/bin/python3.10")
endif
PY310_STAMP := $(VENV310)/.posenc-py310
PY310_STAMP_ID := python $(PY310_ID) | $(call files_hash,requirements-py310.txt pyproject.toml)
ifneq ($(file <$(PY310_STAMP)),$(PY310_STAMP_ID))
$(PY310_STAMP): FORCE
endif
endif

ifeq ($(filter 3.10.%,$(firstword $(PY310_ID))),)
test-py310:
	@echo "test-py310: skipped, no Python 3.10 found as $(PYTHON310) (PYTHON310=/path/to/python3.10 names one)"
else
$(PY310_STAMP):
	rm -rf $(VENV310)
	$(word 2,$(PY310_ID)) -m venv $(VENV310)
	echo 'make: pip install the NumPy-only test stack into $(VENV310) (requirements-py310.txt)' \
	&& $(VENV310)/bin/python $(PIP) -r requirements-py310.txt
	echo 'make: pip install posenc from this clone into $(VENV310)' \
	&& $(VENV310)/bin/python $(PIP) --no-deps -e .
	echo '$(PY310_STAMP_ID)' > $@

# CI is cleared for this run only: under CI a missing reference library or browser fails the
# run, and that check belongs to the full environment (make test), not to this NumPy-only one,
# where everything beyond NumPy is missing on purpose and skips. Every test that runs without
# torch runs here, with make check's tenth of the hypothesis examples: this run checks the
# code under Python 3.10; the properties got their full examples in make test's suite.
test-py310: $(PY310_STAMP)
	CI= POSENC_FUZZ=quick $(VENV310)/bin/python $(PYTEST) -rfE
endif

clean:
	rm -rf $(VENV) $(VENV310) $(VENVCOMPAT) site build dist .pytest_cache .mypy_cache .ruff_cache .hypothesis

FORCE:
