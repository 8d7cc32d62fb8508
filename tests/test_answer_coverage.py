"""Answer coverage follows DPR's has-answer test (string mode)."""

from __future__ import annotations

import pytest

from benchmarks.metrics.coverage import answer_coverage, dpr_tokens


@pytest.mark.parametrize(
    ("context", "answers", "expected"),
    [
        ("She adopted Luna in 2021.", ["2021"], 1.0),
        ("She adopted Luna in 20211.", ["2021"], 0.0),  # tokens, not substrings
        ("ADOPTION AGENCIES were called", ["Adoption agencies"], 1.0),  # uncased
        ("Café opened", ["Cafe opened"], 0.0),  # the accent (a mark after NFD) stays in the token
        ("Café opened", ["café opened"], 1.0),
        ("the sunset, pink sky", ["pink sky", "blue"], 1.0),  # any accepted answer
        ("the pink and sky", ["pink sky"], 0.0),  # contiguous only
        ("anything", ["  ", "?!"[:0]], 0.0),  # an answer without tokens covers nothing
        ("", ["a"], 0.0),
    ],
)
def test_coverage(context: str, answers: list[str], expected: float) -> None:
    assert answer_coverage(context, answers) == expected


def test_tokens_split_like_dprs_simple_tokenizer() -> None:
    assert dpr_tokens("U.S. won't—2:30pm") == [
        "u",
        ".",
        "s",
        ".",
        "won",
        "'",
        "t",
        "—",
        "2",
        ":",
        "30pm",
    ]
