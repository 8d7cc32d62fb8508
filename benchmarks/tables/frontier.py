"""``python -m benchmarks.tables.frontier``: the efficiency frontier of retrieval (png and csv).

Each point is a retrieval-only run's row in the table of its context budget
(:func:`benchmarks.runs.selection.rows_by_budget`), so it has that row's means, intervals and
checks; what the figure shows and the readings taken are in docs/tables.md ("The efficiency
frontier"), its words in ``notes.yaml`` (``frontier``).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from benchmarks.metrics.aggregate import Cell
from benchmarks.render import Table
from benchmarks.runs.folders import ReportError, add_where_option, in_repo, lookup, parse_where
from benchmarks.runs.rows import Row
from benchmarks.runs.selection import rows_by_budget
from benchmarks.tables.notes import note
from benchmarks.tables.report.header import (
    code_versions,
    context_order_line,
    dataset_description,
    interval_description,
    subset_description,
)
from benchmarks.tables.report.plot import save_figure

#: One marker per line, cycled (with ten colours, every line differs in one or the other).
MARKERS = "osD^v<>pPXh*"
#: The panels: a point's score (csv column), how the axis names it, and the row's cell for it.
PANELS: tuple[tuple[str, str, Callable[[Row], Cell | None]], ...] = (
    ("evidence_recall", "evidence recall (95% CI)", lambda row: row.evidence_recall),
    ("answer_coverage", "answer coverage (95% CI)", lambda row: row.answer_coverage["overall"]),
)


@dataclass(frozen=True)
class Frontier:
    """The retrieval-only rows of one dataset and subset as (budget, row) points, and the words
    that describe them."""

    points: list[tuple[int, Row]]
    title: str
    caption: list[str]


def tokens(row: Row) -> float:
    """A point's x: the row's mean context tokens (0 for an empty context)."""
    return row.context_tokens or 0.0


def build_frontier(
    runs_dir: Path, *, dataset: str, subset: str, where: dict[str, Any] | None = None
) -> Frontier:
    """The retrieval-only runs that pass the filters as points, one table's rows per budget
    (:func:`benchmarks.runs.selection.rows_by_budget`), and the words that describe them."""
    tables = rows_by_budget(runs_dir, dataset=dataset, subset=subset, where=where)
    points = [(budget, row) for budget, found in tables.items() for row in found.rows]
    runs = [row.run for _, row in points]
    budgets, first = list(tables), runs[0].config
    spec = tables[budgets[0]].spec
    cells = [cell for _, row in points for *_, score in PANELS if (cell := score(row))]
    facts = {
        "dataset": first["dataset"].get("name"),
        "subset": first["subset"].get("name"),
        "questions": max(len(row.run.records) for _, row in points),
        "described": dataset_description(first["dataset"]),
        "sample": subset_description(first["subset"], spec),
        "budgets": ", ".join(map(str, budgets)),
        "embedder": lookup(first, "embedder.model", "?"),
        "code": code_versions(runs),
        "intervals": interval_description(cells, "conversation", spec.memory_name),
        "evidence": spec.evidence,
        "order": context_order_line(tables[budgets[0]].rows),
    }
    keys = ("data", "scores", "tokens", "statistics")
    caption = [note(f"frontier.{key}", **facts) for key in keys]
    title = note("frontier.title", **facts)
    return Frontier(points, title, caption)


def by_method(points: Sequence[tuple[int, Row]]) -> dict[str, list[tuple[int, Row]]]:
    """Each method's points by budget, the methods in order of their first appearance."""
    lines: dict[str, list[tuple[int, Row]]] = defaultdict(list)
    for budget, row in points:
        lines[row.key.method].append((budget, row))
    return {method: sorted(line, key=lambda point: point[0]) for method, line in lines.items()}


