# rofmd: every task goes through here. `make` targets create the virtual
# environment themselves, so a fresh machine needs only Python 3.11 and make.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint typecheck unit bench eval demo clean venv

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

# Try it: the daemon on the packaged default config, with a repo-local memory root
# (.run/), plays the demo against itself once serving, then keeps serving.
run: $(STAMP)
	$(BIN)/rofmd serve --demo --log-format console --log-level warning \
		--config-dir .run/config --memory-root .run/memory

demo: $(STAMP)
	$(BIN)/rofmd demo

lint: $(STAMP)
	$(BIN)/ruff check rofmd handlers engine tests bench
	$(BIN)/ruff format --check rofmd handlers engine tests bench

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/pytest

test: lint typecheck unit

bench: $(STAMP)
	$(BIN)/python -m bench

# Recall quality: the evidence for generated questions in the recall block, vs bm25s.
eval: $(STAMP)
	$(BIN)/python -m bench.eval

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
