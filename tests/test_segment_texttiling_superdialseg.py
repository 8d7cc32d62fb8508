"""SuperDialSeg's NLTK TextTiling (the published baseline): labels equal to NLTK's tiles read the
way SuperDialSeg reads them, the shipped stop-word list, the edge-case rules, the config."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from nltk.tokenize import TextTilingTokenizer

import benchmarks.pipeline.segment  # noqa: F401  (registers the dataset=... options)
from benchmarks.data import load_segmentation
from benchmarks.data.paths import REPO_ROOT
from memsys.segment.build import segmenter_from_config
from memsys.segment.texttiling_superdialseg import (
    STOPWORDS_FILE,
    SuperDialSegTextTilingSegmenter,
    nltk_english_stopwords,
)

CONF = REPO_ROOT / "conf"

#: Two topics of eight utterances each, long enough for NLTK (paragraph breaks 100 characters
#: apart, pseudo-sentences of 10 words): gardening, then a train trip to Vienna.
GARDEN_THEN_VIENNA = (
    "i planted tomatoes in the garden this spring, the tomato plants grow fast in the sun",
    "do you water the garden every morning? my tomatoes need water when the soil gets dry",
    "yes, i water the tomato beds and the herb garden before work, the soil stays moist",
    "the basil in my herb garden grows beside the tomatoes, basil and tomato plants like sun",
    "weeds grow between the beds, so i pull weeds from the garden soil every weekend",
    "compost helps the soil too, i put compost around the tomato plants and the basil",
    "my garden gets slugs that eat the basil leaves, slugs love moist garden soil at night",
    "try copper tape around the beds, slugs avoid copper and the basil leaves stay whole",
    "next month i travel by train to vienna, the train leaves the station early in the morning",
    "a night train to vienna has sleeping cars, the train ticket includes a bed and breakfast",
    "the station in vienna is close to the museum quarter, the museums open at ten",
    "i booked a museum pass for vienna, the pass covers the art museum and the palace",
    "the palace gardens in vienna are huge, the palace tour takes two hours with a guide",
    "after the palace tour i want coffee and cake, vienna cafes serve cake all afternoon",
    "the train back from vienna leaves at six, the return ticket was cheaper than the flight",
    "a train journey lets you watch the mountains, the train crosses the alps after vienna",
)


def stop_words_from_file(path: Path) -> list[str]:
    """The list read here on its own, not through the module under test."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return [line for line in lines if line and not line.startswith("#")]


def superdialseg_labels(utterances: Sequence[str], w: int = 10, k: int = 6) -> list[int]:
    """SuperDialSeg's TexttilingSegmenter and its runner, written out from their description:
    NLTK's tokenizer on the utterances joined by blank lines, a 1 on each tile's last line, the
    last label 0."""
    tokenizer = TextTilingTokenizer(w=w, k=k, stopwords=stop_words_from_file(STOPWORDS_FILE))
    document = "\n\n".join(utterance.strip("\n") for utterance in utterances)
    predictions: list[int] = []
    for tile in tokenizer.tokenize(document):
        lines = tile.strip().split("\n\n")
        if lines == [""]:
            continue
        predictions.extend([0] * len(lines))
        predictions[-1] = 1
    predictions[-1] = 0
    return predictions


def test_stop_word_file_is_nltks_classic_english_list() -> None:
    words = stop_words_from_file(STOPWORDS_FILE)
    assert len(words) == len(set(words)) == 179
    assert words[:4] == ["i", "me", "my", "myself"] and words[-1] == "wouldn't"
    assert {"wouldn't", "you're", "should've", "ain", "ma", "t", "don"} <= set(words)
    assert nltk_english_stopwords() == tuple(words)
    header = STOPWORDS_FILE.read_text(encoding="utf-8").split("\ni\n")[0]
    assert "179" in header and "nltk" in header.lower() and "SuperDialSeg" in header


