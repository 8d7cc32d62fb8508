"""``python -m benchmarks.pipeline.llm_ask "TEXT" [backbone=embedded] [cache.mode=off] ...``

Asks the configured backbone one question, prints the reply, then one JSON line with the token
counts, latency and whether the reply came from the cache. Overrides are Hydra-style and are
applied to ``conf/llm_ask.yaml``; the backbone node is read as a run reads it
(:func:`benchmarks.config.services.backbone_config`), and :mod:`memsys.llm` builds it from the
typed values.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from omegaconf import DictConfig

from benchmarks.config.compose import CONF, compose_config
from benchmarks.config.services import backbone_config
from benchmarks.config.values import ConfigError
from benchmarks.pipeline.cli import print_error
from memsys.llm.accounting import Accounting
from memsys.llm.cache import ResponseCache
from memsys.llm.errors import LLMError
from memsys.llm.factory import build_backbone
from memsys.llm.types import LLMResponse, SamplingParams

#: The config folder (``conf/``), whose ``llm_ask.yaml`` this command composes.
CONF_DIR: Path = CONF


def compose_ask_config(overrides: Sequence[str]) -> DictConfig:
    """``conf/llm_ask.yaml`` with Hydra overrides applied."""
    return compose_config(overrides, config_name="llm_ask")


def ask(cfg: DictConfig, text: str) -> LLMResponse:
    """One question to the configured backbone, through the configured cache."""
    cache = ResponseCache(cfg.cache.path, cfg.cache.mode)
    backbone = build_backbone(
        backbone_config(cfg, "backbone"), cache=cache, accounting=Accounting()
    )
    messages = [{"role": "user", "content": text}]
    if cfg.system_prompt:
        messages.insert(0, {"role": "system", "content": cfg.system_prompt})
    return backbone.complete(messages, SamplingParams(max_tokens=cfg.max_tokens), stage="ask")


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.pipeline.llm_ask", description=__doc__
    )
    parser.add_argument("text", help="the question")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. backbone=embedded")
    args = parser.parse_args(argv)
    try:
        reply = ask(compose_ask_config(args.overrides), args.text)
    except ConfigError as error:
        print_error(str(error))
        return 2
    except LLMError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(reply.text)
    print(
        json.dumps(
            {
                "model": reply.model,
                "prompt_tokens": reply.prompt_tokens,
                "completion_tokens": reply.completion_tokens,
                "latency_s": round(reply.latency_s, 6),
                "cached": reply.cached,
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
