"""The one interface every method, answerer and judge uses to call an LLM.

A :class:`Backbone` wraps a provider with what every call needs and no provider should
reimplement: the response cache, retries with backoff, the consecutive-failure breaker, a
bound on concurrency, and accounting per stage. Methods receive a backbone by injection,
usually a stage view (``backbone.with_stage("construction")``) so that their calls are booked to
the right stage without knowing about accounting.

``concurrency`` bounds the requests in flight to the model at once across everything that calls
it in this process (every batch, every :class:`~memsys.llm.flow.RequestFlow`, every stage view),
so several memories built at once share the server's slots instead of multiplying them. Backbones
given one :class:`~memsys.llm.slots.Limiters` share one set of slots per endpoint.

A rate limit slows a run and never costs it a request: a 429 or 503 is waited out (as long as
the server asks), shrinks the endpoint's in-flight limit, and is not an attempt; the run stops
with one line only when the endpoint has gone ``retry.rate_limit_patience_s`` without a success
(or one request has been refused for twice that), or at once when the server says the quota is
used up (:mod:`memsys.llm.retry`).
"""

from __future__ import annotations

import copy
import logging
import random
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Literal, NoReturn, overload

from memsys.llm.accounting import Accounting, CallRecord
from memsys.llm.cache import ResponseCache, describe_request
from memsys.llm.errors import (
    BackboneUnavailableError,
    CacheMissError,
    LLMError,
    LLMRequestError,
    ProviderError,
    QuotaExhaustedError,
    RateLimitedError,
    TransientProviderError,
)
from memsys.llm.pool import POLL_S, AbandonablePool, Cancelled, wait_for
from memsys.llm.providers.base import BatchProvider, Provider
from memsys.llm.retry import REQUEST_PATIENCE_FACTOR, FailureBreaker, RetryPolicy
from memsys.llm.slots import Key, Limiters, Slots
from memsys.llm.types import Completion, LLMRequest, LLMResponse, Message, SamplingParams
from memsys.usage import LLM, record

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BackboneSettings:
    """Per-backbone limits: how many requests run at once and how failures are handled."""

    concurrency: int = 8
    retry: RetryPolicy = field(default_factory=RetryPolicy)

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ValueError("concurrency must be at least 1")