def test_labels_equal_nltk_tiles_read_as_superdialseg_does() -> None:
    expected = superdialseg_labels(GARDEN_THEN_VIENNA)
    assert 1 in expected  # the example is long enough for NLTK to place boundaries
    result = SuperDialSegTextTilingSegmenter().segment(GARDEN_THEN_VIENNA)
    assert list(result.labels) == expected
    assert result.labels[7] == 1  # the topic switch
    assert result.cost.llm_calls == 0 and result.cost.texts_embedded == 0
    assert result.details == {"tiles": sum(expected) + 1}


def test_w_and_k_reach_nltk() -> None:
    wide = SuperDialSegTextTilingSegmenter(w=20, k=10).segment(GARDEN_THEN_VIENNA * 2)
    assert list(wide.labels) == superdialseg_labels(GARDEN_THEN_VIENNA * 2, w=20, k=10)
    assert SuperDialSegTextTilingSegmenter().config()["w"] == 10
    with pytest.raises(ValueError, match="k must be a positive integer"):
        SuperDialSegTextTilingSegmenter(k=0)


def test_real_dialogues_equal_the_reference_procedure(data_dir: Path) -> None:
    segmenter = SuperDialSegTextTilingSegmenter()
    for name in ("dialseg711", "tiage", "superdialseg"):
        for dialogue in load_segmentation(name, "test", data_dir)[:15]:
            expected = superdialseg_labels(dialogue.utterances)
            assert list(segmenter.segment(dialogue.utterances).labels) == expected, name


def test_text_too_short_for_nltk_gets_no_boundary_and_says_why() -> None:
    short = ("hi there", "hello, how are you?", "fine thanks", "and you?")
    with pytest.raises(ValueError):  # what NLTK itself does
        TextTilingTokenizer(w=10, k=6, stopwords=[]).tokenize("\n\n".join(short))
    result = SuperDialSegTextTilingSegmenter().segment(short)
    assert result.labels == (0, 0, 0, 0)
    assert result.details["fallback"] == "no boundary"
    assert "paragraph breaks" in result.details["nltk_error"]
    assert result.cost.fallbacks == {}  # not an LLM fallback


def test_more_lines_than_utterances_are_mapped_by_position_and_counted() -> None:
    # An utterance holding a blank line of its own splits into two lines of NLTK's tiles.
    utterances = list(GARDEN_THEN_VIENNA)
    utterances[2] = utterances[2].replace(", the soil", ",\n\nthe soil")
    result = SuperDialSegTextTilingSegmenter().segment(utterances)
    lines = superdialseg_labels(utterances)  # one label per line: 17 for 16 utterances
    assert len(lines) == len(utterances) + 1
    assert result.details["line_mismatch"] == {"lines": 17, "utterances": 16}
    assert list(result.labels) == lines[:15] + [0]  # by position, cut, last 0


def test_fewer_lines_than_utterances_are_padded() -> None:
    # An empty last utterance: the last tile's strip() drops it, one line short.
    utterances = [*GARDEN_THEN_VIENNA, ""]
    result = SuperDialSegTextTilingSegmenter().segment(utterances)
    assert result.details["line_mismatch"] == {"lines": 16, "utterances": 17}
    assert len(result.labels) == 17 and result.labels[-2:] == (0, 0)
    assert list(result.labels[:15]) == superdialseg_labels(GARDEN_THEN_VIENNA)[:15]


def test_config_composes_and_builds() -> None:
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name="segment", overrides=["segmenter=texttiling_superdialseg"])
    segmenter = segmenter_from_config(cfg.segmenter, embedder=None, backbone=None)
    assert isinstance(segmenter, SuperDialSegTextTilingSegmenter)
    assert (segmenter.w, segmenter.k) == (10, 6)
    assert not segmenter.uses_llm
    assert segmenter.identity()["config"]["stopwords"].startswith("nltk-english-179:")
