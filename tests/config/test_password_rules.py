"""Password rules in every non-test setting: the validators test settings switch off are on in
`local` and `production`. Read in a clean interpreter (no test settings loaded), by importing
each settings module as Django would: no database, no app start-up."""

from __future__ import annotations

import json

import pytest

from tests.support.processes import run_python

EXPECTED_VALIDATORS = [
    "UserAttributeSimilarityValidator",
    "MinimumLengthValidator",
    "CommonPasswordValidator",
    "NumericPasswordValidator",
]
MODULES = ("local", "production")


@pytest.fixture(scope="module")
def validators_by_module() -> dict[str, list[str]]:
    """Each module's AUTH_PASSWORD_VALIDATORS by class name, read in one fresh interpreter."""
    code = (
        "import importlib, json; print(json.dumps({m: [v['NAME'].rsplit('.', 1)[-1] for v in "
        "importlib.import_module('config.settings.' + m).AUTH_PASSWORD_VALIDATORS] "
        f"for m in {MODULES!r}}}))"
    )
    result = run_python(
        code,
        DJANGO_SECRET_KEY="x" * 60,
        DJANGO_ALLOWED_HOSTS="fleet.example",
        DATABASE_URL="sqlite:////tmp/fleetwise-validators.sqlite3",
    )
    assert result.returncode == 0, result.stderr
    names: dict[str, list[str]] = json.loads(result.stdout.strip().splitlines()[-1])
    return names


@pytest.mark.parametrize("module", MODULES)
def test_password_validators_are_on_outside_tests(validators_by_module, module):
    assert validators_by_module[module] == EXPECTED_VALIDATORS
