"""One login policy for every door: the lockout budgets are shared by /accounts/login/,
/admin/login/ and any login view the URL resolver holds, and keyed by the account Django logs
into (NFKC-normalised, case-folded), not by the username as typed.

The admin site is off by default (MEMORYHUB_ADMIN_SITE); these tests run with it on."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import AuthenticationForm
from django.core.cache import cache
from django.test import Client, override_settings
from django.urls import URLPattern, URLResolver, get_resolver

from memoryhub.web.login_throttle import account_key
from tests.conftest import PASSWORD

LIMIT = 3
FULL_WIDTH = "ａｌｉｃｅ"  # U+FF41…: NFKC makes it "alice"
VARIANTS = ["alice", "ALICE", FULL_WIDTH, " alice ", "ＡＬＩＣＥ", "Alice"]


def _login_doors() -> list[str]:
    """Every URL whose view is a login form: LoginView subclasses and admin sites' login."""
    doors = []

    def walk(resolver: URLResolver, prefix: str) -> None:
        for entry in resolver.url_patterns:
            route = prefix + str(entry.pattern)
            if isinstance(entry, URLResolver):
                walk(entry, route)
            elif isinstance(entry, URLPattern):
                view = entry.callback
                view_class = getattr(view, "view_class", None)
                is_login_view = isinstance(view_class, type) and issubclass(view_class, auth_views.LoginView)
                is_admin_login = getattr(view, "__name__", "") == "login" and "admin" in getattr(
                    view, "__module__", ""
                )
                if is_login_view or is_admin_login:
                    doors.append("/" + route.lstrip("^").rstrip("$"))

    walk(get_resolver(ADMIN_URLCONF), "")
    return sorted(set(doors))


ADMIN_URLCONF = "tests.hardening.urls_with_admin"
DOORS = _login_doors()
pytestmark = pytest.mark.urls(ADMIN_URLCONF)


def login_rate(rate: str):
    rates = {**settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], "login": rate}
    return override_settings(REST_FRAMEWORK={**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": rates})


STAFF = pytest.mark.impossible_state(
    "admin-site access (is_staff) is granted by manage.py createsuperuser, which no MemoryHub service does"
)


@pytest.fixture
def staff_alice(alice):
    alice.user.is_staff = alice.user.is_superuser = True
    alice.user.save()
    cache.clear()
    return alice


def _post(door: str, username: str, password: str, address: str):
    return Client().post(door, {"username": username, "password": password}, REMOTE_ADDR=address)


def test_the_doors_include_the_site_login_and_the_admin_login():
    assert {"/accounts/login/", "/admin/login/"} <= set(DOORS), DOORS


def test_the_admin_site_is_off_unless_switched_on():
    from django.conf import settings as live

    assert live.MEMORYHUB_ADMIN_SITE is False
    assert not any(str(p.pattern) == "admin/" for p in get_resolver("memoryhub.urls").url_patterns)


def test_every_variant_is_the_account_django_logs_into():
    # Ground truth from Django's own login form, not from the code under test.
    field = AuthenticationForm().fields["username"]
    for variant in VARIANTS:
        assert field.clean(variant).casefold() == "alice", variant
        assert account_key(variant) == "alice", variant
    assert account_key("bob") != account_key("alice")


@pytest.mark.django_db
@STAFF
def test_the_full_width_spelling_logs_in_as_alice(staff_alice):
    r = _post("/accounts/login/", FULL_WIDTH, PASSWORD, "10.20.0.1")
    assert r.status_code == 302 and int(r.wsgi_request.session["_auth_user_id"]) == staff_alice.user.pk


@pytest.mark.django_db
@STAFF
@pytest.mark.parametrize("door", DOORS)
def test_spelling_variants_share_one_account_budget_on_every_door(door, staff_alice):
    with login_rate(f"{LIMIT}/min"):
        codes = [
            _post(door, variant, "wrong", f"10.21.0.{i}").status_code for i, variant in enumerate(VARIANTS)
        ]
        assert codes == [200] * LIMIT + [429] * (len(VARIANTS) - LIMIT), codes
        # the right password, in a fresh spelling from a fresh address, is refused too
        r = _post(door, "ａｌｉｃｅ", PASSWORD, "10.21.1.1")
        assert r.status_code == 429 and int(r["Retry-After"]) > 0
        assert "_auth_user_id" not in r.wsgi_request.session
        # another account is untouched
        assert _post(door, "bob", "wrong", "10.21.1.2").status_code == 200


@pytest.mark.django_db
@STAFF
@pytest.mark.parametrize("locked_on", DOORS)
def test_an_account_locked_on_one_door_is_locked_on_every_door(locked_on, staff_alice):
    with login_rate(f"{LIMIT}/min"):
        for i in range(LIMIT):
            assert _post(locked_on, "alice", "wrong", f"10.22.0.{i}").status_code == 200
        for door in DOORS:
            r = _post(door, "Alice", PASSWORD, "10.22.9.9")
            assert r.status_code == 429, (locked_on, door, r.status_code)
            assert "_auth_user_id" not in r.wsgi_request.session


@pytest.mark.django_db
@STAFF
def test_one_address_budget_across_the_doors(staff_alice):
    with login_rate(f"{LIMIT}/min"):
        codes = [
            _post(DOORS[i % len(DOORS)], f"user{i}", "x", "10.23.0.1").status_code for i in range(LIMIT + 2)
        ]
        assert codes == [200] * LIMIT + [429, 429], codes


@pytest.mark.django_db
@STAFF
def test_the_admin_door_takes_the_right_password_while_the_budget_lasts(staff_alice):
    with login_rate(f"{LIMIT}/min"):
        r = _post("/admin/login/", "alice", PASSWORD, "10.24.0.1")
        assert r.status_code == 302 and r.wsgi_request.user.is_staff
