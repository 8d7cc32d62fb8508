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
once: stage 1's recurrence is within a dialogue, so the dialogues' t-th turns go out in one
batch, and stage 2's candidates of all dialogues in another; the requests, hence the results, are
those of segmenting the dialogues one at a time.

Readings taken where the paper is vague (each a config value where it is a choice):

* The embedded text is ``"<topic>: <kw1>, <kw2>, ..."``.
* rho² is capped at ``1 - 1e-12`` so identical vectors give a large finite I, not infinity;
  a constant vector (zero variance) has rho = 0.
* The quantile is numpy's default (linear interpolation); "falls below" is read as ``<=``.
* Windows at the ends of a dialogue are truncated to the turns that exist.
* The two labels must differ (the prompt demands it); the probabilities' order is not enforced,
  since p_eb averages both anyway.
* Unusable replies never crash a run. A failed or unparseable stage-1 reply is replaced by the
  lite annotation of that turn (``topic_fallback``); a failed stage-2 reply drops the candidate
  (``on_intent_failure: drop``, counted as ``intent_fallback``): with no evidence of a shift the
  conservative reading of the tau_c filter keeps no boundary. ``keep`` trusts stage 1 instead.

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
from typing import Any, Literal

import numpy as np

from memsys.embed import Embedder
from memsys.llm.backbone import Backbone
from memsys.llm.jsonout import JSONReplyParser
from memsys.llm.types import LLMRequest, LLMResponse, Message, SamplingParams
from memsys.segment.base import Boundaries, CostMeter, DialogueText, Segmenter, ask_many
from memsys.segment.depth import block_similarities
from memsys.segment.lexical import keywords

SHIFT_LABELS = ("Topic_Intro", "Topic_Shift")
CONTINUE_LABELS = ("Detail_Elaborate", "Direct_Resp")
INTENT_LABELS = SHIFT_LABELS + CONTINUE_LABELS
#: rho² is capped here so that I stays finite for identical vectors.
MAX_RHO_SQUARED = 1 - 1e-12

TOPIC_SYSTEM_PROMPT = """\
You label what a conversation turn is about. You are given the previous turn together with the \
topic and keywords found for it, and then the current turn.

Describe the current turn; look at the previous turn only to keep the labels continuous. Give \
the current turn's [single main topic] and its [core keywords].

### Rules
- topic: one short phrase, at most 15 characters, that names the main intent concisely and \
abstractly.
- keywords: mostly nouns and key phrases, a few verbs allowed; leave out pronouns and forms of \
address ("you", "I", "he"), interjections and function words; no duplicates; most important \
first.
- If the turn touches several topics, choose the one that takes up more of it and is developed \
more clearly.
- Do not copy the previous turn's output unchanged.
- Reply with JSON only, with exactly the keys topic and keywords, and no other text.

### Output format
{"topic": "main topic", "keywords": ["keyword1", "keyword2", "keyword3"]}"""

TOPIC_USER_PROMPT = """\
[Previous turn]
{previous_text}

[Topic and keywords of the previous turn]
{previous_annotation}

[Current turn]
{text}"""

TOPIC_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "topic": {"type": "string", "maxLength": 120},
        "keywords": {
            "type": "array",
            "items": {"type": "string", "maxLength": 60},
            "maxItems": 10,
        },
    },
    "required": ["topic", "keywords"],
    "additionalProperties": False,
}

INTENT_SYSTEM_PROMPT = """\
You judge the intent of a conversation at a possible cut. You see the PRIOR context (the turns \
to the left of the cut) and the FOLLOWING context (the turns to the right of it). From the fixed \
label set below, choose the label that fits best (highest confidence) and the label that fits \
worst (lowest confidence):

["Topic_Intro", "Topic_Shift", "Detail_Elaborate", "Direct_Resp"]

### Labels
- Topic_Intro: brings in a new topic that is related to what came before, but the core content \
moves elsewhere.
- Topic_Shift: leaves the previous topic completely for a new, unrelated topic or direction.
- Detail_Elaborate: adds to what was said before (follow-up questions, further discussion, extra \
details) without opening another direction or bringing new information.
- Direct_Resp: answers what was said before directly (understanding, agreement, a plain answer) \
without new information or a new direction.

### Output rules
- Give exactly 2 labels: first the best-fitting one, then the worst-fitting one.
- The two labels are different and both come from the fixed set.
- Give each label a prob in [0, 1]; the first prob is larger than the second.
- Reply with JSON only: a "labels" list whose items have the fields name and prob and nothing \
else; no explanations.

### Example (illustration only)
{"labels": [{"name": "Topic_Shift", "prob": 0.87}, {"name": "Direct_Resp", "prob": 0.13}]}"""

INTENT_USER_PROMPT = """\
[PRIOR CONTEXT (left of the cut)]
{left_context}

[FOLLOWING CONTEXT (right of the cut)]
{right_context}"""

