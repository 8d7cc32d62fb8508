"""ES-Mem: event-segmented, three-level memory with coarse-to-fine retrieval.

Paper: "ES-Mem: Event Segmentation-Based Memory for Long-Term Dialogue Agents"
(papers/es-mem.txt). Implemented: §3.2 layered memory construction (Eqs. 5-6, the boundary
prompt of Appendix E / Figure 8), §3.3 coarse-to-fine retrieval (Eqs. 7-10), Appendix B's
hyper-parameters, and §4.4's four ablations as config values. §3.1's segmentation is
:class:`.segmenter.ESMemSegmenter`, run on all sessions of a conversation together.

Memory. Each session is segmented into events; event i is a unit (b_i, s_i, r_i, t_i)
(:class:`.memory.Event`): r_i = its turns as ``speaker: text`` lines, t_i = its session's date,
s_i = its summary (:mod:`.summary`), b_i = a description of how the conversation moves from event
i - 1 (possibly in the previous session: events are ordered in time across sessions) to event i.
``extraction: llm`` asks the backbone for b_i with Figure 8's instructions (:mod:`.prompts`),
given both summaries and the last/first L = 4 turns of the two events; all boundaries of a
conversation go out in one batch (each needs only its two events, known once every session is
segmented). ``extraction: lite`` (no LLM call anywhere) fills the paper's
structured format, fitted to the embedder's input window (:mod:`.boundary`).

Retrieval (:mod:`.retrieval`). sim_bnd = cos(query, b_i) picks the top k = 10 anchors; each
anchor a activates the events a - w .. a + w (w = 3); a candidate j gets S_ctx(j) = the best
sim_bnd of the anchors whose window covers it and Score(j) = alpha·cos(query, s_j) +
(1 - alpha)·S_ctx(j) (alpha = 0.7); the top K events are returned with their raw turns. K
depends on the answering backbone in the paper (5 for the 3B models, 10 for GPT-4o-mini):
conf/method/esmem.yaml reads it from the backbone config's ``esmem_top_events`` (5 where a
backbone does not set it). K is a retrieval setting only, so one memory serves every backbone.

Every reading taken where the paper is vague, with the code of each paper component and the
ablations, is listed in the fidelity card ``docs/methods/esmem.md``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from hashlib import sha256
from typing import Any

from memsys.base import MemorySystem, MethodOptions, Services, check_choices
from memsys.llm.backbone import Backbone
from memsys.llm.structured import Rejected, ask_many
from memsys.llm.types import SamplingParams
from memsys.segment.base import (
    Boundaries,
    CostMeter,
    DialogueText,
    labels_from_gaps,
    segments_from_labels,
)
from memsys.types import Conversation, MemoryItem, Question, Retrieval, Session

from .boundary import EmbedderWindow, opening_boundary, shown_without_raw, template_boundary
from .memory import ESMemMemory, Event
from .prompts import BOUNDARY_SYSTEM_PROMPT, boundary_messages, boundary_user_prompt, clean_boundary
from .retrieval import (
    ANCHOR_MODES,
    CONTEXT_KINDS,
    RetrievalOptions,
    rank_events,
    rank_flat,
    rank_rest,
)
from .segmenter import ESMemSegmenter, lite_annotation
from .summary import distinctive_words, llm_summary, summary_without_raw

SEGMENTATION_MODES = ("dynamic", "turn", "session")


@dataclass(frozen=True)
class ConstructionOptions:
    """What changes the memory: event granularity, the segmenter's settings, summaries,
    boundary context (the YAML's ``construction`` group)."""

    segmentation: str = "dynamic"
    segmenter: dict[str, Any] = field(default_factory=dict)
    summaries: bool = True
    summary_keywords: int = 5
    boundary_context: int = 4
    boundary_max_tokens: int = 128


@dataclass(frozen=True, kw_only=True)
class ESMemOptions(MethodOptions):
    """ES-Mem's options, the keys of ``conf/method/esmem.yaml``: ``extraction`` and the
    ``construction`` and ``retrieval`` groups (readings: ``docs/methods/esmem.md``)."""

    construction: ConstructionOptions = field(default_factory=ConstructionOptions)
    retrieval: RetrievalOptions = field(default_factory=RetrievalOptions)

    def check(self) -> None:
        construction, retrieval = self.construction, self.retrieval
        check_choices(("segmentation", construction.segmentation, SEGMENTATION_MODES))
        sizes = (
            construction.boundary_context,
            construction.boundary_max_tokens,
            construction.summary_keywords,
        )
        if min(sizes) < 1:
            raise ValueError(
                "boundary_context, boundary_max_tokens and summary_keywords must be at least 1"
            )
        if retrieval.anchors not in ANCHOR_MODES:
            raise ValueError(f"anchors must be one of {ANCHOR_MODES}, got {retrieval.anchors!r}")
        if retrieval.context not in CONTEXT_KINDS:
            raise ValueError(f"context must be one of {CONTEXT_KINDS}, got {retrieval.context!r}")
        if not 0.0 <= retrieval.alpha <= 1.0:
            raise ValueError(f"alpha must be in [0, 1], got {retrieval.alpha}")
        if retrieval.anchors == "none" and retrieval.alpha != 1.0:
            raise ValueError("anchors: none ranks by summary similarity alone: alpha must be 1")
        if retrieval.anchor_k < 1 or retrieval.top_events < 1 or retrieval.window < 0:
            raise ValueError("anchor_k and top_events must be >= 1 and window >= 0")
        if not construction.summaries:
            if retrieval.context == "boundary_summary":
                raise ValueError(
                    "w/o raw needs summaries: a template boundary is then all raw turns"
                )
            if retrieval.anchors == "none":
                raise ValueError("without summaries and boundary anchors nothing ranks events")
            if retrieval.alpha != 0.0:
                raise ValueError("without summaries Score(j) = S_ctx(j): alpha must be 0")

    @property
    def needs_boundaries(self) -> bool:
        """Whether b_i is read: by boundary anchors, or as the context's boundary text (without
        either it is never built)."""
        return self.retrieval.anchors == "boundary" or self.retrieval.context == "boundary_summary"


class ESMem(MemorySystem[ESMemMemory]):
    """Event-segmented layered memory with boundary-anchored retrieval (module docstring)."""

    construction_version = 2
    options_type = ESMemOptions
    options: ESMemOptions

    def __init__(self, services: Services, **options: Any) -> None:
        super().__init__(services, ESMemOptions(**options))

    # --- construction -------------------------------------------------------------------------

    def construction_config(self) -> dict[str, Any]:
        construction = self.options.construction
        config: dict[str, Any] = {
            "extraction": self.options.extraction,
            "segmentation": construction.segmentation,
            "segmenter": {"version": ESMemSegmenter.version, **construction.segmenter},
            "summaries": construction.summaries,
            "boundaries": self.options.needs_boundaries,
            "boundary_context": construction.boundary_context,
        }
        if construction.summaries and not self.uses_llm:
            config["summary_keywords"] = construction.summary_keywords
        if self.uses_llm and self.options.needs_boundaries:
            prompt = BOUNDARY_SYSTEM_PROMPT + boundary_user_prompt(construction.summaries)
            config["boundary_max_tokens"] = construction.boundary_max_tokens
            config["boundary_prompt_sha256"] = sha256(prompt.encode()).hexdigest()[:16]
        return config

    def construct(self, conversation: Conversation) -> ESMemMemory:
        sessions = [session for session in conversation.sessions if session.turns]
        segmenter = ESMemSegmenter(
            extraction=self.options.extraction,  # type: ignore[arg-type]
            embedder=self.services.embedder,
            backbone=self._backbone() if self.uses_llm else None,
            **self.options.construction.segmenter,
        )
        segmenter.prepare([[turn.text for turn in session.turns] for session in sessions])
        meter = CostMeter(self.services.embedder)
        dialogues = [
            DialogueText(tuple(t.text for t in s.turns), tuple(t.speaker for t in s.turns))
            for s in sessions
        ]
        # Sessions are segmented alongside one another (stage 1 recurs only within a session).
        decisions = segmenter.segment_many(dialogues, meter)
        events: list[Event] = []
        position = 0
        for session, decided in zip(sessions, decisions, strict=True):
            events += self._events(session, position, decided, segmenter.keyword_limit)
            position += len(session.turns)
        if self.options.construction.summaries and not self.uses_llm:
            events = self._lite_summaries(events, conversation)
        report: dict[str, Any] = {
            "sessions": len(sessions),
            "events": len(events),
            "segmentation": {
                **meter.finish().to_json(),
                "single_turn_sessions": sum(len(session.turns) == 1 for session in sessions),
            },
        }
        if self.options.needs_boundaries:
            events, report["boundaries"] = self._describe_boundaries(events)
        memory = ESMemMemory(events, report)
        if events:
            memory.vectors(
                "boundary" if self.options.needs_boundaries else "summary", self.services.embedder
            )
        return memory

    def _events(
        self, session: Session, position: int, decided: Boundaries, keyword_limit: int
    ) -> list[Event]:
        """The events of one session (``position``: conversation index of its first turn); in
        ``llm`` mode with their summaries (the turns' annotations; the lite annotation of a
        one-turn session's turn, which is not segmented)."""
        turns = session.turns
        if self.options.construction.segmentation == "dynamic":
            spans = segments_from_labels(labels_from_gaps(len(turns), set(decided.gaps)))
        elif self.options.construction.segmentation == "turn":
            spans = [(index, index) for index in range(len(turns))]
        else:
            spans = [(0, len(turns) - 1)]
        summarize = self.options.construction.summaries and self.uses_llm
        notes = decided.annotations
        if summarize and not notes:
            notes = tuple(lite_annotation(turn.text, keyword_limit) for turn in turns)
        events = []
        for first, last in spans:
            span = turns[first : last + 1]
            topics, keywords, summary = (
                llm_summary(notes[first : last + 1]) if summarize else ((), (), "")
            )
            events.append(
                Event(
                    session_id=session.session_id,
                    timestamp=session.timestamp,
                    position=position + first,
                    turn_ids=tuple(turn.turn_id for turn in span),
                    lines=tuple(f"{turn.speaker}: {turn.text}" for turn in span),
                    topics=topics,
                    keywords=keywords,
                    summary=summary,
                )
            )
        return events

    def _lite_summaries(self, events: list[Event], conversation: Conversation) -> list[Event]:
        """Lite s_i: each event's distinctive words over the conversation's events (an event
        without a content word is summarized by its own text)."""
        text_of = {turn.turn_id: turn.text for turn in conversation.turns}
        texts = [[text_of[turn_id] for turn_id in event.turn_ids] for event in events]
        words = distinctive_words(texts, self.options.construction.summary_keywords)
        return [
            replace(event, keywords=chosen, summary=", ".join(chosen) or " ".join(event.lines))
            for event, chosen in zip(events, words, strict=True)
        ]

    def _describe_boundaries(self, events: list[Event]) -> tuple[list[Event], dict[str, Any]]:
        """b_i for every event: opening template, then LLM descriptions (one batch) or templates."""
        context = self.options.construction.boundary_context
        window = EmbedderWindow.of(self.services.embedder)
        meter = CostMeter()
        sources: Counter[str] = Counter()
        described: list[Event] = []
        replies: list[str | None] = [None] * len(events)
        if self.uses_llm and len(events) > 1:
            summaries = self.options.construction.summaries
            replies[1:] = ask_many(
                self._backbone(),
                [
                    boundary_messages(events[i - 1], events[i], context, summaries)
                    for i in range(1, len(events))
                ],
                params=SamplingParams(max_tokens=self.options.construction.boundary_max_tokens),
                read=_usable_boundary,
                report=meter.report("boundary"),
            )
        for index, event in enumerate(events):
            if index == 0:
                text, source = opening_boundary(event, context, window), "opening"
            elif replies[index] is not None:
                text, source = replies[index], "llm"
            else:
                text = template_boundary(events[index - 1], event, context, window)
                source = "template"
                if self.uses_llm:
                    source = "fallback"  # asked twice (counted in the report)
            sources[source] += 1
            described.append(replace(event, boundary=text, boundary_source=source))
        cost = meter.finish().to_json()
        cost.pop("texts_embedded")
        return described, {**cost, "sources": dict(sorted(sources.items()))}

    def _backbone(self) -> Backbone:
        if self.services.backbone is None:
            raise ValueError("ES-Mem with extraction: llm needs a backbone (services.backbone)")
        return self.services.backbone

    # --- retrieval ----------------------------------------------------------------------------

    def prepare_queries(self, questions: Sequence[Question]) -> None:
        """Embed the batch's questions in one model call (``retrieve`` then reads the cache)."""
        self.services.embedder.encode([question.question for question in questions])

    def rank(self, memory: ESMemMemory, question: Question) -> list[tuple[int, float]]:
        """``(event index, Score)`` of the top events for ``question``, best first."""
        return self.ranked(memory, question)[0]

    def ranked(
        self, memory: ESMemMemory, question: Question
    ) -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
        """``(event index, Score)`` of the top events for ``question``, best first, and of every
        event for the ranking metrics (the anchors' activated events in the same order, then
        the others: :func:`.retrieval.rank_rest`); one scoring pass serves both, and the top
        events are the first of the activated ones (each ranking is a full sort, cut after)."""
        if not memory.events:
            return [], []
        options = self.options.retrieval
        embedder = self.services.embedder
        query = embedder.encode([question.question])[0]
        summary_scores = (
            memory.vectors("summary", embedder) @ query
            if self.options.construction.summaries
            else None
        )
        if options.anchors == "none":
            assert summary_scores is not None  # checked in __init__
            every = rank_flat(summary_scores, len(memory.events))
            return every[: options.top_events], every
        anchor_scores = memory.vectors("boundary", embedder) @ query
        activated = rank_events(
            anchor_scores, summary_scores, anchor_k=options.anchor_k, window=options.window,
            alpha=options.alpha, top_events=len(memory.events),
        )  # fmt: skip
        rest = rank_rest(anchor_scores, summary_scores, activated, alpha=options.alpha)
        return activated[: options.top_events], activated + rest

    def retrieve(self, memory: ESMemMemory, question: Question) -> Retrieval:
        """The top events; for the ranking metrics, every event (:meth:`ranked`)."""
        top, every = self.ranked(memory, question)
        items = tuple(self._item(memory.events[j], score) for j, score in top)
        deeper = tuple(t for j, _ in every for t in memory.events[j].turn_ids)
        return Retrieval(items, ranking=deeper)

    def _item(self, event: Event, score: float) -> MemoryItem:
        if self.options.retrieval.context == "raw":
            text, kind = "\n".join(event.lines), "event"
        else:  # w/o raw: levels 1-2 with no verbatim turn in them
            shown = {"Boundary": shown_without_raw(event), "Summary": summary_without_raw(event)}
            text = "\n".join(f"{name}: {value}" for name, value in shown.items() if value)
            kind = "event_summary"
        return MemoryItem(text, event.turn_ids, event.timestamp, event.position, score, kind)

    # --- serialization ------------------------------------------------------------------------

    def dump_memory(self, memory: ESMemMemory) -> dict[str, Any]:
        return memory.to_json()

    def load_memory(self, payload: dict[str, Any]) -> ESMemMemory:
        return ESMemMemory.from_json(payload)

    def stored_texts(self, memory: ESMemMemory) -> list[str]:
        """Each event: its summary (when built) and its lines."""
        return ["\n".join(filter(None, (event.summary, *event.lines))) for event in memory.events]


def _usable_boundary(index: int, text: str) -> str | Rejected:
    """A boundary description from a reply, or why it cannot be used."""
    cleaned = clean_boundary(text)
    if cleaned is None:
        return Rejected(
            "it was not a description of the change between the two events in a sentence"
        )
    return cleaned
