"""Mainstream OpenTelemetry through the real SDK: the OTLP/HTTP exporter posts to a live MemoryHub
with SimpleSpanProcessor (one request per span, children before their parents) and
BatchSpanProcessor (one request for the lot). Spans are shaped as the GenAI conventions, the
OpenInference and the OpenLLMetry instrumentations emit them (attribute names from their
semantic-convention packages)."""

from __future__ import annotations

import json

import pytest
from openinference.semconv.trace import MessageAttributes, OpenInferenceSpanKindValues, SpanAttributes
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.semconv_ai import LLMRequestTypeValues, TraceloopSpanKindValues
from opentelemetry.semconv_ai import SpanAttributes as Traceloop

from memoryhub.models import ConsumerTrace, Event, OtelSpan, Summary, Workflow

PROCESSORS = {"simple": SimpleSpanProcessor, "batch": BatchSpanProcessor}


def _provider(live_server, party, processor: str) -> TracerProvider:
    exporter = OTLPSpanExporter(
        endpoint=f"{live_server.url}/v1/traces",
        headers={"Authorization": f"Bearer {party.key.secret}"},
        timeout=30,
    )
    provider = TracerProvider(resource=Resource.create({"service.name": "support-svc"}))
    provider.add_span_processor(PROCESSORS[processor](exporter))
    return provider


def _messages(*pairs: tuple[str, str]) -> str:
    return json.dumps([{"role": r, "parts": [{"type": "text", "content": t}]} for r, t in pairs])


SYSTEM = ("system", "You are the refunds support agent.")
U1 = ("user", "Refund order 7, the refund API returns 401 Unauthorized.")
A1 = ("assistant", "Checking order 7.")
U2 = ("user", "Any news? It must be fixed today.")
A2 = ("assistant", "The token expired; I renewed it and the refund went through.")
U3 = ("user", "Thanks. Also refund order 9.")
A3 = ("assistant", "Order 9 refunded.")


SUMMARY = "User needs order 7 refunded (was 401: expired token, fixed)."


def _genai_run(tracer, compaction_form: str = "attribute") -> None:
    """An agent run as current GenAI instrumentations emit it: the conversation id only on the
    ``invoke_agent`` span; each chat span re-sends the whole history in gen_ai.input.messages;
    the third call ran on a compacted history, said by the span's attributes or by a span event
    ``gen_ai.compaction`` (``compaction_form``)."""
    said = (
        {"gen_ai.conversation.compacted": True, "gen_ai.compaction.summary": SUMMARY}
        if compaction_form == "attribute"
        else {}
    )
    with tracer.start_as_current_span(
        "invoke_agent support-bot",
        attributes={
            "gen_ai.conversation.id": "conv-genai",
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "support-bot",
        },
    ):
        chat = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "gpt-4.1",
            "gen_ai.agent.name": "support-bot",
        }
        with tracer.start_as_current_span(
            "chat gpt-4.1",
            attributes={
                **chat,
                "gen_ai.usage.input_tokens": 100,
                "gen_ai.input.messages": _messages(SYSTEM, U1),
                "gen_ai.output.messages": _messages(A1),
            },
        ):
            pass
        with tracer.start_as_current_span(
            "execute_tool get_refund",
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "get_refund",
                "gen_ai.tool.call.id": "call_1",
                "gen_ai.tool.call.arguments": '{"order": 7}',
                "gen_ai.tool.call.result": '{"status": 401}',
            },
        ):
            pass
        with tracer.start_as_current_span(
            "chat gpt-4.1",
            attributes={
                **chat,
                "gen_ai.usage.input_tokens": 300,
                "gen_ai.input.messages": _messages(SYSTEM, U1, A1, U2),
                "gen_ai.output.messages": _messages(A2),
            },
        ):
            pass
        with tracer.start_as_current_span(
            "chat gpt-4.1",
            attributes={
                **chat,
                "gen_ai.usage.input_tokens": 120,
                **said,
                "gen_ai.input.messages": _messages(SYSTEM, U3),
                "gen_ai.output.messages": _messages(A3),
            },
        ) as span:
            if compaction_form == "event":
                span.add_event("gen_ai.compaction", {"gen_ai.compaction.summary": SUMMARY})


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("compaction_form", ["attribute", "event"])
@pytest.mark.parametrize("processor", sorted(PROCESSORS))
def test_genai_run_through_the_sdk(live_server, alice, processor, compaction_form):
    provider = _provider(live_server, alice, processor)
    _genai_run(provider.get_tracer("t"), compaction_form)
    provider.shutdown()

    wf = Workflow.objects.get(external_id="conv-genai")
    # Every child span took the conversation of its invoke_agent parent (under SimpleSpanProcessor
    # the children arrived first, unassigned, and were adopted when the parent came).
    assert OtelSpan.objects.filter(workflow=wf).count() == 5
    assert not OtelSpan.objects.filter(mapped_to="unassigned").exists()
    events = list(
        Event.objects.filter(workflow=wf).order_by("seq").values_list("seq", "kind", "role", "content")
    )
    # Each message once, though the history was re-sent on every call; tool pair in span order.
    assert [(k, r, c) for _, k, r, c in events] == [
        ("note", "system", "invoke_agent support-bot"),
        ("message", *SYSTEM),
        ("message", *U1),
        ("message", *A1),
        ("tool_call", "assistant", 'get_refund({"order": 7})'),
        ("tool_result", "tool", '{"status": 401}'),
        ("message", *U2),
        ("message", *A2),
        ("message", *U3),
        ("message", *A3),
    ]
    summary = Summary.objects.get(workflow=wf)
    assert summary.covers_to_seq == 8 and "expired token" in summary.content
    # Three chat spans, three traces, the compacted one included; each read the history up to its
    # own input (its own output excluded), so none is flagged tail_loss.
    traces = list(ConsumerTrace.objects.filter(workflow=wf).order_by("tail_to_seq"))
    assert [(t.input_tokens, t.tail_to_seq, t.head_seq_at_read) for t in traces] == [
        (100, 3, 3),
        (300, 7, 7),
        (120, 9, 9),
    ]
    assert [t.summary_id for t in traces] == [None, None, summary.pk]
    assert all("tail_loss" not in t.flags for t in traces), [t.flags for t in traces]


