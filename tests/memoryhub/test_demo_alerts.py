"""A fresh demo starts with the alerts its story needs, and no others.

Every enabled rule of every demo tenant is evaluated on the freshly loaded demo; the rules not
``ok`` must be exactly the set below, each with the one-line reason the story needs it. A rule
that starts firing (a spurious critical such as "missing provenance: 13", the integrations'
traces before they asked the server to attest their reads) or stops firing fails this test.
"""

from __future__ import annotations

import pytest

from memoryhub.models import AlertRule
from memoryhub.observe.alerting.evaluate import evaluate_rule

pytestmark = pytest.mark.django_db(transaction=True)

# (tenant, rule) -> (state, why the story needs it)
EXPECTED = {
    ("acme", "Active summary older than a day"): (
        "critical",
        "the review story's own rule: api-tests-42's S3 has been live since the incident three days ago",
    ),
    ("acme", "Claude Code compactions needed repair"): (
        "warning",
        "issue #32: Claude Code's two compactions lost the 401/403 requirement (its own source's rule)",
    ),
    ("acme", "OpenTelemetry compactions needed repair"): (
        "warning",
        "issue #32: the OTel compaction lost its tool names (its own source's rule)",
    ),
    ("acme", "Validation failure rate"): (
        "warning",
        "those three framework summaries are 3 of the last hour's 6 validator runs (waivers are not runs)",
    ),
}


def test_a_fresh_demo_fires_exactly_the_alerts_the_story_needs(loaded):
    rules = list(AlertRule.objects.filter(enabled=True).select_related("tenant").order_by("pk"))
    assert {r.tenant.slug for r in rules} == {"acme", "globex"}  # both demo tenants are evaluated
    states = {(r.tenant.slug, r.name): str(evaluate_rule(r).evaluation.state) for r in rules}
    firing = {key: state for key, state in states.items() if state != "ok"}
    assert firing == {key: state for key, (state, _why) in EXPECTED.items()}
    # None of the default rules is critical on a fresh demo: a critical there is a false alarm.
    defaults = {(r.tenant.slug, r.name) for r in rules if r.is_default}
    assert [key for key in defaults if states[key] == "critical"] == []


def test_every_demo_trace_names_the_read_it_made(loaded):
    """The cause of the old "missing provenance: 13": the Claude Code, OTel and Anthropic traces
    carried no read description. They now ask the server to attest it, and get it."""
    from memoryhub.models import ConsumerTrace
    from memoryhub.observe.metrics import incomplete_trace_q

    traces = ConsumerTrace.objects.filter(tenant__slug="acme")
    sources = set(traces.values_list("workflow__source", flat=True))
    assert {"claude-code", "otel", "anthropic"} <= sources
    assert list(traces.filter(incomplete_trace_q()).values_list("model_call_id", flat=True)) == []
