"""Embedding backends against plain sentence-transformers, on the same real turns in one run.

The first ``--texts`` LoCoMo turn texts and the first ``--texts`` LongMemEval-S haystack turn
texts are encoded by plain sentence-transformers on PyTorch (the baseline, no cache) and by each
:data:`memsys.embed.BACKENDS` entry through :class:`memsys.embed.Embedder` (an in-memory cache
that starts empty, so every text reaches the model). Printed per dataset and backend: texts/s,
the ratio to plain PyTorch, max |cosine - 1| between the backend's vector and PyTorch's for the
same text, and how many texts have the same 10 nearest neighbours (among the ``--texts``, by the
backend's own vectors) as with PyTorch's, in the same order and as a set. Each encoder is warmed
up on a few texts first (graph export and loading are not timed), then timed ``--repeats`` times,
the encoders taking turns pass by pass so that drift (load, clocks) reaches each alike (the best
pass counts: the machine is shared). The load average (``uptime``) before and after is
printed, since the machine's other work shows in every figure. ``--device cuda`` (or ``auto``)
runs plain PyTorch and the ``torch`` backend on a GPU, the rate docs/longmemeval-at-scale.md's
GPU estimate needs; the ONNX backends then stay off (they are CPU builds here). A machine without
the datasets (a GPU box) reads the same texts from a file written here by ``--save-texts``.

    .venv/bin/python scripts/bench_embedding_backends.py [--texts 2000] [--batch-size 32]
        [--device cpu | cuda | auto] [--save-texts FILE | --texts-file FILE]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from benchmarks.data import iter_longmemeval, load_locomo
from benchmarks.render import Table, markdown_row
from memsys.embed import BACKENDS, Embedder, EmbedderConfig, EmbeddingCache, resolve_model
from memsys.files import available_cores

#: The comparison's table, without rows: :func:`main` prints each row as it is measured.
TABLE = Table(
    header=[
        "dataset", "encoder", "texts/s", "× plain PyTorch", "max abs(cos - 1)",
        "same top-10 (order)", "same top-10 (set)",
    ],
    rows=[],
    align="llrrrrr",
)  # fmt: skip

Encode = Callable[[Sequence[str]], np.ndarray]


def datasets(count: int, data_dir: str | None) -> dict[str, list[str]]:
    """The first ``count`` turn texts of LoCoMo and of LongMemEval-S's haystacks."""
    locomo = [turn.text for conversation in load_locomo(data_dir) for turn in conversation.turns]
    lme = (turn.text for haystack in iter_longmemeval("s", data_dir) for turn in haystack.turns)
    return {"LoCoMo": locomo[:count], "LongMemEval-S": list(itertools.islice(lme, count))}


def timed(
    encoders: dict[str, Encode], texts: list[str], repeats: int
) -> dict[str, tuple[float, np.ndarray]]:
    """Each encoder's best of ``repeats`` passes' seconds, and its vectors; the encoders take
    turns, one pass each per round."""
    best = dict.fromkeys(encoders, float("inf"))
    vectors = dict.fromkeys(encoders, np.zeros(0, dtype=np.float32))
    for _ in range(repeats):
        for label, encode in encoders.items():
            started = time.perf_counter()
            vectors[label] = np.asarray(encode(texts), dtype=np.float32)
            best[label] = min(best[label], time.perf_counter() - started)
    return {label: (best[label], vectors[label]) for label in encoders}


def neighbours(vectors: np.ndarray, k: int = 10) -> np.ndarray:
    """Each row's ``k`` nearest other rows by inner product, nearest first."""
    scores = vectors @ vectors.T
    np.fill_diagonal(scores, -np.inf)
    top = np.argpartition(-scores, k, axis=1)[:, :k]
    order = np.argsort(-np.take_along_axis(scores, top, axis=1), axis=1, kind="stable")
    return np.take_along_axis(top, order, axis=1)


def uptime() -> str:
    """The load averages over 1, 5 and 15 minutes."""
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f}, {five:.2f}, {fifteen:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=2000)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--device", default="cpu", help="cpu, cuda or auto (cuda when present)")
    parser.add_argument("--save-texts", help="write the texts to this JSON file and stop")
    parser.add_argument("--texts-file", help="read the texts from a --save-texts file")
    args = parser.parse_args()
    if args.texts_file:
        texts = json.loads(Path(args.texts_file).read_text(encoding="utf-8"))
    else:
        texts = datasets(args.texts, args.data_dir)
    if args.save_texts:
        Path(args.save_texts).write_text(json.dumps(texts), encoding="utf-8")
        return
    from sentence_transformers import SentenceTransformer

    device = EmbedderConfig(device=args.device).resolved_device()
    plain = SentenceTransformer(resolve_model("all-MiniLM-L6-v2"), device=device)
    encoders: dict[str, Callable[[], Encode]] = {
        "plain PyTorch": lambda: (
            lambda batch: plain.encode(
                list(batch),
                batch_size=args.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        )
    }
    with tempfile.TemporaryDirectory(prefix="bench_embedding_") as folder:
        for backend in BACKENDS if device == "cpu" else ("torch",):
            config = EmbedderConfig(batch_size=args.batch_size, backend=backend, device=device)

            def fresh(config: EmbedderConfig = config) -> Encode:
                model = Embedder(config, EmbeddingCache(), onnx_dir=Path(folder)).model()
                return lambda batch: Embedder(config, EmbeddingCache(), model=model).encode(batch)

            encoders[f"Embedder {backend}"] = fresh
        print(
            f"device {device}, cores {available_cores()}, batch size {args.batch_size}, {uptime()}"
        )
        print("\n".join(TABLE.markdown_lines()), flush=True)
        for name, batch in texts.items():
            ready = {label: make() for label, make in encoders.items()}
            for encode in ready.values():
                encode(batch[:8])  # warm-up: export, load, first allocation
            results = timed(ready, batch, args.repeats)
            base_seconds, base = results["plain PyTorch"]
            base_top = neighbours(base)
            for label, (seconds, vectors) in results.items():
                cosine = np.sum(base.astype(np.float64) * vectors, axis=1)
                top = neighbours(vectors)
                ordered = int(np.sum(np.all(top == base_top, axis=1)))
                same_set = sum(
                    set(row) == set(other) for row, other in zip(top, base_top, strict=True)
                )
                row = [name, label, f"{len(batch) / seconds:.0f}", f"{base_seconds / seconds:.2f}"]
                row += [f"{np.max(np.abs(cosine - 1)):.2e}"]
                row += [f"{ordered}/{len(batch)}", f"{same_set}/{len(batch)}"]
                print(markdown_row(row), flush=True)
    print(uptime())


if __name__ == "__main__":
    main()
