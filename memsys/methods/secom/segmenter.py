"""SeCom's zero-shot conversation segmentation (papers/secom.txt §2.2, Appendix A.1, Fig. 6).

One LLM call per dialogue (:data:`memsys.methods.secom.prompts.SEGMENTATION_PROMPT`): the
exchanges are numbered (``[Exchange i]: ...``, separated by blank lines) and the model returns
one JSON line per segment,
``{"segment_id", "start_exchange_number", "end_exchange_number", "num_exchanges"}``, between
``<segmentation>`` tags. The reply is checked for coverage: the segments, ordered by start, must
begin at the first exchange, end at the last, and meet without gaps or overlaps. A reply that
fails (no usable lines, a gap, an overlap, numbers out of range, a failed call) is asked again
once, quoting the reply and what was wrong (the retry rule every method's LLM extraction
follows, :mod:`memsys.llm.structured`); a second failure is replaced by fixed chunks of
``fallback_chunk`` = 3 exchanges, and the failures are counted by kind; the dialogue's details
name the substitute (``fallback``), so that a table can say whose labels it shows.

With ``reflection.enabled`` the segmenter first learns a segmentation guidance (rubric items and
representative examples) from the worst-WindowDiff dialogues of an annotated training split, and
adds it to the instruction (:mod:`memsys.methods.secom.reflection`).

Readings taken where the paper is vague:

* For the segmentation benchmark an exchange is one utterance; exchanges are numbered from 0,
  as in the paper's output example. A known speaker is written before the text.
* ``num_exchanges`` is redundant with the start and end numbers; a wrong count is noted
  (``count_mismatch``) but the start/end numbers decide.
* Lines inside the tags that hold no ``{`` (prose, "...", code fences) are skipped; a line with
  a ``{`` that is not a JSON object with integer start and end numbers fails the reply. A reply
  without the opening tag is read whole (noted ``untagged``); a missing closing tag is
  tolerated, and generation stops at ``</segmentation>``.
* The reply budget grows with the dialogue: ``tokens_per_exchange`` per exchange plus 64.
"""

from __future__ import annotations

import copy
import itertools
import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from memsys.embed import Embedder
from memsys.kvstore import SQLiteKV
from memsys.llm.backbone import Backbone
from memsys.llm.structured import Rejected, StructuredFlow
from memsys.llm.types import SamplingParams
from memsys.methods.secom.prompts import SEGMENTATION_PROMPT
from memsys.methods.secom.reflection import (
    Guidance,
    Prediction,
    ReflectionConfig,
    learn_guidance,
)
from memsys.segment.base import (
    Boundaries,
    CostMeter,
    DialogueText,
    Segmenter,
    TrainingRequest,
    WindowDiff,
)
from memsys.types import SegmentationDialogue

OPEN_TAG, CLOSE_TAG = "<segmentation>", "</segmentation>"
_BLOCK = re.compile(re.escape(OPEN_TAG) + r"(.*?)(?:" + re.escape(CLOSE_TAG) + r"|$)", re.DOTALL)


def render_exchanges(dialogue: DialogueText, first_number: int = 0) -> str:
    """The numbered exchanges the prompt shows, one per utterance, blank lines between.

    >>> print(render_exchanges(DialogueText(("hi", "hello"), ("A", "B"))))
    [Exchange 0]: A: hi
    <BLANKLINE>
    [Exchange 1]: B: hello
    """
    return "\n\n".join(
        f"[Exchange {first_number + index}]: {dialogue.line(index)}"
        for index in range(len(dialogue))
    )


@dataclass(frozen=True)
class ParsedSegmentation:
    """A checked reply: segment-end gaps, or ``problem`` (kind) and ``message`` when unusable."""

    gaps: tuple[int, ...] | None
    problem: str | None = None
    message: str | None = None
    notes: tuple[str, ...] = ()


def _failure(kind: str, message: str, notes: Sequence[str] = ()) -> ParsedSegmentation:
    return ParsedSegmentation(None, kind, message, tuple(notes))


