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
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from memsys.embed import Embedder
from memsys.llm.backbone import Backbone
from memsys.llm.flow import RequestFlow
from memsys.llm.jsonout import JSONReplyParser
from memsys.llm.types import LLMRequest, LLMResponse, SamplingParams
from memsys.segment.base import Boundaries, CostMeter, DialogueText, Segmenter, booked
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
        """Both stages of every dialogue as chains on one :class:`RequestFlow`.

        Dialogues are independent of one another: each advances as soon as its own reply is
        read. Within one, stage 1 is recurrent (turn t + 1's request quotes turn t's
        annotation) and stage 2 needs the candidates, i.e. every stage-1 annotation embedded.
        The annotations are embedded dialogue by dialogue in their order, as one at a time
        would: the embedder encodes only what its cache lacks, and the model's last bits depend
        on the other texts of its batch, so embedding in another order could move a candidate.
        """
        runs = [_DialogueRun(dialogue) for dialogue in dialogues]
        embedded = 0  # runs whose candidates are known (a prefix)
        with RequestFlow[tuple[str, int, int]](self.require_backbone()) as flow:
            for k, run in enumerate(runs):
                flow.submit(("topic", k, 0), self._topic_request(run.dialogue, 0, []), STAGE_1)
            for (stage, k, index), outcome in flow:
                reply, run = booked(outcome, meter), runs[k]
                if stage == "intent":
                    run.probabilities[index] = self._read_intent(reply, meter)
                    continue
                run.annotations.append(
                    self._read_topic(reply, run.dialogue.utterances[index], meter)
                )
                if not run.annotated:
                    request = self._topic_request(run.dialogue, index + 1, run.annotations)
                    flow.submit(("topic", k, index + 1), request, priority=STAGE_1)
                while embedded < len(runs) and runs[embedded].annotated:
                    self._send_candidates(runs[embedded], embedded, flow)
                    embedded += 1
        return [
            self._decide(run.annotations, run.information, run.candidates, run.probabilities)
            for run in runs
        ]

    def _send_candidates(
        self, run: _DialogueRun, k: int, flow: RequestFlow[tuple[str, int, int]]
    ) -> None:
        """Embed dialogue ``k``'s annotations, find its candidates and send their stage-2
        requests (each candidate's independent of the others')."""
        vectors = self.require_embedder().encode([annotation_text(a) for a in run.annotations])
        run.information, run.candidates = self._candidates(vectors)
        run.probabilities = dict.fromkeys(run.candidates)  # in gap order, filled as replies come
        for gap in run.candidates:
            flow.submit(("intent", k, gap), self._intent_request(run.dialogue, gap), STAGE_2)

    def _topic_request(
        self, dialogue: DialogueText, index: int, previous: Sequence[Mapping[str, Any]]
    ) -> LLMRequest:
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
        params = SamplingParams(max_tokens=self.topic_max_tokens, json_schema=TOPIC_SCHEMA)
        return LLMRequest(messages, params)

    def _read_topic(self, reply: LLMResponse | None, text: str, meter: CostMeter) -> dict[str, Any]:
        """A turn's annotation from its stage-1 reply, or the lite one when the reply is unusable."""
        parsed = self.topic_parser.parse(reply.text) if reply else None
        if parsed is not None and parsed.ok:
            topic = str(parsed.value["topic"]).strip()
            words = [str(word).strip() for word in parsed.value["keywords"]]
            return {"topic": topic, "keywords": [w for w in words if w]}
        meter.fallback("topic_fallback")
        return lite_annotation(text, self.keyword_limit)

    def _intent_request(self, dialogue: DialogueText, gap: int) -> LLMRequest:
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
        params = SamplingParams(max_tokens=self.intent_max_tokens, json_schema=INTENT_SCHEMA)
        return LLMRequest(messages, params)

    def _read_intent(self, reply: LLMResponse | None, meter: CostMeter) -> float | None:
        """p_eb from a stage-2 reply, or ``None`` (counted) when there is none or it is unusable."""
        probability = self._parse_intent(reply.text) if reply else None
        if probability is None:
            meter.fallback("intent_fallback")
        return probability

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
