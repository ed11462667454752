"""Patterns for credentials that must never reach a summary (or an LLM prompt).

Shared by the validator's secret scan and by compactors, which redact before writing text.
Matches are reported by pattern name and a short masked prefix, never the secret itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

SECRET_PATTERNS: dict[str, re.Pattern[str]] = {
    "openai_api_key": re.compile(r"\bsk-(?:proj-|ant-)?[A-Za-z0-9_\-]{20,}"),
    "memoryhub_api_key": re.compile(r"\bmh_[A-Za-z0-9_\-]{16,}"),
    "aws_access_key_id": re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    "aws_secret_access_key": re.compile(
        r"(?i:aws_?secret_?access_?key)[\"'\s]*[:=][\"'\s]*[A-Za-z0-9/+=]{40}"
    ),
    "github_token": re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}"),
    "slack_token": re.compile(r"\bxox[abposr]-[A-Za-z0-9\-]{10,}"),
    "bearer_token": re.compile(r"\b(?i:bearer)\s+[A-Za-z0-9\-._~+/]{16,}=*"),
    "private_key": re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----"),
}

REDACTED = "[REDACTED]"
# One pass over the text for redaction (compactors call it for every event line).
_ANY_SECRET = re.compile("|".join(f"(?:{p.pattern})" for p in SECRET_PATTERNS.values()))


@dataclass(frozen=True)
class SecretMatch:
    pattern: str
    start: int
    masked: str  # the first few characters only, so reports never leak the secret


def find_secrets(text: str) -> list[SecretMatch]:
    """Every credential-looking span in ``text``, in order of position."""
    found = [
        SecretMatch(name, m.start(), m.group(0)[:6] + "…")
        for name, pattern in SECRET_PATTERNS.items()
        for m in pattern.finditer(text)
    ]
    return sorted(found, key=lambda s: (s.start, s.pattern))


def redact_secrets(text: str) -> str:
    """``text`` with every credential-looking span replaced by ``[REDACTED]``."""
    return _ANY_SECRET.sub(REDACTED, text)
