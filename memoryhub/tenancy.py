"""Tenants, memberships and API keys: creation, key issuing/verification, tenant resolution."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from memoryhub.actors import Actor
from memoryhub.models import ApiKey, Membership, Role, Tenant

KEY_PREFIX = "mh_"
# last_used_at is a hint for humans, not an audit trail: touch it at most once a minute.
LAST_USED_RESOLUTION = timedelta(seconds=60)


@dataclass(frozen=True)
class IssuedKey:
    key: ApiKey
    secret: str  # the full bearer token, shown exactly once


def _hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


@transaction.atomic
def create_tenant(slug: str, name: str = "", actor: Actor | None = None) -> Tenant:
    from audit.log import record
    from memoryhub.alerts_defaults import install_default_rules

    tenant = Tenant.objects.create(slug=slug, name=name or slug)
    record(
        tenant, actor or Actor.system("setup"), "tenant.create", tenant, {"slug": slug, "name": tenant.name}
    )
    install_default_rules(tenant)
    return tenant


@transaction.atomic
def issue_api_key(
    tenant: Tenant, name: str, role: str = Role.ADMIN, created_by=None, actor: Actor | None = None
) -> IssuedKey:
    from audit.log import record

    prefix = secrets.token_hex(4)
    while ApiKey.objects.filter(prefix=prefix).exists():
        prefix = secrets.token_hex(4)
    secret_part = secrets.token_urlsafe(32).replace("-", "x").replace("_", "y")
    token = f"{KEY_PREFIX}{prefix}_{secret_part}"
    key = ApiKey.objects.create(
        tenant=tenant,
        name=name,
        prefix=prefix,
        secret_hash=_hash_secret(token),
        role=role,
        created_by=created_by,
    )
    record(
        tenant,
        actor or Actor.system("setup"),
        "api_key.issue",
        key,
        {"name": name, "prefix": prefix, "role": role},
    )
    return IssuedKey(key=key, secret=token)


@transaction.atomic
def revoke_api_key(key: ApiKey, actor: Actor) -> ApiKey:
    from audit.log import record

    if key.revoked_at is None:
        key.revoked_at = timezone.now()
        key.save(update_fields=["revoked_at"])
        record(key.tenant, actor, "api_key.revoke", key, {"prefix": key.prefix})
    return key


def verify_api_key(token: str) -> ApiKey | None:
    """The active key matching a bearer token, or None. Constant-time comparison of the hash."""
    if not token.startswith(KEY_PREFIX):
        return None
    try:
        prefix = token[len(KEY_PREFIX) :].split("_", 1)[0]
    except IndexError:
        return None
    key = ApiKey.objects.select_related("tenant").filter(prefix=prefix).first()
    if key is None or key.revoked_at is not None:
        return None
    if not hmac.compare_digest(key.secret_hash, _hash_secret(token)):
        return None
    now = timezone.now()
    if key.last_used_at is None or now - key.last_used_at > LAST_USED_RESOLUTION:
        ApiKey.objects.filter(pk=key.pk).update(last_used_at=now)
        key.last_used_at = now
    return key


@transaction.atomic
def add_member(
    tenant: Tenant, username: str, role: str, password: str | None = None, actor: Actor | None = None
):
    from audit.log import record

    user_model = get_user_model()
    user, created = user_model.objects.get_or_create(username=username)
    if password:
        user.set_password(password)
        user.save()
    elif created:
        user.set_unusable_password()
        user.save()
    membership, _ = Membership.objects.update_or_create(user=user, tenant=tenant, defaults={"role": role})
    record(
        tenant, actor or Actor.system("setup"), "member.set", membership, {"username": username, "role": role}
    )
    return membership


def memberships_for(user) -> list[Membership]:
    if not user or not user.is_authenticated:
        return []
    return list(Membership.objects.filter(user=user).select_related("tenant").order_by("tenant__slug"))
