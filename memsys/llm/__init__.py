"""LLM backbones behind one interface, with a shared response cache and JSON helpers.

Typical use (the run builds one backbone and injects stage views into methods)::

    cache = ResponseCache(".cache/llm_responses.sqlite")
    config = BackboneConfig(LlamaCppConfig(n_ctx=8192), BackboneSettings(concurrency=1))
    backbone = build_backbone(config, cache=cache, accounting=Accounting())
    reply = backbone.with_stage("answering").complete([{"role": "user", "content": "Hi"}])

The library takes typed values only; the harness reads them from its config files
(``benchmarks.config.services.backbone_config``).
"""

from memsys.llm.accounting import Accounting, CallRecord
from memsys.llm.backbone import Backbone, BackboneSettings
from memsys.llm.cache import CacheMode, ResponseCache
from memsys.llm.errors import (
    BackboneUnavailableError,
    CacheMissError,
    LLMError,
    LLMRequestError,
    ProviderError,
    ProviderUnavailableError,
    QuotaExhaustedError,
    RateLimitedError,
    TransientProviderError,
)
from memsys.llm.factory import BackboneConfig, build_backbone
from memsys.llm.jsonout import JSONReply, JSONReplyParser, extract_json
from memsys.llm.retry import RetryPolicy
from memsys.llm.slots import Limiters
from memsys.llm.types import Completion, LLMRequest, LLMResponse, Message, SamplingParams

__all__ = [
    "Accounting",
    "Backbone",
    "BackboneConfig",
    "BackboneSettings",
    "BackboneUnavailableError",
    "CacheMissError",
    "CacheMode",
    "CallRecord",
    "Completion",
    "JSONReply",
    "JSONReplyParser",
    "LLMError",
    "LLMRequest",
    "LLMRequestError",
    "LLMResponse",
    "Limiters",
    "Message",
    "ProviderError",
    "ProviderUnavailableError",
    "QuotaExhaustedError",
    "RateLimitedError",
    "ResponseCache",
    "RetryPolicy",
    "SamplingParams",
    "TransientProviderError",
    "build_backbone",
    "extract_json",
]
