"""Answer coverage: does the gold answer's text reach the reader at all? The has-answer test of
open-domain QA retrieval (DPR's ``has_answer``, Karpukhin et al. 2020, string mode), on the
context a method hands the reader. Needs no LLM, and unlike evidence recall it also scores
methods whose memory is not dialogue turns (summaries, facts, propositions).

Both texts are split into tokens as DPR's ``SimpleTokenizer`` does (runs of letters, digits and
marks, or any single other non-space character), lower-cased after Unicode NFD normalization;
an answer is covered when its token sequence occurs contiguously in the context's. That is
strict for LoCoMo's long free-form answers ("Psychology, counseling certification"), which a
context rarely holds verbatim: read it as a lower bound on what the reader could copy.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

import regex

#: DPR's SimpleTokenizer: ``ALPHA_NUM`` runs, else one ``NON_WS`` character.
_TOKEN = regex.compile(r"[\p{L}\p{N}\p{M}]+|[^\p{Z}\p{C}]")


def dpr_tokens(text: str) -> list[str]:
    """``text`` as DPR's uncased SimpleTokenizer tokens.

    >>> dpr_tokens("Caroline's 7 May, 2023!")
    ['caroline', "'", 's', '7', 'may', ',', '2023', '!']
    """
    return [token.lower() for token in _TOKEN.findall(unicodedata.normalize("NFD", text))]


def covers(context_tokens: Sequence[str], answer: str) -> bool:
    """Whether ``answer``'s tokens occur contiguously in ``context_tokens``; an answer with no
    tokens (punctuation only, empty) is never covered."""
    wanted = dpr_tokens(answer)
    if not wanted:
        return False
    width = len(wanted)
    first = wanted[0]
    return any(
        context_tokens[start : start + width] == wanted
        for start, token in enumerate(context_tokens[: len(context_tokens) - width + 1])
        if token == first
    )


def answer_coverage(context: str, answers: Sequence[str]) -> float:
    """1.0 when any of ``answers`` (a question's accepted answers) occurs in ``context``, else 0.0.

    >>> answer_coverage("Melanie: I went on 7 May 2023.", ["7 May 2023"])
    1.0
    >>> answer_coverage("Melanie: I went in May.", ["7 May 2023"])
    0.0
    """
    tokens = dpr_tokens(context)
    return float(any(covers(tokens, answer) for answer in answers))
