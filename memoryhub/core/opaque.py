"""Opaque summary content: a compaction MemoryHub observed but cannot read (pure, no Django).

Some providers compact a conversation into bytes nobody outside them can read (an encrypted
compaction block, a redacted summary). Such a version is still stored, hash-checked and
activated like any other; its content is the canonical JSON stub

    {"schema": "memoryhub.opaque/v1", "digest": "sha256:<hex>", "size_bytes": n, "media_type"?: str}

and its validation reports ``unverifiable content`` for every check that needs the text: the
record does not say "passed" (``result == "unverifiable"``), but nothing *failed* either, so the
version may become VALIDATED and be activated by compare-and-swap.

The older form, an external candidate whose readable content (narrative, facts) also carries an
encrypted item (``"opaque": true`` with ``opaque_digest`` and ``opaque_size``), is judged by the
text validator: its ``content_readable`` check fails as unverifiable and a reviewer may waive it.
``unreadable`` is the one rule that says whether content is either.
"""

from __future__ import annotations

import json
import re
from typing import Any

from memoryhub.core.canonical import canonical_bytes, sha256_hex

OPAQUE_SCHEMA = "memoryhub.opaque/v1"
OPAQUE_VALIDATOR_VERSION = "opaque-1"
OPAQUE_FIELDS = frozenset({"schema", "digest", "size_bytes", "media_type"})
# The encrypted item inside readable content (the older form).
ITEM_FIELDS = ("opaque", "opaque_digest", "opaque_size")
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
# rules-5 checks that read the summary text: none of them can run on bytes MemoryHub cannot read.
TEXT_CHECKS = ("mandatory_facts", "groundedness", "open_issues", "token_budget", "secret_scan")
# What opaque-1 reports as unverifiable: the text checks, and tool pairs (it reads no source events).
OPAQUE_UNVERIFIED = ("tool_call_pairs", *TEXT_CHECKS)
UNVERIFIABLE = "unverifiable content"


def is_opaque(content: Any) -> bool:
    return isinstance(content, dict) and content.get("schema") == OPAQUE_SCHEMA


def has_opaque_item(content: Any) -> bool:
    """Readable content that carries an encrypted item (the older form)."""
    return isinstance(content, dict) and content.get("opaque") is True


def unreadable(content: Any) -> str | None:
    """Why MemoryHub cannot check ``content`` against the covered events, or None when it can:
    the one rule for "opaque" (an opaque stub, or readable content carrying an encrypted item)."""
    if is_opaque(content):
        return _digest_only(content.get("digest"), content.get("size_bytes"))
    if has_opaque_item(content):
        return (
            f"{UNVERIFIABLE}: the compaction returned only an encrypted item "
            f"({content.get('opaque_digest')}, {content.get('opaque_size')} bytes); its text cannot be "
            "checked against the covered events"
        )
    return None


def opaque_content(digest: str, size_bytes: int, media_type: str = "") -> dict[str, Any]:
    """The stub stored for unreadable content (call ``opaque_problems`` on it before storing)."""
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


def item_problems(content: dict[str, Any]) -> list[tuple[str, str]]:
    """(field, message) pairs for a malformed encrypted item in readable content: ``opaque: true``
    needs ``opaque_digest`` ("sha256:<hex>") and ``opaque_size`` (bytes); without the flag neither
    may appear."""
    if not any(field in content for field in ITEM_FIELDS):
        return []
    if not has_opaque_item(content):
        return [("content.opaque", "must be true when opaque_digest/opaque_size are given")]
    problems = []
    digest, size = content.get("opaque_digest"), content.get("opaque_size")
    if not isinstance(digest, str) or not _DIGEST.match(digest):
        problems.append(("content.opaque_digest", "must be 'sha256:' + 64 lowercase hex digits"))
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        problems.append(("content.opaque_size", "must be a non-negative integer (bytes)"))
    return problems


def opaque_checks(
    content_bytes: bytes,
    claimed_hash: str,
    covers_from_seq: int,
    covers_to_seq: int,
    previous_covers_to_seq: int | None,
    head_seq: int,
) -> list[dict[str, Any]]:
    """The checks an opaque version gets: integrity, schema and coverage run; the rest cannot.

    A check that could not run has ``passed: None`` and ``unverifiable: True``
    (``memoryhub.memory.validation.judged`` turns the checks into the outcome).
    """
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
    for name in OPAQUE_UNVERIFIED:
        checks.append(
            {"name": name, "passed": None, "unverifiable": True, "detail": _digest_only(digest, size)}
        )
    return checks


def _digest_only(digest: Any, size: Any) -> str:
    return f"{UNVERIFIABLE}: only the digest {digest} and size ({size} bytes) are known"
