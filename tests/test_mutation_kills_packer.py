"""The context packer's date headers and orders on hand-made items: the undated header's text, a
header paid once per run of one date in rank order, and items of one date and position kept in
rank order. Written for ``make mutation`` (docs/development.md): each test pins a value a
mutant would change."""

from __future__ import annotations

from datetime import datetime

import pytest

from benchmarks.answering.context import date_header, fit, render_context
from memsys.types import MemoryItem

MAY = datetime(2023, 5, 8, 9, 5)
JUNE = datetime(2023, 6, 1, 21, 30)

#: A mutant that loops forever fails here in seconds, not at mutmut's CPU limit.
pytestmark = pytest.mark.timeout(10)


class Words:
    """A token counter that counts whitespace-separated words."""

    def count(self, text: str) -> int:
        return len(text.split())


def test_the_headers_text() -> None:
    assert date_header(None) == "[undated]"
    assert date_header(MAY) == "[8 May 2023, 9:05 am]"
    assert date_header(JUNE) == "[1 June 2023, 9:30 pm]"


def test_rank_order_pays_a_header_once_per_run_of_one_date() -> None:
    items = [
        MemoryItem("a b", ("t1",), MAY, 1),
        MemoryItem("c", ("t2",), MAY, 0),
        MemoryItem("d", ("t3",), JUNE, 2),
        MemoryItem("e", ("t4",), MAY, 3),
    ]
    header = len(date_header(MAY).split())  # 4 words, as June's
    rendered = render_context(items, Words(), 1000, order="rank")
    assert rendered.tokens == 3 * header + 5
    assert rendered.text.split("\n") == [
        date_header(MAY), "a b", "c", date_header(JUNE), "d", date_header(MAY), "e",
    ]  # fmt: skip
    timed = render_context(items, Words(), 1000, order="time")
    assert timed.tokens == 2 * header + 5
    assert timed.text.split("\n") == [date_header(MAY), "c", "a b", "e", date_header(JUNE), "d"]


def test_items_of_one_date_and_position_stay_in_rank_order() -> None:
    items = [MemoryItem(text, (text,), MAY, 0) for text in ("second", "first", "third")]
    rendered = render_context(items, Words(), 1000)
    assert [item.text for item in rendered.items] == ["second", "first", "third"]
    assert rendered.dropped == 0


class Pieces:
    """Words, where a hyphen splits a word in two; truncation keeps whole words and the space
    after the last one (as a tokenizer's decoded prefix may)."""

    def count(self, text: str) -> int:
        return len(text.replace("-", " ").split())

    def truncate(self, text: str, max_tokens: int) -> str:
        return "".join(word + " " for word in text.split()[:max_tokens])


def test_fit_keeps_the_longest_prefix_that_counts_within_the_room() -> None:
    assert fit(Pieces(), "a b c d", 2) == "a b"
    assert fit(Pieces(), "a x-y b", 2) == "a"  # "a x-y" counts 3: one word less
    assert fit(Pieces(), "x-y-z b", 2) == ""  # no prefix fits
    assert fit(Pieces(), "a b", 0) == ""


def test_one_token_of_room_still_takes_the_cut_items_first_word() -> None:
    header = Pieces().count(date_header(None))  # "[undated]": one word
    items = [MemoryItem("a b c", ("t1",)), MemoryItem("d", ("t2",))]
    rendered = render_context(items, Pieces(), header + 1, turn_texts={"t1": "a b c"})
    assert rendered.text == "[undated]\na"
    assert rendered.tokens == header + 1
    assert rendered.cut is not None and rendered.cut.turns_left_out == ("t1",)
    assert rendered.dropped == 1
