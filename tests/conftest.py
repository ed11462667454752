"""Shared fixtures: a tenant with an admin (alice), a reviewer (bob), a viewer (carol) and an
outsider from another tenant (mallory), each with a logged-in web client and an API client."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from io import StringIO
from pathlib import Path

import pytest
from django.conf import settings
from django.test import override_settings
from rest_framework.test import APIClient

from memoryhub.accounts.tenancy import add_member, create_tenant, issue_api_key
from memoryhub.models import Role
from tests.snapshots import Snapshot

PASSWORD = "correct-horse-battery"


def pytest_configure(config):
    """Settings create no directories at import: the SQLite test database and WhiteNoise's static
    root live under var/, so make it here (a fresh clone has none)."""
    (settings.VAR_DIR / "staticfiles").mkdir(parents=True, exist_ok=True)
    if settings.DATABASES["default"]["ENGINE"].endswith("postgresql"):
        _budget_postgres_connections()


def _budget_postgres_connections() -> None:
    """Share the server's connections among the xdist workers (tests/connection_budget.py)."""
    import psycopg

    from tests import connection_budget

    db = settings.DATABASES["default"]
    with psycopg.connect(
        host=db["HOST"], port=db["PORT"] or 5432, user=db["USER"], password=db["PASSWORD"], dbname="postgres"
    ) as conn:
        max_connections, reserved = (
            int(conn.execute(f"SHOW {name}").fetchone()[0])
            for name in ("max_connections", "superuser_reserved_connections")
        )
    connection_budget.install(max_connections, reserved, connection_budget.xdist_workers())


def pytest_report_header(config):
    db = settings.DATABASES["default"]
    return f"memoryhub: database={db['ENGINE'].rsplit('.', 1)[-1]} broker={settings.CELERY_BROKER_URL.split('://')[0]}"


# Session fixtures expensive enough that one xdist worker should build them once and run every
# test using them (`--dist loadgroup`, as the Makefile runs the suite), rather than each worker
# building its own: fixture name -> xdist group.
SHARED_EXPENSIVE_FIXTURES = {"demo_template": "demo"}


def pytest_collection_modifyitems(config, items):
    """Tests marked `postgres` need real concurrency: skipped, with the reason, on SQLite. Tests
    using a shared expensive fixture go to one xdist worker."""
    for item in items:
        for fixture, group in SHARED_EXPENSIVE_FIXTURES.items():
            if fixture in getattr(item, "fixturenames", ()):
                item.add_marker(pytest.mark.xdist_group(group))
    if settings.IS_POSTGRES:
        return
    skip = pytest.mark.skip(reason="needs PostgreSQL (set DATABASE_URL); CI's PostgreSQL run executes it")
    for item in items:
        if "postgres" in item.keywords:
            item.add_marker(skip)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """Decision rows a test buffered (triggers.decision_log) are written, and the audit entries it
    committed sequenced (audit.log.background), while its database is still there; both threads'
    connections are closed, so nothing leaks into the next test or keeps the test database open."""
    from audit import log
    from triggers import decision_log

    try:
        return (yield)
    finally:
        decision_log.buffer.shutdown()
        log.background.shutdown()


class Party:
    """One person (or key) of the fixture set: user, role, web client and API client."""

    def __init__(self, tenant, username: str, role: str):
        self.tenant = tenant
        self.role = role
        self.membership = add_member(tenant, username, role, password=PASSWORD)
        self.user = self.membership.user
        self.key = issue_api_key(tenant, f"{username}-key", role=role)
        self.api = APIClient()
        self.api.credentials(HTTP_AUTHORIZATION=f"Bearer {self.key.secret}")
        self._web = None

    @property
    def web(self):
        """A Django test client logged in as this user (session auth, CSRF enforced)."""
        if self._web is None:
            from django.test import Client

            self._web = Client(enforce_csrf_checks=True)
            self._web.force_login(self.user)
        return self._web


@pytest.fixture
def tenant(db):
    return create_tenant("acme", "Acme Payments")


@pytest.fixture
def other_tenant(db):
    return create_tenant("globex", "Globex")


@pytest.fixture
def alice(tenant):
    return Party(tenant, "alice", Role.ADMIN)


@pytest.fixture
def bob(tenant):
    return Party(tenant, "bob", Role.REVIEWER)


@pytest.fixture
def carol(tenant):
    return Party(tenant, "carol", Role.VIEWER)


@pytest.fixture
def mallory(other_tenant):
    return Party(other_tenant, "mallory", Role.ADMIN)


@pytest.fixture
def api(alice):
    """The admin's API client (most tests act as an agent platform with an admin key)."""
    return alice.api


