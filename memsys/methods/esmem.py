"""ES-Mem: event-segmented, three-level memory with coarse-to-fine retrieval.

Paper: "ES-Mem: Event Segmentation-Based Memory for Long-Term Dialogue Agents"
(papers/es-mem.txt). Implemented: §3.2 layered memory construction (Eqs. 5-6, the boundary
prompt of Appendix E / Figure 8), §3.3 coarse-to-fine retrieval (Eqs. 7-10), Appendix B's
hyper-parameters, and §4.4's four ablations as config values. §3.1's segmentation is
:class:`memsys.segment.esmem.ESMemSegmenter`, run once per session.

Memory. Each session is segmented into events; event i is a unit (b_i, s_i, r_i, t_i):
s_i = the topics and keywords the segmenter annotated on its turns (distinct, in turn order,
embedded as ``"<topic>; <topic>: <kw>, <kw>, ..."``), r_i = its turns as ``speaker: text`` lines,
t_i = its session's date, and b_i = a description of how the conversation moves from event
i - 1 (possibly in the previous session: events are ordered in time across sessions) to event i.
``extraction: llm`` asks the backbone for b_i with Figure 8's instructions, given both summaries
and the last/first L = 4 turns of the two events; all boundaries of a conversation go out in one
batch. ``extraction: lite`` (no LLM call anywhere) uses the template of the paper's structured
format, ``"<topics of i-1> ended. Transitioned to <topics of i>. Context: <snippet>"``.

Retrieval. sim_bnd = cos(query, b_i) picks the top k = 10 anchors; each anchor a activates the
events a - w .. a + w (w = 3); a candidate j gets S_ctx(j) = the best sim_bnd of the anchors
whose window covers it and Score(j) = alpha·cos(query, s_j) + (1 - alpha)·S_ctx(j)
(alpha = 0.7); the top K events are returned with their raw turns. K depends on the answering
backbone in the paper (5 for the 3B models, 10 for GPT-4o-mini): conf/method/esmem.yaml reads it
from the backbone config's ``esmem_top_events`` (5 where a backbone does not set it). K is a
retrieval setting only, so one constructed memory serves every backbone.

Readings taken where the paper is vague (config values where they are choices):

* The first event of a conversation has no predecessor; its boundary is the opening template
  ``"The conversation opens with <topics>. Context: <its first L turns>"`` in both modes (no
  LLM call): it still anchors queries about how the history began.
* A one-turn session is not segmented (the segmenter annotates dialogues of two or more turns);
  its single event's summary is the lite annotation of the turn (counted).
* A boundary reply is unusable when the request failed, or when, after stripping a leading
  "Boundary description:" label and quotes, it has fewer than three words, is JSON, or echoes
  the prompt's scaffolding (a "Keywords:" line, "Event A (the previous event)"; merely naming
  "Event A" is fine). Unusable replies get the lite template and are counted
  (``report.boundaries.fallbacks``); a free-text reply is not asked again, since a repeated
  greedy request would be served the same reply from the cache.
* Ties in Score(j) go to the event nearer its best anchor, then to the earlier event; with
  alpha = 0 (the no-summary ablation) this orders each activated window outwards from its anchor.
* Items come back best first, as the harness contract asks: the harness keeps them in that
  order within the context budget and shows the kept ones in time order, which is the paper's
  "raw records ... in time order" whenever all K fit.
* Summaries and lite boundaries can exceed the embedder's input length (MiniLM: 256 word
  pieces) for long events; the embedder then reads their beginning, which the formats put first.
* Ablations (§4.4, Figure 3): ``segmentation: turn`` (w/o es: each turn its own event, the fixed
  granularity the paper argues against; ``session`` is the other fixed reading); the segmenter
  still runs so that the summaries are its per-turn annotations, so in llm mode the ablation also
  pays for stage-2 calls whose boundaries it ignores. ``anchors: summary`` with ``alpha: 1``
  (w/o bnd: ranking by summary similarity, which is flat top-K retrieval while k >= K; no
  boundary text is built); ``alpha: 0`` (w/o sum:
  ranking by the inherited anchor score only); ``context: summary`` (w/o raw: items are the
  boundary and summary text; their turn ids still name the event's turns, so evidence recall
  measures what was located, not what the reader saw verbatim).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from hashlib import sha256
from typing import Any

import numpy as np

from memsys.base import EXTRACTION_MODES, MemorySystem, Services, check_choices
from memsys.embed import Embedder
from memsys.llm.backbone import Backbone
from memsys.llm.types import LLMRequest, SamplingParams
from memsys.segment.base import CostMeter, SegmentationCost, ask_many, summed_costs
from memsys.segment.esmem import ESMemSegmenter, lite_annotation
from memsys.types import Conversation, MemoryItem, Question, Retrieval, Session

SEGMENTATION_MODES = ("dynamic", "turn", "session")
ANCHOR_INDEXES = ("boundary", "summary")
CONTEXT_KINDS = ("raw", "summary")

#: Figure 8's instructions in the project's words.
BOUNDARY_SYSTEM_PROMPT = """\
You study long conversations and the boundaries between their events. In human memory an event \
boundary is a retrieval anchor: it marks where the topic, the task or the focus of a \
conversation changes. Your task is NOT to summarize the two events. Describe HOW the \
conversation moves from the previous event to the next one.

