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
)
UNKNOWN = "unknown"


@functools.cache
def code_version() -> str:
    """``git describe --always --dirty`` of the checkout, else this package's version."""
    try:
        described = subprocess.run(
            ["git", "describe", "--always", "--dirty"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        described = ""
    if described:
        return described
    try:
        return f"memsys-bench {metadata.version('memsys-bench')}"
    except metadata.PackageNotFoundError:
        return UNKNOWN


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
