"""Tenants, their members and their API keys. Every other row belongs to exactly one tenant."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class Role(models.TextChoices):
    VIEWER = "viewer", "Viewer"
    # For integration keys (hooks, framework sessions, exporters): a viewer that may also append
    # what it observes — workflows, events, traces, timelines, observed compactions, OTLP spans
    # (views with ``write_role = Role.INGEST``) — and can never review, waive, purge or manage.
    INGEST = "ingest", "Ingest"
    REVIEWER = "reviewer", "Reviewer"
    ADMIN = "admin", "Admin"


ROLE_RANK = {Role.VIEWER: 0, Role.INGEST: 1, Role.REVIEWER: 2, Role.ADMIN: 3}


def role_at_least(role: str | None, minimum: str) -> bool:
    return role is not None and ROLE_RANK.get(Role(role), -1) >= ROLE_RANK[Role(minimum)]


def narrower_role(a: str, b: str) -> str:
    """The lower-ranked of two roles (a key never acts above the human it acts for)."""
    return a if ROLE_RANK[Role(a)] <= ROLE_RANK[Role(b)] else b


class Tenant(models.Model):
    """An isolated customer space: workflows, summaries, keys and policies never cross tenants."""

    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


class Membership(models.Model):
    """A user's role in one tenant (viewer < reviewer < admin)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.VIEWER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["user", "tenant"],
                name="%(app_label)s_%(class)s_unique_user_tenant",
                violation_error_message="This user is already a member of the tenant.",
            )
        ]

    def __str__(self) -> str:
        return f"{self.user} @ {self.tenant} ({self.role})"


def revoke_and_detach(collector, field, sub_objs, using) -> None:
    """``on_delete`` of a key's human: deleting the user revokes the keys acting for them (in the
    deletion's transaction) rather than leaving them working with no human behind them."""

    keys = list(sub_objs)
    active = [key for key in keys if key.revoked_at is None]
    if active:
        collector.add_field_update(field.model._meta.get_field("revoked_at"), timezone.now(), active)
    collector.add_field_update(field, None, keys)


class ApiKey(models.Model):
    """A tenant-scoped bearer key. Only a SHA-256 of the secret is stored; the key is shown once."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16, unique=True)
    secret_hash = models.CharField(max_length=64)
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.ADMIN)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Who created it, as the audit log names actors ("user:alice", "api_key:ci(ab12cd34)",
    # "system:setup"): a key minted by another key or by a command has no created_by user.
    created_by_actor = models.CharField(max_length=200, blank=True, default="")
    # The human this key ultimately acts for: the signed-in user who created it, or the human of
    # the key that minted or rotated it (None only for keys made by the system, e.g. a command).
    # Removing or demoting that human revokes or narrows the key (accounts.tenancy).
    acts_for = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=revoke_and_detach,
        related_name="+",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    # Set on the key a rotation replaced: the key that took its place.
    replaced_by = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        verbose_name = "API key"

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None
