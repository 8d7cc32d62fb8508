"""A report's tables as :class:`~benchmarks.tables.render.Table` values (overall, per category,
retrieval only, LongMemEval's accuracy and retrieval), and how each kind of cell is formatted."""

from __future__ import annotations

from typing import Any

from benchmarks.tables.render import Table
from benchmarks.tables.report.build import Report
from benchmarks.tables.report.header import STALE_MARK
from benchmarks.tables.report.rows import (
    LONGMEMEVAL_RANKING,
    LONGMEMEVAL_TYPES,
    STAGES,
    Row,
)
from benchmarks.tables.summary import OTHER_JUDGE_PREFIX, RANKING_LEVELS, Cell


def section(title: str, header: list[str], body: list[list[str]]) -> Table:
    """A report table: the three identifying columns left-aligned, the numbers right (tex)."""
    return Table(header, body, title=title, align="lll" + "r" * (len(header) - 3))


def fmt_cell(found: Cell | None) -> str:
    """``0.412 [0.35, 0.47]``, or a blank dash."""
    return "—" if found is None else f"{found.mean:.3f} [{found.low:.2f}, {found.high:.2f}]"


def fmt_number(value: float | None, digits: int = 3) -> str:
    """A rounded number or a dash."""
    return "—" if value is None else f"{value:.{digits}f}"


def fmt_tokens(count: int) -> str:
    """Token counts in thousands above 10,000, so cells stay narrow."""
    return f"{count / 1000:.1f}k" if count >= 10_000 else str(count)


def fmt_p(row: Row, metric: str) -> str:
    """The p-value cell: a dash for baselines, else the p-value and the baseline it faced."""
    if row.key.baseline:
        return "—"
    found = row.comparisons.get(metric)
    if found is None:
        return "no baseline"
    return f"{found.p_value:.4f} (vs {found.baseline})"


def fmt_costs(row: Row, what: str) -> str:
    """``construction / answering / judging`` calls or tokens."""
    values = [
        fmt_tokens(c["prompt_tokens"] + c["completion_tokens"])
        if what == "tokens"
        else str(c[what])
        for c in (row.costs[stage] for stage in STAGES)
    ]
    values[0] = starred(values[0], row)
    return " / ".join(values)


def starred(text: str, row: Row) -> str:
    """A cost of this run only: ``*`` where its memories came from the cache (built earlier)."""
    return text + "*" if row.memories_loaded and text != "—" else text


def fmt_work(counts: dict[str, Any] | None, done: str) -> str:
    """``<done> / requested`` texts over the run's invocations, ``done`` being the count of texts
    the model processed (``encoded``, ``parsed``); "—" where not all are known."""
    if not counts:
        return "—"
    return f"{counts[done]:,} / {counts['requested']:,}"


def fmt_wall(invocations: dict[str, Any]) -> str:
    """Wall seconds over the run's invocations, with the most worker processes any of them used
    (a run's wall time is comparable with another's only at the same count)."""
    wall = fmt_number(invocations.get("wall_s"), 0)
    workers = invocations.get("workers", 1)
    return f"{wall} ({workers} workers)" if workers > 1 and wall != "—" else wall


def run_cell(row: Row) -> str:
    """The Run cell: the run directory's name, marked :data:`STALE_MARK` where the method's
    source changed since the run was produced (the header says from what to what)."""
    name = row.run.directory.name
    return f"{name} {STALE_MARK}" if row.source_changed is not None else name


def scope_label(scope: str) -> str:
    """``single_hop`` → ``Single-hop``."""
    return scope.replace("_", "-").capitalize()


def row_start(row: Row) -> list[str]:
    """The identifying cells of a row (retrieval-only rows have no backbone); an invalid row says
    so in its first cell, with its count of failed questions."""
    method = row.key.method
    if row.invalid:
        method += f" INVALID ({row.failed} of {len(row.run.records)} failed)"
    return [method, row.key.backbone or "—", row.key.extraction or "—"]


def judge_scores(report: Report) -> list[str]:
    """The table's judge columns: ``judge_acc`` (the dataset's protocol), then the others."""
    return [name for name in report.scores if name.startswith("judge_acc")]


def judge_label(score: str) -> str:
    """``Judge`` for the dataset's own protocol, ``Judge <protocol>`` for the others."""
    return "Judge" if score == "judge_acc" else f"Judge {score.removeprefix(OTHER_JUDGE_PREFIX)}"


def overall_table(report: Report) -> Table:
    """Answered rows: overall scores, significance, retrieval and costs."""
    header = [
        "Method",
        "Backbone",
        "Extraction",
        f"F1 ({report.metric})",
        "BLEU-1",
        *(judge_label(name) for name in judge_scores(report)),
        "p vs best baseline",
        "Evidence recall",
        "All evidence",
        "F1 / Judge, all evidence shown",
        "Context tokens",
        "LLM calls (constr. / answer / judge)",
        "LLM tokens (constr. / answer / judge)",
        "Answer latency (s)",
        "Run",
    ]
    body = []
    for row in report.answered:
        overall = row.scores["overall"]
        body.append(
            [
                *row_start(row),
                *(
                    fmt_cell(overall[name])
                    for name in (report.metric, "bleu1", *judge_scores(report))
                ),
                fmt_p(row, report.metric),
                fmt_cell(row.evidence_recall),
                fmt_number(row.all_evidence_share),
                " / ".join(
                    fmt_number(getattr(row.scores["all_evidence"][name], "mean", None))
                    for name in (report.metric, "judge_acc")
                ),
                fmt_number(row.context_tokens, 1),
                fmt_costs(row, "calls"),
                fmt_costs(row, "tokens"),
                fmt_number(row.answer_latency_s),
                run_cell(row),
            ]
        )
    return section("Overall", header, body)


