"""Recording a compaction that a framework performed as a MemoryHub summary version.

The integrations (LangChain middleware, OpenAI Agents session) call :func:`record_compaction`
and nothing else to record what a framework compacted, so the transport can change in one place:
today it submits an external candidate (``POST …/summaries/``), validates it and, when validation
passed, activates it by compare-and-swap on the workflow's current revision. Nothing here imports
Django.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Mapping
from typing import Any

from memoryhub.client import ApiError, MemoryHubClient, Summary

__all__ = ["opaque_content", "record_compaction"]


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


def record_compaction(
    client: MemoryHubClient,
    workflow_id: str,
    *,
    covers_from_seq: int,
    covers_to_seq: int,
    content: Mapping[str, Any],
    compactor: Mapping[str, Any],
    source_refs: list[str] | None = None,
) -> Summary:
    """Store the compaction as a summary version covering exactly ``covers_from_seq..covers_to_seq``.

    Returns the summary as it stands afterwards: ACTIVE when it validated and the activation won,
    VALIDATED when activation was refused (e.g. the policy requires approval) or lost a race,
    REJECTED when validation failed (opaque content is "unverifiable").
    """
    summary = client.submit_summary(
        workflow_id,
        covers_from_seq=covers_from_seq,
        covers_to_seq=covers_to_seq,
        content=content,
        compactor=compactor,
        source_refs=source_refs,
    )
    state = client.validate(summary.summary_id)
    if state.get("status") == "VALIDATED":
        revision = client.get_workflow(workflow_id).active_revision
        # Approval required or a concurrent activation: the version stays VALIDATED, visible as such.
        with contextlib.suppress(ApiError):
            client.activate(summary.summary_id, expected_revision=revision)
    return client.get_summary(summary.summary_id)
