# Countersign: `make run` (embedded default: SQLite, no services) and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
HOST   ?= 127.0.0.1
PORT   ?= 8000

.PHONY: install run test ci lint worker beat prod-like bench clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Python 3.11+ is required"'
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV) || { \
	  echo "error: '$(PYTHON) -m venv' failed; on Debian install it with: apt-get install python3-venv"; exit 1; }
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

install: $(STAMP)

run: install
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py ensureadmin
	@echo "Countersign on http://$(HOST):$(PORT)/ (admin: http://$(HOST):$(PORT)/admin/)"
	$(BIN)/python -m uvicorn config.asgi:application --host $(HOST) --port $(PORT) --ws-per-message-deflate false

test: install
	$(BIN)/python -m pytest

lint: install
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) db.sqlite3 test-db.sqlite3 staticfiles
