"""Tenant resolution and role checks for API views.

Reads need any membership (viewer+). Unsafe methods need ``view.write_role`` (reviewer by default;
admin-only views set it to admin).
"""

from __future__ import annotations

from rest_framework import permissions

from memoryhub.models import ApiKey, Role, role_at_least
from memoryhub.web.tenancy_context import resolve_tenant


class TenantMember(permissions.BasePermission):
    message = "You are not a member of this tenant, or your role does not allow this action."

    def has_permission(self, request, view) -> bool:
        if not request.user or not request.user.is_authenticated:
            return False
        if isinstance(request.auth, ApiKey):
            request.tenant, request.role = request.auth.tenant, request.auth.role
        else:
            tenant, role = resolve_tenant(request)
            if tenant is None:
                return False
            request.tenant, request.role = tenant, role
        if request.method in permissions.SAFE_METHODS:
            return role_at_least(request.role, getattr(view, "read_role", Role.VIEWER))
        return role_at_least(request.role, getattr(view, "write_role", Role.REVIEWER))
