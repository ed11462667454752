"""create_tenant <slug> [--name N] [--api-key NAME]: the new API key is the last line of output."""

from django.core.management.base import BaseCommand, CommandError

from memoryhub.accounts.tenancy import create_tenant, issue_api_key
from memoryhub.models import Role, Tenant


class Command(BaseCommand):
    help = "Create a tenant (and optionally an API key, printed once as the last line)."

    def add_arguments(self, parser):
        parser.add_argument("slug")
        parser.add_argument("--name", default="")
        parser.add_argument("--api-key", dest="api_key", default="", help="Issue an API key with this name.")
        parser.add_argument("--role", default=Role.ADMIN, choices=Role.values, help="Role of the API key.")

    def handle(self, *args, slug, name, api_key, role, **options):
        if Tenant.objects.filter(slug=slug).exists():
            raise CommandError(f"tenant {slug!r} already exists")
        tenant = create_tenant(slug, name)
        self.stdout.write(f"Created tenant {tenant.slug} ({tenant.name}).")
        if api_key:
            issued = issue_api_key(tenant, api_key, role=role)
            self.stdout.write(f"API key {api_key!r} ({role}); store it now, it is not shown again:")
            self.stdout.write(issued.secret)
