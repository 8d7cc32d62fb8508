"""Dialogue segmenters behind one interface: utterances in, boundary labels (and cost) out.

This package holds the interface (:mod:`.base`) and the generic segmenters that several callers
share:

* :class:`~memsys.segment.texttiling.TextTilingSegmenter` — Hearst's lexical TextTiling over
  utterances, the harness's own dev-tuned variant.
* :class:`~memsys.segment.texttiling_superdialseg.SuperDialSegTextTilingSegmenter` — NLTK's
  TextTiling as SuperDialSeg ran it (w=10, k=6): the published baseline, reproduced.
* :class:`~memsys.segment.embedding.EmbeddingSegmenter` — the same valleys over sentence
  embeddings (with TextTiling, built on :mod:`.depth`; content words in :mod:`.lexical`).

A paper method's own segmenter lives in its method's folder, with its prompts:

* :class:`~memsys.methods.esmem.segmenter.ESMemSegmenter` — ES-Mem's two-stage event
  segmentation (``extraction: llm`` or ``lite``).
* :class:`~memsys.methods.secom.segmenter.SeComSegmenter` — SeCom's one-call LLM segmentation,
  with optional reflection (:mod:`memsys.methods.secom.reflection`).

Each is built from a ``conf/segmenter/*.yaml`` node (``_target_``) with its services injected:
``segmenter_from_config(cfg.segmenter, embedder=..., backbone=...)`` (:mod:`.build`).
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
