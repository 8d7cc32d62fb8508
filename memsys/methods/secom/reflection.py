"""SeCom's segmentation guidance learned by self-reflection (papers/secom.txt §2.2, A.1, Fig. 8).

With a few annotated dialogues, SeCom segments them zero-shot, picks the "hard examples" with the
largest WindowDiff, splits them into mini-batches, and for each batch asks the LLM to compare its
predictions with the ground truth, revise the existing rubric and add at most one new item, and
pick the most representative example with a reflection on it
(:data:`memsys.methods.secom.prompts.REFLECTION_PROMPT`). The rubric items and examples (the
guidance G) are then added to the segmentation prompt (Figure 7). Appendix A.1's numbers
are :class:`ReflectionConfig`'s defaults: the whole training split segmented zero-shot, the top
``hard_examples`` = 100 by WindowDiff, in mini-batches of ``batch_size`` = 10, so 10 reflection
rounds of one new item each and ``max_rubric_items`` = 10. Smaller samples are config overlays
(``conf/segmenter/secom_reflection_sample.yaml``).

The learned guidance is stored under a hash of everything it depends on (model, reflection and
segmenter config, prompts, the training dialogues' content), so a rerun, or another run with
the same settings, reuses it without any LLM call.

Readings taken where the paper is vague:

* Training dialogues are the first ``dialogues`` of the split, in file order (``None``: all of
  it, the paper's "from the training set"); the hard examples are the ``hard_examples`` with the
  largest WindowDiff (ties: file order).
* A training dialogue whose zero-shot reply was unusable twice is predicted by the segmenter's
  fallback (fixed chunks); it stays a candidate hard example (it is what the segmenter output),
  and the report counts such dialogues (``zero_shot_fallbacks``) so that a rubric learned from
  fallbacks is visible as such.
* The ``<rubric>`` block's bullet lines are the model's rubric. When it lists more items than
  the current rubric, the model copied and revised the whole rubric plus its new item (what the
  prompt asks) and its list replaces the old one; otherwise its items are appended. The rubric
  is capped at ``max_rubric_items`` (first ones kept).
* A reply without a ``<rubric>`` block holding a bulleted item, or a failed call, is asked once more (the retry rule of
  :mod:`memsys.llm.structured`); failing twice, it leaves the rubric unchanged and is counted
  (``no_rubric``).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memsys.kvstore import SQLiteKV
from memsys.llm.backbone import Backbone
from memsys.llm.structured import ExtractionReport, Rejected, ask_many
from memsys.llm.types import SamplingParams
from memsys.methods.secom.prompts import REFLECTION_PROMPT
from memsys.segment.base import WindowDiff, segments_from_labels
from memsys.types import SegmentationDialogue

_RUBRIC = re.compile(r"<rubric>(.*?)(?:</rubric>|$)", re.DOTALL)
_EXAMPLE = re.compile(r"<example>(.*?)(?:</example>|$)", re.DOTALL)
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+(.*\S)")


@dataclass(frozen=True)
class ReflectionConfig:
    """How much annotated data to reflect on; the defaults are Appendix A.1's."""

    enabled: bool = False
    dataset: str = "tiage"
    split: str = "train"
    dialogues: int | None = None
    hard_examples: int = 100
    batch_size: int = 10
    max_rubric_items: int = 10
    max_tokens: int = 384
    use_examples: bool = True

    def __post_init__(self) -> None:
        for name in ("dialogues", "hard_examples", "batch_size", "max_rubric_items", "max_tokens"):
            value = getattr(self, name)
            if name == "dialogues" and value is None:
                continue
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"reflection.{name} must be an integer >= 1, got {value!r}")

    def to_json(self) -> dict[str, Any]:
        """The settings as JSON."""
        return dict(self.__dict__)


@dataclass(frozen=True)
class Prediction:
    """A training dialogue's zero-shot labels, and whether they are the fallback's (counted)."""

    labels: tuple[int, ...]
    fell_back: bool = False


