"""The audit log as a story: each entry with the human name of its object (``api-tests-42 · S2``),
a link to it (jobs included), and the reason or outcome inline.

``describe(entries)`` resolves a page of entries with one query per object kind, never per row.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from audit.models import AuditEntry, Purge
from memoryhub.models import AlertRule, Artifact, Channel, CompactionJob, ConsumerTrace, Summary


@dataclass(frozen=True)
class Described:
    entry: AuditEntry
    label: str
    url: str
    reason: str
    outcome: str  # applied | stale | refused (lifecycle), or ""
    change: str  # "VALIDATED → ACTIVE", or ""


def _int_ids(values: list[str]) -> list[int]:
    return [int(v) for v in values if v.isdigit()]


def _objects(tenant_id: int, wanted: dict[str, list[str]]) -> dict[tuple[str, str], tuple[str, str]]:
    """(object_type, object_id) -> (label, url) for the kinds we can name."""
    out: dict[tuple[str, str], tuple[str, str]] = {}
    if wanted.get("summary"):
        rows = Summary.objects.filter(tenant_id=tenant_id, summary_id__in=wanted["summary"]).values_list(
            "summary_id", "version", "workflow__external_id"
        )
        for sid, version, wf in rows:
            out[("summary", sid)] = (f"{wf} · S{version}", f"/summaries/{sid}/")
    for wf in wanted.get("workflow", []):
        out[("workflow", wf)] = (wf, f"/workflows/{wf}/")
    if wanted.get("artifact"):
        rows = Artifact.objects.filter(
            workflow__tenant_id=tenant_id, artifact_id__in=wanted["artifact"]
        ).values_list("artifact_id", "workflow__external_id")
        for aid, wf in rows:
            out[("artifact", aid)] = (f"{wf} · {aid}", f"/artifacts/{aid}/")
    if wanted.get("compactionjob"):
        rows = CompactionJob.objects.filter(
            tenant_id=tenant_id, pk__in=_int_ids(wanted["compactionjob"])
        ).values_list("pk", "workflow__external_id")
        for pk, wf in rows:
            out[("compactionjob", str(pk))] = (f"{wf} · job #{pk}", f"/workflows/{wf}/#job-{pk}")
    if wanted.get("consumertrace"):
        rows = ConsumerTrace.objects.filter(
            workflow__tenant_id=tenant_id, pk__in=_int_ids(wanted["consumertrace"])
        ).values_list("pk", "workflow__external_id", "model_call_id")
        for pk, wf, call in rows:
            out[("consumertrace", str(pk))] = (f"{wf} · {call}", f"/workflows/{wf}/#traces")
    if wanted.get("alertrule"):
        rows = AlertRule.objects.filter(tenant_id=tenant_id, pk__in=_int_ids(wanted["alertrule"]))
        for pk, name in rows.values_list("pk", "name"):
            out[("alertrule", str(pk))] = (f"alert rule “{name}”", f"/alerts/rules/{pk}/")
    if wanted.get("channel"):
        rows = Channel.objects.filter(tenant_id=tenant_id, pk__in=_int_ids(wanted["channel"]))
        for pk, name in rows.values_list("pk", "name"):
            out[("channel", str(pk))] = (f"channel “{name}”", f"/alerts/channels/{pk}/")
    if wanted.get("purge"):
        rows = Purge.objects.filter(tenant_id=tenant_id, purge_id__in=wanted["purge"])
        for pid, wf in rows.values_list("purge_id", "workflow__external_id"):
            out[("purge", pid)] = (f"{wf or 'tenant'} · purge {pid}", f"/workflows/{wf}/" if wf else "")
    for oid in wanted.get("context_policy", []):
        out[("context_policy", oid)] = ("tenant default policy", "/triggers/policy/")
    return out


def describe(tenant_id: int, entries: list[AuditEntry]) -> list[Described]:
    wanted: dict[str, list[str]] = defaultdict(list)
    for e in entries:
        wanted[e.object_type].append(e.object_id)
    names = _objects(tenant_id, wanted)
    out = []
    for e in entries:
        data: dict[str, Any] = e.data if isinstance(e.data, dict) else {}
        label, url = names.get((e.object_type, e.object_id), (f"{e.object_type} {e.object_id}", ""))
        reason = data.get("reason") if isinstance(data.get("reason"), str) else ""
        frm, to = data.get("from") or "", data.get("to") or ""
        change = f"{frm} → {to}" if frm and to and frm != to else ""
        outcome = data.get("result") if isinstance(data.get("result"), str) else ""
        out.append(Described(e, label, url, reason, outcome, change))
    return out
