"""A secret planted through every ingest path, purged, is found nowhere (issue #30, item 1).

Every way text gets in — each write route of the API and OTLP endpoint, and each client helper
module — is either a planter here (``ROUTE_PLANTERS``, ``HELPER_PLANTERS``) or declared not to take
event text, with the reason; the walker tests fail on a route or helper module in neither, so a new
ingest path must join the probe. The probe sends everything through the real HTTP stack (the SDK
client over an in-process WSGI transport), purges the secret's events, then looks for the secret in
every column of every table (raw SQL), every GET route (pages, API, context, exports), the admin
site's pages, every log record and every file a helper keeps on the client (the resilient hub's
spools, the Claude Code hook's directory): zero hits.
"""

from __future__ import annotations

import base64
import json
import logging
import pkgutil
import re
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client, override_settings
from django.urls import URLPattern, URLResolver, get_resolver

import memoryhub.client
import memoryhub.integrations
from memoryhub.client import MemoryHubClient
from memoryhub.client.resilience import ResilientHub
from memoryhub.models import Artifact, ConsumerTrace, Event, OtelSpan, Summary, SummaryStatus, Workflow
from tests.hardening.wsgi import InTransactionWSGI

pytestmark = pytest.mark.django_db


class OutageTransport(httpx.WSGITransport):
    """The in-process transport, refusing every connection while ``down`` (MemoryHub unreachable).

    Still a ``WSGITransport``: a ResilientHub over it calls and drains inline, on the test's
    database connection (its worker threads would open connections outside the test's transaction).
    """

    down = False

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if self.down:
            raise httpx.ConnectError("probe: MemoryHub is unreachable", request=request)
        return super().handle_request(request)


@dataclass
class Probe:
    client: MemoryHubClient
    api: Any  # the admin's DRF test client (same key), for routes the SDK has no method for
    token: str
    tmp: Path
    transport: OutageTransport
    workflows: set[str] = field(default_factory=set)
    after_purge: list[Callable[[], None]] = field(default_factory=list)
    # Directories a helper writes on the client's side (spools, hook state): grepped after the purge.
    client_dirs: list[Path] = field(default_factory=list)
    now: float = 0.0  # the hubs' clock: the probe moves it past a breaker's cooldown

    def hub(self, component: str) -> ResilientHub:
        """A ResilientHub over the probe's client, spooling under the probe's tmp dir."""
        spool = self.tmp / "spool" / component
        self.client_dirs.append(spool)
        return ResilientHub(
            client=self.client, component=component, spool_dir=spool, deadline=30, clock=lambda: self.now
        )

    @property
    def sentence(self) -> str:
        """Long enough to be a purge quote; the token is what the grep looks for."""
        return f"The customer's private card number is {self.token}, keep it out of every report."

    def events(self, wf: str, n: int = 2) -> None:
        self.client.create_workflow(wf)
        self.workflows.add(wf)
        self.client.append_events(
            wf,
            [
                {"kind": "message", "role": "user", "agent": "probe", "content": self.sentence},
                *[
                    {"kind": "message", "role": "assistant", "agent": "probe", "content": f"step {i}"}
                    for i in range(n - 1)
                ],
            ],
        )


# -- planters: one per ingest route ---------------------------------------------------------------

MAIN = "probe-api"


def plant_events(p: Probe) -> None:
    p.events(MAIN, n=3)


def plant_observed(p: Probe) -> None:
    p.client.record_observed_compaction(
        MAIN, 3, {"name": "probe-compactor"}, text=f"Summary so far: {p.sentence}"
    )


def plant_submitted_summary(p: Probe) -> None:
    p.api.post(
        f"/api/v1/workflows/{MAIN}/summaries/",
        {
            "covers_from_seq": 1,
            "covers_to_seq": 2,
            "content": {"narrative": f"Candidate: {p.sentence}", "facts": []},
            "compactor": {"name": "external", "version": "1"},
        },
        format="json",
    )


def _main_summary(p: Probe) -> str:
    return Summary.objects.filter(workflow__external_id=MAIN).order_by("version").first().summary_id


