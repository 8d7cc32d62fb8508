"""Segmentation runs as data: each finished test-split run's ``labels.jsonl`` rescored against
the references with the runner's scorer and bootstrap (a row per segmenter, extraction mode and
backbone, a cell per dataset), and the quoted row of a paper that measures what a run measures.
The segmentation table (:mod:`benchmarks.tables.segmentation`) lays the cells out and words them;
the readings taken are in docs/tables.md ("Segmentation table: readings taken")."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from benchmarks.config.compose import compose_config
from benchmarks.data import load_segmentation
from benchmarks.papers.models import SAME_MODEL
from benchmarks.papers.segmentation import QuotedRow
from benchmarks.pipeline.packed import LABELS, predictions_file
from benchmarks.pipeline.segment import fell_back, summarize, total_cost
from benchmarks.runs.folders import ReportError, is_finished, read_records, run_configs
from memsys.methods.secom.reflection import ReflectionConfig

#: Table 4's dataset order and display names.
DATASETS = {"dialseg711": "DialSeg711", "superdialseg": "SuperDialSeg", "tiage": "TIAGE"}
#: A row is marked FALLBACK when at least this share of its dialogues fell back.
FALLBACK_MARK_SHARE = 0.5
#: Display names, in the table's row order.
SEGMENTER_NAMES = {
    "TextTilingSegmenter": "TextTiling (utterance-level, dev-tuned)",
    "SuperDialSegTextTilingSegmenter": "TextTiling (SuperDialSeg: NLTK w=10, k=6)",
    "EmbeddingSegmenter": "Embedding similarity",
    "ESMemSegmenter": "ES-Mem segmentation",
    "SeComSegmenter": "SeCom segmentation",
}
TOKENS = ("prompt_tokens", "completion_tokens")


@dataclass(frozen=True)
class RowKey:
    """Where a run lands in the table: segmenter display name (with the split reflected on),
    extraction mode, backbone (LLM rows only)."""

    label: str
    mode: str
    backbone: str


@dataclass(frozen=True)
class MeasuredCell:
    """One row × dataset: the scores recomputed from one run's labels."""

    key: RowKey
    dataset: str
    n: int
    n_split: int
    scores: dict[str, Any]
    cost: dict[str, float]
    run_dir: Path
    fallback_dialogues: int = 0
    substitutes: tuple[str, ...] = ()
    reflection: ReflectionConfig | None = None
    training: dict[str, Any] | None = None
    #: The run's resolved ``segmenter`` node (its ``config.yaml``), for pairing with a quoted row.
    segmenter_node: dict[str, Any] = field(default_factory=dict)

    @property
    def marked(self) -> bool:
        """Whether enough dialogues fell back that the row must say so."""
        return self.fallback_dialogues >= FALLBACK_MARK_SHARE * self.n

    @property
    def rubric(self) -> list[str]:
        """The rubric a reflection run learned (its ``training.json``)."""
        return list(((self.training or {}).get("guidance") or {}).get("rubric", []))


def reflection_config(config: dict[str, Any]) -> ReflectionConfig | None:
    """A run's reflection settings when reflection is on (``None`` otherwise)."""
    node = config.get("segmenter", {}).get("reflection") or {}
    if not node.get("enabled"):
        return None
    return ReflectionConfig(**{key: value for key, value in node.items() if key != "_target_"})


def row_key(config: dict[str, Any]) -> RowKey:
    """A run's row: its segmenter's display name (and the split reflected on), its extraction
    mode, and its backbone for an LLM row."""
    segmenter = config.get("segmenter", {})
    cls = str(segmenter.get("_target_", "?")).rsplit(".", 1)[-1]
    name = SEGMENTER_NAMES.get(cls, cls)
    if (reflection := reflection_config(config)) is not None:
        name += f" + reflection ({DATASETS.get(reflection.dataset, reflection.dataset)} "
        name += f"{reflection.split})"
    mode = str(segmenter.get("extraction", "lite"))
    backbone = str(config.get("backbone", {}).get("name", "?")) if mode == "llm" else ""
    return RowKey(name, mode, backbone)


