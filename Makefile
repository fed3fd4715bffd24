# rofmd: every task goes through here. `make` targets create the virtual
# environment themselves, so a fresh machine needs only Python 3.11 and make.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The compiled modules (optional; hatch_build.py): the ranked recall's loops, the
# surface's look-up in its request line and a store directory's listing, rebuilt when a
# source changes. Without a C compiler it says so and everything runs on its Python path.
EXT := $(shell $(PYTHON) -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX') or '.so')" 2>/dev/null)
KERNELS := engine/relevance/_kernels$(EXT) engine/_jsonspans$(EXT) engine/store/_dirlist$(EXT)

.PHONY: run test lint typecheck unit bridge-test bench eval demo clean venv

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

$(KERNELS): engine/relevance/_kernels.c engine/_jsonspans.c engine/store/_dirlist.c hatch_build.py | $(STAMP)
	-$(BIN)/python hatch_build.py

venv: $(STAMP) $(KERNELS)

# Try it: the daemon on the packaged default config, with a repo-local memory root
# (.run/), plays the demo against itself once serving, then keeps serving.
run: $(STAMP) $(KERNELS)
	$(BIN)/rofmd serve --demo --log-format console --log-level warning \
		--config-dir .run/config --memory-root .run/memory

demo: $(STAMP) $(KERNELS)
	$(BIN)/rofmd demo

lint: $(STAMP)
	$(BIN)/ruff check rofmd handlers engine tests bench hatch_build.py
	$(BIN)/ruff format --check rofmd handlers engine tests bench hatch_build.py

typecheck: $(STAMP)
	$(BIN)/mypy

# pytest-xdist: one worker per core (2 on CI). PYTEST_WORKERS=0 runs in one process.
# worksteal: an idle worker takes tests from the busy one, so the long kill-runs do not
# leave one core waiting at the end (9.5 -> 6.3 minutes on 2 cores).
PYTEST_WORKERS ?= auto
unit: $(STAMP) $(KERNELS)
	$(BIN)/pytest -n $(PYTEST_WORKERS) --dist worksteal

# The DSH bridge (bridge/dsh-rofm, Node ESM): node --test, with a real daemon from the venv.
# Without Node (a fresh machine with only Python and make) it says so and skips, except
# under CI (CI=true), where .ci/run has installed Node and a missing one is a failure.
bridge-test: $(STAMP) $(KERNELS)
	@if ! command -v node >/dev/null 2>&1; then \
		if [ -n "$$CI" ]; then echo "bridge-test: node not found" >&2; exit 1; fi; \
		echo "bridge-test: SKIPPED, node not found (install Node.js >= 20 to run the bridge tests)" >&2; \
		exit 0; \
	fi; \
	ROFMD_BIN=$(abspath $(BIN)/rofmd) node --test --test-reporter=tap bridge/

test: lint typecheck unit bridge-test

bench: $(STAMP) $(KERNELS)
	$(BIN)/python -m bench

# Recall quality: the evidence for generated questions in the recall block, vs bm25s.
eval: $(STAMP) $(KERNELS)
	$(BIN)/python -m bench.eval

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
	rm -f engine/relevance/_kernels*.so engine/relevance/_kernels*.pyd engine/_jsonspans*.so engine/_jsonspans*.pyd
	rm -f engine/store/_dirlist*.so engine/store/_dirlist*.pyd
