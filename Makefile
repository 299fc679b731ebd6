# Entry points (see README, Quickstart):
#   make demo    set up .venv (posenc, PyTorch CPU, NumPy, matplotlib, Flask) and run `posenc demo`
#   make test    add the test, lint, docs and reference stack to .venv, then run lint, type
#                checks, the whole test suite (and its end-to-end comparisons under two more
#                CPU kernel sets), the strict docs build, a quick benchmark run and the
#                NumPy-only tests under Python 3.10 (what CI runs); the sweep included
#   make test-sweep  only the sweep: swap_positions on every causal LM of transformers, tiny
#   make test-compat the Hugging Face tests under the newest transformers (.venv-compat)
#   make test-kernels the end-to-end comparisons under ATen's default and avx2 CPU kernels
#   make docs    build the documentation site into site/
#   make clean   remove the environments and every build output
#
# The pins need Python 3.11. .venv records the Python that made it and a hash of the requirement
# files: another Python or changed requirements rebuild it from scratch.
PYTHON    ?= python3
PYTHON310 ?= python3.10
VENV      ?= .venv
VENV310   ?= .venv-py310
VENVCOMPAT ?= .venv-compat
BIN       := $(VENV)/bin
PIP_FLAGS := --quiet --disable-pip-version-check
REQUIRED_PYTHON := 3.11

.DEFAULT_GOAL := help
.NOTPARALLEL:
.PHONY: help demo test test-sweep test-compat test-kernels lint typecheck pytest browser docs bench-quick test-py310 clean FORCE

python_id = $(shell $(1) -c 'import platform, sys; print(platform.python_version(), sys.executable)' 2>/dev/null)
files_hash = $(shell cat $(1) | sha256sum | cut -c1-16)

