"""CAST (Ma et al., ``papers/cast.txt``): see :mod:`.method` and ``docs/methods/cast.md``."""

from .episodic import Scene, SceneRule, View, aggregate_scenes, build_scenes, build_views
from .extraction import canonical_person
from .memory import CastMemory
from .method import CAST, CASTOptions
from .retrieval import QueryAnalysis, combine, fuse, insert_at_slot, union

__all__ = [
    "CAST",
    "CASTOptions",
    "CastMemory",
    "QueryAnalysis",
    "Scene",
    "SceneRule",
    "View",
    "aggregate_scenes",
    "build_scenes",
    "build_views",
    "canonical_person",
    "combine",
    "fuse",
    "insert_at_slot",
    "union",
]