def plant_trace(p: Probe) -> None:
    p.client.record_trace(
        MAIN,
        agent="probe",
        agent_run_id="run-1",
        model_call_id="call-1",
        summary_id=None,
        tail_to_seq=3,
        fallback_reason=f"fell back because {p.sentence}",
        input_messages=[{"role": "user", "content": f"Events so far: {p.sentence}"}],
        output=f"Noted: {p.sentence}",
    )


def plant_artifact_and_investigation(p: Probe) -> None:
    p.client.record_artifact(
        MAIN, artifact_id="PROBE-1", kind="reply", produced_by={"model_call_id": "call-1"}
    )
    p.client.investigate("PROBE-1", p.token)


def plant_comment(p: Probe) -> None:
    r = p.api.post(
        f"/api/v1/summaries/{_main_summary(p)}/comments/", {"text": f"Quoting: {p.sentence}"}, format="json"
    )
    assert r.status_code == 201, r.content


def plant_review_reason(p: Probe) -> None:
    summary = _main_summary(p)
    if Summary.objects.get(summary_id=summary).status != SummaryStatus.QUARANTINED:
        p.client.quarantine(summary, reason=f"leaks {p.token} in the narrative")


def _otlp_spans(p: Probe, conversation: str) -> list[dict[str, Any]]:
    """OTLP/JSON spans of one conversation: a compaction span that starts first (so it waits,
    deferred, for its events), a chat span quoting the secret that starts after it, and a harmless
    chat span that starts before it (its arrival lets the compaction be built)."""

    def attr(key: str, value: Any) -> dict[str, Any]:
        kind = (
            "boolValue"
            if isinstance(value, bool)
            else "intValue"
            if isinstance(value, int)
            else "stringValue"
        )
        return {"key": key, "value": {kind: str(value) if kind == "intValue" else value}}

    def span(i: int, name: str, start: int, attrs: dict[str, Any]) -> dict[str, Any]:
        return {
            "traceId": uuid.uuid5(uuid.NAMESPACE_URL, conversation).hex,
            "spanId": f"{i:016x}",
            "name": name,
            "startTimeUnixNano": str(start),
            "endTimeUnixNano": str(start + 10),
            "attributes": [attr("gen_ai.conversation.id", conversation)]
            + [attr(k, v) for k, v in attrs.items()],
        }

    t0 = 1_700_000_000_000_000_000
    messages = json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": p.sentence}]}])
    harmless = json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "Hello again."}]}])
    return [
        span(
            1,
            "compact",
            t0 + 500,
            {
                "gen_ai.operation.name": "compact",
                "gen_ai.conversation.compacted": True,
                "gen_ai.provider.name": "openai",
                "gen_ai.compaction.summary": f"Compacted: {p.sentence}",
            },
        ),
        span(
            2,
            "chat gpt-4.1",
            t0 + 1000,
            {"gen_ai.operation.name": "chat", "gen_ai.output.messages": messages},
        ),
        span(
            3, "chat gpt-4.1", t0 + 100, {"gen_ai.operation.name": "chat", "gen_ai.output.messages": harmless}
        ),
    ]


def _otlp_post(p: Probe, spans: list[dict[str, Any]], *, protobuf: bool) -> None:
    body = {"resourceSpans": [{"resource": {}, "scopeSpans": [{"spans": spans}]}]}
    if protobuf:
        from google.protobuf.json_format import ParseDict
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        for s in spans:  # protobuf JSON mapping carries ids as base64
            for key in ("traceId", "spanId"):
                s[key] = base64.b64encode(bytes.fromhex(s[key])).decode()
        data, content_type = (
            ParseDict(body, ExportTraceServiceRequest()).SerializeToString(),
            "application/x-protobuf",
        )
    else:
        data, content_type = json.dumps(body).encode(), "application/json"
    r = p.api.post("/v1/traces", data=data, content_type=content_type)
    assert r.status_code == 200, r.content


