"""benchmarks.inspection.inspect: run records to the page's model (context lines tied to turns, the
filters' flags, judges, the diff of every pair), untrusted text kept out of the markup, and the
command on hand-built runs, the committed fixture runs and a report csv."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from benchmarks.data.paths import REPO_ROOT
from benchmarks.inspection import diff
from benchmarks.inspection.inspect import main, table_runs
from benchmarks.inspection.model import (
    build_model,
    context_lines,
    load_dataset,
    read_run,
    run_result,
)
from benchmarks.inspection.page import render_page, script_json
from benchmarks.runs.folders import Run

TINY = REPO_ROOT / "tests" / "fixtures" / "tiny"
FIXTURE_RUNS = REPO_ROOT / "tests" / "fixtures" / "inspector"
HOSTILE = '</script><img src=x onerror="document.title=1">&amp; <!-- \u2028'

CONTEXT = (
    "[3 March 2023, 10:00 am]\n"
    "Ana: Hi Ben! I finally adopted a dog last week, a beagle called Pepper.\n"
    "Ben: Congratulations Ana! How is Pepper settling in?\n"
    "Ana adopted: beagle"
)


def record(qid: str, **changes: Any) -> dict[str, Any]:
    """A predictions.jsonl line on the tiny fixture's conversation."""
    line = {
        "question_id": qid,
        "conversation_id": "tiny-1",
        "category": "single_hop",
        "question": "What is the name of Ana's dog?",
        "answer": "Pepper",
        "adversarial_answer": None,
        "evidence": ["D1:1"],
        "context": CONTEXT,
        "retrieved_turn_ids": ["D1:1", "D1:2"],
        "evidence_recall": 1.0,
        "answer_coverage": 1.0,
        "context_tokens": 40,
        "prediction": "Pepper",
        "failure": None,
        "scores": {"f1_set": 1.0, "f1_locomo": 1.0, "bleu1": 1.0, "judge_acc": 1.0},
        "judging": {"protocol": "mem0", "attempts": 1, "error": None, "prompt_tokens": 9},
        "other_judgings": {"strict": {"protocol": "strict", "attempts": 2, "error": None}},
        "answering": {"prompt_tokens": 50, "completion_tokens": 2, "latency_s": 0.5},
        "latency_s": {"retrieve": 0.01, "render": 0.001},
    }
    if "scores" in changes:
        changes["scores"] = {**line["scores"], **changes["scores"]}
    return line | changes


