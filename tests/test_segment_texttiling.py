"""TextTiling and the depth machinery it shares with the embedding segmenter."""

from __future__ import annotations

import numpy as np
import pytest
from fakes.segment import PETS_THEN_COOKING, PETS_THEN_COOKING_LABELS

from memsys.segment.depth import (
    DepthRule,
    block_similarities,
    depth_scores,
    select_boundaries,
    smooth,
)
from memsys.segment.lexical import STOP_WORDS, Stemmer, content_words, keywords, tokenize
from memsys.segment.texttiling import TextTilingSegmenter, count_matrix


def test_tokenizer_keeps_contraction_tails_and_drops_them_as_stop_words() -> None:
    assert tokenize("I do n't like it") == ["i", "do", "n't", "like", "it"]
    assert content_words("I do n't like it , i'm into ROCK climbing") == ["rock", "climbing"]
    assert {"lol", "yeah", "the", "n't"} <= STOP_WORDS


def test_keywords_rank_by_frequency_then_first_occurrence() -> None:
    assert keywords("pasta sauce garlic pasta sauce pasta", limit=2) == ["pasta", "sauce"]
    assert keywords("ok lol yeah", limit=3) == []


def test_stemmer_conflates_inflections() -> None:
    stem = Stemmer()
    assert stem("cooking") == stem("cooked") == stem("cook")


def test_block_similarity_by_hand() -> None:
    # rows a, a, b, b with blocks of 2, truncated at the ends:
    # gap 0: a vs a+b -> 1/sqrt(2); gap 1: a+a vs b+b -> 0; gap 2: a+b vs b -> 1/sqrt(2)
    features = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])
    half = 1 / np.sqrt(2)
    assert block_similarities(features, block=2).tolist() == pytest.approx([half, 0.0, half])


def test_block_without_content_words_has_similarity_zero() -> None:
    assert block_similarities(np.zeros((3, 2)), block=1).tolist() == [0.0, 0.0]


def test_smoothing_depth_and_cutoff_by_hand() -> None:
    assert smooth(np.array([1.0, 0.0, 1.0]), width=0).tolist() == [1.0, 0.0, 1.0]
    assert smooth(np.array([1.0, 0.0, 1.0]), width=1, rounds=2).tolist() == pytest.approx(
        [0.583333, 0.555556, 0.583333], abs=1e-6
    )
    depths = depth_scores(np.array([0.8, 0.2, 0.6, 0.5, 0.9]))
    assert depths.tolist() == pytest.approx([0.0, 1.0, 0.0, 0.5, 0.0])
    # mean 0.3, std 0.4 -> hc cutoff 0.1, lc cutoff -0.1; both valleys pass, min_gap keeps both
    assert select_boundaries(depths, "hc", min_gap=2) == [1, 3]
    assert select_boundaries(depths, "hc", min_gap=3) == [1]
    assert select_boundaries(np.zeros(4), "lc") == []  # no valley, no boundary


def test_depth_rule_rejects_bad_settings() -> None:
    with pytest.raises(ValueError, match="cutoff"):
        DepthRule(cutoff="median")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="min_gap"):
        DepthRule(min_gap=0)


def test_count_matrix_uses_the_dialogue_vocabulary() -> None:
    assert count_matrix([["cat"], [], ["cat", "dog"]]).tolist() == [
        [1.0, 0.0],
        [0.0, 0.0],
        [1.0, 1.0],
    ]


def test_obvious_topic_switch_gets_a_boundary_there() -> None:
    result = TextTilingSegmenter().segment(PETS_THEN_COOKING)
    assert result.labels == PETS_THEN_COOKING_LABELS
    assert result.cost.llm_calls == 0 and result.cost.texts_embedded == 0
    assert len(result.details["depth"]) == len(PETS_THEN_COOKING) - 1


def test_boundary_stays_near_the_switch_with_one_utterance_blocks() -> None:
    labels = TextTilingSegmenter(block_size=1).segment(PETS_THEN_COOKING).labels
    assert labels[3] == 1 or labels[2] == 1 or labels[4] == 1


def test_config_is_json_and_names_every_setting() -> None:
    config = TextTilingSegmenter(block_size=3, depth=DepthRule(cutoff="lc")).config()
    assert config == {
        "block_size": 3,
        "stem": True,
        "depth": {"smoothing_width": 0, "smoothing_rounds": 1, "cutoff": "lc", "min_gap": 2},
    }
