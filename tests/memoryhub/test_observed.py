"""Observed (provider) compactions are summary versions like any other (issue 18 item 6)."""

from __future__ import annotations

import hashlib

import pytest

from audit.investigate import investigate
from memoryhub.context.traces import record_artifact, record_trace
from memoryhub.core.actors import Actor
from memoryhub.core.errors import Conflict, InvalidInput
from memoryhub.memory import lifecycle
from memoryhub.memory.observed import record_observed_compaction, threshold_in_force
from memoryhub.memory.summaries import summary_detail, verify_summary
from memoryhub.models import CompactionJob, Summary, SummaryStatus, WorkflowSource
from tests.factories import append, make_workflow

ACTOR = Actor.system("claude-code-hook")
# A summary that keeps what the covered turns say (passes the default rules-7 validator).
KEEPS_ALL = "The user works on the payments service; the API returns 401 Unauthorized."
CLAUDE = {"name": "claude-code", "model": "claude-sonnet-4-5", "settings": {"autoCompact": True}}


def _session(tenant, n: int = 6, external_id: str = "sess-1"):
    wf = make_workflow(tenant, external_id, source=WorkflowSource.CLAUDE_CODE)
    append(
        wf,
        [
            {"kind": "message", "role": "user", "content": f"turn {i}: the API returns 401 Unauthorized"}
            if i == 2
            else {"kind": "message", "role": "user", "content": f"turn {i} about the payments service"}
            for i in range(1, n + 1)
        ],
    )
    return wf


def test_text_compaction_is_a_validated_active_version_with_all_eight_groups(tenant):
    wf = _session(tenant)
    result = record_observed_compaction(
        wf,
        covers_to_seq=4,
        text=KEEPS_ALL,
        compactor=CLAUDE,
        trigger={"kind": "auto", "pre_tokens": 155_000},
        observation_id="uuid-boundary-1",
        actor=ACTOR,
    )
    assert result.created and result.validation == "passed" and result.activation == "activated"
    s = result.summary
    assert (s.covers_from_seq, s.covers_to_seq, s.status) == (1, 4, SummaryStatus.ACTIVE)
    wf.refresh_from_db()
    assert wf.active_summary_id == s.pk and wf.active_revision == 1 and wf.tail_events == 2
    detail = summary_detail(s)
    assert (
        detail["compactor"]["name"] == "claude-code" and detail["compactor"]["model"] == "claude-sonnet-4-5"
    )
    assert detail["source_lineage"]["watermark"] == 4 and detail["identity"]["job"]["job_id"] == result.job.pk
    assert detail["validation"]["latest"]["result"] == "passed"
    assert [e["action"] for e in detail["activation"]["events"]] == ["validate", "activate"]
    assert detail["content"]["narrative"] == KEEPS_ALL
    assert verify_summary(s)["match"]
    job = CompactionJob.objects.get(pk=result.job.pk)
    assert job.status == "SUCCEEDED" and job.tokens_in == 155_000 and job.outcome == "activated"
    assert job.attempts[0]["trigger"] == {"kind": "auto", "pre_tokens": 155_000}
    assert job.attempts[0]["compactor_settings"] == {"autoCompact": True}


def test_opaque_compaction_reports_unverifiable_not_passed_and_still_activates_by_cas(tenant):
    wf = _session(tenant)
    blob = b"\x00encrypted-compaction-bytes"
    digest = "sha256:" + hashlib.sha256(blob).hexdigest()
    result = record_observed_compaction(
        wf,
        covers_to_seq=5,
        opaque={"digest": digest, "size_bytes": len(blob)},
        compactor={"name": "anthropic", "model": "claude-opus-4-6"},
        trigger={"kind": "auto"},
        observation_id="msg_1",
        actor=ACTOR,
    )
    assert result.validation == "unverifiable" and result.activation == "activated"
    record = result.summary.validations.get()
    assert record.result == "unverifiable" and record.validator_version == "opaque-1"
    by_name = {c["name"]: c for c in record.checks}
    assert by_name["integrity"]["passed"] is True and by_name["coverage_contiguity"]["passed"] is True
    assert (
        by_name["groundedness"]["passed"] is None
        and "unverifiable content" in by_name["groundedness"]["detail"]
    )
    assert digest in by_name["groundedness"]["detail"]
    detail = summary_detail(result.summary)
    assert detail["integrity"]["schema"] == "memoryhub.opaque/v1"
    assert detail["content"] == {"schema": "memoryhub.opaque/v1", "digest": digest, "size_bytes": len(blob)}
    assert detail["validation"]["latest"]["result"] == "unverifiable"


def test_repeat_is_idempotent_and_a_changed_repeat_is_a_conflict(tenant):
    wf = _session(tenant)
    kwargs = dict(covers_to_seq=3, compactor=CLAUDE, observation_id="b-1", actor=ACTOR)
    first = record_observed_compaction(wf, text="summary one", **kwargs)
    again = record_observed_compaction(wf, text="summary one", **kwargs)
    assert not again.created and again.summary.pk == first.summary.pk and again.activation == "activated"
    assert Summary.objects.filter(workflow=wf).count() == 1
    with pytest.raises(Conflict) as err:
        record_observed_compaction(wf, text="another text", **kwargs)
    assert err.value.code == "observation_conflict"


