"""The runner on a hand-written two-question LongMemEval archive, retrieval only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from run_helpers import compose_config, longmemeval_item, write_longmemeval_oracle

from benchmarks.metrics.aggregate import longmemeval_summary
from benchmarks.pipeline.run import run


@pytest.fixture
def lme_dir(tmp_path: Path) -> Path:
    evidence = [
        {
            "role": "user",
            "content": "I moved to Lisbon last month for my new job.",
            "has_answer": True,
        },
        {"role": "assistant", "content": "Congratulations on the move!", "has_answer": False},
    ]
    items = {
        "2_q1.json": longmemeval_item("q1", "Which city did I move to?", evidence),
        "2_q2_abs.json": longmemeval_item("q2_abs", "Which city did my sister move to?", evidence),
    }
    return write_longmemeval_oracle(tmp_path, items)


def test_retrieval_metrics_per_question(
    lme_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MEMBENCH_DATA", raising=False)
    cfg = compose_config(
        [
            f"data_dir={lme_dir}",
            "dataset=longmemeval_oracle",
            "subset=full",
            "method=turn_rag_bm25",
            "method.top_k=2",
            "answer=none",
            f"results_dir={tmp_path / 'runs'}",
            f"cache_dir={tmp_path / 'cache'}",
            "progress=false",
        ]
    )
    summary = run(cfg)
    records = {
        r["question_id"]: r
        for r in map(
            json.loads, (Path(summary["run_dir"]) / "predictions.jsonl").read_text().splitlines()
        )
    }
    # The ranking is stored in the official corpus's ids (user turns only), for every question,
    # at full depth: both sessions, although the reader got only the top 2 turns.
    assert records["q1"]["ranking"] == {
        "turn": ["answer_1_1", "filler_1_1"],
        "session": ["answer_1", "filler_1"],
        "complete": True,
        "method_turns": 2,
    }
    assert records["q1"]["retrieved_items"] == 2  # the reader's items: top_k, unchanged
    assert records["q2_abs"]["ranking"]["turn"] == ["answer_1_1", "filler_1_1"]
    retrieval = summary["longmemeval"]["retrieval"]
    assert summary["longmemeval"]["retrieval_definition"] == "official"
    assert retrieval["session"]["recall_all@5"] == {  # q2_abs is skipped by the definition
        "mean": 1.0,
        "ci95": [1.0, 1.0],
        "n": 1,
        "unit": "question",
        "conversations": 1,
    }
    assert retrieval["turn"]["mrr"]["mean"] == 1.0


def test_longmemeval_accuracies() -> None:
    def record(name: str, category: str, correct: float, abstention: bool = False) -> dict:
        return {
            "question_id": name,
            "conversation_id": name,  # each LongMemEval question has its own haystack
            "category": category,
            "scores": {"judge_acc": correct},
            "is_abstention": abstention,
        }

    records = [
        record("t1", "temporal_reasoning", 1.0),
        record("t2", "temporal_reasoning", 0.0),
        record("k1", "knowledge_update", 1.0),
        record("k2_abs", "knowledge_update", 1.0, abstention=True),
    ]
    summary = longmemeval_summary(records, seed=0, corpora={})
    assert summary["accuracy_per_type"]["temporal_reasoning"]["mean"] == 0.5
    assert summary["task_averaged_accuracy"] == 0.75
    assert summary["overall_accuracy"]["mean"] == 0.75
    assert summary["abstention_accuracy"] == {
        "mean": 1.0,
        "ci95": [1.0, 1.0],
        "n": 1,
        "unit": "question",  # one question: too few conversations to resample
        "conversations": 1,
    }
