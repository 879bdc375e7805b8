"""The computing core imports no web or task framework (also enforced by import-linter)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

ENGINE_MODULES = [
    "defaults",
    "factors",
    "scaling",
    "reliability",
    "heterogeneous",
    "aggregate",
    "evaluate",
    "segments",
]


def test_engine_modules_load_without_django_or_celery():
    imports = "; ".join(f"import engine.{name}" for name in ENGINE_MODULES)
    check = (
        f"import sys; {imports}; "
        "frameworks = {'django', 'rest_framework', 'celery', 'kombu'}; "
        "bad = sorted({m.split('.')[0] for m in sys.modules} & frameworks); "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    result = subprocess.run(
        [sys.executable, "-c", check], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr
