"""A report's tables as :class:`~benchmarks.render.Table` values, and how each kind of cell is
formatted. Readings taken for readability (retrieval columns first, meanings in numbered notes,
a column shown only where rows differ in it): docs/tables.md, "Readings taken"."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from benchmarks.metrics.aggregate import OTHER_JUDGE_PREFIX, RANKING_LEVELS, Cell, LongMemEvalCells
from benchmarks.metrics.agreement import protocol_agreement
from benchmarks.render import Table
from benchmarks.runs.judges import repeat_temperature
from benchmarks.runs.rows import (
    AUDITED_SCORES,
    LONGMEMEVAL_RANKING,
    LONGMEMEVAL_TYPES,
    Row,
    budget_used,
    own_repeats,
    published_only,
    questions_per_category,
    ranked,
)
from benchmarks.tables.report.build import Report
from benchmarks.tables.report.header import STALE_MARK, one_value, short_label

DASH = "—"


def section(
    title: str, identity: Sequence[str], header: list[str], body: list[list[str]], **text: Any
) -> Table:
    """A report table: the identifying columns left-aligned, the numbers right (tex)."""
    align = "l" * len(identity) + "r" * len(header)
    return Table([*identity, *header], body, title=title, align=align, **text)


def fmt_cell(found: Cell | None) -> str:
    """``0.412 [0.35,0.47]``: the mean and its 95% interval, or a dash."""
    return DASH if found is None else f"{found.mean:.3f} [{found.low:.2f},{found.high:.2f}]"


def fmt_number(value: float | None, digits: int = 3) -> str:
    """A rounded number or a dash."""
    return DASH if value is None else f"{value:.{digits}f}"


def fmt_percentiles(found: dict[str, Any]) -> str:
    """``p50 / p95`` of a latency distribution, or a dash where there is none."""
    return DASH if not found.get("n") else f"{found['p50']:.3f} / {found['p95']:.3f}"


def fmt_delta(value: float | None) -> str:
    """A signed difference (``+0.012``; one that rounds to zero is ``+0.000``) or a dash."""
    return DASH if value is None else f"{round(value, 3) + 0.0:+.3f}"


def fmt_tokens(count: int) -> str:
    """Token counts in thousands above 10,000, so cells stay narrow."""
    return f"{count / 1000:.1f}k" if count >= 10_000 else str(count)


def fmt_p(row: Row, metric: str) -> str:
    """The p-value cell: a plain number (the baseline it faced is named in the notes), a dash
    for baselines and rows without one."""
    found = None if row.key.baseline else row.comparisons.get(metric)
    if found is None:
        return DASH
    return "<0.001" if found.p_value < 0.001 else f"{found.p_value:.3f}"


def starred(text: str, row: Row) -> str:
    """A cost of this run only: ``*`` where its memories came from the cache (built earlier)."""
    return text + "*" if row.memories_loaded and text != DASH else text


def fmt_work(counts: dict[str, Any] | None, done: str) -> str:
    """``<done> / requested`` texts over the run's invocations, ``done`` being the count of texts
    the model processed (``encoded``, ``parsed``); "—" where not all are known."""
    if not counts:
        return DASH
    return f"{counts[done]:,} / {counts['requested']:,}"


def fmt_footprint(found: dict[str, Any] | None) -> str:
    """``412 · 18.3k · 96``: items, tokens and kilobytes a memory stores, means per conversation
    (``metrics.json`` ``footprint``), or a dash for runs from before footprints were logged."""
    if not found:
        return DASH
    tokens = fmt_tokens(round(found["tokens"]["mean"]))
    return f"{found['items']['mean']:.0f} · {tokens} · {found['bytes']['mean'] / 1000:.0f}"


def fmt_wall(invocations: dict[str, Any]) -> str:
    """Wall seconds over the run's invocations, with the most worker processes any of them used
    (a run's wall time is comparable with another's only at the same count)."""
    wall = fmt_number(invocations.get("wall_s"), 0)
    workers = invocations.get("workers", 1)
    return f"{wall} ({workers} workers)" if workers > 1 and wall != DASH else wall


def run_cell(row: Row) -> str:
    """The Run cell: the run directory's name, marked :data:`STALE_MARK` where the method's
    source changed since the run was produced (the notes say from what to what)."""
    name = row.run.directory.name
    return f"{name} {STALE_MARK}" if row.source_changed is not None else name


def scope_label(scope: str) -> str:
    """``single_hop`` → ``Single-hop``."""
    return scope.replace("_", "-").capitalize()


def identity_columns(report: Report, rows: Sequence[Row]) -> list[str]:
    """Method, then Backbone and Extraction where the rows differ in them; the setting line states a
    value they share."""
    columns = [f"Method{report.notes.mark('order')}"]
    if len({row.key.backbone for row in rows}) > 1:  # retrieval-only rows have none
        columns.append("Backbone")
    if one_value(r.key.extraction for r in rows) is None and any(r.key.extraction for r in rows):
        columns.append("Extraction")
    return columns


def identity_cells(report: Report, row: Row, columns: Sequence[str]) -> list[str]:
    """A row's identifying cells under ``columns``: its (maybe shortened) method name, with an
    invalid or incomplete row saying so in its first cell."""
    method = short_label(row.key.method)
    if method != row.key.method:
        method += report.notes.mark("labels")
    if row.invalid:
        method += f" INVALID ({row.failed} of {len(row.run.records)} failed)"
    elif row.to_ask_again:
        method += f" INCOMPLETE ({row.to_ask_again} to ask again)"
    if row.run.partial:
        method += f" PARTIAL ({len(row.run.records)} done)"
    cells = [method]
    if "Backbone" in columns:
        cells.append(row.key.backbone or DASH)
    if "Extraction" in columns:
        cells.append(row.key.extraction or DASH)
    return cells


def judge_scores(report: Report) -> list[str]:
    """The table's judge columns: ``judge_acc`` (the dataset's protocol), then the others."""
    return [name for name in report.scores if name.startswith("judge_acc")]


def judge_label(score: str) -> str:
    """``J`` for the dataset's own protocol, ``J <protocol>`` for the others."""
    return "J" if score == "judge_acc" else f"J {score.removeprefix(OTHER_JUDGE_PREFIX)}"


