"""A conversation whose framework summary drops a requirement, a constraint and two identifiers.

Shared by the repair tests (LangChain, Claude Code, service) and the integration benchmark: the
summarizer writes ``LOSSY_SUMMARY``, which keeps the topic and loses the four things below; the
context the model reads next must hold all four again (``MUST_RETURN``).
"""

from __future__ import annotations

REQUIREMENT = "The weekly report must include the p99 latency for every endpoint."
CONSTRAINT = "Never deploy to production on a Friday."
ORDER_ID = "ORD-48213"
TRACKING_ID = "1Z999AA10123456784"
IDENTIFIERS = f"Order {ORDER_ID} shipped; tracking number {TRACKING_ID}."

TURNS: list[tuple[str, str]] = [
    ("user", "Hello, I need help with the weekly operations report and a shipment."),
    ("user", REQUIREMENT),
    ("assistant", "Understood, I will collect the latency figures."),
    ("user", CONSTRAINT),
    ("assistant", "Noted about deployments."),
    ("user", IDENTIFIERS),
    ("assistant", "Thanks, I will keep an eye on the shipment."),
]
LOSSY_SUMMARY = "The user asked for help with an operations report, deployments and a shipment."
# What the model must see again after the lossy compaction (the values, not the whole sentences).
MUST_RETURN = (
    "p99 latency for every endpoint",
    "Never deploy to production on a Friday",
    ORDER_ID,
    TRACKING_ID,
)
