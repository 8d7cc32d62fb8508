"""ES-Mem's dynamic event segmentation (papers/es-mem.txt §3.1, Appendix B and E, Figs. 6-7).

Stage 1, topic coherence: each turn gets ``{topic, keywords}`` from the LLM, conditioned on the
previous turn and the previous turn's output (recurrent); ``topic + keywords`` is embedded into
unit vectors h_t. For adjacent turns, rho_t is the Pearson correlation across the vectors'
dimensions and I_t = -0.5·log(1 - rho_t²) their Gaussian mutual information. Turns with
I_t <= the q-quantile of the dialogue's I are candidate boundaries (q = 0.35).

Stage 2, intent refinement: for each candidate t the LLM sees the L = 2 turns ending at t and
the L turns after it and names the most and the least fitting label of
{Topic_Intro, Topic_Shift} (shift) and {Detail_Elaborate, Direct_Resp} (continue) with
probabilities; p(y) = c for a shift label, 1 - c for a continue label, p_eb the mean over the
two, and the boundary is kept when p_eb >= tau_c = 0.75.

A boundary at t means "between turn t and t + 1", i.e. label 1 on utterance t. For the
segmentation benchmark a turn is one utterance. The per-turn topics and keywords are returned as
annotations: ES-Mem's event summaries are made of them.

:meth:`ESMemSegmenter.boundaries_many` segments several dialogues (a conversation's sessions) at
once: stage 1's recurrence is within a dialogue, so every dialogue runs as its own chain of
requests (turn t + 1 asked once turn t is read, its stage 2 once its stage 1 is embedded), all
chains at once within the backbone's concurrency; the requests, hence the results, are those of
segmenting the dialogues one at a time.

Readings taken where the paper is vague (each a config value where it is a choice):

* The embedded text is ``"<topic>: <kw1>, <kw2>, ..."``.
* rho² is capped at ``1 - 1e-12`` so identical vectors give a large finite I, not infinity;
  a constant vector (zero variance) has rho = 0.
* The quantile is numpy's default (linear interpolation); "falls below" is read as ``<=``.
* Windows at the ends of a dialogue are truncated to the turns that exist.
* The two labels must differ (the prompt demands it); the probabilities' order is not enforced,
  since p_eb averages both anyway.
* Unusable replies never crash a run. A failed, unparseable or self-contradicting reply is
  asked once more, quoting it and what was wrong (the one retry rule of every method's LLM
  extraction, :mod:`memsys.llm.structured`). Unusable twice, a stage-1 unit gets the lite
  annotation of its turn, and a stage-2 candidate is dropped (``on_intent_failure: drop``):
  with no evidence of a shift the conservative reading of the tau_c filter keeps no boundary;
  ``keep`` trusts stage 1 instead. Both count as fallbacks in their stage's report (``topic``,
  ``intent``).

``extraction: lite`` makes no LLM call. Stage 1 embeds the turn text itself, and each turn's
annotation is its top content words (:func:`memsys.segment.lexical.keywords`; topic = the first
three). Stage 2 replaces the intent labels by a rank rule on the same windows: with c_t the
cosine between the mean embeddings of the L turns before and after gap t, the lite shift
probability p_t is the share of the dialogue's other gaps whose windows are more similar than
t's; a candidate is kept when p_t >= tau_c, i.e. when its context contrast is in the top quarter
of the dialogue.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from memsys.embed import Embedder
from memsys.llm.backbone import Backbone
from memsys.llm.structured import Rejected, StructuredFlow, json_reader
from memsys.llm.types import Message, SamplingParams
from memsys.segment.base import Boundaries, CostMeter, DialogueText, Segmenter
from memsys.segment.depth import block_similarities
from memsys.segment.lexical import keywords

from .prompts import (
    CONTINUE_LABELS,
    FIRST_TURN,
    INTENT_SCHEMA,
    INTENT_SYSTEM_PROMPT,
    INTENT_USER_PROMPT,
    SHIFT_LABELS,
    TOPIC_SCHEMA,
    TOPIC_SYSTEM_PROMPT,
    TOPIC_USER_PROMPT,
)

#: rho² is capped here so that I stays finite for identical vectors.
MAX_RHO_SQUARED = 1 - 1e-12
#: Request priorities: a stage-1 chain (the critical path) never waits behind stage-2 requests.
STAGE_1, STAGE_2 = 0, 1


# ---------------------------------------------------------------------------------------------
# Stage math


def adjacent_pearson(vectors: np.ndarray) -> np.ndarray:
    """Pearson correlation across dimensions of each vector with the next (rho_t, t < T - 1).

    >>> vectors = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [3.0, 2.0, 1.0]])
    >>> adjacent_pearson(vectors).round(12).tolist()
    [1.0, -1.0]
    """
    centred = vectors - vectors.mean(axis=1, keepdims=True)
    norms = np.linalg.norm(centred, axis=1)
    products = norms[:-1] * norms[1:]
    dots = np.einsum("ij,ij->i", centred[:-1], centred[1:])
    return np.divide(dots, products, out=np.zeros(len(products)), where=products > 0)


def gaussian_mutual_information(rho: np.ndarray) -> np.ndarray:
    """I = -0.5·log(1 - rho²), rho² capped at :data:`MAX_RHO_SQUARED`.

    >>> gaussian_mutual_information(np.array([0.0, 0.6])).round(6).tolist()
    [0.0, 0.223144]
    """
    return -0.5 * np.log1p(-np.minimum(np.square(rho), MAX_RHO_SQUARED))


def quantile_candidates(information: np.ndarray, q: float) -> list[int]:
    """Gaps whose mutual information is at or below the dialogue's q-quantile.

    >>> quantile_candidates(np.array([0.9, 0.1, 0.5, 0.3, 0.7]), q=0.35)
    [1, 3]
    """
    if len(information) == 0:
        return []
    threshold = float(np.quantile(information, q))
    return [gap for gap, value in enumerate(information) if value <= threshold]


def label_probability(name: str, confidence: float) -> float:
    """p(y) = c for a shift label, 1 - c for a continue label (Eq. 3).

    >>> label_probability("Topic_Shift", 0.8), label_probability("Direct_Resp", 0.25)
    (0.8, 0.75)
    """
    if name in SHIFT_LABELS:
        return confidence
    if name in CONTINUE_LABELS:
        return 1.0 - confidence
    raise ValueError(f"unknown intent label {name!r}")


def boundary_probability(high: tuple[str, float], low: tuple[str, float]) -> float:
    """p_eb = mean of p(y_high) and p(y_low) (Eq. 4).

    >>> boundary_probability(("Topic_Shift", 0.9), ("Direct_Resp", 0.3))
    0.8
    """
    return (label_probability(*high) + label_probability(*low)) / 2


def rank_shift_probability(similarities: np.ndarray) -> np.ndarray:
    """Lite stage 2: for each gap, the share of the other gaps whose windows are more similar.

    >>> rank_shift_probability(np.array([0.9, 0.1, 0.5, 0.5, 0.7])).tolist()
    [0.0, 1.0, 0.5, 0.5, 0.25]
    """
    count = len(similarities)
    if count < 2:
        return np.zeros(count)
    higher = (similarities[None, :] > similarities[:, None]).sum(axis=1)
    return higher / (count - 1)


def lite_annotation(text: str, limit: int) -> dict[str, Any]:
    """A turn's topic and keywords without an LLM: its top content words (topic: first three).

    >>> lite_annotation("i love cats . my cats love hats", limit=5)
    {'topic': 'love cats hats', 'keywords': ['love', 'cats', 'hats']}
    """
    words = keywords(text, limit)
    return {"topic": " ".join(words[:3]), "keywords": words}


def annotation_text(annotation: Mapping[str, Any]) -> str:
    """What stage 1 embeds for a turn: ``"<topic>: <kw1>, <kw2>"``."""
    return f"{annotation['topic']}: {', '.join(annotation['keywords'])}"


# ---------------------------------------------------------------------------------------------
# The segmenter


class ESMemSegmenter(Segmenter):
    """ES-Mem's two-stage event segmentation, with the paper's LLM pipeline or a lite one."""

    def __init__(
        self,
        *,
        extraction: Literal["llm", "lite"] = "llm",
        quantile: float = 0.35,
        window: int = 2,
        threshold: float = 0.75,
        keyword_limit: int = 5,
        topic_max_tokens: int = 96,
        intent_max_tokens: int = 64,
        on_intent_failure: Literal["drop", "keep"] = "drop",
        embedder: Embedder | None = None,
        backbone: Backbone | None = None,
    ) -> None:
        super().__init__(embedder=embedder, backbone=backbone)
        if extraction not in ("llm", "lite"):
            raise ValueError(f"extraction must be 'llm' or 'lite', got {extraction!r}")
        if on_intent_failure not in ("drop", "keep"):
            raise ValueError(
                f"on_intent_failure must be 'drop' or 'keep', got {on_intent_failure!r}"
            )
        if not 0 <= quantile <= 1 or not 0 <= threshold <= 1 or window < 1:
            raise ValueError("quantile and threshold must lie in [0, 1], window must be >= 1")
        self.extraction = extraction
        self.quantile = quantile
        self.window = window
        self.threshold = threshold
        self.keyword_limit = keyword_limit
        self.topic_max_tokens = topic_max_tokens
        self.intent_max_tokens = intent_max_tokens
        self.on_intent_failure = on_intent_failure
        self.require_embedder()
        if self.uses_llm:
            self.require_backbone()

    @property
    def uses_llm(self) -> bool:
        return self.extraction == "llm"

    def prepare(self, dialogues: Sequence[Sequence[str]]) -> None:
        """Lite mode embeds turn texts: do it in large batches (LLM mode has nothing to batch)."""
        if not self.uses_llm:
            self.require_embedder().encode([text for dialogue in dialogues for text in dialogue])

    def boundaries(self, dialogue: DialogueText, meter: CostMeter) -> Boundaries:
        return self.boundaries_many([dialogue], meter)[0]

    def boundaries_many(
        self, dialogues: Sequence[DialogueText], meter: CostMeter
    ) -> list[Boundaries]:
        """The boundaries of several dialogues of two or more utterances each (a conversation's
        sessions), their LLM calls sent together, their cost on one ``meter``.

        The requests are those of segmenting the dialogues one by one, so are the results
        (:meth:`_llm_stages` says what runs alongside what).
        """
        if not dialogues:
            return []
        if self.uses_llm:
            return self._llm_stages(dialogues, meter)
        embedder = self.require_embedder()
        decided = []
        for dialogue in dialogues:
            vectors = embedder.encode(dialogue.utterances)
            information, candidates = self._candidates(vectors)
            contrast = rank_shift_probability(block_similarities(vectors, self.window))
            notes = [lite_annotation(text, self.keyword_limit) for text in dialogue.utterances]
            probabilities = {gap: float(contrast[gap]) for gap in candidates}
            decided.append(self._decide(notes, information, candidates, probabilities))
        return decided

    def _candidates(self, vectors: np.ndarray) -> tuple[np.ndarray, list[int]]:
        """I_t of each gap of a dialogue whose turns embed as ``vectors``, and the gaps at or
        below its q-quantile."""
        information = gaussian_mutual_information(adjacent_pearson(vectors.astype(np.float64)))
        return information, quantile_candidates(information, self.quantile)

    def _decide(
        self,
        annotations: Sequence[Mapping[str, Any]],
        information: np.ndarray,
        candidates: Sequence[int],
        probabilities: Mapping[int, float | None],
    ) -> Boundaries:
        """Keep the candidates whose p_eb reaches tau_c (and, with ``keep``, the unjudged ones)."""
        kept = [gap for gap, p in probabilities.items() if p is not None and p >= self.threshold]
        if self.on_intent_failure == "keep":
            kept += [gap for gap, p in probabilities.items() if p is None]
        details = {
            "mutual_information": [round(float(v), 6) for v in information],
            "candidates": list(candidates),
            "p_eb": {
                str(gap): None if p is None else round(p, 6) for gap, p in probabilities.items()
            },
        }
        return Boundaries(sorted(kept), annotations=tuple(annotations), details=details)

    def _llm_stages(self, dialogues: Sequence[DialogueText], meter: CostMeter) -> list[Boundaries]:
        """Both stages of every dialogue as chains on one :class:`StructuredFlow`.

        Dialogues are independent of one another: each advances as soon as its own reply is
        read. Within one, stage 1 is recurrent (turn t + 1's request quotes turn t's
        annotation) and stage 2 needs the candidates, i.e. every stage-1 annotation embedded.
        The annotations are embedded dialogue by dialogue in their order, as one at a time
        would: the embedder encodes only what its cache lacks, and the model's last bits depend
        on the other texts of its batch, so embedding in another order could move a candidate.
        A unit whose reply is unusable is asked once more (the rule of every method's LLM
        extraction); twice unusable, it falls back as the module docstring says.
        """
        runs = [_DialogueRun(dialogue) for dialogue in dialogues]
        embedded = 0  # runs whose candidates are known (a prefix)
        topics, intents = meter.report("topic"), meter.report("intent")
        readers = {
            "topic": (json_reader(TOPIC_SCHEMA, _topic_annotation, topics), topics, STAGE_1),
            "intent": (json_reader(INTENT_SCHEMA, _intent_probability, intents), intents, STAGE_2),
        }
        with StructuredFlow[tuple[str, int, int]](self.require_backbone()) as flow:

            def ask(stage: str, k: int, index: int) -> None:
                """Stage 1 about turn ``index`` of dialogue ``k``, or stage 2 about gap ``index``."""
                run = runs[k]
                messages, params = (
                    self._topic_request(run.dialogue, index, run.annotations)
                    if stage == "topic"
                    else self._intent_request(run.dialogue, index)
                )
                read, report, priority = readers[stage]
                flow.submit(
                    (stage, k, index), messages, params, read=read, report=report, priority=priority
                )

            for k in range(len(runs)):
                ask("topic", k, 0)
            for (stage, k, index), value in flow:
                run = runs[k]
                if stage == "intent":
                    run.probabilities[index] = value  # None: unusable twice (counted)
                    continue
                text = run.dialogue.utterances[index]
                run.annotations.append(value or lite_annotation(text, self.keyword_limit))
                if not run.annotated:
                    ask("topic", k, index + 1)
                while embedded < len(runs) and runs[embedded].annotated:
                    for gap in self._find_candidates(runs[embedded]):
                        ask("intent", embedded, gap)
                    embedded += 1
        return [
            self._decide(run.annotations, run.information, run.candidates, run.probabilities)
            for run in runs
        ]

    def _find_candidates(self, run: _DialogueRun) -> list[int]:
        """Embed a dialogue's annotations and find its candidates (each asked about in stage 2,
        independently of the others)."""
        vectors = self.require_embedder().encode([annotation_text(a) for a in run.annotations])
        run.information, run.candidates = self._candidates(vectors)
        run.probabilities = dict.fromkeys(run.candidates)  # in gap order, filled as replies come
        return run.candidates

    def _topic_request(
        self, dialogue: DialogueText, index: int, previous: Sequence[Mapping[str, Any]]
    ) -> tuple[tuple[Message, ...], SamplingParams]:
        """Figure 6's request for turn ``index``, given the annotations of the turns before it."""
        prompt = TOPIC_USER_PROMPT.format(
            previous_text=dialogue.line(index - 1) if index else FIRST_TURN,
            previous_annotation=_compact_json(previous[-1]) if index else FIRST_TURN,
            text=dialogue.line(index),
        )
        messages = (
            {"role": "system", "content": TOPIC_SYSTEM_PROMPT},
            {"role": "user", "content": prompt},
        )
        return messages, SamplingParams(max_tokens=self.topic_max_tokens, json_schema=TOPIC_SCHEMA)

    def _intent_request(
        self, dialogue: DialogueText, gap: int
    ) -> tuple[tuple[Message, ...], SamplingParams]:
        """Figure 7's request for the candidate cut after utterance ``gap``."""
        left = range(max(0, gap - self.window + 1), gap + 1)
        right = range(gap + 1, min(len(dialogue), gap + 1 + self.window))
        prompt = INTENT_USER_PROMPT.format(
            left_context="\n".join(dialogue.line(i) for i in left),
            right_context="\n".join(dialogue.line(i) for i in right),
        )
        messages = (
            {"role": "system", "content": INTENT_SYSTEM_PROMPT},
            {"role": "user", "content": prompt},
        )
        return messages, SamplingParams(
            max_tokens=self.intent_max_tokens, json_schema=INTENT_SCHEMA
        )

    def config(self) -> dict[str, Any]:
        return {
            "extraction": self.extraction,
            "quantile": self.quantile,
            "window": self.window,
            "threshold": self.threshold,
            "keyword_limit": self.keyword_limit,
            "topic_max_tokens": self.topic_max_tokens,
            "intent_max_tokens": self.intent_max_tokens,
            "on_intent_failure": self.on_intent_failure,
        }


