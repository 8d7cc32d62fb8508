"""The evaluators' own judge prompts, read out of their unmodified source files at run time.

The project holds no copy of an evaluator's text (docs/scoring.md, "Judge protocols"): the files
under the data directory are checked against their pinned sha256 and parsed with :mod:`ast`,
never executed. A missing or altered file raises :class:`EvaluatorFileError` only when a
protocol asks for its text."""

from __future__ import annotations

import ast
import functools
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

from benchmarks.data import sources
from benchmarks.data.errors import DatasetError
from benchmarks.data.fetch import CHECKSUMS, read_checksums, sha256_file
from benchmarks.data.paths import resolve_data_dir

#: The function of LongMemEval's evaluator that builds its judge prompts, and its arguments.
LONGMEMEVAL_FUNCTION = "get_anscheck_prompt"
TASK_ARGUMENT, ABSTENTION_ARGUMENT, TEMPLATE_VARIABLE = "task", "abstention", "template"
#: mem0's judge prompt, a module-level string.
MEM0_VARIABLE = "ACCURACY_PROMPT"


class EvaluatorFileError(DatasetError):
    """An evaluator's source file is missing, altered (sha256) or not shaped as expected."""

    def __init__(self, path: Path, message: str) -> None:
        super().__init__(path, None, f"{message}; run `make data`")


def longmemeval_templates() -> tuple[Mapping[str, str], str]:
    """LongMemEval's judge templates by question type (its own spelling) and for abstention, each
    for ``template.format(question, answer, response)``."""
    source = sources.LONGMEMEVAL_JUDGE
    return _longmemeval_templates(resolve_data_dir() / source.local, source.local)


def mem0_accuracy_prompt() -> str:
    """mem0's ``ACCURACY_PROMPT``, formatted with ``question``, ``gold_answer`` and
    ``generated_answer``."""
    source = sources.MEM0_JUDGE
    return _mem0_accuracy_prompt(resolve_data_dir() / source.local, source.local)


def pinned_sha256(source: sources.Source) -> str:
    """The sha256 an evaluator file must have (what a protocol built on it sends depends on it)."""
    return read_checksums(CHECKSUMS)[source.local]


def _verified(path: Path, name: str) -> Path:
    expected = read_checksums(CHECKSUMS)[name]
    if not path.is_file():
        raise EvaluatorFileError(path, f"missing (expected sha256 {expected})")
    found = sha256_file(path)
    if found != expected:
        raise EvaluatorFileError(path, f"expected sha256 {expected}, found {found}")
    return path


@functools.cache  # per path: a run reads, verifies and parses each file once
def _longmemeval_templates(path: Path, name: str) -> tuple[Mapping[str, str], str]:
    module = _parse(_verified(path, name))
    functions = [
        node
        for node in module.body
        if isinstance(node, ast.FunctionDef) and node.name == LONGMEMEVAL_FUNCTION
    ]
    if len(functions) != 1:
        raise EvaluatorFileError(path, f"no single function {LONGMEMEVAL_FUNCTION}")
    by_type: dict[str, str] = {}
    abstention: list[str] = []

    def visit(statements: list[ast.stmt], abstaining: bool, tasks: tuple[str, ...]) -> None:
        for statement in statements:
            if isinstance(statement, ast.If):
                negated = _abstention_test(statement.test)
                if negated is not None:
                    visit(statement.body, not negated, tasks)
                    visit(statement.orelse, negated, tasks)
                else:
                    visit(statement.body, abstaining, _tasks_tested(path, statement.test))
                    visit(statement.orelse, abstaining, ())
            elif (template := _assigned_string(statement, TEMPLATE_VARIABLE)) is not None:
                if abstaining:
                    abstention.append(template)
                for task in tasks:
                    by_type[task] = template

    visit(functions[0].body, False, ())
    if len(abstention) != 1 or not by_type:
        raise EvaluatorFileError(path, f"{LONGMEMEVAL_FUNCTION} has no template per branch")
    return MappingProxyType(by_type), abstention[0]


@functools.cache
def _mem0_accuracy_prompt(path: Path, name: str) -> str:
    for statement in _parse(_verified(path, name)).body:
        if (prompt := _assigned_string(statement, MEM0_VARIABLE)) is not None:
            return prompt
    raise EvaluatorFileError(path, f"no string constant {MEM0_VARIABLE}")


def _parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _assigned_string(statement: ast.stmt, name: str) -> str | None:
    """The string constant of ``name = "..."``, else None."""
    if (
        isinstance(statement, ast.Assign)
        and [ast.unparse(target) for target in statement.targets] == [name]
        and isinstance(statement.value, ast.Constant)
        and isinstance(statement.value.value, str)
    ):
        return statement.value.value
    return None


def _abstention_test(test: ast.expr) -> bool | None:
    """For ``abstention`` False, for ``not abstention`` True, else None."""
    if isinstance(test, ast.Name) and test.id == ABSTENTION_ARGUMENT:
        return False
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return True if _abstention_test(test.operand) is False else None
    return None


def _tasks_tested(path: Path, test: ast.expr) -> tuple[str, ...]:
    """The question types of ``task == '...'`` or ``task in [...]``."""
    if (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == TASK_ARGUMENT
        and len(test.ops) == 1
    ):
        (operator,), (compared,) = test.ops, test.comparators
        if isinstance(operator, ast.Eq) and isinstance(compared, ast.Constant):
            return (compared.value,)
        if isinstance(operator, ast.In) and isinstance(compared, ast.List | ast.Tuple | ast.Set):
            values = [item.value for item in compared.elts if isinstance(item, ast.Constant)]
            if len(values) == len(compared.elts):
                return tuple(values)
    raise EvaluatorFileError(
        path, f"unexpected test in {LONGMEMEVAL_FUNCTION}: {ast.unparse(test)}"
    )
