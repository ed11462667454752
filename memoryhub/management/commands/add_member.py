"""add_member <tenant> <username> <role> [--password P]: creates the user if needed."""

import getpass

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from memoryhub.accounts.tenancy import add_member
from memoryhub.models import Role, Tenant


class Command(BaseCommand):
    help = "Add a user to a tenant with a role (viewer, reviewer, admin); creates the user if needed."

    def add_arguments(self, parser):
        parser.add_argument("tenant")
        parser.add_argument("username")
        parser.add_argument("role", choices=Role.values)
        parser.add_argument(
            "--password", default=None, help="Set this password (otherwise prompted for new users)."
        )

    def handle(self, *args, tenant, username, role, password, **options):
        tenant_obj = Tenant.objects.filter(slug=tenant).first()
        if tenant_obj is None:
            raise CommandError(f"no tenant {tenant!r}")
        exists = get_user_model().objects.filter(username=username).exists()
        if password is None and not exists:
            password = getpass.getpass(f"Password for new user {username}: ")
            if not password:
                raise CommandError("a password is required for a new user")
        membership = add_member(tenant_obj, username, role, password=password)
        self.stdout.write(f"{membership.user.username} is {membership.role} in {tenant_obj.slug}.")
