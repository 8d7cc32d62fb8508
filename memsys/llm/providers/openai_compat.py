"""Any OpenAI-compatible chat endpoint, through the official ``openai`` client.

One provider covers OpenAI itself (GPT-4o-mini), ``vllm serve`` (Qwen2.5-3B-Instruct,
Llama-3.2-3B-Instruct), Ollama and llama.cpp's server: they differ only in base URL, model name
and how they accept a JSON schema (``json_mode``). The client's own retries are switched off so
that :class:`~memsys.llm.retry.RetryPolicy` is the only policy in force. The API key is read
from the environment variable the config names and lives only inside the client object; a
credential in the base URL (user info, an ``api_key`` query) goes out with the requests and is
masked in :attr:`OpenAICompatProvider.endpoint`, which messages show (:mod:`memsys.llm.redact`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import openai

from memsys.llm.errors import ProviderError, ProviderUnavailableError, TransientProviderError
from memsys.llm.redact import redact
from memsys.llm.types import Completion, LLMRequest

#: Placeholder key for local servers started without ``--api-key`` (the client insists on one).
LOCAL_PLACEHOLDER_KEY = "EMPTY"


@dataclass(frozen=True)
class OpenAICompatConfig:
    """Where the endpoint is and how to talk to it.

    ``base_url_env`` / ``api_key_env`` name environment variables (an env base URL overrides
    ``base_url``); ``api_key_env: null`` means a local server that needs no key. ``revision``
    pins the model identity in the cache key (e.g. a Hugging Face commit or an OpenAI snapshot
    date) where the model name alone is ambiguous. ``json_mode`` says how a JSON schema is sent:
    ``json_schema`` (OpenAI, vLLM, Ollama), ``json_object`` (``{"type": "json_object",
    "schema": ...}``, llama-cpp-python's server) or ``none`` (prompt only).
    """

    model: str
    base_url: str | None = None
    base_url_env: str | None = None
    api_key_env: str | None = "OPENAI_API_KEY"
    revision: str | None = None
    json_mode: Literal["json_schema", "json_object", "none"] = "json_schema"

    def build(self) -> OpenAICompatProvider:
        """The provider for this config (reads the environment now)."""
        return OpenAICompatProvider(self)


class OpenAICompatProvider:
    """Chat completions over HTTP; thread-safe (one pooled client shared by all threads)."""

    def __init__(self, config: OpenAICompatConfig) -> None:
        self.config = config
        base_url = (os.environ.get(config.base_url_env) if config.base_url_env else None) or (
            config.base_url
        )
        self.model_id = f"openai-compatible:{config.model}" + (
            f"@{config.revision}" if config.revision else ""
        )
        # Shown in messages, so without credentials; the client connects with the real URL.
        self.endpoint = redact(base_url or "https://api.openai.com/v1")
        self._client = openai.OpenAI(
            api_key=_api_key(config.api_key_env),
            base_url=base_url,
            max_retries=0,
        )

    def generate(self, request: LLMRequest, timeout_s: float) -> Completion:
        """One chat completion; transport and server failures become our error types."""
        try:
            reply = self._client.chat.completions.create(
                model=self.config.model,
                messages=[dict(message) for message in request.messages],
                timeout=timeout_s,
                **self._sampling_arguments(request),
            )
        except openai.APITimeoutError as error:
            raise TransientProviderError(
                f"{self.endpoint}: timed out after {timeout_s}s"
            ) from error
        except openai.APIConnectionError as error:
            raise TransientProviderError(
                f"{self.endpoint}: connection error: {redact(str(error))}"
            ) from error
        except openai.APIStatusError as error:
            raise _status_error(self.endpoint, error) from error
        except (openai.APIResponseValidationError, json.JSONDecodeError) as error:
            raise TransientProviderError(f"{self.endpoint}: malformed reply: {error}") from error
        return _completion(self.endpoint, reply)

    def _sampling_arguments(self, request: LLMRequest) -> dict[str, Any]:
        params = request.params
        arguments: dict[str, Any] = {
            "temperature": params.temperature,
            "max_tokens": params.max_tokens,
            "top_p": params.top_p,
        }
        if params.seed is not None:
            arguments["seed"] = params.seed
        if params.stop:
            arguments["stop"] = list(params.stop)
        if params.json_schema is not None and self.config.json_mode != "none":
            arguments["response_format"] = _response_format(
                self.config.json_mode, params.json_schema
            )
        return arguments


def _api_key(variable: str | None) -> str:
    if variable is None:
        return LOCAL_PLACEHOLDER_KEY
    key = os.environ.get(variable)
    if not key:
        raise ProviderUnavailableError(
            f"environment variable {variable} is not set: export it (or put it in a git-ignored "
            "conf/local/ override), or set backbone.provider.api_key_env=null for a local "
            "server that needs no key"
        )
    return key


def _response_format(mode: str, schema: Mapping[str, Any]) -> dict[str, Any]:
    if mode == "json_object":
        return {"type": "json_object", "schema": dict(schema)}
    name = "".join(ch if ch.isalnum() or ch in "_-" else "_" for ch in schema.get("title", "reply"))
    return {
        "type": "json_schema",
        "json_schema": {"name": name[:64] or "reply", "schema": dict(schema), "strict": False},
    }


def _status_error(endpoint: str, error: openai.APIStatusError) -> ProviderError:
    message = f"{endpoint}: HTTP {error.status_code}: {error.message}"
    if error.status_code == 429 or error.status_code >= 500:
        return TransientProviderError(message, retry_after_s=_retry_after(error))
    return ProviderError(message)


def _retry_after(error: openai.APIStatusError) -> float | None:
    value = error.response.headers.get("retry-after") if error.response is not None else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _completion(endpoint: str, reply: Any) -> Completion:
    """Our completion from the client's reply, rejecting replies with no choice in them."""
    choices = getattr(reply, "choices", None)
    if not choices:
        raise TransientProviderError(f"{endpoint}: malformed reply without choices: {reply!r:.200}")
    choice = choices[0]
    usage = getattr(reply, "usage", None)
    return Completion(
        text=choice.message.content or "",
        prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
        completion_tokens=getattr(usage, "completion_tokens", 0) or 0,
        finish_reason=choice.finish_reason,
    )
