"""One model call, one round trip: append the new events, record compactions and traces, decide.

``POST /api/v1/workflows/<id>/step/`` is what a framework integration calls before each model call
(see memoryhub.integrations.langchain). Everything in one body is written in one transaction or not
at all, and every part is idempotent on a client-chosen id, so a client that lost the answer to a
step (a timeout, a spooled replay) can send the very same body again and get the same result:

Order inside a step: traces (they describe earlier calls), then events, then compactions (which
may cover this step's events).

* ``events``: each must carry ``client_event_id`` (a re-send returns the stored seqs);
* ``compactions``: observed compactions (``memoryhub.memory.observed``), each with its
  ``observation_id``; coverage by ``covers_to_seq`` or by ``covers_to_event`` (a client_event_id,
  so a client that never saw the seqs can still say where the compaction ended); each answer
  carries ``repair``, the verdict on what it lost and the items to hand back
  (``memoryhub.memory.repair``); ``"can_block": true`` says the client can keep its previous
  context, so a ``gate: block`` policy refuses a lossy summary instead;
* ``traces``: consumer traces (``memoryhub.context.traces``), idempotent on ``model_call_id``; the
  tail by ``tail_to_seq`` or ``tail_to_event``, the summary by ``summary_id`` or
  ``summary_observation_id`` (the compaction that made it); ``"attest_read": true`` asks the server
  to attach the context id and manifest of its current read when the trace's tail and summary are
  exactly that read (a client that never waited for an answer still gets provenance);
* ``decide``: trigger inputs; when present the workflow's policy decides after the writes
  (``triggers.services.decide``, logged like ``POST …/trigger/``);
* ``create``: ``{"name"?, "graph_release"?, "source"?, "model"?}`` creates the workflow on first use.

With ``"context": true`` the answer's ``context`` describes the read a model call makes right after the step (the summary
served and the tail up to the head): a signed ``context_id`` and, while the tail is at most
``MANIFEST_MAX_TAIL_EVENTS``, its ``manifest_hash``; a client puts them in that call's trace.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db import transaction

from memoryhub.context.assembly import (
    MANIFEST_MAX_TAIL_EVENTS,
    ReadCoordinates,
    issue_context_id,
    recompute_manifest_hash,
    served_summary,
)
from memoryhub.context.traces import record_trace
from memoryhub.core.errors import InvalidInput, NotFound, PayloadTooLarge
from memoryhub.memory.events import EventIn, append_events, parse_batch
from memoryhub.memory.observed import record_observed_compaction, summary_for_observation
from memoryhub.memory.workflows import create_workflow, get_workflow
from memoryhub.models import Event, Tenant, Workflow, WorkflowSource
from triggers import services

__all__ = ["MAX_STEP_COMPACTIONS", "MAX_STEP_TRACES", "STEP_FIELDS", "run_step"]

STEP_FIELDS = frozenset({"create", "events", "compactions", "traces", "decide", "context"})
CREATE_FIELDS = frozenset({"name", "graph_release", "source", "model"})
COMPACTION_FIELDS = frozenset(
    {
        "covers_to_seq",
        "covers_to_event",
        "compactor",
        "text",
        "opaque",
        "trigger",
        "observation_id",
        "source_refs",
        "activate",
        "can_block",
    }
)
MAX_STEP_TRACES = 100
MAX_STEP_COMPACTIONS = 10


def _bad(message: str, code: str = "invalid_step") -> InvalidInput:
    return InvalidInput(message, code=code)


def _object(value: Any, name: str, allowed: frozenset[str]) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise _bad(f"'{name}' must be a JSON object")
    unknown = sorted(set(value) - allowed) if allowed else []
    if unknown:
        raise _bad(f"{name}: unknown field(s) {unknown}; allowed: {sorted(allowed)}")
    return dict(value)


def _objects(value: Any, name: str, limit: int) -> list[dict[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise _bad(f"'{name}' must be a list")
    if len(value) > limit:
        raise PayloadTooLarge(f"{len(value)} {name} is over the maximum of {limit}", code="step_too_large")
    for i, item in enumerate(value):
        if not isinstance(item, Mapping):
            raise _bad(f"{name}[{i}] must be a JSON object")
    return [dict(item) for item in value]


def _event_id(value: Any, field: str) -> str:
    if not isinstance(value, str) or not 0 < len(value) <= 200:
        raise _bad(f"{field} must be a client_event_id (1-200 characters)")
    return value


def _parse_create(raw: Any) -> dict[str, Any] | None:
    if raw is None:
        return None
    create = _object(raw, "create", CREATE_FIELDS)
    for key, limit in (("name", 200), ("graph_release", 100), ("model", 100), ("source", 40)):
        value = create.get(key)
        if value is not None and (not isinstance(value, str) or len(value) > limit):
            raise _bad(f"create.{key} must be a string of at most {limit} characters")
    if create.get("source") is not None and create["source"] not in WorkflowSource.values:
        raise _bad(f"create.source must be one of {sorted(WorkflowSource.values)}")
    return {k: v for k, v in create.items() if v is not None}


def _parse(payload: Any) -> dict[str, Any]:
    """Everything checked that can be checked before writing (the services check the rest)."""
    body = _object(payload, "body", STEP_FIELDS)
    raw_events = body.get("events")
    events: list[EventIn] = []
    if raw_events not in (None, []):
        events, _ = parse_batch({"events": raw_events})
        for i, event in enumerate(events):
            if not event.client_event_id:
                raise _bad(
                    f"events[{i}]: client_event_id is required on the step endpoint (it makes a retried "
                    "step safe)",
                    code="client_event_id_required",
                )
    compactions = _objects(body.get("compactions"), "compactions", MAX_STEP_COMPACTIONS)
    for i, compaction in enumerate(compactions):
        _object(compaction, f"compactions[{i}]", COMPACTION_FIELDS)
        if ("covers_to_seq" in compaction) == ("covers_to_event" in compaction):
            raise _bad(f"compactions[{i}]: give exactly one of covers_to_seq or covers_to_event")
        if "covers_to_event" in compaction:
            _event_id(compaction["covers_to_event"], f"compactions[{i}].covers_to_event")
        if not isinstance(compaction.get("observation_id"), str):
            raise _bad(f"compactions[{i}].observation_id is required (it makes a retried step safe)")
        if "compactor" not in compaction:
            raise _bad(f"compactions[{i}].compactor is required")
        if not isinstance(compaction.get("activate", True), bool):
            raise _bad(f"compactions[{i}].activate must be a boolean")
        if not isinstance(compaction.get("can_block", False), bool):
            raise _bad(f"compactions[{i}].can_block must be a boolean")
    traces = _objects(body.get("traces"), "traces", MAX_STEP_TRACES)
    for i, trace in enumerate(traces):
        if ("tail_to_seq" in trace) == ("tail_to_event" in trace):
            raise _bad(f"traces[{i}]: give exactly one of tail_to_seq or tail_to_event")
        if "tail_to_event" in trace:
            _event_id(trace["tail_to_event"], f"traces[{i}].tail_to_event")
        if "summary_id" in trace and "summary_observation_id" in trace:
            raise _bad(f"traces[{i}]: give at most one of summary_id or summary_observation_id")
        if not isinstance(trace.get("attest_read", False), bool):
            raise _bad(f"traces[{i}].attest_read must be true or false")
        obs = trace.get("summary_observation_id")
        if "summary_observation_id" in trace and (not isinstance(obs, str) or not obs):
            raise _bad(f"traces[{i}].summary_observation_id must be a string")
    if not isinstance(body.get("context", False), bool):
        raise _bad("'context' must be true or false")
    decide = body.get("decide")
    if decide is not None:
        decide = _object(decide, "decide", frozenset())
    return {
        "create": _parse_create(body.get("create")),
        "events": events,
        "compactions": compactions,
        "traces": traces,
        "decide": decide,
        "context": body.get("context", False),
    }


class _Seqs:
    """client_event_id → seq: from this step's append first, else one lookup."""

    def __init__(self, workflow: Workflow, appended: list[dict[str, Any]]) -> None:
        self.workflow = workflow
        self.known: dict[str, int] = {}
        self.learn(appended)

    def learn(self, appended: list[dict[str, Any]]) -> None:
        self.known.update((e["client_event_id"], e["seq"]) for e in appended if e.get("client_event_id"))

    def __call__(self, client_event_id: str, field: str) -> int:
        if client_event_id not in self.known:
            seq = (
                Event.objects.filter(workflow=self.workflow, client_event_id=client_event_id)
                .values_list("seq", flat=True)
                .first()
            )
            if seq is None:
                raise _bad(
                    f"{field}: no event of this workflow has client_event_id {client_event_id!r}",
                    "unknown_event",
                )
            self.known[client_event_id] = seq
        return self.known[client_event_id]


