"""``python -m benchmarks.published``: the papers' own numbers beside the paper grid's.

``results/published/<paper>.yaml`` quotes each paper's table cells; ``conf/experiment/
paper_{locomo,longmemeval}.yaml`` runs each method's paper configuration (``conf/paper/``) and the
baselines. This report sets every published cell the harness can measure next to the measured
number and marks each setting in which the two differ, so that a number measured on a subset,
with lite extraction or with other models is never read as the paper's setting. Measured numbers
are recomputed from the runs' files with :mod:`benchmarks.report`'s readers (``load_runs``,
``score_cells``), as the tables are.

Readings taken where the brief leaves a choice:

* **Grid entries** are the ``paper`` sweep of the dataset's experiment config, each composed as
  its runs are. An entry's runs are the finished answered runs that ``load_runs`` selects
  (dataset, subset, ``--where``) whose method has the entry's display name
  (``report.method_name``); of several with one reader, the one with the entry's own settings
  (:data:`ENTRY_KEYS`) is taken, and two such are an error (narrow with ``--where``). A run with
  other settings (lite extraction, another budget) is shown, its differences marked.
* **Published cells** shown are those on the dataset (or one of its categories or question
  types), in a metric the harness computes (:data:`METRICS`), whose ``config`` is an entry's
  method config or its lite counterpart (CAST's file names ``cast`` for the rows the paper
  extracted with an LLM) and whose ``overrides`` the entry satisfies. A cell the paper prints
  again in a later table (CAST's Tables 4-7 repeat its Table 1 configuration) is shown once, from
  the first; the cells left out are counted per paper, with why.
* **Pairing**: a cell is set beside the run whose reader is the paper's model
  (:data:`SAME_MODEL`), or the grid reader standing in for a model no grid backbone serves
  (:data:`STAND_IN`); without such a run its measured cell reads "not run".
* **Scale**: values as the paper prints them (percent; HingeMem's BLEU-1 as a fraction), the
  measured mean, its 95% bootstrap interval and n on the same scale; the intervals resample
  conversations by the tables' rule (``report.score_cells``), and the header says which unit.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, OmegaConf

from benchmarks.data.paths import REPO_ROOT, shown_path
from benchmarks.judge_calibration import own_protocol
from benchmarks.metrics.judge import PROTOCOLS
from benchmarks.report import (
    Cell,
    ReportError,
    Run,
    category_order,
    construction_model,
    data_keys,
    dataset_description,
    differing_keys,
    extraction_description,
    in_repo,
    interval_description,
    judge_description,
    load_runs,
    lookup,
    method_name,
    parse_where,
    run_configs,
    score_cells,
    subset_description,
    unfinished_runs_line,
)
from benchmarks.settings import compose_config
from memsys.types import LONGMEMEVAL_CATEGORIES

PUBLISHED = REPO_ROOT / "results" / "published"
#: The report's dataset → the experiment config holding its paper grid.
GRIDS = {"locomo": "paper_locomo", "longmemeval_s": "paper_longmemeval"}
TITLES = {"locomo": "LoCoMo", "longmemeval_s": "LongMemEval-S"}
#: Settings a run of a grid entry has when it is that entry's run (the paper setting as the
#: harness expresses it); used to pick between runs of one method and reader.
ENTRY_KEYS = (
    "method.extraction",
    "answer.order",
    "adversarial",
    "answer.context_budget",
    "embedder.model",
)
#: Published metric names → (harness score, the printed scale: 100 for percent). ``f1`` is the
#: paper's own F1 scorer (:attr:`Paper.f1`).
METRICS = {
    "F1": ("f1", 100.0),
    "BLEU-1": ("bleu1", 100.0),
    "BLEU-1 (fraction)": ("bleu1", 1.0),
    "J": ("judge_acc", 100.0),
    "ACC": ("judge_acc", 100.0),
}
#: A paper's name for a model → the harness backbone (``backbone.name``) serving that model.
SAME_MODEL = {
    "Qwen2.5-3B": "qwen2.5-3b",
    "Llama3.2-3B": "llama3.2-3b",
    "GPT-4o-mini": "gpt-4o-mini",
    "gpt-4o-mini": "gpt-4o-mini",
}
#: Models no grid backbone serves → the grid reader set beside their numbers (marked as other).
STAND_IN = {"gpt-4o": "gpt-4o-mini"}
NOT_RUN = "not run"


@dataclass(frozen=True)
class Paper:
    """How a paper measured its numbers where papers differ, from its published file's
    ``paper.setting`` and its fidelity card; each measured run is compared with it."""

    label: str
    #: The harness scorer computing the paper's F1.
    f1: str = "f1_set"
    #: Whether LoCoMo's Overall counts the adversarial questions.
    adversarial: str = "exclude"
    #: The order the paper hands the reader its context in, where it says (None: not stated).
    order: str | None = None
    #: The model that builds the memory, where it is not the reader.
    builder: str | None = None
    embedder: str = "not stated"
    budget: str = "none stated"


PAPERS = {
    "es-mem": Paper(
        "ES-Mem",
        order="time",
        embedder="all-MiniLM-L6-v2",
        budget="none stated; top K = 5 or 10 events (Appendix B)",
    ),
    "secom": Paper(
        "SeCom", builder="GPT-4-0125", embedder="multi-qa-mpnet-base-dot-v1", budget="4k tokens"
    ),
    "hingemem": Paper(
        "HingeMem",
        f1="f1_locomo",
        adversarial="include",
        embedder="text-embedding-3-small",
        budget="none; the adaptive stop decides",
    ),
    "fracom": Paper("FraCom", embedder="Sentence-BERT"),
    "cast": Paper(
        "CAST",
        order="rank",
        builder="Llama-3.3-70B-Instruct",
        embedder="text-embedding-3-small",
        budget="none stated; k = 5 passages",
    ),
}


@dataclass(frozen=True, eq=False)
class Entry:
    """One entry of the paper grid (``conf/paper/<name>.yaml``), composed as its runs are."""

    name: str
    config: DictConfig

    @property
    def method_config(self) -> str:
        """The ``conf/method`` config the entry selects."""
        return str(self.config.hydra.runtime.choices.method)

    @cached_property
    def method(self) -> str:
        """The method's display name, as report rows name it."""
        node = OmegaConf.to_container(self.config.method, resolve=True)
        assert isinstance(node, dict)
        return method_name(node)

    def setting(self, key: str) -> Any:
        """A resolved value of the entry's config."""
        return OmegaConf.select(self.config, key)


