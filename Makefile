# Countersign: `make run` (embedded default: SQLite, no services) and `make test`.
# Production-like: `make prod-like` / `make prod-like-stop` (PostgreSQL + Redis on this
# machine), `make worker`, `make beat`, `make smoke`, `make bench`; `make ci` is CI.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# What running needs (`pip install -e .`), and that plus the test and lint tools
# (`-e '.[dev]'`, several hundred MB more). A dev install counts as a runtime one.
RUN_STAMP := $(VENV)/.installed-run-stamp
DEV_STAMP := $(VENV)/.installed-stamp
AF_VENV   ?= .venv-af
AF_STAMP  := $(AF_VENV)/.installed-stamp
OAI_VENV  ?= .venv-oai
OAI_STAMP := $(OAI_VENV)/.installed-stamp
HOST   ?= 127.0.0.1
PORT   ?= 8000
# Extra pytest arguments for `make test`, e.g. make test ARGS="-k refund tests/api".
ARGS   ?=
# pytest-xdist processes for `make test` (0: the suite runs in this process).
TEST_WORKERS ?= 0

.PHONY: install install-run run test ci lint worker beat prod-like prod-like-stop prod-like-status smoke chaos fuzz bench clean

# Creates $(VENV) when it has no python and upgrades pip.
define make_venv
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Python 3.11+ is required"'
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV) 2>/dev/null || { \
	  echo "ensurepip is missing (Debian without python3-venv): bootstrapping pip from PyPI"; \
	  rm -rf $(VENV) && $(PYTHON) -m venv --without-pip $(VENV) && $(BIN)/python scripts/bootstrap_pip.py; }
	$(BIN)/python -m pip install --quiet --upgrade pip
endef

ifeq ($(shell test -f $(DEV_STAMP) && test $(DEV_STAMP) -nt pyproject.toml && echo fresh),fresh)
$(RUN_STAMP):
	@touch $@
else
$(RUN_STAMP): pyproject.toml
	$(make_venv)
	$(BIN)/python -m pip install --quiet -e .
	@touch $@
endif

$(DEV_STAMP): pyproject.toml $(AF_STAMP) $(OAI_STAMP)
	$(make_venv)
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $@ $(RUN_STAMP)

# Microsoft Agent Framework's AG-UI server, a remote agent of the interop tests
# (tests/agent_framework_agent.py), in a virtualenv of its own: it pins an
# ag-ui-protocol older than the one Countersign is built on.
$(AF_STAMP): tests/remote_envs/agent-framework.txt
	@test -x $(AF_VENV)/bin/python || $(PYTHON) -m venv $(AF_VENV)
	$(AF_VENV)/bin/python -m pip install --quiet -r tests/remote_envs/agent-framework.txt
	@touch $@

# The OpenAI Agents SDK with the client package (tests/openai_agents_agent.py, the
# adapter's end-to-end test), in a virtualenv of its own: it needs openai>=3 and
# websockets<17, which Countersign's environment does not allow.
$(OAI_STAMP): tests/remote_envs/openai-agents.txt clients/python/pyproject.toml
	@test -x $(OAI_VENV)/bin/python || $(PYTHON) -m venv $(OAI_VENV)
	$(OAI_VENV)/bin/python -m pip install --quiet -r tests/remote_envs/openai-agents.txt
	@touch $@

# Runtime only: what `run`, `worker`, `beat` and `prod-like` need.
install-run: $(RUN_STAMP)

# Runtime plus the dev extras: what tests, lint, benchmarks and the fault trials need.
install: $(DEV_STAMP)

run: install-run
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py ensureadmin
	$(BIN)/python manage.py createroles
	@echo "Countersign on http://$(HOST):$(PORT)/ (admin: http://$(HOST):$(PORT)/admin/)"
	$(BIN)/python -m uvicorn config.asgi:application --host $(HOST) --port $(PORT) --ws-per-message-deflate false

test: install
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup $(ARGS)

# What CI runs (.ci/run): lint, the suite on PostgreSQL and Redis with every test
# required to run, the prod-like smoke test, short fault trials and live fuzzing.
ci:
	bash .ci/run

# Production processes in the foreground (settings from the environment: DATABASE_URL,
# REDIS_URL, SECRET_KEY, DEBUG=0...), as in docker-compose.yml.
worker: install-run
	$(BIN)/celery -A config worker -Q runs,tools,countersign -l INFO --without-gossip --without-mingle

beat: install-run
	$(BIN)/celery -A config beat -l INFO

# web (uvicorn, 127.0.0.1:$${PROD_LIKE_PORT:-8100}), 2 workers and beat in the background,
# DEBUG=0, against PostgreSQL and Redis: PROD_LIKE_DATABASE_URL or DATABASE_URL, and
# PROD_LIKE_REDIS_URL or REDIS_URL (defaults in scripts/prodlike.py). Creates the
# superuser admin on first start; pid files, JSON logs and env.sh in
# $${PROD_LIKE_DIR:-/tmp/countersign-prod-like}.
prod-like: install-run
	PORT=$${PROD_LIKE_PORT:-8100} $(BIN)/python scripts/prodlike.py start

prod-like-stop:
	PORT=$${PROD_LIKE_PORT:-8100} $(BIN)/python scripts/prodlike.py stop

# Each process of the prod-like stack: pid, alive, health (web /healthz, workers
# answering a broker ping); exits 1 when one is not healthy.
prod-like-status:
	PORT=$${PROD_LIKE_PORT:-8100} $(BIN)/python scripts/prodlike.py status

# Start the prod-like stack, run the end-to-end smoke test over HTTP and WebSocket, stop it.
smoke: install
	PORT=$${PROD_LIKE_PORT:-8100} $(BIN)/python scripts/prodlike.py smoke

# Fault trials against a prod-like stack started on a redis-server of its own
# (CHAOS_REDIS_PORT, 6390): killed worker children and masters, Redis restarts,
# duplicate deliveries, concurrent decisions. Knobs: CHAOS_TRIALS (200), CHAOS_SEED
# (1), CHAOS_SECONDS (300, no batch starts after it), CHAOS_BATCH (10).
chaos: install
	PORT=$${PROD_LIKE_PORT:-8100} $(BIN)/python scripts/chaos.py

# Schemathesis with every check against the live /api/schema/ of a prod-like stack
# (started and stopped around it). Knobs: FUZZ_EXAMPLES (25), FUZZ_SECONDS (120).
fuzz: install
	PORT=$${PROD_LIKE_PORT:-8100} $(BIN)/python scripts/fuzz.py

# Every benchmark in bench/, each figure beside its baseline measured in the same run.
bench: install
	$(BIN)/python -m bench

# ruff (rules in pyproject.toml), the formatter's check, and mypy with the Django
# and DRF plugins over the packages, bench/ and scripts/ ([tool.mypy] files).
lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

clean:
	rm -rf $(VENV) $(AF_VENV) $(OAI_VENV) db.sqlite3 test-db.sqlite3 staticfiles
