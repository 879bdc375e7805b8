"""The computing core stays pure: import-linter's contract holds, and the core loads alone."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_import_contract_holds():
    lint_imports = Path(sys.executable).parent / "lint-imports"
    result = subprocess.run(
        [str(lint_imports)], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "BROKEN" not in result.stdout


def test_engine_imports_without_django():
    code = (
        "import sys; import planner.engine.evaluate, planner.engine.capacity, "
        "planner.engine.cost, accounting.parsing; "
        "banned = ('django', 'celery', 'rest_framework'); "
        "bad = [m for m in sys.modules if m.split('.')[0] in banned]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr
