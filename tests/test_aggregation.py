"""metrics.json's summary and the report's rows take every shared number from one aggregation
(:mod:`benchmarks.metrics.aggregate`): the adversarial policy, the per-category cells, the all-evidence
share, the context size, the dataset's name and the reason the intervals resample what they do."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from report_helpers import SIX_CONVERSATIONS, TURN_RAG, config, in_conversations, record, write_run

from benchmarks.metrics.aggregate import (
    Cell,
    dataset_name,
    interval_line,
    interval_summary,
    plural,
    resampling_case,
    summarize_run,
)
from benchmarks.runs.folders import dataset_name as config_dataset_name
from benchmarks.tables.report.build import build_report
from benchmarks.tables.report.header import interval_description


def settings(adversarial: str) -> SimpleNamespace:
    return SimpleNamespace(
        dataset="locomo", variant=None, subset=SimpleNamespace(name="smoke"), template="uniform",
        adversarial=adversarial, seed=0,
    )  # fmt: skip


@pytest.mark.parametrize("adversarial", ["exclude", "include"])
def test_summary_and_row_share_every_cell(tmp_path: Path, adversarial: str) -> None:
    records = in_conversations(
        [
            record(i, category, value, recall)
            for i, (category, value, recall) in enumerate(
                zip(
                    ["single_hop", "temporal", "adversarial"] * 4,
                    SIX_CONVERSATIONS,
                    [1.0, 0.5, None, 1.0] * 3,
                    strict=True,
                )
            )
        ],
        2,
    )
    write_run(tmp_path, "a", config(TURN_RAG, adversarial=adversarial), records)
    row = build_report(tmp_path).rows[0]
    summary = summarize_run(records, settings(adversarial))  # type: ignore[arg-type]
    for name, stored in summary["scores"].items():
        found = row.scores["overall"][name]
        assert found is not None and stored == found.as_json()
    for category, stored in summary["per_category"].items():
        for name in summary["scores"]:
            found = row.scores[category][name]
            assert found is not None and stored[name] == found.as_json()
    overall_n = summary["scores"]["f1_set"]["n"]
    assert overall_n == (8 if adversarial == "exclude" else 12)
    assert summary["evidence_recall"]["all_retrieved_share"] == row.all_evidence_share
    assert summary["context_tokens"]["mean"] == row.context_tokens
    assert summary["dataset"] == config_dataset_name(row.run.config) == "locomo"


def test_dataset_name() -> None:
    assert dataset_name("longmemeval", "s") == "longmemeval_s"
    assert config_dataset_name({"dataset": {"name": "longmemeval", "variant": "s"}}) == (
        "longmemeval_s"
    )
    assert plural(1, "conversation") == "1 conversation"
    assert plural(3, "run") == "3 runs"


def test_summary_line_and_table_header_give_the_same_reason() -> None:
    """One rule (resampling_case), worded twice: the printed summary and the table header."""
    cases = {
        "own": ([f"c{i}" for i in range(4)], "conversation"),
        "asked": ([f"c{i // 2}" for i in range(12)], "question"),
        "too_few": ([f"c{i // 4}" for i in range(12)], "conversation"),
        "clustered": ([f"c{i // 2}" for i in range(12)], "conversation"),
    }
    for expected, (conversations, unit) in cases.items():
        interval = interval_summary([{"conversation_id": c} for c in conversations], unit)
        count, n = interval["conversations"], len(conversations)
        cell = Cell(0.5, 0.4, 0.6, n, interval["unit"], count)
        found = resampling_case(
            own=count == n, requested=unit, clustered=interval["unit"] == "conversation"
        )
        assert found == expected
        line, header = interval_line(interval), interval_description([cell], unit, "conversation")
        own = "its own conversation"
        assert (own in line, own in header) == (expected == "own",) * 2
        assert ("as asked" in line, "as asked" in header) == (expected == "asked",) * 2
        assert ("fewer than" in line, "fewer than" in header) == (expected == "too_few",) * 2
        assert (
            ("understate" in line) == ("understate" in header) == (expected in {"asked", "too_few"})
        )