def plant_otlp(p: Probe, *, protobuf: bool) -> None:
    """The compaction span arrives alone and waits (deferred); then the span quoting the secret
    arrives (it starts after the compaction, so the compaction still waits). After the purge an
    earlier span arrives, which would build the deferred compaction (see ``after_purge``)."""
    conversation = f"probe-otlp-{'pb' if protobuf else 'json'}"
    p.workflows.add(conversation)
    first, secret, early = _otlp_spans(p, conversation)
    _otlp_post(p, [first], protobuf=protobuf)
    _otlp_post(p, [secret], protobuf=protobuf)
    assert OtelSpan.objects.get(workflow__external_id=conversation, name="compact").mapped_to == "deferred"
    p.after_purge.append(lambda: _otlp_post(p, [early], protobuf=protobuf))


def plant_step(p: Probe) -> None:
    """Two steps, as an integration sends them: the events with a compaction that covers the secret,
    then the call's trace (naming that compaction) with the reply."""
    wf = "probe-step"
    p.workflows.add(wf)

    def event(n: int, role: str, content: str) -> dict[str, Any]:
        return {
            "kind": "message",
            "role": role,
            "agent": "probe",
            "content": content,
            "client_event_id": f"step-{n}",
        }

    first = p.client.step(
        wf,
        MemoryHubClient.step_body(
            create={"name": "probe step"},
            events=[event(1, "user", p.sentence), event(2, "assistant", "Noted.")],
            compactions=[
                {
                    "covers_to_event": "step-2",
                    "compactor": {"name": "probe-step-compactor"},
                    "text": f"Step summary: {p.sentence}",
                    "observation_id": "probe-step-compaction",
                }
            ],
            decide={"expected_next_step_tokens": 100},
        ),
    )
    assert first["created"] and first["compactions"][0]["summary_id"], first
    second = p.client.step(
        wf,
        MemoryHubClient.step_body(
            traces=[
                {
                    "agent": "probe",
                    "agent_run_id": "run-step",
                    "model_call_id": "step-call-1",
                    "tail_to_event": "step-2",
                    "summary_observation_id": "probe-step-compaction",
                    "fallback_reason": f"fell back because {p.sentence}",
                }
            ],
            events=[event(3, "assistant", f"Reply: {p.sentence}")],
            context=True,
        ),
    )
    assert second["traces"][0]["created"] and len(second["events"]) == 1, second


def plant_timeline(p: Probe) -> None:
    """A replayed transcript: an event, the model call that read it, the reply."""
    wf = "probe-timeline"
    p.client.create_workflow(wf)
    p.workflows.add(wf)
    items = [
        {
            "event": {
                "kind": "message",
                "role": "user",
                "agent": "probe",
                "content": p.sentence,
                "client_event_id": "tl-1",
            }
        },
        {
            "trace": {
                "agent": "probe",
                "agent_run_id": "run-timeline",
                "model_call_id": "timeline-call-1",
                "summary_id": None,
                "fallback_reason": f"fell back because {p.sentence}",
            }
        },
        {
            "event": {
                "kind": "message",
                "role": "assistant",
                "agent": "probe",
                "content": f"Reply: {p.sentence}",
                "client_event_id": "tl-2",
            }
        },
    ]
    answer = p.client.request("POST", f"/api/v1/workflows/{wf}/timeline/", json={"items": items}).json()
    assert [t["tail_to_seq"] for t in answer["traces"]] == [1] and answer["head_seq"] == 2, answer


ROUTE_PLANTERS: dict[str, Callable[[Probe], None]] = {
    "api/v1/workflows/<str:wf>/events/": plant_events,
    "api/v1/workflows/<str:wf>/observed-compactions/": plant_observed,
    "api/v1/workflows/<str:wf>/summaries/": plant_submitted_summary,
    "api/v1/workflows/<str:wf>/traces/": plant_trace,
    "api/v1/workflows/<str:wf>/artifacts/": plant_artifact_and_investigation,
    "api/v1/artifacts/<str:artifact_id>/investigate/": plant_artifact_and_investigation,
    "api/v1/summaries/<str:summary_id>/comments/": plant_comment,
    "api/v1/summaries/<str:summary_id>/quarantine/": plant_review_reason,
    "v1/traces": lambda p: (plant_otlp(p, protobuf=False), plant_otlp(p, protobuf=True)),
    "api/v1/workflows/<str:wf>/step/": plant_step,
    "api/v1/workflows/<str:wf>/timeline/": plant_timeline,
}

