"""Sentence embeddings on ONNX Runtime: fp32, or int8 by dynamic quantization of the same graph.

The graph is exported once, offline, from the sentence-transformers model's own weights (a
packaged model's directory, see :func:`memsys.embed.resolve_model`): the transformer, then mean
pooling over the attention mask, then L2 normalization when the model's module list ends with
``Normalize`` (as all-MiniLM-L6-v2's does), so the graph computes what
``SentenceTransformer.encode`` computes. ``torch.onnx.export`` writes it (no optimum: the packaged
MiniLM's config has no ``model_type``, which optimum needs); ``onnx-int8`` is that graph with its
weights quantized to int8 by ONNX Runtime's ``quantize_dynamic``. Each file is written under a
temporary name and renamed into place, so a reader sees a whole file or none; one that ONNX Runtime
cannot load (damaged, truncated) is exported again.

Texts are tokenized by the model's own tokenizer (``AutoTokenizer`` from the same directory), with
sentence-transformers' ``max_seq_length`` and truncation, in batches of similar length (as
sentence-transformers sorts them), and the vectors come back in the callers' order.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from memsys.files import available_cores, replace_with

#: What each ONNX backend is: ``onnx`` is the exported fp32 graph, ``onnx-int8`` its dynamic int8
#: quantization.
ONNX_BACKENDS = ("onnx", "onnx-int8")
#: Graph inputs, in the order the exported module takes them.
INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
OPSET = 17
#: How many graphs this process exported (tests check that a second embedder reuses the file).
exports = 0
_export_lock = threading.RLock()


def onnx_path(directory: Path, model: str, backend: str) -> Path:
    """Where the graph of ``model`` for ``backend`` is cached: ``<dir>/<model>-<backend>.onnx``.

    >>> onnx_path(Path("c"), "sentence-transformers/all-MiniLM-L6-v2", "onnx-int8").name
    'sentence-transformers--all-MiniLM-L6-v2-onnx-int8.onnx'
    """
    if backend not in ONNX_BACKENDS:
        raise ValueError(f"not an ONNX backend: {backend!r}; expected one of {list(ONNX_BACKENDS)}")
    safe = re.sub(r"[^A-Za-z0-9._-]+", "--", model.strip("/"))
    return directory / f"{safe}-{backend}.onnx"


def _pipeline(model_dir: str) -> tuple[Any, bool]:
    """The transformer and whether the model normalizes its vectors, from a sentence-transformers directory of Transformer, mean Pooling and optional Normalize."""
    from transformers import AutoModel

    root = Path(model_dir)
    modules = json.loads((root / "modules.json").read_text())
    kinds = [module["type"].rsplit(".", 1)[-1] for module in modules]
    if kinds not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
        raise NotImplementedError(
            f"ONNX export supports Transformer + mean Pooling (+ Normalize) models; {model_dir} "
            f"has {kinds}: use embedder.backend=torch"
        )
    pooling_dir = root / modules[1].get("path", "1_Pooling")
    pooling = json.loads((pooling_dir / "config.json").read_text())
    mode = pooling.get("pooling_mode") or (
        "mean" if pooling.get("pooling_mode_mean_tokens") else None
    )
    if mode != "mean":
        raise NotImplementedError(f"ONNX export supports mean pooling; {model_dir} has {mode!r}")
    # Eager attention: a traced graph with no data-dependent branch on the mask.
    transformer = AutoModel.from_pretrained(
        model_dir, local_files_only=True, attn_implementation="eager"
    )
    return transformer.eval(), kinds[-1] == "Normalize"


def max_seq_length(model_dir: str) -> int:
    """sentence-transformers' ``max_seq_length`` for the model (its config's, capped at the
    transformer's positions), as the exported graph was made for."""
    root = Path(model_dir)
    settings = root / "sentence_bert_config.json"
    configured = (
        json.loads(settings.read_text()).get("max_seq_length") if settings.is_file() else None
    )
    positions = json.loads((root / "config.json").read_text()).get("max_position_embeddings", 512)
    return int(min(configured or positions, positions))