def _record_trace(
    workflow: Workflow, raw: dict[str, Any], i: int, seq_of: _Seqs, actor: Any
) -> dict[str, Any]:
    data = dict(raw)
    if "tail_to_event" in data:
        data["tail_to_seq"] = seq_of(data.pop("tail_to_event"), f"traces[{i}].tail_to_event")
    if "summary_observation_id" in data:
        obs = data.pop("summary_observation_id")
        summary_id = summary_for_observation(workflow, obs)
        if summary_id is None:
            raise _bad(
                f"traces[{i}].summary_observation_id: no compaction {obs!r} in this workflow",
                "unknown_summary",
            )
        data["summary_id"] = summary_id
    # attest_read stays in the trace: record_trace attests the read at the head now, which is the
    # head that call saw (traces are recorded before the step's own events).
    trace, created = record_trace(workflow, data, actor)
    return {
        "model_call_id": trace.model_call_id,
        "trace_id": trace.pk,
        "created": created,
        "flags": list(trace.flags or []),
    }


def _context_after(workflow: Workflow) -> dict[str, Any]:
    """The read a model call makes right after this step (summary served + tail to the head), as a
    signed context id; with its manifest hash while the tail is short enough to hash cheaply."""
    summary = served_summary(workflow)
    coords = ReadCoordinates.served(workflow, summary, workflow.head_seq)
    short = workflow.head_seq - coords.watermark <= MANIFEST_MAX_TAIL_EVENTS
    return {
        "context_id": issue_context_id(coords),
        "manifest_hash": recompute_manifest_hash(workflow, coords) if short else None,
        "summary_id": summary.summary_id if summary else None,
        "head_seq": workflow.head_seq,
    }


