"""SeCom: segment-level memory with compression-based denoising.

Paper: Pan et al., "SeCom: On Memory Construction and Retrieval for Personalized Conversational
Agents", ICLR 2025 (papers/secom.txt). Implemented: §2.1 (memory units are topical segments of
each session; the N retrieved units are handed to the reader in time order), §2.2 (the
conversation segmentation model: the configured segmenter, SeCom's own one-call LLM segmenter
:mod:`memsys.segment.secom` under ``extraction: llm``, zero-shot as the paper runs it on QA
benchmarks) and §2.3 (Eq. 2, ``f_R(u*, f_Comp(M), N)``: every segment is compressed before
indexing, retrieval ranks the compressed texts, the reader gets the original segment text), with
BM25 or dense retrieval (§3, implementation details).

Readings taken where the paper is vague (each a config value):

* Exchange (``turns_per_exchange``, 2): METHODS.md reads the paper's user-bot exchange as a turn
  and its reply; LoCoMo has no user/bot roles, so an exchange is two consecutive turns counted
  from the session start (a trailing odd turn is an exchange of its own). The segmenter sees
  each exchange as ``speaker: text`` lines; a segment never splits an exchange.
* ``extraction: lite`` takes a segmenter that makes no LLM call (default: the ``embedding``
  segmenter, MiniLM cohesion valleys); ``extraction: llm`` takes the ``secom`` segmenter and the
  construction backbone. The paper's own low-resource variant (a RoBERTa segmenter fine-tuned
  on SuperDialSeg, Appendix A.11) is not available offline. Reflection is not used: the paper
  uses no rubric on LoCoMo ("for simplicity and fair comparison", Appendix A.1). A lite
  segmenter never receives the backbone, so a lite memory cannot depend on the answering model.
* Segment text: its turns as ``speaker: text`` lines; timestamp = the session date; position =
  the conversation index of its first turn; kind ``segment``.
* Compression (``compression``): ``llmlingua2`` is the paper's (LLMLingua-2,
  xlm-roberta-large, meetingbank), unavailable offline; ``self_info`` (the offline default)
  keeps the words with the highest self-information under the embedded SmolLM2-135M
  (:mod:`memsys.compression`); ``none`` is the "w/o denoising" ablation. ``compression_rate`` =
  tokens after / tokens before: 0.75 as in the paper (the authors' code defaults to 0.9). The
  query is not compressed (Eq. 2 compresses the memory only).
* Retrieval (``retriever``): ``bm25`` or ``dense``; dense uses the harness embedder
  (all-MiniLM-L6-v2, cosine) because the paper's ``multi-qa-mpnet-base-dot-v1`` is not available
  offline (``embedder.model`` selects it where installed).
* N (``top_k``): the paper fixes a context budget (LoCoMo: 4k tokens). ``retrieve`` ranks every
  segment (or the best ``top_k``) best first; the harness keeps the best-ranked segments that fit
  ``answer.context_budget`` and shows them oldest first under their session dates
  (benchmarks/answering/context.py), which is the paper's "N memory units in time order".
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from hydra.utils import instantiate

from memsys.base import EXTRACTION_MODES, MemorySystem, Services, check_choices
from memsys.compression import COMPRESSIONS, LLMLINGUA2_MODEL, Compressor, build_compressor
from memsys.kvstore import SQLiteKV
from memsys.retrievers import RETRIEVER_KINDS, Retriever, build_retriever
from memsys.segment.base import Segmenter, summed_costs
from memsys.types import Conversation, MemoryItem, Question, Retrieval, Session, Turn


def render_turns(turns: Sequence[Turn]) -> str:
    """Turns as a reader sees them: ``speaker: text``, one per line."""
    return "\n".join(f"{turn.speaker}: {turn.text}" for turn in turns)


@dataclass(frozen=True)
class Segment:
    """One memory unit: the original text (for the reader) and its compressed index text."""

    text: str
    index_text: str
    turn_ids: tuple[str, ...]
    timestamp: datetime | None
    position: int

    def item(self, score: float) -> MemoryItem:
        """The segment as the reader gets it: the original text, never the compressed one."""
        return MemoryItem(
            self.text, self.turn_ids, self.timestamp, self.position, score, kind="segment"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "index_text": self.index_text,
            "turn_ids": list(self.turn_ids),
            "timestamp": self.timestamp.isoformat() if self.timestamp else None,
            "position": self.position,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Segment:
        timestamp = datetime.fromisoformat(data["timestamp"]) if data["timestamp"] else None
        return cls(
            data["text"], data["index_text"], tuple(data["turn_ids"]), timestamp, data["position"]
        )


class SeComMemory:
    """A conversation's segments in time order, the construction report, and retrieval indexes
    over the index texts (built on first use, not serialized)."""

    def __init__(self, segments: list[Segment], report: dict[str, Any]) -> None:
        self.segments = segments
        self.report = report
        self._retrievers: dict[str, Retriever] = {}

    def retriever(self, kind: str, services: Services) -> Retriever:
        """The ``kind`` index over the compressed texts, built once."""
        if kind not in self._retrievers:
            texts = [segment.index_text for segment in self.segments]
            self._retrievers[kind] = build_retriever(kind, texts, services.embedder)
        return self._retrievers[kind]


class SeCom(MemorySystem[SeComMemory]):
    """Segments per session, indexed by their compressed text, returned as the original."""

    construction_version = 1

    def __init__(
        self,
        services: Services,
        *,
        segmenter: Mapping[str, Any],
        extraction: str = "lite",
        turns_per_exchange: int = 2,
        compression: str = "self_info",
        compression_rate: float = 0.75,
        llmlingua2_model: str = LLMLINGUA2_MODEL,
        compression_threads: int | None = 1,
        retriever: str = "dense",
        top_k: int | None = None,
    ) -> None:
        super().__init__(services)
        check_choices(
            ("extraction", extraction, EXTRACTION_MODES),
            ("compression", compression, COMPRESSIONS),
            ("retriever", retriever, RETRIEVER_KINDS),
        )
        segmenter_extraction = segmenter.get("extraction", "lite")
        if segmenter_extraction != extraction:
            raise ValueError(
                f"extraction: {extraction} needs a segmenter with extraction {extraction}, but "
                f"{segmenter.get('_target_')} has extraction {segmenter_extraction} (a segmenter "
                "config without the key is lite; method=secom_llm runs SeCom's LLM segmenter)"
            )
        if turns_per_exchange < 1 or (top_k is not None and top_k < 1):
            raise ValueError("turns_per_exchange and top_k must be >= 1")
        self.extraction = extraction
        self.uses_llm = extraction == "llm"
        self.segmenter_config = segmenter
        self.turns_per_exchange = turns_per_exchange
        self.retriever = retriever
        self.top_k = top_k
        store = (
            SQLiteKV(services.cache_dir / "compressions.sqlite", table="compressions")
            if services.cache_dir is not None
            else None
        )
        self.compressor: Compressor = build_compressor(
            compression,
            rate=compression_rate,
            store=store,
            llmlingua2_model=llmlingua2_model,
            n_threads=compression_threads,
        )

    @functools.cached_property
    def segmenter(self) -> Segmenter:
        """The configured segmenter with its services (built on first use, so that a config
        can be instantiated without the backbone an LLM segmenter needs)."""
        backbone = self.services.backbone if self.uses_llm else None
        segmenter = instantiate(
            self.segmenter_config, embedder=self.services.embedder, backbone=backbone
        )
        if segmenter.training_request() is not None:
            raise ValueError("SeCom segments zero-shot on QA data; disable the reflection")
        return segmenter

    def construction_config(self) -> dict[str, Any]:
        return {
            "extraction": self.extraction,
            "segmenter": self.segmenter.identity(),
            "turns_per_exchange": self.turns_per_exchange,
            "compression": self.compressor.identity(),
        }

    def exchanges(self, turns: Sequence[Turn]) -> list[tuple[Turn, ...]]:
        """Consecutive groups of ``turns_per_exchange`` turns, from the session start."""
        size = self.turns_per_exchange
        return [tuple(turns[start : start + size]) for start in range(0, len(turns), size)]

    def construct(self, conversation: Conversation) -> SeComMemory:
        sessions = [session for session in conversation.sessions if session.turns]
        spans, segmentation = self.segment_sessions(sessions)
        texts = [render_turns(turns) for _, turns in spans]
        index_texts, compression = self.compress(texts)
        position = {turn.turn_id: index for index, turn in enumerate(conversation.turns)}
        segments = [
            Segment(
                text, index_text, tuple(t.turn_id for t in turns), date, position[turns[0].turn_id]
            )
            for (date, turns), text, index_text in zip(spans, texts, index_texts, strict=True)
        ]
        report = {
            "sessions": len(sessions),
            "segments": len(segments),
            "segmentation": segmentation,
            "compression": compression,
        }
        return SeComMemory(segments, report)

    def segment_sessions(
        self, sessions: Sequence[Session]
    ) -> tuple[list[tuple[datetime | None, tuple[Turn, ...]]], dict[str, Any]]:
        """Each session's segments as (session date, turns), and what segmenting cost."""
        exchanges = [self.exchanges(session.turns) for session in sessions]
        exchange_texts = [[render_turns(group) for group in groups] for groups in exchanges]
        self.segmenter.prepare(exchange_texts)
        spans, costs = [], []
        for session, groups, texts in zip(sessions, exchanges, exchange_texts, strict=True):
            segmentation = self.segmenter.segment(texts)
            costs.append(segmentation.cost)
            for first, last in segmentation.segments:
                turns = tuple(turn for group in groups[first : last + 1] for turn in group)
                spans.append((session.timestamp, turns))
        return spans, summed_costs(costs)

    def compress(self, texts: Sequence[str]) -> tuple[list[str], dict[str, Any]]:
        """The index texts, and the compression's identity, token counts and cost."""
        compressor, count = self.compressor, self.services.tokens.count
        done_before, seconds_before = compressor.texts_compressed, compressor.seconds
        index_texts = compressor.compress_many(texts)
        return index_texts, {
            **compressor.identity(),
            "tokens_before": sum(count(text) for text in texts),
            "tokens_after": sum(count(text) for text in index_texts),
            "texts_compressed": compressor.texts_compressed - done_before,
            "seconds": round(compressor.seconds - seconds_before, 6),
        }

    def prepare_queries(self, questions: Sequence[Question]) -> None:
        """Embed a batch's questions in one model call (the cache then serves ``retrieve``)."""
        if self.retriever == "dense":
            self.services.embedder.encode([question.question for question in questions])

    def retrieve(self, memory: SeComMemory, question: Question) -> Retrieval:
        k = len(memory.segments) if self.top_k is None else self.top_k
        hits = memory.retriever(self.retriever, self.services).search(question.question, k)
        return Retrieval(tuple(memory.segments[index].item(score) for index, score in hits))

    def dump_memory(self, memory: SeComMemory) -> dict[str, Any]:
        return {
            "segments": [segment.to_json() for segment in memory.segments],
            "report": memory.report,
        }

    def load_memory(self, payload: dict[str, Any]) -> SeComMemory:
        segments = [Segment.from_json(segment) for segment in payload["segments"]]
        return SeComMemory(segments, payload["report"])
