"""Tenant isolation and roles, endpoint by endpoint and page by page.

Every API operation (enumerated from the URLconf, cross-checked against /api/schema/) and every
dashboard page (enumerated from ``memoryhub.web.pages.urlpatterns``) is called by each party of the
world (world.py): alice (acme admin), bob (acme reviewer), carol (acme viewer), mallory (admin of
globex, an outsider to acme), a revoked acme admin key and no credentials at all.

The expectations are written down here, not read from the views: reads need a viewer, writes
the role named in the table; an outsider gets 404 for anything naming an acme object and, on a
tenant-wide endpoint, only their own tenant's rows; a revoked key or no key is 401. An endpoint
or page without an entry fails the test, so a new one cannot slip through unexamined. Every test
runs in its own savepoint, so a write one party makes is gone before the next party calls.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from django.urls import URLPattern, reverse
from rest_framework.test import APIClient

from audit.models import AuditEntry
from memoryhub.models import AlertRule, Channel, Role, Workflow, role_at_least
from memoryhub.web.api.urls import v1_patterns
from memoryhub.web.pages import urlpatterns as page_patterns
from tests.hardening.world import (
    ACME_DAYS,
    ACME_TARGET,
    COMPACTOR,
    GLOBEX_DAYS,
    GLOBEX_TARGET,
    REVIEW_WF,
    World,
)

pytestmark = pytest.mark.slow

SEED_WF = "api-tests-42"
SIDE_WF = "refunds-api-9"  # acme workflow without summaries: purges go here
PARTIES = ["alice", "bob", "carol", "mallory", "revoked", "anonymous"]
ROLE = {"alice": Role.ADMIN, "bob": Role.REVIEWER, "carol": Role.VIEWER}
V, R, A = Role.VIEWER, Role.REVIEWER, Role.ADMIN
I = Role.INGEST  # noqa: E741  # what an integration key may append (tests/memoryhub/test_ingest_role.py)

# Strings only one tenant has; a response to the other tenant must never contain them.
ACME_MARKERS = ("api-tests-42", "refunds-api-9", REVIEW_WF, "acme-hook", "acme tail growing")
# Long enough that random text on a page (a CSRF token, a digest) never contains one by chance:
# "GX1" once matched a token's letters.
GLOBEX_MARKERS = (
    "onboarding-7",
    "h9-globex",
    "globex-report-gx1",
    "globex-hook",
    "globex tail growing",
    "gx-call-1",
)


def test_the_markers_cannot_turn_up_by_chance():
    """A marker short enough to occur in random page text (tokens, digests) makes a leak test flaky."""
    assert all(len(marker) >= 8 for marker in ACME_MARKERS + GLOBEX_MARKERS)


# --- the world's acme objects the calls name ------------------------------------------------------


def _rule(w: World) -> int:
    return AlertRule.objects.get(tenant=w.acme, name="acme tail growing").pk


def _channel(w: World) -> int:
    return Channel.objects.get(tenant=w.acme, name="acme-hook").pk


def _job(w: World) -> int:
    return Workflow.objects.get(tenant=w.acme, external_id=REVIEW_WF).compaction_jobs.get().pk


def _trace(w: World) -> int:
    return Workflow.objects.get(tenant=w.acme, external_id=SEED_WF).traces.order_by("pk").last().pk


def _revision(external_id: str) -> int:
    return Workflow.objects.get(external_id=external_id).active_revision


# --- the API table --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Api:
    """One operation: least role, what it names, the status an allowed caller gets, the request."""

    role: str
    target: str  # "object": the path names an acme object; "tenant": tenant-wide
    ok: int
    path: Callable[[World], dict[str, Any]] = lambda w: {}
    body: Callable[[World], Any] | None = None
    query: dict[str, str] | None = None
    outsider: int | None = None  # a tenant-wide call whose body names an acme object
    rows: Callable[[Any], set] | None = None  # ids listed in the response
    owned: Callable[[Any], set] | None = None  # the ids a tenant owns (TenantObjects -> set)


def _results(key: str) -> Callable[[Any], set]:
    return lambda body: {row[key] for row in body["results"]}


WF = {"wf": SEED_WF}
REVIEW = {"wf": REVIEW_WF}
SUMMARY_BODY = {
    "covers_from_seq": 1,
    "covers_to_seq": 30,
    "content": {"narrative": "Events 1-30: POST /payments requirements.", "facts": []},
    "compactor": {"name": "h9-external", "version": "1"},
}
POLICY = {"target_tokens": 9500}


def _sid(name: str) -> Callable[[World], dict[str, Any]]:
    return lambda w: {"summary_id": w.summaries[name]}


CAROL = {"username": "carol"}  # an acme member (not in globex)


def _carol_key(w: World) -> dict[str, Any]:
    return {"prefix": w.parties["carol"].key.key.prefix}


API: dict[str, Api] = {
    # workflows and events
    "GET workflows/": Api(V, "tenant", 200, rows=_results("external_id"), owned=lambda t: set(t.workflows)),
    "POST workflows/": Api(I, "tenant", 201, body=lambda w: {"external_id": "h9-new", "name": "new"}),
    "GET workflows/{wf}/": Api(V, "object", 200, lambda w: WF),
    "GET workflows/{wf}/events/": Api(V, "object", 200, lambda w: WF, query={"limit": "5"}),
    "POST workflows/{wf}/events/": Api(
        I,
        "object",
        201,
        lambda w: WF,
        body=lambda w: {"events": [{"kind": "message", "content": "h9", "client_event_id": "h9-1"}]},
    ),
    # one model call's round trip (append + traces + compactions + decision); no "create": an
    # outsider must meet the same 404 as on the events endpoint
    # summaries and review actions
    "GET workflows/{wf}/summaries/": Api(
        V, "object", 200, lambda w: WF, rows=_results("summary_id"), owned=lambda t: set(t.summary_ids)
    ),
    "POST workflows/{wf}/summaries/": Api(R, "object", 201, lambda w: REVIEW, body=lambda w: SUMMARY_BODY),
    # observed (provider/framework) compactions and the OTLP ingest status
    "GET workflows/{wf}/observed-compactions/": Api(V, "object", 200, lambda w: WF),
    "POST workflows/{wf}/observed-compactions/": Api(
        I,
        "object",
        201,
        lambda w: REVIEW,
        body=lambda w: {"covers_to_seq": 5, "text": "h9 observed", "compactor": {"name": "h9-provider"}},
    ),
    # the verdict on a framework's summary before it is recorded (writes nothing)
    "POST workflows/{wf}/repair/": Api(
        I, "object", 200, lambda w: WF, body=lambda w: {"text": "h9 framework summary", "covers_to_seq": 3}
    ),
    "GET otel/status/": Api(V, "tenant", 200),
    "GET summaries/{summary_id}/": Api(V, "object", 200, _sid("active")),
    "GET summaries/{summary_id}/verify/": Api(V, "object", 200, _sid("active")),
    "GET summaries/{summary_id}/diff/": Api(V, "object", 200, _sid("active")),
    "POST summaries/{summary_id}/validate/": Api(R, "object", 200, _sid("candidate")),
    "POST summaries/{summary_id}/activate/": Api(
        R, "object", 200, _sid("validated"), body=lambda w: {"expected_revision": _revision(REVIEW_WF)}
    ),
    "POST summaries/{summary_id}/rollback/": Api(
        R,
        "object",
        200,
        _sid("superseded"),
        body=lambda w: {"expected_revision": _revision(SEED_WF), "reason": "h9 rollback"},
    ),
    "POST summaries/{summary_id}/approve/": Api(
        R, "object", 200, _sid("awaiting"), body=lambda w: {"reason": "ok"}
    ),
    "GET summaries/{summary_id}/comments/": Api(V, "object", 200, _sid("active")),
    "POST summaries/{summary_id}/comments/": Api(
        R, "object", 201, _sid("active"), body=lambda w: {"text": "h9 comment"}
    ),
    "POST summaries/{summary_id}/reject/": Api(
        R, "object", 200, _sid("candidate"), body=lambda w: {"reason": "no"}
    ),
    "POST summaries/{summary_id}/quarantine/": Api(
        R, "object", 200, _sid("candidate"), body=lambda w: {"reason": "suspicious"}
    ),
    "POST summaries/{summary_id}/release/": Api(
        A, "object", 200, _sid("quarantined"), body=lambda w: {"reason": "cleared"}
    ),
    "POST summaries/{summary_id}/waive/": Api(
        R,
        "object",
        200,
        _sid("rejected"),
        body=lambda w: {"checks": ["mandatory_facts"], "reason": "covered elsewhere"},
    ),
    # compaction jobs
    "GET workflows/{wf}/compactions/": Api(
        V, "object", 200, lambda w: REVIEW, rows=_results("job_id"), owned=lambda t: set(t.job_ids)
    ),
    "POST workflows/{wf}/compactions/": Api(R, "object", 202, lambda w: REVIEW, body=lambda w: {}),
    "GET compactions/{job_id}/": Api(V, "object", 200, lambda w: {"job_id": _job(w)}),
    # context, traces, artifacts
    "GET workflows/{wf}/context/": Api(V, "object", 200, lambda w: WF),
    "GET workflows/{wf}/traces/": Api(
        V, "object", 200, lambda w: WF, rows=_results("trace_id"), owned=lambda t: set(t.trace_ids)
    ),
    "POST workflows/{wf}/step/": Api(
        I,
        "object",
        200,
        lambda w: WF,
        body=lambda w: {"events": [{"kind": "message", "content": "h9 step", "client_event_id": "h9-step"}]},
    ),
    "POST workflows/{wf}/timeline/": Api(
        I,
        "object",
        201,
        lambda w: WF,
        body=lambda w: {
            "items": [
                {"event": {"kind": "message", "content": "h9 timeline", "client_event_id": "h9-tl"}},
                {
                    "trace": {
                        "agent": "h9-agent",
                        "agent_run_id": "h9-run",
                        "model_call_id": "h9-tl-call",
                        "summary_id": None,
                    }
                },
            ]
        },  # fmt: skip
    ),
    "POST workflows/{wf}/traces/": Api(
        I,
        "object",
        201,
        lambda w: WF,
        body=lambda w: {
            "agent": "h9-agent",
            "agent_run_id": "h9-run",
            "model_call_id": "h9-call",
            "summary_id": None,
            "tail_to_seq": 240,
        },
    ),
    "GET traces/{trace_id}/": Api(V, "object", 200, lambda w: {"trace_id": _trace(w)}),
    "GET workflows/{wf}/artifacts/": Api(
        V, "object", 200, lambda w: WF, rows=_results("artifact_id"), owned=lambda t: set(t.artifact_ids)
    ),
    "POST workflows/{wf}/artifacts/": Api(
        R,
        "object",
        201,
        lambda w: WF,
        body=lambda w: {
            "artifact_id": "H9",
            "kind": "report",
            "produced_by": {"model_call_id": "call-pub-0007-03"},
        },
    ),
    "GET artifacts/{artifact_id}/": Api(V, "object", 200, lambda w: {"artifact_id": "T57"}),
    # audit
    "GET artifacts/{artifact_id}/lineage/": Api(V, "object", 200, lambda w: {"artifact_id": "T57"}),
    "POST artifacts/{artifact_id}/investigate/": Api(
        R, "object", 201, lambda w: {"artifact_id": "T57"}, body=lambda w: {"fact": "401 Unauthorized"}
    ),
    "GET artifacts/{artifact_id}/investigations/": Api(
        V,
        "object",
        200,
        lambda w: {"artifact_id": "T57"},
        rows=_results("id"),
        owned=lambda t: set(t.investigation_ids),
    ),
    "GET traces/{trace_id}/replay/": Api(V, "object", 200, lambda w: {"trace_id": _trace(w)}),
    "GET audit/": Api(
        V,
        "tenant",
        200,
        query={"page_size": "500"},
        rows=_results("entry_hash"),
        owned=lambda t: set(t.audit_hashes),
    ),
    "GET audit/verify/": Api(V, "tenant", 200),
    # retention and purge (admin only to change)
    "GET retention/": Api(V, "tenant", 200),
    "PUT retention/": Api(A, "tenant", 200, body=lambda w: {"policies": {"trace_detail": 500}}),
    "GET purges/": Api(
        V,
        "tenant",
        200,
        rows=lambda body: {p["purge_id"] for p in body["purges"]},
        owned=lambda t: set(t.purge_ids),
    ),
    "POST workflows/{wf}/purge/": Api(
        A, "object", 201, lambda w: {"wf": SIDE_WF}, body=lambda w: {"seqs": [3], "reason": "erasure request"}
    ),
    # alerts (admin only to change)
    "GET alert-rules/": Api(
        V, "tenant", 200, query={"page_size": "500"}, rows=_results("id"), owned=lambda t: set(t.rule_ids)
    ),
    "POST alert-rules/": Api(
        A,
        "tenant",
        201,
        body=lambda w: {
            "name": "h9 rule",
            "metric": "tail_tokens",
            "critical_threshold": 1e6,
            "channels": [_channel(w)],
        },
        outsider=400,  # mallory cannot wire acme's channel to a globex rule
    ),
    "GET alert-rules/{pk}/": Api(V, "object", 200, lambda w: {"pk": _rule(w)}),
    "PUT alert-rules/{pk}/": Api(
        A, "object", 200, lambda w: {"pk": _rule(w)}, body=lambda w: {"name": "renamed"}
    ),
    "PATCH alert-rules/{pk}/": Api(
        A, "object", 200, lambda w: {"pk": _rule(w)}, body=lambda w: {"name": "renamed"}
    ),
    "DELETE alert-rules/{pk}/": Api(A, "object", 204, lambda w: {"pk": _rule(w)}),
    "POST alert-rules/{pk}/test/": Api(A, "object", 202, lambda w: {"pk": _rule(w)}),
    "POST alert-rules/{pk}/mute/": Api(
        A, "object", 200, lambda w: {"pk": _rule(w)}, body=lambda w: {"minutes": 30}
    ),
    "GET alert-rules/{pk}/evaluations/": Api(V, "object", 200, lambda w: {"pk": _rule(w)}),
    "GET channels/": Api(V, "tenant", 200, rows=_results("id"), owned=lambda t: set(t.channel_ids)),
    "POST channels/": Api(
        A,
        "tenant",
        201,
        body=lambda w: {"kind": "webhook", "name": "h9", "url": "https://hooks.example.com/h9"},
    ),
    "GET channels/{pk}/": Api(V, "object", 200, lambda w: {"pk": _channel(w)}),
    "PUT channels/{pk}/": Api(
        A, "object", 200, lambda w: {"pk": _channel(w)}, body=lambda w: {"name": "renamed"}
    ),
    "PATCH channels/{pk}/": Api(
        A, "object", 200, lambda w: {"pk": _channel(w)}, body=lambda w: {"name": "renamed"}
    ),
    "DELETE channels/{pk}/": Api(A, "object", 204, lambda w: {"pk": _channel(w)}),
    "POST channels/{pk}/test/": Api(A, "object", 202, lambda w: {"pk": _channel(w)}),
    "POST channels/{pk}/enable/": Api(A, "object", 200, lambda w: {"pk": _channel(w)}),
    "GET channels/{pk}/notifications/": Api(V, "object", 200, lambda w: {"pk": _channel(w)}),
    "GET alerts/": Api(V, "tenant", 200, rows=_results("id"), owned=lambda t: set(t.flip_ids)),
    "GET metrics/": Api(V, "tenant", 200),
    # triggers: the workflow policy is a reviewer's, the tenant default an admin's
    "GET workflows/{wf}/policy/": Api(V, "object", 200, lambda w: WF),
    "PUT workflows/{wf}/policy/": Api(R, "object", 200, lambda w: WF, body=lambda w: POLICY),
    "PATCH workflows/{wf}/policy/": Api(R, "object", 200, lambda w: WF, body=lambda w: POLICY),
    "DELETE workflows/{wf}/policy/": Api(R, "object", 200, lambda w: WF),
    "GET workflows/{wf}/policy/export/": Api(V, "object", 200, lambda w: WF),
    "POST workflows/{wf}/trigger/": Api(
        R, "object", 200, lambda w: WF, body=lambda w: {"expected_next_step_tokens": 800}
    ),
    "GET workflows/{wf}/decisions/": Api(V, "object", 200, lambda w: {"wf": SIDE_WF}),
    "POST workflows/{wf}/simulate/": Api(V, "object", 200, lambda w: WF, body=lambda w: {}),
    "GET triggers/policy/": Api(V, "tenant", 200),
    "PUT triggers/policy/": Api(A, "tenant", 200, body=lambda w: POLICY),
    "PATCH triggers/policy/": Api(A, "tenant", 200, body=lambda w: POLICY),
    "DELETE triggers/policy/": Api(A, "tenant", 200),
    "GET triggers/policy/export/": Api(V, "tenant", 200),
    # pure computations: nothing is written, so a viewer may run them
    "POST triggers/evaluate/": Api(
        V,
        "tenant",
        200,
        body=lambda w: {"current_tokens": 12000, "expected_next_step_tokens": 900, "workflow": SEED_WF},
        outsider=404,  # mallory cannot evaluate against acme's workflow policy
    ),
    "POST triggers/simulate/": Api(V, "tenant", 200, body=lambda w: {"steps": [500, 800, 1200]}),
    # members and API keys: admins only, reads included
    "GET api-keys/": Api(A, "tenant", 200, rows=_results("prefix"), owned=lambda t: set(t.key_prefixes)),
    "POST api-keys/": Api(A, "tenant", 201, body=lambda w: {"name": "h9-key", "role": "viewer"}),
    "GET api-keys/{prefix}/": Api(A, "object", 200, lambda w: _carol_key(w)),
    "DELETE api-keys/{prefix}/": Api(A, "object", 200, lambda w: _carol_key(w)),
    "POST api-keys/{prefix}/revoke/": Api(A, "object", 200, lambda w: _carol_key(w)),
    "POST api-keys/{prefix}/rotate/": Api(A, "object", 201, lambda w: _carol_key(w)),
    # users may belong to both tenants (demo, vic), so usernames cannot show a leak here:
    # test_accounts_api.py checks each tenant lists exactly its own memberships
    "GET members/": Api(A, "tenant", 200),
    "POST members/": Api(
        A,
        "tenant",
        201,
        body=lambda w: {"username": "h9-member", "role": "viewer", "password": "a-long-passphrase"},
    ),
    "GET members/{username}/": Api(A, "object", 200, lambda w: CAROL),
    "PATCH members/{username}/": Api(A, "object", 200, lambda w: CAROL, body=lambda w: {"role": "reviewer"}),
    "DELETE members/{username}/": Api(A, "object", 200, lambda w: CAROL),
}


# --- enumerating the API ----------------------------------------------------------------------------

_CONVERTER = re.compile(r"<(?:\w+:)?(\w+)>")
METHODS = ("get", "post", "put", "patch", "delete")


def url_operations() -> dict[str, URLPattern]:
    """ "METHOD route" for every handler of every /api/v1/ URL pattern."""
    operations = {}
    for pattern in v1_patterns:
        route = _CONVERTER.sub(r"{\1}", str(pattern.pattern))
        view = pattern.callback.view_class
        for method in METHODS:
            if hasattr(view, method):
                operations[f"{method.upper()} {route}"] = pattern
    return operations


OPERATIONS = url_operations()


def test_every_endpoint_is_in_the_table_and_in_the_schema(client):
    assert set(OPERATIONS) == set(API), (
        f"endpoints without an expectation: {sorted(set(OPERATIONS) - set(API))}; "
        f"expectations without an endpoint: {sorted(set(API) - set(OPERATIONS))}"
    )
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    documented = {
        f"{method.upper()} {path.removeprefix('/api/v1/').replace('{id}', '{pk}')}"
        for path, item in schema["paths"].items()
        for method in item
        if method in METHODS
    }
    assert documented == set(OPERATIONS), (
        f"undocumented: {sorted(set(OPERATIONS) - documented)}; not served: {sorted(documented - set(OPERATIONS))}"
    )


def _api_client(w: World, party: str) -> APIClient:
    if party in w.parties:
        return w.parties[party].api
    client = APIClient()
    if party == "revoked":
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {w.revoked_key}")
    return client


def _expected(spec: Api | Page, party: str, role_needed: str, ok: int) -> int:
    if party in ("revoked", "anonymous"):
        return 401
    if party == "mallory":
        if spec.target == "object":
            return 404
        return spec.outsider or ok
    return ok if role_at_least(ROLE[party], role_needed) else 403


def _no_markers(text: str, markers: tuple[str, ...], what: str) -> None:
    leaked = [m for m in markers if m in text]
    assert not leaked, f"{what} shows the other tenant's {leaked}"


@pytest.mark.parametrize("party", PARTIES)
@pytest.mark.parametrize("operation", sorted(OPERATIONS))
def test_api(w, operation, party):
    spec = API.get(operation)
    assert spec is not None, f"no expectation for {operation}: add it to API"
    method, route = operation.split(" ", 1)
    url = "/api/v1/" + route.format(**spec.path(w))
    body = spec.body(w) if spec.body else None
    call = getattr(_api_client(w, party), method.lower())
    response = call(url, body, format="json") if method != "GET" else call(url, spec.query or {})
    expected = _expected(spec, party, spec.role, spec.ok)
    assert response.status_code == expected, (
        f"{party} {method} {url}: {response.status_code} {response.content[:300]!r}"
    )
    if response.status_code >= 400:
        assert response.json()["error"], response.content
        return
    text = response.content.decode()
    own, other = (w.theirs, w.mine) if party == "mallory" else (w.mine, w.theirs)
    _no_markers(text, ACME_MARKERS if party == "mallory" else GLOBEX_MARKERS, f"{party} {method} {url}")
    if spec.rows is not None:
        listed = spec.rows(response.json())
        assert listed, f"{method} {url} listed nothing: the leak check would be vacuous"
        assert listed <= spec.owned(own), (
            f"{method} {url} listed {sorted(listed - spec.owned(own))[:5]} not owned"
        )
        assert not listed & spec.owned(other), (
            f"{method} {url} leaked {sorted(listed & spec.owned(other))[:5]}"
        )


@pytest.mark.parametrize("party", ["alice", "carol", "mallory"])
def test_tenant_settings_are_the_callers_own(w, party):
    """Tenant-wide settings (retention, the default policy) come from the caller's tenant."""
    api = w.parties[party].api
    days, target = (GLOBEX_DAYS, GLOBEX_TARGET) if party == "mallory" else (ACME_DAYS, ACME_TARGET)
    assert api.get("/api/v1/retention/").json()["policies"]["trace_detail"] == days
    policy = api.get("/api/v1/triggers/policy/").json()
    assert (policy["target_tokens"], policy["source"]) == (target, "tenant")


