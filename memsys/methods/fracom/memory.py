"""FraCom's memory, §3.2 Compose: the propositional graph (Eqs. 1–4, Algorithm 1), its propositions
with their provenance, and memory retention; stored as JSON and back.

One node per proposition (``prop:i`` is ``propositions[i]``), predicate and argument nodes shared
by identity (:func:`memsys.propositions.phrase_key`), proposition–predicate and
proposition–argument edges; the sessions are merged into the graph one after another, so an
argument said in session 1 and again in session 9 is one node linking both sessions'
propositions. :func:`retained` is the harness's reading of the paper's undefined
"w/o Memory Retention" ablation: the graph keeps only the most recent session(s).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import networkx as nx
import numpy as np

from memsys.embed import Embedder
from memsys.graph_store import count_kinds, graph_from_json, graph_to_json
from memsys.propositions import Proposition, phrase_key
from memsys.types import Session

#: The node kinds whose text is embedded for retrieval (Eq. 5 and the §5 predicate filter).
EMBEDDED_KINDS = ("argument", "predicate")


@dataclass(frozen=True)
class StoredProposition:
    """A proposition with its provenance: source turn, its position, session date, time notes."""

    proposition: Proposition
    turn_id: str
    position: int
    timestamp: datetime | None
    when: str
    source: str

    def text(self) -> str:
        """The statement the reader sees, with its utterance's dates resolved."""
        statement = self.proposition.render()
        return f"{statement} ({self.when})" if self.when else statement

    def to_json(self) -> dict[str, Any]:
        return {
            "predicate": self.proposition.predicate,
            "arguments": list(self.proposition.arguments),
            "subjects": self.proposition.subjects,
            "turn_id": self.turn_id,
            "position": self.position,
            "timestamp": self.timestamp.isoformat() if self.timestamp else None,
            "when": self.when,
            "source": self.source,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> StoredProposition:
        timestamp = datetime.fromisoformat(data["timestamp"]) if data["timestamp"] else None
        proposition = Proposition(data["predicate"], tuple(data["arguments"]), data["subjects"])
        return cls(
            proposition, data["turn_id"], data["position"], timestamp, data["when"], data["source"]
        )


class FraComMemory:
    """The propositional graph, its propositions (node ``prop:i`` is ``propositions[i]``), the
    source turns, the construction report and the speakers' names (which argument nodes are a
    speaker: ``speaker_arguments``). Node vectors are embedded at construction (after loading,
    on first retrieval; the embedding cache makes that a lookup)."""

    def __init__(
        self,
        graph: nx.Graph,
        propositions: list[StoredProposition],
        turns: dict[str, str],
        report: dict[str, Any],
        speakers: tuple[str, ...],
    ) -> None:
        self.graph = graph
        self.propositions = propositions
        self.turns = turns
        self.report = report
        self.speakers = speakers
        self._vectors: dict[str, tuple[list[str], np.ndarray]] = {}

    def node_vectors(self, kind: str, embedder: Embedder) -> tuple[list[str], np.ndarray]:
        """Ids and embeddings of the nodes of ``kind`` (one of :data:`EMBEDDED_KINDS`)."""
        if kind not in self._vectors:
            nodes = [n for n, k in self.graph.nodes(data="kind") if k == kind]
            texts = [self.graph.nodes[n]["text"] for n in nodes]
            self._vectors[kind] = (nodes, embedder.encode(texts))
        return self._vectors[kind]

    def speaker_nodes(self) -> frozenset[str]:
        """The argument nodes that are a speaker's name (I/you of the lite reading among them)."""
        return frozenset(f"arg:{phrase_key(name)}" for name in self.speakers)

    def predicate_node(self, index: int) -> str:
        """The predicate node of proposition ``index``."""
        return f"pred:{phrase_key(self.propositions[index].proposition.predicate)}"

    def statistics(self) -> dict[str, Any]:
        return {**count_kinds(self.graph), "report": self.report}

    def to_json(self) -> dict[str, Any]:
        return {
            "graph": graph_to_json(self.graph),
            "propositions": [p.to_json() for p in self.propositions],
            "turns": self.turns,
            "report": self.report,
            "speakers": list(self.speakers),
        }

    @classmethod
    def from_json(cls, payload: dict[str, Any]) -> FraComMemory:
        return cls(
            graph_from_json(payload["graph"]),
            [StoredProposition.from_json(p) for p in payload["propositions"]],
            dict(payload["turns"]),
            dict(payload["report"]),
            tuple(payload["speakers"]),
        )


def compose(graph: nx.Graph, propositions: Sequence[StoredProposition], first: int) -> None:
    """Algorithm 1: add propositions ``first, first + 1, ...`` to ``graph``, sharing predicate
    and argument nodes with what is already there (identity by :func:`phrase_key`)."""
    for offset, stored in enumerate(propositions):
        node = f"prop:{first + offset}"
        graph.add_node(node, kind="proposition")
        predicate = f"pred:{phrase_key(stored.proposition.predicate)}"
        if predicate not in graph:
            graph.add_node(predicate, kind="predicate", text=stored.proposition.predicate)
        graph.add_edge(node, predicate, kind="predicate")
        for argument in stored.proposition.arguments:
            argument_node = f"arg:{phrase_key(argument)}"
            if argument_node not in graph:
                graph.add_node(argument_node, kind="argument", text=argument)
            graph.add_edge(node, argument_node, kind="argument")


def retained(sessions: Sequence[Session], count: int | None) -> tuple[Session, ...]:
    """The sessions whose propositions the memory keeps: all (``count`` is ``None``, the paper's
    main method) or the last ``count`` ("w/o Memory Retention", the harness's reading).

    >>> from memsys.types import Session
    >>> history = [Session(f"s{i}", None, "", ()) for i in range(1, 5)]
    >>> [s.session_id for s in retained(history, 1)], len(retained(history, None))
    (['s4'], 4)
    """
    if count is None:
        return tuple(sessions)
    if count < 1:
        raise ValueError(f"retained_sessions must be None or at least 1, got {count}")
    return tuple(sessions[-count:])
