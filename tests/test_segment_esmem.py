"""ES-Mem segmentation: stage math on hand-computed numbers, LLM replies, fallbacks, lite rule,
and several dialogues segmented together as one at a time."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from fakes.embed import hashing_embedder
from fakes.llm import RuleProvider, make_backbone
from fakes.segment import PETS_THEN_COOKING, rule_backbone, user_text

from memsys.llm.structured import Rejected
from memsys.llm.types import LLMRequest
from memsys.methods.esmem.prompts import INTENT_SCHEMA, TOPIC_SCHEMA
from memsys.methods.esmem.segmenter import (
    ESMemSegmenter,
    _intent_probability,
    adjacent_pearson,
    boundary_probability,
    gaussian_mutual_information,
    label_probability,
    lite_annotation,
    quantile_candidates,
    rank_shift_probability,
)
from memsys.segment.base import CostMeter, DialogueText, labels_from_gaps


def test_pearson_across_dimensions_by_hand() -> None:
    # x = (1, 2, 3, 4), y = (2, 1, 4, 3): centred (-1.5, -.5, .5, 1.5) and (-.5, -1.5, 1.5, .5);
    # covariance sum = .75 + .75 + .75 + .75 = 3, each variance sum = 5 -> rho = 0.6
    vectors = np.array([[1.0, 2.0, 3.0, 4.0], [2.0, 1.0, 4.0, 3.0], [5.0, 5.0, 5.0, 5.0]])
    rho = adjacent_pearson(vectors)
    assert rho[0] == pytest.approx(0.6)
    assert rho[1] == 0.0  # a constant vector has no variance: rho defined as 0
    assert rho[0] == pytest.approx(np.corrcoef(vectors[0], vectors[1])[0, 1])


def test_gaussian_mutual_information_by_hand() -> None:
    # I = -0.5 log(1 - 0.36) = -0.5 log(0.64) = 0.2231436
    information = gaussian_mutual_information(np.array([0.6, -0.6, 0.0, 1.0]))
    assert information[0] == pytest.approx(0.2231436, abs=1e-7)
    assert information[1] == information[0]  # only rho² matters
    assert information[2] == 0.0
    assert math.isfinite(information[3]) and information[3] > 13  # capped, not infinite


def test_quantile_candidates_by_hand() -> None:
    # sorted (0.1, 0.3, 0.5, 0.7, 0.9); the 0.35 quantile sits at position 1.4 -> 0.3 + 0.4·0.2
    information = np.array([0.9, 0.1, 0.5, 0.3, 0.7])
    assert quantile_candidates(information, 0.35) == [1, 3]
    assert quantile_candidates(information, 0.0) == [1]
    assert quantile_candidates(information, 1.0) == [0, 1, 2, 3, 4]
    assert quantile_candidates(np.array([]), 0.35) == []


def test_boundary_probability_rule_by_hand() -> None:
    assert label_probability("Topic_Intro", 0.8) == 0.8
    assert label_probability("Detail_Elaborate", 0.8) == pytest.approx(0.2)
    # best Topic_Shift 0.9 -> 0.9; worst Direct_Resp 0.3 -> 0.7; p_eb = 0.8 >= 0.75
    assert boundary_probability(("Topic_Shift", 0.9), ("Direct_Resp", 0.3)) == pytest.approx(0.8)
    # best Direct_Resp 0.7 -> 0.3; worst Topic_Shift 0.1 -> 0.1; p_eb = 0.2
    assert boundary_probability(("Direct_Resp", 0.7), ("Topic_Shift", 0.1)) == pytest.approx(0.2)
    with pytest.raises(ValueError, match="unknown intent label"):
        label_probability("Chit_Chat", 0.5)


def test_rank_shift_probability_by_hand() -> None:
    assert rank_shift_probability(np.array([0.2, 0.8, 0.5])).tolist() == [1.0, 0.0, 0.5]
    assert rank_shift_probability(np.array([0.4])).tolist() == [0.0]


def test_lite_annotation_has_the_llm_schema() -> None:
    annotation = lite_annotation("cats and dogs and more cats", limit=5)
    assert annotation == {"topic": "cats dogs", "keywords": ["cats", "dogs"]}


def scripted_replies(shift_after: int):
    """Stage 1: one topic for turns <= shift_after, another after; stage 2: a confident shift
    when the right window starts right after ``shift_after``, a continuation otherwise."""

    def reply(request: LLMRequest) -> str:
        schema = request.params.json_schema
        text = user_text(request)
        if schema == TOPIC_SCHEMA:
            current = text.split("[Current turn]\n", 1)[1]
            cooking = any(w in current for w in ("cook", "pasta", "sauce", "dinner"))
            topic = "cooking" if cooking else "pets"
            return json.dumps({"topic": topic, "keywords": [topic, "home"]})
        assert schema == INTENT_SCHEMA
        right = text.split("[FOLLOWING CONTEXT (right of the cut)]\n", 1)[1]
        if right.startswith(PETS_THEN_COOKING[shift_after + 1]):
            labels = [{"name": "Topic_Shift", "prob": 0.9}, {"name": "Direct_Resp", "prob": 0.1}]
        else:
            labels = [
                {"name": "Detail_Elaborate", "prob": 0.8},
                {"name": "Topic_Shift", "prob": 0.1},
            ]
        return json.dumps({"labels": labels})

    return reply


def test_llm_mode_end_to_end_with_scripted_replies() -> None:
    backbone, provider = rule_backbone(scripted_replies(shift_after=3))
    segmenter = ESMemSegmenter(embedder=hashing_embedder(), backbone=backbone)
    result = segmenter.segment(PETS_THEN_COOKING)
    assert result.labels == (0, 0, 0, 1, 0, 0, 0, 0)
    assert [a["topic"] for a in result.annotations] == ["pets"] * 4 + ["cooking"] * 4
    candidates = result.details["candidates"]
    assert 3 in candidates
    assert result.details["p_eb"]["3"] == pytest.approx(0.9)
    # recurrent: turn 2's prompt carries turn 1's text and annotation
    second = user_text(provider.requests[1])
    assert PETS_THEN_COOKING[0] in second and '"topic": "pets"' in second
    assert "(none: this is the first turn)" in user_text(provider.requests[0])
    cost = result.cost
    assert cost.llm_calls == len(PETS_THEN_COOKING) + len(candidates)
    assert cost.prompt_tokens == 11 * cost.llm_calls and cost.fallbacks == {}
    assert (
        cost.llm["topic"].parse["clean"]
        == cost.llm["topic"].accepted_first
        == len(PETS_THEN_COOKING)
    )


def test_dialogues_segmented_together_equal_one_at_a_time() -> None:
    dialogues = [PETS_THEN_COOKING, PETS_THEN_COOKING[2:7], PETS_THEN_COOKING[:3]]
    alone_backbone, alone = rule_backbone(scripted_replies(shift_after=3))
    segmenter = ESMemSegmenter(embedder=hashing_embedder(), backbone=alone_backbone)
    one_by_one = [segmenter.segment(dialogue) for dialogue in dialogues]

    together = RuleProvider(scripted_replies(shift_after=3), delay_s=0.01)
    backbone = make_backbone(together, concurrency=8)  # type: ignore[arg-type]
    meter = CostMeter()
    segmenter = ESMemSegmenter(embedder=hashing_embedder(), backbone=backbone)
    decided = segmenter.boundaries_many([DialogueText(tuple(d)) for d in dialogues], meter)
    for alone_result, result in zip(one_by_one, decided, strict=True):
        assert alone_result.labels == labels_from_gaps(len(alone_result.labels), result.gaps)
        assert alone_result.annotations == result.annotations
        assert alone_result.details == result.details
    # each dialogue's stage-1 chain runs alongside the others'
    assert together.peak_in_flight >= len(dialogues)

    def key(request: LLMRequest) -> str:
        return json.dumps(request.messages)

    assert sorted(map(key, together.requests)) == sorted(map(key, alone.requests))
    assert meter.finish().llm_calls == len(alone.requests)


def test_garbage_replies_fall_back_and_are_counted() -> None:
    backbone, _ = rule_backbone(lambda request: "I am a small model and I love JSON!!!")
    segmenter = ESMemSegmenter(embedder=hashing_embedder(), backbone=backbone)
    result = segmenter.segment(PETS_THEN_COOKING)
    n_candidates = len(result.details["candidates"])
    # each unit asked twice (the retry rule of every method), then the substitute
    assert result.cost.fallbacks == {"intent": n_candidates, "topic": len(PETS_THEN_COOKING)}
    assert result.cost.llm_calls == 2 * (len(PETS_THEN_COOKING) + n_candidates)
    assert result.labels == (0,) * len(PETS_THEN_COOKING)  # on_intent_failure: drop
    assert result.annotations[0] == lite_annotation(PETS_THEN_COOKING[0], 5)
    assert result.cost.llm["topic"].parse["unparseable"] == 2 * len(PETS_THEN_COOKING)

    keep = ESMemSegmenter(
        embedder=hashing_embedder(), backbone=backbone, on_intent_failure="keep"
    ).segment(PETS_THEN_COOKING)
    assert [i for i, label in enumerate(keep.labels) if label] == result.details["candidates"]


def test_failed_requests_are_booked_and_replaced() -> None:
    from memsys.llm.errors import ProviderError

    def reply(request: LLMRequest) -> str:
        if request.params.json_schema == INTENT_SCHEMA:
            raise ProviderError("bad request")
        first_word = user_text(request).split("[Current turn]\n", 1)[1].split()[0]
        return json.dumps({"topic": first_word, "keywords": [first_word]})

    backbone, _ = rule_backbone(reply)
    result = ESMemSegmenter(embedder=hashing_embedder(), backbone=backbone).segment(
        PETS_THEN_COOKING[:3]
    )
    # one candidate, asked twice: the breaker would trip at 3 failures in a row
    assert len(result.details["candidates"]) == 1
    assert result.cost.failed_calls == 2 * len(result.details["candidates"])  # asked twice
    assert result.cost.fallbacks == {"intent": len(result.details["candidates"])}
    assert all(p is None for p in result.details["p_eb"].values())


def test_identical_labels_in_an_intent_reply_are_rejected() -> None:
    same = {"name": "Topic_Shift", "prob": 0.9}
    assert isinstance(_intent_probability(0, {"labels": [same, same]}), Rejected)
    other = {"name": "Direct_Resp", "prob": 0.2}
    assert _intent_probability(0, {"labels": [same, other]}) == pytest.approx(0.85)