@dataclass(frozen=True)
class Guidance:
    """What reflection learned: rubric items and representative examples with reflections."""

    rubric: tuple[str, ...] = ()
    examples: tuple[str, ...] = ()

    def render(self) -> str:
        """The prompt section that carries the guidance ('' when nothing was learned).

        >>> print(Guidance(("Cut when the subject changes.",)).render().strip())
        ## Segmentation Rubric
        Criteria learned from annotated conversations; follow them:
        - Cut when the subject changes.
        """
        if not self.rubric and not self.examples:
            return ""
        parts = [
            "",
            "## Segmentation Rubric",
            "Criteria learned from annotated conversations; follow them:",
            *(f"- {item}" for item in self.rubric),
        ]
        if self.examples:
            parts += ["", "## Representative Examples", *self.examples]
        return "\n".join(parts) + "\n"

    def to_json(self) -> dict[str, list[str]]:
        """Plain JSON."""
        return {"rubric": list(self.rubric), "examples": list(self.examples)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Guidance:
        """Inverse of :meth:`to_json`."""
        return cls(tuple(data.get("rubric", ())), tuple(data.get("examples", ())))


def render_segmented(dialogue: SegmentationDialogue, labels: Sequence[int]) -> str:
    """A conversation as ``Segment k:`` blocks of numbered exchanges.

    >>> d = SegmentationDialogue("d", ("hi", "cats?", "dogs!"), (0, 1, 0))
    >>> print(render_segmented(d, d.boundary_labels))
    Segment 0:
    [Exchange 0]: hi
    [Exchange 1]: cats?
    Segment 1:
    [Exchange 2]: dogs!
    """
    lines = []
    for segment_id, (first, last) in enumerate(segments_from_labels(labels)):
        lines.append(f"Segment {segment_id}:")
        lines += [f"[Exchange {i}]: {dialogue.utterances[i]}" for i in range(first, last + 1)]
    return "\n".join(lines)


def render_example(number: int, dialogue: SegmentationDialogue, predicted: Sequence[int]) -> str:
    """One hard example: the model's segmentation, then the ground truth."""
    return (
        f"## Example {number}\n### Predicted segmentation\n{render_segmented(dialogue, predicted)}"
        f"\n### Ground-truth segmentation\n"
        f"{render_segmented(dialogue, dialogue.boundary_labels)}"
    )


def parse_reflection(text: str) -> tuple[list[str] | None, str | None]:
    """Rubric items (``None`` without a ``<rubric>`` block) and the example text, if any.

    >>> parse_reflection("<rubric>\\n- Keep greetings with what follows.\\n</rubric>")
    (['Keep greetings with what follows.'], None)
    """
    rubric = _RUBRIC.search(text)
    example = _EXAMPLE.search(text)
    items = None
    if rubric is not None:
        items = [m.group(1) for line in rubric.group(1).splitlines() if (m := _BULLET.match(line))]
    example_text = example.group(1).strip() if example and example.group(1).strip() else None
    return items, example_text


def merge_rubric(existing: Sequence[str], items: Sequence[str], limit: int) -> tuple[str, ...]:
    """A revised full rubric replaces the old one; fewer items are appended (see module doc).

    >>> merge_rubric(["a"], ["b"], 10), merge_rubric(["a", "b"], ["a2", "b", "c"], 10)
    (('a', 'b'), ('a2', 'b', 'c'))
    """
    merged = list(items) if len(items) > len(existing) else [*existing, *items]
    return tuple(dict.fromkeys(item.strip() for item in merged if item.strip()))[:limit]


def guidance_key(
    model_id: str,
    config: ReflectionConfig,
    context: Mapping[str, Any],
    dialogues: Sequence[SegmentationDialogue],
) -> str:
    """Content hash of everything the learned guidance depends on."""
    payload = {
        "model": model_id,
        "reflection": config.to_json(),
        "reflection_prompt": REFLECTION_PROMPT,
        "context": context,
        "dialogues": [[d.dialogue_id, d.utterances, d.boundary_labels] for d in dialogues],
    }
    canonical = json.dumps(payload, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def learn_guidance(
    dialogues: Sequence[SegmentationDialogue],
    *,
    predict: Callable[[SegmentationDialogue], Prediction],
    window_diff: WindowDiff,
    backbone: Backbone,
    config: ReflectionConfig,
    context: Mapping[str, Any],
    store: SQLiteKV | None = None,
) -> tuple[Guidance, dict[str, Any]]:
    """Reflect on the worst zero-shot predictions; return the guidance and a JSON report.

    ``predict`` segments one training dialogue zero-shot; ``context`` is whatever else the
    guidance depends on (the segmenter's config and prompt), hashed into the store key.
    """
    training = list(dialogues[: config.dialogues])
    key = guidance_key(backbone.model_id, config, context, training)
    stored = store.get(key) if store is not None else None
    if stored is not None:
        record = json.loads(stored)
        return Guidance.from_json(record["guidance"]), {**record["report"], "cached": True}

    report = ExtractionReport()
    zero_shot = [predict(dialogue) for dialogue in training]
    predictions = [prediction.labels for prediction in zero_shot]
    errors = [window_diff(d.boundary_labels, p) for d, p in zip(training, predictions, strict=True)]
    ranked = sorted(range(len(training)), key=lambda i: (-errors[i], i))[: config.hard_examples]
    outcomes = Counter[str]()
    guidance = Guidance()
    params = SamplingParams(max_tokens=config.max_tokens)
    batches = [
        ranked[at : at + config.batch_size] for at in range(0, len(ranked), config.batch_size)
    ]
    for batch in batches:
        examples = "\n\n".join(
            render_example(number, training[i], predictions[i])
            for number, i in enumerate(batch, start=1)
        )
        rubric_text = "\n".join(f"- {item}" for item in guidance.rubric) or "(none yet)"
        prompt = REFLECTION_PROMPT.format(rubric=rubric_text, examples=examples)
        (reflected,) = ask_many(
            backbone,
            [[{"role": "user", "content": prompt}]],
            params=params,
            read=_reflection,
            report=report,
        )
        if reflected is None:  # asked twice (counted in the report)
            outcomes["no_rubric"] += 1
            continue
        items, example = reflected
        outcomes["ok"] += 1
        rubric = merge_rubric(guidance.rubric, items, config.max_rubric_items)
        kept_examples = guidance.examples + ((example,) if example and config.use_examples else ())
        guidance = Guidance(rubric, kept_examples)
    report = {
        "cached": False,
        "training_dialogues": len(training),
        "zero_shot_fallbacks": sum(prediction.fell_back for prediction in zero_shot),
        "hard_examples": {training[i].dialogue_id: round(errors[i], 6) for i in ranked},
        "hard_example_fallbacks": sum(zero_shot[i].fell_back for i in ranked),
        "rounds": len(batches),
        "rubric_items": len(guidance.rubric),
        "mean_window_diff": round(sum(errors) / len(errors), 6) if errors else None,
        "reflections": dict(sorted(outcomes.items())),
        "reflection_cost": report.to_json(),
        "guidance": guidance.to_json(),
    }
    if store is not None:
        record = {"guidance": guidance.to_json(), "report": report}
        store.put(key, json.dumps(record, ensure_ascii=False).encode())
    return guidance, report


def _reflection(index: int, text: str) -> tuple[list[str], str | None] | Rejected:
    """A reflection reply's rubric items and example, or why it cannot be used."""
    items, example = parse_reflection(text)
    if not items:  # no block, or an empty one (e.g. the format line of the prompt echoed)
        return Rejected("it had no <rubric> block of bulleted items")
    return items, example
