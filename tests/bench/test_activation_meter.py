"""The activation workload and cost meter of `bench_activation` (memoryhub.bench.activation), run
in-process on a tiny setup: what it counts and what it verifies. No timing threshold; the
interleaved comparison of two trees is `manage.py bench_activation --against REV`."""

from __future__ import annotations

from collections import Counter

import pytest

from memoryhub.bench import activation
from memoryhub.memory import lifecycle
from memoryhub.models import Workflow

pytestmark = pytest.mark.django_db


def test_the_meter_counts_outcomes_statements_and_verifies_no_lost_update():
    meter = activation._Meter()
    meter.setup(workflows=2, summaries=3, events=5)
    out = meter.run(attempts=12, seed=7)
    assert sum(row["n"] for row in out.values()) == 12
    assert out["applied"]["n"] >= 1
    # An applied activation is the swap's own statements plus its audit entries: more than the
    # stale or refused answers, never zero.
    per_applied = out["applied"]["statements"] / out["applied"]["n"]
    assert per_applied >= 7
    assert all(row["statements"] >= row["n"] for row in out.values())
    assert sum(meter.applied.values()) == out["applied"]["n"]
    assert meter.verify() == {"lost_updates": 0, "violations": []}


def test_verify_reports_an_activation_the_clients_did_not_see():
    flows, pool = activation.setup(workflows=1, summaries=2, events=3)
    wf = flows[0]
    start = {wf.pk: 0}
    lifecycle.activate(pool[wf.pk][0], 0, activation.worker("unseen"))
    report = activation.verify(flows, start, applied=Counter(), stale=0)
    assert report["lost_updates"] == 1
    assert Workflow.objects.get(pk=wf.pk).active_revision == 1


def test_modules_resolve_in_this_trees_layout():
    assert activation.lifecycle() is lifecycle
