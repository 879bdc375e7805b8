"""Small units: no function over 80 lines, no module over 600 lines in app code.

Migrations and tests aside. An exception needs a line with a one-line reason under the
heading "Size exceptions" in docs/architecture.md, as ``- `path` — reason`` for a module
or ``- `path::function` — reason`` for a function; a listed unit that has shrunk must be
taken off the list.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_FUNCTION_LINES = 80
MAX_MODULE_LINES = 600
SKIPPED_DIRS = {"tests", "migrations", ".venv", "node_modules", "var", "platform", "docs"}
ENTRY = re.compile(r"^- `([^`]+)` [—-]+ \S")


def app_modules() -> list[Path]:
    """Python files of the repository's packages (top-level directories with __init__.py)."""
    found = []
    for package in sorted(p for p in ROOT.iterdir() if (p / "__init__.py").is_file()):
        if package.name in SKIPPED_DIRS:
            continue
        for path in sorted(package.rglob("*.py")):
            if not SKIPPED_DIRS.intersection(path.relative_to(ROOT).parts):
                found.append(path)
    return found


def oversized_units() -> set[str]:
    """``path`` for long modules and ``path::qualified.name`` for long functions."""
    found: set[str] = set()
    for path in app_modules():
        name = path.relative_to(ROOT).as_posix()
        source = path.read_text(encoding="utf-8")
        if len(source.splitlines()) > MAX_MODULE_LINES:
            found.add(name)
        found |= {f"{name}::{q}" for q in _long_functions(ast.parse(source))}
    return found


def _long_functions(tree: ast.AST, prefix: str = "") -> list[str]:
    long: list[str] = []
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            qualified = f"{prefix}{node.name}"
            if not isinstance(node, ast.ClassDef):
                start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                if node.end_lineno - start + 1 > MAX_FUNCTION_LINES:
                    long.append(qualified)
            long += _long_functions(node, f"{qualified}.")
    return long


def listed_exceptions() -> set[str]:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = re.search(r"^## Size exceptions\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    if section is None:
        return set()
    return {m.group(1) for line in section.group(1).splitlines() if (m := ENTRY.match(line))}


def test_the_scan_sees_the_app_code():
    names = {p.relative_to(ROOT).as_posix() for p in app_modules()}
    assert "engine/evaluate.py" in names
    assert not any("/migrations/" in n or n.startswith("tests/") for n in names)


def test_the_measure_counts_a_long_function():
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    tree = ast.parse(f"class A:\n    def f(self):\n    {body.replace(chr(10), chr(10) + '    ')}\n")
    assert _long_functions(tree) == ["A.f"]
    assert _long_functions(ast.parse("def g():\n    return 1\n")) == []


def test_no_unit_is_over_the_limit_unless_listed_with_a_reason():
    unlisted = sorted(oversized_units() - listed_exceptions())
    assert not unlisted, (
        f"over {MAX_FUNCTION_LINES} lines (function) or {MAX_MODULE_LINES} (module); split it "
        f"or list it with a reason under 'Size exceptions' in docs/architecture.md: {unlisted}"
    )


def test_listed_exceptions_are_still_oversized():
    stale = sorted(listed_exceptions() - oversized_units())
    assert not stale, f"no longer oversized, take them off docs/architecture.md: {stale}"
