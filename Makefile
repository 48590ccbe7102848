# Confer — the two commands that matter: `make run` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
WEB    := gateway/static/index.html

.PHONY: run test lint demo bench migrate clean web

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

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

bench: $(STAMP)
	$(BIN)/python bench/roundtrip.py
	$(BIN)/python bench/federation.py
	$(BIN)/python bench/agent.py
	$(BIN)/python bench/fanout.py
	$(BIN)/python bench/concepts.py

migrate: $(STAMP)
	$(BIN)/confer migrate

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
