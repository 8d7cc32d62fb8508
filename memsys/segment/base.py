"""The segmenter contract: utterances in, boundary labels out, with what the call cost.

Two callers need segmenters: the dialogue-segmentation benchmark (``benchmarks/pipeline/segment.py``) and
the memory methods that store segments (ES-Mem's events, SeCom's segments, the segment-RAG
baseline). Both want one label per utterance with SuperDialSeg's convention (METRICS.md):
``1`` = this utterance ends a segment, the last label always ``0``. A segmenter only names the
gaps where a segment ends; :meth:`Segmenter.segment` turns them into labels, checks them and
meters the call, so that every segmenter reports calls, tokens, embeddings and fallbacks the
same way and no segmenter re-implements the bookkeeping. LLM segmenters ask through
:mod:`memsys.llm.structured`, the helper every method uses: one retry rule, one cost record.

Services (embedder, LLM backbone) are injected; a segmenter that needs one and did not get it
fails at construction with a message naming the missing service.
"""

from __future__ import annotations

import copy
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, ClassVar

from memsys.embed import Embedder
from memsys.kvstore import SQLiteKV
from memsys.llm.backbone import Backbone
from memsys.llm.structured import ExtractionReport
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


#: The stage-summed LLM counts of a :class:`SegmentationCost` (its properties), as reported.
LLM_TOTALS = ("llm_calls", "cached_calls", "failed_calls", "prompt_tokens", "completion_tokens")


@dataclass(frozen=True)
class SegmentationCost:
    """What one :meth:`Segmenter.segment` call cost.

    ``llm`` holds one :class:`~memsys.llm.structured.ExtractionReport` per LLM stage (ES-Mem's
    ``topic`` and ``intent``, SeCom's ``segmentation``): units, calls, retries and fallbacks
    counted by the one rule every method's extraction follows. The totals (``llm_calls``,
    ``cached_calls``, ``failed_calls``, tokens) add the stages up; token counts include replies
    served from the response cache (what the method costs). ``fallbacks`` counts, by stage, the
    units handed to a non-LLM substitute. ``texts_embedded`` counts texts that reached the
    embedding model (cache hits are free).
    """

    llm: Mapping[str, ExtractionReport] = field(default_factory=dict)
    texts_embedded: int = 0
    seconds: float = 0.0

    @cached_property
    def total(self) -> ExtractionReport:
        """Every stage's counts added up."""
        total = ExtractionReport()
        for report in self.llm.values():
            total.add(report)
        return total

    @property
    def llm_calls(self) -> int:
        return self.total.calls

    @property
    def failed_calls(self) -> int:
        return self.total.request_errors

    @property
    def cached_calls(self) -> int:
        return self.total.cached_calls

    @property
    def prompt_tokens(self) -> int:
        return self.total.prompt_tokens

    @property
    def completion_tokens(self) -> int:
        return self.total.completion_tokens

    @property
    def fallbacks(self) -> dict[str, int]:
        """Units handed to a substitute, by stage (stages with none left out)."""
        return {stage: r.fallbacks for stage, r in sorted(self.llm.items()) if r.fallbacks}

    def to_json(self) -> dict[str, Any]:
        """Plain JSON (seconds rounded to microseconds)."""
        return {
            **{name: getattr(self, name) for name in LLM_TOTALS},
            "texts_embedded": self.texts_embedded,
            "seconds": round(self.seconds, 6),
            "fallbacks": self.fallbacks,
            "llm": {stage: report.to_json() for stage, report in sorted(self.llm.items())},
        }


class CostMeter:
    """Collects the cost of one segmentation call while it runs (one ``segment_many`` call may
    share it across its dialogues): the LLM stages' reports, the texts embedded, the time."""

    def __init__(self, embedder: Embedder | None = None) -> None:
        self._embedder = embedder
        self._embedded_before = embedder.texts_encoded if embedder else 0
        self._started = time.perf_counter()
        self._reports: dict[str, ExtractionReport] = {}

    def report(self, stage: str) -> ExtractionReport:
        """The report that LLM stage ``stage``'s units are counted in."""
        return self._reports.setdefault(stage, ExtractionReport())

    def finish(self) -> SegmentationCost:
        """The cost so far."""
        embedded = self._embedder.texts_encoded - self._embedded_before if self._embedder else 0
        return SegmentationCost(
            llm={stage: copy.deepcopy(report) for stage, report in self._reports.items()},
            texts_embedded=embedded,
            seconds=time.perf_counter() - self._started,
        )


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
    """Annotated dialogues a segmenter wants before it segments (e.g. SeCom's reflection);
    ``dialogues`` is how many from the split's start, ``None`` for all of it."""

    dataset: str
    split: str
    dialogues: int | None


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