def test_writes_by_an_outsider_land_in_their_own_tenant(w):
    mallory = w.parties["mallory"].api
    created = mallory.post("/api/v1/workflows/", {"external_id": SEED_WF}, format="json")
    assert created.status_code == 201  # a new globex workflow, not acme's (which would be 200)
    assert Workflow.objects.get(tenant=w.globex, external_id=SEED_WF).head_seq == 0
    assert Workflow.objects.get(tenant=w.acme, external_id=SEED_WF).head_seq == 240


# --- pages --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Page:
    """One page: who may GET it and what they get; who may POST and what they get."""

    target: str  # "object" or "tenant"
    kwargs: Callable[[World], dict[str, Any]] = lambda w: {}
    get: str | None = V  # least role for GET; None: POST only (GET is 405)
    get_ok: int = 200
    query: dict[str, str] | None = None
    post: str | None = None  # least role for POST; None: no POST
    post_ok: int = 302
    data: Callable[[World], dict[str, Any]] = lambda w: {}
    outsider: int | None = None


PAGES: dict[str, Page] = {
    "home": Page("tenant", get_ok=302),
    # switch-tenant: POST only; tested below (an outsider asking for acme stays in globex)
    "switch-tenant": Page("tenant", get=None, post=V, data=lambda w: {"tenant": "globex"}),
    "overview": Page("tenant"),
    "overview-numbers": Page("tenant"),
    "overview-charts": Page("tenant"),
    "workflow-list": Page("tenant"),
    "workflow-detail": Page("object", lambda w: WF),
    "summary-detail": Page("object", _sid("active")),
    "alerts": Page("tenant"),
    # Rule and channel forms: an empty POST re-renders the form (200) for an admin.
    "alert-rule-new": Page("tenant", get=A, post=A, post_ok=200),
    "alert-rule-detail": Page("object", lambda w: {"pk": _rule(w)}),
    "alert-rule-edit": Page("object", lambda w: {"pk": _rule(w)}, get=A, post=A, post_ok=200),
    "alert-rule-test": Page("object", lambda w: {"pk": _rule(w)}, get=None, post=A),
    "alert-rule-mute": Page(
        "object", lambda w: {"pk": _rule(w)}, get=None, post=A, data=lambda w: {"minutes": "60"}
    ),
    "alert-rule-delete": Page("object", lambda w: {"pk": _rule(w)}, get=None, post=A),
    "alert-channel-new": Page("tenant", get=A, post=A, post_ok=200),
    "alert-channel-edit": Page("object", lambda w: {"pk": _channel(w)}, get=A, post=A, post_ok=200),
    "alert-channel-test": Page("object", lambda w: {"pk": _channel(w)}, get=None, post=A),
    "alert-channel-enable": Page("object", lambda w: {"pk": _channel(w)}, get=None, post=A),
    "alert-channel-delete": Page("object", lambda w: {"pk": _channel(w)}, get=None, post=A),
    # /metrics is Prometheus' (bearer token, no session): tested below
    "prometheus-metrics": Page("tenant", get_ok=401),
    "triggers-tenant-policy": Page("tenant", post=A, data=lambda w: {"action": "reset"}),
    "triggers-simulator": Page(
        "object", query={"workflow": SEED_WF}, post=V, post_ok=200, data=lambda w: {"workflow": SEED_WF}
    ),
    "triggers-workflow-policy": Page("object", lambda w: WF, post=R, data=lambda w: {"action": "reset"}),
    "triggers-decisions": Page("object", lambda w: {"wf": SIDE_WF}),
    "artifact-detail": Page("object", lambda w: {"artifact_id": "T57"}),
    "artifact-investigate": Page(
        "object",
        lambda w: {"artifact_id": "T57"},
        get=None,
        post=R,
        data=lambda w: {"fact": "401 Unauthorized"},
    ),
    "trace-replay": Page("object", lambda w: {"trace_id": _trace(w)}),
    "trace-detail": Page("object", lambda w: {"trace_id": _trace(w)}),
    "trace-list": Page("tenant"),
    # Both tenants' summaries are by this compactor: each caller sees their own versions only.
    "compactor-detail": Page("tenant", lambda w: {"compactor": COMPACTOR["name"]}),
    "compactor-list": Page("tenant"),
    "artifact-list": Page("tenant"),
    # "o" matches ids and names in both tenants: each caller sees only their own.
    "search": Page("tenant", query={"q": "o", "all": "1"}),
    "workflow-timeline": Page("object", lambda w: WF),
    "triggers-simulator-save": Page(
        "object", get=None, post=R, data=lambda w: {"workflow": SEED_WF, "scope": "workflow"}
    ),
    "event-range": Page("object", lambda w: {"wf": SEED_WF, "from_seq": 1, "to_seq": 20}),
    "summary-diff": Page("object", _sid("active")),
    "review-inbox": Page("tenant"),
    "summary-comment": Page("object", _sid("active"), get=None, post=R, data=lambda w: {"text": "h9 note"}),
    "audit-log": Page("tenant"),
    "retention": Page("tenant", post=A, data=lambda w: {"trace_detail": "500"}),
    "settings": Page("tenant", get=A, get_ok=302),
    "settings-members": Page(
        "tenant",
        get=A,
        post=A,
        data=lambda w: {"username": "h9-page", "role": "viewer", "password": "a-long-passphrase"},
    ),
    "settings-member-role": Page(
        "object", lambda w: CAROL, get=None, post=A, data=lambda w: {"role": "reviewer"}
    ),
    "settings-member-remove": Page("object", lambda w: CAROL, get=None, post=A),
    "settings-keys": Page(
        "tenant", get=A, post=A, post_ok=200, data=lambda w: {"name": "h9", "role": "viewer"}
    ),
    "settings-key-rotate": Page("object", lambda w: _carol_key(w), get=None, post=A, post_ok=200),
    "settings-key-revoke": Page("object", lambda w: _carol_key(w), get=None, post=A),
    "workflow-purge": Page(
        "object",
        lambda w: {"wf": SIDE_WF},
        get=A,
        post=A,
        data=lambda w: {"mode": "seqs", "seqs": "3", "reason": "erasure"},
    ),
}
# One entry per review action of the summary-action page.
REVIEW_ACTIONS: dict[str, Page] = {
    "validate": Page("object", _sid("candidate"), get=R, post=R, data=lambda w: {}),
    "approve": Page(
        "object",
        _sid("awaiting"),
        get=R,
        post=R,
        data=lambda w: {"reason": "ok", "expected_revision": str(_revision(f"{REVIEW_WF}-approval"))},
    ),
    "activate": Page(
        "object",
        _sid("validated"),
        get=R,
        post=R,
        data=lambda w: {"reason": "go", "expected_revision": str(_revision(REVIEW_WF))},
    ),
    "quarantine": Page("object", _sid("candidate"), get=R, post=R, data=lambda w: {"reason": "suspicious"}),
    "reject": Page("object", _sid("candidate"), get=R, post=R, data=lambda w: {"reason": "no"}),
    "waive": Page(
        "object",
        _sid("rejected"),
        get=R,
        post=R,
        data=lambda w: {"reason": "fine", "checks": "mandatory_facts"},
    ),
    "release": Page("object", _sid("quarantined"), get=A, post=A, data=lambda w: {"reason": "cleared"}),
    "rollback": Page(
        "object",
        _sid("superseded"),
        get=R,
        post=R,
        data=lambda w: {"reason": "back", "expected_revision": str(_revision(SEED_WF))},
    ),
}