def score_cell(row: Row, scope: str, name: str) -> str:
    """A score cell; a dash for a judge score whose judge does not discriminate."""
    if name in row.hidden_judges:
        return DASH
    return fmt_cell(row.scores[scope][name])


@dataclass(frozen=True)
class Column:
    """One column of a report table: its header, the key of the note its header marks (none:
    unmarked), and its cell for a row."""

    label: str
    cell: Callable[[Row], str]
    note: str = ""

    def marked(self, note: str) -> Column:
        """The same column, its header marking ``note``."""
        return dataclasses.replace(self, note=note)


def layout(
    report: Report, title: str, rows: Sequence[Row], columns: Sequence[Column], **text: Any
) -> Table:
    """The one table layout: the rows' identifying columns, then ``columns``, each header with the
    marker of its note."""
    identity = identity_columns(report, rows)
    header = [f"{column.label}{report.notes.mark(column.note)}" for column in columns]
    body = [
        [*identity_cells(report, row, identity), *(column.cell(row) for column in columns)]
        for row in rows
    ]
    return section(title, identity, header, body, **text)


def stage_cost(stage: str, label: str, *, tokens: bool = False) -> Column:
    """LLM calls of one stage, or with ``tokens`` its prompt and completion tokens (in thousands
    above 10,000); construction's starred: this run's memories only."""

    def cell(row: Row) -> str:
        spent = row.costs[stage]
        total = spent["prompt_tokens"] + spent["completion_tokens"]
        text = fmt_tokens(total) if tokens else str(spent["calls"])
        return starred(text, row) if stage == "construction" else text

    return Column(label, cell)


