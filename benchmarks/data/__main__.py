"""``python -m benchmarks.data stats [--json] [--data-dir DIR]``: dataset counts."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from benchmarks.data.errors import DataMissingError, DatasetError
from benchmarks.data.paths import DATA_DIR_ENV, resolve_data_dir
from benchmarks.data.stats import all_stats


def _print_table(stats: dict[str, Any]) -> None:
    for dataset, body in stats.items():
        print(dataset)
        for key, value in body.items():
            if key == "notes":
                for note in value:
                    print(f"    note: {note}")
            elif isinstance(value, dict):
                print(f"  {key}: " + ", ".join(f"{k}={v}" for k, v in value.items()))
            else:
                print(f"  {key}: {value}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.data", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    stats = commands.add_parser("stats", help="print counts per dataset")
    stats.add_argument("--json", action="store_true", help="one JSON object keyed by dataset")
    stats.add_argument("--data-dir", default=None, help=f"data directory (${DATA_DIR_ENV} wins)")
    args = parser.parse_args(argv)
    try:
        result = all_stats(args.data_dir)
    except (DataMissingError, DatasetError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"data directory: {resolve_data_dir(args.data_dir)}")
        _print_table(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
