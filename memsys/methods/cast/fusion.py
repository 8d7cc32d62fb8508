"""How CAST combines its semantic and episodic top-k lists (§3.2, §3.3.3, Algorithm 2, §4.3.2).

``rerank`` is the paper's method; ``slot3`` its fusion ablation; ``union`` the reading of §3.2's
"combine E_sem(q) and E_epi(q) into a single evidence set"; ``none`` the semantic half alone (a
control the paper does not report, to measure what the episodic half adds).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TypeVar

T = TypeVar("T")

FUSIONS = ("rerank", "slot3", "union", "none")


def fuse(semantic: Sequence[T], episodic: Collection[T]) -> list[T]:
    """Algorithm 2: semantic items also found episodically first, each block in semantic order;
    no item is added.

    >>> fuse(["a", "b", "c", "d"], {"d", "b", "x"})
    ['b', 'd', 'a', 'c']
    """
    found = set(episodic)
    return [m for m in semantic if m in found] + [m for m in semantic if m not in found]


def insert_at_slot(semantic: Sequence[T], episodic: Sequence[T], k: int, slot: int = 3) -> list[T]:
    """The slot-3 ablation: the best episodic item not yet listed goes to position ``slot``, and
    the list is cut back to ``k`` (both fusions hand the reader the same number of items).

    >>> insert_at_slot(["a", "b", "c", "d", "e"], ["b", "x"], k=5)
    ['a', 'b', 'x', 'c', 'd']
    """
    fused = list(semantic)
    extra = next((m for m in episodic if m not in set(semantic)), None)
    if extra is not None:
        fused.insert(min(slot - 1, len(fused)), extra)
    return fused[:k]


def union(semantic: Sequence[T], episodic: Sequence[T]) -> list[T]:
    """E_sem ∪ E_epi: Algorithm 2's order, then the episodic items not in the semantic list.

    >>> union(["a", "b", "c"], ["c", "x", "a", "y"])
    ['a', 'c', 'b', 'x', 'y']
    """
    fused = fuse(semantic, episodic)
    listed = set(semantic)
    return fused + [m for m in dict.fromkeys(episodic) if m not in listed]


def combine(fusion: str, semantic: Sequence[T], episodic: Sequence[T], k: int) -> list[T]:
    """The fused ranked list for the configured ``fusion`` (one of :data:`FUSIONS`)."""
    if fusion == "rerank":
        return fuse(semantic, episodic)
    if fusion == "slot3":
        return insert_at_slot(semantic, episodic, k)
    if fusion == "union":
        return union(semantic, episodic)
    return list(semantic)
