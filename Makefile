# MemoryHub — `make demo` runs it, `make test` tests it. Both need only Python 3.11.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test venv bench lint typecheck fmt clean reset-demo client-dist

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "==> installing MemoryHub and its dev tools into $(VENV) (first run takes a minute or two)"
	@$(PY) -m pip install --quiet --upgrade pip
	@$(PY) -m pip install --quiet -e ".[dev]"
	@touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	@scripts/demo.sh

test: $(STAMP)
	@$(PY) -m pytest $(PYTEST_ARGS)

bench: $(STAMP)
	@. scripts/dev-env.sh && $(PY) manage.py bench $(BENCH_ARGS)

lint: $(STAMP)
	@$(VENV)/bin/ruff check .
	@$(VENV)/bin/ruff format --check .
	@$(VENV)/bin/lint-imports
	@. scripts/dev-env.sh && $(PY) manage.py makemigrations --check --dry-run

fmt: $(STAMP)
	@$(VENV)/bin/ruff format .
	@$(VENV)/bin/ruff check --fix .

typecheck: $(STAMP)
	@$(VENV)/bin/mypy memoryhub audit triggers

# The light client wheel (memoryhub-audit-client: client, integrations, memoryhub-hook; no Django) in var/dist.
client-dist: $(STAMP)
	@$(PY) scripts/client_dist/build.py var/dist

reset-demo:
	rm -f var/memoryhub.sqlite3 var/memoryhub.sqlite3-wal var/memoryhub.sqlite3-shm var/celerybeat-schedule*
	rm -rf var/broker

clean: reset-demo
	rm -rf $(VENV) var .pytest_cache .ruff_cache .mypy_cache
