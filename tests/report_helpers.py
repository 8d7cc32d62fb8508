"""Hand-written run directories for the report's tests (and the aggregation, provenance and
paper-setting tests): a run's config.yaml, predictions.jsonl lines and metrics.json, and readers
of the tables the report writes.

Imported as a plain module: pytest puts ``tests/`` on ``sys.path`` (no ``tests/__init__.py``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

TURN_RAG = {"_target_": "memsys.methods.baselines.TurnRAG", "retriever": "dense", "top_k": 50}
ZERO = {"_target_": "memsys.methods.baselines.ZeroHistory"}
NEW_METHOD = {"_target_": "memsys.methods.esmem.ESMem", "extraction": "llm"}


def config(method: dict[str, Any], *, template: str | None = "uniform", **changes: Any) -> dict:
    """A config.yaml as the runner writes it, for the smoke subset."""
    written: dict[str, Any] = {
        "dataset": {"name": "locomo", "file": "locomo/locomo10.json", "judge_protocol": "mem0"},
        "method": method,
        "backbone": {"name": "tiny-llm", "provider": {"_target_": "fake"}},
        "judge": {"enabled": True, "backbone": None},
        "answer": {"template": template, "context_budget": 2048, "max_tokens": 32},
        "subset": {"name": "smoke", "conversations": 1, "max_questions": 40},
        "embedder": {"model": "all-MiniLM-L6-v2", "batch_size": 64},
        "seed": 0,
        "adversarial": "exclude",
        "batch_size": 16,
    }
    if template is None:  # as settings.run_identity writes a retrieval-only run
        del written["backbone"], written["judge"], written["dataset"]["judge_protocol"]
    return written | changes


def record(index: int, category: str, f1: float | None, recall: float | None = 1.0) -> dict:
    """One predictions.jsonl line; ``f1=None`` is a retrieval-only question."""
    line: dict[str, Any] = {
        "question_id": f"conv-1:q{index}",
        "conversation_id": "conv-1",
        "category": category,
        "answer": "Lisbon",
        "adversarial_answer": "Porto" if category == "adversarial" else None,
        "evidence": ["D1:1"],
        "retrieved_turn_ids": ["D1:1"] if recall else [],
        "context_tokens": 100 + index,
        "evidence_recall": recall,
        "failure": None,
        "scores": {},
        "latency_s": {"retrieve": 0.01, "render": 0.001},
    }
    if f1 is not None:
        line["prediction"] = "Lisbon" if f1 else "Madrid"
        line["scores"] = {"f1_locomo": f1, "f1_set": f1, "bleu1": f1 / 2, "judge_acc": 1.0}
        line["answering"] = {"prompt_tokens": 10, "completion_tokens": 2, "latency_s": 0.5}
        line["judging"] = {"prompt_tokens": 5, "completion_tokens": 1, "attempts": 1}
    return line


def write_run(root: Path, name: str, run_config: dict, records: list[dict]) -> Path:
    """A finished run directory: config.yaml, predictions.jsonl, metrics.json."""
    directory = root / name
    directory.mkdir(parents=True)
    (directory / "config.yaml").write_text(yaml.safe_dump(run_config))
    (directory / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    metrics = {"construction": {"built": 1, "loaded": 0}, "accounting": {"stages": {}}}
    (directory / "metrics.json").write_text(json.dumps(metrics))
    return directory


def scored(values: list[float], category: str = "single_hop") -> list[dict]:
    return [record(i, category, value) for i, value in enumerate(values)]


def read_table(out: Path) -> pd.DataFrame:
    return pd.read_csv(out.parent / f"{out.name}.csv", comment="#")


#: Footnote markers (:class:`benchmarks.render.Footnotes`), as a cell ends in them.
MARKERS = "⁰¹²³⁴⁵⁶⁷⁸⁹"


def plain(cell: str) -> str:
    """A cell without the footnote marker it ends in (``Ev. recall³`` → ``Ev. recall``)."""
    return cell.rstrip(MARKERS)


def markdown_section(markdown: str, title: str) -> list[list[str]]:
    """The rows of one md table, header first, as lists of cells without footnote markers."""
    block = markdown.split(f"## {title}\n\n", 1)[1]
    lines = next(part for part in block.split("\n\n") if part.startswith("|")).splitlines()
    return [
        [plain(cell) for cell in line.strip("| ").split(" | ")]
        for line in lines
        if not line.startswith("|---")
    ]


def in_conversations(records: list[dict], size: int) -> list[dict]:
    """The records dealt out to conversations of ``size`` questions each, in file order."""
    return [
        r | {"question_id": f"conv-{i // size}:q{i}", "conversation_id": f"conv-{i // size}"}
        for i, r in enumerate(records)
    ]


SIX_CONVERSATIONS = [0.0, 0.5, 1.0, 1.0, 0.2, 0.9, 0.4, 0.4, 0.1, 0.7, 1.0, 0.3]
