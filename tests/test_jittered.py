"""``benchmarks.console.jittered`` (``make check-table2-jitter``): the harness's embeddings as
another CPU would compute them, a last bit off, one vector per text within a run."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.console.jittered import jitter_embeddings
from memsys.embed import Embedder


def test_every_vector_is_a_last_bit_off_and_a_text_keeps_one(
    embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    texts = ["I adopted a beagle.", "The park is near my flat.", "I adopted a beagle."]
    plain = embedder.encode(texts)
    monkeypatch.setattr(Embedder, "encode", Embedder.encode)  # restored after the test
    jitter_embeddings(seed=1, eps=1e-6)
    first = embedder.encode(texts)
    assert not np.array_equal(first, plain)
    assert np.abs(first - plain).max() < 1e-5 * np.abs(plain).max()
    assert np.array_equal(first[0], first[2])  # a text's vector is fixed within a run
    assert np.array_equal(embedder.encode(texts[1:2])[0], first[1])
