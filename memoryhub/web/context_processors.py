from memoryhub.accounts.tenancy import memberships_for
from memoryhub.models import Role, role_at_least
from memoryhub.web.tenancy_context import resolve_tenant


def tenancy(request):
    if not getattr(request, "user", None) or not request.user.is_authenticated:
        return {}
    tenant, role = resolve_tenant(request)
    return {
        "current_tenant": tenant,
        "current_role": role or "",
        "is_admin": role_at_least(role, Role.ADMIN),
        "memberships": lambda: memberships_for(request.user),
    }
