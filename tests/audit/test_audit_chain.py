"""The hash-chained audit log: verification catches edits, deletions, reordering and truncation
(tampered with raw SQL, the append-only trigger switched off inside the test), on the service,
the management command, the API and the audit page."""

from __future__ import annotations

import json
import re

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import DatabaseError, connection, transaction

from audit.log import record
from audit.models import AuditChainHead, AuditEntry
from audit.verify import export_checkpoint, verify_chain
from memoryhub.core.actors import Actor
from tests.audit.tamper import append_only_off

ACTOR = Actor.user("alice")
# Tampering behind the append-only triggers is a state no service can produce: these tests make it
# on purpose, as a table owner who drops the triggers could, to prove verification catches it.
tampering = pytest.mark.impossible_state("audit rows tampered with behind the append-only triggers")


def add_entries(tenant, n: int, action: str = "policy.update") -> None:
    for i in range(n):
        with transaction.atomic():
            record(tenant, ACTOR, action, ("policy", f"p{i}"), {"i": i, "note": f"change {i}"})


def raw(sql: str, params: list) -> None:
    with append_only_off(), connection.cursor() as cur:
        cur.execute(sql, params)


def seqs(tenant) -> list[int]:
    return list(AuditEntry.objects.filter(tenant=tenant).order_by("seq").values_list("seq", flat=True))


@pytest.fixture
def chain(tenant):
    add_entries(tenant, 8)
    return tenant


def test_untouched_chain_verifies(chain):
    result = verify_chain(chain)
    last = seqs(chain)[-1]
    assert result["ok"] is True and result["problem"] is None and result["first_bad_seq"] is None
    assert result["entries"] == last and result["head_seq"] == last
    assert result["head_hash"] == AuditEntry.objects.get(tenant=chain, seq=last).entry_hash


def test_trigger_refuses_tampering_without_the_bypass(chain):
    with pytest.raises(DatabaseError), transaction.atomic(), connection.cursor() as cur:
        cur.execute(
            "UPDATE audit_auditentry SET actor = %s WHERE tenant_id = %s AND seq = 3", ["x", chain.pk]
        )
    with pytest.raises(DatabaseError), transaction.atomic(), connection.cursor() as cur:
        cur.execute("DELETE FROM audit_auditentry WHERE tenant_id = %s AND seq = 3", [chain.pk])
    assert verify_chain(chain)["ok"]


@tampering
def test_edited_entry_is_detected(chain):
    raw("UPDATE audit_auditentry SET actor = %s WHERE tenant_id = %s AND seq = 5", ["user:mallory", chain.pk])
    result = verify_chain(chain)
    assert (result["ok"], result["problem"], result["first_bad_seq"]) == (False, "edited", 5)


@tampering
def test_edited_data_with_recomputed_hash_is_detected_by_the_next_entry(chain):
    from audit.log import compute_entry_hash

    entry = AuditEntry.objects.get(tenant=chain, seq=4)
    entry.chained_data = {"i": 999}
    new_hash = compute_entry_hash(entry)
    raw(
        "UPDATE audit_auditentry SET data = %s, entry_hash = %s WHERE tenant_id = %s AND seq = 4",
        [json.dumps({"i": 999}), new_hash, chain.pk],
    )
    result = verify_chain(chain)
    assert (result["ok"], result["problem"], result["first_bad_seq"]) == (False, "edited", 4)


@tampering
def test_edited_last_entry_with_recomputed_hash_is_caught_by_the_chain_head(chain):
    from audit.log import compute_entry_hash

    last = seqs(chain)[-1]
    entry = AuditEntry.objects.get(tenant=chain, seq=last)
    entry.actor = "user:mallory"
    raw(
        "UPDATE audit_auditentry SET actor = %s, entry_hash = %s WHERE tenant_id = %s AND seq = %s",
        ["user:mallory", compute_entry_hash(entry), chain.pk, last],
    )
    result = verify_chain(chain)
    assert (result["ok"], result["problem"], result["first_bad_seq"]) == (False, "edited", last)


@tampering
def test_deleted_entry_is_detected(chain):
    raw("DELETE FROM audit_auditentry WHERE tenant_id = %s AND seq = 6", [chain.pk])
    result = verify_chain(chain)
    assert (result["ok"], result["problem"], result["first_bad_seq"]) == (False, "deleted", 6)


@tampering
def test_deleted_first_entry_is_detected(chain):
    raw("DELETE FROM audit_auditentry WHERE tenant_id = %s AND seq = 1", [chain.pk])
    result = verify_chain(chain)
    assert (result["problem"], result["first_bad_seq"]) == ("deleted", 1)


