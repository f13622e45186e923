# kkb — see README.md. `make demo` and `make test` work on a fresh machine.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint bench install clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[all,dev]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m builder.demo

# The architecture's contracts (docs/ARCHITECTURE.md), the lint rules and the types run before the tests.
lint: $(STAMP)
	$(BIN)/ruff check builder bench kernels tests
	$(BIN)/mypy
	$(BIN)/lint-imports

# Two workers (CI has 2 cores): tests of one file stay on one worker (their module fixtures are built once);
# the example kernels' generated assets are made under a lock (tests/support/assets.py).
TEST_WORKERS ?= 2
test: lint
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile

bench: $(STAMP)
	$(BIN)/python -m bench

clean:
	rm -rf build .pytest_cache .mypy_cache