def test_second_compaction_supersedes_and_an_older_watermark_is_refused(tenant):
    wf = _session(tenant, n=8)
    one = record_observed_compaction(wf, covers_to_seq=4, text="first", compactor=CLAUDE, actor=ACTOR)
    two = record_observed_compaction(wf, covers_to_seq=7, text="second", compactor=CLAUDE, actor=ACTOR)
    assert two.activation == "activated" and two.summary.version == 2
    one.summary.refresh_from_db()
    assert one.summary.status == SummaryStatus.SUPERSEDED
    late = record_observed_compaction(wf, covers_to_seq=5, text="late", compactor=CLAUDE, actor=ACTOR)
    assert (
        late.activation == "refused:watermark_regression" and late.summary.status == SummaryStatus.VALIDATED
    )


def test_stale_when_another_activation_lands_first(tenant, monkeypatch):
    wf = _session(tenant)
    other = record_observed_compaction(
        wf, covers_to_seq=2, text=KEEPS_ALL, compactor=CLAUDE, actor=ACTOR, activate=False
    )
    assert other.activation == "recorded"
    real_activate = lifecycle.activate

    def racing(summary, expected, actor, **kw):  # a concurrent activation commits between read and CAS
        real_activate(other.summary, expected, Actor.user("bob"))
        return real_activate(summary, expected, actor, **kw)

    monkeypatch.setattr(lifecycle, "activate", racing)
    result = record_observed_compaction(
        wf, covers_to_seq=4, text=KEEPS_ALL + " Still on it.", compactor=CLAUDE, actor=ACTOR
    )
    assert result.activation == "stale" and result.summary.status == SummaryStatus.VALIDATED


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"covers_to_seq": 99, "text": "x"}, "covers_to_seq"),
        ({"covers_to_seq": 0, "text": "x"}, "covers_to_seq"),
        ({"covers_to_seq": 2}, "text"),
        (
            {"covers_to_seq": 2, "text": "x", "opaque": {"digest": "sha256:" + "0" * 64, "size_bytes": 1}},
            "text",
        ),
        ({"covers_to_seq": 2, "opaque": {"digest": "md5:abc", "size_bytes": 1}}, "content.digest"),
        (
            {"covers_to_seq": 2, "opaque": {"digest": "sha256:" + "0" * 64, "size_bytes": -1}},
            "content.size_bytes",
        ),
        ({"covers_to_seq": 2, "text": "x", "trigger": {"kind": "sometimes"}}, "trigger.kind"),
        ({"covers_to_seq": 2, "text": "x", "trigger": {"pre_tokens": "many"}}, "trigger.pre_tokens"),
        ({"covers_to_seq": 2, "text": "x", "observation_id": "a b/c"}, "observation_id"),
    ],
)
def test_bad_input_is_a_clear_error_and_writes_nothing(tenant, kwargs, field):
    wf = _session(tenant)
    with pytest.raises(InvalidInput) as err:
        record_observed_compaction(wf, compactor=CLAUDE, actor=ACTOR, **kwargs)
    assert err.value.extra["field"] == field
    assert (
        not Summary.objects.filter(workflow=wf).exists()
        and not CompactionJob.objects.filter(workflow=wf).exists()
    )


def test_investigation_names_the_observed_compaction_that_dropped_the_fact(tenant):
    wf = _session(tenant)  # event 2 holds "401 Unauthorized"
    result = record_observed_compaction(
        wf,
        covers_to_seq=4,
        text="The user works on payments.",
        compactor=CLAUDE,
        observation_id="cb-1",
        actor=ACTOR,
    )
    trace, _ = record_trace(
        wf,
        {
            "agent": "claude-code",
            "agent_run_id": "sess-1",
            "model_call_id": "msg-7",
            "summary_id": result.summary.summary_id,
            "tail_to_seq": 6,
        },
        ACTOR,
    )
    artifact, _ = record_artifact(
        wf, {"artifact_id": "PR-9", "kind": "pull_request", "produced_by": {"model_call_id": "msg-7"}}, ACTOR
    )
    inv = investigate(artifact, "401 Unauthorized", ACTOR)
    assert inv.verdict == "compaction_omission"
    assert result.summary.summary_id in str(inv.evidence) and 2 in inv.evidence["source_seqs"]


def test_threshold_in_force_is_reconstructed_from_pre_compaction_tokens(tenant):
    wf = _session(tenant, n=8)
    assert threshold_in_force(wf) is None
    for seq, pre in ((3, 160_200), (5, 158_900)):
        record_observed_compaction(
            wf,
            covers_to_seq=seq,
            text=f"s{seq}",
            compactor=CLAUDE,
            trigger={"kind": "auto", "pre_tokens": pre},
            actor=ACTOR,
        )
    record_observed_compaction(
        wf,
        covers_to_seq=7,
        text="s7",
        compactor=CLAUDE,
        trigger={"kind": "manual", "pre_tokens": 40_000},
        actor=ACTOR,
    )
    found = threshold_in_force(wf)
    assert found["tokens"] == 158_900 and found["samples"] == 2 and found["manual"] == 1


