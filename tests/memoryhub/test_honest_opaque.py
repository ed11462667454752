"""Honest pages for compactions a framework performed (issue #31, item 4): an opaque version is
"unknown", never "lost" or "0%"; its digest is shown once; a workflow a framework compacts is
described as the framework's (its trigger, its pre-compaction tokens), not under MemoryHub's
default policy, and its chart carries no policy lines; tool calls read as JSON, encoded once."""

from __future__ import annotations

import hashlib
import re

import pytest

from memoryhub.core.actors import Actor
from memoryhub.memory.observed import record_observed_compaction
from memoryhub.models import WorkflowSource
from memoryhub.observe import framework
from tests.factories import append, make_workflow
from tests.memoryhub.test_pages import figures_in

pytestmark = pytest.mark.django_db

ACTOR = Actor.system("agents-hook")
OPENAI = {"name": "openai-responses-compact", "model": "gpt-4.1", "version": "openai-agents-0.24.0"}
CLAUDE = {"name": "claude-code", "model": "claude-sonnet-4-5", "version": "2.1.3"}


def _digest(blob: bytes) -> str:
    return "sha256:" + hashlib.sha256(blob).hexdigest()


@pytest.fixture
def desk(tenant):
    """An OpenAI Agents workflow with a double-encoded tool call and two opaque compactions."""
    wf = make_workflow(tenant, "oa-desk", source=WorkflowSource.OPENAI_AGENTS)
    append(
        wf,
        [
            {"kind": "message", "role": "user", "content": "What is the status of order A-1001?"},
            {
                "kind": "tool_call",
                "tool_call_id": "call_1",
                "content": '{"arguments": "{\\"order_id\\": \\"A-1001\\"}", "name": "lookup_order"}',
            },
            {"kind": "tool_result", "tool_call_id": "call_1", "content": "order A-1001: shipped"},
            {"kind": "message", "role": "assistant", "content": "Shipped on 2026-11-20."},
        ],
    )
    for covers, blob, pre in ((2, b"one", 40_000), (4, b"two", 41_500)):
        record_observed_compaction(
            wf,
            covers_to_seq=covers,
            opaque={"digest": _digest(blob), "size_bytes": 350},
            compactor=OPENAI,
            trigger={"kind": "auto", "pre_tokens": pre},
            actor=ACTOR,
        )
    wf.refresh_from_db()
    return wf


def test_framework_compaction_reports_the_framework_and_its_trigger(desk, tenant):
    fw = framework.framework_compaction(desk)
    assert fw is not None
    assert fw.framework == "OpenAI Agents SDK" and fw.compactions == 2
    assert fw.last.kind == "auto" and fw.last.pre_tokens == 41_500
    assert fw.threshold["tokens"] == 40_000
    plain = make_workflow(tenant, "ours")
    assert framework.framework_compaction(plain) is None


def test_opaque_summary_page_says_unknown_and_shows_the_digest_once(desk, carol):
    s2 = desk.summaries.get(version=2)
    html = carol.web.get(f"/summaries/{s2.summary_id}/").content.decode()
    assert html.count(_digest(b"two")) == 1
    assert 'id="opaque-content"' in html and "(empty)" not in html and "No structured facts" not in html
    assert 'data-result="unknown"' in html  # mandatory coverage: unknown, not 0%
    coverage = re.search(r"<dt>Mandatory coverage</dt><dd>(.*?)</dd>", html, re.S).group(1)
    assert "0%" not in coverage
    retention = html[html.index('id="retention"') :]
    assert "unknown" in retention and "lost silently" not in retention.lower()
    observed = re.search(r'id="observed-trigger">(.*?)</dd>', html, re.S).group(1)
    assert "OpenAI Agents SDK" in observed and "automatic" in observed and "41,500" in observed


def test_workflow_page_describes_the_frameworks_compaction_not_our_policy(desk, carol):
    html = carol.web.get("/workflows/oa-desk/").content.decode()
    head = re.search(r'id="compacted-by">(.*?)</div>', html, re.S).group(1)
    assert "OpenAI Agents SDK" in head and "41,500" in head and "policy: default" not in head
    assert 'data-row="framework-trigger"' in html and "Policy trigger" not in html
    assert "% of the" not in html  # no share of a budget that is not what compacts it
    # Every version is opaque: no decay chart, and nothing counted lost.
    assert 'id="decay-unknown"' in html and "chart-decay" not in html
    assert "lost by some" not in html
    # The history chart has no MemoryHub policy lines, so it is scaled to the data.
    assert figures_in(html)["history"]["layout"]["shapes"] == []


def test_tool_calls_render_as_json_encoded_once(desk, carol):
    for path in ("/workflows/oa-desk/", "/workflows/oa-desk/timeline/", "/workflows/oa-desk/events/1-4/"):
        html = carol.web.get(path).content.decode()
        block = re.search(r"<pre class=\"tool-json\" data-tool-json>(.*?)</pre>", html, re.S)
        assert block, path
        text = block.group(1)
        assert "\\&quot;" not in text and '\\"' not in text, text  # no JSON inside a JSON string
        assert "&quot;order_id&quot;: &quot;A-1001&quot;" in text
        assert html.count("data-tool-json") == 1


def test_a_policy_workflow_keeps_its_policy_and_budget_lines(tenant, carol):
    wf = make_workflow(tenant, "ours")
    append(wf, [{"kind": "message", "content": "hello"}])
    html = carol.web.get("/workflows/ours/").content.decode()
    assert "policy: default" in html and "Policy trigger" in html
    assert figures_in(html)["history"]["layout"]["shapes"]


def test_claude_code_compaction_keeps_its_manual_trigger(tenant, carol):
    wf = make_workflow(tenant, "sess", source=WorkflowSource.CLAUDE_CODE)
    append(wf, [{"kind": "message", "content": f"turn {i} about POST /refunds"} for i in range(1, 5)])
    record_observed_compaction(
        wf,
        covers_to_seq=3,
        text="turns about POST /refunds",
        compactor=CLAUDE,
        trigger={"kind": "manual", "pre_tokens": 77_500},
        actor=ACTOR,
    )
    html = carol.web.get("/workflows/sess/").content.decode()
    head = re.search(r'id="compacted-by">(.*?)</div>', html, re.S).group(1)
    assert "Claude Code" in head and "manual" in head and "77,500" in head


def test_a_compaction_without_a_summary_is_called_absent_not_encrypted(tenant, carol):
    wf = make_workflow(tenant, "sess-absent", source=WorkflowSource.CLAUDE_CODE)
    append(wf, [{"kind": "message", "content": f"turn {i}"} for i in range(1, 4)])
    result = record_observed_compaction(
        wf,
        covers_to_seq=2,
        opaque={"digest": _digest(b""), "size_bytes": 0, "media_type": framework.ABSENT_SUMMARY},
        compactor=CLAUDE,
        trigger={"kind": "auto", "detail": "no summary in the transcript"},
        actor=ACTOR,
    )
    html = carol.web.get(f"/summaries/{result.summary.summary_id}/").content.decode()
    card = re.search(r'id="opaque-content">(.*?)</div>', html, re.S).group(1)
    assert "No summary" in card and "encrypted" not in card and "unknown" in card