CONSTRUCTION_S = Column(
    "Construction (s)",
    lambda row: starred(fmt_number(row.invocations.get("construction_s"), 0), row),
)
WALL = Column("Wall (s)", lambda row: starred(fmt_wall(row.invocations), row))
EMBEDDED = Column(
    "Texts embedded / asked",
    lambda row: starred(fmt_work(row.invocations.get("embedding"), "encoded"), row),
)
PARSED = Column(
    "Texts parsed / asked",
    lambda row: starred(fmt_work(row.invocations.get("parsing"), "parsed"), row),
)
RUN = Column("Run", run_cell)
FOOTPRINT = Column(
    "Memory: items · tok · KB",
    lambda row: fmt_footprint(row.run.metrics.get("footprint")),
    "footprint",
)
ALL_EVIDENCE = Column("All ev.", lambda row: fmt_number(row.all_evidence_share), "evidence")
CONTEXT_TOKENS = Column("Ctx tok", lambda row: fmt_number(row.context_tokens, 0), "tokens")
BUDGET_USED = Column("Budget used", lambda row: fmt_number(budget_used(row), 2))
#: What the reader was shown (Overall's first columns, the retrieval table's all).
RETRIEVAL_COLUMNS = (
    Column("Ev. recall", lambda row: fmt_cell(row.evidence_recall), "evidence"),
    ALL_EVIDENCE,
    Column("Ans. cov.", lambda row: fmt_cell(row.answer_coverage["overall"]), "coverage"),
    CONTEXT_TOKENS,
    BUDGET_USED,
)


def judge_column(name: str) -> Column:
    """One judge's overall column (a dash where the judge does not discriminate)."""
    return Column(judge_label(name), lambda row: score_cell(row, "overall", name), "judge")


def answer_columns(report: Report, judges: Sequence[str]) -> list[Column]:
    """How a row answered: F1, BLEU-1, each judge (of ``judges``), the p-value."""
    metric = report.metric
    return [
        Column("F1", lambda row: fmt_cell(row.scores["overall"][metric]), "f1"),
        Column("BLEU-1", lambda row: fmt_cell(row.scores["overall"]["bleu1"]), "bleu"),
        *(judge_column(name) for name in judges),
        Column("p", lambda row: fmt_p(row, metric), "p"),
    ]


def overall_table(report: Report) -> Table:
    """Answered rows: what the reader was shown, then how it answered, and the p-value."""
    columns = [*RETRIEVAL_COLUMNS, *answer_columns(report, judge_scores(report))]
    return layout(report, "Overall", report.answered, columns)


def per_category_table(
    report: Report, label: str, cell: Callable[[Row, str], str], all_evidence: bool
) -> Table | None:
    """Answered rows: one number per category (``cell(row, scope)``) and, with ``all_evidence``, the
    all-evidence questions; None where every cell is a dash."""
    counts = questions_per_category(report.rows, report.categories)
    scopes = [*report.categories, *(["all_evidence"] if all_evidence else [])]
    if all(cell(row, scope) == DASH for row in report.answered for scope in scopes):
        return None
    columns = [
        Column("All ev. shown", lambda row: cell(row, "all_evidence"), "evidence")
        if scope == "all_evidence"
        else Column(f"{scope_label(scope)} (n={counts[scope]})", lambda row, s=scope: cell(row, s))
        for scope in scopes
    ]
    return layout(report, f"{label} per category", report.answered, columns)


def category_tables(report: Report) -> list[Table]:
    """Answered rows per category: F1, BLEU-1 and J (with the all-evidence questions), and
    answer coverage, one table each; a table of dashes is left out."""
    tables = [
        per_category_table(
            report, label, lambda row, scope, name=name: score_cell(row, scope, name), True
        )
        for name, label in ((report.metric, "F1"), ("bleu1", "BLEU-1"), ("judge_acc", "J"))
    ]
    tables.append(
        per_category_table(
            report,
            "Ans. cov.",
            lambda row, scope: fmt_cell(row.answer_coverage.get(scope)),
            False,
        )
    )
    return [table for table in tables if table is not None]


