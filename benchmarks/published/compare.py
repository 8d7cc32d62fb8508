"""What differs between a published cell and its measured run: every setting (reader, memory
builder, judge, subset, data, adversarial policy, context order, budget, embedder, prompt) in
which the run obtained its number otherwise than the paper."""

from __future__ import annotations

from collections.abc import Callable

from omegaconf import OmegaConf

from benchmarks.data.specs import spec_of
from benchmarks.metrics.judge import PROTOCOLS
from benchmarks.papers.models import SAME_MODEL
from benchmarks.published.cells import PublishedCell
from benchmarks.runs.conditions import data_keys
from benchmarks.runs.folders import Run, lookup
from benchmarks.runs.judges import own_protocol
from benchmarks.runs.naming import construction_model, judge_description
from benchmarks.tables.report.header import dataset_description


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
    instruction = PROTOCOLS[own_protocol(run.config)].description
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
    """On Overall, for a dataset with LoCoMo's adversarial category only: whether the
    adversarial questions count, as the paper did."""
    counted = spec_of(run.config).adversarial_category
    policy = run.config.get("adversarial", "exclude")
    if not counted or cell.scope != "overall" or policy == cell.paper.adversarial:
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