_REASON = "a reviewer's reason, stored in the purgeable payload exactly as quarantine's (planted)"
_CONFIG = "configuration (policies, rules, channels, retention, keys, members): no event text"
NOT_INGEST: dict[str, str] = {
    "api/v1/workflows/": "creates a workflow: an id and a name",
    "api/v1/workflows/<str:wf>/compactions/": "requests a job: ids and a revision; the job reads events itself",
    "api/v1/workflows/<str:wf>/repair/": "judges a framework summary before it is recorded and answers the "
    "hand-back; writes nothing (tests/memoryhub/test_repair.py counts events, summaries and jobs before and after)",
    "api/v1/summaries/<str:summary_id>/validate/": "runs the validator: no input text",
    "api/v1/summaries/<str:summary_id>/activate/": "a CAS on revisions",
    "api/v1/summaries/<str:summary_id>/rollback/": _REASON,
    "api/v1/summaries/<str:summary_id>/approve/": _REASON,
    "api/v1/summaries/<str:summary_id>/reject/": _REASON,
    "api/v1/summaries/<str:summary_id>/release/": _REASON,
    "api/v1/summaries/<str:summary_id>/waive/": _REASON,
    "api/v1/alert-rules/": _CONFIG,
    "api/v1/alert-rules/<int:pk>/": _CONFIG,
    "api/v1/alert-rules/<int:pk>/test/": "sends a test notification of the rule's metric",
    "api/v1/alert-rules/<int:pk>/mute/": _CONFIG,
    "api/v1/channels/": _CONFIG,
    "api/v1/channels/<int:pk>/": _CONFIG,
    "api/v1/channels/<int:pk>/test/": "sends a fixed test message",
    "api/v1/channels/<int:pk>/enable/": _CONFIG,
    "api/v1/workflows/<str:wf>/policy/": _CONFIG,
    "api/v1/workflows/<str:wf>/trigger/": "token counts in, a decision of numbers out",
    "api/v1/workflows/<str:wf>/simulate/": "token counts in, nothing stored",
    "api/v1/triggers/policy/": _CONFIG,
    "api/v1/triggers/evaluate/": "token counts in, nothing stored",
    "api/v1/triggers/simulate/": "token counts in, nothing stored",
    "api/v1/retention/": _CONFIG,
    "api/v1/workflows/<str:wf>/purge/": "the purge itself (its selector keeps a subject as a digest)",
    "api/v1/api-keys/": _CONFIG,
    "api/v1/api-keys/<str:prefix>/revoke/": _CONFIG,
    "api/v1/api-keys/<str:prefix>/rotate/": _CONFIG,
    "api/v1/members/": _CONFIG,
    "api/v1/members/<str:username>/": _CONFIG,
    "accounts/login/": "credentials, never stored in clear",
    "accounts/logout/": "no body",
    "favicon.ico": "a redirect",
}


# -- planters: one per client helper module -------------------------------------------------------


