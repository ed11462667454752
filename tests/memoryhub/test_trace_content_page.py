"""The trace page shows the model call's content: the summary and tail it was served, the
messages and output where the integration recorded them, model, latency, tokens and cost — and
"not recorded" (never a zero) for what it did not record."""

from __future__ import annotations

import json
import re

import pytest

from memoryhub.observe.reports import TRACE_TAIL_SHOWN
from tests.factories import activated, append, build_workflow, event, purge, trace

pytestmark = pytest.mark.django_db

TOOL_CALL = {"name": "create_payment", "arguments": {"amount": 649, "currency": "EUR"}}


@pytest.fixture
def workflow(tenant):
    workflow = build_workflow(tenant, "wf", n=25)
    append(
        workflow,
        [
            event(26, content="the gateway answered 401 Unauthorized"),
            event(27, kind="tool_call", content=json.dumps(TOOL_CALL), tool_call_id="tc-1"),
            event(28, kind="tool_result", role="tool", content="payment refused", tool_call_id="tc-1"),
        ],
    )
    return workflow


def page(alice, recorded) -> str:
    r = alice.web.get(f"/traces/{recorded.pk}/")
    assert r.status_code == 200
    return r.content.decode()


def field(html: str, name: str) -> str:
    """The text of the element carrying ``data-field=name`` (tags stripped)."""
    match = re.search(rf'data-field="{name}"[^>]*>(.*?)</(dd|p|div|pre|ol)>', html, re.S)
    assert match, name
    return re.sub(r"<[^>]+>", "", match.group(1)).strip()


def test_the_page_shows_the_served_summary_tail_messages_output_and_costs(alice, workflow):
    summary = activated(workflow, 1, 25, content=None)
    messages = [
        {"role": "system", "content": "You write API tests."},
        {"role": "assistant", "content": None, "tool_calls": [TOOL_CALL]},
        {"role": "tool", "name": "create_payment", "content": json.dumps({"status": 401})},
    ]
    recorded = trace(
        workflow,
        summary,
        28,
        input_messages=messages,
        output=json.dumps({"tool_calls": [TOOL_CALL]}),
        output_tokens=42,
        latency_ms=1870,
        cost_usd=0.0123,
    )
    html = page(alice, recorded)

    served = html.split('id="served-summary"')[1].split('id="served-tail"')[0]
    assert f'href="/summaries/{summary.summary_id}/"' in served and "S1" in served
    assert "requirements for POST /payments were discussed" in served  # the narrative as served
    tail = html.split('id="served-tail"')[1].split('id="served-messages"')[0]
    assert re.findall(r'data-seq="(\d+)"', tail) == ["26", "27", "28"]
    assert 'href="/workflows/wf/events/26-28/"' in tail and "401 Unauthorized" in tail
    assert "#event-27" in tail
    # Tool calls are JSON shown once: decoded, indented, never escaped quotes (the replay bundle
    # below is the stored document, where event content is a JSON string).
    readable = html.split('id="replay-bundle"')[0]
    assert "&quot;amount&quot;: 649" in tail and "\\&quot;" not in readable
    assert (
        readable.count("data-tool-json") == 4
    )  # tail event 27, the assistant's tool call, the tool reply, the output
    assert field(html, "model") == "gpt-4.1-mini"
    assert field(html, "latency") == "1,870 ms"
    assert field(html, "input_tokens") == "4,000" and field(html, "output_tokens") == "42"
    assert field(html, "cost") == "$0.0123"
    shown = html.split('id="served-messages"')[1].split('id="trace-output"')[0]
    assert "You write API tests." in shown and shown.count('class="message ') == 3
    assert readable.count("You write API tests.") == 1  # not also shown as the page's flash messages
    assert "create_payment" in field(html, "output") and "not recorded" not in html


def test_what_the_integration_did_not_record_reads_not_recorded(alice, workflow):
    recorded = trace(workflow, None, 28, model="", input_tokens=None)
    html = page(alice, recorded)
    for name in ("model", "latency", "input_tokens", "output_tokens", "cost", "messages", "output"):
        assert field(html, name).startswith("not recorded"), name
    assert "$0" not in html and ">0 ms" not in html
    assert "No summary: the call read the raw history from seq 1." in html
    # Without a summary the tail is the whole history up to the read.
    assert len(re.findall(r'data-seq="(\d+)"', html)) == 28


def test_an_empty_tail_and_a_purged_tail_event_are_said_so(alice, workflow):
    summary = activated(workflow, 1, 28)
    html = page(alice, trace(workflow, summary, 28))
    assert "No tail: the summary reached the head." in html
    recorded = trace(workflow, None, 28)
    purge(workflow, [26])
    html = page(alice, recorded)
    row = html.split('data-seq="26"')[1].split("</tr>")[0]
    assert "unavailable: purged by" in row and "401 Unauthorized" not in row


def test_a_long_tail_shows_its_first_events_and_links_the_rest(alice, tenant):
    workflow = build_workflow(tenant, "long", n=TRACE_TAIL_SHOWN + 20)
    html = page(alice, trace(workflow, None, TRACE_TAIL_SHOWN + 20))
    assert len(re.findall(r'data-seq="(\d+)"', html)) == TRACE_TAIL_SHOWN
    assert (
        f'href="/workflows/long/events/1-{TRACE_TAIL_SHOWN + 20}/">20 more events on the events page' in html
    )


def test_empty_states_with_no_traces(alice, tenant):
    assert "No consumer traces" in alice.web.get("/traces/").content.decode()
    workflow = build_workflow(tenant, "quiet", n=5)
    summary = activated(workflow, 1, 5)
    html = alice.web.get(f"/summaries/{summary.summary_id}/").content.decode()
    assert "No agent has read this version." in html
