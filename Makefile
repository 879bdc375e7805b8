# Fleetwise: `make run` starts the whole app on the embedded defaults; `make test` runs every test.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin

.PHONY: install run test lint format migrate

$(BIN)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $@

install: $(BIN)/.installed

migrate: install
	$(BIN)/python manage.py migrate --noinput

# Web on http://127.0.0.1:8000/, a Celery worker and beat, on SQLite and the filesystem broker.
run: migrate
	$(BIN)/python manage.py load_demo_fleet
	$(BIN)/python manage.py load_demo_usage
	$(BIN)/python manage.py ensure_login
	$(BIN)/honcho --procfile platform/Procfile.dev --app-root . start

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

format: install
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

test: lint
	$(BIN)/python -m pytest