def category_table(report: Report) -> Table:
    """Answered rows: each category × (F1, BLEU-1, judge)."""
    metrics = ((report.metric, "F1"), ("bleu1", "BLEU-1"), ("judge_acc", "Judge"))
    header = ["Method", "Backbone", "Extraction"] + [
        f"{scope_label(category)} {label}" for category in report.categories for _, label in metrics
    ]
    body = [
        [
            *row_start(row),
            *(
                fmt_cell(row.scores[category][name])
                for category in report.categories
                for name, _ in metrics
            ),
        ]
        for row in report.answered
    ]
    return section("Per category", header, body)


def retrieval_table(report: Report) -> Table:
    """Retrieval-only rows: what the reader would have been shown, and what it cost."""
    header = [
        "Method",
        "Extraction",
        "Evidence recall",
        "All evidence",
        "Context tokens",
        "Construction LLM calls",
        "Construction (s)",
        "Texts embedded / asked",
        "Texts parsed / asked",
        "Retrieve latency (s)",
        "Wall (s)",
        "Peak RSS (MB)",
        "Run",
    ]
    body = [
        [
            row.key.method,
            row.key.extraction or "—",
            fmt_cell(row.evidence_recall),
            fmt_number(row.all_evidence_share),
            fmt_number(row.context_tokens, 1),
            starred(str(row.costs["construction"]["calls"]), row),
            starred(fmt_number(row.invocations.get("construction_s"), 0), row),
            starred(fmt_work(row.invocations.get("embedding"), "encoded"), row),
            starred(fmt_work(row.invocations.get("parsing"), "parsed"), row),
            fmt_number(row.retrieve_latency_s),
            starred(fmt_wall(row.invocations), row),
            fmt_number(row.invocations.get("peak_rss_mb"), 0),
            run_cell(row),
        ]
        for row in report.retrieval_only
    ]
    return section("Retrieval only (answer=none)", header, body)


def questions_per_category(report: Report) -> dict[str, int]:
    """Questions of each category in the runs (the same in every run: one subset, one seed)."""
    return {
        category: max(
            sum(r["category"] == category for r in row.run.records) for row in report.rows
        )
        for category in report.categories
    }


def longmemeval_table(report: Report) -> Table:
    """Answered rows: LongMemEval's Table 2, judge accuracy per question type and overall."""
    counts = questions_per_category(report)
    header = [
        "Method",
        "Backbone",
        "Extraction",
        *(
            f"{LONGMEMEVAL_TYPES.get(category, scope_label(category))} (n={counts[category]})"
            for category in report.categories
        ),
        f"Overall (N={sum(counts.values())})",
        "Task-averaged",
        "Abstention",
        "p vs best baseline (judge)",
        "Run",
    ]
    body = []
    for row in report.answered:
        cells = row.longmemeval
        assert cells is not None  # built for every row of a LongMemEval report
        body.append(
            [
                *row_start(row),
                *(fmt_cell(cells.per_type.get(category)) for category in report.categories),
                fmt_cell(cells.overall),
                fmt_number(cells.task_averaged),
                fmt_cell(cells.abstention),
                fmt_p(row, "judge_acc"),
                run_cell(row),
            ]
        )
    return section("LongMemEval accuracy (judge) per question type", header, body)


def longmemeval_retrieval_table(report: Report) -> Table:
    """Every row: LongMemEval's session- and turn-level ranking metrics."""
    header = ["Method", "Backbone", "Extraction"]
    for level in RANKING_LEVELS:
        header += [f"{level.capitalize()} {name}" for name in LONGMEMEVAL_RANKING]
        header.append(f"{level.capitalize()} n")
    header.append("Run")
    body = []
    for row in report.rows:
        assert row.longmemeval is not None  # built for every row of a LongMemEval report
        cells = row_start(row)
        for level in RANKING_LEVELS:
            found = row.longmemeval.retrieval[level]
            first = found[LONGMEMEVAL_RANKING[0]]
            cells += [fmt_cell(found[name]) for name in LONGMEMEVAL_RANKING]
            cells.append(str(first.n) if first else "0")
        body.append([*cells, run_cell(row)])
    return section("LongMemEval retrieval", header, body)


def ranked(row: Row) -> bool:
    """Whether a LongMemEval row has any ranking metric (its records stored rankings)."""
    cells = row.longmemeval
    return cells is not None and any(
        cell is not None for level in cells.retrieval.values() for cell in level.values()
    )


def sections(report: Report) -> list[Table]:
    """The tables of md and tex, in order, leaving out empty ones. LongMemEval's accuracy table
    takes the place of the per-category one (its F1 and BLEU-1 per type stay in the csv)."""
    found = []
    if report.answered:
        found.append(overall_table(report))
        if report.dataset.longmemeval_scores:
            found.append(longmemeval_table(report))
        else:
            found.append(category_table(report))
    if report.dataset.longmemeval_scores and any(ranked(row) for row in report.rows):
        found.append(longmemeval_retrieval_table(report))
    if report.retrieval_only:
        found.append(retrieval_table(report))
    return found
