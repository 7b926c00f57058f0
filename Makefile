# hf-headsel: two commands do everything on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# The console scripts `make setup` installs (headsel-train, headsel-experiment, headsel-demo, headsel-build-corpus, ...).
BIN := $(VENV)/bin
# On the CPU machines a local CPU build of torch 2.13.0 is on disk; any other torch pulls GBs of CUDA packages.
TORCH_SPEC ?= torch==2.13.0
# Extra requirements pinned at set-up (`make test-oldest` pins transformers), and the tests `make test` runs.
PINS ?=
TESTS ?= tests
export HF_HUB_OFFLINE = 1
# Transformers 5.25+ kernelizes `from_pretrained` with kernels from the Hub by default: not here, where nothing is
# downloaded at run time.
export USE_HUB_KERNELS = 0
export TOKENIZERS_PARALLELISM = false
# OpenMP threads that spin while waiting make every step many times slower when another process shares the cores.
export OMP_WAIT_POLICY = PASSIVE

.PHONY: setup system-deps corpus test test-oldest demo demo-checkpoint mechanism bench experiment analyze clean
CORPUS_DIR ?= data/offline_corpus
CORPUS_FLAGS ?= --speech

setup: $(VENV)/.installed

# pip writes the packages' bytecode one file at a time, half of an install's time here; compileall writes it on every
# core (an install in about 60 s instead of 90). Bytecode is a cache: a file it cannot compile (torch ships one test
# helper in Python 3.12 syntax, which pip skips too) is read from source at import, so its failures do not stop set-up.
$(VENV)/.installed: setup.cfg pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q --no-compile "$(TORCH_SPEC)"
	$(PY) -m pip install -q --no-compile -e ".[dev]" $(PINS)
	$(PY) -m compileall -qq -j 0 "$$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" || true
	touch $@

# espeak-ng and sox synthesise the corpus speech (Debian packages; installed when missing and we are root).
system-deps:
	@command -v espeak-ng >/dev/null && command -v sox >/dev/null || \
		{ [ "$$(id -u)" = 0 ] && apt-get update -qq && apt-get install -y -qq espeak-ng sox >/dev/null; } || \
		echo "espeak-ng / sox missing: install them (apt-get install espeak-ng sox) for the corpus speech"

corpus: setup system-deps
	$(BIN)/headsel-build-corpus --output_dir $(CORPUS_DIR) $(CORPUS_FLAGS)

test: setup
	$(PY) -m pytest -q -n 2 $(TESTS)

# The library's tests on the oldest transformers the package supports (setup.cfg's floor, `transformers>=`), in an
# environment of their own (`.venv-oldest`); CI runs them after `make test`. Not the tests of the recipes
# (tests/training) nor of the developers' benchmark scripts, which run on the newest only.
OLDEST_TRANSFORMERS ?= $(shell sed -n 's/^ *transformers>=//p' setup.cfg)
OLDEST_TESTS = tests --ignore=tests/training --ignore=tests/test_benchmarks.py --ignore=tests/test_mechanism.py
test-oldest:
	$(MAKE) test VENV=.venv-oldest PINS="transformers==$(OLDEST_TRANSFORMERS)" TESTS="$(OLDEST_TESTS)"

demo: setup
	$(BIN)/headsel-demo --output_dir outputs/demo

# Retrains the shared checkpoint `make demo` starts from (training/demo_checkpoint/o2m_shared/, shipped; the flags are
# training/demo_checkpoint/o2m_shared.json): 12,000 updates, about 2 h 15 min on 2 CPU cores.
demo-checkpoint: setup
	$(BIN)/headsel-demo --make_checkpoint

# The mechanism benchmark: tasks told apart only by the routing, known ground truth (about 2 minutes).
mechanism: setup
	$(PY) benchmarks/mechanism.py --seeds 1 2 3 --output_dir benchmarks/results/mechanism

bench: setup
	$(PY) benchmarks/overhead.py
	$(PY) benchmarks/op_count.py

experiment: setup
	$(BIN)/headsel-experiment $(EXPERIMENT)

analyze: setup  # make analyze MODEL=outputs/demo
	$(PY) -m hf_headsel.analysis $(MODEL) --output_dir $(MODEL)/analysis

clean:
	rm -rf $(VENV) .venv-oldest outputs .pytest_cache
