"""The one structured-output helper: accept/reject, the retry note, the grammar, the report."""

from __future__ import annotations

import json
from typing import Any

from fakes.llm import make_backbone

from memsys.llm import Completion, LLMRequest, ProviderError, SamplingParams
from memsys.llm.structured import (
    MAX_PROBLEM_CHARS,
    REJECTED,
    RETRY_NOTE,
    ExtractionReport,
    Rejected,
    StructuredFlow,
    ask_json_many,
)

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
GRAMMAR = {**SCHEMA, "additionalProperties": False}


class UnitProvider:
    """Replies by the unit (the first message) and the attempt (2 messages: first, 4: retry)."""

    model_id = "fake:units"
    endpoint = "fake://units"

    def __init__(self, replies: dict[tuple[str, int], str | Exception]) -> None:
        self.replies = replies
        self.requests: list[LLMRequest] = []

    def generate(self, request: LLMRequest, timeout_s: float) -> Completion:
        self.requests.append(request)
        attempt = 1 if len(request.messages) == 1 else 2
        reply = self.replies[(request.messages[0]["content"], attempt)]
        if isinstance(reply, Exception):
            raise reply
        return Completion(reply, 7, 3, "stop")


def test_accept_rejects_with_a_reason_or_none_and_the_retry_says_why() -> None:
    failing = ProviderError("bad request")  # permanent: the backbone does not retry it
    provider = UnitProvider(
        {
            ("good", 1): '{"n": 1}',
            ("odd", 1): '{"n": 3}',
            ("odd", 2): '{"n": 5}',
            ("none", 1): '{"n": -1}',
            ("none", 2): '{"n": 2}',
            ("garbage", 1): "no json",
            ("garbage", 2): '{"n": 4}',
            ("failing", 1): failing,
            ("failing", 2): '{"n": 6}',
        }
    )
    units = ["good", "odd", "none", "garbage", "failing"]

    def accept(index: int, value: Any) -> int | Rejected | None:
        if value["n"] < 0:
            return None
        if value["n"] % 2 and value["n"] > 1:
            return Rejected("the number was odd " + "x" * 300)
        return value["n"]

    report = ExtractionReport()
    values = ask_json_many(
        make_backbone(provider),  # type: ignore[arg-type]
        [[{"role": "user", "content": unit}] for unit in units],
        schema=SCHEMA,
        grammar=GRAMMAR,
        accept=accept,
        max_tokens=16,
        report=report,
    )
    assert values == [1, None, 2, 4, 6]
    notes = {r.messages[0]["content"]: r.messages for r in provider.requests if len(r.messages) > 1}
    assert set(notes) == {"odd", "none", "garbage", "failing"}
    assert notes["odd"][1] == {"role": "assistant", "content": '{"n": 3}'}
    reason = ("the number was odd " + "x" * 300)[:MAX_PROBLEM_CHARS]
    assert notes["odd"][2]["content"] == RETRY_NOTE.format(problem=reason)
    assert notes["none"][2]["content"] == RETRY_NOTE.format(problem=REJECTED)
    assert notes["failing"][1]["content"] == ""  # no reply came: the request is asked again
    assert {json.dumps(r.params.json_schema) for r in provider.requests} == {json.dumps(GRAMMAR)}
    assert report.to_json() | {"seconds": 0} == {
        "units": 5,
        "calls": 9,
        "cached_calls": 0,
        "accepted_first": 1,
        "retried": 4,
        "accepted_retry": 3,
        "fallbacks": 1,
        "request_errors": 1,
        "prompt_tokens": 56,
        "completion_tokens": 24,
        "seconds": 0,
        "parse": report.to_json()["parse"],
        "problems": {"bad_json": 1, "rejected": 3, "request_error": 1},
    }
    assert report.parse["unparseable"] == 1


def test_a_chain_of_text_units_each_asked_once_an_earlier_one_is_read() -> None:
    """StructuredFlow: a unit submitted while reading (a chain), a plain-text reader whose
    rejection names its own problem kind, and one report per stage that adds up."""
    provider = UnitProvider(
        {
            ("count 1", 1): "one",
            ("count 2", 1): "a bird",
            ("count 2", 2): "two",
            ("check", 1): "fine",
        }
    )
    words = {"one": 1, "two": 2}
    counting, checking = ExtractionReport(), ExtractionReport()

    def number(tag: str, text: str) -> int | Rejected:
        return words.get(text, Rejected(f"{text!r} is not a number word", kind="not_a_number"))

    read_back: list[tuple[str, Any]] = []
    with StructuredFlow[str](make_backbone(provider, concurrency=4)) as flow:  # type: ignore[arg-type]
        params = SamplingParams(max_tokens=4)
        flow.submit(
            "c1", [{"role": "user", "content": "count 1"}], params, read=number, report=counting
        )
        flow.submit(
            "check",
            [{"role": "user", "content": "check"}],
            params,
            read=lambda t, x: x,
            report=checking,
        )
        for tag, value in flow:
            read_back.append((tag, value))
            if tag == "c1":
                prompt = [{"role": "user", "content": "count 2"}]
                flow.submit("c2", prompt, params, read=number, report=counting)
    assert sorted(read_back) == [("c1", 1), ("c2", 2), ("check", "fine")]
    assert (counting.units, counting.calls, counting.accepted_retry) == (2, 3, 1)
    assert counting.problems == {"not_a_number": 1} and checking.calls == 1
    total = ExtractionReport()
    for report in (counting, checking):
        total.add(report)
    assert (total.units, total.calls, total.prompt_tokens) == (3, 4, 4 * 7)
