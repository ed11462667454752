"""The demo's workflows fed by frameworks that compact on their own (Claude Code, OTel, Anthropic)."""

from __future__ import annotations

import pytest

from audit.lineage import artifact_lineage
from audit.models import Investigation
from memoryhub.demo import observed_sources as demo
from memoryhub.models import Artifact, Summary, SummaryStatus, Workflow

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("external_id", "source", "artifact_id", "compactor", "versions"),
    [
        (demo.CLAUDE_SESSION, "claude-code", demo.CLAUDE_ARTIFACT, "claude-code", 2),
        (demo.OTEL_CONVERSATION, "otel", "REFUND-4417", "openai", 1),
        (demo.ANTHROPIC_WORKFLOW, "anthropic", "REPLY-991", "anthropic", 1),
    ],
)
def test_each_source_has_an_observed_compaction_in_its_artifact_lineage(
    loaded, external_id, source, artifact_id, compactor, versions
):
    wf = Workflow.objects.get(tenant__slug="acme", external_id=external_id)
    assert wf.source == source and wf.active_summary is not None
    summaries = list(Summary.objects.filter(workflow=wf).order_by("version"))
    assert len(summaries) == versions and all(s.compactor_name == compactor for s in summaries)
    assert summaries[-1].status == SummaryStatus.ACTIVE and summaries[-1].job.idempotency_key.startswith(
        "observed/"
    )
    lineage = artifact_lineage(Artifact.objects.get(workflow=wf, artifact_id=artifact_id))
    assert summaries[-1].summary_id in str(lineage)


def test_the_claude_code_investigation_names_the_compaction_that_dropped_the_fact(loaded):
    inv = Investigation.objects.get(artifact__artifact_id=demo.CLAUDE_ARTIFACT)
    assert inv.verdict == "compaction_omission"
    s1, s2 = Summary.objects.filter(workflow__external_id=demo.CLAUDE_SESSION).order_by("version")
    assert demo.CLAUDE_FACT in s1.content and demo.CLAUDE_FACT not in s2.content
    assert inv.evidence["manifest"]["summary"]["summary_id"] == s2.summary_id
    assert f"investigation of {demo.CLAUDE_FACT!r} on {demo.CLAUDE_ARTIFACT}: compaction_omission" in loaded


def test_source_pages_show_the_demo_sources(loaded, client):
    from memoryhub.demo import scenario

    client.login(username=scenario.DEMO_USERNAME, password=scenario.DEMO_PASSWORD)
    page = client.get("/workflows/?source=claude-code").content.decode()
    assert demo.CLAUDE_SESSION in page and scenario.WORKFLOW_ID not in page
    assert (
        "threshold-in-force"
        in client.get(f"/triggers/workflows/{demo.CLAUDE_SESSION}/policy/").content.decode()
    )
