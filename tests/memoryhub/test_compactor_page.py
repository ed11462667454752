"""The compactor page: the summary versions a compactor produced, its acceptance (the metrics'
own rows) and its losses (from the stored verdicts); every count on it equals the rows."""

from __future__ import annotations

import re

import pytest

from memoryhub.memory import acceptance
from memoryhub.models import CompactionJob, Summary, ValidationRecord
from tests.factories import COMPACTOR, build_workflow, imported_job, rejected, validated

pytestmark = pytest.mark.django_db

C1_V2 = {**COMPACTOR, "version": "2.0"}


@pytest.fixture
def produced(tenant):
    """c1 1.0 wrote S1 (validated, its drops declared) and S2 (rejected: it lost the mandatory
    facts silently); c1 2.0 wrote S3; one more c1 compaction failed without a summary."""
    workflow = build_workflow(tenant, "wf", n=30)
    s1 = validated(workflow, 1, 10)
    s2 = rejected(workflow, 1, 20)
    s3 = validated(workflow, 1, 30, compactor=C1_V2)
    imported_job(workflow, 1, "c1-1.0", summary=s1)  # imported history names the version too
    imported_job(workflow, 2, "c1", summary=s2)
    imported_job(workflow, 3, "c1", status="FAILED")
    imported_job(workflow, 4, "other-compactor", status="FAILED")  # another name: not counted for c1
    return s1, s2, s3


def counts(html: str) -> dict[str, int]:
    return {k: int(v.replace(",", "")) for k, v in re.findall(r'data-count="([\w-]+)">([\d,]+)', html)}


def rows(html: str) -> dict[str, list[str]]:
    table = html.split('id="compactor-summaries"')[1].split("</table>")[0]
    return {
        sid: [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", body, re.S)]
        for sid, body in re.findall(r'data-summary="([^"]+)">(.*?)</tr>', table, re.S)
    }


def test_the_counts_on_the_compactor_page_equal_the_rows(alice, tenant, produced):
    s1, s2, s3 = produced
    r = alice.web.get("/compactors/c1/")
    assert r.status_code == 200
    html = r.content.decode()
    shown = rows(html)
    assert set(shown) == set(Summary.objects.filter(compactor_name="c1").values_list("summary_id", flat=True))
    assert set(shown) == {s1.summary_id, s2.summary_id, s3.summary_id}
    assert f'href="/summaries/{s2.summary_id}/"' in html

    jobs = CompactionJob.objects.filter(finished_at__isnull=False).exclude(compactor="other-compactor")
    records = ValidationRecord.objects.filter(summary__compactor_name="c1")
    c = counts(html)
    assert c["jobs-finished"] == jobs.count() == 3
    assert c["jobs-accepted"] == jobs.filter(summary__status__in=acceptance.ACCEPTED_STATUSES).count() == 1
    assert (
        c["validations"] == records.count()
        and c["validation-failures"] == records.filter(passed=False).count()
    )
    assert c["summaries"] == 3
    for status in ("VALIDATED", "REJECTED"):
        shown_n = re.search(rf'data-status-count="{status}">.*?</span>\s+(\d+)', html, re.S)
        assert (
            shown_n
            and int(shown_n.group(1)) == Summary.objects.filter(compactor_name="c1", status=status).count()
        )
    assert "33.3%" in html  # the acceptance_rate metric's share: 1 of 3 finished compactions

    # Losses come from each summary's stored verdict: S2 lost its mandatory facts, S1 declared
    # what it left out and lost nothing silently.
    assert shown[s2.summary_id][8].startswith("lost (") and shown[s1.summary_id][8] == "kept"
    assert shown[s1.summary_id][6] == "0" and int(shown[s1.summary_id][7]) > 0
    assert c["mandatory-lost"] == sum(1 for v in shown.values() if v[8].startswith("lost")) == 1
    per_row = [(int(v[6].replace(",", "")), int(v[7].replace(",", ""))) for v in shown.values()]
    assert c["silent-losses"] == sum(s for s, _ in per_row) and c["declared-drops"] == sum(
        d for _, d in per_row
    )
    assert c["losses-unknown"] == 0


def test_a_compactor_version_narrows_the_page(alice, produced):
    _, _, s3 = produced
    html = alice.web.get("/compactors/c1/?version=2.0").content.decode()
    assert set(rows(html)) == {s3.summary_id}
    assert counts(html)["summaries"] == 1
    assert 'href="/compactors/c1/?version=1.0"' in html  # the other version, one click away


def test_the_summary_and_workflow_pages_link_the_compactor(alice, produced):
    s1, _, _ = produced
    html = alice.web.get(f"/summaries/{s1.summary_id}/").content.decode()
    assert 'href="/compactors/c1/?version=1.0"' in html
    html = alice.web.get("/workflows/wf/").content.decode()
    assert 'href="/compactors/c1/?version=2.0"' in html


def test_empty_states_and_unknown_compactors(alice, tenant):
    html = alice.web.get("/compactors/").content.decode()
    assert 'id="no-compactors"' in html
    assert alice.web.get("/compactors/nobody/").status_code == 404
    workflow = build_workflow(tenant, "wf", n=5)
    imported_job(workflow, 1, "c1", status="FAILED")
    html = alice.web.get("/compactors/c1/").content.decode()
    assert 'id="no-versions"' in html and "its 1 finished compaction wrote none" in html
    assert counts(html)["jobs-finished"] == 1 and counts(html)["jobs-accepted"] == 0


def test_another_tenants_compactor_is_not_found(alice, other_tenant):
    workflow = build_workflow(other_tenant, "theirs", n=10)
    validated(workflow, 1, 10)
    assert alice.web.get("/compactors/c1/").status_code == 404


def test_losses_read_from_a_verdict_count_units_and_obligations_neither_kept_nor_declared():
    from types import SimpleNamespace

    from memoryhub.observe.compactors import UNKNOWN, losses_of

    checks = [
        {
            "name": "unit_retention",
            "retention": {"name": {"lost": 2, "declared": 1}, "number": {"lost": 1, "declared": 0}},
        },
        {"name": "obligations", "totals": {"total": 5, "kept": 2, "declared": 1}},
    ]
    record = SimpleNamespace(
        checks=checks, failed_checks=[], mandatory_coverage=1.0, validator_version="rules-8"
    )
    losses = losses_of(record)
    assert (losses.known, losses.silent, losses.declared, losses.mandatory_lost) == (True, 5, 2, False)
    # Opaque content (no retention numbers) and no record at all are unknown, not lossless.
    opaque = SimpleNamespace(
        checks=[{"name": "integrity"}], failed_checks=[], mandatory_coverage=1.0, validator_version="rules-8"
    )
    assert losses_of(opaque) == UNKNOWN and losses_of(None) == UNKNOWN