@dataclass(frozen=True)
class PublishedCell:
    """One published table cell the harness can measure, with the grid entry standing for it."""

    paper: Paper
    entry: Entry
    table: str
    row: str
    column: str
    value: float
    backbone: str
    judge: str
    score: str
    scale: float
    #: ``overall``, or the harness's category (LoCoMo) or question type (LongMemEval).
    scope: str


@dataclass(frozen=True)
class Line:
    """A published cell beside its measured counterpart and what differs between them."""

    cell: PublishedCell
    run: Run | None
    measured: Cell | None
    differences: tuple[str, ...]


@dataclass
class PaperReport:
    """What the writer needs: header lines, the lines, the grid's runs, what was left out."""

    title: str
    header: list[str]
    lines: list[Line]
    runs: dict[Entry, dict[str, Run]]
    left_out: list[str]


# ---------------------------------------------------------------------------------------------
# The grid


def compose_grid_config(overrides: Sequence[str]) -> DictConfig:
    """The runner's config for ``overrides``, with Hydra's (for the group choices)."""
    return compose_config(overrides, with_hydra=True)


def grid_entries(dataset: str) -> list[Entry]:
    """The entries of the dataset's paper grid, in sweep order."""
    if dataset not in GRIDS:
        raise ReportError(f"--dataset must be one of {list(GRIDS)}, got {dataset!r}")
    experiment = f"+experiment={GRIDS[dataset]}"
    sweep = compose_grid_config([experiment]).hydra.sweeper.params.paper
    names = [name.strip() for name in str(sweep).split(",")]
    return [Entry(name, compose_grid_config([experiment, f"paper={name}"])) for name in names]