# Goals that use .venv stop here, with one line and before installing anything, under any Python
# but the one the pins need.
PYTHON_ID := $(call python_id,$(PYTHON))
VENV_GOALS := demo test test-sweep test-compat test-kernels lint typecheck pytest docs bench-quick
ifneq ($(filter $(VENV_GOALS),$(MAKECMDGOALS)),)
ifeq ($(filter $(REQUIRED_PYTHON).%,$(firstword $(PYTHON_ID))),)
$(error posenc's pinned environment needs Python $(REQUIRED_PYTHON), but $(PYTHON) is $(if $(PYTHON_ID),Python $(firstword $(PYTHON_ID)),not a working Python): run make $(MAKECMDGOALS) PYTHON=python$(REQUIRED_PYTHON))
endif
endif

# Stamps: a stamp whose recorded content differs from what this Makefile expects is remade.
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

help:
	@sed -n '2,11s/^#   //p' Makefile

# posenc, torch, NumPy, matplotlib and Flask in a new .venv (an old one is removed first).
NEW_DEMO_ENV = rm -rf $(VENV) \
	&& echo 'make: creating $(VENV) with $(PYTHON)' \
	&& $(PYTHON) -m venv $(VENV) \
	&& echo 'make: pip install PyTorch (CPU), NumPy, matplotlib and Flask (requirements-demo.txt; pip stays quiet until it is done)' \
	&& $(BIN)/python -m pip install $(PIP_FLAGS) -r requirements-demo.txt \
	&& echo 'make: pip install posenc from this clone (editable, no dependencies)' \
	&& $(BIN)/python -m pip install $(PIP_FLAGS) --no-deps -e . \
	&& touch $(EDITABLE) \
	&& echo '$(DEMO_ID)' > $(DEMO_STAMP)

$(DEMO_STAMP):
	$(NEW_DEMO_ENV)

# The package's metadata (entry points, version) changed: reinstall posenc only.
$(EDITABLE): pyproject.toml | $(DEMO_STAMP)
	echo 'make: pip install posenc again (pyproject.toml changed)' \
	&& $(BIN)/python -m pip install $(PIP_FLAGS) --no-deps -e .
	touch $@

# The rest of requirements-dev.txt. A .venv with older dev requirements is rebuilt from scratch,
# so that nothing dropped from the pins stays installed.
$(DEV_STAMP): $(DEMO_STAMP)
	if [ -e $@ ]; then $(NEW_DEMO_ENV); fi
	echo 'make: pip install the test, lint, docs and reference tools (requirements-dev.txt; pip stays quiet until it is done)' \
	&& $(BIN)/python -m pip install $(PIP_FLAGS) -r requirements-dev.txt
	echo 'make: pip install the reference libraries without their dependencies (requirements-nodeps.txt)' \
	&& $(BIN)/python -m pip install $(PIP_FLAGS) --no-deps -r requirements-nodeps.txt
	echo '$(DEV_ID)' > $@

demo: $(DEMO_STAMP) $(EDITABLE)
	echo 'make: running posenc demo (about ten seconds; figures to ./posenc-demo/)' \
	&& $(BIN)/posenc demo --force

lint: $(DEV_STAMP) $(EDITABLE)
	$(BIN)/ruff check src tests benchmarks examples docs tools conftest.py
	$(BIN)/ruff format --check src tests benchmarks examples docs tools conftest.py

typecheck: $(DEV_STAMP) $(EDITABLE)
	$(BIN)/mypy

# The explorer's browser tests drive Debian's chromium and chromium-driver: installed here with
# apt-get when running as root (as CI does) and missing; otherwise those tests skip (fail under CI).
browser:
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null \
	    && ! { [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; }; then \
	  echo "installing chromium and chromium-driver (apt-get) for the explorer's browser tests"; \
	  apt-get update -qq && apt-get install -y -qq chromium chromium-driver >/dev/null; \
	fi

# The whole suite, the tests marked sweep included (a bare `pytest` leaves them out).
pytest: $(DEV_STAMP) $(EDITABLE) browser
	POSENC_SWEEP=1 $(BIN)/python -m pytest

# Only the tests marked sweep: every causal LM of the pinned transformers, built tiny, swapped
# and compared (tests/torch/hf/test_swap_sweep.py; one to three minutes here).
test-sweep: $(DEV_STAMP) $(EDITABLE)
	$(BIN)/python -m pytest -m sweep tests

# The end-to-end comparisons (models, layers and rotary modules of transformers against
# posenc's, torch.compile with Inductor) and the fast paths against their formulas (the
# complex product's vector width depends on the kernel set) under the CPU kernels ATen would pick on an older or
# plainer machine: ATEN_CPU_CAPABILITY=default (no vector kernels) and avx2, each in its own
# pytest run (torch reads the variable once, when it loads), the two side by side with the
# kernel_sets tests below (each mostly one core; their outputs are printed when all are done). The tolerances count roundings
# (tests/tolerance.py), so a kernel set that sums in another order must still pass. An
# unsupported capability is refused by torch with a warning; the line before each run prints
# the capability torch uses. Then the kernel_sets tests, once (they start their own processes
# under each kernel set: a graph Inductor cached under the machine's own kernels must not
# serve another set). Both runs: 26 s and 28 s of tests on a quiet two-core machine (2 min
# 32 s and 3 min 7 s on a busy one); the kernel_sets tests about 40 s.
KERNEL_SETS := default avx2
KERNEL_TESTS := tests/torch/hf/test_integration.py tests/torch/hf/test_rotary_plan.py \
	tests/torch/hf/test_swap.py tests/torch/hf/test_swap_compat.py tests/torch/hf/test_swap_dtypes.py \
	tests/torch/hf/test_swap_multi_axis.py tests/torch/hf/test_swap_bias_sweep.py \
	tests/references/test_rotary.py tests/references/hf/test_rope_types.py \
	tests/references/hf/test_multi_axis.py tests/references/test_bias.py \
	tests/references/test_grid_timestep.py tests/torch/test_multi_axis.py \
	tests/repo/test_benchmark_bias.py tests/torch/test_conformance.py::test_inductor_over_changing_lengths \
	tests/torch/kernels/test_differential.py

test-kernels: $(DEV_STAMP) $(EDITABLE)
	@logs=$$(mktemp -d); pids=; \
	for capability in $(KERNEL_SETS); do \
	  ( echo "make test-kernels: ATEN_CPU_CAPABILITY=$$capability" \
	  && ATEN_CPU_CAPABILITY=$$capability $(BIN)/python -c 'import torch; print("torch uses", torch.backends.cpu.get_cpu_capability())' \
	  && ATEN_CPU_CAPABILITY=$$capability $(BIN)/python -m pytest -q -p no:cacheprovider $(KERNEL_TESTS) ) > $$logs/$$capability 2>&1 & pids="$$pids $$!"; \
	done; \
	POSENC_KERNEL_SETS=1 $(BIN)/python -m pytest -q -p no:cacheprovider tests/torch/kernels/test_kernel_sets.py \
	  > $$logs/kernel_sets 2>&1 & pids="$$pids $$!"; \
	trap 'kill $$pids 2>/dev/null; rm -rf $$logs; exit 130' INT TERM; \
	status=0; for pid in $$pids; do wait $$pid || status=1; done; \
	cat $$logs/*; rm -rf $$logs; test $$status -eq 0

# The Hugging Face layer under the newest transformers (pip's choice today, not the pin), in its
# own .venv-compat; torch, NumPy and the test tools stay at the pins through
# constraints-compat.txt (an unconstrained torch would be a multi-GB CUDA build). Each run asks
# pip for a newer transformers, prints the versions it tests, then runs the swap sweep, the
# rotary coverage, the absolute-table swaps, the attention-bias swap sweep and references and
# the Hugging Face doc examples. Under the pinned release the tables of these tests are exact;
# under another, what that release adds and posenc does not cover is listed by name (skipped),
# and what the pinned release has must still pass.
COMPAT_STAMP := $(VENVCOMPAT)/.posenc-compat
COMPAT_ID := python $(PYTHON_ID) | compat $(call files_hash,constraints-compat.txt pyproject.toml)
ifneq ($(file <$(COMPAT_STAMP)),$(COMPAT_ID))
$(COMPAT_STAMP): FORCE
endif
COMPAT_TESTS := tests/torch/hf/test_swap_sweep.py tests/torch/hf/test_rope_coverage.py \
	tests/torch/hf/test_swap.py tests/torch/hf/test_swap_compat.py tests/torch/hf/test_swap_multi_axis.py \
	tests/torch/hf/test_integration.py tests/torch/hf/test_swap_bias_sweep.py \
	tests/references/hf/test_bias.py docs/integration.md docs/porting.md

$(COMPAT_STAMP):
	rm -rf $(VENVCOMPAT)
	echo 'make: creating $(VENVCOMPAT) with $(PYTHON)' \
	&& $(PYTHON) -m venv $(VENVCOMPAT) \
	&& echo 'make: pip install posenc from this clone into $(VENVCOMPAT) (editable, no dependencies)' \
	&& $(VENVCOMPAT)/bin/python -m pip install $(PIP_FLAGS) --no-deps -e .
	echo '$(COMPAT_ID)' > $@

test-compat: $(COMPAT_STAMP)
	echo 'make: pip install the newest transformers into $(VENVCOMPAT), torch held at the pinned CPU build (constraints-compat.txt; pip stays quiet until it is done)' \
	&& $(VENVCOMPAT)/bin/python -m pip install $(PIP_FLAGS) --upgrade -c constraints-compat.txt \
	  transformers torch numpy pytest hypothesis mpmath
	$(VENVCOMPAT)/bin/python -c 'import transformers, torch; print(f"make test-compat: transformers {transformers.__version__} (pinned: see requirements-dev.txt), torch {torch.__version__}")'
	POSENC_SWEEP=1 $(VENVCOMPAT)/bin/python -m pytest -q -p no:cacheprovider $(COMPAT_TESTS)

# The documentation site, strict (a broken reference or link fails) and offline. Not --quiet:
# it drops the warnings before --strict counts them. The variable silences mkdocs-material's
# banner about its end of life (May 2027) on every build.
docs: $(DEV_STAMP) $(EDITABLE)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

# Smoke test of the benchmark suite: one line per section (it must run; numbers are not checked).
bench-quick: $(DEV_STAMP) $(EDITABLE)
	$(BIN)/python -m benchmarks --smoke

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
	&& $(VENV310)/bin/python -m pip install $(PIP_FLAGS) -r requirements-py310.txt
	echo 'make: pip install posenc from this clone into $(VENV310)' \
	&& $(VENV310)/bin/python -m pip install $(PIP_FLAGS) --no-deps -e .
	echo '$(PY310_STAMP_ID)' > $@

# CI is cleared for this run only: under CI a missing reference library or browser fails the run,
# and that check belongs to the full environment above (pytest), not to this NumPy-only one,
# where everything beyond NumPy is missing on purpose and skips.
test-py310: $(PY310_STAMP)
	CI= $(VENV310)/bin/python -m pytest -q -rfE -p no:cacheprovider
endif

# The Python 3.10 run (one process, NumPy only) goes beside the rest of make test, from the
# suite on: the suite keeps about one core busy on average, so the other one runs it; its output
# is printed when both are done, and make test fails if either failed. A background job starts
# with SIGINT ignored, so Ctrl-C (or SIGTERM) on make test stops it through the trap.
test: lint typecheck
	@py310_log=$$(mktemp); \
	$(MAKE) --no-print-directory test-py310 > $$py310_log 2>&1 & py310=$$!; \
	trap 'kill $$py310 2>/dev/null; rm -f $$py310_log; exit 130' INT TERM; \
	$(MAKE) --no-print-directory pytest test-kernels docs bench-quick; rest=$$?; \
	wait $$py310; status=$$?; \
	echo "make test: the Python 3.10 run (beside the steps above):"; cat $$py310_log; \
	rm -f $$py310_log; \
	test $$rest -eq 0 -a $$status -eq 0

clean:
	rm -rf $(VENV) $(VENV310) $(VENVCOMPAT) site build dist .pytest_cache .mypy_cache .ruff_cache .hypothesis

FORCE:
