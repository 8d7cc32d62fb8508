"""Hearst's valley finding, shared by TextTiling and the embedding segmenter.

Both segmenters score each gap between utterances by how similar the utterances on its two sides
are (block comparison), then look for valleys in that curve: smooth it, give each gap a *depth
score* (how far the curve climbs on either side before it turns), and cut where the depth
exceeds a cutoff computed from the dialogue's own depth scores (Hearst 1997, §5). Only the
features differ (word counts vs sentence embeddings), so the curve machinery lives here once.

Readings taken where Hearst's description is about long texts, not 10-50 utterance dialogues:

* Blocks at the ends of a dialogue are truncated (fewer utterances), not dropped: the first and
  last gaps are as likely to be boundaries as any other.
* Smoothing is a centred moving average over ``2·width + 1`` gaps, truncated at the ends
  (Hearst and nltk smooth with a short average; nltk's reflected padding is not used). The
  default width is 0 (off): on the TIAGE and SuperDialSeg dev splits, width 1 cost TextTiling
  0.07 and 0.23 boundary F1 (valleys of 3-utterance segments get shifted or merged), and the
  embedding segmenter about as much.
* Depth: from gap ``i`` climb left while the smoothed score does not drop, and likewise right;
  ``depth = (left peak − s_i) + (right peak − s_i)``.
* Ends: a gap whose block on either side is cut short by the start or end of the dialogue (the
  first and last ``block − 1`` gaps) is not a candidate, and the cutoff statistics are taken over
  the other gaps. A truncated block has fewer words, so its similarity is biased low and the end
  gaps looked like valleys: with them, TextTiling put a boundary after the first utterance of
  71% of the TIAGE dev dialogues (gold: 12%). nltk clips its ends for the same reason (up to five
  gaps, most of a short dialogue; here only the truncated ones). If no gap has full blocks on
  both sides (a dialogue shorter than ``2·block``), every gap is a candidate.
* Cutoff (Hearst's and nltk's names): ``hc`` = mean − σ/2 (Hearst's default, fewer boundaries),
  ``lc`` = mean − σ (more boundaries), σ the population standard deviation of the dialogue's
  depth scores. A gap must also be a real valley (depth > 0).
* Crowding: like nltk, a boundary closer than ``min_gap`` gaps to a deeper one is dropped
  (greedy, deepest first; ties go to the earlier gap). ``min_gap = 2`` forbids one-utterance
  segments; ``1`` disables the rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

Cutoff = Literal["hc", "lc"]


def block_similarities(features: np.ndarray, block: int) -> np.ndarray:
    """Cosine between the summed features of the ``block`` rows before each gap and after it.

    Args:
        features: one row per utterance (word counts, or unit sentence embeddings: their sum
            points the same way as their mean).
        block: utterances per side; blocks are truncated at the ends of the dialogue.

    Returns:
        ``n − 1`` similarities, entry ``t`` for the gap after utterance ``t``; 0 where a block
        has no features (e.g. only stop words).

    >>> block_similarities(np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]]), block=1).tolist()
    [1.0, 0.0]
    """
    if block < 1:
        raise ValueError(f"block must be >= 1, got {block}")
    n = len(features)
    totals = np.vstack([np.zeros((1, features.shape[1])), np.cumsum(features, axis=0)])
    gaps = np.arange(n - 1)
    left = totals[gaps + 1] - totals[np.maximum(0, gaps + 1 - block)]
    right = totals[np.minimum(n, gaps + 1 + block)] - totals[gaps + 1]
    norms = np.linalg.norm(left, axis=1) * np.linalg.norm(right, axis=1)
    dots = np.einsum("ij,ij->i", left, right)
    return np.divide(dots, norms, out=np.zeros(n - 1), where=norms > 0)


def smooth(scores: np.ndarray, width: int, rounds: int = 1) -> np.ndarray:
    """Centred moving average over ``2·width + 1`` values, truncated at the ends, ``rounds`` times.

    >>> smooth(np.array([0.0, 3.0, 0.0, 3.0]), width=1).tolist()
    [1.5, 1.0, 2.0, 1.5]
    """
    smoothed = np.asarray(scores, dtype=np.float64)
    if width < 1 or len(smoothed) < 2:
        return smoothed.copy()
    for _ in range(rounds):
        totals = np.concatenate(([0.0], np.cumsum(smoothed)))
        index = np.arange(len(smoothed))
        low = np.maximum(0, index - width)
        high = np.minimum(len(smoothed), index + width + 1)
        smoothed = (totals[high] - totals[low]) / (high - low)
    return smoothed


def depth_scores(scores: np.ndarray) -> np.ndarray:
    """Hearst's depth of each gap: how far the curve rises on both sides before it turns.

    >>> depth_scores(np.array([1.0, 0.5, 0.75, 0.0, 0.5])).tolist()
    [0.0, 0.75, 0.0, 1.25, 0.0]
    """
    depths = np.zeros(len(scores))
    for index, score in enumerate(scores):
        left = index
        while left > 0 and scores[left - 1] >= scores[left]:
            left -= 1
        right = index
        while right < len(scores) - 1 and scores[right + 1] >= scores[right]:
            right += 1
        depths[index] = (scores[left] - score) + (scores[right] - score)
    return depths


def select_boundaries(depths: np.ndarray, cutoff: Cutoff = "hc", min_gap: int = 2) -> list[int]:
    """Gaps whose depth beats the dialogue's cutoff, thinned so none crowds a deeper one.

    >>> select_boundaries(np.array([0.0, 0.7, 0.0, 1.0, 0.0]), min_gap=2)
    [1, 3]
    >>> select_boundaries(np.array([0.0, 0.7, 1.0, 0.0, 0.0]), min_gap=2)
    [2]
    """
    if cutoff not in ("hc", "lc"):
        raise ValueError(f"cutoff must be 'hc' or 'lc', got {cutoff!r}")
    if len(depths) == 0:
        return []
    spread = float(np.std(depths))
    threshold = float(np.mean(depths)) - (spread / 2 if cutoff == "hc" else spread)
    ranked = sorted(
        (index for index, depth in enumerate(depths) if depth > threshold and depth > 0),
        key=lambda index: (-depths[index], index),
    )
    chosen: list[int] = []
    for index in ranked:
        if all(abs(index - other) >= min_gap for other in chosen):
            chosen.append(index)
    return sorted(chosen)


@dataclass(frozen=True)
class DepthRule:
    """The valley-finding settings one segmenter uses (see the module docstring)."""

    smoothing_width: int = 0
    smoothing_rounds: int = 1
    cutoff: Cutoff = "hc"
    min_gap: int = 2

    def __post_init__(self) -> None:
        if self.cutoff not in ("hc", "lc"):
            raise ValueError(f"cutoff must be 'hc' or 'lc', got {self.cutoff!r}")
        if self.smoothing_width < 0 or self.smoothing_rounds < 0 or self.min_gap < 1:
            raise ValueError("smoothing_width and smoothing_rounds must be >= 0, min_gap >= 1")

    def boundaries(
        self, similarities: np.ndarray, block: int = 1
    ) -> tuple[list[int], dict[str, list[float]]]:
        """Boundary gaps for a gap-similarity curve made with ``block``-sized blocks, and the
        curves behind them (diagnostics)."""
        smoothed = smooth(similarities, self.smoothing_width, self.smoothing_rounds)
        depths = depth_scores(smoothed)
        margin = block - 1 if len(depths) > 2 * (block - 1) else 0
        inner = depths[margin : len(depths) - margin]
        gaps = [margin + gap for gap in select_boundaries(inner, self.cutoff, self.min_gap)]
        details = {
            "similarity": [round(float(v), 6) for v in similarities],
            "depth": [round(float(v), 6) for v in depths],
        }
        return gaps, details

    def to_json(self) -> dict[str, object]:
        """The settings as JSON."""
        return {
            "smoothing_width": self.smoothing_width,
            "smoothing_rounds": self.smoothing_rounds,
            "cutoff": self.cutoff,
            "min_gap": self.min_gap,
        }
