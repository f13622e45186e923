# kkb — see README.md. `make demo` and `make test` work on a fresh machine.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint docs bench install clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[all,dev]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m builder.demo

# The architecture's contracts (docs/ARCHITECTURE.md), the lint rules and the types (builder and tests: [tool.mypy])
# run before the tests.
lint: $(STAMP)
	$(BIN)/ruff check builder bench kernels tests
	$(BIN)/mypy
	$(BIN)/lint-imports

# Two workers (CI has 2 cores): tests of one file stay on one worker (their module fixtures are built once);
# the example kernels' generated assets are made under a lock (tests/support/assets.py).
TEST_WORKERS ?= 2
test: lint docs
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile

# The docs site (mkdocs.yml, docs/) into build/site; --strict: a broken link or a page left out of the nav fails.
# The kernel.toml reference page is generated from the spec's models at build time (docs/hooks.py).
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

bench: $(STAMP)
	$(BIN)/python -m bench

clean:
	rm -rf build .pytest_cache .mypy_cache
