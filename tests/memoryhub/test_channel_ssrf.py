"""Channels cannot forge requests into the deployment's network.

Refused at create/update (API and pages, 400, nothing written) and again at send time after the
name is resolved anew; only MEMORYHUB_CHANNEL_ALLOWED_NETWORKS lets a non-public address through.
Delivery errors never carry the receiver's words, and non-admins see no delivery internals.
"""

from __future__ import annotations

import socket

import pytest

from audit.models import AuditEntry
from memoryhub.models import Channel, Notification
from memoryhub.observe.alerting.deliver import send_test
from tests.helpers import Receiver, form_post

PUBLIC_IP = "93.184.216.34"  # documentation-style public address: never actually connected to

UNSAFE_URLS = [
    "http://127.0.0.1:8080/hook",
    "http://localhost/hook",
    "http://[::1]/hook",
    "http://10.1.2.3/hook",
    "http://172.16.0.9/hook",
    "http://192.168.0.1/hook",
    "http://[fd12:3456::1]/hook",
    "http://169.254.169.254/latest/meta-data/",  # cloud metadata
    "http://[fe80::1]/hook",
    "http://0.0.0.0/hook",
    "http://[::]/hook",
    "http://2130706433/hook",  # 127.0.0.1 as an integer
    "http://0x7f000001/hook",  # ... in hex
    "http://0177.0.0.1/hook",  # ... in octal
    "http://127.1/hook",  # ... in short form
    "http://[::ffff:169.254.169.254]/hook",  # IPv4-mapped IPv6
    "http://100.64.0.1/hook",  # carrier-grade NAT
    "https://user:secret@hooks.example.com/hook",  # credentials
]


@pytest.fixture
def receiver():
    server = Receiver().start()
    yield server
    server.stop()


def fake_dns(monkeypatch, answers: dict[str, str]) -> None:
    """The network edge: what a name resolves to (everything else resolves as usual)."""
    real = socket.getaddrinfo

    def getaddrinfo(host, port, *args, **kwargs):
        if host in answers:
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (answers[host], port or 0))]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


def webhook(api, url: str):
    return api.post(
        "/api/v1/channels/", {"kind": "webhook", "name": "ops", "url": url, "secret": "s"}, format="json"
    )


@pytest.mark.parametrize("url", UNSAFE_URLS)
@pytest.mark.parametrize("kind", ["webhook", "slack"])
def test_unsafe_urls_are_refused_at_create_and_write_nothing(alice, tenant, url, kind):
    audit_rows = AuditEntry.objects.count()
    response = alice.api.post("/api/v1/channels/", {"kind": kind, "name": "ops", "url": url}, format="json")
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["error"] in ("unsafe_url", "invalid_url") and body["field"] == "url", body
    assert not Channel.objects.exists() and AuditEntry.objects.count() == audit_rows


@pytest.mark.parametrize("url", UNSAFE_URLS)
def test_unsafe_urls_are_refused_at_update(alice, tenant, monkeypatch, url):
    fake_dns(monkeypatch, {"hooks.example.com": PUBLIC_IP})
    created = webhook(alice.api, "https://hooks.example.com/ops")
    assert created.status_code == 201, created.content
    pk = created.json()["id"]
    response = alice.api.patch(f"/api/v1/channels/{pk}/", {"url": url}, format="json")
    assert response.status_code == 400 and response.json()["field"] == "url"
    assert Channel.objects.get(pk=pk).url == "https://hooks.example.com/ops"


def test_the_channel_page_refuses_an_unsafe_url(alice, tenant):
    response = form_post(
        alice.web,
        "/alerts/channels/new/",
        {"kind": "webhook", "name": "ops", "url": "http://169.254.169.254/latest/", "timeout_seconds": 5},
    )
    assert response.status_code in (200, 400) and b"not a public address" in response.content
    assert not Channel.objects.exists()


def test_a_name_that_resolves_to_a_private_address_is_refused(alice, tenant, monkeypatch):
    fake_dns(monkeypatch, {"internal.example.com": "10.0.0.7"})
    response = webhook(alice.api, "https://internal.example.com/hook")
    assert response.status_code == 400 and "10.0.0.7" in response.json()["detail"]


