"""Shared fixtures: the real data directory, skipped with a fetch hint when it is absent."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.data.paths import resolve_data_dir


@pytest.fixture(scope="session")
def data_dir() -> Path:
    path = resolve_data_dir()
    if not (path / "locomo" / "locomo10.json").exists():
        pytest.skip(f"datasets not found at {path}; run `make data`")
    return path
