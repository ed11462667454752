"""Opaque summary content: a compaction MemoryHub observed but cannot read (pure, no Django).

Some providers compact a conversation into bytes nobody outside them can read (an encrypted
compaction block, a redacted summary). Such a version is still stored, hash-checked and
activated like any other; its content is the canonical JSON stub

    {"schema": "memoryhub.opaque/v1", "digest": "sha256:<hex>", "size_bytes": n, "media_type"?: str}

and its validation reports ``unverifiable content`` for every check that needs the text: the
record does not say "passed" (``result == "unverifiable"``), but nothing *failed* either, so the
version may become VALIDATED and be activated by compare-and-swap.
"""

from __future__ import annotations

import re
from typing import Any

from memoryhub.core.canonical import canonical_bytes, sha256_hex

OPAQUE_SCHEMA = "memoryhub.opaque/v1"
OPAQUE_VALIDATOR_VERSION = "opaque-1"
OPAQUE_FIELDS = frozenset({"schema", "digest", "size_bytes", "media_type"})
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
# Checks of the text validator that need to read the content: unverifiable on opaque bytes.
CONTENT_CHECKS = (
    "tool_call_pairs",
    "mandatory_facts",
    "groundedness",
    "open_issues",
    "token_budget",
    "secret_scan",
)
UNVERIFIABLE = "unverifiable content"


def is_opaque(content: Any) -> bool:
    return isinstance(content, dict) and content.get("schema") == OPAQUE_SCHEMA


def opaque_content(digest: str, size_bytes: int, media_type: str = "") -> dict[str, Any]:
    """The stub stored for unreadable content (call ``check_opaque`` on it before storing)."""
    content: dict[str, Any] = {"schema": OPAQUE_SCHEMA, "digest": digest, "size_bytes": size_bytes}
    if media_type:
        content["media_type"] = media_type
    return content


def opaque_problems(content: Any) -> list[tuple[str, str]]:
    """(field, message) pairs for a malformed stub; empty when it is well-formed."""
    if not isinstance(content, dict):
        return [("content", "must be a JSON object")]
    problems = []
    unknown = sorted(set(content) - OPAQUE_FIELDS)
    if unknown:
        problems.append(("content", f"unknown field(s) {unknown}; allowed: {sorted(OPAQUE_FIELDS)}"))
    digest = content.get("digest")
    if not isinstance(digest, str) or not _DIGEST.match(digest):
        problems.append(("content.digest", "must be 'sha256:' followed by 64 lowercase hex digits"))
    size = content.get("size_bytes")
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        problems.append(("content.size_bytes", "must be a non-negative integer"))
    media = content.get("media_type", "")
    if not isinstance(media, str) or len(media) > 100:
        problems.append(("content.media_type", "must be a string of at most 100 characters"))
    return problems


def opaque_checks(
    content_bytes: bytes,
    claimed_hash: str,
    covers_from_seq: int,
    covers_to_seq: int,
    previous_covers_to_seq: int | None,
    head_seq: int,
) -> tuple[list[dict[str, Any]], list[str]]:
    """The checks an opaque version gets: integrity, schema and coverage run; the rest cannot.

    Returns (checks, reasons). A check that could not run has ``passed: None`` and
    ``unverifiable: True``; reasons list only real failures.
    """
    import json

    checks: list[dict[str, Any]] = []
    computed = sha256_hex(content_bytes)
    try:
        content = json.loads(content_bytes)
        canonical = canonical_bytes(content) == content_bytes
    except ValueError:
        content, canonical = None, False
    integrity = (
        []
        if computed == claimed_hash and canonical
        else [f"stored bytes hash to {computed}, not {claimed_hash}"]
    )
    checks.append(
        {"name": "integrity", "passed": not integrity, "detail": "; ".join(integrity) or "hash matches"}
    )
    schema = (
        [f"{f}: {m}" for f, m in opaque_problems(content)] if is_opaque(content) else ["not an opaque stub"]
    )
    checks.append(
        {
            "name": "schema_version",
            "passed": not schema,
            "detail": "; ".join(schema) or f"{OPAQUE_SCHEMA}, well-formed",
        }
    )
    coverage: list[str] = []
    if covers_to_seq > head_seq:
        coverage.append(f"covers up to {covers_to_seq}, beyond head {head_seq}")
    if covers_from_seq != 1 and (
        previous_covers_to_seq is None or covers_from_seq != previous_covers_to_seq + 1
    ):
        coverage.append(f"starts at {covers_from_seq}: neither 1 nor right after the active watermark")
    checks.append(
        {
            "name": "coverage_contiguity",
            "passed": not coverage,
            "detail": "; ".join(coverage)
            or f"covers {covers_from_seq}..{covers_to_seq} of head {head_seq}, no gap",
        }
    )
    size = content.get("size_bytes") if isinstance(content, dict) else None
    digest = content.get("digest") if isinstance(content, dict) else None
    for name in CONTENT_CHECKS:
        checks.append(
            {
                "name": name,
                "passed": None,
                "unverifiable": True,
                "detail": f"{UNVERIFIABLE}: only the digest {digest} and size ({size} bytes) are known",
            }
        )
    reasons = [f"{c['name']}: {c['detail']}" for c in checks if c["passed"] is False]
    return checks, reasons


def validation_result(passed: bool, checks: list[dict[str, Any]]) -> str:
    """passed | failed | unverifiable: what a validation record says, in one word."""
    if not passed:
        return "failed"
    if any(c.get("unverifiable") for c in checks):
        return "unverifiable"
    return "passed"
