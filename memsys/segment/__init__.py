"""Dialogue segmenters behind one interface: utterances in, boundary labels (and cost) out.

* :class:`~memsys.segment.texttiling.TextTilingSegmenter` — Hearst's lexical TextTiling.
* :class:`~memsys.segment.embedding.EmbeddingSegmenter` — the same valleys over sentence
  embeddings.
* :class:`~memsys.segment.esmem.ESMemSegmenter` — ES-Mem's two-stage event segmentation
  (``extraction: llm`` or ``lite``).
* :class:`~memsys.segment.secom.SeComSegmenter` — SeCom's one-call LLM segmentation, with
  optional reflection.

Each is built from a ``conf/segmenter/*.yaml`` node (``_target_``) with its services injected:
``instantiate(cfg.segmenter, embedder=..., backbone=...)``.
"""

from memsys.segment.base import (
    Boundaries,
    CostMeter,
    DialogueText,
    Segmentation,
    SegmentationCost,
    Segmenter,
    TrainingRequest,
    labels_from_gaps,
    segments_from_labels,
)

__all__ = [
    "Boundaries",
    "CostMeter",
    "DialogueText",
    "Segmentation",
    "SegmentationCost",
    "Segmenter",
    "TrainingRequest",
    "labels_from_gaps",
    "segments_from_labels",
]