def costs_table(report: Report) -> Table:
    """Answered rows: LLM calls and tokens per stage, construction time, answer latency, run."""
    columns = [
        stage_cost("construction", "Constr. calls").marked("costs"),
        stage_cost("answering", "Answer calls"),
        stage_cost("judging", "Judge calls"),
        stage_cost("construction", "Constr. tokens", tokens=True),
        stage_cost("answering", "Answer tokens", tokens=True),
        stage_cost("judging", "Judge tokens", tokens=True),
        CONSTRUCTION_S,
        Column("Answer latency p50 / p95 (s)", lambda row: fmt_percentiles(row.answer_latency)),
        RUN,
    ]
    return layout(report, "Costs", report.answered, columns)


def retrieval_costs_table(report: Report) -> Table:
    """Retrieval-only rows: what building and searching their memories cost, and the run."""
    columns = [
        stage_cost("construction", "Construction LLM calls").marked("costs"),
        CONSTRUCTION_S,
        EMBEDDED,
        PARSED,
        Column("Retrieve p50 / p95 (s)", lambda row: fmt_percentiles(row.retrieve_latency)),
        WALL,
        Column("Peak RSS (MB)", lambda row: fmt_number(row.invocations.get("peak_rss_mb"), 0)),
        FOOTPRINT,
        RUN,
    ]
    return layout(report, "Retrieval costs", report.retrieval_only, columns)


#: The audited table's scores: its column label, and the row's published value where no
#: audit could be loaded (the overall cell every other table shows).
AUDITED_LABELS = {
    "evidence_recall": "Ev. recall",
    "answer_coverage": "Ans. cov.",
    "f1_locomo": "f1_locomo",
}


def audited(name: str, part: str, label: str, note: str = "") -> Column:
    """A row's ``part`` (``published``, ``audited`` or ``delta``) of ``name`` over the questions
    both keys score; without an audit, the published overall mean and dashes."""

    def cell(row: Row) -> str:
        if row.audited is None:
            return fmt_number(published_only(row, name)) if part == "published" else DASH
        found = row.audited[name]
        return fmt_delta(found.delta) if part == "delta" else fmt_number(getattr(found, part))

    return Column(label, cell, note)


def audited_table(report: Report) -> Table:
    """Every row under LoCoMo's published key and the audited one, side by side (the F1 columns
    only where some row answered); dashes where the audit's files are missing."""
    names = [name for name in AUDITED_SCORES if name != "f1_locomo" or report.answered]
    columns = [
        audited(name, part, label)
        for name in names
        for part, label in (
            ("published", f"{AUDITED_LABELS[name]} pub"),
            ("audited", f"{AUDITED_LABELS[name]} aud"),
            ("delta", "Δ"),
        )
    ]
    mark = report.notes.mark
    ceiling = f"; the published key's ceiling{mark('ceiling')}" if mark("ceiling") else ""
    caption = [
        "pub: LoCoMo's published key (every other table's); aud: the audit's "
        f"key{mark('audit')}; Δ = aud − pub over the same questions{ceiling}."
    ]
    return layout(report, "Published vs audited key", report.rows, columns, caption=caption)


def judge_p(row: Row) -> str:
    """The p-value on judge accuracy, a dash where the judge does not discriminate (its J
    cells are dashes: a test on its verdicts would test nothing)."""
    return DASH if "judge_acc" in row.hidden_judges else fmt_p(row, "judge_acc")


def longmemeval_table(report: Report) -> Table:
    """Answered rows: LongMemEval's Table 2, judge accuracy per question type and overall (a
    dash where the judge does not discriminate)."""
    counts = questions_per_category(report.rows, report.categories)

    def accuracy(shown: Callable[[LongMemEvalCells], str]) -> Callable[[Row], str]:
        def cell(row: Row) -> str:
            assert row.longmemeval is not None  # built for every row of a LongMemEval report
            return DASH if "judge_acc" in row.hidden_judges else shown(row.longmemeval)

        return cell

    columns = [
        Column(
            f"{LONGMEMEVAL_TYPES.get(category, scope_label(category))} (n={counts[category]})",
            accuracy(lambda cells, c=category: fmt_cell(cells.per_type.get(c))),
        )
        for category in report.categories
    ]
    columns += [
        Column(
            f"Overall (N={sum(counts.values())})",
            accuracy(lambda cells: fmt_cell(cells.overall)),
            "longmemeval_accuracy",
        ),
        Column("Task-averaged", accuracy(lambda cells: fmt_number(cells.task_averaged))),
        Column("Abstention", accuracy(lambda cells: fmt_cell(cells.abstention))),
        Column("p", judge_p, "p"),
    ]
    title = "LongMemEval accuracy (judge) per question type"
    return layout(report, title, report.answered, columns)


