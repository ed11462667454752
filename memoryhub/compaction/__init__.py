"""Compactors: turn a previous summary plus new source events into a candidate summary.

Pure Python (no Django). The Django layer converts ORM rows to ``SourceEvent`` /
``PreviousSummary``, calls ``get_compactor(name, **settings).compact(...)`` and stores the
``CompactionResult`` as a CANDIDATE summary.
"""

from memoryhub.compaction.base import (
    CompactionError,
    Compactor,
    CompactorUnavailable,
    InvalidCompactionInput,
    NothingToCompact,
    TransientCompactorError,
    available_compactors,
    get_compactor,
    register,
)

# Importing the built-in compactors registers them: any import of memoryhub.compaction.* runs this
# package first, so get_compactor() always sees them (and base.py never imports its plug-ins).
from memoryhub.compaction.budgeted import ExtractiveCompactorV3
from memoryhub.compaction.extractive import ExtractiveCompactor
from memoryhub.compaction.openai_chat import OpenAIChatCompactor
from memoryhub.compaction.tokens import DEFAULT_ENCODING, count_json_tokens, count_tokens
from memoryhub.compaction.types import (
    SUMMARY_SCHEMA,
    CompactionResult,
    PreviousSummary,
    SourceEvent,
)

__all__ = [
    "DEFAULT_ENCODING",
    "SUMMARY_SCHEMA",
    "CompactionError",
    "CompactionResult",
    "Compactor",
    "CompactorUnavailable",
    "ExtractiveCompactor",
    "ExtractiveCompactorV3",
    "InvalidCompactionInput",
    "NothingToCompact",
    "OpenAIChatCompactor",
    "PreviousSummary",
    "SourceEvent",
    "TransientCompactorError",
    "available_compactors",
    "count_json_tokens",
    "count_tokens",
    "get_compactor",
    "register",
]
