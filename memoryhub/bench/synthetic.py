"""Deterministic synthetic events that look like the seed scenario (varied length and kinds)."""

from __future__ import annotations

import random
from typing import Any

AGENTS = ["requirements-agent", "test-generator", "security-reviewer", "publisher"]
SENTENCES = [
    "POST /payments must reject a missing Idempotency-Key header with 400 Bad Request.",
    "Amounts are integers in minor units and currency follows ISO-4217.",
    "The generated suite covers refunds, partial captures and duplicate submissions.",
    "Scope payments:write is required for creating a payment; payments:read for listing.",
    "Test T{n} exercises the retry path after a 503 from the ledger service.",
    "Reviewer notes that webhook signatures must be verified before processing.",
    "The spec revision spec-v7 changed the error envelope to RFC 7807 problem details.",
    "Bug-{n}: the sandbox returns 500 when the amount field is a string.",
]


def synthetic_events(n: int, *, seed: int = 42, prefix: str = "b") -> list[dict[str, Any]]:
    rng = random.Random(seed)
    events = []
    for i in range(1, n + 1):
        words = " ".join(
            rng.choice(SENTENCES).format(n=rng.randint(1, 999)) for _ in range(rng.randint(1, 4))
        )
        events.append(
            {
                "kind": "message" if i % 5 else "note",
                "content": words,
                "agent": AGENTS[i % 4],
                "role": "assistant",
                "client_event_id": f"{prefix}-{i}",
            }
        )
    return events
