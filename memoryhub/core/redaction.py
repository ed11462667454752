"""Mask secrets and configured PII before anything is written to audit entries, logs or errors."""

from __future__ import annotations

import logging
from functools import lru_cache
from typing import Any

import re2
from django.conf import settings

MASK = "[REDACTED]"

_SECRET_PATTERNS = [
    r"mh_[A-Za-z0-9]{6,}_[A-Za-z0-9_\-]{16,}",  # MemoryHub API keys
    r"\bsk-[A-Za-z0-9_\-]{16,}",  # OpenAI-style keys
    r"\bAKIA[0-9A-Z]{16}\b",  # AWS access key ids
    r"\b[Bb][Ee][Aa][Rr][Ee][Rr]\s+[A-Za-z0-9._~+/=\-]{8,}",  # bearer tokens
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(-----END [A-Z ]*PRIVATE KEY-----|$)",
    r"\bxox[abposr]-[A-Za-z0-9\-]{10,}",  # Slack tokens
    r"\b(?i:password|passwd|secret|api[_-]?key|token)\s*[=:]\s*\S+",
]
_EMAIL = r"[A-Za-z0-9._%+\-]+@[A-Za-z0-9.\-]+\.[A-Za-z]{2,}"


@lru_cache(maxsize=4)
def _compiled(include_emails: bool, extra: tuple[str, ...]) -> Any:
    patterns = list(_SECRET_PATTERNS) + list(extra)
    if include_emails:
        patterns.append(_EMAIL)
    # RE2: linear in the text whatever it holds (Python's re is quadratic here on a long run of
    # e-mail characters without an @, and redaction sees event text).
    return re2.compile("|".join(f"(?:{p})" for p in patterns))


def _pattern() -> Any:
    try:
        return _compiled(
            bool(getattr(settings, "MEMORYHUB_REDACT_EMAILS", True)),
            tuple(getattr(settings, "MEMORYHUB_REDACT_PATTERNS", []) or []),
        )
    except Exception:  # settings not configured (client-side use): secrets only
        return _compiled(False, ())


def redact_text(text: str) -> str:
    return _pattern().sub(MASK, str(text))  # str(): RE2's sub rebuilds type(text), e.g. a StrEnum


def redact(value: Any) -> Any:
    """Recursively mask secrets in strings inside dicts/lists; other values pass through."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {k: (MASK if _is_secret_key(k) and v else redact(v)) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact(v) for v in value]
    return value


def _is_secret_key(key: Any) -> bool:
    return isinstance(key, str) and key.lower() in {"secret", "password", "api_key", "token", "authorization"}


class RedactingFilter(logging.Filter):
    """Logging filter: masks secrets in the formatted message before any handler writes it."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:
            return True
        redacted = redact_text(message)
        if redacted != message:
            record.msg, record.args = redacted, ()
        return True