def page_names() -> list[str]:
    names = []
    for pattern in page_patterns:
        if pattern.name == "summary-action":
            from audit.review import ACTIONS

            names += [f"summary-action:{action}" for action in ACTIONS]
        else:
            names.append(pattern.name)
    return names


def _page(name: str) -> tuple[Page | None, dict[str, Any] | None]:
    if name.startswith("summary-action:"):
        action = name.split(":", 1)[1]
        spec = REVIEW_ACTIONS.get(action)
        return spec, {"action": action}
    return PAGES.get(name), None


def test_every_page_is_in_the_table():
    names = set(page_names())
    known = set(PAGES) - {"summary-action"} | {f"summary-action:{a}" for a in REVIEW_ACTIONS}
    assert names == known, (
        f"pages without an expectation: {sorted(names - known)}; stale: {sorted(known - names)}"
    )


def _web_call(w: World, party: str, method: str, url: str, data: dict[str, Any] | None, query: dict | None):
    if party == "anonymous":
        from django.test import Client

        client = Client()
        headers = {}
    else:
        client = w.parties[party].web
        headers = {"HTTP_X_CSRFTOKEN": client.cookies["csrftoken"].value}
    if method == "GET":
        return client.get(url, query or {})
    return client.post(url, data or {}, **headers)


