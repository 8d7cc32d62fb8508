from __future__ import annotations

from datetime import datetime

import pytest

from benchmarks.answering.context import render_context
from benchmarks.answering.prompts import (
    NOT_MENTIONED,
    REFUSAL,
    adversarial_options,
    answer_messages,
)
from memsys.tokens import TokenCounter
from memsys.types import MemoryItem, Question


@pytest.fixture(scope="module")
def tokens() -> TokenCounter:
    return TokenCounter()


def test_token_counter_counts_and_truncates(tokens: TokenCounter) -> None:
    assert tokens.count("") == 0
    assert tokens.count("hello world") == 2
    assert tokens.truncate("hello world again", 2) == "hello world"
    assert tokens.name.startswith("bpe:SmolLM2")


def _item(text: str, day: int, position: int, score: float = 0.0) -> MemoryItem:
    return MemoryItem(
        text, (f"D{day}:{position}",), datetime(2023, 5, day, 13, 56), position, score
    )


def test_context_keeps_best_first_and_shows_time_order(tokens: TokenCounter) -> None:
    ranked = [
        _item("Ana: later news", 9, 5),
        _item("Ben: early news", 8, 2),
        _item("Ana: same day, first", 9, 1),
    ]
    context = render_context(ranked, tokens, budget=10_000)
    assert context.text.splitlines() == [
        "[8 May 2023, 1:56 pm]",
        "Ben: early news",
        "[9 May 2023, 1:56 pm]",
        "Ana: same day, first",
        "Ana: later news",
    ]
    assert context.turn_ids == ("D8:2", "D9:1", "D9:5")
    assert context.dropped == 0
    assert context.tokens == sum(tokens.count(line) for line in context.text.splitlines())


def test_context_in_rank_order_repeats_dates_and_counts_them(tokens: TokenCounter) -> None:
    ranked = [
        _item("Ana: later news", 9, 5),
        _item("Ben: early news", 8, 2),
        _item("Ana: same day, first", 9, 1),
    ]
    context = render_context(ranked, tokens, budget=10_000, order="rank")
    assert context.text.splitlines() == [
        "[9 May 2023, 1:56 pm]",
        "Ana: later news",
        "[8 May 2023, 1:56 pm]",
        "Ben: early news",
        "[9 May 2023, 1:56 pm]",
        "Ana: same day, first",
    ]
    assert context.turn_ids == ("D9:5", "D8:2", "D9:1")  # what the reader sees, best first
    assert context.tokens == sum(tokens.count(line) for line in context.text.splitlines())
    time_order = render_context(ranked, tokens, budget=10_000)
    assert set(time_order.turn_ids) == set(context.turn_ids)
    assert time_order.turn_ids != context.turn_ids


def test_the_item_that_overflows_is_cut_to_fit_and_ends_the_context(tokens: TokenCounter) -> None:
    session = MemoryItem(
        "Ben: I moved to Porto.\nAna: " + "filler " * 50 + "\nBen: bye",
        ("D8:1", "D8:2", "D8:3"),
        datetime(2023, 5, 8, 13, 56),
        1,
    )
    ranked = [_item("Ana: the important one", 9, 5), session, _item("Ana: short", 9, 1)]
    texts = {"D8:1": "I moved to Porto.", "D8:2": ("filler " * 50).strip(), "D8:3": "bye"}
    first_cost = tokens.count("Ana: the important one") + tokens.count("[9 May 2023, 1:56 pm]")
    room = 12
    budget = first_cost + tokens.count("[8 May 2023, 1:56 pm]") + room
    context = render_context(ranked, tokens, budget=budget, turn_texts=texts)
    cut_text = tokens.truncate(session.text, room).rstrip()
    assert [item.text for item in context.items] == [cut_text, "Ana: the important one"]
    assert context.tokens == budget and tokens.count(cut_text) == room
    assert context.dropped == 1  # the short item after the cut is not reached
    # Only the turn whose whole text survived the cut is shown.
    assert context.turn_ids == ("D8:1", "D9:5")
    assert context.cut is not None
    assert (context.cut.rank, context.cut.tokens_kept) == (1, room)
    assert context.cut.tokens_cut == tokens.count(session.text) - room
    assert context.cut.turns_left_out == ("D8:2", "D8:3")
    # Without the turns' texts, a cut item shows none of its turns.
    assert render_context(ranked, tokens, budget=budget).turn_ids == ("D9:5",)
    # No room left after the date header: nothing is cut, the context ends.
    short = render_context(ranked, tokens, budget=first_cost + 3)
    assert [item.text for item in short.items] == ["Ana: the important one"] and short.cut is None
    assert render_context(ranked, tokens, budget=1).items == ()


def test_a_whole_item_keeps_its_turns_and_records_no_cut(tokens: TokenCounter) -> None:
    ranked = [_item("Ana: the important one", 9, 5), _item("Ana: short", 9, 1)]
    context = render_context(ranked, tokens, budget=10_000, turn_texts={})
    assert context.turn_ids == ("D9:1", "D9:5") and context.cut is None and context.dropped == 0


def _question(category: str, **extra) -> Question:
    return Question("c:q1", "c", "Where did Ana run?", "Lisbon", category, **extra)


def test_uniform_template_names_the_refusal_and_todays_date() -> None:
    messages = answer_messages("uniform", _question("single_hop"), "CONTEXT")
    assert [m["role"] for m in messages] == ["system", "user"]
    assert "CONTEXT" in messages[1]["content"] and REFUSAL in messages[1]["content"]
    dated = _question("temporal_reasoning", question_date=datetime(2023, 5, 30, 23, 40))
    assert (
        "Today's date: 2023/05/30 (Tue) 23:40"
        in answer_messages("uniform", dated, "C")[1]["content"]
    )


def test_locomo_template_per_category() -> None:
    temporal = answer_messages("locomo", _question("temporal"), "C")[0]["content"]
    assert "dates of the conversation" in temporal
    adversarial = _question("adversarial", adversarial_answer="Porto")
    text = answer_messages("locomo", adversarial, "C", seed=3)[0]["content"]
    first, second = adversarial_options(adversarial, seed=3)
    assert f"(a) {first} (b) {second}" in text
    assert {first, second} == {NOT_MENTIONED, "Porto"}
    orders = {
        adversarial_options(
            Question(f"c:q{i}", "c", "?", "x", "adversarial", adversarial_answer="x"), 0
        )
        for i in range(20)
    }
    assert len(orders) == 2  # both orders occur across questions


def test_unknown_template_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown answer template 'haiku'"):
        answer_messages("haiku", _question("single_hop"), "C")
