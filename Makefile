# Fleetwise: `make run` starts the whole app on the embedded defaults; `make test` runs every test.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin

.PHONY: install bytecode run test test-fast lint typecheck format migrate

# uv installs the same pinned set as pip (checked: identical `pip freeze`) in a quarter of the
# time, downloading in parallel; CI builds the virtualenv afresh on every run.
$(BIN)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet uv==0.13.9
	$(BIN)/uv pip install --python $(BIN)/python --quiet -e ".[dev]"
	$(MAKE) bytecode
	touch $@

# Where the environment sets PYTHONDONTWRITEBYTECODE (CI's machines do), no process writes .pyc
# files, so each one (a test worker, every real Celery worker or manage.py a test starts)
# compiled Django, pandas and the rest from source again: 2.6 s of CPU each. Compiled once here.
bytecode:
	$(BIN)/python -m compileall -q -j 0 -x '/(\.venv/bin|var|build|node_modules|\.git)/' . > /dev/null

install: $(BIN)/.installed

migrate: install
	$(BIN)/python manage.py migrate --noinput

# Web on http://127.0.0.1:8000/, a Celery worker and beat, on SQLite and the filesystem broker.
run: migrate
	$(BIN)/python manage.py load_demo_fleet
	$(BIN)/python manage.py load_demo_usage
	$(BIN)/python manage.py load_demo_results
	$(BIN)/python manage.py ensure_login
	$(BIN)/honcho --procfile platform/Procfile.dev --app-root . start

lint: install typecheck
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

# `make test` lints once per change of the sources: CI lints, then runs two suites side by side
# that find the stamp newer than every source (a deleted file is caught by the next lint).
LINTED_SOURCES := pyproject.toml $(shell find . -name '*.py' -not -path './.venv/*' -not -path './var/*' -not -path './build/*' 2>/dev/null)
var/lint.stamp: $(LINTED_SOURCES)
	$(MAKE) lint
	mkdir -p var && touch $@

# The strict type-checking gate: the packages in pyproject.toml [tool.mypy] files.
typecheck: install
	$(BIN)/mypy

format: install
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

# Parallel: pytest-xdist workers, each with its own test database, broker folder and queue.
# Tests are handed out in chunks that shrink as the list drains (tests/support/xdist_scheduling.py)
# in one global order, so on every worker the tests that flush the database (transactional,
# live server) run after the rolled-back ones, as Django orders them: a flush empties the card
# catalog and beat entries that migrations load. The flushing tests, the heaviest, come last.
TEST_WORKERS ?= 3

test: var/lint.stamp
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist load --durations=30

# The pure core alone (engine, usage parsers): no database, no Django, seconds.
test-fast: install
	$(BIN)/python -m pytest -p no:django -p no:cacheprovider -W ignore::pytest.PytestConfigWarning -q \
		tests/engine tests/accounting/parsing
