# GNU make. `make test` and `make train` create the virtual environment on first use.

PYTHON ?= python3
VENV ?= .venv

VPY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# The CPU wheel; installed only when the venv has no importable torch, so that
# pip never resolves the "torch>=2.1" requirement to the multi-GB CUDA build.
TORCH_SPEC ?= torch==2.13.0

.PHONY: setup test train clean distclean

setup: $(STAMP)

$(VPY):
	$(PYTHON) -m venv $(VENV)

$(STAMP): setup.py requirements.txt | $(VPY)
	@if ! $(VPY) -c "import torch" >/dev/null 2>&1; then \
		echo "torch not importable in $(VENV): installing $(TORCH_SPEC)"; \
		$(VPY) -m pip install "$(TORCH_SPEC)"; \
	fi
	$(VPY) -m pip install -e '.[dev]'
	@touch $@

test: setup
	$(VPY) -m pytest -q

train: setup
	$(VPY) -m warp_drive train --config tag_continuous_small

clean:
	rm -rf build dist .eggs .pytest_cache
	find . \( -path ./.git -o -path ./$(VENV) \) -prune -o \( -name "*.egg-info" -o -name __pycache__ \) -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV)
