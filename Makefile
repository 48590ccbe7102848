# Confer — the two commands that matter: `make run` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
WEB    := gateway/static/index.html

.PHONY: run test lint demo bench bench-synapse bench-table curves migrate clean web venv-check

# The install heals itself: an interrupted first `make run` (say, during pip's self-upgrade,
# which uninstalls the old pip before the new one is in place) leaves a venv whose pip does not
# run, and such a venv is built afresh instead of failing every later `make`. A venv whose
# stamp is there but which cannot import Confer any more is reinstalled too.
PIP_RUNS   := $(BIN)/python -m pip --version >/dev/null 2>&1
CONFER_IN  := $(BIN)/python -c 'import importlib.metadata as m; m.distribution("confer")' >/dev/null 2>&1
ifneq ($(shell $(PIP_RUNS) && $(CONFER_IN) && echo ok),ok)
.PHONY: $(STAMP)
endif

$(STAMP): pyproject.toml
	@if ! $(PIP_RUNS); then \
	  if [ -e $(VENV) ]; then echo "make: $(VENV) is broken (an interrupted install?); building it afresh"; fi; \
	  rm -rf $(VENV) && $(PYTHON) -m venv $(VENV); \
	fi
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

## Say whether the venv is usable (pip runs, Confer is installed); exit status 1 when not.
venv-check:
	@if ! $(PIP_RUNS); then echo "venv $(VENV): broken or missing (pip does not run)"; exit 1; fi
	@if ! $(CONFER_IN); then echo "venv $(VENV): Confer is not installed"; exit 1; fi
	@echo "venv $(VENV): ok"

# The web client (web/ -> gateway/static/), built when Node.js is installed; without it Confer
# still runs and / says how to build the client.
$(WEB): web/package-lock.json web/build.mjs $(wildcard web/src/* web/public/*)
	@if command -v npm >/dev/null 2>&1; then \
	  cd web && npm ci --no-audit --no-fund --loglevel=error && npm run --silent build; \
	else echo "make: no npm; the web client is not built (see web/README.md)"; fi

web: $(WEB)

## Serve Confer on 127.0.0.1:8000 (embedded PostgreSQL unless CONFER_DATABASE_URL is set);
## the web client is at http://127.0.0.1:8000/.
run: $(STAMP) $(WEB)
	$(BIN)/confer serve

## Run the whole test suite against real PostgreSQL (CONFER_TEST_DATABASE_URL or embedded).
test: $(STAMP) $(WEB)
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

## Two Confer processes on loopback exchanging signed messages.
demo: $(STAMP)
	$(BIN)/confer demo

# The benches' own extra (matplotlib, for bench/out/*.png), installed once beside the venv's.
BENCH_STAMP := $(VENV)/.bench-stamp
$(BENCH_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[dev,bench]'
	touch $(BENCH_STAMP)

## Every bench to the end with its default settings; the scaling curves in their quick form.
bench: $(BENCH_STAMP)
	$(BIN)/python bench/startup.py
	$(BIN)/python bench/send.py
	$(BIN)/python bench/roundtrip.py
	$(BIN)/python bench/federation.py
	$(BIN)/python bench/receive.py
	$(BIN)/python bench/agent.py
	$(BIN)/python bench/fanout.py
	$(BIN)/python bench/concepts.py
	$(BIN)/python bench/curves.py --quick

## The scaling curves at full size (up to 1,000,000 stored messages, 10,000 sockets, 20 peers).
curves: $(BENCH_STAMP)
	$(BIN)/python bench/curves.py

## Synapse beside Confer, alternately, on fresh clusters (docs/benchmarks.md). Not part of
## `make bench`: the first run installs Synapse into its own venv, .bench/synapse-venv.
bench-synapse: $(BENCH_STAMP)
	$(BIN)/python bench/synapse_side_by_side.py $(ARGS)

## The performance issue's table from one run: each figure before (BASELINE, another checkout,
## e.g. a git worktree of the commit to compare with) and after (this checkout), and after ÷
## before; about 20 minutes, ARGS=--quick 5-10, ARGS=--synapse adds Synapse side by side.
bench-table: $(BENCH_STAMP)
	@if [ -z "$(BASELINE)" ]; then echo "make bench-table BASELINE=/path/to/other/checkout"; exit 2; fi
	$(BIN)/python bench/table.py --baseline $(BASELINE) $(ARGS)

migrate: $(STAMP)
	$(BIN)/confer migrate

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