def entry_runs(entry: Entry, runs: Sequence[Run]) -> dict[str, Run]:
    """The entry's run per reader (``backbone.name``)."""
    readers: dict[str, list[Run]] = defaultdict(list)
    for run in runs:
        answered = lookup(run.config, "answer.template", None) is not None
        if answered and method_name(run.config.get("method", {})) == entry.method:
            readers[str(lookup(run.config, "backbone.name", "?"))].append(run)
    return {reader: pick_run(entry, reader, group) for reader, group in readers.items()}


def setting_differences(entry: Entry, run: Run) -> list[str]:
    """The :data:`ENTRY_KEYS` in which a run differs from its grid entry."""
    return [key for key in ENTRY_KEYS if lookup(run.config, key, None) != entry.setting(key)]


def pick_run(entry: Entry, reader: str, group: Sequence[Run]) -> Run:
    """The one run of the entry with this reader; the entry's own settings win a tie, and a tie
    they do not break is an error rather than a silent pick."""
    if len(group) > 1:
        group = [run for run in group if not setting_differences(entry, run)] or group
    if len(group) > 1:
        first, second = group[0], group[1]
        keys = ", ".join(differing_keys(first.config, second.config)) or "nothing"
        raise ReportError(
            f"runs {first.directory.name} and {second.directory.name} both stand for paper "
            f"entry {entry.name} with reader {reader}; their configs differ in {keys} (narrow "
            "with --where KEY=VALUE)"
        )
    return group[0]


# ---------------------------------------------------------------------------------------------
# Published cells


def read_papers(directory: Path) -> dict[str, dict[str, Any]]:
    """Every published file with a :data:`PAPERS` entry, by file name (``es-mem``)."""
    return {
        path.stem: yaml.safe_load(path.read_text(encoding="utf-8"))
        for path in sorted(directory.glob("*.yaml"))
        if path.stem in PAPERS
    }


def scope_of(setting: dict[str, Any], dataset: str) -> str | None:
    """The harness scope of a published cell on ``dataset`` (``overall``, a category or question
    type), or None when the cell is on another dataset."""
    category = setting.get("category")
    question_type = setting.get("question_type")
    name = str(setting.get("dataset"))
    if name == dataset:
        if question_type:
            return LONGMEMEVAL_CATEGORIES.get(question_type, question_type)
        return category or "overall"
    return category if name.startswith(f"{dataset}_") and category else None


def holds(override: str, entry: Entry) -> bool:
    """Whether a published row's override (``group=option`` or ``key=value``) is the entry's."""
    key, _, value = override.partition("=")
    choice = entry.config.hydra.runtime.choices.get(key)
    if choice is not None:
        return str(choice) == value
    return entry.setting(key) == yaml.safe_load(value)


def row_config(result: dict[str, Any]) -> str | None:
    """The harness config a published row names (beside its setting, or inside it)."""
    return result.get("config") or result["setting"].get("config")


def entry_for(result: dict[str, Any], entries: Sequence[Entry]) -> Entry | None:
    """The grid entry standing for a published row: its ``config`` is the entry's method config
    or that config's lite counterpart, and its ``overrides`` hold in the entry."""
    config = row_config(result)
    overrides = result.get("overrides") or []
    for entry in entries:
        names = {entry.method_config, entry.method_config.removesuffix("_llm")}
        if config in names and all(holds(override, entry) for override in overrides):
            return entry
    return None


def left_out_reason(
    result: dict[str, Any], dataset: str, entries: Sequence[Entry]
) -> tuple[str, str] | None:
    """Why a published cell cannot be shown (a reason and the value behind it), or None."""
    setting = result["setting"]
    if scope_of(setting, dataset) is None:
        return "on other datasets", str(setting.get("dataset"))
    if setting.get("metric") not in METRICS:
        return "in metrics the harness does not compute", str(setting.get("metric"))
    config = row_config(result)
    if config is None:
        return "in rows with no harness config", result["row"]
    if entry_for(result, entries) is None:
        return "in rows whose config is outside the paper grid", str(config)
    return None