class Backbone:
    """Cached, retried, accounted access to one model.

    Stage views made by :meth:`with_stage` share the provider, cache, accounting and breaker, so
    a failure streak or a token total spans the whole run.
    """

    def __init__(
        self,
        provider: Provider,
        *,
        cache: ResponseCache,
        accounting: Accounting,
        settings: BackboneSettings | None = None,
        stage: str = "unspecified",
        rng: random.Random | None = None,
        limiters: Limiters | None = None,
    ) -> None:
        self.provider = provider
        self.cache = cache
        self.accounting = accounting
        self.settings = settings or BackboneSettings()
        self.stage = stage
        self._breaker = FailureBreaker(
            self.settings.retry.max_consecutive_failures, provider.endpoint
        )
        self._rng = rng or random.Random()
        #: Requests in flight to the endpoint: shared by the stage views (copies share it) and,
        #: through ``limiters``, by the run's other backbones on the same endpoint.
        retry = self.settings.retry
        self._slots = (limiters or Limiters()).for_endpoint(
            provider.endpoint, self.settings.concurrency, retry.rate_limit_decrease
        )

    @property
    def slots(self) -> Slots:
        """The endpoint's slots: its current in-flight limit and requests waiting on a rate
        limit (what a progress bar shows)."""
        return self._slots

    @property
    def model_id(self) -> str:
        """The model identity used in cache keys and accounting."""
        return self.provider.model_id

    def with_stage(self, stage: str) -> Backbone:
        """A view of this backbone whose calls are booked to ``stage``."""
        view = copy.copy(self)
        view.stage = stage
        return view

    def complete(
        self,
        messages: Sequence[Message],
        params: SamplingParams | None = None,
        *,
        stage: str | None = None,
        cancelled: threading.Event | None = None,
        key: Key = (),
    ) -> LLMResponse:
        """One chat completion (greedy, 256 tokens unless ``params`` says otherwise).

        Raises :class:`LLMRequestError` when the request fails for good,
        :class:`BackboneUnavailableError` when too many have failed in a row, and
        :class:`~memsys.llm.errors.CacheMissError` on a miss in ``replay`` mode. A caller that
        runs it on a worker thread passes ``cancelled`` to stop its retries when it gives up;
        ``key`` orders it among the requests waiting for a slot (:mod:`memsys.llm.slots`).
        """
        record(LLM)
        request = LLMRequest(tuple(messages), params or SamplingParams())
        cancelled = cancelled or threading.Event()
        return self._complete(request, stage or self.stage, cancelled, key)

    @overload
    def complete_many(
        self,
        requests: Sequence[LLMRequest],
        *,
        stage: str | None = None,
        return_exceptions: Literal[False] = False,
    ) -> list[LLMResponse]: ...

    @overload
    def complete_many(
        self,
        requests: Sequence[LLMRequest],
        *,
        stage: str | None = None,
        return_exceptions: Literal[True],
    ) -> list[LLMResponse | LLMError]: ...

    def complete_many(
        self,
        requests: Sequence[LLMRequest],
        *,
        stage: str | None = None,
        return_exceptions: bool = False,
    ) -> list[LLMResponse] | list[LLMResponse | LLMError]:
        """Many completions, at most ``settings.concurrency`` in flight; results in order.

        Like ``asyncio.gather``: the first failure is raised (pending requests are cancelled)
        unless ``return_exceptions``, which puts each failed request's error in its slot. A
        tripped breaker is always raised: the run must stop. An interruption (Ctrl-C, SIGTERM
        through ``sys.exit``) returns at once, abandoning the requests in flight
        (:mod:`memsys.llm.pool`). Providers that batch natively (in-process vLLM) get all cache
        misses in one engine call.
        """
        record(LLM, len(requests))
        stage = stage or self.stage
        if isinstance(self.provider, BatchProvider):
            return self._complete_batch(self.provider, requests, stage, return_exceptions)
        pool = AbandonablePool(
            lambda request, cancelled: self._complete(request, stage, cancelled),
            requests,
            self.settings.concurrency,
        )
        try:
            return [_outcome(future, return_exceptions) for future in pool.futures]
        except BaseException as error:
            in_process = getattr(self.provider, "in_process", False)
            if in_process and isinstance(error, KeyboardInterrupt | SystemExit):
                self.interrupt()
            pool.abandon(wait=in_process)
            raise

    def interrupt(self) -> None:
        """The run is stopping: a model in this process stops its generation at the next token
        (:meth:`LlamaCppProvider.interrupt`), rather than finishing a reply nobody will read."""
        interrupt = getattr(self.provider, "interrupt", None)
        if interrupt is not None:
            log.warning("stopping: the in-process generation under way stops at its next token")
            interrupt()

    def _complete(
        self, request: LLMRequest, stage: str, cancelled: threading.Event, key: Key = ()
    ) -> LLMResponse:
        """One request: from the cache, or sent with retries until it succeeds, fails for
        good, or its batch is abandoned (``cancelled``: it stops before its next attempt)."""
        started = time.perf_counter()
        cached = self.cache.get(self.model_id, request)
        if cached is not None:
            return self._respond(stage, cached, time.perf_counter() - started, True, attempts=0)
        policy = self.settings.retry
        # Booked before anything is sent: a kill mid-request still leaves it in the ledger.
        request_id = self.accounting.sent(stage, self.model_id)
        attempt = 0  # sends that got an answer other than a rate limit
        sends, waits = 0, 0
        rate_limited_since: float | None = None
        while True:
            if cancelled.is_set():
                raise Cancelled
            sends += 1
            try:
                self._breaker.check()
                with self._slots.held(key, cancelled) as ticket:
                    try:
                        completion = self.provider.generate(request, policy.request_timeout_s)
                    except RateLimitedError:
                        self._slots.rate_limited(ticket)
                        raise
            except RateLimitedError as error:
                rate_limited_since = rate_limited_since or time.monotonic()
                stop = self._wait_out_rate_limit(error, waits, rate_limited_since, cancelled)
                if stop is not None:
                    self._fail([request], stage, started, sends, stop, [request_id])
                waits += 1
                continue
            except QuotaExhaustedError as error:
                stop = self._breaker.trip(f"stopping: {error}")
                self._fail([request], stage, started, sends, stop, [request_id])
            except TransientProviderError as error:
                attempt += 1
                if attempt < policy.max_attempts:
                    delay = policy.backoff_s(attempt - 1, self._rng, error.retry_after_s)
                    self._pause(delay, cancelled)
                    continue
                self._fail([request], stage, started, sends, error, [request_id])
            except (ProviderError, BackboneUnavailableError) as error:
                self._fail([request], stage, started, sends, error, [request_id])
            else:
                self._breaker.success()
                self._slots.succeeded()
                self.cache.put(self.model_id, request, completion)
                latency_s = time.perf_counter() - started
                return self._respond(stage, completion, latency_s, False, sends, request_id)

    def _wait_out_rate_limit(
        self,
        error: RateLimitedError,
        waits: int,
        rate_limited_since: float,
        cancelled: threading.Event,
    ) -> BackboneUnavailableError | None:
        """Wait as the server asked; or, once the endpoint has gone the whole patience window
        without a success since this request was first refused (or the request has been refused
        for :data:`~memsys.llm.retry.REQUEST_PATIENCE_FACTOR` windows), trip the breaker and
        return the error that stops the run."""
        patience = self.settings.retry.rate_limit_patience_s
        now = time.monotonic()
        quiet_since = max(self._slots.last_success, rate_limited_since)
        left = min(
            patience - (now - quiet_since),
            REQUEST_PATIENCE_FACTOR * patience - (now - rate_limited_since),
        )
        if left <= 0:
            return self._breaker.trip(
                f"stopping: {self.provider.endpoint} has rate-limited a request for "
                f"{now - rate_limited_since:.0f} s, for the last {now - quiet_since:.0f} s with "
                f"no request succeeding (backbone.retry.rate_limit_patience_s = {patience:g}); "
                f"last reply: {error}. What was logged is kept: run the same command again "
                "later to resume, or lower backbone.concurrency"
            )
        delay = self.settings.retry.rate_limit_wait_s(waits, self._rng, error.retry_after_s)
        with self._slots.waiting_out_rate_limit():
            self._pause(min(delay, left), cancelled)
        return None

    def _pause(self, seconds: float, cancelled: threading.Event) -> None:
        """Back off for ``seconds``, waking early when the batch is abandoned or the breaker
        trips (the next attempt then stops at once)."""
        deadline = time.monotonic() + seconds
        while not self._breaker.tripped.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0 or cancelled.wait(min(remaining, POLL_S)):
                return

    def _complete_batch(
        self,
        provider: BatchProvider,
        requests: Sequence[LLMRequest],
        stage: str,
        return_exceptions: bool,
    ) -> list[LLMResponse | LLMError]:
        """Cache lookups, then one engine call for all misses; latency is amortized over it."""
        started = time.perf_counter()
        found = [self.cache.get(self.model_id, request) for request in requests]
        lookup_s = (time.perf_counter() - started) / max(1, len(requests))
        misses = [request for request, hit in zip(requests, found, strict=True) if hit is None]
        generated: list[Completion | LLMError] = []
        share_s = 0.0
        sent: list[str] = []
        if misses:
            batch_started = time.perf_counter()
            sent = [self.accounting.sent(stage, self.model_id) for _ in misses]
            try:
                self._breaker.check()
                generated = list(provider.generate_batch(misses))
            except (ProviderError, BackboneUnavailableError) as error:
                try:
                    self._fail(misses, stage, batch_started, 1, error, sent)
                except LLMRequestError as request_error:
                    if not return_exceptions:
                        raise
                    generated = [request_error] * len(misses)
            else:
                self._breaker.success()
            share_s = (time.perf_counter() - batch_started) / len(misses)
        fresh = iter(zip(misses, generated, sent, strict=True))
        results: list[LLMResponse | LLMError] = []
        for hit in found:
            if hit is not None:
                results.append(self._respond(stage, hit, lookup_s, True, attempts=0))
                continue
            request, outcome, request_id = next(fresh)
            if isinstance(outcome, LLMError):  # the engine call failed: _fail booked it
                results.append(outcome)
            else:
                self.cache.put(self.model_id, request, outcome)
                results.append(
                    self._respond(stage, outcome, share_s, False, attempts=1, request_id=request_id)
                )
        return results

    def _respond(
        self,
        stage: str,
        completion: Completion,
        latency_s: float,
        cached: bool,
        attempts: int,
        request_id: str | None = None,
    ) -> LLMResponse:
        self._book(stage, completion, latency_s, cached, attempts, request_id)
        return LLMResponse(
            text=completion.text,
            prompt_tokens=completion.prompt_tokens,
            completion_tokens=completion.completion_tokens,
            latency_s=latency_s,
            cached=cached,
            model=self.model_id,
            finish_reason=completion.finish_reason,
        )

    def _book(
        self,
        stage: str,
        completion: Completion | None,
        latency_s: float,
        cached: bool,
        attempts: int,
        request_id: str | None = None,
    ) -> None:
        self.accounting.record(
            CallRecord(
                stage=stage,
                model=self.model_id,
                prompt_tokens=completion.prompt_tokens if completion else 0,
                completion_tokens=completion.completion_tokens if completion else 0,
                latency_s=latency_s,
                cached=cached,
                attempts=attempts,
                ok=completion is not None,
                request_id=request_id,
                cut=bool(completion and completion.cut and not cached),
            )
        )

    def _fail(
        self,
        requests: Sequence[LLMRequest],
        stage: str,
        started: float,
        attempts: int,
        error: LLMError,
        request_ids: Sequence[str],
    ) -> NoReturn:
        """Book failed requests, feed the breaker (which may stop the run), and raise."""
        latency_s = time.perf_counter() - started
        for request_id in request_ids:
            self._book(stage, None, latency_s, False, attempts, request_id)
        if isinstance(error, BackboneUnavailableError):
            raise error
        self._breaker.failure(error)
        raise LLMRequestError(
            f"{describe_request(self.model_id, requests[0].messages)}: failed after "
            f"{attempts} attempt(s): {error}"
        ) from error


def _outcome(future: Future[LLMResponse], return_exceptions: bool) -> LLMResponse | LLMError:
    try:
        return wait_for(future)
    except (BackboneUnavailableError, CacheMissError):
        raise  # the run must stop: a dead backbone, or a replay that diverged from its recording
    except LLMError as error:
        if return_exceptions:
            return error
        raise
