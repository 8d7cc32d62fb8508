"""``python -m benchmarks.metrics.qa --judge``: anyone's answers graded by the harness's judge.

The real CLI end to end; only the model is a stand-in, the scripted OpenAI-compatible server,
which here also keeps every request body it receives.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakes.chat_server import FakeChatServer
from reliability_helpers import server_backbone
from run_helpers import longmemeval_item, write_longmemeval_oracle

from benchmarks.data.paths import resolve_data_dir
from benchmarks.metrics.judge import PROTOCOLS, judge_prompt
from benchmarks.metrics.qa import main
from benchmarks.metrics.stats import bootstrap_ci
from memsys.types import Question

pytestmark = pytest.mark.usefixtures("no_env_overrides")

#: A reply every protocol's reader takes as a yes.
YES_ALL = '{"label": "CORRECT", "answer": "yes"}'


class RecordingServer(FakeChatServer):
    """The scripted server, keeping the body of every request it receives."""

    def __init__(self) -> None:
        super().__init__(hang_s=10.0)
        self.received: list[dict[str, Any]] = []

    def next_action(self, authorization: str, request: dict[str, Any]) -> tuple[str, str | None]:
        self.received.append(request)
        return super().next_action(authorization, request)


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[RecordingServer]:
    """The recording server; the response cache in ``tmp_path``, not the repository's."""
    monkeypatch.setenv("MEMSYS_CACHE_DIR", str(tmp_path / "cache"))
    with RecordingServer() as running:
        yield running


def write_lines(path: Path, records: list[dict[str, Any] | str]) -> Path:
    lines = [r if isinstance(r, str) else json.dumps(r) for r in records]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def judged(server: FakeChatServer, pred: Path, protocol: str, *more: str) -> int:
    """The CLI, its judge at the scripted server (``server_backbone`` less its group choice)."""
    backbone = ["--judge-backbone", "openai_server", *server_backbone(server)[1:]]
    return main(["--pred", str(pred), "--judge", protocol, *more, *backbone])


