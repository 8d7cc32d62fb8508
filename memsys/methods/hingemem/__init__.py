"""HingeMem (Zhong et al., ``papers/hingemem.txt``): see :mod:`.method` and
``docs/methods/hingemem.md``."""

from .memory import ConstructionOptions, Hyperedge, LongTermMemory, Node
from .method import HingeMem, HingeMemOptions
from .retrieval import QueryPlan, RetrievalOptions, RetrievalTrace

__all__ = [
    "ConstructionOptions",
    "HingeMem",
    "HingeMemOptions",
    "Hyperedge",
    "LongTermMemory",
    "Node",
    "QueryPlan",
    "RetrievalOptions",
    "RetrievalTrace",
]
