# GNU make. `make test` and `make train` create the virtual environment on first use.

PYTHON ?= python3
VENV ?= .venv

VPY := $(VENV)/bin/python
# The CPU wheel; installed only when the venv has no importable torch, so that
# pip never resolves the "torch>=2.3" requirement to the multi-GB CUDA build.
TORCH_SPEC ?= torch==2.13.0
TEST_EXTRAS := [dev,docs]

.PHONY: setup test test-fast train docs clean distclean

# `make train` needs only the package and its runtime dependencies; `make test`
# adds the [dev] and [docs] extras. Each install leaves a stamp in the venv.
setup: $(VENV)/.installed

$(VPY):
	$(PYTHON) -m venv $(VENV)

# Bytecode: pip installs without compiling (--no-compile), and each module is
# compiled when a process first imports it, its .pyc written beside it (under
# .venv, and __pycache__ in the checkout, which git ignores). pip would compile
# every file of torch & co. on one core, most of them never imported: 35 s of
# the 90 s install on the 2-core VM. For that, the recipes run with bytecode
# writing on, as Python's default is, even where PYTHONDONTWRITEBYTECODE is
# set (as on the VM): with it, every test process would compile torch again.
unexport PYTHONDONTWRITEBYTECODE

# $(call install,EXTRAS): torch first if none is importable, then the package.
PIP_INSTALL := $(VPY) -m pip install --no-compile
define install
	@if ! $(VPY) -c "import torch" >/dev/null 2>&1; then \
		echo "torch not importable in $(VENV): installing $(TORCH_SPEC)"; \
		$(PIP_INSTALL) "$(TORCH_SPEC)"; \
	fi
	$(PIP_INSTALL) -e '.$(1)'
	@touch $@
endef

$(VENV)/.installed: pyproject.toml | $(VPY)
	$(call install,)

$(VENV)/.installed-dev: pyproject.toml | $(VPY)
	$(call install,$(TEST_EXTRAS))

# Everything (CI runs this) on every core (pytest-xdist; a test file stays on
# one worker, so its module fixtures are built once; files start in collection
# order, longest first -- tests/conftest.py), with the 25 slowest tests listed
# at the end. PYTEST_WORKERS=0 runs them in this one process.
PYTEST_WORKERS ?= auto
XDIST := -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder
test: $(VENV)/.installed-dev
	$(VPY) -m pytest -q --durations=25 $(XDIST)

# The day-to-day tier: no notebooks, learning runs, subprocess children or
# nvcc/ASan builds (tests marked `slow`).
test-fast: $(VENV)/.installed-dev
	$(VPY) -m pytest -q -m "not slow" $(XDIST)

# One training process has the machine: torch may use every core while the kernels are idle (the update).
train: setup
	WARP_DRIVE_TORCH_UPDATE_THREADS=$${WARP_DRIVE_TORCH_UPDATE_THREADS:-$$(nproc)} $(VPY) -m warp_drive train --config tag_continuous_small

docs: $(VENV)/.installed-dev
	$(VPY) -m sphinx -W --keep-going -b html docs docs/_build/html

clean:
	rm -rf build dist .eggs .pytest_cache docs/_build docs/tutorials
	find . \( -path ./.git -o -path ./$(VENV) \) -prune -o \( -name "*.egg-info" -o -name __pycache__ \) -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV)