@dataclass
class _DialogueRun:
    """One dialogue under way in :meth:`ESMemSegmenter._llm_stages`: its stage-1 annotations
    so far; once all are in and embedded, its gaps' I_t, its candidates and their p_eb."""

    dialogue: DialogueText
    annotations: list[dict[str, Any]] = field(default_factory=list)
    information: np.ndarray = field(default_factory=lambda: np.zeros(0))
    candidates: list[int] = field(default_factory=list)
    probabilities: dict[int, float | None] = field(default_factory=dict)

    @property
    def annotated(self) -> bool:
        return len(self.annotations) == len(self.dialogue)


def _compact_json(value: Mapping[str, Any]) -> str:
    return json.dumps(value, ensure_ascii=False)


def _topic_annotation(tag: object, value: Mapping[str, Any]) -> dict[str, Any]:
    """A turn's annotation from a schema-valid stage-1 reply."""
    words = [str(word).strip() for word in value["keywords"]]
    return {"topic": str(value["topic"]).strip(), "keywords": [w for w in words if w]}


def _intent_probability(tag: object, value: Mapping[str, Any]) -> float | Rejected:
    """p_eb from a schema-valid stage-2 reply, rejected when it names one label twice."""
    high, low = ((item["name"], float(item["prob"])) for item in value["labels"])
    if high[0] == low[0]:
        return Rejected("it gave the same label as the most and the least fitting")
    return boundary_probability(high, low)
