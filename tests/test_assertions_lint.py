"""Every test asserts a value: a test function with no assertion on one (none at all, a bare
``assert True``, a type or truthiness check alone) passes whatever the code does, so the suite
refuses it. What counts: an ``assert`` with a comparison (``==``, ``<``, ``in``, ``is``...) or
a prefix/suffix check, ``pytest.raises`` / ``pytest.warns``, a call to an ``assert_*`` function
(``numpy.testing``'s, a test helper's), or a call to a helper of the same module that does one
of these itself."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

TESTS = Path(__file__).parent
#: String methods whose result is a comparison of values.
VALUE_METHODS = frozenset({"startswith", "endswith"})
#: Context managers that assert what the block raises or warns.
EXPECTING = frozenset({"raises", "warns", "deprecated_call"})


def called_name(call: ast.Call) -> str | None:
    if isinstance(call.func, ast.Name):
        return call.func.id
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    return None


def checks_a_value(test: ast.expr) -> bool:
    """Whether an ``assert``'s expression compares values somewhere in it."""
    for node in ast.walk(test):
        if isinstance(node, ast.Compare):
            return True
        if isinstance(node, ast.Call) and called_name(node) in VALUE_METHODS:
            return True
    return False


def asserts_a_value(function: ast.FunctionDef, helpers: set[str]) -> bool:
    for node in ast.walk(function):
        if isinstance(node, ast.Assert) and checks_a_value(node.test):
            return True
        if isinstance(node, ast.With | ast.AsyncWith):
            for item in node.items:
                context = item.context_expr
                if isinstance(context, ast.Call) and called_name(context) in EXPECTING:
                    return True
        if isinstance(node, ast.Call):
            name = called_name(node) or ""
            if name.startswith("assert") or name in helpers:
                return True
    return False


def functions(tree: ast.Module) -> dict[str, ast.FunctionDef]:
    return {node.name: node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}


def unasserted_tests(path: Path) -> Iterator[str]:
    """``file:line name`` of each test function of ``path`` that asserts no value."""
    found = functions(ast.parse(path.read_text(encoding="utf-8")))
    helpers: set[str] = set()
    grown = True
    while grown:  # helpers that assert, and helpers that call them
        grown = False
        for name, function in found.items():
            helper = not name.startswith("test_") and name not in helpers
            if helper and asserts_a_value(function, helpers):
                helpers.add(name)
                grown = True
    shown = path.relative_to(TESTS.parent) if path.is_relative_to(TESTS.parent) else path
    for name, function in found.items():
        if name.startswith("test_") and not asserts_a_value(function, helpers):
            yield f"{shown}:{function.lineno} {name}"


def test_every_test_asserts_a_value() -> None:
    offenders = [
        found for path in sorted(TESTS.rglob("test_*.py")) for found in unasserted_tests(path)
    ]
    assert offenders == []


def test_the_lint_rejects_what_it_should_and_accepts_the_rest(tmp_path: Path) -> None:
    module = tmp_path / "test_sample.py"
    module.write_text(
        "import pytest\n"
        "def test_nothing():\n    pass\n"
        "def test_bare():\n    assert True\n"
        "def test_type(x=1):\n    assert isinstance(x, int)\n"
        "def test_truthy(x=[1]):\n    assert x and not None\n"
        "def check(x):\n    assert x == 1\n"
        "def test_helper():\n    check(1)\n"
        "def test_equal():\n    assert 1 + 1 == 2\n"
        "def test_raises():\n    with pytest.raises(ValueError):\n        int('x')\n"
        "def test_prefix():\n    assert 'abc'.startswith('a')\n"
    )
    rejected = {line.split()[-1] for line in unasserted_tests(module)}
    assert rejected == {"test_nothing", "test_bare", "test_type", "test_truthy"}
