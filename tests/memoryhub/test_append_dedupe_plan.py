"""The re-send check of an append reads only the events it finds, however large the history.

A batch's client_event_ids are looked up to return the original seqs of a re-send. Written as
``client_event_id IN (…)``, a planner without fresh statistics for a growing (partition of the)
event table read every event of the workflow on every batch, so ingest slowed down as history
grew. The lookup must stay one index probe per id: this test runs the very statement an append
issues under EXPLAIN ANALYZE, on a table that has not been analyzed, and counts the rows it read.
"""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memoryhub.models import Event
from tests.factories import append, append_n, event, make_workflow

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


def _scans(plan: dict) -> list[dict]:
    found = [plan] if "Scan" in plan["Node Type"] and plan["Node Type"] != "Function Scan" else []
    for child in plan.get("Plans", []):
        found += _scans(child)
    return found


def _reads_only_what_it_finds(plan: dict, found: int) -> bool:
    """Every table/index scan returns only matches (nothing filtered away): either one scan
    returning at most ``found`` rows, or a probe per id returning at most one row each."""
    for scan in _scans(plan):
        removed = scan.get("Rows Removed by Filter", 0) + scan.get("Rows Removed by Index Recheck", 0)
        if removed:
            return False
        per_loop_limit = 1 if scan.get("Actual Loops", 1) > 1 else found
        if scan.get("Actual Rows", 0) > per_loop_limit:
            return False
    return True


def test_resend_lookup_probes_the_index_instead_of_reading_the_history(tenant):
    wf = make_workflow(tenant, "wf-dedupe")
    append_n(wf, 3_000, batch=1_000)  # client_event_ids e1…e3000, no ANALYZE in between
    batch = [event(i) for i in range(2_501, 3_501)]  # 500 re-sent, 500 new
    with CaptureQueriesContext(connection) as queries:
        result = append(wf, batch)
    assert [e["seq"] for e in result.events[:500]] == list(range(2_501, 3_001))  # originals returned
    assert Event.objects.filter(workflow=wf).count() == 3_500
    lookups = [
        q["sql"]
        for q in queries.captured_queries
        if q["sql"].lstrip().upper().startswith("SELECT")
        and "client_event_id" in q["sql"]
        and "memoryhub_event" in q["sql"]
    ]
    assert len(lookups) == 1, lookups
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + lookups[0])
        raw = cursor.fetchone()[0]
    plan = (json.loads(raw) if isinstance(raw, str) else raw)[0]["Plan"]
    # Re-run after the append, all 1,000 ids are stored now (of 3,500 events): any row read beyond
    # those is a scan of the history.
    assert plan["Actual Rows"] == 1_000
    assert _reads_only_what_it_finds(plan, found=1_000), json.dumps(plan, indent=1)[:3000]
