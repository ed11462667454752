"""The simulator can save: a shareable URL reproduces a simulation, and "Save as policy" shows the
diff against the policy in force and saves it with the policy pages' roles (reviewer: workflow
override, admin: tenant default), audited; viewers and outsiders cannot."""

from __future__ import annotations

import html as htmllib
import re
from urllib.parse import urlsplit

import pytest

from audit.models import AuditEntry
from memoryhub.core.actors import Actor
from tests.factories import append, event, make_workflow
from tests.helpers import form_post
from tests.triggers.test_pages import form_data
from triggers import policy, services
from triggers.models import ContextPolicy

pytestmark = pytest.mark.django_db

TIGHT = {"context_window": 16_000, "reserve_retrieval": 1_000, "target_tokens": 2_000}


@pytest.fixture
def wf(tenant):
    workflow = make_workflow(tenant, "wf-sim")
    agents = ["requirements"] * 4 + ["tests"] * 4 + ["reviewer"] * 4
    append(workflow, [event(i, agent=a, content="token " * 900) for i, a in enumerate(agents, start=1)])
    return workflow


def simulate(party, **changes):
    data = form_data(**(TIGHT | changes)) | {"workflow": "wf-sim", "group": "event"}
    response = form_post(party.web, "/triggers/simulator/?workflow=wf-sim", data)
    assert response.status_code == 200
    return response.content.decode()


def counts(page: str) -> dict[str, str]:
    return dict(re.findall(r'<tr data-count="(\w+)"><td>[^<]*</td><td>[^<]*</td><td>(\d+)</td>', page))


def test_share_url_reproduces_the_simulation(carol, wf):
    page = simulate(carol)
    url = htmllib.unescape(
        re.search(r'id="sim-share-url" type="text" readonly value="([^"]+)"', page).group(1)
    )
    parts = urlsplit(url)
    assert parts.path == "/triggers/simulator/" and "run=1" in parts.query and "csrf" not in parts.query
    again = carol.web.get(f"{parts.path}?{parts.query}").content.decode()
    assert counts(again) == counts(page) and counts(page)["compactions"] != "0"
    assert 'value="16000"' in again  # the candidate form is filled in as shared
    assert not ContextPolicy.objects.exists()  # simulating writes nothing


def test_diff_lists_exactly_the_changed_fields(bob, wf):
    page = simulate(bob)
    fields = re.findall(r'<tr data-field="([^"]+)">', page)
    assert set(fields) == {"context_window", "reserve_retrieval", "target_tokens"}
    assert "<del>32000</del>" in page and "<ins>16000</ins>" in page


def test_policy_diff_service():
    from triggers.engine import PolicySpec

    current = PolicySpec()
    candidate = services.parse_policy(current.to_dict() | {"target_tokens": 5_000})
    assert services.policy_diff(current, candidate) == [
        {"field": "target_tokens", "current": current.target_tokens, "candidate": 5_000}
    ]
    assert services.policy_diff(current, current) == []


def _save(party, scope: str):
    page = simulate(party)
    pairs = re.findall(
        r'<input type="hidden" name="([^"]+)" value="([^"]*)">',
        page.split('id="save-policy-form"')[1].split("</form>")[0],
    )
    data = {k: htmllib.unescape(v) for k, v in pairs} | {"scope": scope}
    return form_post(party.web, "/triggers/simulator/save/", data)


def test_reviewer_saves_the_workflow_override_audited(bob, wf, tenant):
    response = _save(bob, "workflow")
    assert response.status_code == 302 and response["Location"] == "/triggers/workflows/wf-sim/policy/"
    spec, source, _ = policy.effective_policy(tenant, wf)
    assert source == "workflow" and spec.context_window == 16_000 and spec.target_tokens == 2_000
    assert AuditEntry.objects.filter(tenant=tenant, action="policy.update").count() == 1
    assert not ContextPolicy.objects.filter(workflow__isnull=True).exists()


def test_tenant_default_needs_admin(bob, alice, wf, tenant):
    assert "as the tenant default" not in simulate(bob)
    assert _save(bob, "tenant").status_code == 403
    assert not ContextPolicy.objects.exists()
    response = _save(alice, "tenant")
    assert response.status_code == 302 and response["Location"] == "/triggers/policy/"
    assert policy.effective_policy(tenant, None)[0].context_window == 16_000


def test_viewer_sees_the_diff_but_cannot_save(carol, wf):
    page = simulate(carol)
    assert 'id="policy-diff"' in page and 'id="save-policy-form"' not in page
    data = form_data(**TIGHT) | {"workflow": "wf-sim", "scope": "workflow"}
    assert form_post(carol.web, "/triggers/simulator/save/", data).status_code == 403
    assert not ContextPolicy.objects.exists()


def test_invalid_candidate_or_other_tenant_saves_nothing(bob, mallory, wf):
    simulate(bob)
    bad = form_data(target_tokens=30_000) | {"workflow": "wf-sim", "scope": "workflow"}
    response = form_post(bob.web, "/triggers/simulator/save/", bad)
    assert response.status_code == 302 and response["Location"].startswith("/triggers/simulator/?")
    assert not ContextPolicy.objects.exists()
    data = form_data(**TIGHT) | {"workflow": "wf-sim", "scope": "workflow"}
    response = form_post(mallory.web, "/triggers/simulator/save/", data, page="/triggers/simulator/")
    assert response.status_code in (403, 404)
    assert not ContextPolicy.objects.exists()


def test_reviewer_cannot_switch_approval_off_through_the_simulator(bob, alice, wf, tenant):
    """The simulator saves with the caller's role, like the policy pages: only an admin may lower
    require_approval (a reviewer's candidate without it is refused and nothing is saved)."""
    services.save_policy(tenant, {"require_approval": True}, Actor.user("alice"), workflow=wf, partial=True)
    before = AuditEntry.objects.filter(action="policy.update").count()
    response = _save(bob, "workflow")  # the candidate form posts no require_approval: off
    assert response.status_code == 302 and response["Location"].startswith("/triggers/simulator/?")
    assert services.effective_policy(tenant, wf)[0].require_approval is True
    assert AuditEntry.objects.filter(action="policy.update").count() == before
    assert _save(alice, "workflow").status_code == 302
    assert services.effective_policy(tenant, wf)[0].require_approval is False
