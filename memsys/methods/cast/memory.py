"""CAST's memory of one conversation (papers/cast.txt §3.1-3.2): its messages, the scenes of every
character's profile (the episodic index, :mod:`.episodic`) and the semantic graph with its
distinct facts (:mod:`.hipporag`), stored as JSON and back."""

from __future__ import annotations

from typing import Any

import networkx as nx
import numpy as np

from memsys.base import MemorySystem
from memsys.graph_store import count_kinds, graph_from_json, graph_to_json

from .episodic import Scene
from .hipporag import PassageGraphIndex, Triple


class CastMemory:
    """Messages, scenes (all characters' profiles), the semantic graph, its distinct facts and
    the construction report."""

    def __init__(
        self,
        messages: list[dict[str, Any]],
        scenes: list[Scene],
        graph: nx.Graph,
        facts: list[Triple],
        report: dict[str, Any],
    ) -> None:
        self.messages = messages
        self.scenes = scenes
        self.graph = graph
        self.facts = facts
        self.report = report
        self._cache: dict[str, Any] = {}

    def vectors(self, name: str, system: MemorySystem[Any]) -> np.ndarray:
        """Embeddings of the ``passages`` (messages) or ``scenes`` (summaries), built once."""
        if name not in self._cache:
            if name == "passages":
                texts = [message["text"] for message in self.messages]
            else:
                texts = [scene.summary for scene in self.scenes]
            self._cache[name] = system.services.embedder.encode(texts)
        return self._cache[name]

    def semantic_index(self, system: MemorySystem[Any]) -> PassageGraphIndex:
        """The semantic graph ready for search (phrase and fact vectors, PageRank matrix)."""
        if "index" not in self._cache:
            passages = self.vectors("passages", system)
            self._cache["index"] = PassageGraphIndex(
                self.graph, passages, system.services.embedder, self.facts
            )
        return self._cache["index"]

    def characters(self) -> dict[str, dict[str, int]]:
        """Scenes per character and role (the character profiles' sizes)."""
        profile: dict[str, dict[str, int]] = {}
        for scene in self.scenes:
            counts = profile.setdefault(scene.character, {})
            counts[scene.role] = counts.get(scene.role, 0) + 1
        return {name: dict(sorted(c.items())) for name, c in sorted(profile.items())}

    def statistics(self) -> dict[str, Any]:
        located = sum(1 for m in self.messages if m.get("location"))
        return {
            **count_kinds(self.graph),
            "facts": len(self.facts),
            "located_messages": located,
            "characters": self.characters(),
            "report": self.report,
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "messages": self.messages,
            "scenes": [s.to_json() for s in self.scenes],
            "graph": graph_to_json(self.graph),
            "facts": [list(f) for f in self.facts],
            "report": self.report,
        }

    @classmethod
    def from_json(cls, payload: dict[str, Any]) -> CastMemory:
        return cls(
            list(payload["messages"]),
            [Scene.from_json(s) for s in payload["scenes"]],
            graph_from_json(payload["graph"]),
            [tuple(f) for f in payload["facts"]],  # type: ignore[misc]
            dict(payload["report"]),
        )
