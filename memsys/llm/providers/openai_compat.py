"""Any OpenAI-compatible chat endpoint, through the official ``openai`` client.

One provider covers OpenAI itself (GPT-4o-mini), ``vllm serve`` (Qwen2.5-3B-Instruct,
Llama-3.2-3B-Instruct), Ollama and llama.cpp's server: they differ only in base URL, model name
and how they accept a JSON schema (``json_mode``). The client's own retries are switched off so
that :class:`~memsys.llm.retry.RetryPolicy` is the only policy in force. The API key is read
from the environment variable the config names and lives only inside the client object; a
credential in the base URL (user info, an ``api_key`` query) goes out with the requests and is
masked in :attr:`OpenAICompatProvider.endpoint`, which messages show (:mod:`memsys.llm.redact`).

Requests go through the client's documented low-level ``post`` with the JSON body that
``chat.completions.create`` would send: the client's connection pool, authentication, timeouts
and error types, without ``create``'s walk of every message and schema against the SDK's
parameter types and its model classes for the reply, a third of the client's CPU time per
request, which at a server's full concurrency holds the interpreter's lock while replies wait.

What a server sends is not trusted. Each attempt has one deadline, ``timeout_s`` from its start,
covering connect, headers and the whole body, and a cap on the bytes it may receive
(:mod:`memsys.llm.http_limits`): a trickling or endless reply times out (retried), one over the
cap fails. A reply's text longer than :func:`reply_char_cap` of its ``max_tokens`` is cut there
(``Completion.cut``, counted in the accounting). A body that is not UTF-8 or JSON, a reply without
a usable choice, and ``usage`` counts that are not counts are malformed replies (retried, then
a counted failure), never a crash. Error text and reply text pass
:func:`~memsys.llm.redact.redact`: the key read from ``api_key_env`` is registered there, so a
server that echoes it leaves ``***`` in records, caches and logs.
"""

from __future__ import annotations

import email.utils
import logging
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Literal

import httpx2
import openai

from memsys.llm.errors import (
    ProviderError,
    ProviderUnavailableError,
    QuotaExhaustedError,
    RateLimitedError,
    TransientProviderError,
)
from memsys.llm.http_limits import attempt_limits, limited_transport
from memsys.llm.redact import redact, register_secret
from memsys.llm.types import Completion, LLMRequest

log = logging.getLogger(__name__)

#: The chat completions route under the base URL.
CHAT_PATH = "/chat/completions"
#: Placeholder key for local servers started without ``--api-key`` (the client insists on one).
LOCAL_PLACEHOLDER_KEY = "EMPTY"
#: Statuses that mean "slow down" (rate limited, overloaded): waited out, never a failure.
RATE_LIMIT_STATUSES = (429, 503)
#: The error code of a 429 whose account has no quota left: it fails at once.
QUOTA_EXHAUSTED = "insufficient_quota"
#: Characters of reply text allowed per token of ``max_tokens`` (English averages about four a
#: token; the slack covers long tokens and servers that count differently), plus a fixed margin.
REPLY_CHARS_PER_TOKEN = 16
REPLY_CHARS_MARGIN = 1024
#: Bytes of a reply body allowed per character of the text cap (JSON escapes one character into
#: at most six bytes), plus room for the envelope (headers, ids, usage).
BODY_BYTES_PER_CHAR = 6
BODY_BYTES_MARGIN = 64 * 1024


def reply_char_cap(max_tokens: int) -> int:
    """The longest reply text kept for a request of ``max_tokens``; longer ones are cut.

    >>> reply_char_cap(256)
    5120
    """
    return max(1, max_tokens) * REPLY_CHARS_PER_TOKEN + REPLY_CHARS_MARGIN