def measure_run(directory: Path, config: dict[str, Any], data_dir: Path, seed: int) -> MeasuredCell:
    """Rescore one run's labels against the references, in the split's order."""
    dataset = config["dataset"]["name"]
    references = load_segmentation(dataset, config["dataset"]["split"], data_dir)
    records = {
        str(record["id"]): record for record in read_records(predictions_file(directory, LABELS))
    }
    if unknown := set(records) - {d.dialogue_id for d in references}:
        raise ReportError(f"{directory}: ids not in {dataset}: {sorted(unknown)[:5]}")
    scored = [d for d in references if d.dialogue_id in records]
    if not scored:
        raise ReportError(f"{directory}: no labelled dialogue")
    ordered = [records[d.dialogue_id] for d in scored]
    total = total_cost(ordered)
    fallen = [record for record in ordered if fell_back(record)]
    named = {str(r["details"]["fallback"]) for r in fallen if "fallback" in r.get("details", {})}
    training = directory / "training.json"
    return MeasuredCell(
        key=row_key(config),
        dataset=dataset,
        n=len(scored),
        n_split=len(references),
        scores=summarize(scored, [record["labels"] for record in ordered], seed),
        cost={key: total[key] / len(ordered) for key in ("llm_calls", *TOKENS)}
        | {"fallbacks": sum(total["fallbacks"].values())},
        run_dir=directory,
        fallback_dialogues=len(fallen),
        substitutes=tuple(sorted(named)),
        reflection=reflection_config(config),
        training=json.loads(training.read_text()) if training.exists() else None,
        segmenter_node=dict(config.get("segmenter", {})),
    )


def collect(runs_dir: Path, data_dir: Path, seed: int) -> list[MeasuredCell]:
    """One cell per row and dataset from the finished test-split runs under ``runs_dir``: the
    run with the most dialogues; two as large with different configs are an error."""
    chosen: dict[tuple[RowKey, str], tuple[MeasuredCell, dict[str, Any]]] = {}
    for directory, config in run_configs(runs_dir).items():
        if config.get("dataset", {}).get("split") != "test":
            continue
        if not is_finished(directory):
            print(f"warning: skipping unfinished run {directory}", file=sys.stderr)
            continue
        cell = measure_run(directory, config, data_dir, seed)
        if (slot := (cell.key, cell.dataset)) in chosen:
            other, other_config = chosen[slot]
            if other.n == cell.n and other_config != config:
                raise ReportError(
                    f"runs {other.run_dir} and {directory} both give row {cell.key.label!r} "
                    f"on {cell.dataset} with {cell.n} dialogues but differ in config; remove one"
                )
            if other.n >= cell.n:
                continue
        chosen[slot] = (cell, config)
    if not chosen:
        raise ReportError(f"no finished test-split segmentation run under {runs_dir}")
    names = list(SEGMENTER_NAMES.values())

    def order(cell: MeasuredCell) -> tuple[int, bool, int, str]:
        base = cell.key.label.split(" + ")[0]
        rank = names.index(base) if base in names else len(names)
        return list(DATASETS).index(cell.dataset), cell.key.mode != "lite", rank, cell.key.label

    return sorted((cell for cell, _ in chosen.values()), key=order)


@cache
def configured_segmenter(name: str) -> dict[str, Any]:
    """The resolved ``segmenter`` node that ``segmenter=NAME`` gives the segmentation runner."""
    node = OmegaConf.to_container(
        compose_config([f"segmenter={name}"], config_name="segment").segmenter, resolve=True
    )
    assert isinstance(node, dict)
    return node


def published_counterpart(cell: MeasuredCell, quoted: Sequence[QuotedRow]) -> QuotedRow | None:
    """The quoted row measuring what ``cell`` measures (same config unchanged, whole test set, and
    an LLM row's backbone), or None."""
    if cell.n != cell.n_split:  # a subset's mean is not the published full-set number
        return None
    for row in quoted:
        name = row.segmenter_config
        if name is None or cell.dataset not in row.scores:
            continue
        if cell.key.mode == "llm" and SAME_MODEL.get(row.backbone) != cell.key.backbone:
            continue
        if configured_segmenter(name) == cell.segmenter_node:
            return row
    return None
