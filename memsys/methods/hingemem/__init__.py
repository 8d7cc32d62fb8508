"""HingeMem (Zhong et al., ``papers/hingemem.txt``): see :mod:`.method` and
``docs/methods/hingemem.md``."""

from .graph import ConstructionOptions, Hyperedge, LongTermMemory, Node
from .method import HingeMem, RetrievalOptions, RetrievalTrace
from .query import QueryPlan

__all__ = [
    "ConstructionOptions",
    "HingeMem",
    "Hyperedge",
    "LongTermMemory",
    "Node",
    "QueryPlan",
    "RetrievalOptions",
    "RetrievalTrace",
]