@pytest.mark.parametrize("method", ["GET", "POST"])
@pytest.mark.parametrize("party", ["alice", "bob", "carol", "mallory", "anonymous"])
@pytest.mark.parametrize("name", page_names())
def test_page(w, name, party, method):
    spec, extra = _page(name)
    assert spec is not None, f"no expectation for page {name}: add it to PAGES"
    role = spec.get if method == "GET" else spec.post
    url = reverse(f"memoryhub:{name.split(':')[0]}", kwargs={**spec.kwargs(w), **(extra or {})})
    data = spec.data(w) if method == "POST" else None
    audit_rows = AuditEntry.objects.count()
    response = _web_call(w, party, method, url, data, spec.query)
    if name == "prometheus-metrics":
        expected = {401} if method == "GET" else {405}  # a session is not a scrape credential
    elif party == "anonymous":
        expected = {302}  # to the login page
    elif role is not None:
        expected = {_expected(spec, party, role, spec.get_ok if method == "GET" else spec.post_ok)}
    elif method == "POST":
        # A read-only page may refuse a POST or treat it as a GET; either way it changes nothing.
        expected = {405, _expected(spec, party, spec.get, spec.get_ok)}
        assert AuditEntry.objects.count() == audit_rows, f"{party} POST {url} changed something"
    else:
        expected = {405}
    assert response.status_code in expected, (
        f"{party} {method} {url}: {response.status_code}, expected {expected}"
    )
    if party == "anonymous" and response.status_code == 302:
        assert response["Location"].startswith(reverse("login"))
    if response.status_code == 200:
        text = response.content.decode()
        _no_markers(text, ACME_MARKERS if party == "mallory" else GLOBEX_MARKERS, f"{party} {method} {url}")


def test_switching_to_a_tenant_one_is_not_a_member_of_is_refused(w):
    mallory = w.parties["mallory"].web
    token = mallory.cookies["csrftoken"].value
    response = mallory.post(reverse("memoryhub:switch-tenant"), {"tenant": "acme"}, HTTP_X_CSRFTOKEN=token)
    assert response.status_code == 302
    page = mallory.get(reverse("memoryhub:workflow-list")).content.decode()
    assert "onboarding-7" in page
    _no_markers(page, ACME_MARKERS, "mallory's workflow list after asking to switch to acme")
    assert mallory.get(reverse("memoryhub:workflow-detail", kwargs=WF)).status_code == 404


@pytest.mark.parametrize("party", ["alice", "carol", "mallory", "revoked"])
def test_prometheus_scrape_with_an_api_key_exports_only_that_tenant(w, party):
    secret = w.revoked_key if party == "revoked" else w.parties[party].key.secret
    response = APIClient().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {secret}")
    if party == "revoked":
        assert response.status_code == 401
        return
    assert response.status_code == 200
    tenants = set(re.findall(r'tenant="([^"]+)"', response.content.decode()))
    assert tenants == {"globex" if party == "mallory" else "acme"}
