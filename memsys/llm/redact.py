"""Credentials kept out of everything a run writes.

A base URL may carry a secret: basic-auth user info (``http://user:pass@host/v1``) or a key in
its query (``?api_key=...``). A server may echo the ``Authorization`` header (``Bearer sk-...``)
in an error body or a reply. The provider connects with the real URL and key; whatever is
written or shown (configs, log records, error messages, failure records, cached replies; and
Hydra's saved files, which the runners mask: ``benchmarks.pipeline.cli.redact_run_outputs``)
gets :func:`redact` first: URL credentials, ``Bearer`` tokens, ``sk-...`` keys
and every key value a provider read from its ``api_key_env`` (:func:`register_secret`).
"""

from __future__ import annotations

import logging
import re
import threading
from pathlib import Path

#: What replaces a secret.
MASK = "***"
#: Query parameters whose value is a credential.
SECRET_PARAMETERS = ("api_key", "api-key", "apikey", "key", "token", "access_token", "password")
#: Loggers that log every request's full URL at INFO.
HTTP_LOGGERS = ("httpx", "httpx2", "httpcore", "openai")

# A URL's user info: from ``scheme://`` to the authority's last ``@`` (as ``urlsplit`` reads it);
# Hydra writes a multirun's overrides with ``:`` escaped (``http\://user\:pass@host``).
_USER_INFO = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.-]*\\?://)[^\s/?#'\"]*@")
_SECRET_QUERY = re.compile(
    rf"(?P<name>[?&](?:{'|'.join(map(re.escape, SECRET_PARAMETERS))})=)[^&#\s'\"]*", re.IGNORECASE
)
# An HTTP bearer token (an echoed ``Authorization`` header) and OpenAI-style keys.
_BEARER = re.compile(r"(?P<name>\bBearer\s+)[A-Za-z0-9._~+/=-]+", re.IGNORECASE)
_SK_KEY = re.compile(r"\bsk-[A-Za-z0-9_-]{8,}")
#: Shorter values are not masked where they appear: a placeholder key (``EMPTY``) or a short
#: word would mask ordinary text.
MIN_SECRET_LENGTH = 8
#: Key values read by providers in this process (:func:`register_secret`): process-wide like
#: the environment they come from, since a log filter or an exception message has no provider.
_SECRETS: set[str] = set()
_SECRETS_LOCK = threading.Lock()


def register_secret(value: str | None) -> None:
    """Mask ``value`` (an API key read from the environment) wherever :func:`redact` runs."""
    if value and len(value) >= MIN_SECRET_LENGTH:
        with _SECRETS_LOCK:
            _SECRETS.add(value)


def redact(text: str) -> str:
    """``text`` with every credential in it masked: the user info and secret query values of
    URLs, ``Bearer`` tokens, ``sk-...`` keys and the registered key values.

    >>> redact('{"error": "bad key: Bearer sk-abcdefghijkl at http://u:p@host/v1?api_key=x"}')
    '{"error": "bad key: Bearer *** at http://***@host/v1?api_key=***"}'
    """
    with _SECRETS_LOCK:
        secrets = sorted(_SECRETS, key=len, reverse=True)
    for secret in secrets:
        text = text.replace(secret, MASK)
    text = _USER_INFO.sub(rf"\g<scheme>{MASK}@", text)
    text = _SECRET_QUERY.sub(rf"\g<name>{MASK}", text)
    text = _BEARER.sub(rf"\g<name>{MASK}", text)
    return _SK_KEY.sub(MASK, text)


class RedactFilter(logging.Filter):
    """Masks URL credentials in a record's message and traceback before any handler writes it."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            record.msg, record.args = redact(record.getMessage()), None
        except Exception:  # arguments that do not fit the message: the handler reports it
            return True
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True


def install_log_redaction() -> None:
    """Mask URL credentials in whatever the root logger's handlers write, and keep the HTTP
    clients' per-request lines (a full URL each) out of the logs.

    Idempotent; called where a run starts, after Hydra has configured logging for the job.
    """
    for handler in logging.getLogger().handlers:
        if not any(isinstance(existing, RedactFilter) for existing in handler.filters):
            handler.addFilter(RedactFilter())
    for name in HTTP_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)


def redact_file(path: Path) -> None:
    """Rewrite ``path`` with URL credentials masked (untouched when it holds none)."""
    text = path.read_text(encoding="utf-8")
    if (masked := redact(text)) != text:
        path.write_text(masked, encoding="utf-8")
