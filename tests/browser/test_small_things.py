"""The small things that add up, each in a real browser at a phone and a laptop width:
the tenant switcher waits for a deliberate Switch, Rotate asks first, keys can be copied, the
channel form shows the fields of its kind, words in narrow cells stay whole, /alerts/ fits 390 px."""

from __future__ import annotations

import pytest
from django.db import connections

from memoryhub.accounts.tenancy import add_member
from memoryhub.models import ApiKey, Role
from tests.conftest import PASSWORD

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WIDTHS = (390, 1280)


@pytest.fixture(autouse=True)
def _close_connections():
    yield
    connections.close_all()  # ORM calls made inside Playwright's loop hold their own connection


def scroll_width(page) -> int:
    return page.evaluate("document.documentElement.scrollWidth")


def test_tenant_switcher_waits_for_switch(page, login, live_server, alice, other_tenant):
    add_member(other_tenant, "alice", Role.VIEWER)
    login("alice", PASSWORD)
    page.goto(f"{live_server.url}/workflows/")
    select = page.locator("#tenant-select")
    before = select.input_value()
    select.focus()
    page.keyboard.press("ArrowDown")  # browsing the options must not switch
    page.wait_for_timeout(400)
    page.reload()
    assert page.locator("#tenant-select").input_value() == before
    page.locator("#tenant-select").select_option("globex")
    page.click("button.tenant-switch-go")
    page.wait_for_load_state()
    assert page.locator("#tenant-select").input_value() == "globex"


def test_rotate_asks_first_and_the_new_secret_can_be_copied(page, login, live_server, alice, tenant):
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    login("alice", PASSWORD)
    page.goto(f"{live_server.url}/settings/keys/")
    page.fill("#id_name", "laptop")
    page.click("#create-key button[type=submit]")
    secret = page.inner_text("[data-testid=secret]").strip()
    page.click("[data-testid=copy-secret]")
    page.wait_for_function("document.querySelector('[data-testid=copy-secret]').textContent === 'Copied'")
    assert page.evaluate("navigator.clipboard.readText()") == secret

    key = ApiKey.objects.get(tenant=tenant, name="laptop")
    page.goto(f"{live_server.url}/settings/keys/")
    messages: list[str] = []

    def dismiss(dialog):
        messages.append(dialog.message)
        dialog.dismiss()

    page.once("dialog", dismiss)
    page.locator(f"tr[data-prefix='{key.prefix}'] button[data-action=rotate]").click()
    page.wait_for_timeout(300)
    assert messages and "Rotate laptop?" in messages[0]
    key.refresh_from_db()
    assert key.revoked_at is None  # dismissed: nothing happened

    page.once("dialog", lambda dialog: dialog.accept())
    page.locator(f"tr[data-prefix='{key.prefix}'] button[data-action=rotate]").click()
    page.wait_for_selector("[data-testid=secret]")
    key.refresh_from_db()
    assert key.revoked_at is not None


@pytest.mark.parametrize("width", WIDTHS)
def test_channel_form_shows_the_fields_of_its_kind(page, login, live_server, alice, width):
    page.set_viewport_size({"width": width, "height": 900})
    login("alice", PASSWORD)
    page.goto(f"{live_server.url}/alerts/channels/new/")

    def visible(name: str) -> bool:
        return page.locator(f"#channel-form [name={name}]").is_visible()

    page.select_option("#channel-form select[name=kind]", "webhook")
    assert visible("url") and visible("secret") and not visible("email")
    page.select_option("#channel-form select[name=kind]", "email")
    assert visible("email") and not visible("url") and not visible("secret")
    page.select_option("#channel-form select[name=kind]", "slack")
    assert visible("url") and not visible("secret") and not visible("email")
    assert scroll_width(page) <= width


@pytest.mark.parametrize("width", WIDTHS)
def test_alerts_page_fits_and_its_words_stay_whole(page, login, live_server, alice, width):
    page.set_viewport_size({"width": width, "height": 900})
    login("alice", PASSWORD)
    page.goto(f"{live_server.url}/alerts/")
    assert scroll_width(page) <= width
    # Every table header and state label sits on one line per word: no "decisio/n", no
    # letter-stacked states (a word broken inside has a line box narrower than the word).
    broken = page.evaluate(
        """() => [...document.querySelectorAll('.table th, .table .state, .table .badge')]
            .filter(el => el.textContent.trim() && !el.textContent.trim().includes(' '))
            .filter(el => {
              const range = document.createRange();
              range.selectNodeContents(el);
              return new Set([...range.getClientRects()].map(r => Math.round(r.top))).size > 1;
            })
            .map(el => el.textContent.trim())"""
    )
    assert broken == []
