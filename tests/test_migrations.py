"""Every model change has its migration: `makemigrations --check` finds nothing to write.

A model edited without `makemigrations` (a field, its choices, a help text) would otherwise
pass every test on the test database, which is built from the models, and fail on deploy.
"""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_models_and_their_migrations_agree():
    result = subprocess.run(
        [sys.executable, "manage.py", "makemigrations", "--check", "--dry-run", "--no-input"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, (
        "Models changed without a migration (run `manage.py makemigrations`):\n"
        + result.stdout
        + result.stderr
    )
