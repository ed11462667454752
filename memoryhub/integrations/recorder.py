"""Summary content for a compaction a framework performed that MemoryHub cannot read.

The integrations record what a framework compacted as an observed compaction (``POST …/step/``
or ``…/observed-compactions/``, ``memoryhub.memory.observed``); an encrypted compaction item is
sent as its digest and size only. (The earlier ``record_compaction`` helper, which stored a
missing summary as a placeholder text, is gone: an absent summary is recorded as absent.)
Nothing here imports Django.
"""

from __future__ import annotations

import hashlib
from typing import Any

__all__ = ["opaque_content"]


def opaque_content(encrypted: str | bytes) -> dict[str, Any]:
    """Summary content for an encrypted compaction item: its digest and size only."""
    data = encrypted.encode("utf-8") if isinstance(encrypted, str) else encrypted
    return {
        "narrative": "",
        "facts": [],
        "opaque": True,
        "opaque_digest": "sha256:" + hashlib.sha256(data).hexdigest(),
        "opaque_size": len(data),
    }
