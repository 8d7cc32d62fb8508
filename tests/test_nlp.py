from __future__ import annotations

from datetime import datetime

import pytest

from memsys.nlp import NLP, load_pipeline, resolve_time


def test_pipeline_finds_people_places_and_dates() -> None:
    nlp = NLP()
    labels = {(e.text, e.label) for e in nlp.entities("Ben met Melanie in Boston last Friday.")}
    assert ("Boston", "GPE") in labels and ("last Friday", "DATE") in labels
    assert nlp.identity.endswith("-3.8.0")
    assert nlp.parse(["Hi there."])[0] is nlp.parse(["Hi there."])[0]  # parsed once


def test_memo_keeps_only_the_most_recently_used_texts() -> None:
    nlp = NLP(memo_size=2)
    first = nlp.parse(["One.", "Two."])
    assert nlp.parse(["One."])[0] is first[0]  # "One." is now the most recent
    nlp.parse(["Three.", "Three."])  # evicts "Two." (least recent), keeps "One."
    assert nlp.parse(["One."])[0] is first[0]
    assert nlp.parse(["Two."])[0] is not first[1]  # parsed again
    assert len(nlp._docs) == 2


def test_missing_pipeline_says_how_to_install() -> None:
    with pytest.raises(OSError, match="spacy download en_core_web_sm"):
        load_pipeline(("no_such_pipeline",))


@pytest.mark.parametrize(
    ("expression", "day", "granularity"),
    [
        ("yesterday", "2023-05-07", "day"),
        ("last week", "2023-05-01", "week"),
        ("two weeks ago", "2023-04-24", "week"),
        ("last year", "2022-05-08", "year"),
        ("7 May 2023", "2023-05-07", "day"),
        ("May 2023", None, "month"),
    ],
)
def test_relative_dates_resolve_against_the_session(
    expression: str, day: str | None, granularity: str
) -> None:
    resolved = resolve_time(expression, datetime(2023, 5, 8, 13, 56))
    assert resolved is not None and resolved.granularity == granularity
    if day:
        assert resolved.timestamp.date().isoformat() == day


def test_unreadable_expression_is_none() -> None:
    assert resolve_time("the sunday before", datetime(2023, 5, 8)) is None
