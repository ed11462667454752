"""db_app_role <role> [--apply]: print (or apply, as the table owner) the app role's privileges."""

from django.core.management.base import BaseCommand, CommandError
from django.db import connection

from memoryhub.core.db_role import grant_statements


class Command(BaseCommand):
    help = "Print or apply the GRANT/REVOKE statements for a non-owner PostgreSQL application role."

    def add_arguments(self, parser):
        parser.add_argument("role")
        parser.add_argument("--apply", action="store_true", help="execute them now (run as the table owner)")

    def handle(self, *args, role, apply, **options):
        if connection.vendor != "postgresql":
            raise CommandError("application roles are a PostgreSQL feature; set DATABASE_URL")
        try:
            statements = grant_statements(role)
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        if not apply:
            self.stdout.write(";\n".join(statements) + ";")
            return
        with connection.cursor() as cursor:
            for sql in statements:
                cursor.execute(sql)
        self.stdout.write(f"applied {len(statements)} statements for role {role}")
