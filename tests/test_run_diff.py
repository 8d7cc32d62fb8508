"""benchmarks.inspection.diff: two runs compared question by question, on hand-built records, on
run folders (plain and packed), and on the committed ablation runs against the ablation table's
own count."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from benchmarks.data.paths import REPO_ROOT
from benchmarks.inspection import diff
from benchmarks.inspection.diff import Outcome, Side, compare, describe, main, read_side
from benchmarks.pipeline.packed import pack


def outcome(
    qid: str,
    context: tuple[str, ...],
    recall: float,
    f1: float,
    verdict: bool | None,
    category: str = "single_hop",
) -> Outcome:
    return Outcome(qid, category, context, ("D1:1", "D2:1"), recall, f1, verdict)


def side(*outcomes: Outcome) -> Side:
    return Side(Path("x"), "x", {o.question_id: o for o in outcomes})


A = side(
    outcome("q1", ("D1:1", "D3:1"), 0.5, 0.0, False),
    outcome("q2", ("D1:1", "D2:1"), 1.0, 1.0, True, "temporal"),
    outcome("q3", ("D4:1", "D5:1"), 0.0, 0.2, True),
    outcome("q4", ("D4:1",), 0.0, 0.0, None),
    outcome("q5", ("D6:1",), 0.0, 0.0, None),
)
B = side(
    outcome("q1", ("D2:1", "D1:1"), 1.0, 0.5, True),  # D2:1 in, D3:1 out: evidence found
    outcome("q2", ("D2:1", "D1:1"), 1.0, 1.0, True, "temporal"),  # same turns, other order
    outcome("q3", ("D4:1", "D5:1"), 0.0, 0.1, False),  # verdict flips to wrong, F1 down
    outcome("q4", ("D4:1",), 0.0, 0.0, None),  # unchanged
    outcome("q6", ("D6:1",), 0.0, 0.0, None),  # only in B
)


def test_counts_per_category_and_overall() -> None:
    comparison = compare(A, B)
    counts = comparison.counts()
    assert list(counts) == ["single_hop", "temporal", "all"]
    assert counts["single_hop"] == {
        "questions": 3, "set_changed": 1, "order_only": 0, "evidence_gained": 1,
        "evidence_lost": 0, "to_correct": 1, "to_wrong": 1, "f1_up": 1, "f1_down": 1,
    }  # fmt: skip
    assert counts["temporal"]["order_only"] == 1 and counts["temporal"]["set_changed"] == 0
    assert counts["all"]["questions"] == 4
    assert (comparison.only_a, comparison.only_b) == (1, 1)


def test_ranked_most_changed_first_unchanged_left_out() -> None:
    ranked = compare(A, B).ranked()
    assert [d.question_id for d in ranked] == ["q1", "q3", "q2"]
    first = ranked[0]
    assert first.added == ("D2:1",) and first.removed == ("D3:1",)
    assert first.evidence_found == ("D2:1",) and first.evidence_lost == ()
    assert describe(ranked[1]) == "q3 (single_hop): F1 0.20 → 0.10; verdict correct → wrong"
    assert "same 2 turns reordered (D1:1, D2:1 → D2:1, D1:1)" in describe(ranked[2])


def test_sides_sharing_no_question_are_an_error() -> None:
    with pytest.raises(diff.DiffError, match="share no question"):
        compare(side(outcome("q1", (), 0, 0, None)), side(outcome("q2", (), 0, 0, None)))


def write_run(folder: Path, contexts: dict[str, list[str]], f1: float) -> Path:
    folder.mkdir(parents=True)
    config = {"method": {"_target_": "memsys.methods.baselines.TurnRAG"}}
    (folder / "config.yaml").write_text(yaml.safe_dump(config))
    lines = [
        {
            "question_id": qid,
            "category": "multi_hop",
            "evidence": ["D1:2"],
            "retrieved_turn_ids": context,
            "evidence_recall": float("D1:2" in context),
            "scores": {"f1_set": f1, "judge_acc": 1.0},
            "failure": None,
        }
        for qid, context in contexts.items()
    ]
    (folder / "predictions.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return folder


def test_two_run_folders_one_packed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = write_run(tmp_path / "run1", {"c:q1": ["D1:1"], "c:q2": ["D1:2", "D1:3"]}, 0.4)
    other = write_run(tmp_path / "run2", {"c:q1": ["D1:2"], "c:q2": ["D1:3", "D1:2"]}, 0.4)
    (other / "metrics.json").write_text("{}")
    pack(other)  # a committed run folder reads as a plain one
    assert read_side(run, "f1_set").outcomes["c:q1"].f1 == 0.4
    assert main([str(run), str(other), "--top", "1"]) == 0
    out = capsys.readouterr().out
    assert "run1 (TurnRAG)" in out and "run2 (TurnRAG)" in out
    assert "| all | 2 | 1 | 1 | 1 | 0 | 0 | 0 | 0 | 0 |" in out
    assert "the 1 that changed most:\nc:q1 (multi_hop): context +1 (D1:2) −1 (D1:1); " \
        "evidence found D1:2; evidence recall 0.00 → 1.00" in out  # fmt: skip


def test_a_path_that_is_neither_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([str(tmp_path), str(tmp_path)]) == 2
    assert "not a run folder (no predictions.jsonl)" in capsys.readouterr().err


def test_committed_ablation_runs_agree_with_the_ablation_table() -> None:
    """The diff's order-only and set counts over the committed CAST runs are the ablation
    table's shares (computed there by :func:`benchmarks.runs.ablations.context_changes`)."""
    table: dict[str, Any] = json.loads((REPO_ROOT / "results" / "ablations.json").read_text())
    rows = {r["config"]: r for r in table["rows"]}
    folder = REPO_ROOT / "results" / "ablations_runs"
    comparison = compare(
        read_side(folder / rows["cast"]["run"], "f1_set"),
        read_side(folder / rows["cast_semantic_only"]["run"], "f1_set"),
    )
    overall = comparison.counts()["all"]
    row = rows["cast_semantic_only"]
    assert overall["set_changed"] / overall["questions"] == pytest.approx(row["set_changed"])
    assert overall["order_only"] / overall["questions"] == pytest.approx(row["order_only"])
    assert overall["order_only"] > 0
