# The two commands of the README: `make demo` and `make test`. Both set up .venv from nothing.
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.mpsim-installed
export TRITON_INTERPRET ?= $(shell command -v nvidia-smi >/dev/null 2>&1 || echo 1)
export PYTHONHASHSEED := 0

.PHONY: demo test lint typecheck unit test-slow fuzz setup clean

setup: $(STAMP)

$(STAMP): pyproject.toml scripts/bootstrap-venv.sh
	bash scripts/bootstrap-venv.sh
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/mpsim demo --out out

lint: $(STAMP)
	$(BIN)/ruff check .

typecheck: $(STAMP)
	$(BIN)/mypy

# Two worker processes (pytest-xdist): the tests are independent (each has its own tmp dirs and memo);
# loadgroup keeps a file marked xdist_group on one worker (tests/project/test_wheel.py: one wheel build).
unit: $(STAMP)
	$(BIN)/python -m pytest -q -ra -m "not slow" -n 2 --dist loadgroup --durations=15

test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -ra -m slow --durations=15

test: lint typecheck unit

# The parsers under random input, longer than make test's deterministic run (docs/inputs.md).
fuzz: $(STAMP)
	MPSIM_FUZZ_EXAMPLES=$${MPSIM_FUZZ_EXAMPLES:-20000} $(BIN)/python -m pytest -q tests/fuzz -p no:cacheprovider

clean:
	rm -rf $(VENV) out build *.egg-info .mypy_cache .ruff_cache .pytest_cache
