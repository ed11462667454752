"""`load_demo` ends with ANALYZE of the application's tables only: a bare ANALYZE also takes the
cluster's shared catalogs and waited on another database's open transaction (a CI run stalled)."""

from __future__ import annotations

import psycopg
import pytest
from django.conf import settings
from django.db import connection

from memoryhub.demo.loader import analyze_tables

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_analyzing_the_demo_does_not_wait_on_a_shared_catalog_held_elsewhere():
    db = settings.DATABASES["default"]
    # Another session, in another database, holds a lock on a shared catalog in an open transaction.
    with psycopg.connect(
        host=db["HOST"], port=db["PORT"] or 5432, user=db["USER"], dbname="postgres"
    ) as other:
        other.execute("LOCK TABLE pg_catalog.pg_database IN SHARE ROW EXCLUSIVE MODE")
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = '3s'")
        try:
            analyze_tables()  # raises LockNotAvailable if it waits on the catalog
        finally:
            with connection.cursor() as cursor:
                cursor.execute("RESET lock_timeout")
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT last_analyze IS NOT NULL FROM pg_stat_user_tables WHERE relname = 'memoryhub_workflow'"
            )
            assert cursor.fetchone() == (True,)