### Focus on
- which topic or intent is coming to an end;
- which new topic or focus is starting;
- any explicit or implicit signal of the transition (a topic shift, a refocusing, a casual \
segue).

### Output rules
- Third person, objective.
- Short, but semantically clear.
- Do not explain your reasoning.
- Reply with the boundary description text only."""

BOUNDARY_USER_PROMPT = """\
Event A (the previous event):
- Topic summary: {previous_topics}
- Keywords: {previous_keywords}
- Dialogue snippet:
{previous_snippet}

Event B (the current event):
- Topic summary: {current_topics}
- Keywords: {current_keywords}
- Dialogue snippet:
{current_snippet}

Describe how the conversation moves from Event A to Event B. Reply with the boundary \
description text only."""

#: The prompt's scaffolding, which an unusable reply echoes back (a reply may name "Event A").
_ECHO = re.compile(
    r"^\s*-?\s*(?:topic summary|keywords|dialogue snippet)\s*:|event [ab] \(the \w+ event\)",
    re.IGNORECASE | re.MULTILINE,
)
_LABEL = re.compile(r"^[\s*_#]*boundary description[\s*_]*:[\s*_]*", re.IGNORECASE)
_WORD = re.compile(r"[^\W\d_]{2,}")


@dataclass(frozen=True)
class Event:
    """One memory unit M_i: boundary, summary (topics and keywords), raw turns, date."""

    session_id: str
    timestamp: datetime | None
    position: int
    turn_ids: tuple[str, ...]
    lines: tuple[str, ...]
    topics: tuple[str, ...]
    keywords: tuple[str, ...]
    boundary: str = ""
    boundary_source: str = ""

    def summary(self) -> str:
        """s_i as embedded: ``"<topic>; <topic>: <kw>, <kw>"`` (one turn: its annotation text)."""
        return f"{'; '.join(self.topics)}: {', '.join(self.keywords)}"

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["timestamp"] = self.timestamp.isoformat() if self.timestamp else None
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Event:
        timestamp = datetime.fromisoformat(data["timestamp"]) if data["timestamp"] else None
        fields = {key: tuple(data[key]) for key in ("turn_ids", "lines", "topics", "keywords")}
        return cls(
            session_id=data["session_id"],
            timestamp=timestamp,
            position=int(data["position"]),
            boundary=data["boundary"],
            boundary_source=data["boundary_source"],
            **fields,
        )


class ESMemMemory:
    """A conversation's events in time order and how they were built; the summary and boundary
    vectors are embedded at construction (after loading, on first retrieval: a cache lookup)."""

    def __init__(self, events: list[Event], report: dict[str, Any]) -> None:
        self.events = events
        self.report = report
        self._vectors: dict[str, np.ndarray] = {}

    def vectors(self, level: str, embedder: Embedder) -> np.ndarray:
        """Unit vectors of every event's ``summary`` or ``boundary`` text, shape (events, dim).

        Both levels are embedded in one batch; boundaries exist for all events or for none.
        """
        if not self._vectors:
            summaries = [event.summary() for event in self.events]
            boundaries = [event.boundary for event in self.events if event.boundary]
            vectors = embedder.encode(summaries + boundaries)
            self._vectors["summary"] = vectors[: len(summaries)]
            if boundaries:
                self._vectors["boundary"] = vectors[len(summaries) :]
        return self._vectors[level]


@dataclass(frozen=True)
class ConstructionOptions:
    """What changes the memory: event granularity, the segmenter's settings, boundary context."""

    segmentation: str = "dynamic"
    segmenter: dict[str, Any] = field(default_factory=dict)
    boundary_context: int = 4
    boundary_max_tokens: int = 128

    def __post_init__(self) -> None:
        if self.segmentation not in SEGMENTATION_MODES:
            raise ValueError(
                f"segmentation must be one of {SEGMENTATION_MODES}, got {self.segmentation!r}"
            )
        if self.boundary_context < 1 or self.boundary_max_tokens < 1:
            raise ValueError("boundary_context and boundary_max_tokens must be at least 1")


