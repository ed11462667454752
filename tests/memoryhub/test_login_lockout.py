"""Login lockout: per client address and per account, shared by every web process.

The multi-process tests start a real gunicorn (one master, several workers behind one port) on
the test database and its cache table, and fire requests from many threads at once.
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from django.conf import settings
from django.test import override_settings

from memoryhub.bench.server import running_server
from tests.conftest import PASSWORD


def login_rate(rate: str):
    return override_settings(
        REST_FRAMEWORK={
            **settings.REST_FRAMEWORK,
            "DEFAULT_THROTTLE_RATES": {**settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], "login": rate},
        }
    )


@pytest.mark.django_db
def test_one_account_is_locked_whatever_the_address(client, alice):
    with login_rate("3/min"):
        codes = [
            client.post(
                "/accounts/login/", {"username": "Alice", "password": "wrong"}, REMOTE_ADDR=f"10.0.0.{i}"
            ).status_code
            for i in range(5)
        ]
        assert codes == [200, 200, 200, 429, 429]
        # the right password does not open a locked account either
        r = client.post(
            "/accounts/login/", {"username": "alice", "password": PASSWORD}, REMOTE_ADDR="10.0.0.99"
        )
        assert r.status_code == 429 and int(r["Retry-After"]) > 0
        # another account from another address is untouched
        r = client.post("/accounts/login/", {"username": "bob", "password": "x"}, REMOTE_ADDR="10.0.1.1")
        assert r.status_code == 200


@pytest.mark.django_db
def test_one_address_is_locked_whatever_the_account(client, alice):
    with login_rate("3/min"):
        codes = [
            client.post(
                "/accounts/login/", {"username": f"user{i}", "password": "x"}, REMOTE_ADDR="10.9.9.9"
            ).status_code
            for i in range(5)
        ]
        assert codes == [200, 200, 200, 429, 429]


@pytest.mark.django_db
def test_client_address_comes_from_the_configured_proxy_header(rf):
    from memoryhub.web.login_throttle import client_address

    request = rf.post("/accounts/login/", REMOTE_ADDR="10.0.0.1", HTTP_X_FORWARDED_FOR="6.6.6.6, 1.2.3.4")
    assert client_address(request) == "10.0.0.1"  # header not configured: the TCP peer
    with override_settings(MEMORYHUB_CLIENT_IP_HEADER="X-Forwarded-For", MEMORYHUB_TRUSTED_PROXIES=1):
        assert client_address(request) == "1.2.3.4"  # what our proxy saw; 6.6.6.6 is client-written
    with override_settings(MEMORYHUB_CLIENT_IP_HEADER="X-Forwarded-For", MEMORYHUB_TRUSTED_PROXIES=2):
        assert client_address(request) == "6.6.6.6"
    with override_settings(MEMORYHUB_CLIENT_IP_HEADER="X-Real-IP"):
        assert client_address(rf.post("/", REMOTE_ADDR="10.0.0.1", HTTP_X_REAL_IP="5.5.5.5")) == "5.5.5.5"
        assert client_address(rf.post("/", REMOTE_ADDR="10.0.0.1")) == "10.0.0.1"


def csrf_client(base: str) -> tuple[dict, str]:
    r = httpx.get(f"{base}/accounts/login/", timeout=30)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', r.text).group(1)
    return dict(r.cookies), token


def fire(base: str, attempts: list[tuple[str, str, str]], threads: int = 12) -> list[int]:
    """POST every (username, password, forwarded address) at once; the status codes, in order."""
    cookies, token = csrf_client(base)

    def post(attempt):
        username, password, address = attempt
        r = httpx.post(
            f"{base}/accounts/login/",
            data={"username": username, "password": password, "csrfmiddlewaretoken": token},
            cookies=cookies,
            headers={"X-Forwarded-For": address, "Referer": f"{base}/accounts/login/"},
            timeout=60,
        )
        return r.status_code

    with ThreadPoolExecutor(threads) as pool:
        return list(pool.map(post, attempts))


@pytest.mark.django_db(transaction=True)
def test_ninety_guesses_against_four_gunicorn_workers_stop_at_the_limit(alice):
    limit = 10
    env = {
        "MEMORYHUB_THROTTLE_LOGIN": f"{limit}/min",
        "MEMORYHUB_CLIENT_IP_HEADER": "X-Forwarded-For",
    }
    with running_server(workers=4, env=env) as base:
        # one account from 90 addresses: the account budget holds across the workers
        codes = fire(base, [("alice", f"guess-{i}", f"203.0.113.{i}") for i in range(90)])
        assert codes.count(200) == limit, codes  # the form again, "wrong password"
        assert codes.count(429) == 90 - limit, codes
        # one address trying 90 accounts: the address budget holds too
        codes = fire(base, [(f"user-{i}", "guess", "198.51.100.7") for i in range(90)])
        assert codes.count(200) == limit and codes.count(429) == 90 - limit, codes
        # alice's correct password is refused while her account is locked
        assert fire(base, [("alice", PASSWORD, "192.0.2.1")]) == [429]


@pytest.mark.django_db(transaction=True)
def test_two_web_processes_share_one_api_throttle_budget(alice, bob):
    """The review throttle's budget is the caller's, not each process's: 2 workers, one port."""
    limit = 5
    with running_server(workers=2, env={"MEMORYHUB_THROTTLE_REVIEW": f"{limit}/min"}) as base:
        url = f"{base}/api/v1/summaries/sum_0000000000000000/approve/"

        def approve(_):
            return httpx.post(
                url,
                json={"reason": "ok"},
                headers={"Authorization": f"Bearer {bob.key.secret}"},
                timeout=60,
            ).status_code

        with ThreadPoolExecutor(8) as pool:
            codes = list(pool.map(approve, range(30)))
        assert codes.count(404) == limit and codes.count(429) == 30 - limit, codes
        # another key's budget is its own
        r = httpx.post(
            url, json={"reason": "ok"}, headers={"Authorization": f"Bearer {alice.key.secret}"}, timeout=60
        )
        assert r.status_code == 404
