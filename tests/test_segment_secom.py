"""SeCom segmentation: the reply parser, the coverage check and fallback, and reflection."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from fakes.segment import PETS_THEN_COOKING, rule_backbone, user_text

from benchmarks.pipeline.segment import window_diff
from memsys.kvstore import SQLiteKV
from memsys.llm.errors import ProviderError
from memsys.llm.types import LLMRequest
from memsys.methods.secom.reflection import (
    Guidance,
    ReflectionConfig,
    merge_rubric,
    parse_reflection,
)
from memsys.methods.secom.segmenter import (
    SeComSegmenter,
    fixed_chunks,
    parse_segmentation,
    render_exchanges,
)
from memsys.segment.base import DialogueText
from memsys.types import SegmentationDialogue


def segment_line(segment_id: int, start: int, end: int, count: int | None = None) -> str:
    count = end - start + 1 if count is None else count
    return json.dumps(
        {
            "segment_id": segment_id,
            "start_exchange_number": start,
            "end_exchange_number": end,
            "num_exchanges": count,
        }
    )


def tagged(*lines: str) -> str:
    return "<segmentation>\n" + "\n".join(lines) + "\n</segmentation>"


def test_good_json_lines_give_the_segment_ends() -> None:
    reply = tagged(segment_line(0, 0, 3), segment_line(1, 4, 5), segment_line(2, 6, 7))
    parsed = parse_segmentation(reply, 8)
    assert parsed.gaps == (3, 5) and parsed.problem is None and parsed.notes == ()


def test_tolerated_deviations_are_noted() -> None:
    # no closing tag (generation stops at it), prose and code fences, out-of-order lines,
    # a wrong count, numbers as strings
    reply = (
        "Here you go:\n<segmentation>\n```jsonl\n"
        + segment_line(1, 4, 7, count=9)
        + "\n"
        + '{"segment_id": 0, "start_exchange_number": "0", "end_exchange_number": "3", '
        '"num_exchanges": 4}\n...\n```'
    )
    parsed = parse_segmentation(reply, 8)
    assert parsed.gaps == (3,)
    assert parsed.notes == ("count_mismatch",)
    untagged = parse_segmentation(segment_line(0, 0, 7), 8)
    assert untagged.gaps == () and untagged.notes == ("untagged",)


@pytest.mark.parametrize(
    ("reply", "problem"),
    [
        (tagged(segment_line(0, 0, 2), segment_line(1, 4, 7)), "gap"),
        (tagged(segment_line(0, 0, 4), segment_line(1, 4, 7)), "overlap"),
        (tagged(segment_line(0, 1, 7)), "gap"),
        (tagged(segment_line(0, 0, 5)), "gap"),
        (tagged(segment_line(0, 0, 9)), "out_of_range"),
        (tagged(segment_line(0, 0, 3), segment_line(1, 3, 3), segment_line(2, 4, 7)), "overlap"),
        (tagged('{"segment_id": 0, "start": 0, "end": 7}'), "bad_fields"),
        (tagged(segment_line(0, 5, 2)), "bad_fields"),
        (tagged('{"segment_id": 0, "start_exchange_number": 0,'), "not_json"),
        (tagged("segment 0 is exchanges 0-7"), "no_segments"),
        ("I cannot segment this conversation.", "no_segments"),
        ("", "no_segments"),
    ],
)
def test_unusable_replies_are_rejected_with_their_kind(reply: str, problem: str) -> None:
    parsed = parse_segmentation(reply, 8)
    assert parsed.gaps is None and parsed.problem == problem and parsed.message


def test_fixed_chunks() -> None:
    assert fixed_chunks(8, 3) == (2, 5)
    assert fixed_chunks(6, 3) == (2,)
    assert fixed_chunks(2, 3) == ()


def test_prompt_numbers_exchanges_from_zero_with_speakers() -> None:
    text = render_exchanges(DialogueText(("hi", "hello", "bye"), ("user", "bot", "user")))
    assert text.split("\n\n") == [
        "[Exchange 0]: user: hi",
        "[Exchange 1]: bot: hello",
        "[Exchange 2]: user: bye",
    ]


def test_segmenter_uses_a_good_reply_retries_a_bad_one_and_counts_fallbacks() -> None:
    good_reply = tagged(segment_line(0, 0, 3), segment_line(1, 4, 7))
    gap_reply = tagged(segment_line(0, 0, 2), segment_line(1, 4, 7))
    replies = iter([good_reply, gap_reply, good_reply, gap_reply, gap_reply, "no", "idea"])
    backbone, provider = rule_backbone(lambda request: next(replies))
    segmenter = SeComSegmenter(backbone=backbone)
    good = segmenter.segment(PETS_THEN_COOKING)
    assert good.labels == (0, 0, 0, 1, 0, 0, 0, 0)
    assert good.cost.fallbacks == {} and good.cost.llm_calls == 1
    prompt = user_text(provider.requests[0])
    assert "[Exchange 7]: " + PETS_THEN_COOKING[7] in prompt and "<segmentation>" in prompt
    assert provider.requests[0].params.stop == ("</segmentation>",)
    assert provider.requests[0].params.max_tokens == 40 * 8 + 64

    retried = segmenter.segment(PETS_THEN_COOKING)  # a gap, then a good reply to the retry
    assert retried.labels == good.labels and retried.cost.llm_calls == 2
    assert retried.cost.llm["segmentation"].accepted_retry == 1
    retry_note = provider.requests[2].messages[-1]["content"]
    assert "exchanges 3..3 are in no segment" in retry_note

    gap = segmenter.segment(PETS_THEN_COOKING)  # a gap twice: fixed chunks of 3
    assert gap.labels == (0, 0, 1, 0, 0, 1, 0, 0)
    assert gap.cost.fallbacks == {"segmentation": 1}
    assert gap.details["problem"] == "gap"
    assert gap.details["fallback"] == "fixed chunks of 3 utterances"
    assert "fallback" not in good.details
    garbage = segmenter.segment(PETS_THEN_COOKING)
    assert garbage.details["problem"] == "no_segments"
    assert garbage.cost.llm["segmentation"].problems == {"no_segments": 2}
    assert segmenter.reply_counts() == {
        "segmentation": {
            "fallback:gap": 1,
            "fallback:no_segments": 1,
            "ok": 2,
            "untagged": 2,
        }
    }


def test_a_failed_call_is_asked_again_then_falls_back_without_crashing() -> None:
    def fail(request: LLMRequest) -> str:
        raise ProviderError("HTTP 400")

    backbone, _ = rule_backbone(fail)
    result = SeComSegmenter(backbone=backbone, fallback_chunk=4).segment(PETS_THEN_COOKING)
    assert result.labels == (0, 0, 0, 1, 0, 0, 0, 0)
    assert result.cost.failed_calls == 2 and result.details["problem"] == "no_reply"


def test_reflection_parsing_and_merging() -> None:
    reply = (
        "<reflection>The model split greetings.</reflection>\n<rubric>\n- Keep greetings with "
        "the next topic.\n2. Cut on a new question.\n</rubric>\n<example>Example 1: ...</example>"
    )
    assert parse_reflection(reply) == (
        ["Keep greetings with the next topic.", "Cut on a new question."],
        "Example 1: ...",
    )
    assert parse_reflection("no tags here") == (None, None)
    assert merge_rubric(["a", "b"], ["c"], 10) == ("a", "b", "c")
    assert merge_rubric(["a", "b"], ["a", "b2", "c"], 10) == ("a", "b2", "c")
    assert merge_rubric(["a", "b"], ["c"], 2) == ("a", "b")


def training_dialogues() -> list[SegmentationDialogue]:
    return [
        SegmentationDialogue(f"t{k}", PETS_THEN_COOKING[: 6 + k], (0, 0, 0, 1, 0) + (0,) * (1 + k))
        for k in range(3)
    ]


def reflection_replies(request: LLMRequest) -> str:
    text = user_text(request)
    if text.startswith("# Instruction\n## Context\n**Goal**: Compare"):
        return "<rubric>\n- Cut where the subject changes from pets to food.\n</rubric>"
    n = len(re.findall(r"\[Exchange \d+\]", text))
    if "## Segmentation Rubric" in text:
        return tagged(segment_line(0, 0, 3), segment_line(1, 4, n - 1))
    return tagged(segment_line(0, 0, n - 1))  # zero-shot: one segment


def test_reflection_learns_a_rubric_and_caches_it(tmp_path: Path) -> None:
    config = ReflectionConfig(enabled=True, dialogues=3, hard_examples=2, batch_size=1)
    store = SQLiteKV(tmp_path / "guidance.sqlite", table="guidance")
    backbone, provider = rule_backbone(reflection_replies)
    segmenter = SeComSegmenter(backbone=backbone, reflection=config)
    request = segmenter.training_request()
    assert request is not None and (request.dataset, request.split) == ("tiage", "train")

    report = segmenter.fit(training_dialogues(), window_diff=window_diff, store=store)
    assert segmenter.guidance.rubric == ("Cut where the subject changes from pets to food.",)
    assert report["cached"] is False and len(report["hard_examples"]) == 2
    assert report["reflections"] == {"ok": 2}
    assert (report["rounds"], report["rubric_items"]) == (2, 1)  # the same item learned twice
    assert (report["zero_shot_fallbacks"], report["hard_example_fallbacks"]) == (0, 0)
    calls_for_fit = len(provider.requests)
    assert calls_for_fit == 3 + 2  # three zero-shot segmentations, two reflections
    assert {call.stage for call in backbone.accounting.records()} == {"reflection"}
    assert segmenter.outcomes == {}  # training outcomes are not the run's

    result = segmenter.segment(PETS_THEN_COOKING)
    assert result.labels == (0, 0, 0, 1, 0, 0, 0, 0)
    assert "Cut where the subject changes" in user_text(provider.requests[-1])

    again = SeComSegmenter(backbone=backbone, reflection=config)
    cached = again.fit(training_dialogues(), window_diff=window_diff, store=store)
    assert cached["cached"] is True and again.guidance == segmenter.guidance
    assert len(provider.requests) == calls_for_fit + 1  # no new training call


def test_reflection_without_a_rubric_keeps_the_zero_shot_prompt(tmp_path: Path) -> None:
    backbone, _ = rule_backbone(
        lambda request: "I reflected." if "Compare" in user_text(request) else "garbage"
    )
    config = ReflectionConfig(enabled=True, dialogues=2, hard_examples=2, batch_size=2)
    segmenter = SeComSegmenter(backbone=backbone, reflection=config)
    report = segmenter.fit(training_dialogues(), window_diff=window_diff)
    assert report["reflections"] == {"no_rubric": 1} and report["rubric_items"] == 0
    # every zero-shot reply was garbage: both training dialogues are fixed chunks, and say so
    assert (report["zero_shot_fallbacks"], report["hard_example_fallbacks"]) == (2, 2)
    assert segmenter.guidance == Guidance() and segmenter.guidance.render() == ""
    assert SeComSegmenter(backbone=backbone).training_request() is None


def test_reflection_defaults_are_appendix_a1() -> None:
    # A.1: top 100 hard examples of the training set, 10 mini-batches, 10 rubric items
    config = ReflectionConfig()
    assert (config.dialogues, config.hard_examples, config.batch_size) == (None, 100, 10)
    assert config.max_rubric_items == 10
    with pytest.raises(ValueError, match=r"reflection\.batch_size"):
        ReflectionConfig(batch_size=0)


def test_rubric_grows_one_item_a_round_up_to_the_cap(tmp_path: Path) -> None:
    rounds = iter(range(1, 100))

    def reply(request: LLMRequest) -> str:
        text = user_text(request)
        if "**Goal**: Compare" in text:  # copy the existing items, add one (what Figure 8 asks)
            existing = re.findall(r"^- (rule \d+)$", text, re.MULTILINE)
            items = [*existing, f"rule {next(rounds)}"]
            return "<rubric>\n" + "\n".join(f"- {item}" for item in items) + "\n</rubric>"
        n = len(re.findall(r"\[Exchange \d+\]", text))
        return tagged(segment_line(0, 0, n - 1))

    backbone, _ = rule_backbone(reply)
    config = ReflectionConfig(enabled=True, hard_examples=3, batch_size=1, max_rubric_items=2)
    segmenter = SeComSegmenter(backbone=backbone, reflection=config)
    report = segmenter.fit(training_dialogues(), window_diff=window_diff)
    # 3 rounds of 1; the third round's full list (rule 1, rule 2, rule 3) is cut to the cap
    assert report["rounds"] == 3 and report["reflections"] == {"ok": 3}
    assert segmenter.guidance.rubric == ("rule 1", "rule 2")
    assert report["rubric_items"] == 2


def test_reflection_settings_enter_the_identity_only_when_on() -> None:
    backbone, _ = rule_backbone(lambda request: "")
    assert "reflection" not in SeComSegmenter(backbone=backbone).config()
    config = ReflectionConfig(enabled=True, hard_examples=10, batch_size=1)
    reflecting = SeComSegmenter(backbone=backbone, reflection=config).config()
    assert reflecting["reflection"]["hard_examples"] == 10