@dataclass(frozen=True)
class RetrievalOptions:
    """Coarse-to-fine retrieval settings (Appendix B) and the ablation switches."""

    anchors: str = "boundary"
    anchor_k: int = 10
    window: int = 3
    alpha: float = 0.7
    top_events: int = 5
    context: str = "raw"

    def __post_init__(self) -> None:
        if self.anchors not in ANCHOR_INDEXES:
            raise ValueError(f"anchors must be one of {ANCHOR_INDEXES}, got {self.anchors!r}")
        if self.context not in CONTEXT_KINDS:
            raise ValueError(f"context must be one of {CONTEXT_KINDS}, got {self.context!r}")
        if not 0.0 <= self.alpha <= 1.0:
            raise ValueError(f"alpha must be in [0, 1], got {self.alpha}")
        if self.anchor_k < 1 or self.top_events < 1 or self.window < 0:
            raise ValueError("anchor_k and top_events must be >= 1 and window >= 0")


def rank_events(
    anchor_scores: np.ndarray,
    summary_scores: np.ndarray,
    *,
    anchor_k: int,
    window: int,
    alpha: float,
    top_events: int,
) -> list[tuple[int, float]]:
    """Eqs. 8-10 on precomputed similarities: ``(event index, Score)`` of the top events, best
    first. Anchors are the ``anchor_k`` best ``anchor_scores``; ties as in the module docstring.

    >>> rank_events(np.array([0.9, 0.1, 0.2]), np.array([0.0, 0.5, 0.4]),
    ...             anchor_k=1, window=1, alpha=0.5, top_events=2)
    [(1, 0.7), (0, 0.45)]
    """
    order = np.argsort(-anchor_scores, kind="stable")[:anchor_k]
    context: dict[int, tuple[float, int]] = {}  # j -> (S_ctx(j), distance to that anchor)
    for anchor in order.tolist():
        score = float(anchor_scores[anchor])
        for j in range(max(0, anchor - window), min(len(anchor_scores), anchor + window + 1)):
            best = context.get(j)
            candidate = (score, abs(j - anchor))
            if best is None or (-candidate[0], candidate[1]) < (-best[0], best[1]):
                context[j] = candidate
    scored = [
        (alpha * float(summary_scores[j]) + (1 - alpha) * s_ctx, distance, j)
        for j, (s_ctx, distance) in context.items()
    ]
    scored.sort(key=lambda entry: (-entry[0], entry[1], entry[2]))
    return [(j, score) for score, _, j in scored[:top_events]]


def opening_boundary(event: Event, context: int) -> str:
    """b_1, for the event that starts the conversation (no predecessor)."""
    snippet = " / ".join(event.lines[:context])
    return f"The conversation opens with {'; '.join(event.topics)}. Context: {snippet}"


def template_boundary(previous: Event, current: Event, context: int) -> str:
    """The lite b_i: the paper's structured format over both summaries and the snippet."""
    snippet = " / ".join(previous.lines[-context:] + current.lines[:context])
    return (
        f"{'; '.join(previous.topics)} ended. Transitioned to {'; '.join(current.topics)}. "
        f"Context: {snippet}"
    )


