"""Recording a compaction that a framework performed as a MemoryHub summary version.

The integrations (LangChain middleware, OpenAI Agents session) call :func:`record_compaction`
and nothing else to record what a framework compacted: it becomes an observed compaction
(``memoryhub.memory.observed`` behind ``POST …/observed-compactions/``), the same path as Claude Code,
OpenTelemetry and the Anthropic API. Nothing here imports Django.
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
    trigger: Mapping[str, Any] | None = None,
) -> Summary:
    """Store the compaction as a summary version covering exactly ``covers_from_seq..covers_to_seq``.

    A framework's compaction replaces the history from the start (``covers_from_seq`` 1): it is an
    *observed compaction* (``POST …/observed-compactions/``), validated and activated by CAS like
    any other, counted per source and read for the threshold in force. Encrypted content is sent
    as its digest and size only (validation: unverifiable). Anything else is submitted as an
    external candidate, validated, and activated when it passed.

    Returns the summary as it stands afterwards.
    """
    if covers_from_seq == 1:
        body: dict[str, Any] = (
            {"opaque": {"digest": content["opaque_digest"], "size_bytes": content["opaque_size"]}}
            if content.get("opaque")
            else {"text": str(content.get("narrative") or "").strip() or "(empty summary)"}
        )
        observed = client.record_observed_compaction(
            workflow_id, covers_to_seq, compactor, trigger=trigger, source_refs=source_refs, **body
        )
        return client.get_summary(observed["summary_id"])
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