def plant_langchain(p: Probe) -> None:
    """The middleware's real hook: four messages pass its trigger, so ``before_model`` summarizes
    them (the scripted summarizer quotes the secret) and queues one step (events + the compaction)
    on its hub's spool, which the hub delivers."""
    from langchain_core.messages import AIMessage, HumanMessage

    from memoryhub.examples.langchain_example import ScriptedAgentModel
    from memoryhub.integrations.langchain import SUMMARY_KEY, MemoryHubSummarizationMiddleware

    wf = "probe-langchain"
    p.workflows.add(wf)
    summarizer = ScriptedAgentModel(messages=iter([AIMessage(f"LangChain summary: {p.sentence}")]))
    hub = p.hub("langchain")
    middleware = MemoryHubSummarizationMiddleware(
        summarizer, trigger=("messages", 4), keep=("messages", 2), hub=hub, workflow_id=wf
    )
    messages = [
        HumanMessage(p.sentence, id="m1"),
        AIMessage("Noted.", id="m2"),
        HumanMessage("next", id="m3"),
        AIMessage("Done.", id="m4"),
    ]
    update = middleware.before_model({"messages": messages}, None)
    assert update is not None, "the middleware did not summarize"
    note = update["messages"][1]
    assert p.token in note.content and note.additional_kwargs[SUMMARY_KEY]["observation_id"]
    assert middleware.flush(timeout=10)
    hub.close()
    summary = Summary.objects.get(workflow__external_id=wf)
    assert p.token in summary.content and summary.compactor_name == "langchain-summarization"


def _without_loop(coroutine: Any) -> Any:
    """Run a session coroutine to its end with no event loop: over the in-process transport the
    hub calls inline and nothing awaits (the session's lock is free), so it completes on its first
    step. Inside a running loop, Django refuses the ORM calls the in-process server makes."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value
    coroutine.close()
    raise AssertionError("the session waited on something: it needs an event loop")


def plant_openai_agents(p: Probe) -> None:
    """What the SDK calls: ``add_items`` for the turn, then ``_atomic_replace_items`` with what
    ``responses.compact`` returned (``OpenAIResponsesCompactionSession``'s compaction)."""
    from memoryhub.integrations.openai_agents import MemoryHubSession

    wf = "probe-openai"
    p.workflows.add(wf)
    hub = p.hub("openai-agents")
    session = MemoryHubSession(wf, hub=hub)
    _without_loop(
        session.add_items([{"role": "user", "content": p.sentence}, {"role": "user", "content": "ok"}])
    )
    compacted = [
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": f"Compacted: {p.sentence}"}],
        }
    ]
    assert _without_loop(session._atomic_replace_items(compacted)) is True
    assert [s["observation_id"] for s in session.summaries], "the compaction was not recorded"
    assert _without_loop(session.get_items()) == compacted
    hub.close()


