"""Test doubles for the segmenter tests: hand-made dialogues, a rule-driven backbone, and a tiny
segmentation data directory."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from fakes.llm import FAST_RETRY, RuleProvider
from memsys.llm import Accounting, Backbone, BackboneSettings, LLMRequest, ResponseCache

#: Two topics, switching after utterance 3 (label 1 on index 3).
PETS_THEN_COOKING = (
    "do you have any pets at home ?",
    "yes , two cats and a dog . the cats sleep all day .",
    "cats are lovely pets . my dog chases the cats around .",
    "our dog is old now , but the cats still play with him .",
    "what did you cook for dinner tonight ?",
    "i cooked pasta with tomato sauce and garlic .",
    "pasta with garlic sauce is my favourite dinner to cook .",
    "next time cook the sauce longer , the tomato gets sweeter .",
)
PETS_THEN_COOKING_LABELS = (0, 0, 0, 1, 0, 0, 0, 0)


def rule_backbone(reply: Callable[[LLMRequest], str]) -> tuple[Backbone, RuleProvider]:
    """A backbone over a :class:`RuleProvider`, no cache, fast retries, one request at a time."""
    provider = RuleProvider(reply)
    backbone = Backbone(
        provider,  # type: ignore[arg-type]
        cache=ResponseCache.disabled(),
        accounting=Accounting(),
        settings=BackboneSettings(concurrency=1, retry=FAST_RETRY),
        stage="segmentation",
    )
    return backbone, provider


def user_text(request: LLMRequest) -> str:
    """The prompt of a request: its first user message (a retry adds the rejected reply and a
    note after it)."""
    return next(m["content"] for m in request.messages if m["role"] == "user")


def write_segmentation_data(root: Path) -> Path:
    """A data directory with a 4-dialogue DialSeg711 test file and a 3-dialogue TIAGE split each.

    Dialogue ``call_id_k`` of DialSeg711 is :data:`PETS_THEN_COOKING` (topic ids 0/1).
    """
    lines = []
    for k in range(4):
        lines.append(f"call_id_{k}")
        topic_ids = [0] * 4 + [1] * 4
        lines += [f"{t} {u}" for t, u in zip(topic_ids, PETS_THEN_COOKING, strict=True)]
    path = root / "dialseg711" / "tadam" / "en_dataset_reference_2.txt"
    path.parent.mkdir(parents=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tiage = {
        str(k): [[u, "1" if i == 4 else "0"] for i, u in enumerate(PETS_THEN_COOKING[: 5 + k])]
        for k in range(3)
    }
    (root / "tiage" / "official").mkdir(parents=True)
    for split in ("train", "dev", "test"):
        (root / "tiage" / "official" / f"anno_{split}.json").write_text(json.dumps(tiage))
    return root
