"""The Anthropic helper behind the never-hurt-the-agent layer: ``record_anthropic_response(hub, …)``.

Same recording as :func:`memoryhub.client.anthropic.record_anthropic_response` (the request's
messages, the compaction blocks, the call and its reply, idempotent), sent as two step requests
through a :class:`~memoryhub.client.resilience.ResilientHub`: each costs the agent at most the
hub's deadline and is spooled (in order) when MemoryHub is down, slow or failing; it never raises
for MemoryHub's sake. Needs no ``anthropic`` import and no Django::

    hub = ResilientHub.from_env(component="anthropic")   # NotConfigured without MEMORYHUB_URL/KEY
    result = record_anthropic_response(hub, "ticket-991", response, messages=messages, context_management=cm)
    block = repair_block(result)  # what the compaction lost (None: nothing, opaque, or spooled)
    next_user = {"role": "user", "content": [*([block] if block else []), {"type": "text", "text": question}]}
"""

from __future__ import annotations

from typing import Any

from memoryhub.client import MemoryHubClient
from memoryhub.client import anthropic as recording
from memoryhub.client.resilience import ResilientHub, SpooledRequest

__all__ = ["HubSteps", "record_anthropic_response", "repair_block"]

repair_block = recording.repair_block  # what the compaction lost, as a block for the next user message


class HubSteps:
    """A ResilientHub seen as the step sender the recording needs; None when spooled."""

    may_defer = True

    def __init__(self, hub: ResilientHub) -> None:
        self.hub = hub

    def step(self, workflow_id: str, body: dict[str, Any]) -> dict[str, Any] | None:
        request = SpooledRequest("POST", MemoryHubClient.step_path(workflow_id), body)
        answer: dict[str, Any] | None = self.hub.call(
            lambda client: client.step(workflow_id, body), default=None, spool=request, ordered=True
        )
        return answer


def record_anthropic_response(
    hub: ResilientHub, workflow_id: str, response: Any, **kwargs: Any
) -> dict[str, Any]:
    """:func:`memoryhub.client.anthropic.record_anthropic_response` through ``hub`` (``messages=`` required)."""
    return recording.record_anthropic_response(HubSteps(hub), workflow_id, response, **kwargs)
