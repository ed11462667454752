"""The app runs as a PostgreSQL role that does not own the tables; history cannot be rewritten by it."""

from __future__ import annotations

import io
import os
import subprocess
import sys

import psycopg
import pytest
from django.conf import settings
from django.core.management import call_command
from django.db import connection

from tests.factories import append, event, make_workflow

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]
ROLE = "memoryhub_app_test"


def _role_dsn() -> str:
    db = settings.DATABASES["default"]
    return f"postgresql://{ROLE}@{db.get('HOST') or '127.0.0.1'}:{db.get('PORT') or 5432}/{db['NAME']}"


@pytest.fixture
def app_role(db):
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT 1 FROM pg_roles WHERE rolname = '{ROLE}'")
        if cursor.fetchone() is None:
            cursor.execute(f"CREATE ROLE {ROLE} LOGIN")
    call_command("db_app_role", ROLE, "--apply", stdout=io.StringIO())
    return _role_dsn()


def test_app_role_cannot_update_delete_or_truncate_history(app_role, tenant):
    wf = make_workflow(tenant, "wf")
    append(wf, [event(1), event(2)])
    with psycopg.connect(app_role, autocommit=True) as conn:
        assert conn.execute("SELECT current_user").fetchone()[0] == ROLE
        for sql in (
            "UPDATE memoryhub_event SET kind = 'note'",
            "UPDATE memoryhub_event SET seq = seq + 100",
            "DELETE FROM memoryhub_event",
            "TRUNCATE memoryhub_event CASCADE",
            "DELETE FROM memoryhub_lifecycleevent",
            "UPDATE audit_auditentry SET action = 'x'",
            "TRUNCATE audit_auditentry CASCADE",
            "DELETE FROM memoryhub_validationrecord",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(sql)
        # ordinary work is allowed: reading, and the purge tombstone columns
        assert conn.execute("SELECT count(*) FROM memoryhub_event").fetchone()[0] == 2
        owner = conn.execute(
            "SELECT tableowner FROM pg_tables WHERE tablename = 'memoryhub_event'"
        ).fetchone()[0]
        assert owner != ROLE


def test_the_application_runs_as_the_app_role(app_role, tenant):
    """A real process (manage.py shell) connected as the non-owner role appends events and activates."""
    script = (
        "from memoryhub.models import Tenant\n"
        "from memoryhub.core.actors import Actor\n"
        "from memoryhub.memory.workflows import create_workflow\n"
        "from memoryhub.memory.events import append_events, parse_batch\n"
        "t = Tenant.objects.get(slug='acme')\n"
        "wf, _ = create_workflow(t, 'as-app-role', actor=Actor.system('t'))\n"
        "evs, _ = parse_batch({'events': [{'kind': 'message', 'content': 'hello', 'client_event_id': 'x1'}]})\n"
        "print('head', append_events(wf, evs).head_seq)\n"
        "import psycopg\n"
        "from django.db import connection\n"
        "print('user', connection.cursor().execute('select current_user').fetchone()[0])\n"
    )
    env = {**os.environ, "DATABASE_URL": app_role.replace("postgresql://", "postgres://")}
    out = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", script],
        cwd=settings.BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "head 1" in out.stdout and f"user {ROLE}" in out.stdout
