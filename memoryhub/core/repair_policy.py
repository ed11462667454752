"""The policy's ``repair`` block: what happens when a framework's compaction lost something.

``{"gate": "repair" | "block" | "observe", "resummarize": bool, "max_tokens": int}``

* ``repair`` (the default): the server's verdict names what the framework's summary lost (lost
  obligation sentences first, then lost salient units, each with its source seq) and hands them
  back to the integration, which puts them beside the summary the model reads next;
* ``block``: an integration that can keep the framework's previous context (LangChain: the
  messages it would have dropped) keeps it, and the refusal is recorded (the summary is stored and
  judged but never activated); an integration that cannot (Claude Code: the compaction already
  happened) gets the hand-back instead, and the verdict says so;
* ``observe``: verdicts are recorded and shown, nothing is handed back.

``resummarize`` (LangChain only): one more summarization attempt whose prompt names what was lost;
the better of the two summaries is kept. ``max_tokens`` caps the hand-back block.
Pure Python: the policy engine validates it, the memory domain applies it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

GATES = ("repair", "block", "observe")
DEFAULT_GATE = "repair"
DEFAULT_MAX_TOKENS = 300
MAX_MAX_TOKENS = 4000
FIELDS = ("gate", "resummarize", "max_tokens")


def default_repair() -> dict[str, Any]:
    return {"gate": DEFAULT_GATE, "resummarize": False, "max_tokens": DEFAULT_MAX_TOKENS}


def merged_repair(raw: Any) -> dict[str, Any]:
    """``raw`` (possibly partial) over the defaults; shapes are checked by ``repair_errors``."""
    merged = default_repair()
    if isinstance(raw, Mapping):
        merged.update({k: v for k, v in raw.items() if k in FIELDS})
    return merged


def repair_errors(raw: Any, prefix: str = "repair") -> list[tuple[str, str]]:
    """Every problem with a policy ``repair`` block, as (field, message)."""
    if not isinstance(raw, Mapping):
        return [(prefix, "must be an object with gate, resummarize and max_tokens")]
    errors: list[tuple[str, str]] = []
    for key in raw:
        if key not in FIELDS:
            errors.append((f"{prefix}.{key}", f"unknown field; known: {', '.join(FIELDS)}"))
    if "gate" in raw and raw["gate"] not in GATES:
        errors.append((f"{prefix}.gate", f"must be one of {', '.join(GATES)}"))
    if "resummarize" in raw and not isinstance(raw["resummarize"], bool):
        errors.append((f"{prefix}.resummarize", "must be true or false"))
    if "max_tokens" in raw:
        value = raw["max_tokens"]
        if isinstance(value, bool) or not isinstance(value, int) or not 20 <= value <= MAX_MAX_TOKENS:
            errors.append((f"{prefix}.max_tokens", f"must be a whole number from 20 to {MAX_MAX_TOKENS}"))
    return errors
