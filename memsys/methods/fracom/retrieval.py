"""FraCom §3.3 plausible retrieval (Eq. 5, threshold θ) and the §5 predicate filter.

A proposition is retrieved when one of its argument nodes has Sentence-BERT cosine ≥ θ with an
argument of the query (``plausible: false``, the paper's "w/o Plausible Retrieval": only an
argument node equal to a query argument). The paper retrieves a set; the harness needs an order
to fit the reader's token budget, so each retrieved proposition is scored Σ over query
arguments of its best matching argument's cosine × idf, idf(a) = log(1 + propositions /
degree(a)): a match on a rare argument outranks one on a speaker's name; ties go to the earlier
proposition. The §5 variant ("w/ Predicate", Table 6) then keeps only propositions whose
predicate has cosine ≥ ``predicate_threshold`` (0.5) with a predicate of the query.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from memsys.embed import Embedder
from memsys.methods.fracom.graph import FraComMemory
from memsys.propositions import phrase_key

# fmt: off
#: be, have and do with their inflections (an LLM's predicates are not lemmatized). Most
#: questions' only predicates are these ("What did Ana adopt?" aside, "What is ...", "Does ...
#: have ..."): with ``predicate_skip_light_verbs`` they do not filter.
LIGHT_PREDICATES = frozenset({
    "be", "am", "is", "are", "was", "were", "been", "being",
    "have", "has", "had", "having",
    "do", "does", "did", "done", "doing",
})
# fmt: on


def is_light(predicate: str) -> bool:
    """Whether a predicate is a form of be, have or do, which relates anything to anything.

    >>> is_light("Did"), is_light("have"), is_light("adopt")
    (True, True, False)
    """
    return phrase_key(predicate) in LIGHT_PREDICATES


@dataclass(frozen=True)
class RetrievalOptions:
    """Plausible retrieval (θ, or exact match without it) and the §5 predicate filter.

    ``predicate_skip_light_verbs`` is the harness's reading where §5 says nothing: a query
    predicate that is a form of be/have/do (:data:`LIGHT_PREDICATES`) is not used to filter,
    and a query without any other predicate is not filtered at all.
    """

    theta: float = 0.7
    plausible: bool = True
    predicate_filter: bool = False
    predicate_threshold: float = 0.5
    predicate_skip_light_verbs: bool = True

    def __post_init__(self) -> None:
        for name in ("theta", "predicate_threshold"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {value}")

    def filtering_predicates(self, predicates: Sequence[str]) -> list[str]:
        """The query predicates the §5 filter compares with (none: no filtering)."""
        if not self.predicate_filter:
            return []
        if self.predicate_skip_light_verbs:
            return [p for p in predicates if not is_light(p)]
        return list(predicates)


def rank(
    memory: FraComMemory,
    arguments: Sequence[str],
    predicates: Sequence[str],
    embedder: Embedder,
    options: RetrievalOptions,
) -> list[tuple[int, float]]:
    """Retrieved propositions ``(index, score)``, best first, for a query's arguments and
    predicates."""
    scores = score_propositions(memory, arguments, embedder, options)
    filtering = options.filtering_predicates(predicates)
    if filtering and scores:
        scores = filter_by_predicate(
            memory, scores, filtering, embedder, options.predicate_threshold
        )
    return sorted(scores.items(), key=lambda pair: (-pair[1], pair[0]))


def score_propositions(
    memory: FraComMemory,
    arguments: Sequence[str],
    embedder: Embedder,
    options: RetrievalOptions,
) -> dict[int, float]:
    """Retrieved propositions (index → score): argument matches with similarity ≥ θ
    (or equal keys without plausible retrieval), weighted by the argument's idf."""
    if not arguments or not memory.propositions:
        return {}
    nodes, vectors = memory.node_vectors("argument", embedder)
    if options.plausible:
        similarity = embedder.encode(list(arguments)) @ vectors.T
        threshold = options.theta
    else:
        keys = [f"arg:{phrase_key(a)}" for a in arguments]
        similarity = np.array([[float(node == key) for node in nodes] for key in keys])
        threshold = 1.0
    total = len(memory.propositions)
    scores: dict[int, float] = {}
    for row in similarity:
        best: dict[int, float] = {}
        for column in np.flatnonzero(row >= threshold):
            node = nodes[column]
            idf = math.log(1 + total / memory.graph.degree(node))
            for neighbour in memory.graph.neighbors(node):
                index = int(neighbour.removeprefix("prop:"))
                best[index] = max(best.get(index, 0.0), float(row[column]) * idf)
        for index, value in best.items():
            scores[index] = scores.get(index, 0.0) + value
    return scores


def filter_by_predicate(
    memory: FraComMemory,
    scores: dict[int, float],
    predicates: Sequence[str],
    embedder: Embedder,
    threshold: float,
) -> dict[int, float]:
    """§5: keep the propositions whose predicate has cosine ≥ ``threshold`` with one of the
    query's ``predicates``."""
    nodes, vectors = memory.node_vectors("predicate", embedder)
    similarity = (embedder.encode(list(predicates)) @ vectors.T).max(axis=0)
    passing = {nodes[i] for i in np.flatnonzero(similarity >= threshold)}
    return {
        index: score for index, score in scores.items() if memory.predicate_node(index) in passing
    }
