"""Canonical serialisation and hashing shared by events, summaries, manifests and the audit log.

Canonical JSON = sorted keys, no insignificant whitespace, UTF-8. Every hash in MemoryHub is
``"sha256:" + hex`` over such bytes (or over raw UTF-8 text for event content).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

HASH_PREFIX = "sha256:"


def canonical_bytes(value: Any) -> bytes:
    """Serialise ``value`` to canonical JSON bytes (sorted keys, compact separators, UTF-8)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def sha256_hex(data: bytes) -> str:
    return HASH_PREFIX + hashlib.sha256(data).hexdigest()


def hash_value(value: Any) -> str:
    """``sha256:<hex>`` of the canonical JSON bytes of ``value``."""
    return sha256_hex(canonical_bytes(value))


def hash_text(text: str) -> str:
    """``sha256:<hex>`` of ``text`` encoded as UTF-8 (event content hashes)."""
    return sha256_hex(text.encode("utf-8"))
