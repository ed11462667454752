"""Settings pages for admins (/settings/members/, /settings/keys/): members and API keys.

Only admins see or use them (403 for everyone else). Every change goes through
memoryhub.accounts.tenancy, which writes the audit entry. A new or rotated key's secret is rendered in the
response to that POST and nowhere else: it is never put in the session, a message or a log.
"""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import path
from django.views.decorators.http import require_POST

from memoryhub.accounts import tenancy
from memoryhub.core.errors import Conflict, InvalidInput, NotFound
from memoryhub.models import Role, Tenant, role_at_least
from memoryhub.web.actors import request_actor, request_principal
from memoryhub.web.views.base import page_tenant


def _admin_tenant(request: HttpRequest) -> Tenant:
    tenant, role = page_tenant(request)
    if not role_at_least(role, Role.ADMIN):
        raise PermissionDenied("Only admins can manage members and API keys.")
    return tenant


class MemberForm(forms.Form):
    username = forms.CharField(max_length=150)
    role = forms.ChoiceField(choices=Role.choices, initial=Role.VIEWER)
    password = forms.CharField(
        required=False,
        widget=forms.PasswordInput(render_value=False),
        help_text="Only for someone without an account yet; an existing user keeps their password.",
    )


class KeyForm(forms.Form):
    name = forms.CharField(max_length=100)
    role = forms.ChoiceField(choices=Role.choices, initial=Role.VIEWER)


def _apply_error(form: forms.Form, error: InvalidInput | Conflict) -> None:
    field = error.extra.get("field")
    form.add_error(field if field in form.fields else None, error.detail)


@login_required
def settings_home(request: HttpRequest) -> HttpResponse:
    _admin_tenant(request)
    return redirect("memoryhub:settings-members")


def _members_page(request: HttpRequest, tenant: Tenant, form: MemberForm, status: int = 200) -> HttpResponse:
    context = {
        "members": tenancy.members_with_key_counts(tenant),
        "roles": Role.choices,
        "form": form,
        "section": "members",
    }
    return render(request, "memoryhub/settings/members.html", context, status=status)


@login_required
def members(request: HttpRequest) -> HttpResponse:
    tenant = _admin_tenant(request)
    form = MemberForm(request.POST or None)
    if request.method == "POST":
        if form.is_valid():
            try:
                membership, created = tenancy.invite_member(
                    tenant,
                    form.cleaned_data["username"],
                    form.cleaned_data["role"],
                    request_actor(request),
                    password=form.cleaned_data["password"] or None,
                )
            except (InvalidInput, Conflict) as exc:
                _apply_error(form, exc)
            else:
                who = membership.user.get_username()
                messages.success(
                    request, f"{who} added as {membership.role}{' (new account)' if created else ''}."
                )
                return redirect("memoryhub:settings-members")
        return _members_page(request, tenant, form, status=400)
    return _members_page(request, tenant, form)


def _membership(tenant: Tenant, username: str):
    try:
        return tenancy.get_membership(tenant, username)
    except NotFound as exc:
        raise Http404(exc.detail)


@login_required
@require_POST
def member_role(request: HttpRequest, username: str) -> HttpResponse:
    tenant = _admin_tenant(request)
    membership = _membership(tenant, username)
    try:
        membership = tenancy.change_member_role(membership, request.POST.get("role"), request_actor(request))
    except (InvalidInput, Conflict) as exc:
        messages.error(request, exc.detail)
    else:
        messages.success(request, f"{username} is now {membership.role}.")
    return redirect("memoryhub:settings-members")


@login_required
@require_POST
def member_remove(request: HttpRequest, username: str) -> HttpResponse:
    tenant = _admin_tenant(request)
    membership = _membership(tenant, username)
    try:
        revoked = tenancy.remove_member(membership, request_actor(request))
    except Conflict as exc:
        messages.error(request, exc.detail)
    else:
        keys = f"; {len(revoked)} API key(s) acting for them revoked" if revoked else ""
        messages.success(request, f"{username} removed{keys}.")
    return redirect("memoryhub:settings-members")


def _keys_page(
    request: HttpRequest,
    tenant: Tenant,
    form: KeyForm,
    issued: tenancy.IssuedKey | None = None,
    status: int = 200,
) -> HttpResponse:
    context = {
        "keys": tenancy.api_keys_of(tenant),
        "form": form,
        "issued": issued,
        "section": "keys",
    }
    response = render(request, "memoryhub/settings/keys.html", context, status=status)
    if issued is not None:
        response["Cache-Control"] = "no-store"  # the secret must not stay in a cache
    return response


@login_required
def keys(request: HttpRequest) -> HttpResponse:
    tenant = _admin_tenant(request)
    form = KeyForm(request.POST or None)
    if request.method == "POST":
        if form.is_valid():
            try:
                issued = tenancy.issue_api_key(
                    tenant,
                    form.cleaned_data["name"],
                    role=form.cleaned_data["role"],
                    created_by=request_principal(request),
                    actor=request_actor(request),
                )
            except InvalidInput as exc:
                _apply_error(form, exc)
            else:
                return _keys_page(request, tenant, KeyForm(), issued=issued)
        return _keys_page(request, tenant, form, status=400)
    return _keys_page(request, tenant, form)


def _key(tenant: Tenant, prefix: str):
    try:
        return tenancy.get_api_key(tenant, prefix)
    except NotFound as exc:
        raise Http404(exc.detail)


@login_required
@require_POST
def key_rotate(request: HttpRequest, prefix: str) -> HttpResponse:
    tenant = _admin_tenant(request)
    key = _key(tenant, prefix)
    try:
        issued = tenancy.rotate_api_key(key, request_actor(request), created_by=request_principal(request))
    except Conflict as exc:
        messages.error(request, exc.detail)
        return redirect("memoryhub:settings-keys")
    return _keys_page(request, tenant, KeyForm(), issued=issued)


@login_required
@require_POST
def key_revoke(request: HttpRequest, prefix: str) -> HttpResponse:
    tenant = _admin_tenant(request)
    key = tenancy.revoke_api_key(_key(tenant, prefix), request_actor(request))
    messages.success(request, f"Key “{key.name}” ({key.prefix}…) revoked; it no longer works.")
    return redirect("memoryhub:settings-keys")


urlpatterns = [
    path("settings/", settings_home, name="settings"),
    path("settings/members/", members, name="settings-members"),
    path("settings/members/<str:username>/role/", member_role, name="settings-member-role"),
    path("settings/members/<str:username>/remove/", member_remove, name="settings-member-remove"),
    path("settings/keys/", keys, name="settings-keys"),
    path("settings/keys/<str:prefix>/rotate/", key_rotate, name="settings-key-rotate"),
    path("settings/keys/<str:prefix>/revoke/", key_revoke, name="settings-key-revoke"),
]
