"""Errors that tell a user exactly which file, and which record in it, is wrong or missing."""

from __future__ import annotations

from pathlib import Path

FETCH_HINT = "run `make data` (or point MEMBENCH_DATA at a folder that has it)"


class DatasetError(ValueError):
    """A dataset file exists but one of its records cannot be read as the format promises."""

    def __init__(self, path: Path | str, record: str | int | None, message: str) -> None:
        where = f"{path}" if record is None else f"{path}: record {record}"
        super().__init__(f"{where}: {message}")
        self.path = Path(path)
        self.record = record


class DataMissingError(FileNotFoundError):
    """A dataset file is absent; the message names the path looked at and the fetch command."""

    def __init__(self, path: Path | str) -> None:
        super().__init__(f"dataset file not found: {path}; {FETCH_HINT}")
        self.path = Path(path)