def frontier_table(frontier: Frontier) -> Table:
    """The points, one row each (empty contexts too): method, budget, mean tokens, each panel's
    score with its interval, questions and run id."""
    header = ["method", "context_budget", "context_tokens_mean"]
    header += [f"{name}{part}" for name, *_ in PANELS for part in ("", "_low", "_high")]
    rows = []
    for method, line in by_method(frontier.points).items():
        for budget, row in line:
            cells: list[Any] = [method, budget, round(tokens(row), 1)]
            for *_, score in PANELS:
                found = score(row)
                bounds = (found.mean, found.low, found.high) if found else (None,) * 3
                cells += [None if bound is None else round(bound, 4) for bound in bounds]
            rows.append([*cells, len(row.run.records), row.run.directory.name])
    return Table(
        [*header, "questions", "run_id"], rows, title=frontier.title, caption=frontier.caption
    )


def write_plot(frontier: Frontier, path: Path) -> None:
    """Two panels against mean context tokens (log axis), one line per method with its 95%
    intervals; a point with an empty context is named in the figure, kept in the csv."""
    budgets = sorted({budget for budget, _ in frontier.points})
    drawn = [tokens(row) for _, row in frontier.points if tokens(row) > 0]
    low = int(math.log2(min(drawn, default=budgets[0])))
    ticks = [2**power for power in range(low, budgets[-1].bit_length())]
    figure = Figure(figsize=(13, 7.5), layout="constrained")
    axes = figure.subplots(1, len(PANELS), sharex=True)
    lines = by_method(frontier.points)
    for axis, (_, label, score) in zip(axes, PANELS, strict=True):
        for index, (method, line) in enumerate(lines.items()):
            shown = [
                (tokens(row), found) for _, row in line if (found := score(row)) and tokens(row) > 0
            ]
            axis.errorbar(
                [x for x, _ in shown],
                [found.mean for _, found in shown],
                yerr=[[f.mean - f.low for _, f in shown], [f.high - f.mean for _, f in shown]],
                label=method,
                color=f"C{index % 10}",
                linestyle="-" if index < 10 else "--",
                marker=MARKERS[index % len(MARKERS)],
                markersize=5,
                capsize=2,
                linewidth=1.3,
            )
        axis.set_xscale("log", base=2)
        axis.set_xlim(ticks[0] / 1.4, ticks[-1] * 1.4)
        axis.set_xticks(ticks, [str(tick) for tick in ticks])
        axis.minorticks_off()
        axis.set_xlabel("context tokens, mean per question (harness tokens)")
        axis.set_ylabel(label)
        axis.set_ylim(bottom=0)
        axis.grid(True, alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="outside lower center", ncols=3, fontsize="small")
    empty = [f"{row.key.method} at {b}" for b, row in frontier.points if tokens(row) == 0]
    left_out = f"\nEmpty context, not drawn: {'; '.join(empty)}" if empty else ""
    figure.suptitle(
        f"{frontier.title}\nretrieval only, context budgets {', '.join(map(str, budgets))}"
        + left_out
    )
    save_figure(figure, path)


def main(argv: Sequence[str] | None = None) -> int:
    """Build and write ``--out``.png and .csv; exit 2 with a clear message when there is
    nothing to plot."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.tables.frontier", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--runs", type=Path, default=Path("results/runs"))
    parser.add_argument("--out", type=Path, help="default results/frontier_<dataset>")
    parser.add_argument("--dataset", default="locomo")
    parser.add_argument(
        "--subset", required=True, help="the sweep's (conf/experiment/frontier.yaml)"
    )
    add_where_option(parser, "embedder.model=...")
    args = parser.parse_args(argv)
    try:
        frontier = build_frontier(
            in_repo(args.runs),
            dataset=args.dataset,
            subset=args.subset,
            where=parse_where(args.where),
        )
    except ReportError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    out = in_repo(args.out or Path(f"results/frontier_{args.dataset}"))
    out.parent.mkdir(parents=True, exist_ok=True)
    write_plot(frontier, out.with_suffix(".png"))
    out.with_suffix(".csv").write_text(frontier_table(frontier).to_csv(), encoding="utf-8")
    print(out.with_suffix(".png"), out.with_suffix(".csv"), sep="\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
