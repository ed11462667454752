"""Secrets and configured PII never reach audit entries, logs or error messages."""

from __future__ import annotations

import logging

import pytest
from django.db import transaction
from django.test import override_settings

from audit.log import record
from audit.models import AuditEntry
from memoryhub.core.actors import Actor
from memoryhub.core.redaction import MASK, redact, redact_text

SECRETS = [
    "mh_1a2b3c4d_SuperSecretTokenValue1234567890",
    "sk-live-ABCDEFGHIJKLMNOPQRSTUVWX",
    "AKIAIOSFODNN7EXAMPLE",
    "Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig",
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----",
]


@pytest.mark.parametrize("secret", SECRETS)
def test_known_secret_shapes_are_masked(secret):
    masked = redact_text(f"before {secret} after")
    assert MASK in masked and secret not in masked and masked.startswith("before")


def test_emails_masked_when_enabled_and_custom_patterns():
    from memoryhub.core import redaction

    with override_settings(MEMORYHUB_REDACT_EMAILS=True, MEMORYHUB_REDACT_PATTERNS=[r"CUST-\d{6}"]):
        redaction._compiled.cache_clear()
        assert redact_text("mail jane@example.com about CUST-123456") == f"mail {MASK} about {MASK}"
    with override_settings(MEMORYHUB_REDACT_EMAILS=False, MEMORYHUB_REDACT_PATTERNS=[]):
        redaction._compiled.cache_clear()
        assert redact_text("mail jane@example.com") == "mail jane@example.com"
    redaction._compiled.cache_clear()


def test_nested_values_and_secret_named_keys():
    data = redact({"channel": {"secret": "hunter2", "url": "https://x"}, "notes": [f"key {SECRETS[0]}"]})
    assert data["channel"]["secret"] == MASK and data["channel"]["url"] == "https://x"
    assert SECRETS[0] not in data["notes"][0]


@pytest.mark.django_db
def test_audit_entries_are_redacted_before_writing(tenant):
    with transaction.atomic():
        entry = record(
            tenant,
            Actor.system("t"),
            "channel.create",
            ("channel", 1),
            {"url": "https://hooks.example/x", "secret": "s3cr3t", "note": f"token {SECRETS[1]}"},
        )
    stored = AuditEntry.objects.get(pk=entry.pk)
    assert stored.data["secret"] == MASK and SECRETS[1] not in str(stored.data)


def test_log_records_are_redacted(caplog):
    from memoryhub.core.redaction import RedactingFilter

    logger = logging.getLogger("memoryhub.test")
    handler_filter = RedactingFilter()
    record_ = logger.makeRecord(
        "memoryhub.test", logging.WARNING, __file__, 1, "auth with %s failed", (SECRETS[0],), None
    )
    handler_filter.filter(record_)
    assert SECRETS[0] not in record_.getMessage() and MASK in record_.getMessage()


@pytest.mark.django_db
def test_error_messages_do_not_echo_secrets(api):
    from rest_framework.test import APIClient

    r = APIClient().get("/api/v1/workflows/", HTTP_AUTHORIZATION=f"Bearer {SECRETS[0]}")
    assert r.status_code == 401 and SECRETS[0] not in r.content.decode()
    r = api.post(
        "/api/v1/workflows/",
        data='{"external_id": "' + SECRETS[1] + '" oops',
        content_type="application/json",
    )
    assert r.status_code == 400 and SECRETS[1] not in r.content.decode()
