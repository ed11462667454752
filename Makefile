# MemoryHub — `make demo` runs it, `make test` tests it. Both need only Python 3.11.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test test-fast venv bench lint typecheck fmt clean reset-demo client-dist

# The suite runs in parallel processes (pytest-xdist): one per CPU core unless PYTEST_WORKERS says
# otherwise (PYTEST_WORKERS=0: one process). Each worker has its own database, var dir and broker
# (memoryhub/settings_test.py); tests sharing an expensive session fixture run on one worker
# (xdist_group, tests/conftest.py), hence --dist loadgroup.
PYTEST_WORKERS ?= auto
PYTEST_XDIST := -n $(PYTEST_WORKERS) --dist loadgroup
# The inner loop: everything but browsers, real Celery workers and the slow sweeps (CI runs those).
FAST := not slow and not browser and not worker and not bench

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
	@$(PY) -m pytest $(PYTEST_XDIST) $(PYTEST_ARGS)

test-fast: $(STAMP)
	@$(PY) -m pytest $(PYTEST_XDIST) -m "$(FAST)" $(PYTEST_ARGS)

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