def _openinference_run(tracer) -> None:
    """OpenInference (Arize/Phoenix) instrumentation inside ``using_session``: session.id on each span."""
    session = {SpanAttributes.SESSION_ID: "oi-session-1"}
    with tracer.start_as_current_span(
        "Agent.run",
        attributes={
            **session,
            SpanAttributes.OPENINFERENCE_SPAN_KIND: OpenInferenceSpanKindValues.CHAIN.value,
        },
    ):
        prefix_in, prefix_out = SpanAttributes.LLM_INPUT_MESSAGES, SpanAttributes.LLM_OUTPUT_MESSAGES
        role, content = MessageAttributes.MESSAGE_ROLE, MessageAttributes.MESSAGE_CONTENT
        with tracer.start_as_current_span(
            "ChatCompletion",
            attributes={
                **session,
                SpanAttributes.OPENINFERENCE_SPAN_KIND: OpenInferenceSpanKindValues.LLM.value,
                SpanAttributes.LLM_MODEL_NAME: "gpt-4o-mini",
                SpanAttributes.LLM_TOKEN_COUNT_PROMPT: 42,
                f"{prefix_in}.0.{role}": "user",
                f"{prefix_in}.0.{content}": "Where is parcel 31?",
                f"{prefix_out}.0.{role}": "assistant",
                f"{prefix_out}.0.{content}": "Parcel 31 is in Lyon.",
            },
        ):
            pass
        with tracer.start_as_current_span(
            "track_parcel",
            attributes={
                **session,
                SpanAttributes.OPENINFERENCE_SPAN_KIND: OpenInferenceSpanKindValues.TOOL.value,
                SpanAttributes.TOOL_NAME: "track_parcel",
                SpanAttributes.INPUT_VALUE: '{"parcel": 31}',
                SpanAttributes.OUTPUT_VALUE: '{"city": "Lyon"}',
            },
        ):
            pass