def read_out(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def lme(qid: str, category: str, question: str, answer: str = "Lisbon") -> dict[str, Any]:
    return {"id": qid, "category": category, "question": question, "prediction": "Lisbon",
            "answer": answer}  # fmt: skip


MIXED = [
    {"id": "c:q1", "category": 2, "question": "When did Ana adopt Rex?", "prediction": "May",
     "answer": "7 May 2023"},
    {"question_id": "c:q2", "category": 5, "question": "What colour is Ben's car?",
     "prediction": "Not mentioned", "answer": "x", "adversarial_answer": "red"},
    lme("t1", "temporal-reasoning", "How many days after the move did I start?", "18 days"),
    lme("m1_abs", "multi_session", "Which city did my sister move to?", "not mentioned"),
]  # fmt: skip
#: The questions of ``MIXED`` as the judge must see them: category 5 graded against its
#: adversarial answer, LongMemEval's spelling normalized, ``_abs`` marking abstention.
MIXED_QUESTIONS = [
    Question("c:q1", "c:q1", "When did Ana adopt Rex?", "7 May 2023", "temporal"),
    Question("c:q2", "c:q2", "What colour is Ben's car?", "red", "adversarial"),
    Question("t1", "t1", "How many days after the move did I start?", "18 days",
             "temporal_reasoning"),
    Question("m1_abs", "m1_abs", "Which city did my sister move to?", "not mentioned",
             "multi_session", is_abstention=True),
]  # fmt: skip


@pytest.mark.parametrize("protocol", list(PROTOCOLS))
def test_the_judge_model_receives_judge_prompt(
    server: RecordingServer, tmp_path: Path, protocol: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each answer reaches the model as the one message ``judge_prompt`` builds for the
    protocol, with that protocol's reply cap and schema; a rerun asks nothing."""
    server.on("", reply=YES_ALL)
    pred = write_lines(tmp_path / "pred.jsonl", MIXED)
    out = tmp_path / "verdicts.jsonl"
    assert judged(server, pred, protocol, "--out", str(out)) == 0
    expected = {}
    for question, line in zip(MIXED_QUESTIONS, MIXED, strict=True):
        prompt = judge_prompt(question, line["prediction"], protocol)
        expected[prompt.text] = (prompt.reply.max_tokens or 32, prompt.reply.schema)
    received = {
        body["messages"][0]["content"]: (
            body["max_tokens"],
            (body.get("response_format") or {}).get("json_schema", {}).get("schema"),
        )
        for body in server.received
    }
    assert [len(body["messages"]) for body in server.received] == [1] * len(MIXED)
    assert received == expected
    assert [line["label"] for line in read_out(out)] == [True] * len(MIXED)
    assert [line["category"] for line in read_out(out)] == [q.category for q in MIXED_QUESTIONS]
    first = capsys.readouterr().out.splitlines()[0]
    assert f"protocol {protocol}, judge model openai-server (openai-compatible:fake" in first

    assert judged(server, pred, protocol) == 0
    assert len(server.received) == len(MIXED)
    assert capsys.readouterr().out.splitlines()[-1] == (
        f"Judge calls: {len(MIXED)} (cache hits {len(MIXED)}, failed 0)."
    )


UNBALANCED = [
    lme("t1", "temporal-reasoning", "Q t1?"),
    lme("t2", "temporal-reasoning", "Q t2?"),
    lme("t3", "temporal-reasoning", "Q t3?"),
    lme("k1", "knowledge-update", "Q k1?"),
    lme("m1_abs", "multi-session", "Q m1?"),
    lme("u1", "single-session-user", "Q u1?"),
]


def test_aggregates_by_hand(
    server: RecordingServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Three temporal questions (two right), one knowledge-update (wrong), one abstention
    (right), one whose judge call fails: overall 3/5, task-averaged (2/3 + 0 + 1) / 3, the
    failed verdict counted and in no mean."""
    for question in ("Q t1?", "Q t2?", "Q m1?"):
        server.on(question, reply="Yes.")
    for question in ("Q t3?", "Q k1?"):
        server.on(question, reply="No.")
    server.on("Q u1?", "500")
    pred = write_lines(tmp_path / "pred.jsonl", UNBALANCED)
    out = tmp_path / "verdicts.jsonl"
    assert judged(server, pred, "longmemeval", "--out", str(out)) == 0
    printed = capsys.readouterr().out

    overall = bootstrap_ci([1.0, 1.0, 0.0, 0.0, 1.0], seed=0)
    temporal = bootstrap_ci([1.0, 1.0, 0.0], seed=0)
    assert overall.mean == 0.6
    assert f"| overall | 0.6000 | [{overall.low:.3f}, {overall.high:.3f}] | 5 | 1 |" in printed
    assert (
        f"| temporal_reasoning | 0.6667 | [{temporal.low:.3f}, {temporal.high:.3f}] | 3 | 0 |"
        in (printed)
    )
    assert "| knowledge_update | 0.0000 | [0.000, 0.000] | 1 | 0 |" in printed
    assert "| single_session_user | — | — | 0 | 1 |" in printed
    assert f"| task-averaged (mean of 3 type means) | {5 / 9:.4f} | — | 5 | 1 |" in (printed)
    assert "| abstention (_abs) | 1.0000 | [1.000, 1.000] | 1 | 0 |" in printed
    assert "Failed verdicts: 1, left out of every mean" in printed

    lines = read_out(out)
    assert [line["label"] for line in lines] == [True, True, False, False, True, None]
    assert lines[-1]["error"].startswith("judge call failed")
    assert lines[0] == {
        "question_id": "t1",
        "category": "temporal_reasoning",
        "protocol": "longmemeval",
        "label": True,
        "reply": "Yes.",
        "error": None,
    }


def test_an_unparseable_verdict_is_left_out(
    server: RecordingServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A reply the protocol cannot read, on every rung the run may ask: no label, no score."""
    server.on("Q t1?", reply='{"label": "CORRECT"}')
    server.on("", reply="I think so")
    pred = write_lines(tmp_path / "pred.jsonl", UNBALANCED[:2])
    out = tmp_path / "verdicts.jsonl"
    assert judged(server, pred, "strict", "--out", str(out)) == 0
    printed = capsys.readouterr().out
    assert "| overall | 1.0000 | [1.000, 1.000] | 1 | 1 |" in printed
    assert "| task-averaged (mean of 1 type mean) | 1.0000 | — | 1 | 1 |" in printed
    failed = read_out(out)[1]
    assert (failed["label"], failed["reply"]) == (None, "I think so")
    assert failed["error"].startswith("unparseable verdict")
    assert len(server.received) == 3  # the answered one, then two rungs of the ladder


@pytest.fixture
def oracle_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A two-question LongMemEval oracle archive, beside the evaluators' files, as
    ``MEMBENCH_DATA``."""
    evaluators = resolve_data_dir() / "evaluators"
    if not evaluators.is_dir():
        pytest.skip(f"evaluator files not found at {evaluators}; run `make data`")
    data = tmp_path / "data"
    shutil.copytree(evaluators, data / "evaluators")
    evidence = [{"role": "user", "content": "I moved to Lisbon last month.", "has_answer": True}]
    temporal = longmemeval_item("q1", "Which city did I move to?", evidence)
    temporal["question_type"] = "temporal-reasoning"
    items = {
        "2_q1.json": temporal,
        "2_q2_abs.json": longmemeval_item("q2_abs", "Which city did my sister move to?", evidence),
    }
    write_longmemeval_oracle(data, items)
    monkeypatch.setenv("MEMBENCH_DATA", str(data))
    return data


def test_longmemevals_hypothesis_file(
    server: RecordingServer, oracle_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``{"question_id", "hypothesis"}`` lines: question, answer and type from the dataset."""
    server.on("", reply="yes")
    hypotheses = [
        {"question_id": "q2_abs", "hypothesis": "You never told me."},
        {"question_id": "q1", "hypothesis": "Porto"},
    ]
    pred = write_lines(tmp_path / "hyp.jsonl", hypotheses)
    assert judged(server, pred, "longmemeval", "--dataset", "longmemeval_oracle") == 0
    questions = [
        Question("q2_abs", "q2_abs", "Which city did my sister move to?", "Lisbon",
                 "single_session_user", is_abstention=True),
        Question("q1", "q1", "Which city did I move to?", "Lisbon", "temporal_reasoning"),
    ]  # fmt: skip
    expected = sorted(
        judge_prompt(question, line["hypothesis"], "longmemeval").text
        for question, line in zip(questions, hypotheses, strict=True)
    )
    assert sorted(body["messages"][0]["content"] for body in server.received) == expected
    printed = capsys.readouterr().out
    assert "| abstention (_abs) | 1.0000 | [1.000, 1.000] | 1 | 0 |" in printed
    assert "| temporal_reasoning | 1.0000 |" in printed

    unknown = write_lines(tmp_path / "unknown.jsonl", [hypotheses[1], {"question_id": "q9",
                                                                      "hypothesis": "x"}])  # fmt: skip
    assert judged(server, unknown, "longmemeval", "--dataset", "longmemeval_oracle") == 2
    assert capsys.readouterr().err == (
        f"error: {unknown}:2: question 'q9' is not in longmemeval_oracle\n"
    )
    assert len(server.received) == 2


@pytest.mark.parametrize(
    ("bad_line", "message"),
    [
        ('{"id": "x1", "category": 2,', "not valid JSON"),
        ({"id": "x1", "category": 2, "prediction": "a", "answer": "a"}, "missing key 'question'"),
        ({**lme("x1", "temporal-reasonin", "Q?")}, "unknown question type 'temporal-reasonin'"),
        ({**lme("t1", "temporal-reasoning", "Q?")}, "id 't1' repeats line 1"),
        ({**lme("x1", "multi-session", "Q?"), "prediction": None}, "'prediction' must be"),
        ({"question_id": "x1", "hypothesis": "a"}, "missing key 'category'"),
    ],
)
def test_a_bad_line_is_one_error_before_any_call(
    server: RecordingServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    bad_line: dict[str, Any] | str,
    message: str,
) -> None:
    pred = write_lines(tmp_path / "pred.jsonl", [UNBALANCED[0], bad_line])
    assert judged(server, pred, "mem0") == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"error: {pred}:2: ") and message in captured.err
    assert captured.err.count("\n") == 1
    assert server.received == []


def test_options_that_need_a_judge_and_a_bad_backbone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pred = write_lines(tmp_path / "pred.jsonl", UNBALANCED[:1])
    with pytest.raises(SystemExit) as exited:
        main(["--pred", str(pred), "--dataset", "longmemeval_s"])
    assert exited.value.code == 2
    assert "--dataset need --judge" in capsys.readouterr().err
    assert main(["--pred", str(pred), "--judge", "strict", "--judge-backbone", "nonesuch"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "nonesuch" in err
    empty = write_lines(tmp_path / "empty.jsonl", [])
    assert main(["--pred", str(empty), "--judge", "strict"]) == 2
    assert "no answers to judge" in capsys.readouterr().err
