"""The report as markdown: its header, the published cells beside the measured ones, the grid's
runs with everything each was measured with, and the published cells not shown."""

from __future__ import annotations

from benchmarks.data.specs import spec_of
from benchmarks.metrics.aggregate import Cell
from benchmarks.published.build import PaperReport
from benchmarks.render import Table
from benchmarks.runs.folders import Run, lookup
from benchmarks.runs.naming import extraction_description, judge_description
from benchmarks.tables.report.header import subset_description

NOT_RUN = "not run"


def fmt_scaled(found: Cell | None, scale: float) -> str:
    """``72.40 [68.1, 76.5] (n=500)`` on the paper's scale, or "—"."""
    if found is None:
        return "—"
    digits = 2 if scale > 1 else 3
    low, high = found.low * scale, found.high * scale
    return (
        f"{found.mean * scale:.{digits}f} [{low:.{digits - 1}f}, {high:.{digits - 1}f}] "
        f"(n={found.n})"
    )


def run_cells(run: Run | None) -> list[str]:
    """Reader, memory and subset of a measured number, or "not run"."""
    if run is None:
        return ["—", "—", "—"]
    return [
        str(lookup(run.config, "backbone.name", "?")),
        extraction_description(run.config) or "none (baseline)",
        subset_description(run.config.get("subset", {}), spec_of(run.config)),
    ]


def published_table(report: PaperReport) -> list[list[str]]:
    """One row per published cell: its value, the measured one, and what differs."""
    rows = []
    for line in report.lines:
        cell = line.cell
        measured = fmt_scaled(line.measured, cell.scale) if line.run else NOT_RUN
        rows.append(
            [
                cell.paper.label,
                cell.table,
                cell.row,
                cell.column,
                cell.backbone,
                f"{cell.score} · {cell.scope}",
                f"{cell.value:g}",
                measured,
                *run_cells(line.run),
                "; ".join(f"≠ {found}" for found in line.differences) or "—",
                line.run.directory.name if line.run else "—",
            ]
        )
    return rows


def runs_table(report: PaperReport) -> list[list[str]]:
    """One row per grid entry and reader: everything its numbers were measured with."""
    rows = []
    for entry, runs in report.runs.items():
        if not runs:
            rows.append([entry.name, entry.method, NOT_RUN, *["—"] * (len(RUNS_HEADER) - 3)])
        for run in runs.values():
            rows.append(
                [
                    entry.name,
                    entry.method,
                    *run_cells(run),
                    judge_description(run.config.get("judge")),
                    str(lookup(run.config, "answer.order", "time")),
                    str(run.config.get("adversarial")),
                    str(lookup(run.config, "answer.context_budget", "?")),
                    str(lookup(run.config, "embedder.model", "?")),
                    str(len(run.records)),
                    run.directory.name,
                ]
            )
    return rows


PUBLISHED_HEADER = [
    "Paper",
    "Table",
    "Row",
    "Column",
    "Paper's reader",
    "Score · scope",
    "Published",
    "Measured",
    "Reader",
    "Memory",
    "Subset",
    "≠ differs from the paper",
    "Run",
]

RUNS_HEADER = [
    "Entry",
    "Method",
    "Reader",
    "Memory",
    "Subset",
    "Judge",
    "Order",
    "Adversarial",
    "Budget",
    "Embedder",
    "Questions",
    "Run",
]


def render_paper_markdown(report: PaperReport) -> str:
    """The report as markdown: header, published beside measured, the grid's runs, left out."""
    tables = [
        Table(PUBLISHED_HEADER, published_table(report), title="Published beside measured"),
        Table(RUNS_HEADER, runs_table(report), title="The paper grid's runs"),
    ]
    lines = [f"# {report.title}", "", *(f"- {line}" for line in report.header)]
    for table in tables:
        lines += ["", *table.markdown_lines()]
    lines += ["", "## Published cells not shown", "", *(f"- {line}" for line in report.left_out)]
    return "\n".join(lines) + "\n"