def reply_byte_cap(max_tokens: int) -> int:
    """The most bytes one attempt may receive for a request of ``max_tokens``: past it the
    attempt fails (a server ignoring ``max_tokens``), rather than holding the reply in memory.

    >>> reply_byte_cap(256)
    96256
    """
    return reply_char_cap(max_tokens) * BODY_BYTES_PER_CHAR + BODY_BYTES_MARGIN


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
            http_client=openai.DefaultHttpxClient(
                transport=limited_transport(openai.DEFAULT_CONNECTION_LIMITS)
            ),
        )

    def generate(self, request: LLMRequest, timeout_s: float) -> Completion:
        """One chat completion within ``timeout_s`` (the whole attempt); transport and server
        failures become our error types, their text without credentials."""
        max_tokens = request.params.max_tokens
        with attempt_limits(timeout_s, reply_byte_cap(max_tokens)) as attempt:
            try:
                response = self._client.post(
                    CHAT_PATH,
                    body=self._body(request),
                    cast_to=httpx2.Response,
                    options={"timeout": timeout_s},
                )
                reply = response.json()
            except openai.APITimeoutError as error:
                raise TransientProviderError(
                    f"{self.endpoint}: timed out after {timeout_s}s"
                ) from error
            except openai.APIConnectionError as error:
                if attempt.oversize:
                    raise ProviderError(
                        f"{self.endpoint}: reply larger than {attempt.max_bytes} bytes for "
                        f"max_tokens={max_tokens} (the server ignores max_tokens?); not stored"
                    ) from error
                if attempt.expired:
                    raise TransientProviderError(
                        f"{self.endpoint}: timed out after {timeout_s}s"
                    ) from error
                raise TransientProviderError(
                    f"{self.endpoint}: connection error: {redact(str(error))}"
                ) from error
            except openai.APIStatusError as error:
                raise _status_error(self.endpoint, error) from error
            except (openai.APIResponseValidationError, ValueError) as error:
                # ValueError: JSON that does not parse, a body that is not UTF-8
                raise TransientProviderError(
                    f"{self.endpoint}: malformed reply: {redact(_short(error))}"
                ) from error
        return _completion(self.endpoint, reply, reply_char_cap(max_tokens))

    def _body(self, request: LLMRequest) -> dict[str, Any]:
        """The request's JSON body, as ``chat.completions.create`` would send it."""
        params = request.params
        arguments: dict[str, Any] = {
            "model": self.config.model,
            "messages": [dict(message) for message in request.messages],
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
    register_secret(key)  # masked wherever a server or an error might repeat it
    return key


def _short(error: BaseException, limit: int = 200) -> str:
    """An exception's message, cut to ``limit`` characters (a decoder may quote the body)."""
    text = str(error)
    return text if len(text) <= limit else f"{text[:limit]}..."


def _response_format(mode: str, schema: Mapping[str, Any]) -> dict[str, Any]:
    if mode == "json_object":
        return {"type": "json_object", "schema": dict(schema)}
    name = "".join(ch if ch.isalnum() or ch in "_-" else "_" for ch in schema.get("title", "reply"))
    return {
        "type": "json_schema",
        "json_schema": {"name": name[:64] or "reply", "schema": dict(schema), "strict": False},
    }


def _status_error(endpoint: str, error: openai.APIStatusError) -> ProviderError:
    message = f"{endpoint}: HTTP {error.status_code}: {redact(_short(error.message, 500))}"
    if error.status_code == 429 and _error_code(error) == QUOTA_EXHAUSTED:
        return QuotaExhaustedError(
            f"{endpoint}: the account's quota is exhausted (HTTP 429 {QUOTA_EXHAUSTED}): add "
            "credit or use another key; waiting will not help"
        )
    headers = error.response.headers if error.response is not None else {}
    if error.status_code in RATE_LIMIT_STATUSES:
        return RateLimitedError(message, retry_after_s=retry_after_s(headers))
    if error.status_code >= 500:
        return TransientProviderError(message, retry_after_s=retry_after_s(headers))
    return ProviderError(message)


def _error_code(error: openai.APIStatusError) -> str | None:
    """The ``code`` (or ``type``) of an OpenAI-style error body, when it has one."""
    if isinstance(error.code, str):
        return error.code
    body = error.body if isinstance(error.body, dict) else {}
    inner = body.get("error", body)
    for name in ("code", "type"):
        value = inner.get(name) if isinstance(inner, dict) else None
        if isinstance(value, str):
            return value
    return None


def retry_after_s(headers: Mapping[str, str]) -> float | None:
    """How long a server asks us to wait, from the first header that says so: ``retry-after-ms``
    (OpenAI), ``Retry-After`` (seconds or an HTTP date), then the longest of
    ``x-ratelimit-reset-requests`` / ``x-ratelimit-reset-tokens`` (OpenAI's durations, ``6m0s``,
    ``20ms``, or plain seconds). None when none parses.

    >>> retry_after_s({"retry-after": "2"}), retry_after_s({"retry-after-ms": "150"})
    (2.0, 0.15)
    >>> retry_after_s({"x-ratelimit-reset-requests": "1m2.5s", "x-ratelimit-reset-tokens": "20ms"})
    62.5
    >>> retry_after_s({"retry-after": "soon"}) is None
    True
    """
    lowered = {str(name).lower(): str(value) for name, value in headers.items()}
    milliseconds = _number(lowered.get("retry-after-ms"))
    if milliseconds is not None:
        return milliseconds / 1000
    if "retry-after" in lowered:
        value = lowered["retry-after"]
        seconds = _number(value)
        if seconds is None:
            seconds = _seconds_until(value)
        if seconds is not None:
            return seconds
    resets = [
        _duration_s(lowered[name])
        for name in ("x-ratelimit-reset-requests", "x-ratelimit-reset-tokens")
        if name in lowered
    ]
    found = [value for value in resets if value is not None]
    return max(found) if found else None


def _number(value: str | None) -> float | None:
    try:
        number = float(value) if value is not None else None
    except ValueError:
        return None
    return number if number is not None and math.isfinite(number) and number >= 0 else None


def _seconds_until(http_date: str) -> float | None:
    """Seconds from now until an HTTP date (``Retry-After: Wed, 21 Oct 2026 07:28:00 GMT``)."""
    try:
        when = email.utils.parsedate_to_datetime(http_date)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())


