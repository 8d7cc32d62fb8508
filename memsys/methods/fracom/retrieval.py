"""FraCom §3.3 plausible retrieval (Eq. 5, threshold θ) and the §5 predicate filter.

A proposition is retrieved when one of its argument nodes has Sentence-BERT cosine ≥ θ with an
argument of the query (``plausible: false``, the paper's "w/o Plausible Retrieval": only an
argument node equal to a query argument): the paper's retrieval is this *set*, the θ-set
(:class:`ThetaSet`). The §5 variant ("w/ Predicate", Table 6) then keeps only propositions whose
predicate has cosine ≥ ``predicate_threshold`` (0.5) with a predicate of the query.

Two harness additions, each a named option: the reader's token budget cuts the set, so it needs
an order (``ranking``): ``idf`` (the default) scores each member Σ over query arguments of its
best matching argument's cosine × idf, idf(a) = log(1 + propositions / degree(a)), ties to the
earlier proposition; ``time`` puts the most recent first, so the budget keeps the newest. And
``speaker_arguments: exclude`` (a control) lets no argument node that is a speaker's name
retrieve, where the lite reading of I/you as the speakers' names links almost every proposition
to one of two nodes; ``keep`` (the default) is the paper's rule, every argument counts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from memsys.embed import Embedder
from memsys.methods.fracom.memory import FraComMemory
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

#: How the θ-set is ordered for the budget: cosine × idf, best first; or most recent first.
RANKINGS = ("idf", "time")
#: Whether an argument node that is a speaker's name may retrieve its propositions.
SPEAKER_ARGUMENTS = ("keep", "exclude")
#: Decimals a cosine is taken at. Two CPUs compute a text's float32 vector a few last bits apart,
#: so a phrase's cosine with itself is 1 give or take about 1e-7 (more where the dot product is
#: summed in float32, as BLAS does): two members reached through two query arguments each equal
#: to its node then scored a hair apart, and their order flipped from one machine to the next.
#: Summed in float64 and taken at six decimals, they tie, as their scores do on paper.
SIMILARITY_DECIMALS = 6


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
    and a query without any other predicate is not filtered at all. ``ranking`` and
    ``speaker_arguments`` are the harness's (module docstring). FraCom's options extend these
    (:class:`memsys.methods.fracom.FraComOptions`, which checks them).
    """

    theta: float = 0.7
    plausible: bool = True
    predicate_filter: bool = False
    predicate_threshold: float = 0.5
    predicate_skip_light_verbs: bool = True
    ranking: str = "idf"
    speaker_arguments: str = "keep"

    def filtering_predicates(self, predicates: Sequence[str]) -> list[str]:
        """The query predicates the §5 filter compares with (none: no filtering)."""
        if not self.predicate_filter:
            return []
        if self.predicate_skip_light_verbs:
            return [p for p in predicates if not is_light(p)]
        return list(predicates)


@dataclass(frozen=True)
class ThetaSet:
    """What plausible retrieval returns for one query (the paper's P̂), before any budget: each
    member's cosine × idf score, the members reached only through a speaker's name, and the
    size before the §5 filter (``None`` without it)."""

    scores: dict[int, float]
    speaker_only: frozenset[int]
    before_predicate_filter: int | None = None

    def trace(self, propositions: int) -> dict[str, Any]:
        """The per-question record of how large the set is and how much of it names a speaker."""
        size = len(self.scores)
        trace: dict[str, Any] = {
            "theta_set": size,
            "theta_set_fraction": round(size / propositions, 4) if propositions else 0.0,
            "speaker_only": len(self.speaker_only),
        }
        if self.before_predicate_filter is not None:
            trace["theta_set_before_predicate_filter"] = self.before_predicate_filter
        return trace


