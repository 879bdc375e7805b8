"""Layout rules: `platform/` must not shadow the standard library's `platform` module."""

import os
import platform
import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_platform_folder_is_not_a_package():
    assert (ROOT / "platform").is_dir()
    assert not (ROOT / "platform" / "__init__.py").exists()


def test_platform_is_the_standard_library_module_in_this_process():
    stdlib = Path(sysconfig.get_paths()["stdlib"]).resolve()
    assert Path(platform.__file__).resolve().parent == stdlib
    assert platform.system() == os.uname().sysname


def test_platform_is_the_standard_library_module_inside_the_django_process():
    code = (
        "import platform, os, uuid; "
        "print(platform.system() == os.uname().sysname, platform.__file__, uuid.uuid4().version)"
    )
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="config.settings.test")
    result = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", code],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    same_system, module_file, uuid_version = result.stdout.strip().splitlines()[-1].split()
    assert same_system == "True"
    assert Path(module_file).resolve().parent == Path(sysconfig.get_paths()["stdlib"]).resolve()
    assert uuid_version == "4"


def test_top_level_layout():
    for name in [
        "manage.py",
        "platform",
        "planner",
        "accounting",
        "frontend",
        "tests",
        "docker-compose.yml",
        "config",
        "inventory",
        "README.md",
        ".ci/run",
    ]:
        assert (ROOT / name).exists(), name
    assert (ROOT / "config" / "celery_app.py").exists()


def test_no_test_module_imports_another_test_module():
    """Shared fixtures and builders live in tests/support/; test modules and conftests import
    only from there (a test module imported elsewhere runs its tests twice, or hides them)."""
    import ast

    offenders = []
    for path in (ROOT / "tests").rglob("*.py"):
        if "support" in path.relative_to(ROOT / "tests").parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            modules = []
            if isinstance(node, ast.ImportFrom) and node.module:
                modules = [node.module] if node.level == 0 else [f".{node.module}"]
            elif isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            for module in modules:
                relative = module.startswith(".")
                if relative or (
                    module.startswith("tests")
                    and module != "tests.support"
                    and not module.startswith("tests.support.")
                ):
                    offenders.append(f"{path.relative_to(ROOT)}: {module}")
    assert not offenders, offenders
