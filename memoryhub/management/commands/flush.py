"""Django's flush, able to clear append-only tables on SQLite (tests' transactional teardown).

On SQLite flush uses DELETE FROM, which the append-only triggers refuse; the bypass row lifts them
for the duration of the flush only. PostgreSQL's flush uses TRUNCATE, which the append-only tables
refuse too: it runs with ``session_replication_role = replica`` (superuser only).
"""

from django.core.management.commands.flush import Command as FlushCommand
from django.db import connections

from memoryhub.core.append_only import BYPASS_TABLE


class Command(FlushCommand):
    def handle(self, **options):
        connection = connections[options.get("database") or "default"]
        if connection.vendor == "postgresql":
            # The append-only tables refuse TRUNCATE by trigger; a superuser's replica role skips
            # ordinary triggers (only a superuser may set it: the application role cannot).
            with connection.cursor() as cursor:
                cursor.execute("SET session_replication_role = replica")
            try:
                return super().handle(**options)
            finally:
                with connection.cursor() as cursor:
                    cursor.execute("RESET session_replication_role")
        if connection.vendor != "sqlite":
            return super().handle(**options)
        with connection.cursor() as cursor:
            cursor.execute(f"CREATE TABLE IF NOT EXISTS {BYPASS_TABLE} (id integer primary key)")
            cursor.execute(f"INSERT OR IGNORE INTO {BYPASS_TABLE} (id) VALUES (1)")
        try:
            return super().handle(**options)
        finally:
            with connection.cursor() as cursor:
                cursor.execute(f"DELETE FROM {BYPASS_TABLE}")
