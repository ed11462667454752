"""Opaque summaries (a framework's encrypted compaction): accepted with digest and size, and
validated as "unverifiable content" — never as passed."""

from __future__ import annotations

import hashlib

import pytest

from memoryhub.core.actors import Actor
from memoryhub.core.canonical import canonical_bytes, sha256_hex
from memoryhub.core.errors import InvalidInput
from memoryhub.memory import lifecycle
from memoryhub.memory.events import EventIn, append_events
from memoryhub.memory.summaries import check_content, create_summary
from memoryhub.memory.validation import CHECK_NAMES, CONTENT_CHECKS, validate_summary
from memoryhub.memory.workflows import create_workflow
from tests.memoryhub.test_validation import EVENTS, base_content

ENCRYPTED = b"gAAAAABn-encrypted-compaction-item"
OPAQUE = {
    "narrative": "",
    "facts": [],
    "opaque": True,
    "opaque_digest": "sha256:" + hashlib.sha256(ENCRYPTED).hexdigest(),
    "opaque_size": len(ENCRYPTED),
}


def test_opaque_content_is_unverifiable_not_passed():
    data = canonical_bytes(OPAQUE)
    outcome = validate_summary(data, sha256_hex(data), 1, 6, EVENTS, None, 2000, 6)
    assert not outcome.passed
    readable = outcome.check("content_readable")
    assert not readable["passed"] and readable["detail"].startswith("unverifiable content")
    assert OPAQUE["opaque_digest"] in readable["detail"] and f"{len(ENCRYPTED)} bytes" in readable["detail"]
    names = {c["name"] for c in outcome.checks}
    # The content checks could not run, so they are not reported as passed either.
    assert not names & CONTENT_CHECKS
    assert names == set(CHECK_NAMES) - CONTENT_CHECKS
    # What can be checked without the text still is: hash, coverage, tool pairs.
    assert all(c["passed"] for c in outcome.checks if c["name"] != "content_readable")
    assert outcome.reasons == [f"content_readable: {readable['detail']}"]


def test_readable_content_passes_the_readability_check():
    data = canonical_bytes(base_content())
    outcome = validate_summary(data, sha256_hex(data), 1, 6, EVENTS, None, 2000, 6)
    assert outcome.passed and outcome.check("content_readable")["passed"]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"opaque": False}, "content.opaque"),
        ({"opaque": "yes"}, "content.opaque"),
        ({"opaque_digest": "md5:abc"}, "content.opaque_digest"),
        ({"opaque_digest": "sha256:" + "A" * 64}, "content.opaque_digest"),
        ({"opaque_size": -1}, "content.opaque_size"),
        ({"opaque_size": True}, "content.opaque_size"),
    ],
)
def test_malformed_opaque_markers_are_refused(change, field):
    with pytest.raises(InvalidInput) as caught:
        check_content({**OPAQUE, **change}, 1, 6)
    assert caught.value.extra["field"] == field


def test_digest_without_the_flag_is_refused():
    content = {"narrative": "x", "facts": [], "opaque_size": 3}
    with pytest.raises(InvalidInput):
        check_content(content, 1, 1)


@pytest.mark.django_db
def test_an_opaque_candidate_is_rejected_as_unverifiable(tenant):
    actor = Actor.system("test")
    wf, _ = create_workflow(tenant, "opaque-wf", actor=actor)
    append_events(wf, [EventIn(kind="message", content="hello", role="user")])
    summary = create_summary(
        wf, content=OPAQUE, covers_from_seq=1, covers_to_seq=1, compactor={"name": "x"}, actor=actor
    )
    lifecycle.validate(summary, actor)
    summary.refresh_from_db()
    record = summary.validations.get()
    assert summary.status == "REJECTED" and not record.passed
    assert any("unverifiable content" in r for r in record.reasons)


@pytest.mark.django_db
def test_a_reviewer_may_waive_unverifiable_content(tenant):
    actor = Actor.system("test")
    wf, _ = create_workflow(tenant, "opaque-waive", actor=actor)
    append_events(wf, [EventIn(kind="message", content="hello", role="user")])
    summary = create_summary(
        wf, content=OPAQUE, covers_from_seq=1, covers_to_seq=1, compactor={"name": "x"}, actor=actor
    )
    lifecycle.validate(summary, actor)
    lifecycle.waive(summary, ["content_readable"], Actor.user("bob"), "provider compaction, accepted as is")
    summary.refresh_from_db()
    assert summary.status == "VALIDATED"
    assert summary.validations.order_by("-id").first().waived_checks == ["content_readable"]