def boundary_messages(previous: Event, current: Event, context: int) -> list[dict[str, str]]:
    """The Figure 8 request for the boundary between ``previous`` and ``current``."""
    prompt = BOUNDARY_USER_PROMPT.format(
        previous_topics="; ".join(previous.topics),
        previous_keywords=", ".join(previous.keywords),
        previous_snippet="\n".join(previous.lines[-context:]),
        current_topics="; ".join(current.topics),
        current_keywords=", ".join(current.keywords),
        current_snippet="\n".join(current.lines[:context]),
    )
    return [
        {"role": "system", "content": BOUNDARY_SYSTEM_PROMPT},
        {"role": "user", "content": prompt},
    ]


def clean_boundary(text: str) -> str | None:
    """A usable boundary description from a reply, or ``None`` (rules in the module docstring).

    >>> clean_boundary('Boundary description: "The talk turns from pets to cooking."')
    'The talk turns from pets to cooking.'
    >>> clean_boundary('{"boundary": "x"}') is None, clean_boundary("- Keywords: a, b") is None
    (True, True)
    """
    cleaned = " ".join(_LABEL.sub("", text).split()).strip("\"'` ")
    if len(_WORD.findall(cleaned)) < 3 or cleaned[:1] in "{[" or _ECHO.search(text):
        return None
    return cleaned


def distinct(values: Sequence[str]) -> tuple[str, ...]:
    """Non-empty values once each (case-insensitive), first spelling and order kept."""
    seen: dict[str, str] = {}
    for value in values:
        text = " ".join(str(value).split())
        if text and text.lower() not in seen:
            seen[text.lower()] = text
    return tuple(seen.values())


