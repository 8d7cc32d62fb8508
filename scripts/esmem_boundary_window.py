"""How much of ES-Mem's boundary texts b_i the embedder reads, on all of LoCoMo.

all-MiniLM-L6-v2 reads the first 256 word pieces of a text (254 after its two special tokens)
and silently drops the rest. For every event boundary after the first of each conversation this
counts a b_i's word pieces with the embedder's own tokenizer and reports the share over the
window and the share whose current event (the event the boundary anchors) starts beyond it, so
that the embedder sees none of that event's turns. Memories come from the run cache or are built
(``cache_dir``), so the numbers are those of the memories a run retrieves from. It reads only
the dumped events (``lines``, ``boundary``) and the configs of the code it imports, so the same
script measures older code too (a checkout of it first on ``PYTHONPATH``):

    .venv/bin/python scripts/esmem_boundary_window.py                     # method=esmem
    .venv/bin/python scripts/esmem_boundary_window.py method=esmem_llm   # any ES-Mem config
"""

from __future__ import annotations

import json
import sys
from typing import Any

from benchmarks.config.compose import compose_config
from benchmarks.data import load_locomo
from benchmarks.data.paths import resolve_data_dir, resolve_path
from benchmarks.pipeline.harness import instantiate_method
from benchmarks.pipeline.memory_store import MemoryStore
from memsys.base import Services
from memsys.embed import Embedder, EmbedderConfig, EmbeddingCache
from memsys.tokens import TokenCounter

#: Characters of a turn that identify where it starts in a boundary text.
OPENING_CHARS = 30


def boundary_window_report(
    events: list[dict[str, Any]], tokenizer: Any, limit: int
) -> dict[str, int]:
    """Counts over one memory's boundaries (the first event's aside): ``boundaries``,
    ``over_window`` (more word pieces than ``limit``) and ``current_event_unread`` (the current
    event's first turn is not in the text, or starts at or after piece ``limit``)."""
    counts = {"boundaries": 0, "over_window": 0, "current_event_unread": 0}
    for event in events[1:]:
        boundary = event["boundary"]
        start = boundary.rfind(event["lines"][0][:OPENING_CHARS])
        counts["boundaries"] += 1
        counts["over_window"] += len(tokenizer.tokenize(boundary)) > limit
        counts["current_event_unread"] += (
            start < 0 or len(tokenizer.tokenize(boundary[:start])) >= limit
        )
    return counts


def main(overrides: list[str]) -> dict[str, Any]:
    cfg = compose_config(["method=esmem", *overrides])
    cache_dir = resolve_path(cfg.cache_dir)
    embedder = Embedder(
        EmbedderConfig.from_node(cfg.embedder),
        EmbeddingCache(cache_dir / "embeddings.sqlite"),
    )
    system = instantiate_method(cfg.method, Services(embedder, TokenCounter()))
    store = MemoryStore(cache_dir / "memories")
    model = embedder.model()
    limit = model.max_seq_length - model.tokenizer.num_special_tokens_to_add()
    total = {"boundaries": 0, "over_window": 0, "current_event_unread": 0}
    for conversation in load_locomo(str(resolve_data_dir(cfg.data_dir))):
        memory = store.load_or_build(system, conversation).memory
        events = system.dump_memory(memory)["events"]
        for key, value in boundary_window_report(events, model.tokenizer, limit).items():
            total[key] += value
    return {
        "method": cfg.method._target_,
        "window_pieces": limit,
        **total,
        "over_window_share": round(total["over_window"] / total["boundaries"], 4),
        "current_event_unread_share": round(total["current_event_unread"] / total["boundaries"], 4),
    }


if __name__ == "__main__":
    if {"-h", "--help"} & set(sys.argv[1:]):
        print(__doc__)
        sys.exit(0)
    print(json.dumps(main(sys.argv[1:])))
