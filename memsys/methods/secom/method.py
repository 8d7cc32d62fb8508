"""SeCom: segment-level memory with compression-based denoising.

Paper: Pan et al., "SeCom: On Memory Construction and Retrieval for Personalized Conversational
Agents", ICLR 2025 (papers/secom.txt). Implemented: §2.1 (memory units are topical segments of
each session; the N retrieved units are handed to the reader in time order), §2.2 (the
conversation segmentation model: the configured segmenter, SeCom's own one-call LLM segmenter
:mod:`.segmenter` under ``extraction: llm``, zero-shot as the paper runs it on QA benchmarks;
:mod:`.segmentation`) and §2.3 (Eq. 2, ``f_R(u*, f_Comp(M), N)``: every segment is
compressed before indexing, retrieval ranks the compressed texts, the reader gets the original
segment text; :mod:`.denoising`, :mod:`.memory`, :mod:`.retrieval`), with BM25 or dense
retrieval (§3, implementation details). The options are :class:`SeComOptions`.
``docs/methods/secom.md`` maps every section to the code.

Readings taken where the paper is vague (each a config value):

* Exchange (``turns_per_exchange``, 2): the paper's user-bot exchange is a turn and its reply;
  LoCoMo has no user/bot roles, so an exchange is two consecutive turns counted from the session
  start (a trailing odd turn is an exchange of its own). The segmenter sees each exchange as
  ``speaker: text`` lines; a segment never splits an exchange.
* ``extraction: lite`` takes a segmenter that makes no LLM call (default: the ``embedding``
  segmenter, MiniLM cohesion valleys); ``extraction: llm`` takes the ``secom`` segmenter and the
  construction backbone. The paper's own low-resource variant (a RoBERTa segmenter fine-tuned
  on SuperDialSeg, Appendix A.11) is not available offline. Reflection is not used: the paper
  uses no rubric on LoCoMo ("for simplicity and fair comparison", Appendix A.1). A lite
  segmenter never receives the backbone, so a lite memory cannot depend on the answering model.
* Segment text: its turns as ``speaker: text`` lines; timestamp = the session date; position =
  the conversation index of its first turn; kind ``segment``.
* Compression (``compression``), as the authors' code applies it: each exchange of a segment is
  compressed on its own, its speaker labels forced (the code forces ``[human]``/``[bot]``,
  ``\\n`` and ``.``), and the index text is the compressed exchanges joined by newlines
  (:mod:`memsys.compression.passages`). ``llmlingua2`` is the paper's compressor (LLMLingua-2,
  xlm-roberta-large, meetingbank; ``llmlingua2_model`` a Hub id or a directory,
  ``compression_device`` cpu|cuda|auto), whose model weights are not available offline;
  ``self_info`` is its offline stand-in (Selective Context's self-information under
  SmolLM2-135M, a different criterion, :mod:`memsys.compression.self_info`), which on LoCoMo
  lowers recall where the paper's denoising raises it (docs/methods/secom.md); ``none`` is the
  "w/o denoising" ablation. ``compression_rate`` = tokens after / tokens before: 0.75 as in the
  paper (§3), 0.9 in ``secom_rate09`` as in the authors' released code. The query is not
  compressed (Eq. 2 compresses the memory only).
* Retrieval (``retriever``): ``bm25`` or ``dense``; dense ranks by inner product of the harness
  embedder's vectors (all-MiniLM-L6-v2, normalized: cosine) because the paper's
  ``multi-qa-mpnet-base-dot-v1`` is not available offline; ``embedder=mpnet_dot`` selects it
  where installed, unnormalized, so the inner product is the dot product it was trained for.
* N (``top_k``): the paper fixes a context budget (LoCoMo: 4k tokens). ``retrieve`` ranks every
  segment (or the best ``top_k``) best first; the harness keeps the best-ranked segments that fit
  ``answer.context_budget`` and shows them oldest first under their session dates
  (benchmarks/answering/context.py), which is the paper's "N memory units in time order".
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memsys.base import MemorySystem, MethodOptions, Services, check_choices
from memsys.compression import (
    LLMLINGUA2_MODEL,
    Compressor,
    build_compressor,
    render_turns,
)
from memsys.methods.secom.denoising import denoise
from memsys.methods.secom.memory import SeComMemory, Segment
from memsys.methods.secom.retrieval import rank_segments
from memsys.methods.secom.segmentation import segment_sessions
from memsys.retrievers import RETRIEVER_KINDS
from memsys.segment.base import Segmenter
from memsys.segment.build import segmenter_from_config
from memsys.types import Conversation, Question, Retrieval, ranking_of


@dataclass(frozen=True, kw_only=True)
class SeComOptions(MethodOptions):
    """SeCom's options, the keys of ``conf/method/secom.yaml`` (readings: the module docstring and
    ``docs/methods/secom.md``); ``segmenter`` is a segmenter's config (``conf/segmenter/``)."""

    segmenter: Mapping[str, Any]
    turns_per_exchange: int = 2
    compression: str = "self_info"
    compression_rate: float = 0.75
    llmlingua2_model: str = LLMLINGUA2_MODEL
    compression_device: str = "cpu"
    compression_threads: int | None = 1
    retriever: str = "dense"
    top_k: int | None = None

    def check(self) -> None:
        check_choices(("retriever", self.retriever, RETRIEVER_KINDS))
        segmenter_extraction = self.segmenter.get("extraction", "lite")
        if segmenter_extraction != self.extraction:
            raise ValueError(
                f"extraction: {self.extraction} needs a segmenter with extraction "
                f"{self.extraction}, but {self.segmenter.get('_target_')} has extraction "
                f"{segmenter_extraction} (a segmenter config without the key is lite; "
                "method=secom_llm runs SeCom's LLM segmenter)"
            )
        if self.turns_per_exchange < 1 or (self.top_k is not None and self.top_k < 1):
            raise ValueError("turns_per_exchange and top_k must be >= 1")


