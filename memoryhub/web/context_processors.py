from memoryhub.accounts.tenancy import memberships_for
from memoryhub.web.tenancy_context import resolve_tenant


def tenancy(request):
    if not getattr(request, "user", None) or not request.user.is_authenticated:
        return {}
    tenant, role = resolve_tenant(request)
    return {
        "current_tenant": tenant,
        "current_role": role or "",
        "can_review": role in ("reviewer", "admin"),
        "is_admin": role == "admin",
        "memberships": lambda: memberships_for(request.user),
    }