def export_fp32(model_dir: str, path: Path) -> None:
    """Export transformer + mean pooling (+ normalization, when the model has it) to ``path``."""
    import torch

    transformer, normalized = _pipeline(model_dir)

    class Pooled(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.transformer = transformer

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            hidden = self.transformer(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            if normalized:
                pooled = torch.nn.functional.normalize(pooled, p=2.0, dim=1)
            return pooled

    example = torch.ones((2, 8), dtype=torch.long)
    mask = example.clone()
    mask[1, 5:] = 0  # padded, so no "all ones" shortcut is traced
    axes = {0: "batch", 1: "sequence"}

    def write(temporary: Path) -> None:
        with torch.no_grad():
            torch.onnx.export(
                Pooled().eval(),
                (example, mask, torch.zeros_like(example)),
                str(temporary),
                input_names=list(INPUT_NAMES),
                output_names=["sentence_embedding"],
                dynamic_axes={
                    **dict.fromkeys(INPUT_NAMES, axes),
                    "sentence_embedding": {0: "batch"},
                },
                opset_version=OPSET,
                do_constant_folding=True,
                dynamo=False,
            )

    replace_with(path, write)


def export_int8(fp32: Path, path: Path) -> None:
    """Quantize the weights of the fp32 graph at ``fp32`` to int8 (dynamic quantization).

    The MatMuls' weights only, one scale per output channel, in the reduced 7-bit range (exact on
    CPUs without VNNI): per-tensor scales took MiniLM's vectors to cosine ~0.95 of fp32's, these
    settings to ~0.99; the embedding tables stay fp32."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    replace_with(
        path,
        lambda temporary: quantize_dynamic(
            fp32,
            temporary,
            weight_type=QuantType.QInt8,
            per_channel=True,
            reduce_range=True,
            op_types_to_quantize=["MatMul"],
        ),
    )


def _session(path: Path, device: str) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = available_cores()
    providers = ["CPUExecutionProvider"]
    if device.startswith("cuda") and "CUDAExecutionProvider" in ort.get_available_providers():
        providers.insert(0, "CUDAExecutionProvider")
    return ort.InferenceSession(str(path), options, providers=providers)


def load_session(model_dir: str, directory: Path, model: str, backend: str, device: str) -> Any:
    """An ONNX Runtime session for ``backend``, exporting its graph first when the cache under
    ``directory`` has none or has one that does not load (which is exported again)."""
    global exports
    path = onnx_path(directory, model, backend)
    with _export_lock:
        for attempt in range(2):
            if not path.is_file():
                if backend == "onnx-int8":
                    fp32 = onnx_path(directory, model, "onnx")
                    load_session(model_dir, directory, model, "onnx", "cpu")  # heals fp32 too
                    export_int8(fp32, path)
                else:
                    export_fp32(model_dir, path)
                exports += 1
            try:
                return _session(path, device)
            except Exception:
                if attempt:
                    raise
                path.unlink(missing_ok=True)  # damaged: export it again
    raise AssertionError("unreachable")


class OnnxEncoder:
    """Encodes texts with an exported graph: the model's tokenizer, batches of similar length.

    It answers the part of SentenceTransformer's interface the embedder uses (``encode``,
    ``get_embedding_dimension``, ``tokenizer``, ``max_seq_length``), so that
    :class:`memsys.embed.Embedder` treats both alike."""

    def __init__(self, model_dir: str, directory: Path, model: str, backend: str, device: str):
        from transformers import AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
        self.max_seq_length = max_seq_length(model_dir)
        self.session = load_session(model_dir, directory, model, backend, device)
        self._inputs = {node.name for node in self.session.get_inputs()}
        self.dim = int(self.session.get_outputs()[0].shape[-1])

    def get_embedding_dimension(self) -> int:
        return self.dim

    def encode(
        self,
        texts: Sequence[str],
        batch_size: int = 32,
        normalize_embeddings: bool = False,
        **_: Any,
    ) -> np.ndarray:
        """Vectors for ``texts`` in order (L2-normalized when ``normalize_embeddings``), float32;
        SentenceTransformer's other options (numpy output, no progress bar) are what it does."""
        order = np.argsort([-len(text) for text in texts], kind="stable")
        vectors = np.zeros((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(texts), batch_size):
            rows = order[start : start + batch_size]
            tokens = self.tokenizer(
                [texts[row] for row in rows],
                padding=True,
                truncation="longest_first",
                max_length=self.max_seq_length,
                return_tensors="np",
            )
            feed = {name: tokens[name].astype(np.int64) for name in INPUT_NAMES[:2]}
            if "token_type_ids" in self._inputs:
                feed["token_type_ids"] = tokens.get(
                    "token_type_ids", np.zeros_like(tokens["input_ids"])
                ).astype(np.int64)
            (output,) = self.session.run(None, feed)
            vectors[rows] = output
        if normalize_embeddings:
            norms = np.linalg.norm(vectors, axis=1, keepdims=True)
            vectors /= np.maximum(norms, 1e-12)
        return vectors
