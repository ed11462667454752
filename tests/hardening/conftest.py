"""One world for the whole hardening package, built once and rolled back at the end.

Loading the seed scenario takes seconds, and the fuzz and isolation tests make hundreds of
requests against it, so the world lives in a transaction opened for the package; each test runs
in a savepoint inside it (pytest-django's ``db``), so whatever a test changes is undone before
the next one starts.
"""

from __future__ import annotations

import pytest
from django.db import transaction

from audit.log import sequence_all_pending
from tests.hardening.world import World, build


@pytest.fixture(scope="package")
def world(django_db_setup, django_db_blocker, tmp_path_factory) -> World:
    outer = transaction.atomic()
    try:
        with django_db_blocker.unblock():
            outer.__enter__()
            world = build(tmp_path_factory.mktemp("hardening-var"))
            # This transaction never commits, so no after-commit audit sequencer ran: sequence here.
            sequence_all_pending()
            for party in world.parties.values():
                # Log in now, outside the per-test savepoints, and pick up a CSRF cookie.
                party.web.get("/overview/")
        yield world
    finally:
        with django_db_blocker.unblock():
            transaction.set_rollback(True)
            outer.__exit__(None, None, None)


@pytest.fixture
def w(world: World, db) -> World:
    """The world, inside this test's savepoint (ids re-read: they are cheap and exact)."""
    world.refresh()
    return world


def pytest_configure(config):
    # Registered here until pyproject.toml lists it: deselect with -m "not slow".
    config.addinivalue_line(
        "markers", "slow: hardening sweeps (schema fuzzing, isolation matrix), a few minutes"
    )