class ESMem(MemorySystem[ESMemMemory]):
    """Event-segmented layered memory with boundary-anchored retrieval (module docstring)."""

    construction_version = 1

    def __init__(
        self,
        services: Services,
        *,
        extraction: str = "lite",
        construction: dict[str, Any] | None = None,
        retrieval: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(services)
        check_choices(("extraction", extraction, EXTRACTION_MODES))
        self.extraction = extraction
        self.uses_llm = extraction == "llm"
        self.construction = ConstructionOptions(**dict(construction or {}))
        self.retrieval = RetrievalOptions(**dict(retrieval or {}))
        # Without boundary anchors and boundary text in the context, b_i is never read: skip it.
        self.needs_boundaries = (
            self.retrieval.anchors == "boundary" or self.retrieval.context == "summary"
        )

    # --- construction -------------------------------------------------------------------------

    def construction_config(self) -> dict[str, Any]:
        config: dict[str, Any] = {
            "extraction": self.extraction,
            "segmentation": self.construction.segmentation,
            "segmenter": {"version": ESMemSegmenter.version, **self.construction.segmenter},
            "boundaries": self.needs_boundaries,
            "boundary_context": self.construction.boundary_context,
        }
        if self.uses_llm and self.needs_boundaries:
            prompt = BOUNDARY_SYSTEM_PROMPT + BOUNDARY_USER_PROMPT
            config["boundary_max_tokens"] = self.construction.boundary_max_tokens
            config["boundary_prompt_sha256"] = sha256(prompt.encode()).hexdigest()[:16]
        return config

    def construct(self, conversation: Conversation) -> ESMemMemory:
        sessions = [session for session in conversation.sessions if session.turns]
        segmenter = ESMemSegmenter(
            extraction=self.extraction,  # type: ignore[arg-type]
            embedder=self.services.embedder,
            backbone=self._backbone() if self.uses_llm else None,
            **self.construction.segmenter,
        )
        segmenter.prepare([[turn.text for turn in session.turns] for session in sessions])
        events: list[Event] = []
        costs: list[SegmentationCost] = []
        single_turn = 0
        position = 0
        for session in sessions:
            session_events, cost = self._segment(segmenter, session, position)
            events += session_events
            costs.append(cost)
            single_turn += len(session.turns) == 1
            position += len(session.turns)
        report: dict[str, Any] = {
            "sessions": len(sessions),
            "events": len(events),
            "segmentation": {
                **summed_costs(costs),
                "single_turn_sessions": single_turn,
                "replies": segmenter.reply_counts(),
            },
        }
        if self.needs_boundaries:
            events, report["boundaries"] = self._describe_boundaries(events)
        memory = ESMemMemory(events, report)
        if events:
            memory.vectors("summary", self.services.embedder)
        return memory

    def _segment(
        self, segmenter: ESMemSegmenter, session: Session, position: int
    ) -> tuple[list[Event], SegmentationCost]:
        """The events of one session (``position``: conversation index of its first turn)."""
        turns = session.turns
        segmentation = segmenter.segment([t.text for t in turns], [t.speaker for t in turns])
        annotations = segmentation.annotations or tuple(
            lite_annotation(turn.text, segmenter.keyword_limit) for turn in turns
        )
        if self.construction.segmentation == "dynamic":
            spans = segmentation.segments
        elif self.construction.segmentation == "turn":
            spans = [(index, index) for index in range(len(turns))]
        else:
            spans = [(0, len(turns) - 1)]
        events = []
        for first, last in spans:
            span = turns[first : last + 1]
            notes = annotations[first : last + 1]
            events.append(
                Event(
                    session_id=session.session_id,
                    timestamp=session.timestamp,
                    position=position + first,
                    turn_ids=tuple(turn.turn_id for turn in span),
                    lines=tuple(f"{turn.speaker}: {turn.text}" for turn in span),
                    topics=distinct([str(note["topic"]) for note in notes]),
                    keywords=distinct([str(word) for note in notes for word in note["keywords"]]),
                )
            )
        return events, segmentation.cost

    def _describe_boundaries(self, events: list[Event]) -> tuple[list[Event], dict[str, Any]]:
        """b_i for every event: opening template, then LLM descriptions (one batch) or templates."""
        context = self.construction.boundary_context
        meter = CostMeter()
        sources: Counter[str] = Counter()
        described: list[Event] = []
        replies: list[str | None] = [None] * len(events)
        if self.uses_llm and len(events) > 1:
            params = SamplingParams(max_tokens=self.construction.boundary_max_tokens)
            requests = [
                LLMRequest(tuple(boundary_messages(events[i - 1], events[i], context)), params)
                for i in range(1, len(events))
            ]
            answers = ask_many(self._backbone(), requests, meter)
            replies[1:] = [clean_boundary(a.text) if a else None for a in answers]
        for index, event in enumerate(events):
            if index == 0:
                text, source = opening_boundary(event, context), "opening"
            elif replies[index] is not None:
                text, source = replies[index], "llm"
            else:
                text = template_boundary(events[index - 1], event, context)
                source = "template"
                if self.uses_llm:
                    source = "fallback"
                    meter.fallback("boundary_fallback")
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
        if not memory.events:
            return []
        options = self.retrieval
        embedder = self.services.embedder
        query = embedder.encode([question.question])[0]
        summary_scores = memory.vectors("summary", embedder) @ query
        anchor_scores = (
            memory.vectors("boundary", embedder) @ query
            if options.anchors == "boundary"
            else summary_scores
        )
        return rank_events(
            anchor_scores,
            summary_scores,
            anchor_k=options.anchor_k,
            window=options.window,
            alpha=options.alpha,
            top_events=options.top_events,
        )

    def retrieve(self, memory: ESMemMemory, question: Question) -> Retrieval:
        return Retrieval(
            tuple(self._item(memory.events[j], score) for j, score in self.rank(memory, question))
        )

    def _item(self, event: Event, score: float) -> MemoryItem:
        if self.retrieval.context == "raw":
            text, kind = "\n".join(event.lines), "event"
        else:
            text, kind = f"Boundary: {event.boundary}\nSummary: {event.summary()}", "event_summary"
        return MemoryItem(text, event.turn_ids, event.timestamp, event.position, score, kind)

    # --- serialization ------------------------------------------------------------------------

    def dump_memory(self, memory: ESMemMemory) -> dict[str, Any]:
        return {"events": [event.to_json() for event in memory.events], "report": memory.report}

    def load_memory(self, payload: dict[str, Any]) -> ESMemMemory:
        events = [Event.from_json(event) for event in payload["events"]]
        return ESMemMemory(events, dict(payload["report"]))
