"""Why a method won or lost a question: a filterable question list, each question's gold answer
and evidence beside every run's context (evidence highlighted, other turns dimmed), scores,
verdicts and costs, and the diff of any two runs (:mod:`benchmarks.inspection.diff`). Built from
result files and the dataset only: one self-contained HTML page (``--out``) for a small set, or
a local server (``--serve``) that reads the runs as they are asked for, for any size.

    python -m benchmarks.inspection.inspect RUN_DIR [RUN_DIR ...] --out FILE.html
    python -m benchmarks.inspection.inspect --table results/table1.csv --out results/table1_inspect.html
    python -m benchmarks.inspection.inspect --serve [--host H] [--port P] RUN_DIR ... | --table CSV
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections.abc import Sequence
from pathlib import Path

from benchmarks.inspection.index import Index
from benchmarks.inspection.model import InspectError, build_model, load_dataset, read_run
from benchmarks.inspection.page import render_page
from benchmarks.inspection.server import serve
from benchmarks.pipeline.packed import open_log, predictions_file
from benchmarks.runs.folders import in_repo

#: The largest single-file page written (MB, estimated before it is built): past it a browser
#: struggles to open the file, and ``--serve`` is the way.
MAX_PAGE_MB = 100
#: Bytes the page spends per question shared by two runs (its precomputed diff).
DIFF_BYTES_PER_SHARED_QUESTION = 200


def estimated_page_mb(directories: Sequence[Path]) -> float:
    """What a single page of these runs would weigh: their logs (the page holds their contexts
    and records), plus the diff of every two runs.

    >>> estimated_page_mb([])
    0.0
    """
    logs = [predictions_file(directory) for directory in directories]
    lines, sizes = [], []
    for log in (log for log in logs if log.exists()):
        with open_log(log) as handle:  # a packed log's page holds its plain bytes
            counted = [len(raw) for raw in handle]
        lines.append(len(counted))
        sizes.append(sum(counted))
    pairs = sum(min(a, b) for i, a in enumerate(lines) for b in lines[i + 1 :])
    return (sum(sizes) + pairs * DIFF_BYTES_PER_SHARED_QUESTION) / 1e6


def table_runs(table: Path, runs_dir: Path) -> list[Path]:
    """The run folders of a report's csv (its ``run`` column; ``#`` lines are its header)."""
    with table.open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(line for line in handle if not line.startswith("#")))
    if not rows or "run" not in rows[0]:
        raise InspectError(f"{table}: no run column (not a report csv)")
    return [runs_dir / row["run"] for row in rows]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.inspection.inspect", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("runs", nargs="*", type=Path, help="run folders (results/runs/<id>)")
    parser.add_argument("--table", type=Path, help="also the runs of a report csv's run column")
    parser.add_argument(
        "--runs-dir", type=Path, default=Path("results/runs"), help="where --table's runs are"
    )
    output = parser.add_mutually_exclusive_group(required=True)
    output.add_argument("--out", type=Path, help="the HTML file to write (a small set)")
    output.add_argument("--serve", action="store_true", help="serve the runs (any size)")
    parser.add_argument("--host", default="127.0.0.1", help="--serve: the address to bind")
    parser.add_argument("--port", type=int, default=8765, help="--serve: the port (0: any)")
    parser.add_argument(
        "--allow-host",
        action="append",
        default=[],
        help="--serve: another Host header to answer (the name a remote browser uses)",
    )
    parser.add_argument(
        "--max-page-mb",
        type=float,
        default=MAX_PAGE_MB,
        help="--out: refuse a page estimated larger (default %(default)s MB)",
    )
    parser.add_argument("--title", default="memsys-bench inspector")
    parser.add_argument("--data-dir", help="the datasets' folder (default: $MEMBENCH_DATA)")
    args = parser.parse_args(argv)
    try:
        directories = list(args.runs)
        if args.table:
            directories += table_runs(in_repo(args.table), in_repo(args.runs_dir))
        if not directories:
            raise InspectError("no run folder given (RUN_DIR arguments or --table)")
        directories = list(dict.fromkeys(directories))
        if args.serve:
            serve(
                Index(directories, args.data_dir, args.title), args.host, args.port, args.allow_host
            )
            return 0
        estimate = estimated_page_mb(directories)
        if estimate > args.max_page_mb:
            raise InspectError(
                f"a page of these {len(directories)} runs would weigh about {estimate:.0f} MB, "
                f"more than --max-page-mb {args.max_page_mb:g}: no browser opens it well. Serve "
                "them instead: memsys-bench inspect --serve with the same runs"
            )
        runs = [read_run(directory) for directory in directories]
    except (InspectError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    model = build_model(runs, load_dataset(runs, args.data_dir), args.title)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(render_page(model), encoding="utf-8")
    size = args.out.stat().st_size
    print(
        f"wrote {args.out} ({len(runs)} runs, {len(model['questions'])} questions, {size:,} bytes)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
