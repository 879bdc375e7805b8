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
        "import sys; import engine.evaluate, engine.capacity, "
        "engine.cost, accounting.parsing; "
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


LAYERS = [
    "config",
    "frontend",
    "reports | exports | telemetry | alerts",
    "planner",
    "accounting",
    "inventory",
    "access | core",
    "engine",
]


def test_layers_are_one_plain_list_of_top_level_folders():
    layered = [c for c in _contracts() if c["type"] == "layers"]
    assert len(layered) == 1 and not any(c.get("ignore_imports") for c in _contracts())
    assert layered[0]["layers"] == LAYERS and not layered[0].get("containers")
    assert any(c["type"] == "acyclic_siblings" for c in _contracts())


def _top_level_imports(path: Path) -> set[str]:
    import ast

    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_no_folder_imports_a_higher_folder():
    """Read straight from the source (not from import-linter): a folder's rank in LAYERS."""
    rank = {
        folder.strip(): index for index, layer in enumerate(LAYERS) for folder in layer.split("|")
    }
    upward = []
    for folder, own_rank in rank.items():
        for path in (ROOT / folder).rglob("*.py"):
            for imported in _top_level_imports(path) & rank.keys():
                if imported != folder and rank[imported] <= own_rank:
                    upward.append(f"{path.relative_to(ROOT)} imports {imported}")
    assert not upward, upward


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