def published_cells(
    paper: Paper, document: dict[str, Any], dataset: str, entries: Sequence[Entry]
) -> tuple[list[PublishedCell], str]:
    """The paper's cells the grid measures on ``dataset``, each once, and a line saying how many
    cells were left out and why."""
    cells: dict[tuple[Any, ...], PublishedCell] = {}
    reasons: dict[str, Counter[str]] = defaultdict(Counter)
    repeated = 0
    for result in document["results"]:
        reason = left_out_reason(result, dataset, entries)
        if reason is not None:
            reasons[reason[0]][reason[1]] += 1
            continue
        cell = published_cell(paper, result, dataset, entries)
        key = (cell.entry.name, cell.backbone, result["setting"]["metric"], cell.scope)
        repeated += key in cells
        cells.setdefault(key, cell)
    total = len(document["results"])
    parts = [f"{sum(c.values())} {why} ({named(c)})" for why, c in reasons.items()]
    if repeated:
        parts.append(f"{repeated} printed again in a later table")
    line = f"{paper.label}: {len(cells)} of {total} cells shown" + (
        f"; left out: {'; '.join(parts)}" if parts else ""
    )
    return list(cells.values()), line


def named(counts: Counter[str], shown: int = 6) -> str:
    """The first ``shown`` names of ``counts`` (sorted), and how many more there are."""
    names = sorted(counts)
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


def published_cell(
    paper: Paper, result: dict[str, Any], dataset: str, entries: Sequence[Entry]
) -> PublishedCell:
    """A measurable published row as a :class:`PublishedCell`."""
    setting = result["setting"]
    score, scale = METRICS[setting["metric"]]
    entry = entry_for(result, entries)
    scope = scope_of(setting, dataset)
    assert entry is not None and scope is not None  # left_out_reason has passed the row
    return PublishedCell(
        paper=paper,
        entry=entry,
        table=result["table"],
        row=result["row"],
        column=result["column"],
        value=float(result["value"]),
        backbone=str(setting["backbone"]),
        judge=str(setting["judge"]),
        score=paper.f1 if score == "f1" else score,
        scale=scale,
        scope=scope,
    )


# ---------------------------------------------------------------------------------------------
# What differs between a published cell and its measured counterpart


def reader_difference(cell: PublishedCell, run: Run) -> str | None:
    """The model that answered, unless it is the paper's (by :data:`SAME_MODEL`)."""
    reader = lookup(run.config, "backbone.name", "?")
    if SAME_MODEL.get(cell.backbone) == reader:
        return None
    return f"reader {reader} (paper: {cell.backbone})"


def memory_difference(cell: PublishedCell, run: Run) -> str | None:
    """Lite extraction, or an LLM builder other than the paper's (its own, else its reader)."""
    mode = lookup(run.config, "method.extraction", None)
    if mode is None:  # a baseline: nothing is extracted
        return None
    if mode != "llm":
        return f"{mode} extraction, no LLM (paper: an LLM builds the memory)"
    builder = cell.paper.builder or cell.backbone
    measured = construction_model(run.config) or "?"
    if measured == SAME_MODEL.get(builder, builder):
        return None
    return f"memory built by {measured} (paper: {builder})"


def judge_difference(cell: PublishedCell, run: Run) -> str | None:
    """On judged cells: the harness's judge and instruction are never the paper's own."""
    if cell.score != "judge_acc":
        return None
    judge = judge_description(run.config.get("judge"))
    instruction = PROTOCOLS[own_protocol(run.config)][1]
    return f"judge {judge}, {instruction} (paper: {cell.judge})"


def subset_difference(cell: PublishedCell, run: Run) -> str | None:
    """Any cap on the questions: the papers score every question of the dataset."""
    subset = run.config.get("subset", {})
    caps = {key: value for key, value in subset.items() if key != "name" and value is not None}
    if not caps:
        return None
    shown = ", ".join(f"{key}={value}" for key, value in caps.items())
    return f"subset {subset.get('name')} ({shown}): NOT the paper's, which uses every question"


