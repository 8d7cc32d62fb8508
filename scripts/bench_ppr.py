"""Personalized PageRank latency on the largest LoCoMo semantic graph (CAST, lite construction).

Builds CAST's HippoRAG-style graph (passages, phrases; contains, relation and synonym edges) for
every LoCoMo conversation, keeps the largest, and answers each of that conversation's questions
with personalized PageRank seeded the way CAST seeds it (query entities linked to phrase nodes,
weighted by specificity, plus passages weighted by their dense score × 0.05). Two
implementations, same seeds, same damping (0.5) and tolerance:

* ``scipy``: :class:`memsys.methods.cast.pagerank.PageRank` — transition matrix built once per
  graph, then sparse power iteration per query (what CAST uses);
* ``networkx``: ``networkx.pagerank(graph, alpha, personalization)`` per query, which converts the
  graph to a sparse matrix on every call.

Reports median / p90 / max latency per query over all questions, the one-off matrix build time,
and whether both rank the same top-5 passages.

    .venv/bin/python scripts/bench_ppr.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from pathlib import Path

import networkx as nx
import numpy as np

from benchmarks.data import load_locomo
from benchmarks.data.paths import REPO_ROOT
from memsys.base import Services
from memsys.embed import Embedder, EmbedderConfig, EmbeddingCache
from memsys.methods.cast import CAST
from memsys.methods.cast.hipporag import PassageGraphIndex, build_graph, min_max
from memsys.propositions import dialogue_utterances


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3, help="timed passes over the questions")
    parser.add_argument("--cache", default=str(REPO_ROOT / ".cache" / "embeddings.sqlite"))
    args = parser.parse_args()
    embedder = Embedder(EmbedderConfig(), EmbeddingCache(Path(args.cache)))
    cast = CAST(Services(embedder=embedder, tokens=None))  # type: ignore[arg-type]
    largest = None
    for conversation in load_locomo():
        _, _, facts, _ = cast.extract(dialogue_utterances(conversation.turns))
        graph = build_graph(facts, embedder, cast.options.synonym_threshold)
        size = graph.number_of_nodes() + graph.number_of_edges()
        print(
            f"{conversation.conversation_id}: {graph.number_of_nodes()} nodes, "
            f"{graph.number_of_edges()} edges"
        )
        if largest is None or size > largest[0]:
            largest = (size, conversation, graph)
    assert largest is not None
    _, conversation, graph = largest
    texts = [f"{t.speaker}: {t.text}" for t in conversation.turns]
    started = time.perf_counter()
    index = PassageGraphIndex(graph, embedder.encode(texts), embedder)
    build_ms = (time.perf_counter() - started) * 1000
    questions = list(conversation.questions)
    cast.prepare_queries(questions)
    seeds_per_query = []
    for question in questions:
        vector = embedder.encode([question.question])[0]
        phrases = index.entity_seeds(
            cast._queries[question.question].entities, cast.search.link_threshold
        )
        if phrases:
            dense = min_max(index.passage_vectors @ vector) * cast.search.passage_node_weight
            passages = {f"passage:{i}": float(w) for i, w in enumerate(dense) if w > 0}
            seeds_per_query.append({**phrases, **passages})
    pagerank = index.pagerank
    passage_rows = [pagerank.index[f"passage:{i}"] for i in range(len(texts))]

    timings: dict[str, list[float]] = {"scipy": [], "networkx": []}
    agree = 0
    for _ in range(args.repeats):
        for seeds in seeds_per_query:
            started = time.perf_counter()
            ranks = pagerank.personalized(seeds, alpha=cast.search.damping)
            timings["scipy"].append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            reference = nx.pagerank(
                graph, alpha=cast.search.damping, personalization=seeds, tol=1e-6
            )
            timings["networkx"].append((time.perf_counter() - started) * 1000)
            ours = set(np.argsort(-ranks[passage_rows], kind="stable")[:5].tolist())
            theirs_scores = np.array([reference[f"passage:{i}"] for i in range(len(texts))])
            agree += ours == set(np.argsort(-theirs_scores, kind="stable")[:5].tolist())

    print(f"machine: {platform.machine()}, Python {platform.python_version()}")
    print(
        f"largest graph: {conversation.conversation_id}, {graph.number_of_nodes()} nodes "
        f"({len(texts)} passages), {graph.number_of_edges()} edges"
    )
    print(
        f"queries: {len(seeds_per_query)} of {len(questions)} questions link an entity "
        f"(the rest use the dense fallback), {args.repeats} passes"
    )
    print(f"index build (once per graph: vectors, transition matrix): {build_ms:.1f} ms")
    for name, values in timings.items():
        print(
            f"{name:>8}: median {statistics.median(values):.2f} ms, "
            f"p90 {percentile(values, 90):.2f} ms, max {max(values):.2f} ms per query"
        )
    print(f"same top-5 passages: {agree} of {len(timings['scipy'])} queries")


if __name__ == "__main__":
    main()
