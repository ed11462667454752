"""Python client for the MemoryHub REST API v1.

Importable without Django (it needs only httpx)::

    from memoryhub.client import MemoryHubClient

    with MemoryHubClient("http://127.0.0.1:8000", api_key="mh_...") as hub:
        hub.create_workflow("api-tests-42", name="POST /payments tests")
        hub.append_events("api-tests-42", [{"kind": "message", "role": "user", "content": "..."}])
        ctx = hub.get_context("api-tests-42", min_seq=1)

Framework integrations wrap it in :class:`memoryhub.client.resilience.ResilientHub` (deadline,
circuit breaker, local spool, warn once): MemoryHub being away never stops an agent.
"""

from .client import MemoryHubClient, parse_retry_after
from .errors import (
    ApiError,
    CompactionTimeout,
    Conflict,
    ContextBudgetExceeded,
    MemoryHubError,
    NotConfigured,
    NotFound,
    PayloadTooLarge,
    PermissionDenied,
    RateLimited,
    ServerError,
    TransportError,
    Unauthorized,
    ValidationFailed,
)
from .types import (
    AppendedEvent,
    AppendResult,
    Artifact,
    Context,
    ContextSummary,
    Decision,
    Event,
    Job,
    Summary,
    TokenTotals,
    Trace,
    Workflow,
)

__all__ = [
    "ApiError",
    "AppendResult",
    "AppendedEvent",
    "Artifact",
    "CompactionTimeout",
    "Conflict",
    "Context",
    "ContextBudgetExceeded",
    "ContextSummary",
    "Decision",
    "Event",
    "Job",
    "MemoryHubClient",
    "MemoryHubError",
    "NotConfigured",
    "NotFound",
    "PayloadTooLarge",
    "PermissionDenied",
    "RateLimited",
    "ServerError",
    "Summary",
    "TokenTotals",
    "Trace",
    "TransportError",
    "Unauthorized",
    "ValidationFailed",
    "Workflow",
    "parse_retry_after",
]