def dataset_difference(cell: PublishedCell, run: Run) -> str | None:
    """Another data file than the grid's (the tiny test fixture, say); the judge protocol is the
    judge's difference, not the data's."""
    grid = OmegaConf.to_container(cell.entry.config.dataset, resolve=True)
    assert isinstance(grid, dict)
    measured = run.config.get("dataset", {})
    if data_keys(measured) == data_keys(grid):
        return None
    return f"dataset {dataset_description(measured)} (paper: {dataset_description(grid)})"


def adversarial_difference(cell: PublishedCell, run: Run) -> str | None:
    """On LoCoMo's Overall only: whether the adversarial questions count, as the paper did."""
    on_locomo = lookup(run.config, "dataset.name", None) == "locomo"
    policy = run.config.get("adversarial", "exclude")
    if not on_locomo or cell.scope != "overall" or policy == cell.paper.adversarial:
        return None
    return f"adversarial questions {policy}d in Overall (paper: {cell.paper.adversarial}d)"


def order_difference(cell: PublishedCell, run: Run) -> str | None:
    """The order the reader saw its context in, where the paper states one."""
    order = lookup(run.config, "answer.order", "time")
    if cell.paper.order is None or order == cell.paper.order:
        return None
    return f"context order {order} (paper: {cell.paper.order})"


def budget_difference(cell: PublishedCell, run: Run) -> str | None:
    """Always: the harness counts a budget in its own tokens, the papers state theirs or none."""
    budget = lookup(run.config, "answer.context_budget", "?")
    return f"context budget {budget} harness tokens (paper: {cell.paper.budget})"


def embedder_difference(cell: PublishedCell, run: Run) -> str | None:
    """The retrieval embedder, unless it is the paper's model."""
    model = str(lookup(run.config, "embedder.model", "?"))
    if model.rsplit("/", 1)[-1] == cell.paper.embedder:
        return None
    return f"embedder {model} (paper: {cell.paper.embedder})"


def prompt_difference(cell: PublishedCell, run: Run) -> str | None:
    """Always: every method is answered by the harness's shared reader prompt."""
    template = lookup(run.config, "answer.template", "?")
    return f"reader prompt: the harness's {template} template (paper: its own)"


DIFFERENCES: tuple[Callable[[PublishedCell, Run], str | None], ...] = (
    reader_difference,
    memory_difference,
    judge_difference,
    subset_difference,
    dataset_difference,
    adversarial_difference,
    order_difference,
    budget_difference,
    embedder_difference,
    prompt_difference,
)


def differences(cell: PublishedCell, run: Run) -> tuple[str, ...]:
    """Every setting in which the run measured its number otherwise than the paper."""
    return tuple(found for check in DIFFERENCES if (found := check(cell, run)) is not None)


# ---------------------------------------------------------------------------------------------
# Building the report


def paired_run(cell: PublishedCell, runs: dict[str, Run]) -> Run | None:
    """The entry's run with the paper's reader, or with the grid reader standing in for it."""
    reader = SAME_MODEL.get(cell.backbone) or STAND_IN.get(cell.backbone)
    return runs.get(reader) if reader else None


def find_runs(
    runs_dir: Path,
    dataset: str,
    subset: str,
    where: dict[str, Any],
    configs: dict[Path, dict[str, Any]],
) -> tuple[list[Run], str | None]:
    """The finished runs the filters select, or none and why (the report still shows the
    published numbers); ``configs`` is ``run_configs(runs_dir)``."""
    try:
        return load_runs(runs_dir, dataset, subset, where, configs), None
    except ReportError as error:
        return [], f"No measured numbers: {error}"


