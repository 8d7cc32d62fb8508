"""Provenance: the code version of each invocation, and what a table says about it."""

from __future__ import annotations

import subprocess

from benchmarks.data.paths import REPO_ROOT
from benchmarks.provenance import CODE_PATHS, UNKNOWN, code_version, code_versions


def test_the_code_version_is_the_checkout_described_by_git() -> None:
    """The commit, marked dirty only by uncommitted code or configs (not by rewritten tables)."""
    described = subprocess.run(
        ["git", "describe", "--always"], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    changed = subprocess.run(
        ["git", "status", "--porcelain", "--", *CODE_PATHS],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert code_version() == (f"{described}-dirty" if changed else described)


def test_a_run_lists_each_code_version_once_in_first_seen_order() -> None:
    invocations = [
        {"wall_s": 1.0},  # logged before versions were
        {"provenance": {"code": "abc1234"}},
        {"provenance": {"code": "def5678-dirty"}},
        {"provenance": {"code": "abc1234"}},
    ]
    assert code_versions(invocations) == [UNKNOWN, "abc1234", "def5678-dirty"]
    assert code_versions([]) == []
