"""CAST (Ma et al., ``papers/cast.txt``): see :mod:`.method` and ``docs/methods/cast.md``."""

from .episodic import Scene, SceneRule, View, aggregate_scenes, build_scenes, build_views
from .extraction import canonical_person
from .fusion import combine, fuse, insert_at_slot, union
from .method import CAST, CastMemory
from .query import QueryAnalysis

__all__ = [
    "CAST",
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
