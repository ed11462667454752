"""Vocabulary of structured facts carried by events and summaries.

Events annotate what they establish as ``facts``: ``[{"key", "kind", "text", "state"}]``.
Summaries keep them beside the narrative with ``source_seqs``. The validator treats some facts as
*mandatory*: a summary that loses one of them must not be activated.
"""

from __future__ import annotations

from typing import Any

FACT_KINDS = (
    "requirement",  # a functional requirement captured as structure
    "constraint",  # e.g. "amounts are integers in minor units"
    "scope",  # an authorization scope, e.g. payments:write
    "approval",  # e.g. approval-12 pending
    "issue",  # an unresolved bug or open question
    "test",  # a generated test id and its outcome
    "decision",  # a design decision taken by an agent
    "source_version",  # a source document version, e.g. spec-v7
    "artifact",  # something published
)

FACT_STATES = ("open", "pending", "resolved", "approved", "rejected", "failed", "passed", "done", "info")

# Facts that must survive compaction, by kind -> states that make them mandatory (None = any state).
MANDATORY_FACTS: dict[str, frozenset[str] | None] = {
    "requirement": None,
    "constraint": None,
    "scope": None,
    "source_version": None,
    "approval": frozenset({"pending", "open"}),
    "issue": frozenset({"open", "pending"}),
    "test": frozenset({"failed"}),
}


def is_mandatory(fact: dict[str, Any]) -> bool:
    """True when ``fact`` (an event or summary fact) must be preserved by every summary."""
    kind = fact.get("kind")
    if kind not in MANDATORY_FACTS:
        return False
    states = MANDATORY_FACTS[kind]
    return states is None or fact.get("state", "info") in states
