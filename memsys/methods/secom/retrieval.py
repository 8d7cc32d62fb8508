"""SeCom's retrieval, §2.3 Eq. 2: ``f_R(u*, f_Comp(M), N)`` ranks the segments by their compressed
index texts (BM25 or dense, §3's implementation details; :meth:`.memory.SeComMemory.retriever`)
and hands the reader each segment's original text. The query is not compressed (Eq. 2 compresses
the memory only); the reader's budget picks N (module docstring of :mod:`.method`).
"""

from __future__ import annotations

from memsys.base import Services
from memsys.methods.secom.memory import SeComMemory
from memsys.types import MemoryItem


def rank_segments(
    memory: SeComMemory, question: str, retriever: str, services: Services, top_k: int | None
) -> tuple[MemoryItem, ...]:
    """The ``top_k`` segments best for ``question`` (every segment where ``top_k`` is None), best
    first, each as the reader gets it: the original text, never the compressed one."""
    k = len(memory.segments) if top_k is None else top_k
    hits = memory.retriever(retriever, services).search(question, k)
    return tuple(memory.segments[index].item(score) for index, score in hits)