def plausible_retrieval(
    memory: FraComMemory,
    arguments: Sequence[str],
    predicates: Sequence[str],
    embedder: Embedder,
    options: RetrievalOptions,
) -> ThetaSet:
    """The θ-set of a query's arguments, narrowed by the §5 predicate filter where it is on
    (then every question records the size before it, filtered or not)."""
    found = match_arguments(memory, arguments, embedder, options)
    if not options.predicate_filter:
        return found
    filtering = options.filtering_predicates(predicates)
    kept = found.scores
    if filtering and kept:
        kept = filter_by_predicate(memory, kept, filtering, embedder, options.predicate_threshold)
    return ThetaSet(kept, found.speaker_only & kept.keys(), len(found.scores))


def order(memory: FraComMemory, scores: dict[int, float], ranking: str) -> list[tuple[int, float]]:
    """The θ-set as ``(index, score)`` in the order the budget keeps it (``ranking``): best
    cosine × idf first, or most recent first (latest turn, then latest proposition of it)."""
    if ranking == "time":
        return sorted(
            scores.items(), key=lambda pair: (-memory.propositions[pair[0]].position, -pair[0])
        )
    return sorted(scores.items(), key=lambda pair: (-pair[1], pair[0]))


def cosines(queries: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """Each query's cosine with each unit vector, summed in float64 and taken at
    :data:`SIMILARITY_DECIMALS` (so that one rounded to θ passes θ).

    >>> cosines(np.array([[1.0, 0.0]], np.float32), np.array([[0.99999994, 0.0]], np.float32))
    array([[1.]])
    """
    products = queries.astype(np.float64) @ vectors.T.astype(np.float64)
    return np.round(products, SIMILARITY_DECIMALS)


def match_arguments(
    memory: FraComMemory,
    arguments: Sequence[str],
    embedder: Embedder,
    options: RetrievalOptions,
    *,
    cut: bool = True,
) -> ThetaSet:
    """Eq. 5 and θ: every proposition with an argument node of similarity ≥ θ to a query
    argument (or an equal key without plausible retrieval), scored Σ over query arguments of its
    best such node's similarity × idf. ``cut=False``: Eq. 5 with no θ, every node counting (the
    ranking metrics' order past the θ-set, :func:`rank_every`)."""
    if not arguments or not memory.propositions:
        return ThetaSet({}, frozenset())
    nodes, vectors = memory.node_vectors("argument", embedder)
    if options.plausible:
        similarity = cosines(embedder.encode(list(arguments)), vectors)
        threshold = options.theta
    else:
        keys = [f"arg:{phrase_key(a)}" for a in arguments]
        similarity = np.array([[float(node == key) for node in nodes] for key in keys])
        threshold = 1.0
    if not cut:
        threshold = -math.inf
    speakers = memory.speaker_nodes()
    allowed = np.array([options.speaker_arguments == "keep" or n not in speakers for n in nodes])
    total = len(memory.propositions)
    scores: dict[int, float] = {}
    through_other: set[int] = set()  # reached through an argument that is no speaker's name
    for row in similarity:
        best: dict[int, float] = {}
        for column in np.flatnonzero((row >= threshold) & allowed):
            node = nodes[column]
            idf = math.log(1 + total / memory.graph.degree(node))
            for neighbour in memory.graph.neighbors(node):
                index = int(neighbour.removeprefix("prop:"))
                best[index] = max(best.get(index, 0.0), float(row[column]) * idf)
                if node not in speakers:
                    through_other.add(index)
        for index, value in best.items():
            scores[index] = scores.get(index, 0.0) + value
    return ThetaSet(scores, frozenset(scores.keys() - through_other))


def rank_every(
    memory: FraComMemory, arguments: Sequence[str], embedder: Embedder, options: RetrievalOptions
) -> list[int]:
    """For the ranking metrics only (never the reader's context): every proposition Eq. 5
    reaches without the θ cut, best first, ties to the earlier one. The paper retrieves the
    θ-set alone; ranking the rest by the same score is the harness's reading (fidelity card)."""
    scores = match_arguments(memory, arguments, embedder, options, cut=False).scores
    return [index for index, _ in order(memory, scores, "idf")]


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
    similarity = cosines(embedder.encode(list(predicates)), vectors).max(axis=0)
    passing = {nodes[i] for i in np.flatnonzero(similarity >= threshold)}
    return {
        index: score for index, score in scores.items() if memory.predicate_node(index) in passing
    }
