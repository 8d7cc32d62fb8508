"""§2.3: compression-based denoising, ``f_Comp(M)`` of Eq. 2, with what it did to the text.

Each segment's index text is its exchanges compressed one by one and joined by newlines, as the
authors' code compresses a segment (:func:`memsys.compression.index_texts`); the report says how
many tokens went in and out (the rate actually reached), how many passages reached the model and
how long they took.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from memsys.compression import Compressor, index_texts
from memsys.methods.secom.segmentation import SegmentSpan


def denoise(
    compressor: Compressor,
    spans: Sequence[SegmentSpan],
    texts: Sequence[str],
    count: Callable[[str], int],
) -> tuple[list[str], dict[str, Any]]:
    """The index texts of ``spans`` (whose reader texts are ``texts``), and the report."""
    done_before, seconds_before = compressor.texts_compressed, compressor.seconds
    compressed = index_texts(compressor, [span.exchanges for span in spans])
    return compressed, {
        **compressor.identity(),
        "tokens_before": sum(count(text) for text in texts),
        "tokens_after": sum(count(text) for text in compressed),
        "texts_compressed": compressor.texts_compressed - done_before,
        "seconds": round(compressor.seconds - seconds_before, 6),
    }