def write_run(folder: Path, records: list[dict[str, Any]], method: str = "TurnRAG") -> Path:
    folder.mkdir(parents=True)
    config = {
        "dataset": {"name": "locomo", "file": "locomo/tiny_conversation.json"},
        "method": {"_target_": f"memsys.methods.baselines.{method}", "retriever": "bm25"},
        "backbone": {"name": "tiny-llm"},
        "answer": {"template": "uniform"},
        "subset": {"name": "full"},
    }
    (folder / "config.yaml").write_text(yaml.safe_dump(config))
    (folder / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (folder / "metrics.json").write_text(json.dumps({"scores": {"f1_set": {"mean": 0.5}}}))
    return folder


def embedded_model(page: str) -> dict[str, Any]:
    found = re.search(r'<script type="application/json" id="data">(.*?)</script>', page, re.S)
    assert found is not None
    return json.loads(found.group(1))


def test_context_lines_are_tied_to_turns_and_marked() -> None:
    locomo = {"dataset": {"name": "locomo", "file": "locomo/tiny_conversation.json"}}
    turns = load_dataset([Run(Path("r"), locomo, {}, [])], str(TINY)).turns["tiny-1"]
    lines = context_lines(CONTEXT, ["D1:1", "D1:2"], turns, ["D1:1"], ["D1:2"])
    assert [(line["turn"], line["mark"]) for line in lines] == [
        (None, "header"),
        ("D1:1", "evidence"),
        ("D1:2", "audited"),  # evidence under the audited key only
        (None, "derived"),  # a fact, no turn's text
    ]


def test_the_filters_flags_and_judges_of_a_record() -> None:
    wrong = run_result(
        record("q", scores={"judge_acc": 0.0, "f1_set": 0.0}, evidence_recall=0.5), {}, None
    )
    assert wrong["flags"] == {
        "judged_correct": False,
        "judged_wrong": True,
        "f1_positive": False,
        "f1_zero": True,
        "evidence_missed": True,
    }
    right = run_result(record("q"), {}, None)
    assert right["flags"]["judged_correct"] and right["flags"]["f1_positive"]
    assert not right["flags"]["evidence_missed"]
    assert [(j["protocol"], j["verdict"]) for j in right["judges"]] == [
        ("mem0", True),
        ("strict", None),
    ]
    unjudged = run_result(record("q", scores={"judge_acc": None}), {}, None)
    assert not unjudged["flags"]["judged_correct"] and not unjudged["flags"]["judged_wrong"]
    assert right["latency_s"]["answer"] == 0.5 and right["tokens"] == {
        "prompt": 50,
        "completion": 2,
    }


def test_untrusted_text_stays_text(tmp_path: Path) -> None:
    hostile = record("tiny-1:q0", question=HOSTILE, prediction=HOSTILE, context=HOSTILE)
    run = read_run(write_run(tmp_path / "run1", [hostile]))
    page = render_page(build_model([run], load_dataset([run], str(TINY)), HOSTILE))
    assert "<img" not in page and "</script><" not in page.replace("</script>\n<script>", "")
    assert page.count("</script>") == 2  # the data tag's and the script's own, nothing else
    model = embedded_model(page)
    assert model["questions"]["tiny-1:q0"]["question"] == HOSTILE  # read back unchanged
    assert model["results"]["run1"]["tiny-1:q0"]["prediction"] == HOSTILE
    assert json.loads(script_json({"x": HOSTILE})) == {"x": HOSTILE}


def test_the_model_of_two_runs(tmp_path: Path) -> None:
    a = write_run(tmp_path / "aaa", [record("tiny-1:q0"), record("tiny-1:q1", evidence=["D1:2"])])
    b = write_run(
        tmp_path / "bbb",
        [record("tiny-1:q0", retrieved_turn_ids=["D1:2"], evidence_recall=0.0, context="x")],
        method="SessionRAG",
    )
    runs = [read_run(a), read_run(b)]
    model = build_model(runs, load_dataset(runs, str(TINY)), "t")
    assert [r["label"] for r in model["runs"]] == [
        "TurnRAG (bm25) · tiny-llm",
        "SessionRAG (bm25) · tiny-llm",
    ]
    assert set(model["results"]["aaa"]) == {"tiny-1:q0", "tiny-1:q1"}
    question = model["questions"]["tiny-1:q0"]
    assert question["turns"] == {
        "D1:1": "Ana: Hi Ben! I finally adopted a dog last week, a beagle called Pepper."
    }
    assert question["audit"] is None
    assert any("audited key not shown" in note for note in model["notes"])  # no audit in TINY
    # the diff is the command's, computed once
    sides = [diff.read_side(path, "f1_set") for path in (a, b)]
    assert model["diffs"] == {"aaa|bbb": diff.as_data(diff.compare(*sides))}
    assert model["diffs"]["aaa|bbb"]["counts"]["all"]["evidence_lost"] == 1


def test_a_report_csv_names_its_runs(tmp_path: Path) -> None:
    table = tmp_path / "t.csv"
    table.write_text("# Table 1\n# note\nmethod,run,questions\nA,abc,20\nB,def,20\n")
    assert table_runs(table, tmp_path / "runs") == [
        tmp_path / "runs" / "abc",
        tmp_path / "runs" / "def",
    ]


def test_the_command_refuses_a_folder_that_is_not_a_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([str(tmp_path), "--out", str(tmp_path / "x.html")]) == 2
    assert "not a run folder" in capsys.readouterr().err
    assert not (tmp_path / "x.html").exists()


def test_the_command_on_the_committed_fixture_runs(tmp_path: Path) -> None:
    out = tmp_path / "inspect.html"
    runs = sorted(p for p in FIXTURE_RUNS.iterdir() if p.is_dir())
    assert len(runs) == 2
    assert main([*map(str, runs), "--out", str(out), "--data-dir", str(TINY)]) == 0
    model = embedded_model(out.read_text())
    assert len(model["questions"]) == 6
    marks = {
        line["mark"]
        for results in model["results"].values()
        for result in results.values()
        for line in result["lines"]
    }
    assert {"header", "evidence", "other"} <= marks
    assert 'src="' not in out.read_text() and "http" not in out.read_text().split('id="data"')[0]
