"""The demo's LangChain and OpenAI Agents workflows: fed at load time by the real packages (local
fake models, REST API in process), each with observed compactions and their lineage."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from audit.lineage import artifact_lineage
from memoryhub.core.checks import validation_result
from memoryhub.core.opaque import OPAQUE_SCHEMA
from memoryhub.demo import scenario
from memoryhub.demo.integrations import LANGCHAIN_ARTIFACT, LANGCHAIN_WORKFLOW, OPENAI_AGENTS_WORKFLOW
from memoryhub.models import Artifact, Event, Summary, Workflow

pytestmark = pytest.mark.django_db


def test_langchain_workflow_compacts_and_its_report_traces_back_to_a_tool_result(loaded, client):
    wf = Workflow.objects.get(tenant__slug=scenario.TENANT_SLUG, external_id=LANGCHAIN_WORKFLOW)
    assert wf.source == "langchain" and f"workflow {LANGCHAIN_WORKFLOW}" in loaded
    summaries = list(Summary.objects.filter(workflow=wf).order_by("version"))
    assert len(summaries) >= 2 and summaries[-1].status == "ACTIVE"
    assert {s.compactor_name for s in summaries} == {"langchain-summarization"}
    lineage = artifact_lineage(Artifact.objects.get(workflow=wf, artifact_id=LANGCHAIN_ARTIFACT))
    (hop,) = lineage["traces"]
    assert hop["summary"]["summary_id"] == summaries[-1].summary_id
    failing = Event.objects.get(workflow=wf, kind="tool_result", tool_call_id="call-T3")
    assert hop["covered"]["from_seq"] <= failing.seq <= hop["covered"]["to_seq"]
    assert (
        "401 Unauthorized" in failing.content
        and "401 Unauthorized" in json.loads(summaries[-1].content)["narrative"]
    )


def test_openai_agents_workflow_records_opaque_compactions_as_unverifiable(loaded, client):
    wf = Workflow.objects.get(tenant__slug=scenario.TENANT_SLUG, external_id=OPENAI_AGENTS_WORKFLOW)
    assert wf.source == "openai-agents"
    assert Event.objects.filter(workflow=wf, kind="tool_result").count() == 4
    summaries = list(Summary.objects.filter(workflow=wf).order_by("version"))
    assert summaries
    # Observed compactions like any other: stored as digest and size, activated by CAS, and their
    # validation says "unverifiable", never "passed".
    assert summaries[-1].status == "ACTIVE"
    for summary in summaries:
        content = json.loads(summary.content)
        assert content["schema"] == OPAQUE_SCHEMA and content["size_bytes"] > 0
        record = summary.validations.get()
        assert validation_result(record.passed, record.checks) == "unverifiable"
        assert Event.objects.filter(workflow=wf, seq__lte=summary.covers_to_seq, kind="tool_result").exists()
    client.force_login(get_user_model().objects.get(username=scenario.DEMO_USERNAME))
    page = client.get(reverse("memoryhub:summary-detail", args=[summaries[0].summary_id]))
    assert page.status_code == 200 and "unverifiable content" in page.content.decode()