#: One part of an OpenAI reset duration: ``1h``, ``6m``, ``2.5s``, ``20ms``.
DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
DURATION_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def _duration_s(value: str) -> float | None:
    """``6m0s`` -> 360.0, ``20ms`` -> 0.02, ``3`` -> 3.0; None for anything else.

    >>> _duration_s("6m0s"), _duration_s("20ms"), _duration_s("3"), _duration_s("later")
    (360.0, 0.02, 3.0, None)
    """
    plain = _number(value)
    if plain is not None:
        return plain
    text = value.strip()
    parts = DURATION_PART.findall(text)
    if not parts or "".join(number + unit for number, unit in parts) != text:
        return None
    return sum(float(number) * DURATION_UNITS[unit] for number, unit in parts)


def _completion(endpoint: str, reply: Any, char_cap: int) -> Completion:
    """Our completion from the reply's JSON (any field may hold anything): a reply whose first
    choice has no text is malformed; text over ``char_cap`` is cut there; token counts that are
    not counts make it malformed."""
    choices = _field(reply, "choices")
    choice = choices[0] if isinstance(choices, list) and choices else None
    text = _field(_field(choice, "message"), "content")
    if not isinstance(choice, dict) or not isinstance(text, str | None):
        shown = redact(f"{reply!r:.200}")
        raise TransientProviderError(f"{endpoint}: malformed reply without a text choice: {shown}")
    text = redact(text or "")
    finish_reason = choice.get("finish_reason")
    cut = len(text) > char_cap
    if cut:
        log.warning(
            "%s: reply of %d characters cut to %d (the cap for its max_tokens)",
            endpoint,
            len(text),
            char_cap,
        )
        text, finish_reason = text[:char_cap], "length"
    usage = _field(reply, "usage")
    counts = [_count(_field(usage, name)) for name in ("prompt_tokens", "completion_tokens")]
    if None in counts:
        shown = redact(f"{usage!r:.200}")
        raise TransientProviderError(f"{endpoint}: malformed reply: token counts {shown}")
    return Completion(
        text=text,
        prompt_tokens=counts[0] or 0,
        completion_tokens=counts[1] or 0,
        finish_reason=finish_reason if isinstance(finish_reason, str) else None,
        cut=cut,
    )


def _field(value: Any, name: str) -> Any:
    """``value[name]`` when ``value`` is a JSON object, else ``None``.

    >>> _field({"a": 1}, "a"), _field({"a": 1}, "b"), _field([1], "a")
    (1, None, None)
    """
    return value.get(name) if isinstance(value, dict) else None


def _count(value: Any) -> int | None:
    """A token count from a reply's ``usage``: 0 when absent, None when it is not a count.

    >>> _count(12), _count(None), _count("12"), _count(True), _count(-3)
    (12, 0, None, None, None)
    """
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value
