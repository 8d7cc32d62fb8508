"""``python -m benchmarks.published``: the papers' own numbers beside the paper grid's.

The command line: options, then build the report and write ``<out>.md``
(``benchmarks/published/__main__.py`` runs :func:`main`)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from benchmarks.published.build import build_paper_report
from benchmarks.published.grid import GRIDS
from benchmarks.published.render import render_paper_markdown
from benchmarks.runs.folders import ReportError, add_where_option, in_repo, parse_where


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.published", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--runs", type=Path, default=Path("results/runs"))
    parser.add_argument("--dataset", default="locomo", choices=list(GRIDS))
    parser.add_argument("--subset", default="full")
    parser.add_argument("--out", type=Path, help="default results/paper_locomo, paper_longmemeval")
    add_where_option(parser, "judge.backbone.name=gpt-4o-mini")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Build and write ``<out>.md``; exit 2 with a clear message when it cannot be built."""
    args = parse_args(argv)
    try:
        report = build_paper_report(
            in_repo(args.runs),
            dataset=args.dataset,
            subset=args.subset,
            where=parse_where(args.where),
        )
    except ReportError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    out = in_repo(args.out or Path("results") / GRIDS[args.dataset])
    out.parent.mkdir(parents=True, exist_ok=True)
    path = out.parent / f"{out.name}.md"
    path.write_text(render_paper_markdown(report), encoding="utf-8")
    print(path)
    return 0
