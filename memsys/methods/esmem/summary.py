"""Level 2, the event summaries s_i (§3.2): the index for fine-grained content matching.

``llm``: s_i is what the paper says it is, "the core topics and keywords extracted from each
dialogue turn within the event" (the segmenter's stage-1 annotations), embedded as
``"<topic>; <topic>: <kw>, <kw>, ..."``.

``lite``: no LLM names topics, so s_i is the event's ``limit`` most distinctive content words:
tf-idf, with tf = the word's count in the event and idf = log(events / events containing it) over
the conversation's events, so words every event shares (names, greetings that escaped the
stop-word list) rank last. Frequent words alone, as the per-turn lite annotations pick them,
make a poor index: summaries of each turn's five most frequent content words ranked no better
than leaving s_i out of the ranking (alpha = 0; docs/methods/esmem.md, "Measurements").
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from memsys.segment.lexical import content_words

from .memory import Event, distinct


def llm_summary(
    annotations: Sequence[Mapping[str, Any]],
) -> tuple[tuple[str, ...], tuple[str, ...], str]:
    """``(topics, keywords, s_i)`` from the stage-1 annotations of an event's turns."""
    topics = distinct([str(note["topic"]) for note in annotations])
    keywords = distinct([str(word) for note in annotations for word in note["keywords"]])
    return topics, keywords, f"{'; '.join(topics)}: {', '.join(keywords)}"


def summary_without_raw(event: Event) -> str:
    """s_i as the "w/o raw" reader sees it: the summary, unless it is made of no topic and no
    keyword, which is a lite event without a content word indexed by its own turns (verbatim
    text the ablation removes): then nothing.

    >>> summary_without_raw(Event("s", None, 0, ("D1:1",), ("A: so fun!",), (), (),
    ...     summary="A: so fun!"))
    ''
    """
    return event.summary if event.topics or event.keywords else ""


def distinctive_words(events: Sequence[Sequence[str]], limit: int) -> list[tuple[str, ...]]:
    """For each event (given as its turn texts), its ``limit`` content words of highest tf-idf
    over ``events``; ties go to the more frequent word, then to the one said first.

    >>> distinctive_words([["I adopted a puppy", "a puppy? cute puppy"], ["my puppy ran"],
    ...                    ["we baked bread", "bread with seeds"]], limit=2)
    [('puppy', 'adopted'), ('ran', 'puppy'), ('bread', 'baked')]
    """
    words = [[word for text in texts for word in content_words(text)] for texts in events]
    containing = Counter(word for event_words in words for word in set(event_words))
    chosen = []
    for event_words in words:
        counts = Counter(event_words)
        first_said = {word: -index for index, word in reversed(list(enumerate(event_words)))}

        def weight(word: str, counts: Counter[str] = counts) -> float:
            return counts[word] * math.log(len(events) / containing[word])

        ranked = sorted(counts, key=lambda w: (weight(w), counts[w], first_said[w]), reverse=True)
        chosen.append(tuple(ranked[:limit]))
    return chosen
