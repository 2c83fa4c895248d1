# Two commands on a fresh machine: `make serve` and `make test`. Both create and reuse .venv.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml | md5sum | cut -c1-12)
DATA   ?= ./data
PYTEST_ARGS ?=

.PHONY: serve test test-fast lint format docs bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip wheel
	$(BIN)/pip install -q -e '.[test]'
	rm -f $(VENV)/.installed-*
	touch $@

serve: $(STAMP)
	scripts/install-system-deps.sh serve
	$(BIN)/tabletopic serve --data-dir $(DATA)

test: $(STAMP)
	scripts/install-system-deps.sh test
	$(BIN)/python -m tabletopic.spark.jars >/dev/null
	$(BIN)/ruff check tabletopic tests bench
	$(BIN)/lint-imports
	$(BIN)/mypy
	$(BIN)/pytest $(PYTEST_ARGS)

# The quick inner loop: no Spark, no servers.
test-fast: $(STAMP)
	$(BIN)/pytest -m "not slow and not spark and not s3 and not postgres and not integration" $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check tabletopic tests bench
	$(BIN)/lint-imports
	$(BIN)/mypy

format: $(STAMP)
	$(BIN)/ruff format tabletopic tests bench
	$(BIN)/ruff check --fix tabletopic tests bench

docs: $(STAMP)
	$(BIN)/tabletopic config docs > docs/configuration.md

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache build *.egg-info