def _openllmetry_run(tracer) -> None:
    """OpenLLMetry (Traceloop) with ``set_association_properties({"session_id": ...})`` on a workflow."""
    assoc = {
        f"{Traceloop.TRACELOOP_ASSOCIATION_PROPERTIES}.session_id": "tl-chat-9",
        f"{Traceloop.TRACELOOP_ASSOCIATION_PROPERTIES}.user_id": "u-1",
    }
    with (
        tracer.start_as_current_span(
            "support_flow.workflow",
            attributes={
                **assoc,
                Traceloop.TRACELOOP_SPAN_KIND: TraceloopSpanKindValues.WORKFLOW.value,
                Traceloop.TRACELOOP_ENTITY_NAME: "support_flow",
            },
        ),
        tracer.start_as_current_span(
            "openai.chat",
            attributes={
                **assoc,
                Traceloop.LLM_REQUEST_TYPE: LLMRequestTypeValues.CHAT.value,
                Traceloop.LLM_SYSTEM: "openai",
                Traceloop.LLM_REQUEST_MODEL: "gpt-4o",
                Traceloop.LLM_USAGE_PROMPT_TOKENS: 57,
                f"{Traceloop.LLM_PROMPTS}.0.role": "user",
                f"{Traceloop.LLM_PROMPTS}.0.content": "Cancel subscription 12.",
                f"{Traceloop.LLM_COMPLETIONS}.0.role": "assistant",
                f"{Traceloop.LLM_COMPLETIONS}.0.content": "Subscription 12 cancelled.",
            },
        ),
    ):
        pass


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("processor", sorted(PROCESSORS))
def test_openinference_and_openllmetry_spans_land_in_their_conversations(live_server, alice, processor):
    provider = _provider(live_server, alice, processor)
    _openinference_run(provider.get_tracer("oi"))
    _openllmetry_run(provider.get_tracer("tl"))
    provider.shutdown()

    assert not OtelSpan.objects.filter(workflow=None).exists()
    oi = Workflow.objects.get(external_id="oi-session-1")
    assert list(Event.objects.filter(workflow=oi).order_by("seq").values_list("kind", "role", "content")) == [
        ("message", "user", "Where is parcel 31?"),
        ("message", "assistant", "Parcel 31 is in Lyon."),
        ("tool_call", "assistant", 'track_parcel({"parcel": 31})'),
        ("tool_result", "tool", '{"city": "Lyon"}'),
    ]
    trace = ConsumerTrace.objects.get(workflow=oi)
    assert (trace.model, trace.input_tokens, trace.tail_to_seq) == ("gpt-4o-mini", 42, 1)
    tl = Workflow.objects.get(external_id="tl-chat-9")  # session_id, not user_id
    events = dict(Event.objects.filter(workflow=tl).values_list("content", "seq"))
    # Spans carrying their own id are mapped as they arrive: under SimpleSpanProcessor the
    # workflow span (ending last) comes after its chat span.
    assert set(events) == {
        "invoke_workflow support_flow",
        "Cancel subscription 12.",
        "Subscription 12 cancelled.",
    }
    assert events["Cancel subscription 12."] + 1 == events["Subscription 12 cancelled."]
    trace = ConsumerTrace.objects.get(workflow=tl)
    assert (trace.model, trace.input_tokens) == ("gpt-4o", 57)
    assert trace.tail_to_seq == events["Cancel subscription 12."] and "tail_loss" not in trace.flags


# -- in-process: the exporter's own encoder, posted through the API client -------------------------


def _finished(emit) -> list:
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "svc"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    emit(provider.get_tracer("t"))
    return list(memory.get_finished_spans())


def _post_spans(api, spans) -> dict:
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    response = api.generic(
        "POST", "/v1/traces", encode_spans(spans).SerializeToString(), content_type="application/x-protobuf"
    )
    assert response.status_code == 200, response.content
    return dict(part.split("=") for part in response["X-MemoryHub-Ingest"].split())


def test_a_child_arriving_after_its_stored_parent_inherits_its_conversation(api, tenant):
    def emit(tracer):
        chat = {"gen_ai.operation.name": "chat", "gen_ai.output.messages": _messages(A1)}
        with (
            tracer.start_as_current_span("invoke_agent a", attributes={"gen_ai.conversation.id": "conv-p"}),
            tracer.start_as_current_span("task step"),
            tracer.start_as_current_span("chat m", attributes=chat),
        ):
            pass

    chat, step, agent = _finished(emit)
    assert _post_spans(api, [agent])["unassigned"] == "0"
    sent = _post_spans(api, [step])  # inherits from the stored parent
    assert sent["unassigned"] == "0" and sent["kept"] == "1"
    sent = _post_spans(api, [chat])  # from its stored grandparent, through the stored parent
    assert sent["unassigned"] == "0" and sent["traces"] == "1"
    wf = Workflow.objects.get(external_id="conv-p")
    assert OtelSpan.objects.filter(workflow=wf).count() == 3
    assert list(Event.objects.filter(workflow=wf, kind="message").values_list("content", flat=True)) == [
        A1[1]
    ]


