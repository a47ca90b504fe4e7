# One-command entry points. Each target creates the virtual environment on first use
# (.venv, Python 3.11+) and installs the project with its dev extra into it.
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint proto bench locks clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

## Run the whole system: a hub and three simulated clusters (Ctrl-C stops it).
demo: $(STAMP)
	$(BIN)/wingsmith demo

## Lint, type-check, check the layers, then run every test.
test: lint $(STAMP)
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/mypy common hub agent cli tools bench

## Fleet benchmark, quick mode (about a minute; `python -m bench --full`: 2,000 and 10,000).
bench: $(STAMP)
	$(BIN)/python -m bench

## Regenerate generated/ from protos/ (commit the result).
proto: $(STAMP)
	$(BIN)/python -m tools.genproto

## The images' locks, hashes included: the base dependencies and one extra each (hub, agent),
## for Linux on Python 3.11 (the images' base). Commit the result.
LOCK_FLAGS := --generate-hashes --python-version 3.11 --python-platform x86_64-manylinux_2_28 \
	--custom-compile-command "make locks" --quiet
locks: $(STAMP)
	$(BIN)/uv pip compile pyproject.toml --extra hub $(LOCK_FLAGS) -o requirements/hub.lock
	$(BIN)/uv pip compile pyproject.toml --extra agent $(LOCK_FLAGS) -o requirements/agent.lock

clean:
	rm -rf $(VENV) wingsmith-demo .pytest_cache .mypy_cache .ruff_cache