def run_step(tenant: Tenant, external_id: str, payload: Any, actor: Any) -> dict[str, Any]:
    """Apply one step (see the module doc); bad input raises before anything is written."""
    step = _parse(payload)
    created = False
    try:  # the common case, an existing workflow: one lookup, the create is not even tried
        workflow = get_workflow(tenant, external_id)
    except NotFound:
        if step["create"] is None:
            raise
        source = step["create"].pop("source", WorkflowSource.API)
        workflow, created = create_workflow(tenant, external_id, source=source, actor=actor, **step["create"])
    appended: list[dict[str, Any]] = []
    compactions: list[dict[str, Any]] = []
    traces: list[dict[str, Any]] = []
    with transaction.atomic():
        # Traces first: each names what an earlier model call read (events and summaries sent by
        # earlier steps), so the head they are checked against is the head that call saw.
        seq_of = _Seqs(workflow, [])
        for i, raw in enumerate(step["traces"]):
            traces.append(_record_trace(workflow, raw, i, seq_of, actor))
        head_after, total_after = workflow.head_seq, workflow.total_tokens
        if step["events"]:
            result = append_events(workflow, step["events"])
            appended, head_after, total_after = result.events, result.head_seq, result.total_tokens
            seq_of.learn(appended)
        for i, raw in enumerate(step["compactions"]):
            covers = raw.get("covers_to_seq")
            if "covers_to_event" in raw:
                covers = seq_of(raw["covers_to_event"], f"compactions[{i}].covers_to_event")
            observed = record_observed_compaction(
                workflow,
                covers_to_seq=covers,
                text=raw.get("text"),
                opaque=raw.get("opaque"),
                compactor=raw["compactor"],
                trigger=raw.get("trigger"),
                observation_id=raw["observation_id"],
                source_refs=raw.get("source_refs"),
                activate=raw.get("activate", True),
                can_block=raw.get("can_block", False),
                actor=actor,
            )
            compactions.append(observed.to_dict())
    decision = None
    if step["decide"] is not None:
        deciding = services.workflow_for_decision(tenant, workflow.external_id)
        decision = services.decision_payload(services.decide(deciding, step["decide"], actor))
    if step["context"] or step["compactions"] or not step["events"]:
        workflow = Workflow.objects.select_related("active_summary").get(pk=workflow.pk)
        head, total = workflow.head_seq, workflow.total_tokens
    else:
        head, total = head_after, total_after
    return {
        "context": _context_after(workflow) if step["context"] else None,
        "workflow": workflow.external_id,
        "created": created,
        "head_seq": head,
        "total_tokens": total,
        "events": appended,
        "compactions": compactions,
        "traces": traces,
        "decision": decision,
    }