def _anthropic_call(p: Probe, n: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """A Messages API request's messages and its response with a compaction block (``compact_20260112``)."""
    messages = [
        {"role": "user", "content": p.sentence},
        {"role": "assistant", "content": [{"type": "text", "text": "Noted."}]},
        {"role": "user", "content": [{"type": "text", "text": f"Anything else ({n})?"}]},
    ]
    response = {
        "id": f"msg_probe_{n}",
        "type": "message",
        "role": "assistant",
        "model": "claude-opus-4-6",
        "content": [
            {"type": "compaction", "content": f"Compaction: {p.sentence}"},
            {"type": "text", "text": f"Reply: {p.sentence}"},
        ],
        "stop_reason": "end_turn",
        "usage": {
            "input_tokens": 100,
            "output_tokens": 10,
            "iterations": [{"type": "compaction", "input_tokens": 900, "output_tokens": 50}],
        },
    }
    return messages, response


_COMPACT = {"edits": [{"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 800}}]}


def plant_anthropic(p: Probe) -> None:
    from memoryhub.client.anthropic import record_anthropic_response

    wf = "probe-anthropic"
    p.workflows.add(wf)
    messages, response = _anthropic_call(p, 1)
    result = record_anthropic_response(p.client, wf, response, messages=messages, context_management=_COMPACT)
    assert result["compactions"] and result["trace_id"], result


def plant_anthropic_hub(p: Probe) -> None:
    """Through a ResilientHub while MemoryHub is unreachable: both steps wait in the hub's spool
    (the secret with them), then the hub answers again and the spool is delivered and emptied."""
    from memoryhub.integrations.anthropic import record_anthropic_response

    wf = "probe-anthropic-hub"
    p.workflows.add(wf)
    hub = p.hub("anthropic")
    messages, response = _anthropic_call(p, 2)
    p.transport.down = True
    try:
        result = record_anthropic_response(hub, wf, response, messages=messages, context_management=_COMPACT)
    finally:
        p.transport.down = False
    assert result["spooled"] and hub.status()["spooled"] == 2, (result, hub.status())
    assert p.token in hub.spool.pending_path.read_text()
    p.now += 3600  # past the breaker's cooldown
    assert hub.flush(timeout=10)
    status = hub.status()
    assert (status["spooled"], status["rejected"], status["dropped"]) == (0, 0, 0), status
    hub.close()
    assert Summary.objects.filter(workflow__external_id=wf).exists()


def plant_claude_code(p: Probe) -> None:
    from memoryhub.integrations.claude_code import sync_session

    session = str(uuid.uuid4())
    p.workflows.add(session)

    def entry(n: int, body: dict[str, Any]) -> dict[str, Any]:
        return {
            "uuid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"{session}/{n}")),
            "parentUuid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"{session}/{n - 1}")) if n > 1 else None,
            "sessionId": session,
            "timestamp": f"2026-11-28T09:00:{n:02d}Z",
            **body,
        }

    lines = [
        entry(1, {"type": "user", "message": {"role": "user", "content": p.sentence}}),
        entry(
            2,
            {
                "type": "assistant",
                "message": {
                    "id": "msg_1",
                    "role": "assistant",
                    "model": "claude-sonnet-4-5",
                    "content": [{"type": "text", "text": "Noted."}],
                    "usage": {"input_tokens": 10, "output_tokens": 2},
                },
            },
        ),
        entry(
            3,
            {
                "type": "system",
                "subtype": "compact_boundary",
                "content": "Conversation compacted",
                "compactMetadata": {"trigger": "auto", "preTokens": 1000},
            },
        ),
        entry(
            4,
            {
                "type": "user",
                "isCompactSummary": True,
                "message": {"role": "user", "content": f"Continued. Summary: {p.sentence}"},
            },
        ),
    ]
    path = p.tmp / f"{session}.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    sync_session(p.client, session, path, p.tmp / "hook")


HELPER_PLANTERS: dict[str, Callable[[Probe], None]] = {
    "memoryhub.integrations.langchain": plant_langchain,
    "memoryhub.integrations.openai_agents": plant_openai_agents,
    "memoryhub.client.anthropic": plant_anthropic,
    "memoryhub.integrations.anthropic": plant_anthropic_hub,
    "memoryhub.integrations.claude_code": plant_claude_code,
}
NOT_A_HELPER: dict[str, str] = {
    "memoryhub.client.client": "the HTTP client every planter here sends through",
    "memoryhub.client.errors": "exception classes",
    "memoryhub.client.types": "response types",
    "memoryhub.client.resilience": "the deadline, breaker and spool every hub-based helper sends through "
    "(planted there: langchain, openai_agents and integrations.anthropic, the last while MemoryHub is "
    "down, so its records wait in the spool); each hub spools under the probe's tmp dir, grepped too",
    "memoryhub.integrations.recorder": "the compaction recorder langchain and openai_agents call (planted there)",
    "memoryhub.integrations.langgraph": "prepare_context appends through the client's append_events "
    "and records traces through record_trace: the routes planted above",
}


# -- walkers: a new route or helper must join the probe ---------------------------------------------


def write_routes() -> Iterator[str]:
    """Every routed class-based view with a POST, PUT or PATCH handler (admin site aside)."""

    def walk(resolver: URLResolver, prefix: str) -> Iterator[str]:
        for item in resolver.url_patterns:
            if isinstance(item, URLResolver):
                yield from walk(item, prefix + str(item.pattern))
            elif isinstance(item, URLPattern):
                view = getattr(item.callback, "view_class", None) or getattr(item.callback, "cls", None)
                if view is not None and any(hasattr(view, m) for m in ("post", "put", "patch")):
                    yield prefix + str(item.pattern)

    yield from (route for route in walk(get_resolver(), "") if not route.startswith("admin/"))


def test_every_write_route_is_planted_or_declared_free_of_event_text():
    routes = set(write_routes())
    assert len(routes) > 30  # the walker sees the API
    unknown = routes - set(ROUTE_PLANTERS) - set(NOT_INGEST)
    assert not unknown, (
        f"new write routes: add a planter to ROUTE_PLANTERS or a reason to NOT_INGEST: {unknown}"
    )
    assert not (set(ROUTE_PLANTERS) | set(NOT_INGEST)) - routes, "stale entries"
    assert all(reason.strip() for reason in NOT_INGEST.values())


def test_every_client_helper_module_is_planted_or_declared():
    modules = {
        info.name
        for package in (memoryhub.integrations, memoryhub.client)
        for info in pkgutil.iter_modules(package.__path__, package.__name__ + ".")
    }
    unknown = modules - set(HELPER_PLANTERS) - set(NOT_A_HELPER)
    assert not unknown, f"new helper modules: add a planter or a reason: {unknown}"
    assert not (set(HELPER_PLANTERS) | set(NOT_A_HELPER)) - modules, "stale entries"


# -- the probe ------------------------------------------------------------------------------------


def table_hits(token: str) -> list[str]:
    """(table.column) of every stored value containing ``token``: every column of every table."""
    hits = []
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names(cursor):
            cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)}")
            columns = [c[0] for c in cursor.description]
            for row in cursor.fetchall():
                for column, value in zip(columns, row, strict=True):
                    if isinstance(value, memoryview | bytes):
                        value = bytes(value).decode("latin-1")
                    if token in str(value):
                        hits.append(f"{table}.{column}")
    return sorted(set(hits))


def file_hits(token: str, directories: list[Path]) -> list[str]:
    """Every file under ``directories`` whose bytes contain ``token``."""
    return sorted(
        str(path)
        for directory in directories
        for path in directory.rglob("*")
        if path.is_file() and token.encode() in path.read_bytes()
    )


def get_urls(probe: Probe) -> Iterator[str]:
    """Every GET route (pages and API) with its parameters filled from what the probe made."""
    workflows = Workflow.objects.filter(external_id__in=probe.workflows)
    values: dict[str, list[str]] = {
        "wf": [w.external_id for w in workflows],
        "summary_id": list(
            Summary.objects.filter(workflow__in=workflows).values_list("summary_id", flat=True)
        ),
        "trace_id": [
            str(pk)
            for pk in ConsumerTrace.objects.filter(workflow__in=workflows).values_list("pk", flat=True)
        ],
        "artifact_id": list(
            Artifact.objects.filter(workflow__in=workflows).values_list("artifact_id", flat=True)
        ),
    }
    pattern = re.compile(r"<(?:\w+:)?(\w+)>")

    def walk(resolver: URLResolver, prefix: str) -> Iterator[str]:
        for item in resolver.url_patterns:
            if isinstance(item, URLResolver):
                yield from walk(item, prefix + str(item.pattern))
            else:
                yield prefix + str(item.pattern)

    for route in walk(get_resolver(), ""):
        if route.startswith("admin/") or "^" in route or "(?P" in route:
            continue
        names = pattern.findall(route)
        if not names:
            yield "/" + route
            continue
        if names == ["wf", "from_seq", "to_seq"]:
            for wf in values["wf"]:
                yield "/" + route.replace("<str:wf>", wf).replace("<int:from_seq>", "1").replace(
                    "<int:to_seq>", "50"
                )
            continue
        if len(names) != 1 or names[0] not in values:
            continue
        for value in values[names[0]]:
            yield "/" + pattern.sub(value, route)


def admin_urls() -> Iterator[str]:
    from django.contrib import admin

    for model in admin.site._registry:
        meta = model._meta
        yield f"/admin/{meta.app_label}/{meta.model_name}/"
        for pk in model._default_manager.order_by("-pk").values_list("pk", flat=True)[:50]:
            yield f"/admin/{meta.app_label}/{meta.model_name}/{pk}/change/"


@pytest.fixture
def probe(alice, tmp_path, monkeypatch, settings) -> Probe:
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": dict.fromkeys(
            settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], "10000/min"
        ),
    }
    monkeypatch.setenv("MEMORYHUB_HOOK_DIR", str(tmp_path / "hook"))
    transport = OutageTransport(app=InTransactionWSGI())
    client = MemoryHubClient(
        "http://testserver",
        api_key=alice.key.secret,
        transport=transport,
        max_retries=0,
        sleep=lambda _: None,
    )
    return Probe(
        client=client,
        api=alice.api,
        token=f"ZQ{uuid.uuid4().hex[:14]}QZ",
        tmp=tmp_path,
        transport=transport,
        client_dirs=[tmp_path / "hook"],
    )


