"""Dataset loaders: each reads its files from the data directory into :mod:`memsys.types`."""

from benchmarks.data.errors import DataMissingError, DatasetError
from benchmarks.data.locomo import LOCOMO_FILE, read_locomo
from benchmarks.data.longmemeval import iter_longmemeval, longmemeval_notes
from benchmarks.data.paths import data_file, resolve_data_dir
from benchmarks.data.segmentation import SEGMENTATION_DATASETS, load_segmentation
from memsys.types import Conversation


def load_locomo(data_dir: str | None = None, file: str = LOCOMO_FILE) -> list[Conversation]:
    """All LoCoMo conversations; ``file`` is relative to the data directory
    (:func:`read_locomo`)."""
    conversations, _ = read_locomo(data_file(file, data_dir))
    return conversations


__all__ = [
    "SEGMENTATION_DATASETS",
    "DataMissingError",
    "DatasetError",
    "iter_longmemeval",
    "load_locomo",
    "load_segmentation",
    "longmemeval_notes",
    "read_locomo",
    "resolve_data_dir",
]