def build_paper_report(
    runs_dir: Path,
    *,
    dataset: str = "locomo",
    subset: str = "full",
    where: dict[str, Any] | None = None,
    published_dir: Path = PUBLISHED,
) -> PaperReport:
    """Pair every measurable published cell with its grid run and what differs."""
    where = where or {}
    entries = grid_entries(dataset)
    configs = run_configs(runs_dir)  # one read serves the runs and the unfinished-runs note
    runs, missing = find_runs(runs_dir, dataset, subset, where, configs)
    grid_runs = {entry: entry_runs(entry, runs) for entry in entries}
    scores = {
        run.directory: score_cells(run, category_order([run]))
        for readers in grid_runs.values()
        for run in readers.values()
    }
    lines, left_out = [], []
    for stem, document in read_papers(published_dir).items():
        cells, summary = published_cells(PAPERS[stem], document, dataset, entries)
        left_out.append(summary)
        for cell in cells:
            run = paired_run(cell, grid_runs[cell.entry])
            found = scores[run.directory].get(cell.scope, {}).get(cell.score) if run else None
            lines.append(Line(cell, run, found, differences(cell, run) if run else ()))
    notes = [missing, unfinished_runs_line(configs, dataset, subset, where)]
    measured = [line.measured for line in lines if line.measured is not None]
    intervals = interval_description(measured, "conversation", dataset.startswith("longmemeval"))
    header = header_lines(dataset, subset, where, runs_dir, intervals)
    header += [note for note in notes if note]
    title = f"{TITLES[dataset]}: published numbers beside the paper grid"
    return PaperReport(title, header, lines, grid_runs, left_out)


def header_lines(
    dataset: str, subset: str, where: dict[str, Any], runs_dir: Path, intervals: str
) -> list[str]:
    """What the report compares, and how to read a line; ``intervals`` is
    :func:`benchmarks.report.interval_description` of the measured cells."""
    filters = "".join(f", {key}={value!r}" for key, value in where.items())
    return [
        f"Published: every cell of results/published/*.yaml measured by the paper grid "
        f"(conf/experiment/{GRIDS[dataset]}.yaml), values as the paper prints them",
        f"Measured: recomputed from predictions.jsonl of the finished runs in "
        f"{shown_path(runs_dir)} (dataset {dataset}, subset {subset}{filters}): mean [95% "
        "bootstrap CI] (n questions), on the paper's scale (percent, or a fraction where the "
        "paper prints one)",
        f"Intervals: {intervals}, as in the tables",
        "Scores: F1 → f1_set (A-Mem/mem0 set F1; HingeMem's is LoCoMo's own, f1_locomo), "
        "BLEU-1 → bleu1, J and ACC → judge_acc",
        "Reader = the backbone that answers; Memory = the extraction mode and, for llm, the model "
        "that built the memory; Subset = the questions the run asked",
        "≠ lists every setting in which the measured number was obtained otherwise than the "
        "paper's; a number on a subset or with lite extraction is not the paper's setting",
    ]


# ---------------------------------------------------------------------------------------------
# Writing


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
    longmemeval = lookup(run.config, "dataset.name", None) == "longmemeval"
    return [
        str(lookup(run.config, "backbone.name", "?")),
        extraction_description(run.config) or "none (baseline)",
        subset_description(run.config.get("subset", {}), longmemeval),
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


def markdown_table(header: list[str], rows: list[list[str]]) -> list[str]:
    """A markdown table's lines."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(cells) + " |" for cells in rows]


def render_paper_markdown(report: PaperReport) -> str:
    """The report as markdown: header, published beside measured, the grid's runs, left out."""
    lines = [f"# {report.title}", "", *(f"- {line}" for line in report.header), ""]
    lines += ["## Published beside measured", ""]
    lines += markdown_table(PUBLISHED_HEADER, published_table(report))
    lines += ["", "## The paper grid's runs", ""]
    lines += markdown_table(RUNS_HEADER, runs_table(report))
    lines += ["", "## Published cells not shown", "", *(f"- {line}" for line in report.left_out)]
    return "\n".join(lines) + "\n"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.published", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--runs", type=Path, default=Path("results/runs"))
    parser.add_argument("--dataset", default="locomo", choices=list(GRIDS))
    parser.add_argument("--subset", default="full")
    parser.add_argument("--out", type=Path, help="default results/paper_locomo, paper_longmemeval")
    parser.add_argument(
        "--where",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="keep runs whose config.yaml has this value, e.g. judge.backbone.name=gpt-4o-mini",
    )
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


if __name__ == "__main__":
    sys.exit(main())