def test_the_allow_list_is_the_only_way_to_a_local_receiver(alice, tenant, settings, receiver):
    assert webhook(alice.api, receiver.url("/ok")).status_code == 400
    settings.MEMORYHUB_CHANNEL_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    created = webhook(alice.api, receiver.url("/ok"))
    assert created.status_code == 201, created.content
    (notification,) = send_test(channel_id=created.json()["id"])
    assert notification.ok and receiver.requests[0]["json"]["event"] == "test"
    # Only the listed network: another loopback address is still refused.
    assert webhook(alice.api, "http://127.0.0.2/hook").status_code == 400


def test_a_name_rebound_to_loopback_after_create_is_refused_at_send(tenant, alice, receiver, monkeypatch):
    port = receiver.server.server_address[1]
    fake_dns(monkeypatch, {"hooks.example.com": PUBLIC_IP})
    created = webhook(alice.api, f"http://hooks.example.com:{port}/ok")
    assert created.status_code == 201, created.content
    fake_dns(monkeypatch, {"hooks.example.com": "127.0.0.1"})  # DNS now points inside

    (notification,) = send_test(channel_id=created.json()["id"])
    assert not notification.ok and "127.0.0.1 is a loopback address" in notification.error
    assert receiver.requests == []  # nothing reached the inside
    channel = Channel.objects.get(pk=created.json()["id"])
    assert channel.disabled_at is not None  # a refused URL is a permanent error


def test_send_connects_to_the_address_it_checked_and_keeps_the_host_name(
    tenant, alice, receiver, monkeypatch, settings
):
    """The check and the connection use one resolution; the receiver still sees its host name."""
    settings.MEMORYHUB_CHANNEL_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    port = receiver.server.server_address[1]
    fake_dns(monkeypatch, {"hooks.example.com": "127.0.0.1"})
    created = webhook(alice.api, f"http://hooks.example.com:{port}/ok")
    assert created.status_code == 201
    calls = []
    real = socket.getaddrinfo

    def counting(host, *args, **kwargs):
        calls.append(host)
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", counting)
    (notification,) = send_test(channel_id=created.json()["id"])
    assert notification.ok, notification.error
    assert receiver.requests[0]["headers"]["Host"] == f"hooks.example.com:{port}"
    assert calls.count("hooks.example.com") == 1  # resolved once, by the guard; never by httpx


def test_delivery_errors_never_echo_the_remote_body(tenant, alice, settings, receiver):
    settings.MEMORYHUB_CHANNEL_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    pk = webhook(alice.api, receiver.url("/status/500")).json()["id"]
    (notification,) = send_test(channel_id=pk)
    assert notification.error == "HTTP 500 Internal Server Error" and notification.status_code == 500
    assert "nope" not in Channel.objects.get(pk=pk).last_error  # the receiver's body: {"error": "nope"}


def test_viewers_see_no_delivery_internals(tenant, alice, carol, settings, receiver):
    settings.MEMORYHUB_CHANNEL_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    pk = webhook(alice.api, receiver.url("/status/404")).json()["id"]  # 404: permanent, disables
    send_test(channel_id=pk)
    assert Notification.objects.filter(channel_id=pk, status_code=404).exists()

    admin = alice.api.get(f"/api/v1/channels/{pk}/").json()
    viewer = carol.api.get(f"/api/v1/channels/{pk}/").json()
    assert "404" in admin["last_error"] and "404" in admin["disabled_reason"] and "/status/" in admin["url"]
    assert viewer["last_error"] == "" and "404" not in viewer["disabled_reason"]
    assert "/status/" not in viewer["url"] and viewer["enabled"] is False

    admin_rows = alice.api.get(f"/api/v1/channels/{pk}/notifications/").json()["notifications"]
    viewer_rows = carol.api.get(f"/api/v1/channels/{pk}/notifications/").json()["notifications"]
    assert admin_rows[0]["status_code"] == 404 and admin_rows[0]["error"]
    assert viewer_rows[0]["status_code"] is None and viewer_rows[0]["error"] == ""
    assert viewer_rows[0]["ok"] is False

    page = carol.web.get("/alerts/").content.decode()
    assert "Not Found" not in page and "Disabled" in page and "/status/" not in page
    assert "Not Found" in alice.web.get("/alerts/").content.decode()