class SeCom(MemorySystem[SeComMemory]):
    """Segments per session, indexed by their compressed text, returned as the original."""

    #: 2: index texts are compressed exchange by exchange, speaker labels kept.
    construction_version = 2
    options_type = SeComOptions
    options: SeComOptions

    def __init__(self, services: Services, **options: Any) -> None:
        super().__init__(services, SeComOptions(**options))
        self.compressor: Compressor = build_compressor(
            self.options.compression,
            rate=self.options.compression_rate,
            cache_dir=services.cache_dir,
            llmlingua2_model=self.options.llmlingua2_model,
            device=self.options.compression_device,
            n_threads=self.options.compression_threads,
        )

    @functools.cached_property
    def segmenter(self) -> Segmenter:
        """The configured segmenter with its services (built on first use, so that a config
        can be instantiated without the backbone an LLM segmenter needs)."""
        backbone = self.services.backbone if self.uses_llm else None
        segmenter = segmenter_from_config(
            self.options.segmenter, embedder=self.services.embedder, backbone=backbone
        )
        if segmenter.training_request() is not None:
            raise ValueError("SeCom segments zero-shot on QA data; disable the reflection")
        return segmenter

    def construction_config(self) -> dict[str, Any]:
        return {
            "extraction": self.options.extraction,
            "segmenter": self.segmenter.identity(),
            "turns_per_exchange": self.options.turns_per_exchange,
            "compression": self.compressor.identity(),
        }

    def construct(self, conversation: Conversation) -> SeComMemory:
        sessions = [session for session in conversation.sessions if session.turns]
        spans, segmentation = segment_sessions(
            self.segmenter, sessions, self.options.turns_per_exchange
        )
        texts = [render_turns(span.turns) for span in spans]
        index_texts, compression = denoise(
            self.compressor, spans, texts, self.services.tokens.count
        )
        position = {turn.turn_id: index for index, turn in enumerate(conversation.turns)}
        segments = [
            Segment(
                text,
                index_text,
                tuple(turn.turn_id for turn in span.turns),
                span.timestamp,
                position[span.turns[0].turn_id],
            )
            for span, text, index_text in zip(spans, texts, index_texts, strict=True)
        ]
        report = {
            "sessions": len(sessions),
            "segments": len(segments),
            "segmentation": segmentation,
            "compression": compression,
        }
        return SeComMemory(segments, report)

    def prepare_queries(self, questions: Sequence[Question]) -> None:
        """Embed a batch's questions in one model call (the cache then serves ``retrieve``)."""
        if self.options.retriever == "dense":
            self.services.embedder.encode([question.question for question in questions])

    def retrieve(self, memory: SeComMemory, question: Question) -> Retrieval:
        """The best ``top_k`` segments (every segment, best first, by default); for the ranking
        metrics, every segment by the same search."""
        options = self.options
        items = rank_segments(
            memory, question.question, options.retriever, self.services, options.top_k
        )
        if options.top_k is None:
            return Retrieval(items, ranking=())
        every = rank_segments(memory, question.question, options.retriever, self.services, None)
        return Retrieval(items, ranking=ranking_of(every))

    def dump_memory(self, memory: SeComMemory) -> dict[str, Any]:
        return memory.to_json()

    def load_memory(self, payload: dict[str, Any]) -> SeComMemory:
        return SeComMemory.from_json(payload)

    def stored_texts(self, memory: SeComMemory) -> list[str]:
        """Each segment's text as the reader gets it (its compressed index text is a key)."""
        return [segment.text for segment in memory.segments]
