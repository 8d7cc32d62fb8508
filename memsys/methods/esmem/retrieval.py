"""Coarse-to-fine retrieval (§3.3, Eqs. 7-10) on precomputed similarities, and its settings."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: ``boundary``: Eqs. 7-9 (anchors, activated intervals); ``none``: the "w/o bnd" ablation.
ANCHOR_MODES = ("boundary", "none")
#: What the reader gets of a retrieved event: its raw turns (level 3), or (w/o raw) the text of
#: levels 1-2 with no turn in it: its boundary without the template's raw turns, and its summary.
CONTEXT_KINDS = ("raw", "boundary_summary")


@dataclass(frozen=True)
class RetrievalOptions:
    """Coarse-to-fine retrieval settings (Appendix B) and the ablation switches: the YAML's
    ``retrieval`` group (checked by :meth:`memsys.methods.esmem.ESMemOptions.check`)."""

    anchors: str = "boundary"
    anchor_k: int = 10
    window: int = 3
    alpha: float = 0.7
    top_events: int = 5
    context: str = "raw"


def rank_events(
    anchor_scores: np.ndarray,
    summary_scores: np.ndarray | None,
    *,
    anchor_k: int,
    window: int,
    alpha: float,
    top_events: int,
) -> list[tuple[int, float]]:
    """Eqs. 8-10: ``(event index, Score)`` of the top events, best first. Anchors are the
    ``anchor_k`` best ``anchor_scores`` (sim_bnd); each activates the events within ``window``
    of it; S_ctx(j) is the best score of the anchors covering j, and Score(j) = alpha·S_sum(j) +
    (1 - alpha)·S_ctx(j), or S_ctx(j) alone without summaries (``summary_scores=None``). Ties go
    to the event nearer its best anchor, then to the earlier event.

    >>> rank_events(np.array([0.9, 0.1, 0.2]), np.array([0.0, 0.5, 0.4]),
    ...             anchor_k=1, window=1, alpha=0.5, top_events=2)
    [(1, 0.7), (0, 0.45)]
    >>> rank_events(np.array([0.9, 0.1, 0.2]), None, anchor_k=1, window=1, alpha=0.0,
    ...             top_events=3)
    [(0, 0.9), (1, 0.9)]
    """
    order = np.argsort(-anchor_scores, kind="stable")[:anchor_k]
    context: dict[int, tuple[float, int]] = {}  # j -> (S_ctx(j), distance to that anchor)
    for anchor in order.tolist():
        score = float(anchor_scores[anchor])
        for j in range(max(0, anchor - window), min(len(anchor_scores), anchor + window + 1)):
            best = context.get(j)
            candidate = (score, abs(j - anchor))
            if best is None or (-candidate[0], candidate[1]) < (-best[0], best[1]):
                context[j] = candidate
    scored = [
        (
            s_ctx
            if summary_scores is None
            else alpha * float(summary_scores[j]) + (1 - alpha) * s_ctx,
            distance,
            j,
        )
        for j, (s_ctx, distance) in context.items()
    ]
    scored.sort(key=lambda entry: (-entry[0], entry[1], entry[2]))
    return [(j, score) for score, _, j in scored[:top_events]]


def rank_flat(summary_scores: np.ndarray, top_events: int) -> list[tuple[int, float]]:
    """The "w/o bnd" ablation: the top events by summary similarity over the whole memory, no
    anchor and no activated interval (flat retrieval); ties go to the earlier event.

    >>> rank_flat(np.array([0.2, 0.8, 0.2, 0.5]), top_events=3)
    [(1, 0.8), (3, 0.5), (0, 0.2)]
    """
    order = np.argsort(-summary_scores, kind="stable")[:top_events]
    return [(j, float(summary_scores[j])) for j in order.tolist()]


def rank_rest(
    anchor_scores: np.ndarray,
    summary_scores: np.ndarray | None,
    activated: list[tuple[int, float]],
    *,
    alpha: float,
) -> list[tuple[int, float]]:
    """For the ranking metrics only (never the reader's context): the events no anchor
    activated (not in ``activated``), by the Score each would have as its own anchor
    (S_ctx(j) = sim_bnd(j)), ties to the earlier event; they follow the activated ones. The
    paper ranks activated events only; this order past them is the harness's reading (fidelity
    card).

    >>> anchors, summaries = np.array([1.0, 0.5, 0.25, 0.75]), np.array([0.0, 0.5, 0.25, 0.5])
    >>> activated = rank_events(anchors, summaries, anchor_k=1, window=1, alpha=0.5, top_events=4)
    >>> activated, rank_rest(anchors, summaries, activated, alpha=0.5)
    ([(1, 0.75), (0, 0.5)], [(3, 0.625), (2, 0.25)])
    """
    seen = {j for j, _ in activated}
    own = anchor_scores if summary_scores is None else (
        alpha * summary_scores + (1 - alpha) * anchor_scores
    )  # fmt: skip
    rest = sorted((j for j in range(len(anchor_scores)) if j not in seen), key=lambda j: -own[j])
    return [(j, float(own[j])) for j in rest]
