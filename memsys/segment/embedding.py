"""Embedding-similarity segmentation: TextTiling's valleys over sentence-embedding cohesion.

The semantic-chunking baseline of the RAG literature (and Song et al.'s embedding-enhanced
TextTiling for dialogue): embed each utterance (MiniLM by default, through the shared cached
:class:`~memsys.embed.Embedder`), score each gap by the cosine between the mean embedding of the
``window`` utterances before it and of the ``window`` after it, and cut at the deep valleys of
that curve with the same depth machinery as TextTiling (:mod:`memsys.segment.depth`), so the two
baselines differ only in their features.

``window`` (2) plays TextTiling's block size; the depth defaults are TextTiling's. The utterance
text is embedded without the speaker name, which most segmentation sets do not give.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memsys.embed import Embedder
from memsys.llm.backbone import Backbone
from memsys.segment.base import Boundaries, CostMeter, DialogueText, Segmenter
from memsys.segment.depth import DepthRule, block_similarities


class EmbeddingSegmenter(Segmenter):
    """Depth scores over adjacent-window cosine similarity of sentence embeddings."""

    def __init__(
        self,
        *,
        window: int = 2,
        depth: DepthRule | None = None,
        embedder: Embedder | None = None,
        backbone: Backbone | None = None,
    ) -> None:
        super().__init__(embedder=embedder, backbone=backbone)
        if window < 1:
            raise ValueError(f"window must be >= 1, got {window}")
        self.window = window
        self.depth = depth or DepthRule()
        self.require_embedder()

    def prepare(self, dialogues: Sequence[Sequence[str]]) -> None:
        """Embed every utterance of ``dialogues`` in large batches (fills the cache)."""
        self.require_embedder().encode([text for dialogue in dialogues for text in dialogue])

    def boundaries(self, dialogue: DialogueText, meter: CostMeter) -> Boundaries:
        vectors = self.require_embedder().encode(dialogue.utterances)
        similarities = block_similarities(vectors.astype("float64"), self.window)
        gaps, details = self.depth.boundaries(similarities, self.window)
        return Boundaries(gaps, details=details)

    def config(self) -> dict[str, Any]:
        return {"window": self.window, "depth": self.depth.to_json()}
