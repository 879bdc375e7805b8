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


def _contracts() -> list[dict]:
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    return config["contracts"]


def test_layers_list_no_exceptions_and_every_planner_module():
    layered = [c for c in _contracts() if c["type"] == "layers"]
    assert layered and not any(c.get("ignore_imports") for c in _contracts())
    apps, planner = (
        next(c for c in layered if not c.get("containers")),
        next(c for c in layered if c.get("containers") == ["planner"]),
    )
    assert planner["exhaustive"] and planner["layers"][-1] == "engine"
    in_apps = {m.strip() for layer in apps["layers"] for m in layer.replace("|", ":").split(":")}
    in_planner = {m.strip() for m in planner["layers"][0].split(":")}
    # The engine is the bottom layer of both; planner's other modules sit where the apps say.
    assert apps["layers"][-1] == "planner.engine"
    assert {m for m in in_apps if m.startswith("planner.")} == {
        f"planner.{m}" for m in in_planner
    } | {"planner.engine"}
    assert any(c["type"] == "acyclic_siblings" for c in _contracts())


def test_architecture_doc_names_only_code_that_exists():
    """Every `file.py::name` in docs/architecture.md is defined in that file."""
    import ast
    import re

    # The size exceptions at the end are checked by their own test.
    text = (ROOT / "docs" / "architecture.md").read_text().split("## Size exceptions")[0]
    references = re.findall(r"`([\w/]+\.py)::(\w+)`", text)
    assert len(references) > 20
    missing = []
    for path, name in references:
        tree = ast.parse((ROOT / path).read_text())
        defined = {
            node.name
            for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef)
        } | {
            target.id
            for node in ast.walk(tree)
            if isinstance(node, ast.Assign | ast.AnnAssign)
            for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
            if isinstance(target, ast.Name)
        }
        if name not in defined:
            missing.append(f"{path}::{name}")
    assert not missing, missing


def test_settings_import_makes_no_folder_and_start_up_does(tmp_path):
    broker = tmp_path / "broker"
    env = {
        "PATH": "/usr/bin:/bin",
        "CELERY_BROKER_URL": "filesystem://",
        "CELERY_BROKER_FOLDER": str(broker),
        "DJANGO_SETTINGS_MODULE": "config.settings.local",
    }
    run = [sys.executable, "-c"]
    imported = subprocess.run(
        [*run, "import config.settings.local"], cwd=ROOT, env=env, capture_output=True, timeout=120
    )
    assert imported.returncode == 0, imported.stderr
    assert not broker.exists()
    started = subprocess.run(
        [*run, "import django; django.setup()"], cwd=ROOT, env=env, capture_output=True, timeout=120
    )
    assert started.returncode == 0, started.stderr
    assert {p.name for p in broker.iterdir()} == {"out", "processed", "control"}