@tampering
def test_reordered_entries_are_detected(chain):
    # Swap entries 4 and 5 by renumbering them (through a free seq to respect the unique constraint).
    raw("UPDATE audit_auditentry SET seq = 100000 WHERE tenant_id = %s AND seq = 4", [chain.pk])
    raw("UPDATE audit_auditentry SET seq = 4 WHERE tenant_id = %s AND seq = 5", [chain.pk])
    raw("UPDATE audit_auditentry SET seq = 5 WHERE tenant_id = %s AND seq = 100000", [chain.pk])
    result = verify_chain(chain)
    assert (result["ok"], result["problem"], result["first_bad_seq"]) == (False, "reordered", 4)


@tampering
def test_truncation_is_caught_by_the_chain_head(chain):
    last = seqs(chain)[-1]
    raw("DELETE FROM audit_auditentry WHERE tenant_id = %s AND seq >= %s", [chain.pk, last - 1])
    result = verify_chain(chain)
    assert (result["ok"], result["problem"], result["first_bad_seq"]) == (False, "truncated", last - 1)


@tampering
def test_truncation_with_rewritten_head_is_caught_by_a_checkpoint(chain):
    checkpoint = export_checkpoint(chain)
    last = checkpoint["seq"]
    raw("DELETE FROM audit_auditentry WHERE tenant_id = %s AND seq >= %s", [chain.pk, last - 2])
    kept = AuditEntry.objects.get(tenant=chain, seq=last - 3)
    with append_only_off():  # the head only moves forward unless its trigger is dropped too
        AuditChainHead.objects.filter(tenant=chain).update(seq=kept.seq, entry_hash=kept.entry_hash)
    assert verify_chain(chain)["ok"] is True  # without the checkpoint the cut is invisible
    result = verify_chain(chain, checkpoint)
    assert (result["ok"], result["problem"], result["first_bad_seq"]) == (False, "truncated", last - 2)


def test_checkpoint_of_a_rewritten_entry_fails(chain):
    checkpoint = {**export_checkpoint(chain), "seq": 3}
    checkpoint["entry_hash"] = "sha256:" + "0" * 64
    result = verify_chain(chain, checkpoint)
    assert (result["problem"], result["first_bad_seq"]) == ("edited", 3)


@tampering
def test_chains_are_per_tenant(chain, other_tenant):
    add_entries(other_tenant, 3)
    raw("UPDATE audit_auditentry SET action = %s WHERE tenant_id = %s AND seq = 2", ["x.y", other_tenant.pk])
    assert verify_chain(chain)["ok"] is True
    assert verify_chain(other_tenant)["problem"] == "edited"


# --- management command -----------------------------------------------------------------------------


@tampering
def test_command_exports_and_checks_a_checkpoint(chain, tmp_path, capsys):
    path = tmp_path / "acme.json"
    call_command("audit_verify", "--tenant", "acme", "--export-checkpoint", str(path))
    saved = json.loads(path.read_text())
    assert saved["tenant"] == "acme" and saved["seq"] == seqs(chain)[-1]
    assert "acme: OK" in capsys.readouterr().out
    call_command("audit_verify", "--tenant", "acme", "--checkpoint", str(path))
    raw("DELETE FROM audit_auditentry WHERE tenant_id = %s AND seq = %s", [chain.pk, saved["seq"]])
    with append_only_off():
        AuditChainHead.objects.filter(tenant=chain).update(seq=saved["seq"] - 1)
    with pytest.raises(CommandError) as exc:
        call_command("audit_verify", "--tenant", "acme", "--checkpoint", str(path))
    assert exc.value.returncode != 0
    assert "truncated" in capsys.readouterr().err


@tampering
def test_command_all_tenants_fails_when_one_is_broken(chain, other_tenant, tmp_path, capsys):
    path = tmp_path / "all.json"
    call_command("audit_verify", "--export-checkpoint", str(path))
    assert {c["tenant"] for c in json.loads(path.read_text())} == {"acme", "globex"}
    raw("DELETE FROM audit_auditentry WHERE tenant_id = %s AND seq = 2", [chain.pk])
    with pytest.raises(CommandError):
        call_command("audit_verify", "--checkpoint", str(path))
    err = capsys.readouterr().err
    assert "acme: FAILED — deleted at seq 2" in err


def test_command_rejects_a_checkpoint_for_another_tenant(chain, other_tenant, tmp_path):
    path = tmp_path / "globex.json"
    path.write_text(json.dumps(export_checkpoint(other_tenant)))
    with pytest.raises(CommandError):
        call_command("audit_verify", "--tenant", "acme", "--checkpoint", str(path))


# --- API -------------------------------------------------------------------------------------------------