@pytest.fixture
def receiver(settings):
    """A real local webhook receiver; channels may reach its loopback address through the allow-list."""
    from tests.helpers import Receiver

    settings.MEMORYHUB_CHANNEL_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    server = Receiver().start()
    yield server
    server.stop()


@pytest.fixture
def empty_broker():
    """The default queue empty before and after: messages one test publishes (on_commit hooks, a
    real worker's requests) never reach another."""
    from memoryhub.celery import app

    app.control.purge()
    yield
    app.control.purge()


@dataclass
class DemoTemplate:
    """The seed scenario loaded once per session by ``manage.py load_demo --no-rollups`` (the real
    services, back-dated), kept as a database snapshot. Without the metric rollups: only
    tests/memoryhub/test_demo_rollups.py reads them, and it loads its own demo."""

    output: str  # what the command printed
    var_dir: Path  # the files it wrote (demo-api-key.txt)
    snapshot: Snapshot


@pytest.fixture(scope="session")
def demo_template(django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[DemoTemplate]:
    from django.core.cache import cache
    from django.core.management import call_command

    var_dir = tmp_path_factory.mktemp("demo-var")
    copies = tmp_path_factory.mktemp("demo-snapshots")
    with django_db_blocker.unblock():
        empty = Snapshot("empty", copies)  # the database as every other test expects it
        out = StringIO()
        with override_settings(VAR_DIR=var_dir):
            call_command("load_demo", "--no-rollups", stdout=out)
        cache.clear()  # the cache table is in the snapshot: no throttle counters of the load
        template = DemoTemplate(out.getvalue(), var_dir, Snapshot("demo", copies))
        empty.restore()
    yield template
    with django_db_blocker.unblock():
        template.snapshot.drop()
        empty.drop()


@pytest.fixture
def demo_db(demo_template, transactional_db, settings, tmp_path) -> DemoTemplate:
    """A fresh copy of the loaded demo for this test (seconds, not the half minute of a load);
    ``settings.VAR_DIR`` is this test's tmp_path, holding the files the load wrote. The test is
    transactional: afterwards the database is flushed as usual. Request it before any fixture
    that writes rows (the copy replaces the whole database)."""
    demo_template.snapshot.restore()
    for path in demo_template.var_dir.iterdir():
        shutil.copy2(path, tmp_path / path.name)
    settings.VAR_DIR = tmp_path
    return demo_template


@pytest.fixture
def loaded(demo_db) -> str:
    """The seed scenario as ``manage.py load_demo`` leaves it; returns the command's output."""
    return demo_db.output


def _uses_db(request) -> bool:
    return bool({"db", "transactional_db", "live_server"} & set(request.fixturenames)) or (
        request.node.get_closest_marker("django_db") is not None
    )


@pytest.fixture(autouse=True)
def _fresh_cache(request):
    """Throttle counters live in the cache (a database table unless Redis is configured): every
    test that can reach the database starts with none."""
    if _uses_db(request):
        request.getfixturevalue("db")  # pytest-django picks transactional_db where the test asks for it
        from django.core.cache import cache

        cache.clear()
    yield


def _aborted() -> bool:
    """The test left its PostgreSQL transaction aborted on purpose (a refused write, caught):
    nothing can be read in it until its rollback."""
    from django.db import connection

    if connection.vendor != "postgresql" or connection.connection is None:
        return False
    from psycopg import pq

    return connection.connection.info.transaction_status == pq.TransactionStatus.INERROR


@pytest.fixture(autouse=True)
def _kept_columns_agree(request, _fresh_cache):  # after the database is set up, so torn down before it
    """Every test leaves the columns kept on the write path equal to what they stand for: each
    compaction job's ``accepted`` (memoryhub.memory.acceptance.accepted_q) and each summary's
    ``checks_failed`` (its newest validation record). The suite walks every write path there is,
    so a path that changes a summary or a job and forgets one fails the day it is added."""
    yield
    if not _uses_db(request) or request.node.get_closest_marker("impossible_state") or _aborted():
        return
    from memoryhub.memory import acceptance, lifecycle
    from memoryhub.models import CompactionJob, Summary

    jobs = list(
        acceptance.stale(CompactionJob.objects.all()).values("pk", "status", "accepted", "summary__status")
    )
    assert not jobs, f"CompactionJob.accepted disagrees with acceptance.accepted_q: {jobs}"
    summaries = list(
        lifecycle.checks_failed_stale(Summary.objects.all()).values("pk", "status", "checks_failed")
    )
    assert not summaries, f"Summary.checks_failed disagrees with the newest validation record: {summaries}"