INTENT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "labels": {
            "type": "array",
            "minItems": 2,
            "maxItems": 2,
            "items": {
                "type": "object",
                "properties": {
                    "name": {"enum": list(INTENT_LABELS)},
                    "prob": {"type": "number", "minimum": 0, "maximum": 1},
                },
                "required": ["name", "prob"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["labels"],
    "additionalProperties": False,
}

FIRST_TURN = "(none: this is the first turn)"


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
        self.topic_parser = JSONReplyParser(TOPIC_SCHEMA)
        self.intent_parser = JSONReplyParser(INTENT_SCHEMA)
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
        sessions), their LLM calls in shared batches, their cost on one ``meter``.

        Stage 1's recurrence runs within a dialogue, so the dialogues advance in lockstep, one
        batch per turn position; stage 2 sends every candidate of every dialogue in one batch.
        The requests are those of segmenting the dialogues one by one, so are the results.
        """
        if not dialogues:
            return []
        embedder = self.require_embedder()
        if self.uses_llm:
            annotations = self._llm_annotations(dialogues, meter)
            vectors = [
                embedder.encode([annotation_text(a) for a in notes]) for notes in annotations
            ]
        else:
            annotations = [
                [lite_annotation(text, self.keyword_limit) for text in dialogue.utterances]
                for dialogue in dialogues
            ]
            vectors = [embedder.encode(dialogue.utterances) for dialogue in dialogues]
        information = [
            gaussian_mutual_information(adjacent_pearson(v.astype(np.float64))) for v in vectors
        ]
        candidates = [quantile_candidates(values, self.quantile) for values in information]
        if self.uses_llm:
            probabilities = self._intent_probabilities(dialogues, candidates, meter)
        else:
            probabilities = []
            for gaps, dialogue_vectors in zip(candidates, vectors, strict=True):
                similarities = block_similarities(dialogue_vectors, self.window)
                contrast = rank_shift_probability(similarities)
                probabilities.append({gap: float(contrast[gap]) for gap in gaps})
        return [
            self._decide(*parts)
            for parts in zip(annotations, information, candidates, probabilities, strict=True)
        ]

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

    def _llm_annotations(
        self, dialogues: Sequence[DialogueText], meter: CostMeter
    ) -> list[list[dict[str, Any]]]:
        """Stage 1, recurrent: each turn's call sees the previous turn and its annotation; the
        t-th turns of all dialogues go out together."""
        params = SamplingParams(max_tokens=self.topic_max_tokens, json_schema=TOPIC_SCHEMA)
        annotations: list[list[dict[str, Any]]] = [[] for _ in dialogues]
        for index in range(max(len(dialogue) for dialogue in dialogues)):
            active = [k for k, dialogue in enumerate(dialogues) if index < len(dialogue)]
            requests = [
                LLMRequest(self._topic_messages(dialogues[k], index, annotations[k]), params)
                for k in active
            ]
            replies = ask_many(self.require_backbone(), requests, meter)
            for k, reply in zip(active, replies, strict=True):
                annotations[k].append(
                    self._read_topic(reply, dialogues[k].utterances[index], meter)
                )
        return annotations

    @staticmethod
    def _topic_messages(
        dialogue: DialogueText, index: int, previous: Sequence[Mapping[str, Any]]
    ) -> tuple[Message, ...]:
        """Figure 6's request for turn ``index``, given the annotations of the turns before it."""
        prompt = TOPIC_USER_PROMPT.format(
            previous_text=dialogue.line(index - 1) if index else FIRST_TURN,
            previous_annotation=_compact_json(previous[-1]) if index else FIRST_TURN,
            text=dialogue.line(index),
        )
        return (
            {"role": "system", "content": TOPIC_SYSTEM_PROMPT},
            {"role": "user", "content": prompt},
        )

    def _read_topic(self, reply: LLMResponse | None, text: str, meter: CostMeter) -> dict[str, Any]:
        """A turn's annotation from its stage-1 reply, or the lite one when the reply is unusable."""
        parsed = self.topic_parser.parse(reply.text) if reply else None
        if parsed is not None and parsed.ok:
            topic = str(parsed.value["topic"]).strip()
            words = [str(word).strip() for word in parsed.value["keywords"]]
            return {"topic": topic, "keywords": [w for w in words if w]}
        meter.fallback("topic_fallback")
        return lite_annotation(text, self.keyword_limit)

    def _intent_probabilities(
        self,
        dialogues: Sequence[DialogueText],
        candidates: Sequence[Sequence[int]],
        meter: CostMeter,
    ) -> list[dict[int, float | None]]:
        """Stage 2: p_eb per candidate gap of each dialogue (``None`` where the reply was
        unusable), every candidate of every dialogue in one batch."""
        params = SamplingParams(max_tokens=self.intent_max_tokens, json_schema=INTENT_SCHEMA)
        requests = []
        for dialogue, gaps in zip(dialogues, candidates, strict=True):
            for gap in gaps:
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
                requests.append(LLMRequest(messages, params))
        replies = iter(ask_many(self.require_backbone(), requests, meter) if requests else [])
        probabilities: list[dict[int, float | None]] = []
        for gaps in candidates:
            probabilities.append({})
            for gap in gaps:
                reply = next(replies)
                probabilities[-1][gap] = self._parse_intent(reply.text) if reply else None
                if probabilities[-1][gap] is None:
                    meter.fallback("intent_fallback")
        return probabilities

    def _parse_intent(self, text: str) -> float | None:
        """p_eb from one stage-2 reply, or ``None`` when it breaks the schema or repeats a label."""
        parsed = self.intent_parser.parse(text)
        if not parsed.ok:
            return None
        high, low = ((item["name"], float(item["prob"])) for item in parsed.value["labels"])
        if high[0] == low[0]:
            return None
        return boundary_probability(high, low)

    def reply_counts(self) -> dict[str, Any]:
        """Outcome counts of both JSON parsers so far."""
        return {"topic": self.topic_parser.counts(), "intent": self.intent_parser.counts()}

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


def _compact_json(value: Mapping[str, Any]) -> str:
    return json.dumps(value, ensure_ascii=False)
