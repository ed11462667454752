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
        summaries = Summary.objects.filter(tenant_id=tenant_id, summary_id__in=wanted["summary"])
        for sid, version, wf in summaries.values_list("summary_id", "version", "workflow__external_id"):
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
        jobs = CompactionJob.objects.filter(tenant_id=tenant_id, pk__in=_int_ids(wanted["compactionjob"]))
        for pk, wf in jobs.values_list("pk", "workflow__external_id"):
            out[("compactionjob", str(pk))] = (f"{wf} · job #{pk}", f"/workflows/{wf}/#job-{pk}")
    if wanted.get("consumertrace"):
        traces = ConsumerTrace.objects.filter(
            workflow__tenant_id=tenant_id, pk__in=_int_ids(wanted["consumertrace"])
        )
        for pk, wf, call in traces.values_list("pk", "workflow__external_id", "model_call_id"):
            out[("consumertrace", str(pk))] = (f"{wf} · {call}", f"/workflows/{wf}/#traces")
    if wanted.get("alertrule"):
        rules = AlertRule.objects.filter(tenant_id=tenant_id, pk__in=_int_ids(wanted["alertrule"]))
        for pk, name in rules.values_list("pk", "name"):
            out[("alertrule", str(pk))] = (f"alert rule “{name}”", f"/alerts/rules/{pk}/")
    if wanted.get("channel"):
        channels = Channel.objects.filter(tenant_id=tenant_id, pk__in=_int_ids(wanted["channel"]))
        for pk, name in channels.values_list("pk", "name"):
            out[("channel", str(pk))] = (f"channel “{name}”", f"/alerts/channels/{pk}/")
    if wanted.get("purge"):
        purges = Purge.objects.filter(tenant_id=tenant_id, purge_id__in=wanted["purge"])
        for pid, wf in purges.values_list("purge_id", "workflow__external_id"):
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
        reason = str(data.get("reason") or "")
        frm, to = data.get("from") or "", data.get("to") or ""
        change = f"{frm} → {to}" if frm and to and frm != to else ""
        outcome = str(data.get("result") or "")
        out.append(Described(e, label, url, reason, outcome, change))
    return out