def _exchange_number(value: Any) -> int | None:
    """An exchange number given as an int (or a string of digits); anything else is ``None``."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return None


def parse_segmentation(text: str, n_exchanges: int, first_number: int = 0) -> ParsedSegmentation:
    """Read and check a segmentation reply for a conversation of ``n_exchanges`` exchanges.

    >>> reply = '''<segmentation>
    ... {"segment_id": 0, "start_exchange_number": 0, "end_exchange_number": 1, "num_exchanges": 2}
    ... {"segment_id": 1, "start_exchange_number": 2, "end_exchange_number": 3, "num_exchanges": 2}
    ... </segmentation>'''
    >>> parse_segmentation(reply, 4).gaps
    (1,)
    >>> parse_segmentation(reply, 5).problem
    'gap'
    """
    notes: list[str] = []
    block = _BLOCK.search(text)
    if block is None:
        notes.append("untagged")
    body = block.group(1) if block else text
    spans: list[tuple[int, int]] = []
    for number, raw in enumerate(body.splitlines(), start=1):
        line = raw.strip()
        if "{" not in line:
            continue
        try:
            record = json.loads(line[line.index("{") : line.rindex("}") + 1])
        except (ValueError, json.JSONDecodeError):
            return _failure("not_json", f"line {number} is not a JSON object: {line[:80]!r}", notes)
        if not isinstance(record, dict):
            return _failure("not_json", f"line {number} is not a JSON object", notes)
        start = _exchange_number(record.get("start_exchange_number"))
        end = _exchange_number(record.get("end_exchange_number"))
        if start is None or end is None:
            return _failure("bad_fields", f"line {number} lacks integer start/end numbers", notes)
        if start > end:
            return _failure("bad_fields", f"line {number} starts after it ends", notes)
        if _exchange_number(record.get("num_exchanges")) != end - start + 1:
            notes.append("count_mismatch")
        spans.append((start, end))
    if not spans:
        return _failure("no_segments", "no segment lines", notes)
    spans.sort()
    last_number = first_number + n_exchanges - 1
    if spans[0][0] != first_number:
        kind = "gap" if spans[0][0] > first_number else "out_of_range"
        return _failure(kind, f"first segment starts at {spans[0][0]}", notes)
    for (_, end), (start, _) in itertools.pairwise(spans):
        if start > end + 1:
            return _failure("gap", f"exchanges {end + 1}..{start - 1} are in no segment", notes)
        if start <= end:
            return _failure("overlap", f"exchange {start} is in two segments", notes)
    if spans[-1][1] != last_number:
        kind = "gap" if spans[-1][1] < last_number else "out_of_range"
        return _failure(kind, f"last segment ends at {spans[-1][1]}, not {last_number}", notes)
    gaps = tuple(end - first_number for _, end in spans[:-1])
    return ParsedSegmentation(gaps, notes=tuple(dict.fromkeys(notes)))


def fixed_chunks(n_exchanges: int, size: int) -> tuple[int, ...]:
    """Segment-end gaps of consecutive chunks of ``size`` exchanges (the last may be shorter).

    >>> fixed_chunks(8, 3)
    (2, 5)
    """
    return tuple(range(size - 1, n_exchanges - 1, size))


class SeComSegmenter(Segmenter):
    """One LLM call per dialogue, coverage-checked, with a counted fixed-chunk fallback."""

    def __init__(
        self,
        *,
        extraction: Literal["llm"] = "llm",
        fallback_chunk: int = 3,
        tokens_per_exchange: int = 40,
        reflection: ReflectionConfig | None = None,
        embedder: Embedder | None = None,
        backbone: Backbone | None = None,
    ) -> None:
        super().__init__(embedder=embedder, backbone=backbone)
        if extraction != "llm":
            raise ValueError(
                f"SeCom segments with one LLM call and has no lite mode; got extraction={extraction!r}"
            )
        if fallback_chunk < 1 or tokens_per_exchange < 1:
            raise ValueError("fallback_chunk and tokens_per_exchange must be >= 1")
        self.fallback_chunk = fallback_chunk
        self.tokens_per_exchange = tokens_per_exchange
        self.reflection = reflection or ReflectionConfig()
        self.guidance = Guidance()
        self.outcomes = Counter[str]()
        self.require_backbone()

    @property
    def uses_llm(self) -> bool:
        return True

    def messages(self, dialogue: DialogueText) -> list[dict[str, str]]:
        """The segmentation prompt for one dialogue (with the learned guidance, if any)."""
        prompt = SEGMENTATION_PROMPT.format(
            guidance=self.guidance.render(), exchanges=render_exchanges(dialogue)
        )
        return [{"role": "user", "content": prompt}]

    def params(self, dialogue: DialogueText) -> SamplingParams:
        """The reply budget grows with the dialogue; generation stops at the closing tag."""
        return SamplingParams(
            max_tokens=self.tokens_per_exchange * len(dialogue) + 64, stop=(CLOSE_TAG,)
        )

    def boundaries(self, dialogue: DialogueText, meter: CostMeter) -> Boundaries:
        return self.boundaries_many([dialogue], meter)[0]

    def boundaries_many(
        self, dialogues: Sequence[DialogueText], meter: CostMeter
    ) -> list[Boundaries]:
        """A dialogue's request depends on nothing but the dialogue: all go out at once, each
        asked again once when its reply fails the coverage check (the rule of
        :mod:`memsys.llm.structured`), fixed chunks when it fails twice."""
        report = meter.report("segmentation")
        last: dict[int, ParsedSegmentation] = {}

        def read(index: int, text: str) -> ParsedSegmentation | Rejected:
            parsed = last[index] = parse_segmentation(text, len(dialogues[index]))
            self.outcomes.update(parsed.notes)
            if parsed.gaps is None:
                return Rejected(str(parsed.message), kind=str(parsed.problem))
            return parsed

        decided: list[ParsedSegmentation | None] = [None] * len(dialogues)
        with StructuredFlow[int](self.require_backbone()) as flow:
            for index, dialogue in enumerate(dialogues):
                flow.submit(
                    index, self.messages(dialogue), self.params(dialogue), read=read, report=report
                )
            for index, parsed in flow:
                decided[index] = parsed
        return [
            self._boundaries(dialogue, parsed, last.get(index))
            for index, (dialogue, parsed) in enumerate(zip(dialogues, decided, strict=True))
        ]

    def _boundaries(
        self,
        dialogue: DialogueText,
        parsed: ParsedSegmentation | None,
        last: ParsedSegmentation | None,
    ) -> Boundaries:
        """The gaps of the accepted reply, or fixed chunks (the fallback the report counts)."""
        if parsed is not None:
            self.outcomes["ok"] += 1
            return Boundaries(parsed.gaps or (), details={"notes": list(parsed.notes)})
        failed = last or _failure("no_reply", "the LLM call failed")
        self.outcomes[f"fallback:{failed.problem}"] += 1
        details = {
            "fallback": f"fixed chunks of {self.fallback_chunk} utterances",
            "problem": failed.problem,
            "message": failed.message,
            "notes": list(failed.notes),
        }
        return Boundaries(fixed_chunks(len(dialogue), self.fallback_chunk), details=details)

    def reply_counts(self) -> dict[str, Any]:
        return {"segmentation": dict(sorted(self.outcomes.items()))}

    def training_request(self) -> TrainingRequest | None:
        if not self.reflection.enabled:
            return None
        return TrainingRequest(
            self.reflection.dataset, self.reflection.split, self.reflection.dialogues
        )

    def fit(
        self,
        dialogues: Sequence[SegmentationDialogue],
        *,
        window_diff: WindowDiff,
        store: SQLiteKV | None = None,
    ) -> dict[str, Any]:
        """Learn the guidance by reflection on the worst training dialogues (cached by content).

        Zero-shot predictions and reflection calls are booked to the ``reflection`` stage.
        """
        trainee = copy.copy(self)
        trainee.backbone = self.require_backbone().with_stage("reflection")
        trainee.guidance, trainee.outcomes = Guidance(), Counter()

        def predict(dialogue: SegmentationDialogue) -> Prediction:
            result = trainee.segment(dialogue.utterances, dialogue.speakers)
            return Prediction(result.labels, fell_back=bool(result.cost.fallbacks))

        self.guidance, report = learn_guidance(
            dialogues,
            predict=predict,
            window_diff=window_diff,
            backbone=trainee.backbone,
            config=self.reflection,
            context={"segmenter": self.config(), "prompt": SEGMENTATION_PROMPT},
            store=store,
        )
        return report

    def config(self) -> dict[str, Any]:
        """The reflection settings only when reflection is on: off, they change no label."""
        config: dict[str, Any] = {
            "fallback_chunk": self.fallback_chunk,
            "tokens_per_exchange": self.tokens_per_exchange,
        }
        if self.reflection.enabled:
            config["reflection"] = self.reflection.to_json()
        return config
