"""Harness overhead per question: retrieve + render + score, LLM time excluded.

Dense turn-level RAG over all of LoCoMo (1,986 questions). Memories are built first (turn
embeddings go to a fresh cache), then each question is timed through the runner's own path:
``retrieve`` (query embedding + exact FAISS search), ``render_context`` (budgeted, dated
context) and the lexical scorers on a fixed prediction. Two passes: *cold* (queries embedded by the
model, batched per conversation as the runner batches them; ``prepare`` is that cost per
question) and *warm* (query embeddings from the cache, as on any rerun).

    .venv/bin/python scripts/bench_harness.py [--budget 2048] [--top-k 50]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.answering.context import render_context
from benchmarks.answering.prompts import answer_messages
from benchmarks.data import load_locomo
from benchmarks.metrics.qa import QAPrediction, score_prediction
from benchmarks.metrics.retrieval import evidence_recall
from memsys.base import Services
from memsys.embed import Embedder, EmbedderConfig, EmbeddingCache
from memsys.methods.baselines import TurnRAG
from memsys.tokens import TokenCounter


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--budget", type=int, default=2048)
    parser.add_argument("--top-k", type=int, default=50)
    args = parser.parse_args()
    conversations = load_locomo()
    with tempfile.TemporaryDirectory() as folder:
        embedder = Embedder(EmbedderConfig(), EmbeddingCache(Path(folder) / "embeddings.sqlite"))
        services = Services(embedder=embedder, tokens=TokenCounter())
        system = TurnRAG(services, retriever="dense", top_k=args.top_k)
        started = time.perf_counter()
        memories = [system.construct(conversation) for conversation in conversations]  # indexed
        build_s = time.perf_counter() - started
        print(f"machine: {platform.processor() or platform.machine()}, {platform.python_version()}")
        print(
            f"memories: {len(memories)} conversations, {embedder.texts_encoded} turns embedded in {build_s:.1f} s"
        )
        for label in ("cold", "warm"):
            timings: dict[str, list[float]] = {
                "prepare": [],
                "retrieve": [],
                "render": [],
                "score": [],
                "total": [],
            }
            for conversation, memory in zip(conversations, memories, strict=True):
                batch_started = time.perf_counter()
                # The runner embeds each batch's questions in one model call.
                system.prepare_queries(conversation.questions)
                batch_ms = (
                    (time.perf_counter() - batch_started) * 1000 / len(conversation.questions)
                )
                for question in conversation.questions:
                    t0 = time.perf_counter()
                    retrieval = system.retrieve(memory, question)
                    t1 = time.perf_counter()
                    context = render_context(retrieval.items, services.tokens, args.budget)
                    answer_messages("uniform", question, context.text)
                    t2 = time.perf_counter()
                    score_prediction(
                        QAPrediction(
                            question.question_id,
                            question.category,
                            "a short answer",
                            question.answer,
                        )
                    )
                    if question.evidence:
                        evidence_recall(question.evidence, context.turn_ids)
                    t3 = time.perf_counter()
                    timings["prepare"].append(batch_ms)
                    timings["retrieve"].append((t1 - t0) * 1000)
                    timings["render"].append((t2 - t1) * 1000)
                    timings["score"].append((t3 - t2) * 1000)
                    timings["total"].append(batch_ms + (t3 - t0) * 1000)
            parts = ", ".join(
                f"{name} {statistics.median(values):.2f}" for name, values in timings.items()
            )
            p90 = np.percentile(timings["total"], 90)
            print(
                f"{label}: {len(timings['total'])} questions; median ms: {parts}; total p90 {p90:.2f} ms"
            )


if __name__ == "__main__":
    main()
