"""``python -m benchmarks.console.jittered ARGS...``: ``memsys-bench ARGS...`` as another CPU would
run it, every embedding a last bit off.

Two machines' float32 kernels compute MiniLM's vectors and their dot products a few units in the
last place apart, so a tie (or a near-tie) decided by those bits can fall the other way on CI's
machine than on the one that built a table. This runs the harness with each vector component
scaled by ``1 + eps * n``, ``n`` a standard normal fixed per text and seed (``JITTER_SEED``,
default 1; ``JITTER_EPS``, default 1e-6). A unit vector is made unit again, as the other
machine normalizes its own, and a text keeps one vector within a run, as on a real machine. ``make check-table2-jitter`` re-answers Table 2's
slice so and compares it as ``make check-table2`` does: a row whose records move is one another
machine may not reproduce. A check only: it wraps :meth:`memsys.embed.Embedder.encode` in this
process and changes nothing else.
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Sequence

import numpy as np

from benchmarks.console import main
from memsys.embed import Embedder


def jittered(vectors: np.ndarray, texts: Sequence[str], seed: int, eps: float) -> np.ndarray:
    """``vectors`` (one row per text) with each component scaled by ``1 + eps * n``, ``n``
    drawn from a generator seeded by ``seed`` and the row's text; a unit row is made unit again,
    as the other machine normalizes its own vectors (so a phrase's cosine with itself stays 1
    give or take float32's rounding, as there).

    >>> rows = jittered(np.full((2, 4), 0.5, np.float32), ["a", "a"], seed=1, eps=1e-6)
    >>> bool((rows[0] == rows[1]).all()), bool(np.abs(rows - 0.5).max() < 1e-5)
    (True, True)
    >>> bool(np.abs(np.linalg.norm(rows, axis=1) - 1).max() < 1e-6)
    True
    """
    out = np.array(vectors, dtype=np.float32, copy=True)
    for row, text in enumerate(texts):
        digest = hashlib.sha256(f"{seed}:{text}".encode()).digest()
        noise = np.random.default_rng(int.from_bytes(digest[:8], "big")).standard_normal(
            out.shape[1]
        )
        length = float(np.linalg.norm(out[row]))
        out[row] *= (1 + eps * noise).astype(np.float32)
        if abs(length - 1) < 1e-3:
            out[row] /= np.linalg.norm(out[row])
    return out


def jitter_embeddings(seed: int, eps: float) -> None:
    """Wrap :meth:`Embedder.encode` of this process so every vector it returns is jittered."""
    encode = Embedder.encode

    def encode_jittered(self: Embedder, texts: Sequence[str]) -> np.ndarray:
        return jittered(encode(self, texts), texts, seed, eps)

    Embedder.encode = encode_jittered  # type: ignore[method-assign]


if __name__ == "__main__":
    jitter_embeddings(
        int(os.environ.get("JITTER_SEED", "1")), float(os.environ.get("JITTER_EPS", "1e-6"))
    )
    sys.exit(main())
