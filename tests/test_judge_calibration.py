"""Judge calibration: several protocols per answer, and the probe set of known verdicts."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes.chat_server import FakeChatServer
from reliability_helpers import CORRECT, JUDGE, server_backbone
from run_helpers import FIXTURE, compose_config, fixture_overrides, read_records

from benchmarks.config.services import backbone_config
from benchmarks.config.values import ConfigError
from benchmarks.data import load_locomo
from benchmarks.metrics import official_prompts
from benchmarks.metrics.judge import LME_STANDARD, STRICT_INSTRUCTION, judge_prompt, judgings
from benchmarks.metrics.judge_probes import (
    PROBES_FILE,
    ProbeSet,
    candidate_sentences,
    content_words,
    distractor,
    probe_counts,
    read_probes,
)
from benchmarks.metrics.judging import Judge
from benchmarks.pipeline.run import run
from benchmarks.pipeline.settings import run_identity, validate
from memsys.llm import Accounting, LLMRequest, LLMResponse, ResponseCache
from memsys.llm.factory import build_backbone
from memsys.types import Question

pytestmark = pytest.mark.usefixtures("no_env_overrides")

STRICT = STRICT_INSTRUCTION.splitlines()[0]
WRONG = '{"label": "WRONG"}'


def tiny_conversations():
    return load_locomo(str(FIXTURE), "locomo/tiny_conversation.json")


def test_the_probe_set_of_the_tiny_conversation() -> None:
    """Worked by hand from tests/fixtures/tiny: the adversarial question gets no probe; an
    unrelated answer needs another question of the same category; no sentence outside the
    evidence sessions shares a word other than a speaker's name with a question, so there is no
    distractor here (see the next test)."""
    probe_set = ProbeSet(seed=0)
    list(probe_set.collect(tiny_conversations()))  # as the runner streams them
    probes = probe_set.probes()
    assert [(p.probe_id, p.prediction) for p in probes] == [
        ("tiny-1:q0:gold", "Pepper"),
        ("tiny-1:q0:other_question", "31 minutes"),  # the other single-hop question
        ("tiny-1:q1:gold", "11 March 2023"),  # the only temporal question
        ("tiny-1:q2:gold", "running, pottery"),
        ("tiny-1:q3:gold", "Likely yes; she loves outings with Pepper"),
        ("tiny-1:q5:gold", "31 minutes"),
        ("tiny-1:q5:other_question", "Pepper"),
    ]


def test_a_distractor_is_the_most_topical_sentence_outside_the_evidence() -> None:
    """Session 1's sentences of 4+ words: "I finally adopted a dog last week, a beagle called
    Pepper." shares 1 word (pepper) with the question below, "Great, she loves the park near my
    flat in Lisbon." shares 3 (park, near, flat); a speaker's name alone is not topical; a
    question with unknown evidence sessions gets none."""
    (conversation,) = tiny_conversations()
    sentences = candidate_sentences(conversation)
    names = frozenset({"ana", "ben"})

    def asked(text: str, sessions: tuple[str, ...] = ("session_2",)) -> str | None:
        question = Question(
            "x", "tiny-1", text, "a squirrel", "single_hop", evidence_sessions=sessions
        )
        return distractor(question, sentences, names)

    assert asked("What did Pepper chase in the park near the flat?") == (
        "Great, she loves the park near my flat in Lisbon."
    )
    assert asked("What did Pepper chase?") == (
        "I finally adopted a dog last week, a beagle called Pepper."
    )
    # Only "Ana, I made my first bowl in pottery class yesterday!" (session 2) names a speaker.
    assert asked("When did Ana and Ben meet?", ("session_1",)) is None
    assert asked("What did Pepper chase in the park?", ()) is None


def test_content_words_keep_months_and_numbers() -> None:
    assert content_words("It was in May, on the 7th") == {"may", "7th"}
    assert content_words("I did it, and so did he") == frozenset()


def test_probe_counts_deduplicate_and_count_failures() -> None:
    graded = [
        {"probe_id": "a:gold", "kind": "gold", "verdicts": {"mem0": True, "strict": False}},
        {"probe_id": "a:gold", "kind": "gold", "verdicts": {"mem0": True, "strict": False}},
        {"probe_id": "b:gold", "kind": "gold", "verdicts": {"mem0": None, "strict": True}},
        {"probe_id": "a:distractor", "kind": "distractor", "verdicts": {"mem0": True}},
    ]
    assert probe_counts(graded) == {
        "mem0": {
            "gold": {"accepted": 1, "graded": 1, "failed": 1},
            "distractor": {"accepted": 1, "graded": 1, "failed": 0},
        },
        "strict": {"gold": {"accepted": 1, "graded": 2, "failed": 0}},
    }


def test_each_protocol_has_its_prompt_and_abstention_has_one() -> None:
    question = Question("q", "c", "How many days?", "18", "temporal_reasoning")
    assert judge_prompt(question, "19", "strict").text.startswith(STRICT)
    reworded = judge_prompt(question, "19", "longmemeval_json").text
    assert reworded.startswith(LME_STANDARD) and "off-by-one" in reworded
    by_type, abstention = official_prompts.longmemeval_templates()
    official = judge_prompt(question, "19", "longmemeval").text
    assert official == by_type["temporal-reasoning"].format("How many days?", "18", "19")
    unanswerable = Question(
        "q_abs", "c", "?", "not mentioned", "temporal_reasoning", is_abstention=True
    )
    prompts = {judge_prompt(unanswerable, "I don't know", p).text for p in ("mem0", "strict")}
    assert prompts == {abstention.format("?", "not mentioned", "I don't know")}


def test_a_bad_protocol_names_the_key(tmp_path: Path) -> None:
    overrides = fixture_overrides(tmp_path / "runs", tmp_path / "cache")
    with pytest.raises(ConfigError, match=r"judge\.protocols"):
        validate(compose_config([*overrides, "judge.protocols=[lenient]"]))
    with pytest.raises(ConfigError, match=r"dataset\.judge_protocol"):
        validate(compose_config([*overrides, "dataset.judge_protocol=lenient"]))


def test_a_run_scores_every_protocol_and_grades_the_probes_once(
    tmp_path: Path, server: FakeChatServer
) -> None:
    """A lenient mem0 judge and a strict one that rejects everything: both verdicts per answer,
    both judges' probe figures in metrics.json; a second run of the same config asks nothing,
    and a damaged probe file is graded again from the cache."""
    server.on(STRICT, reply=WRONG)
    server.on(JUDGE, reply=CORRECT)
    overrides = [
        *fixture_overrides(tmp_path / "runs", tmp_path / "cache"),
        "method=turn_rag_bm25",
        *server_backbone(server),
        "judge.protocols=[strict]",
        "judge.probes=true",
    ]
    summary = run(compose_config(overrides))
    run_dir = Path(summary["run_dir"])
    answered = [r for r in read_records(run_dir) if r["prediction"] is not None]
    assert len(answered) == 6
    for record in answered:
        assert (record["scores"]["judge_acc"], record["scores"]["judge_acc_strict"]) == (1.0, 0.0)
        assert [entry["protocol"] for entry in judgings(record)] == ["mem0", "strict"]
    assert summary["scores"]["judge_acc_strict"]["mean"] == 0.0
    expected = {
        "mem0": {
            "gold": {"accepted": 5, "graded": 5, "failed": 0},
            "other_question": {"accepted": 2, "graded": 2, "failed": 0},
        },
        "strict": {
            "gold": {"accepted": 0, "graded": 5, "failed": 0},
            "other_question": {"accepted": 0, "graded": 2, "failed": 0},
        },
    }
    assert summary["judge_probes"] == expected
    assert summary["accounting"]["stages"]["judge_probes"]["calls"] == 14

    again = run(compose_config(overrides))
    assert again["accounting"]["this_invocation"]["total"]["calls"] == 0
    (run_dir / PROBES_FILE).write_text('[{"probe_id": 3}]')
    healed = run(compose_config(overrides))
    assert healed["judge_probes"] == expected
    assert healed["accounting"]["this_invocation"]["stages"]["judge_probes"]["cache_hits"] == 14
    assert len(read_probes(run_dir) or []) == 7


def test_protocols_with_one_prompt_share_one_call(server: FakeChatServer, tmp_path: Path) -> None:
    """An abstention question has one rule under every protocol: one request, its cost booked
    once, the same verdict for each protocol."""
    server.on("unanswerable", reply="Yes.")
    cfg = compose_config([*fixture_overrides(tmp_path, tmp_path), *server_backbone(server)])
    cache = ResponseCache(tmp_path / "responses.sqlite")
    backbone = build_backbone(
        backbone_config(cfg, "backbone"), cache=cache, accounting=Accounting()
    )
    judge = Judge(backbone, protocols=("longmemeval", "mem0", "strict", "longmemeval_json"))
    unanswerable = Question("q_abs", "c", "?", "not mentioned", "multi_session", is_abstention=True)
    (verdicts,) = judge.grade_many([(unanswerable, "I cannot tell")])
    assert server.request_count == 1
    assert {p: v.correct for p, v in verdicts.items()} == dict.fromkeys(verdicts, True)
    assert [v.shared for v in verdicts.values()] == [False, True, True, True]
    assert sum(v.prompt_tokens for v in verdicts.values()) == verdicts["longmemeval"].prompt_tokens


def test_judge_settings_that_change_no_record_leave_the_run_identity(tmp_path: Path) -> None:
    overrides = fixture_overrides(tmp_path / "runs", tmp_path / "cache")

    def identity(*more: str) -> dict:
        return run_identity(compose_config([*overrides, *more]))

    assert identity("judge.probes=true") == identity("judge.probes=false")
    assert "judge_protocol" in identity()["dataset"] and "protocols" in identity()["judge"]
    unjudged = identity("judge=none")
    assert "judge_protocol" not in unjudged["dataset"] and "protocols" not in unjudged["judge"]
    assert "judge_protocol" not in identity("answer=none")["dataset"]


def test_each_instruction_is_a_shared_prefix_and_is_graded_in_one_run() -> None:
    """Every judge request declares its template's text before the first field as the shared
    prefix (what an in-process model evaluates once), and the requests go out grouped by it."""
    sent: list[LLMRequest] = []

    class Recorder:
        def complete_many(self, requests, **_):
            sent.extend(requests)
            return [LLMResponse(CORRECT, 1, 1, 0.0, False, "m") for _ in requests]

    judge = Judge(Recorder(), protocols=("mem0", "strict"))  # type: ignore[arg-type]
    items = [(Question(f"q{i}", "c", f"Who is {i}?", "Anna", "single_hop"), "Anna") for i in (1, 2)]
    judge.grade_many(items)
    mem0 = official_prompts.mem0_accuracy_prompt()
    heads = [r.messages[0]["content"][: r.shared_prefix] for r in sent]
    expected = [mem0[: mem0.index("{question}")], STRICT_INSTRUCTION.split("{question}")[0]]
    assert sorted(heads) == sorted(expected * 2)
    assert heads[0] == heads[1] and heads[2] == heads[3]  # one run per instruction
    assert all(r.messages[0]["content"][r.shared_prefix :].startswith("Who is ") for r in sent)
