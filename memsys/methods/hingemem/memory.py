"""HingeMem's long-term memory: element nodes, boundary hyperedges, salience, merging.

Part of :mod:`memsys.methods.hingemem` (papers/hingemem.txt §3.2.2, Eq. 2-5); no LLM here.
:class:`ConstructionOptions` holds every setting that shapes a memory (the YAML's
``construction`` group, checked by :meth:`memsys.methods.hingemem.HingeMemOptions.check`).

* Nodes (Eq. 2) are identified per element by a normalized identifier: lowercased names without
  punctuation, possessives and honorifics for persons, locations and topics; for times the
  ISO 8601 form at the node's granularity (``2023``, ``2023-05``, ``2023-W18``, ``2023-05-07``,
  ``2023-05-07T13``, ``2023-05-07T13:56``, ``2023-05-07T13:56:00``; ``approx`` is read as
  month). Nodes with the same element and identifier merge, pooling their mentions.
* Hyperedges (Eq. 3) hold node identifiers per element, a description, boundary reasons, their
  source turns, the session date and the conversation index of their first turn.
* Field-aware Jaccard (Eq. 4) compares ``element:identifier`` sets, so "May" the person and
  "may" the topic differ; two empty sets score 0. Merging is greedy and recursive: the pair
  with the highest score above the threshold (ties: lowest indices) merges into the earlier
  hyperedge (node lists, descriptions, reasons and turns united), until no pair exceeds it.
* Salience of node n, each term in [0, 1], from frequency f (mentions), hypergraph degree d
  (hyperedges holding n) and co-occurrence diversity c (distinct nodes sharing a hyperedge
  with n)::

      salience(n) = ( L(f, f_max) + L(d, d_max) + L(c, c_max) ) / 3,  L(x, m) = log(1+x)/log(1+m)

  with maxima over all nodes of the memory (a term is 0 when its maximum is 0). Logs keep the
  two speakers, present everywhere, from flattening every other node to zero.
* Common/rare topics without an LLM (:func:`frequency_topics`): topics ranked by degree, then
  mentions, then salience; the top ``k`` are common, the bottom ``k`` (not already common) rare.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

ELEMENTS: tuple[str, ...] = ("person", "time", "location", "topic")
#: Who is a person of a lite boundary memory (:meth:`~.lite.LiteExtractor.persons_speaking`).
PERSON_READINGS: tuple[str, ...] = ("actors", "speakers")
GRANULARITIES: tuple[str, ...] = (
    "second",
    "minute",
    "hour",
    "day",
    "week",
    "month",
    "year",
    "approx",
)
_TIME_FORMATS = {
    "second": "%Y-%m-%dT%H:%M:%S",
    "minute": "%Y-%m-%dT%H:%M",
    "hour": "%Y-%m-%dT%H",
    "day": "%Y-%m-%d",
    "month": "%Y-%m",
    "approx": "%Y-%m",
    "year": "%Y",
}
_HONORIFICS = frozenset({"dr", "mr", "mrs", "ms", "miss", "prof", "sir", "madam", "mx"})
_ARTICLES = frozenset({"the", "a", "an"})
_NON_WORD = re.compile(r"[^\w\s-]+")


def normalize_name(element: str, name: str) -> str:
    """The identifier of a person, location or topic name.

    >>> normalize_name("person", "Dr. Smith's")
    'smith'
    >>> normalize_name("topic", "The  LGBTQ support-group!")
    'lgbtq support-group'
    """
    text = name.lower().replace("’", "'")
    text = re.sub(r"'s\b", "", text)
    words = _NON_WORD.sub(" ", text).split()
    if element == "person":
        words = [word for word in words if word not in _HONORIFICS] or words
    while len(words) > 1 and words[0] in _ARTICLES:
        words = words[1:]
    return " ".join(words)


def time_key(timestamp: datetime, granularity: str) -> str:
    """The ISO 8601 identifier of a time at its granularity.

    >>> time_key(datetime(2023, 5, 7, 13, 56), "day"), time_key(datetime(2023, 5, 7), "week")
    ('2023-05-07', '2023-W18')
    """
    if granularity == "week":
        year, week, _ = timestamp.isocalendar()
        return f"{year}-W{week:02d}"
    return timestamp.strftime(_TIME_FORMATS.get(granularity, _TIME_FORMATS["day"]))


def parse_time_key(text: str) -> tuple[datetime, str] | None:
    """An ISO 8601 date or date-time and the granularity its precision implies, else ``None``.

    >>> parse_time_key("2023-05")
    (datetime.datetime(2023, 5, 1, 0, 0), 'month')
    >>> parse_time_key("2023-W18")[1], parse_time_key("next Thursday")
    ('week', None)
    """
    text = text.strip().rstrip("Z")
    week = re.fullmatch(r"(\d{4})-W(\d{2})", text)
    if week:
        try:
            return datetime.fromisocalendar(int(week[1]), int(week[2]), 1), "week"
        except ValueError:
            return None
    patterns = (
        (r"\d{4}", "%Y", "year"),
        (r"\d{4}-\d{2}", "%Y-%m", "month"),
        (r"\d{4}-\d{2}-\d{2}", "%Y-%m-%d", "day"),
        (r"\d{4}-\d{2}-\d{2}[T ]\d{2}", "%Y-%m-%dT%H", "hour"),
        (r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}", "%Y-%m-%dT%H:%M", "minute"),
    )
    for pattern, fmt, granularity in patterns:
        if re.fullmatch(pattern, text):
            try:
                return datetime.strptime(text.replace(" ", "T"), fmt), granularity
            except ValueError:
                return None
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed.replace(tzinfo=None), "second"


def time_interval(timestamp: datetime, granularity: str) -> tuple[datetime, datetime]:
    """The half-open interval a time covers at its granularity (query times match by overlap).

    >>> time_interval(datetime(2023, 5, 7, 13, 56), "month")[1]
    datetime.datetime(2023, 6, 1, 0, 0)
    """
    if granularity == "week":
        year, week, _ = timestamp.isocalendar()
        start = datetime.fromisocalendar(year, week, 1)
        return start, start + timedelta(days=7)
    if granularity == "year":
        return datetime(timestamp.year, 1, 1), datetime(timestamp.year + 1, 1, 1)
    if granularity in ("month", "approx"):
        following = datetime(timestamp.year + timestamp.month // 12, timestamp.month % 12 + 1, 1)
        return datetime(timestamp.year, timestamp.month, 1), following
    steps = {
        "hour": timedelta(hours=1),
        "minute": timedelta(minutes=1),
        "second": timedelta(seconds=1),
    }
    if granularity in steps:
        start = datetime.strptime(time_key(timestamp, granularity), _TIME_FORMATS[granularity])
        return start, start + steps[granularity]
    start = datetime(timestamp.year, timestamp.month, timestamp.day)
    return start, start + timedelta(days=1)


@dataclass(frozen=True)
class ConstructionOptions:
    """Everything that shapes a HingeMem memory (readings: docs/methods/hingemem.md)."""

    min_segment_turns: int = 2
    topic_shift_threshold: float = 0.46
    topics_per_edge: int = 3
    persons: str = "actors"
    actor_share: float = 0.5
    session_time_node: bool = False
    merge_jaccard: float = 0.8
    topics_per_list: int = 5
    max_clustering_topics: int = 200
    max_tokens: int = 2048
    topic_max_tokens: int = 256
    grammar_max_items: int = 8


@dataclass
class Node:
    """An element node (Eq. 2): identifier, display name, mentions and, for times, granularity.

    ``mentions`` are ``(turn_id or None, mention text)`` pairs; ``tags`` are the LLM's role tags.
    """

    element: str
    key: str
    name: str
    granularity: str | None = None
    mentions: list[tuple[str | None, str]] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    salience: float = 0.0

    @property
    def uid(self) -> str:
        """``element:identifier``, unique in a memory."""
        return f"{self.element}:{self.key}"

    def to_json(self) -> dict[str, Any]:
        return {
            "element": self.element,
            "key": self.key,
            "name": self.name,
            "granularity": self.granularity,
            "mentions": [list(mention) for mention in self.mentions],
            "tags": self.tags,
            "salience": self.salience,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Node:
        mentions = [(turn, text) for turn, text in data["mentions"]]
        return cls(
            data["element"],
            data["key"],
            data["name"],
            data["granularity"],
            mentions,
            list(data["tags"]),
            float(data["salience"]),
        )


@dataclass
class Hyperedge:
    """A boundary memory (Eq. 3): node identifiers per element, description, reasons, turns."""

    nodes: dict[str, list[str]]
    description: str
    reasons: list[str]
    turn_ids: list[str]
    timestamp: datetime | None
    position: int
    sessions: list[str]

    def uids(self) -> frozenset[str]:
        """The field-aware node set of Eq. 4."""
        return frozenset(f"{e}:{key}" for e, keys in self.nodes.items() for key in keys)

    def merged_with(self, other: Hyperedge) -> Hyperedge:
        """The union of two hyperedges; the earlier one's date and position are kept."""
        first, second = sorted((self, other), key=lambda edge: edge.position)
        return Hyperedge(
            nodes={e: _union(first.nodes.get(e, []), second.nodes.get(e, [])) for e in ELEMENTS},
            description="\n".join(_union([first.description], [second.description])),
            reasons=_union(first.reasons, second.reasons),
            turn_ids=_union(first.turn_ids, second.turn_ids),
            timestamp=first.timestamp,
            position=first.position,
            sessions=_union(first.sessions, second.sessions),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "nodes": self.nodes,
            "description": self.description,
            "reasons": self.reasons,
            "turn_ids": self.turn_ids,
            "timestamp": self.timestamp.isoformat() if self.timestamp else None,
            "position": self.position,
            "sessions": self.sessions,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Hyperedge:
        timestamp = data["timestamp"]
        return cls(
            {e: list(keys) for e, keys in data["nodes"].items()},
            data["description"],
            list(data["reasons"]),
            list(data["turn_ids"]),
            datetime.fromisoformat(timestamp) if timestamp else None,
            int(data["position"]),
            list(data["sessions"]),
        )


def _union(first: Iterable[str], second: Iterable[str]) -> list[str]:
    return list(dict.fromkeys([*first, *second]))


@dataclass
class LongTermMemory:
    """M = {N, H, C_common, C_rare} (Eq. 5), plus the latest session date and build counts.

    ``runtime`` holds retrieval indexes built on first use; it is never serialized.
    """

    nodes: dict[str, Node]
    hyperedges: list[Hyperedge]
    common_topics: list[str] = field(default_factory=list)
    rare_topics: list[str] = field(default_factory=list)
    anchor_date: datetime | None = None
    stats: dict[str, Any] = field(default_factory=dict)
    runtime: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def counts(self) -> dict[str, int]:
        """Nodes per element and hyperedges (the paper's Table 4 rows)."""
        counts = {element: 0 for element in ELEMENTS}
        for node in self.nodes.values():
            counts[node.element] += 1
        return {**counts, "hyperedges": len(self.hyperedges)}

    def to_json(self) -> dict[str, Any]:
        return {
            "nodes": [node.to_json() for node in self.nodes.values()],
            "hyperedges": [edge.to_json() for edge in self.hyperedges],
            "common_topics": self.common_topics,
            "rare_topics": self.rare_topics,
            "anchor_date": self.anchor_date.isoformat() if self.anchor_date else None,
            "stats": self.stats,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LongTermMemory:
        nodes = [Node.from_json(node) for node in data["nodes"]]
        anchor = data["anchor_date"]
        return cls(
            {node.uid: node for node in nodes},
            [Hyperedge.from_json(edge) for edge in data["hyperedges"]],
            list(data["common_topics"]),
            list(data["rare_topics"]),
            datetime.fromisoformat(anchor) if anchor else None,
            dict(data["stats"]),
        )


def merge_nodes(nodes: Iterable[Node]) -> dict[str, Node]:
    """Nodes merged by ``element:identifier``: mentions and tags pooled, first name kept."""
    merged: dict[str, Node] = {}
    for node in nodes:
        kept = merged.get(node.uid)
        if kept is None:
            merged[node.uid] = Node(
                node.element,
                node.key,
                node.name,
                node.granularity,
                list(node.mentions),
                list(node.tags),
            )
        else:
            kept.mentions.extend(node.mentions)
            kept.tags = _union(kept.tags, node.tags)
    return merged


def jaccard(first: frozenset[str], second: frozenset[str]) -> float:
    """|A ∩ B| / |A ∪ B|, 0 for two empty sets.

    >>> jaccard(frozenset("abc"), frozenset("abd"))
    0.5
    """
    union = len(first | second)
    return len(first & second) / union if union else 0.0


def merge_hyperedges(edges: Sequence[Hyperedge], threshold: float) -> list[Hyperedge]:
    """Merge the most similar pair with Jaccard > ``threshold`` until none is left (§3.2.2)."""
    merged = list(edges)
    while True:
        sets = [edge.uids() for edge in merged]
        holders: dict[str, list[int]] = defaultdict(list)
        for index, uids in enumerate(sets):
            for uid in uids:
                holders[uid].append(index)
        best: tuple[float, int, int] | None = None
        for i, uids in enumerate(sets):
            partners = sorted({j for uid in uids for j in holders[uid] if j > i})
            for j in partners:
                score = jaccard(uids, sets[j])
                if score > threshold and (best is None or score > best[0]):
                    best = (score, i, j)
        if best is None:
            return merged
        _, i, j = best
        merged[i] = merged[i].merged_with(merged[j])
        del merged[j]


def compute_salience(nodes: dict[str, Node], edges: Sequence[Hyperedge]) -> dict[str, float]:
    """Salience of every node (formula in the module docstring)."""
    degree: dict[str, int] = defaultdict(int)
    neighbours: dict[str, set[str]] = defaultdict(set)
    for edge in edges:
        uids = edge.uids()
        for uid in uids:
            degree[uid] += 1
            neighbours[uid].update(uids - {uid})
    frequency = {uid: len(node.mentions) for uid, node in nodes.items()}
    diversity = {uid: len(neighbours[uid]) for uid in nodes}
    degrees = {uid: degree[uid] for uid in nodes}
    maxima = [max(values.values(), default=0) for values in (frequency, degrees, diversity)]

    def scaled(value: int, maximum: int) -> float:
        return math.log1p(value) / math.log1p(maximum) if maximum > 0 else 0.0

    return {
        uid: (
            scaled(frequency[uid], maxima[0])
            + scaled(degrees[uid], maxima[1])
            + scaled(diversity[uid], maxima[2])
        )
        / 3
        for uid in nodes
    }


def frequency_topics(
    nodes: dict[str, Node], edges: Sequence[Hyperedge], k: int
) -> tuple[list[str], list[str]]:
    """Common and rare topic names by frequency (the lite substitute of the clustering prompt)."""
    degree: dict[str, int] = defaultdict(int)
    for edge in edges:
        for key in edge.nodes.get("topic", []):
            degree[key] += 1
    topics = [node for node in nodes.values() if node.element == "topic"]
    ranked = sorted(
        topics,
        key=lambda node: (-degree[node.key], -len(node.mentions), -node.salience, node.key),
    )
    common = ranked[:k]
    rare = [node for node in reversed(ranked) if node not in common][:k]
    return [node.name for node in common], [node.name for node in rare]
