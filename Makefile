# hf-headsel: two commands do everything on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# On the CPU machines a local CPU build of torch 2.13.0 is on disk; any other torch pulls GBs of CUDA packages.
TORCH_SPEC ?= torch==2.13.0
export HF_HUB_OFFLINE = 1
export TOKENIZERS_PARALLELISM = false

.PHONY: setup test demo bench clean

setup: $(VENV)/.installed

$(VENV)/.installed: setup.cfg pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q "$(TORCH_SPEC)"
	$(PY) -m pip install -q -e ".[dev]"
	touch $@

test: setup
	$(PY) -m pytest -q -n 2 tests

demo: setup
	$(PY) training/demo.py --output_dir outputs/demo

bench: setup
	$(PY) benchmarks/overhead.py

clean:
	rm -rf $(VENV) outputs .pytest_cache