def test_api_records_lists_and_rejects_with_json_errors(api, tenant, carol):
    _session(tenant)
    url = "/api/v1/workflows/sess-1/observed-compactions/"
    body = {
        "covers_to_seq": 3,
        "text": KEEPS_ALL,
        "compactor": CLAUDE,
        "trigger": {"kind": "manual"},
        "observation_id": "x1",
    }
    first = api.post(url, body, format="json")
    assert first.status_code == 201, first.json()
    assert first.json()["activation"] == "activated" and first.json()["validation"] == "passed"
    assert api.post(url, body, format="json").status_code == 200
    listed = api.get(url).json()
    assert [o["observation_id"] for o in listed["observed"]] == ["x1"]
    bad = api.post(url, {**body, "observation_id": "x2", "extra": 1}, format="json")
    assert bad.status_code == 400 and bad.json()["error"] == "invalid_field"
    bad = api.post(url, {**body, "observation_id": "x3", "covers_to_seq": 50}, format="json")
    assert bad.status_code == 400 and bad.json()["error"] == "coverage_beyond_head"
    assert carol.api.post(url, {**body, "observation_id": "x4"}, format="json").status_code == 403
    assert api.post("/api/v1/workflows/nope/observed-compactions/", body, format="json").status_code == 404


def test_workflow_api_accepts_returns_and_filters_source(api):
    assert (
        api.post("/api/v1/workflows/", {"external_id": "o-1", "source": "otel"}, format="json").json()[
            "source"
        ]
        == "otel"
    )
    api.post("/api/v1/workflows/", {"external_id": "c-1", "source": "claude-code"}, format="json")
    api.post("/api/v1/workflows/", {"external_id": "a-1"}, format="json")
    rows = api.get("/api/v1/workflows/?source=claude-code").json()
    rows = rows.get("results", rows.get("workflows", rows)) if isinstance(rows, dict) else rows
    assert [w["external_id"] for w in rows] == ["c-1"]
    bad = api.post("/api/v1/workflows/", {"external_id": "b-1", "source": "carrier-pigeon"}, format="json")
    assert bad.status_code == 400


def test_investigation_through_an_opaque_compaction_says_it_cannot_read_it(tenant):
    wf = _session(tenant)
    digest = "sha256:" + hashlib.sha256(b"sealed").hexdigest()
    result = record_observed_compaction(
        wf,
        covers_to_seq=4,
        opaque={"digest": digest, "size_bytes": 6},
        compactor={"name": "anthropic"},
        actor=ACTOR,
    )
    record_trace(
        wf,
        {
            "agent": "a",
            "agent_run_id": "r",
            "model_call_id": "m-1",
            "summary_id": result.summary.summary_id,
            "tail_to_seq": 6,
        },
        ACTOR,
    )
    artifact, _ = record_artifact(
        wf, {"artifact_id": "A-1", "kind": "doc", "produced_by": {"model_call_id": "m-1"}}, ACTOR
    )
    inv = investigate(artifact, "401 Unauthorized", ACTOR)
    assert inv.verdict == "compaction_omission" and inv.evidence["summary_available"] is False
    assert "opaque content" in inv.evidence["explanation"]


def test_summary_page_says_unverifiable_content_not_passed(tenant, alice):
    wf = _session(tenant)
    digest = "sha256:" + hashlib.sha256(b"sealed").hexdigest()
    result = record_observed_compaction(
        wf,
        covers_to_seq=4,
        opaque={"digest": digest, "size_bytes": 6},
        compactor={"name": "anthropic"},
        actor=ACTOR,
    )
    page = alice.web.get(f"/summaries/{result.summary.summary_id}/").content.decode()
    outcome = page.split("<dt>Outcome</dt>")[1].split("</dd>")[0]
    assert "unverifiable content" in outcome and "passed" not in outcome
    assert page.count('<span class="badge status-quarantined">unverifiable</span>') == 6


def test_a_failing_observed_compaction_is_judged_but_still_recorded_as_what_the_model_reads(tenant):
    """The framework already replaced its history: the failed checks stay on the record (and count
    as a validation failure), the observer waives them saying why, and the pointer moves."""
    wf = _session(tenant)
    result = record_observed_compaction(
        wf, covers_to_seq=4, text="The user works on the payments service.", compactor=CLAUDE, actor=ACTOR
    )
    assert result.validation == "failed" and result.activation == "activated"
    first, waiver = list(result.summary.validations.order_by("created_at", "id"))
    assert not first.passed and "unit_retention" in lifecycle.failed_checks(first)
    assert waiver.waived_checks and waiver.waived_by == str(ACTOR)
    waive_event = result.summary.lifecycle_events.get(action="waive")
    assert "already reads" in waive_event.reason
    wf.refresh_from_db()
    assert wf.active_summary_id == result.summary.pk
