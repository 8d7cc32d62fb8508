"""The published cells: each paper's ``results/published/<paper>.yaml`` read, how the paper
measured (:class:`Measured`), and the cells the grid measures, each once, with a count of the cells
left out and why."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import yaml

from benchmarks import registry
from benchmarks.published.grid import Entry
from memsys.types import LONGMEMEVAL_CATEGORIES

#: Published metric names → (harness score, the printed scale: 100 for percent). ``f1`` is the
#: paper's own F1 scorer (:attr:`Measured.f1`).
METRICS = {
    "F1": ("f1", 100.0),
    "BLEU-1": ("bleu1", 100.0),
    "BLEU-1 (fraction)": ("bleu1", 1.0),
    "J": ("judge_acc", 100.0),
    "ACC": ("judge_acc", 100.0),
}


@dataclass(frozen=True)
class Measured:
    """How a paper measured its numbers where papers differ (its published file's ``paper.measured``
    block), which each measured run is compared with."""

    #: The paper's id (:func:`benchmarks.registry.papers`).
    id: str
    #: The harness scorer computing the paper's F1.
    f1: str
    #: Whether LoCoMo's Overall counts the adversarial questions: ``include`` or ``exclude``.
    adversarial: str
    #: The order the paper hands the reader its context in, where it says (None: not stated).
    order: str | None
    #: The model that builds the memory, where it is not the reader.
    builder: str | None
    embedder: str
    budget: str

    @property
    def label(self) -> str:
        """The method's name as the paper spells it."""
        return registry.papers()[self.id].name


def how_measured() -> dict[str, Measured]:
    """How each paper of :func:`benchmarks.registry.papers` measured, by paper id."""
    return {paper.id: measured_of(paper) for paper in registry.papers().values()}


def measured_of(paper: registry.Paper) -> Measured:
    """The paper's ``paper.measured`` block, checked; errors name the file."""
    block = paper.header.get("measured")
    keys = [field.name for field in fields(Measured) if field.name != "id"]
    if not isinstance(block, dict) or sorted(block) != sorted(keys):
        raise ValueError(f"{paper.published}: paper.measured needs exactly {keys}")
    if block["adversarial"] not in ("include", "exclude"):
        raise ValueError(f"{paper.published}: paper.measured.adversarial: include or exclude")
    if block["order"] not in (None, "time", "rank"):
        raise ValueError(f"{paper.published}: paper.measured.order: time, rank or null")
    return Measured(paper.id, **block)


@dataclass(frozen=True)
class PublishedCell:
    """One published table cell the harness can measure, with the grid entry standing for it."""

    paper: Measured
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


def read_papers(directory: Path) -> dict[str, dict[str, Any]]:
    """The published file of every paper (:func:`benchmarks.registry.papers`) that
    ``directory`` holds, by the id its header names, in file-name order."""
    files = sorted(
        (path, paper)
        for paper, (path, _) in registry.published_files(directory).items()
        if paper in registry.papers()
    )
    return {paper: yaml.safe_load(path.read_text(encoding="utf-8")) for path, paper in files}


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


def entry_for(result: dict[str, Any], entries: Sequence[Entry]) -> Entry | None:
    """The grid entry standing for a published row: its ``config`` is the entry's method config
    or that config's lite counterpart, and its ``overrides`` hold in the entry."""
    config = result.get("config")
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
    config = result.get("config")
    if config is None:
        return "in rows with no harness config", result["row"]
    if entry_for(result, entries) is None:
        return "in rows whose config is outside the paper grid", str(config)
    return None


def published_cells(
    paper: Measured, document: dict[str, Any], dataset: str, entries: Sequence[Entry]
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
    paper: Measured, result: dict[str, Any], dataset: str, entries: Sequence[Entry]
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
