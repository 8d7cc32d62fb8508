"""Committed run folders, packed: a run's record log gzipped whole, so every cell of a table can be
re-rendered on any clone within ``results/``'s size budget. ``memsys-bench results pack`` writes
deterministic bytes and removes the plain file once the packed one reads back identical; every
reader goes through :func:`predictions_file` and :func:`open_log`, so a packed folder reads as a
plain one (a run resumed in it is unpacked first)."""

from __future__ import annotations

import argparse
import gzip
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import IO

PLAIN = "predictions.jsonl"
PACKED = "predictions.jsonl.gz"
#: A segmentation run's record log (:mod:`benchmarks.pipeline.segment`).
LABELS = "labels.jsonl"


def predictions_file(directory: Path, plain: str = PLAIN) -> Path:
    """The run's records (``plain``: the log's name): the plain log, or the packed one where
    only that exists."""
    packed = directory / f"{plain}.gz"
    return packed if packed.exists() and not (directory / plain).exists() else directory / plain


def log_name(directory: Path) -> str:
    """The name of a run's record log, plain or packed: a segmentation run's labels, else its
    predictions."""
    return LABELS if any(directory.glob(f"{LABELS}*")) else PLAIN


def open_log(path: Path) -> IO[bytes]:
    """A run's records for reading, as bytes, whether plain or packed."""
    return gzip.open(path, "rb") if path.suffix == ".gz" else path.open("rb")


def pack(directory: Path) -> tuple[int, int]:
    """Pack a finished run's records (a segmentation run's labels); the sizes before and after,
    in bytes."""
    plain = directory / log_name(directory)
    if not (directory / "metrics.json").exists():
        raise ValueError(f"{directory}: unfinished (no metrics.json): pack a finished run only")
    data = plain.read_bytes()
    packed = directory / f"{plain.name}.gz"
    partial = packed.with_suffix(".gz.part")
    with partial.open("wb") as raw, gzip.GzipFile("", "wb", 9, raw, mtime=0) as stream:
        stream.write(data)
    if gzip.decompress(partial.read_bytes()) != data:
        partial.unlink()
        raise ValueError(f"{directory}: the packed records do not read back identical")
    partial.replace(packed)
    plain.unlink()
    return len(data), packed.stat().st_size


def unpack(directory: Path, name: str = PLAIN) -> None:
    """Restore the plain records (``name``) of a packed run (for the runner to append to)."""
    plain = directory / name
    packed = directory / f"{name}.gz"
    partial = plain.with_suffix(".jsonl.part")
    partial.write_bytes(gzip.decompress(packed.read_bytes()))
    partial.replace(plain)
    packed.unlink()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="memsys-bench results pack",
        description="Gzip finished runs' predictions.jsonl (labels.jsonl) (deterministic, "
        "verified); --unpack restores them.",
    )
    parser.add_argument("runs", nargs="+", type=Path, help="run folders")
    parser.add_argument("--unpack", action="store_true")
    args = parser.parse_args(argv)
    status = 0
    for directory in args.runs:
        try:
            if args.unpack:
                unpack(directory, log_name(directory))
                print(f"{directory}: unpacked")
            else:
                before, after = pack(directory)
                print(f"{directory}: {before:,} → {after:,} bytes")
        except (OSError, ValueError) as error:
            print(f"error: {error}", file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