def test_a_secret_planted_through_every_ingest_path_is_gone_after_its_purge(probe, alice, caplog):
    caplog.set_level(logging.DEBUG)
    planted: set[str] = set()
    for planter in [*ROUTE_PLANTERS.values(), *HELPER_PLANTERS.values()]:
        if planter not in planted:
            planter(probe)
        planted.add(planter)

    before = table_hits(probe.token)
    # On disk only the user's own transcript (Claude Code's file, not the hook's) holds the secret:
    # the grep finds it there, and every hub emptied its spool once the server had the records.
    assert file_hits(probe.token, [probe.tmp]) == [str(p) for p in probe.tmp.glob("*.jsonl")]
    # The secret really went in everywhere the registry says it can (spans, summaries, payloads…).
    expected = {
        "memoryhub_event.content",
        "memoryhub_otelspan.attributes",
        "memoryhub_summary.content",
        "memoryhub_consumertrace.fallback_reason",
        "memoryhub_consumertrace.input_messages",
        "memoryhub_consumertrace.output",
        "audit_payload.body",
        "audit_summarycomment.text",
        "audit_investigation.fact",
    }
    assert expected <= set(before), (expected - set(before), before)

    for wf in sorted(probe.workflows):
        seqs = list(
            Event.objects.filter(workflow__external_id=wf, content__contains=probe.token).values_list(
                "seq", flat=True
            )
        )
        assert seqs, f"{wf}: the secret reached no event"
        probe.client.purge(wf, seqs=seqs, reason="probe: customer asked for erasure")
    for later in probe.after_purge:
        later()

    # Held work was settled by the purge: the deferred compactions were never built afterwards.
    for span in OtelSpan.objects.filter(name="compact", workflow__external_id__startswith="probe-otlp"):
        assert span.mapped_to == "kept" and span.summary_id is None, span
    assert table_hits(probe.token) == []
    # Nothing left on the client's side either: every spool was delivered and emptied.
    assert all(d.is_dir() for d in probe.client_dirs), probe.client_dirs
    assert file_hits(probe.token, probe.client_dirs) == []

    staff = get_user_model().objects.create_superuser("probe-admin", "probe@example.com", "x-long-password")
    web = Client()
    web.force_login(alice.user)
    admin_web = Client()
    admin_web.force_login(staff)
    seen = 0
    for url in get_urls(probe):
        for who in (web, alice.api):
            response = who.get(url)
            if response.status_code == 200 and not getattr(response, "streaming", False):
                seen += 1
                assert probe.token not in response.content.decode("utf-8", "replace"), url
    # The admin site is off by default (its URLs 404): read it through the URLconf that has it on,
    # and require its pages to answer, so this pass cannot quietly read nothing.
    admin_seen, urls = 0, list(admin_urls())
    with override_settings(ROOT_URLCONF="tests.hardening.urls_with_admin"):
        for url in urls:
            response = admin_web.get(url)
            if response.status_code == 200:
                admin_seen += 1
                assert probe.token not in response.content.decode("utf-8", "replace"), url
    assert urls and admin_seen >= len(urls) // 2, (admin_seen, len(urls))
    assert seen > 60
    leaked = [r.getMessage() for r in caplog.records if probe.token in r.getMessage()]
    assert leaked == []
