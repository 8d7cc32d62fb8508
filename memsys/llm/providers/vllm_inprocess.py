"""In-process vLLM: the whole batch in one ``LLM.chat`` call, no server.

For GPU hosts running a sweep where one process owns the GPU. vLLM has no CPU build, so it is
an optional extra (``pip install 'memsys-bench[vllm]'``); without it, building this provider
fails with a message naming both ways forward (install it, or start ``vllm serve`` with
``scripts/serve_vllm.sh`` and use the OpenAI-compatible provider, e.g. ``backbone=qwen2.5-3b``).
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memsys.llm.errors import ProviderError, ProviderUnavailableError
from memsys.llm.types import Completion, LLMRequest, SamplingParams

INSTALL_HINT = (
    "vLLM is not installed: on a GPU host run `pip install 'memsys-bench[vllm]'`, or serve the "
    "model with `scripts/serve_vllm.sh MODEL [PORT]` and use the OpenAI-compatible backbone "
    "(backbone=qwen2.5-3b, backbone=llama3.2-3b or backbone=openai_server)"
)


@dataclass(frozen=True)
class VLLMConfig:
    """Engine settings passed to ``vllm.LLM``; ``revision`` pins the weights (and cache key)."""

    model: str
    revision: str | None = None
    tensor_parallel_size: int = 1
    gpu_memory_utilization: float = 0.9
    max_model_len: int | None = 8192
    dtype: str = "auto"

    def build(self) -> VLLMProvider:
        """Load the engine (minutes for a 3B model); fails clearly without vLLM."""
        try:
            vllm = importlib.import_module("vllm")
        except ImportError as error:
            raise ProviderUnavailableError(INSTALL_HINT) from error
        return VLLMProvider(self, vllm)


class VLLMProvider:
    """A loaded ``vllm.LLM``; not thread-safe, so the backbone hands it whole batches."""

    in_process = True

    def __init__(self, config: VLLMConfig, vllm: Any) -> None:
        self.config = config
        self.model_id = f"vllm:{config.model}" + (f"@{config.revision}" if config.revision else "")
        self.endpoint = f"in-process vLLM ({config.model})"
        self._vllm = vllm
        self._engine = vllm.LLM(
            model=config.model,
            revision=config.revision,
            tensor_parallel_size=config.tensor_parallel_size,
            gpu_memory_utilization=config.gpu_memory_utilization,
            max_model_len=config.max_model_len,
            dtype=config.dtype,
        )

    def generate(self, request: LLMRequest, timeout_s: float) -> Completion:
        """One request as a batch of one (the engine cannot be interrupted: no timeout)."""
        return self.generate_batch([request])[0]

    def generate_batch(self, requests: Sequence[LLMRequest]) -> list[Completion]:
        """All requests in one engine call; per-request sampling parameters are kept."""
        conversations = [[dict(message) for message in request.messages] for request in requests]
        sampling = [self._sampling_params(request.params) for request in requests]
        try:
            outputs = self._engine.chat(conversations, sampling, use_tqdm=False)
        except (RuntimeError, ValueError) as error:
            raise ProviderError(f"{self.endpoint}: {error}") from error
        return [
            Completion(
                text=output.outputs[0].text,
                prompt_tokens=len(output.prompt_token_ids or ()),
                completion_tokens=len(output.outputs[0].token_ids),
                finish_reason=output.outputs[0].finish_reason,
            )
            for output in outputs
        ]

    def _sampling_params(self, params: SamplingParams) -> Any:
        arguments: dict[str, Any] = {
            "temperature": params.temperature,
            "max_tokens": params.max_tokens,
            "top_p": params.top_p,
            "seed": params.seed,
            "stop": list(params.stop) or None,
        }
        if params.json_schema is not None:
            arguments.update(_structured_output(dict(params.json_schema)))
        return self._vllm.SamplingParams(**arguments)


def _structured_output(schema: dict[str, Any]) -> dict[str, Any]:
    """The JSON-schema constraint, in whichever spelling this vLLM version uses."""
    sampling_params = importlib.import_module("vllm.sampling_params")
    if hasattr(sampling_params, "StructuredOutputsParams"):  # vLLM >= 0.10.2
        return {"structured_outputs": sampling_params.StructuredOutputsParams(json=schema)}
    return {"guided_decoding": sampling_params.GuidedDecodingParams(json=schema)}
