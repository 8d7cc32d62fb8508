"""A tiny LLMLingua-2-shaped model built offline, so llmlingua's real code path runs in tests.

LLMLingua-2 is an ``XLMRobertaForTokenClassification`` (2 labels: drop, keep) with a SentencePiece
tokenizer. Here: a one-layer, 16-wide model with random weights and a Unigram tokenizer trained on
the spot (``tokenizers``, Metaspace pre-tokenizer, so tokens carry the ``▁`` word marks llmlingua
reads), saved together in a directory whose name contains ``xlm-roberta-large`` (llmlingua picks
its word-merging rules by the model name). Its keep/drop decisions are arbitrary; the code that
turns them into a compressed text is llmlingua's own.

llmlingua also counts tokens with tiktoken's ``cl100k_base``, which tiktoken downloads;
:func:`offline_cl100k` registers a byte-level tiktoken encoding under that name instead (a real
``tiktoken.Encoding``: every byte a token).
"""

from __future__ import annotations

import string
from collections.abc import Iterable
from pathlib import Path

import pytest

SPECIAL_TOKENS = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]


def build_tiny_llmlingua2(directory: Path, corpus: Iterable[str]) -> Path:
    """Save a random tiny token classifier and a tokenizer trained on ``corpus`` in
    ``directory`` (whose name must contain ``xlm-roberta-large``); returns it."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import (
        XLMRobertaConfig,
        XLMRobertaForTokenClassification,
        XLMRobertaTokenizerFast,
    )

    assert "xlm-roberta-large" in directory.name
    tokenizer = Tokenizer(models.Unigram())
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    tokenizer.decoder = decoders.Metaspace()
    alphabet = [c for c in string.printable if not c.isspace()]
    trainer = trainers.UnigramTrainer(
        vocab_size=300,
        special_tokens=SPECIAL_TOKENS,
        unk_token="<unk>",
        initial_alphabet=alphabet,
    )
    tokenizer.train_from_iterator(list(corpus), trainer)
    fast = XLMRobertaTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token="<s>",
        eos_token="</s>",
        sep_token="</s>",
        cls_token="<s>",
        unk_token="<unk>",
        pad_token="<pad>",
        mask_token="<mask>",
    )
    torch.manual_seed(0)
    config = XLMRobertaConfig(
        vocab_size=len(fast),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=520,
        num_labels=2,
        pad_token_id=fast.pad_token_id,
        bos_token_id=fast.bos_token_id,
        eos_token_id=fast.eos_token_id,
        architectures=["XLMRobertaForTokenClassification"],
    )
    XLMRobertaForTokenClassification(config).save_pretrained(directory)
    fast.save_pretrained(directory)
    return directory


def offline_cl100k(monkeypatch: pytest.MonkeyPatch) -> None:
    """Serve a byte-level encoding as tiktoken's ``cl100k_base`` (no download)."""
    import tiktoken
    import tiktoken.registry

    encoding = tiktoken.Encoding(
        name="cl100k_base",
        pat_str=r"\S+|\s+",
        mergeable_ranks={bytes([byte]): byte for byte in range(256)},
        special_tokens={},
    )
    monkeypatch.setitem(tiktoken.registry.ENCODINGS, "cl100k_base", encoding)
