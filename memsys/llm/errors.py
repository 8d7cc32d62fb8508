"""The failures a backbone distinguishes, so that retry policy lives in one place.

Providers translate their library's exceptions into these; the backbone retries
:class:`TransientProviderError`, gives up at once on :class:`ProviderError`, and stops the run
with :class:`BackboneUnavailableError` when too many requests in a row have failed.
"""

from __future__ import annotations


class LLMError(Exception):
    """Base class of every error raised by :mod:`memsys.llm`."""


class ProviderError(LLMError):
    """A request failed in a way that retrying will not fix (bad request, auth, bad config)."""


class TransientProviderError(ProviderError):
    """A request failed in a way worth retrying: 429, 5xx, timeout, dropped connection, garbage.

    ``retry_after_s`` carries a server's ``Retry-After`` hint when it gave one.
    """

    def __init__(self, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class RateLimitedError(TransientProviderError):
    """The server asked us to slow down (HTTP 429 or 503): waited out, never a failure.

    The backbone waits ``retry_after_s`` (from ``Retry-After``, ``retry-after-ms`` or the
    ``x-ratelimit-reset-*`` headers) or its own backoff, lowers its in-flight limit, and does not
    count the attempt against ``max_attempts`` (:mod:`memsys.llm.backbone`).
    """


class QuotaExhaustedError(ProviderError):
    """A 429 that says the account's quota is used up (OpenAI's ``insufficient_quota``): no
    amount of waiting helps, so the run stops at once with one line."""


class ProviderUnavailableError(LLMError):
    """A provider cannot be built here: an optional dependency or a model file is missing."""


class CacheMissError(LLMError):
    """``replay`` mode met a request that is not in the cache."""


class LLMRequestError(LLMError):
    """One request failed for good (retries exhausted or a permanent error)."""


class BackboneUnavailableError(LLMError):
    """Too many consecutive requests failed: the run stops instead of grinding on."""