@tampering
def test_api_verify(chain, carol):
    body = carol.api.get("/api/v1/audit/verify/").json()
    assert body["ok"] is True and body["head_seq"] == seqs(chain)[-1]
    raw("DELETE FROM audit_auditentry WHERE tenant_id = %s AND seq = 3", [chain.pk])
    body = carol.api.get("/api/v1/audit/verify/").json()
    assert (body["ok"], body["problem"], body["first_bad_seq"]) == (False, "deleted", 3)


def test_api_verify_with_checkpoint_params(chain, api):
    cp = export_checkpoint(chain)
    ok = api.get("/api/v1/audit/verify/", {"checkpoint_seq": cp["seq"], "checkpoint_hash": cp["entry_hash"]})
    assert ok.json()["ok"] is True
    far = api.get(
        "/api/v1/audit/verify/", {"checkpoint_seq": cp["seq"] + 5, "checkpoint_hash": cp["entry_hash"]}
    )
    assert far.json()["problem"] == "truncated"
    bad = api.get("/api/v1/audit/verify/", {"checkpoint_seq": 2})
    assert bad.status_code == 400 and bad.json()["error"] == "invalid_checkpoint"
    bad = api.get("/api/v1/audit/verify/", {"checkpoint_seq": 2, "checkpoint_hash": "nope"})
    assert bad.status_code == 400 and bad.json()["error"] == "invalid_checkpoint"


def test_api_audit_list_filters_and_paginates(chain, api, mallory):
    add_entries(chain, 3, action="summary.quarantine")
    everything = api.get("/api/v1/audit/", {"page_size": 5}).json()
    assert everything["count"] == AuditEntry.objects.filter(tenant=chain).count()
    assert len(everything["results"]) == 5 and everything["next"]
    got = [e["seq"] for e in everything["results"]]
    assert got == sorted(got, reverse=True)
    quarantines = api.get("/api/v1/audit/", {"action": "summary.quarantine"}).json()
    assert quarantines["count"] == 3
    assert api.get("/api/v1/audit/", {"action_prefix": "summary."}).json()["count"] == 3
    assert api.get("/api/v1/audit/", {"object_type": "policy", "object_id": "p2"}).json()["count"] == 2
    assert api.get("/api/v1/audit/", {"actor": "ALICE"}).json()["count"] == 11
    first = everything["results"][0]
    assert set(first) >= {
        "seq",
        "at",
        "actor",
        "action",
        "object_type",
        "object_id",
        "data",
        "prev_hash",
        "entry_hash",
    }
    # Another tenant sees only its own chain.
    assert all(
        e["action"] != "summary.quarantine" for e in mallory.api.get("/api/v1/audit/").json()["results"]
    )


def test_audit_entries_are_redacted(tenant, api):
    with transaction.atomic():
        record(
            tenant, ACTOR, "channel.create", ("channel", "c1"), {"url": "https://x", "secret": "token=abc123"}
        )
    data = api.get("/api/v1/audit/", {"action": "channel.create"}).json()["results"][0]["data"]
    assert "abc123" not in json.dumps(data)


# --- page ------------------------------------------------------------------------------------------------


@tampering
def test_audit_page_lists_filters_and_shows_chain_status(chain, carol):
    add_entries(chain, 60, action="summary.activate")
    html = carol.web.get("/audit/").content.decode()
    assert 'data-ok="true"' in html and "Hash chain verified" in html
    assert 'rel="next"' in html  # 70+ entries: paginated
    filtered = carol.web.get("/audit/", {"action": "policy."}).content.decode()
    assert len(re.findall(r'id="audit-\d+"', filtered)) == 8
    page2 = carol.web.get("/audit/", {"action": "summary.", "page": 2}).content.decode()
    assert "action=summary." in page2 and len(re.findall(r'id="audit-\d+"', page2)) == 10
    raw("UPDATE audit_auditentry SET actor = %s WHERE tenant_id = %s AND seq = 7", ["user:eve", chain.pk])
    # The page caches the walk per chain head; "Verify now" walks the whole chain again.
    broken = carol.web.get("/audit/", {"verify": "1"}).content.decode()
    assert 'data-ok="false"' in broken and "edited at seq 7" in broken


def test_audit_page_needs_login(client, chain):
    assert client.get("/audit/").status_code == 302


def test_audit_list_query_count_does_not_grow(chain, api, django_assert_max_num_queries):
    with django_assert_max_num_queries(8) as small:
        assert api.get("/api/v1/audit/").status_code == 200
    add_entries(chain, 120)
    with django_assert_max_num_queries(len(small.captured_queries)):
        assert len(api.get("/api/v1/audit/").json()["results"]) == 50