def test_spans_whose_ancestor_never_arrives_stay_unassigned_and_are_said_so(api, tenant):
    def emit(tracer):
        with (
            tracer.start_as_current_span("invoke_agent a"),
            tracer.start_as_current_span("chat m", attributes={"gen_ai.operation.name": "chat"}),
        ):
            pass

    chat, agent = _finished(emit)
    assert _post_spans(api, [chat])["unassigned"] == "1"
    assert _post_spans(api, [agent])["unassigned"] == "1"  # no id on the root either
    assert OtelSpan.objects.filter(mapped_to="unassigned", workflow=None).count() == 2
    assert not Workflow.objects.exists()


def test_the_conversation_attributes_setting_names_extra_attributes(api, tenant, settings):
    settings.MEMORYHUB_OTEL_CONVERSATION_ATTRIBUTES = ["app.thread"]

    def emit(tracer):
        with tracer.start_as_current_span(
            "chat m",
            attributes={"gen_ai.operation.name": "chat", "app.thread": "th-77", "session.id": "other"},
        ):
            pass

    _post_spans(api, _finished(emit))
    # Read before session.id: the deployment said which attribute names its conversations.
    assert Workflow.objects.filter(external_id="th-77").exists()
    assert not Workflow.objects.filter(external_id="other").exists()


@pytest.mark.parametrize("value", ["has space", "-leading.dash", "ok.name,bad!name"])
def test_an_invalid_conversation_attributes_setting_stops_the_start(value):
    import os
    import subprocess
    import sys

    env = {**os.environ, "MEMORYHUB_OTEL_CONVERSATION_ATTRIBUTES": value, "DEBUG": "true"}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    result = subprocess.run(
        [sys.executable, "-c", "import memoryhub.settings"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0 and "MEMORYHUB_OTEL_CONVERSATION_ATTRIBUTES" in result.stderr


def test_the_event_based_message_form_becomes_events_once(api, tenant):
    """The older GenAI form: messages as span events (gen_ai.system/user.message, gen_ai.choice)."""

    def emit(tracer):
        for history, reply in (([SYSTEM, U1], A1), ([SYSTEM, U1, A1, U2], A2)):
            with tracer.start_as_current_span(
                "chat m", attributes={"gen_ai.conversation.id": "conv-ev", "gen_ai.operation.name": "chat"}
            ) as span:
                for role, text in history:
                    span.add_event(f"gen_ai.{role}.message", {"content": text})
                span.add_event(
                    "gen_ai.choice",
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": json.dumps({"role": "assistant", "content": reply[1]}),
                    },
                )

    first, second = _finished(emit)
    _post_spans(api, [first])
    _post_spans(api, [second])
    wf = Workflow.objects.get(external_id="conv-ev")
    assert list(Event.objects.filter(workflow=wf).order_by("seq").values_list("role", "content")) == [
        SYSTEM,
        U1,
        A1,
        U2,
        A2,
    ]
    assert list(
        ConsumerTrace.objects.filter(workflow=wf)
        .order_by("tail_to_seq")
        .values_list("tail_to_seq", flat=True)
    ) == [2, 4]


def test_the_same_message_said_twice_is_two_events(api, tenant):
    """Occurrence numbers keep a repeated message (\"ok\" twice) from collapsing into one."""
    ok = ("user", "ok")

    def emit(tracer):
        for history, reply in (([ok], A1), ([ok, A1, ok], A2)):
            with tracer.start_as_current_span(
                "chat m",
                attributes={
                    "gen_ai.conversation.id": "conv-ok",
                    "gen_ai.operation.name": "chat",
                    "gen_ai.input.messages": _messages(*history),
                    "gen_ai.output.messages": _messages(reply),
                },
            ):
                pass

    _post_spans(api, _finished(emit))  # both calls in one request
    wf = Workflow.objects.get(external_id="conv-ok")
    assert list(Event.objects.filter(workflow=wf).order_by("seq").values_list("role", "content")) == [
        ok,
        A1,
        ok,
        A2,
    ]
