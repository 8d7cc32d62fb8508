"""Where the datasets live: an environment variable, then config, then the repo's default.

Data never lives inside the repository. ``MEMBENCH_DATA`` wins over any configured value so that
one export redirects every entry point; relative paths are resolved against the repository root,
not the working directory, because Hydra jobs may run elsewhere.
"""

from __future__ import annotations

import os
from pathlib import Path

from benchmarks.data.errors import DataMissingError

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_DATA_DIR = "../shared/data"
DATA_DIR_ENV = "MEMBENCH_DATA"


def resolve_data_dir(configured: str | os.PathLike[str] | None = None) -> Path:
    """Return the data directory: ``configured``, else ``$MEMBENCH_DATA``, else the default."""
    chosen = configured or os.environ.get(DATA_DIR_ENV) or DEFAULT_DATA_DIR
    path = Path(chosen).expanduser()
    if not path.is_absolute():
        path = REPO_ROOT / path
    return path.resolve()


def resolve_path(path: str) -> Path:
    """Relative paths are relative to the repository root (Hydra may run jobs elsewhere)."""
    candidate = Path(path).expanduser()
    return candidate if candidate.is_absolute() else REPO_ROOT / candidate


def shown_path(path: Path) -> str:
    """A path relative to the repository when inside it, so committed files (table headers, a
    run's ``metrics.json``) do not name a machine's home directory."""
    resolved = path.resolve()
    return str(resolved.relative_to(REPO_ROOT)) if resolved.is_relative_to(REPO_ROOT) else str(path)


def data_file(relative: str, data_dir: str | os.PathLike[str] | None = None) -> Path:
    """Return the path of one dataset file, raising a fetch hint when it is absent."""
    path = resolve_data_dir(data_dir) / relative
    if not path.exists():
        raise DataMissingError(path)
    return path
