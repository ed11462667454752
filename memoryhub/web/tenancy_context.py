"""Which tenant a browser session is acting in (session["tenant_id"], else the first membership)."""

from __future__ import annotations

from memoryhub.models import Membership, Tenant

SESSION_KEY = "memoryhub_tenant_id"


def resolve_tenant(request) -> tuple[Tenant | None, str | None]:
    cached = getattr(request, "_memoryhub_tenant", None)
    if cached is not None:
        return cached
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated or not getattr(user, "pk", None):
        return None, None
    session = getattr(request, "session", None)
    wanted = session.get(SESSION_KEY) if session is not None else None
    memberships = Membership.objects.filter(user=user).select_related("tenant").order_by("tenant__slug")
    chosen = None
    if wanted:
        chosen = memberships.filter(tenant_id=wanted).first()
    if chosen is None:
        chosen = memberships.first()
    result = (chosen.tenant, chosen.role) if chosen else (None, None)
    request._memoryhub_tenant = result
    return result