def longmemeval_retrieval_table(report: Report) -> Table:
    """Every row: LongMemEval's session- and turn-level ranking metrics."""

    def ranking(level: str, name: str) -> Callable[[Row], str]:
        return lambda row: fmt_cell(row.longmemeval.retrieval[level][name])  # type: ignore[union-attr]

    columns = []
    for level in RANKING_LEVELS:
        columns += [
            Column(f"{level.capitalize()} {name}", ranking(level, name))
            for name in LONGMEMEVAL_RANKING
        ]
        columns.append(
            Column(f"{level.capitalize()} n", lambda row: str(row.longmemeval.ranked))  # type: ignore[union-attr]
        )
    columns[0] = columns[0].marked("longmemeval_retrieval")
    return layout(report, "LongMemEval retrieval", report.rows, columns)


def judge_repeats_table(report: Report) -> Table | None:
    """Answered rows graded ``judge.repeats`` > 1 times: J as the mean over repeats, its spread
    across repeats, the unanimous share and Fleiss' κ; None where no row repeats."""

    summaries = {id(row): own_repeats(row) for row in report.answered}  # once per row

    def cell(name: str, digits: int = 3) -> Callable[[Row], str]:
        return lambda row: fmt_number((summaries[id(row)] or {}).get(name), digits)

    rows = [row for row in report.answered if summaries[id(row)]]
    if not rows:
        return None

    def temperature(row: Row) -> str:
        sampled = repeat_temperature(row.run)
        return "protocol's" if sampled is None else str(sampled)

    columns = [
        Column("Repeats", cell("repeats", 0), "judge_repeats"),
        Column("Answers", cell("answers", 0)),
        Column("J (mean of repeats)", cell("mean")),
        Column("Std across repeats", cell("std")),
        Column("Unanimous", cell("unanimous")),
        Column("Fleiss κ", cell("fleiss_kappa")),
        Column("Temperature", temperature),
    ]
    return layout(report, "Judge repeats", rows, columns)


def protocol_agreement_table(report: Report) -> Table | None:
    """Every pair of judge protocols over the answered rows' answers graded by both (first
    repeat): answers, raw agreement, Cohen's κ; None with fewer than two protocols."""
    records = [record for row in report.answered for record in row.run.records]
    pairs = protocol_agreement(records)
    if not pairs:
        return None
    body = [
        [
            " vs ".join(pair["protocols"]),
            str(pair["answers"]),
            fmt_number(pair["agreement"]),
            fmt_number(pair["cohen_kappa"]),
        ]
        for pair in pairs
    ]
    header = [f"Answers{report.notes.mark('protocol_agreement')}", "Agreement", "Cohen's κ"]
    return section("Judge protocol agreement", ["Protocols"], header, body)


def sections(report: Report) -> list[Table]:
    """The tables of md and tex, in order, leaving out empty ones: what the rows measure, the two
    keys on LoCoMo, then costs."""
    found = []
    if report.answered:
        found.append(overall_table(report))
        if report.dataset.longmemeval_scores:
            found.append(longmemeval_table(report))
        else:
            found += category_tables(report)
    if report.dataset.longmemeval_scores and any(ranked(row) for row in report.rows):
        found.append(longmemeval_retrieval_table(report))
    if report.retrieval_only:
        rows = report.retrieval_only  # what the reader would have been shown
        found.append(layout(report, "Retrieval only (answer=none)", rows, RETRIEVAL_COLUMNS))
    if report.audit is not None:
        found.append(audited_table(report))
    if report.answered:
        judges = [judge_repeats_table(report), protocol_agreement_table(report)]
        found += [table for table in judges if table is not None]
        found.append(costs_table(report))
    if report.retrieval_only:
        found.append(retrieval_costs_table(report))
    return found
