"""The segmenter contract: utterances in, boundary labels out, with what the call cost.

Two callers need segmenters: the dialogue-segmentation benchmark (``benchmarks/segment.py``) and
the memory methods that store segments (ES-Mem's events, SeCom's segments, the segment-RAG
baseline). Both want one label per utterance with SuperDialSeg's convention (METRICS.md):
``1`` = this utterance ends a segment, the last label always ``0``. A segmenter only names the
gaps where a segment ends; :meth:`Segmenter.segment` turns them into labels, checks them and
meters the call, so that every segmenter reports calls, tokens, embeddings and fallbacks the
same way and no segmenter re-implements the bookkeeping.

Services (embedder, LLM backbone) are injected; a segmenter that needs one and did not get it
fails at construction with a message naming the missing service.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from memsys.embed import Embedder
from memsys.kvstore import SQLiteKV
from memsys.llm.backbone import Backbone
from memsys.llm.errors import LLMError, LLMRequestError
from memsys.llm.types import LLMRequest, LLMResponse, Message, SamplingParams
from memsys.types import SegmentationDialogue

#: ``window_diff(reference_labels, predicted_labels)`` for one dialogue, injected by the caller
#: (the scorer lives in ``benchmarks``, which depends on ``memsys``, not the other way round).
WindowDiff = Callable[[Sequence[int], Sequence[int]], float]


@dataclass(frozen=True)
class DialogueText:
    """The utterances to segment and, when known, who said each."""

    utterances: tuple[str, ...]
    speakers: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.utterances:
            raise ValueError("nothing to segment: the dialogue has no utterances")
        if self.speakers and len(self.speakers) != len(self.utterances):
            raise ValueError(f"{len(self.speakers)} speakers for {len(self.utterances)} utterances")

    def __len__(self) -> int:
        return len(self.utterances)

    def line(self, index: int) -> str:
        """Utterance ``index`` as a reader sees it: ``speaker: text`` when the speaker is known."""
        text = self.utterances[index]
        return f"{self.speakers[index]}: {text}" if self.speakers else text


@dataclass(frozen=True)
class SegmentationCost:
    """What one :meth:`Segmenter.segment` call cost.

    LLM token counts include replies served from the response cache (what the method costs);
    ``cached_calls`` says how many of ``llm_calls`` were. ``texts_embedded`` counts texts that
    reached the embedding model (cache hits are free). ``fallbacks`` counts, by kind, every
    place a non-LLM substitute replaced an unusable LLM reply.
    """

    llm_calls: int = 0
    cached_calls: int = 0
    failed_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    llm_seconds: float = 0.0
    texts_embedded: int = 0
    seconds: float = 0.0
    fallbacks: Mapping[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """Plain JSON (seconds rounded to microseconds)."""
        return {
            "llm_calls": self.llm_calls,
            "cached_calls": self.cached_calls,
            "failed_calls": self.failed_calls,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "llm_seconds": round(self.llm_seconds, 6),
            "texts_embedded": self.texts_embedded,
            "seconds": round(self.seconds, 6),
            "fallbacks": dict(sorted(self.fallbacks.items())),
        }


class CostMeter:
    """Collects the cost of one segmentation call while it runs (one ``segment_many`` call may
    share it across its dialogues)."""

    def __init__(self, embedder: Embedder | None = None) -> None:
        self._embedder = embedder
        self._embedded_before = embedder.texts_encoded if embedder else 0
        self._started = time.perf_counter()
        self._llm = Counter[str]()
        self._llm_seconds = 0.0
        self._fallbacks = Counter[str]()

    def llm(self, outcome: LLMResponse | LLMError) -> None:
        """Book one LLM call, successful or not."""
        self._llm["calls"] += 1
        if isinstance(outcome, LLMError):
            self._llm["failed"] += 1
            return
        self._llm["cached"] += outcome.cached
        self._llm["prompt_tokens"] += outcome.prompt_tokens
        self._llm["completion_tokens"] += outcome.completion_tokens
        self._llm_seconds += outcome.latency_s

    def fallback(self, kind: str, count: int = 1) -> None:
        """Count ``count`` uses of the non-LLM substitute ``kind``."""
        self._fallbacks[kind] += count

    def finish(self) -> SegmentationCost:
        """The cost so far."""
        embedded = self._embedder.texts_encoded - self._embedded_before if self._embedder else 0
        return SegmentationCost(
            llm_calls=self._llm["calls"],
            cached_calls=self._llm["cached"],
            failed_calls=self._llm["failed"],
            prompt_tokens=self._llm["prompt_tokens"],
            completion_tokens=self._llm["completion_tokens"],
            llm_seconds=self._llm_seconds,
            texts_embedded=embedded,
            seconds=time.perf_counter() - self._started,
            fallbacks=dict(self._fallbacks),
        )


def ask(
    backbone: Backbone, messages: Sequence[Message], params: SamplingParams, meter: CostMeter
) -> LLMResponse | None:
    """One LLM call, booked on ``meter``; ``None`` when the request failed for good.

    Only per-request failures are absorbed (the caller falls back and counts it); a tripped
    breaker or a replay-mode cache miss propagates, because the run must stop.
    """
    try:
        response = backbone.complete(messages, params)
    except LLMRequestError as error:
        meter.llm(error)
        return None
    meter.llm(response)
    return response


def ask_many(
    backbone: Backbone, requests: Sequence[LLMRequest], meter: CostMeter
) -> list[LLMResponse | None]:
    """Independent LLM calls run together, booked on ``meter``; ``None`` marks a failed one."""
    if not requests:
        return []
    outcomes = backbone.complete_many(requests, return_exceptions=True)
    return [booked(outcome, meter) for outcome in outcomes]


def booked(outcome: LLMResponse | LLMError, meter: CostMeter) -> LLMResponse | None:
    """One call's outcome booked on ``meter``: the reply, or ``None`` for a request that failed
    for good; any other error (a tripped breaker, a replay miss) is raised: the run must stop."""
    if isinstance(outcome, LLMError) and not isinstance(outcome, LLMRequestError):
        raise outcome
    meter.llm(outcome)
    return outcome if isinstance(outcome, LLMResponse) else None


@dataclass(frozen=True)
class Boundaries:
    """What a segmenter decides: the gaps after which a segment ends, plus what it learned.

    ``gaps`` holds utterance indices ``t`` (``0 <= t < n - 1``): a segment ends with utterance
    ``t``. ``annotations`` is one JSON mapping per utterance where the method produces one
    (ES-Mem's topic and keywords, which its memory reuses as summaries); ``details`` is JSON
    diagnostics of the call (scores, candidates, parse problems).
    """

    gaps: Collection[int]
    annotations: tuple[Mapping[str, Any], ...] = ()
    details: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Segmentation:
    """The result of one call: labels (1 = ends a segment, last 0), cost and the method's extras."""

    labels: tuple[int, ...]
    cost: SegmentationCost
    annotations: tuple[Mapping[str, Any], ...] = ()
    details: Mapping[str, Any] = field(default_factory=dict)

    @property
    def segments(self) -> list[tuple[int, int]]:
        """``(first, last)`` utterance index of each segment, inclusive, in order."""
        return segments_from_labels(self.labels)


def labels_from_gaps(n_utterances: int, gaps: Collection[int]) -> tuple[int, ...]:
    """Boundary labels for a dialogue of ``n_utterances`` with segments ending at ``gaps``.

    >>> labels_from_gaps(5, {1, 3})
    (0, 1, 0, 1, 0)
    """
    for gap in gaps:
        if not 0 <= gap < n_utterances - 1:
            raise ValueError(f"gap {gap} is outside 0..{n_utterances - 2}")
    return tuple(int(index in gaps) for index in range(n_utterances))


def segments_from_labels(labels: Sequence[int]) -> list[tuple[int, int]]:
    """``(first, last)`` inclusive index pairs of the segments that ``labels`` describe.

    >>> segments_from_labels([0, 1, 0, 0])
    [(0, 1), (2, 3)]
    """
    segments, start = [], 0
    for index, label in enumerate(labels):
        if label == 1 or index == len(labels) - 1:
            segments.append((start, index))
            start = index + 1
    return segments


@dataclass(frozen=True)
class TrainingRequest:
    """Annotated dialogues a segmenter wants before it segments (e.g. SeCom's reflection)."""

    dataset: str
    split: str
    dialogues: int


class Segmenter(ABC):
    """Base class of every segmenter: subclasses implement :meth:`boundaries` and :meth:`config`.

    ``version`` is part of a segmenter's identity: bump it when a change alters the labels a
    config produces, so cached runs are not mistaken for the new behaviour.
    """

    version: ClassVar[int] = 1

    def __init__(self, *, embedder: Embedder | None = None, backbone: Backbone | None = None):
        self.embedder = embedder
        self.backbone = backbone

    @property
    def uses_llm(self) -> bool:
        """Whether :meth:`segment` calls the LLM (the model is then part of the identity)."""
        return False

    def segment(self, utterances: Sequence[str], speakers: Sequence[str] = ()) -> Segmentation:
        """Label one dialogue; ``speakers`` may be empty when unknown."""
        dialogue = DialogueText(tuple(utterances), tuple(speakers))
        meter = CostMeter(self.embedder)
        (decided,) = self.segment_many([dialogue], meter)
        return Segmentation(
            labels=labels_from_gaps(len(dialogue), set(decided.gaps)),
            cost=meter.finish(),
            annotations=decided.annotations,
            details=decided.details,
        )

    def segment_many(self, dialogues: Sequence[DialogueText], meter: CostMeter) -> list[Boundaries]:
        """The boundaries of several dialogues of any length (a conversation's sessions), their
        cost on one ``meter``: a one-utterance dialogue has none and costs nothing, the others
        go to :meth:`boundaries_many` together."""
        several = [dialogue for dialogue in dialogues if len(dialogue) > 1]
        decided = iter(self.boundaries_many(several, meter))
        found = [next(decided) if len(dialogue) > 1 else Boundaries(()) for dialogue in dialogues]
        for dialogue, boundaries in zip(dialogues, found, strict=True):
            if boundaries.annotations and len(boundaries.annotations) != len(dialogue):
                raise ValueError(
                    f"{type(self).__name__}: {len(boundaries.annotations)} annotations "
                    f"for {len(dialogue)} utterances"
                )
        return found

    @abstractmethod
    def boundaries(self, dialogue: DialogueText, meter: CostMeter) -> Boundaries:
        """The gaps after which a segment ends (called for dialogues of two or more utterances)."""

    def boundaries_many(
        self, dialogues: Sequence[DialogueText], meter: CostMeter
    ) -> list[Boundaries]:
        """:meth:`boundaries` of several dialogues (two or more utterances each) on one meter.

        The default segments them one by one; a segmenter whose LLM calls for one dialogue do
        not depend on another's overrides it to send them together (same requests, same
        results, less waiting).
        """
        return [self.boundaries(dialogue, meter) for dialogue in dialogues]

    @abstractmethod
    def config(self) -> dict[str, Any]:
        """Every setting that changes the labels (JSON values)."""

    def prepare(self, dialogues: Sequence[Sequence[str]]) -> None:  # noqa: B027 (optional hook)
        """Batch work over many dialogues before they are segmented one by one (default: none).

        Embedding segmenters encode every utterance in a few large batches here, which is much
        faster than one small batch per dialogue; results are unchanged.
        """

    def reply_counts(self) -> dict[str, Any]:
        """How the LLM replies parsed so far (clean, repaired, unusable), for a run's report."""
        return {}

    def training_request(self) -> TrainingRequest | None:
        """Annotated data to :meth:`fit` on first, or ``None`` (default) for zero-shot use."""
        return None

    def fit(
        self,
        dialogues: Sequence[SegmentationDialogue],
        *,
        window_diff: WindowDiff,
        store: SQLiteKV | None = None,
    ) -> dict[str, Any]:
        """Learn from the dialogues :meth:`training_request` asked for; returns a JSON report."""
        raise NotImplementedError(f"{type(self).__name__} does not train")

    def identity(self) -> dict[str, Any]:
        """Class, version, config and, for LLM segmenters, the model (callers add the embedder)."""
        identity: dict[str, Any] = {
            "segmenter": f"{type(self).__module__}.{type(self).__qualname__}",
            "version": self.version,
            "config": self.config(),
        }
        if self.uses_llm:
            identity["model"] = self.backbone.model_id if self.backbone else None
        return identity

    def require_embedder(self) -> Embedder:
        """The injected embedder, or an error naming what is missing."""
        if self.embedder is None:
            raise ValueError(f"{type(self).__name__} needs an embedder; none was injected")
        return self.embedder

    def require_backbone(self) -> Backbone:
        """The injected LLM backbone, or an error naming what is missing."""
        if self.backbone is None:
            raise ValueError(f"{type(self).__name__} needs an LLM backbone; none was injected")
        return self.backbone
