"""The papers' models as the harness serves them."""

from __future__ import annotations

#: A paper's name for a model → the harness backbone (``backbone.name``) serving that model.
SAME_MODEL = {
    "Qwen2.5-3B": "qwen2.5-3b",
    "Llama3.2-3B": "llama3.2-3b",
    "GPT-4o-mini": "gpt-4o-mini",
    "gpt-4o-mini": "gpt-4o-mini",
}
