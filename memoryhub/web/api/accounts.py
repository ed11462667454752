"""Members and API keys of the caller's tenant (admins only, reads included).

A key's secret appears once, in the response that created or rotated it; lists show the prefix,
role, creator, the human it acts for, creation and last use. A key made or rotated with another
key acts for that key's human; removing a member revokes every key acting for them, demoting one
narrows those keys. Every change is an audit entry (memoryhub.accounts.tenancy).
"""

from __future__ import annotations

from django.urls import path
from drf_spectacular.utils import extend_schema, extend_schema_view, inline_serializer
from rest_framework import generics, serializers, status
from rest_framework.response import Response

from memoryhub.accounts import tenancy
from memoryhub.models import ApiKey, Membership, Role
from memoryhub.web.actors import request_principal
from memoryhub.web.api.common import TenantAPIView, body_object, list_responses
from memoryhub.web.api.serializers import ErrorSerializer


class ApiKeySerializer(serializers.ModelSerializer):
    created_by = serializers.SerializerMethodField()
    acts_for = serializers.SerializerMethodField()
    active = serializers.BooleanField(source="is_active", read_only=True)
    replaced_by = serializers.SerializerMethodField()

    class Meta:
        model = ApiKey
        fields = [
            "prefix",
            "name",
            "role",
            "active",
            "created_by",
            "acts_for",
            "created_at",
            "last_used_at",
            "revoked_at",
            "replaced_by",
        ]
        read_only_fields = fields

    def get_created_by(self, obj: ApiKey) -> str:
        """The creating user's name, else the actor that created it (e.g. ``api_key:ci(ab12cd34)``)."""
        if obj.created_by is not None:
            return obj.created_by.get_username()
        return obj.created_by_actor or "unknown"

    def get_acts_for(self, obj: ApiKey) -> str | None:
        """The human this key acts for (None for a key the system made, e.g. by a command)."""
        return obj.acts_for.get_username() if obj.acts_for is not None else None

    def get_replaced_by(self, obj: ApiKey) -> str | None:
        return obj.replaced_by.prefix if obj.replaced_by is not None else None


class IssuedKeySerializer(ApiKeySerializer):
    key = serializers.CharField(help_text="The bearer token. Shown this once; only its hash is stored.")

    class Meta(ApiKeySerializer.Meta):
        fields = [*ApiKeySerializer.Meta.fields, "key"]
        read_only_fields = fields


def issued_payload(issued: tenancy.IssuedKey) -> dict:
    return {**ApiKeySerializer(issued.key).data, "key": issued.secret}


class MemberSerializer(serializers.ModelSerializer):
    username = serializers.CharField(source="user.username", read_only=True)
    active_keys = serializers.SerializerMethodField()

    class Meta:
        model = Membership
        fields = ["username", "role", "created_at", "active_keys"]
        read_only_fields = fields

    def get_active_keys(self, obj: Membership) -> int:
        return getattr(obj, "active_key_count", 0)


KeyInput = inline_serializer(
    "ApiKeyInput",
    {
        "name": serializers.CharField(max_length=100),
        "role": serializers.ChoiceField(choices=Role.choices, required=False, help_text="default viewer"),
    },
)
MemberInput = inline_serializer(
    "MemberInput",
    {
        "username": serializers.CharField(),
        "role": serializers.ChoiceField(choices=Role.choices),
        "password": serializers.CharField(required=False, help_text="only for a user who has no account yet"),
    },
)
RoleInput = inline_serializer("MemberRoleInput", {"role": serializers.ChoiceField(choices=Role.choices)})
Revoked = inline_serializer(
    "MemberRemoved", {"username": serializers.CharField(), "revoked_keys": serializers.ListField()}
)


class AdminView(TenantAPIView):
    read_role = Role.ADMIN
    write_role = Role.ADMIN


@extend_schema_view(get=extend_schema(responses=list_responses(ApiKeySerializer)))
class ApiKeyListCreate(generics.ListAPIView, AdminView):
    serializer_class = ApiKeySerializer
    search_fields = ["name", "prefix"]
    ordering_fields = ["name", "created_at", "last_used_at", "revoked_at"]

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return ApiKey.objects.none()
        queryset = tenancy.api_keys_of(self.tenant)
        state = self.request.query_params.get("state", "")
        if state == "active":
            queryset = queryset.filter(revoked_at__isnull=True)
        elif state == "revoked":
            queryset = queryset.filter(revoked_at__isnull=False)
        return queryset

    @extend_schema(request=KeyInput, responses={201: IssuedKeySerializer, 400: ErrorSerializer})
    def post(self, request):
        data = body_object(request)
        issued = tenancy.issue_api_key(
            request.tenant,
            data.get("name"),
            role=data.get("role", Role.VIEWER),
            created_by=request_principal(request),
            actor=self.actor(),
        )
        return Response(issued_payload(issued), status=status.HTTP_201_CREATED)


class ApiKeyDetail(AdminView):
    @extend_schema(responses={200: ApiKeySerializer, 404: ErrorSerializer})
    def get(self, request, prefix: str):
        return Response(ApiKeySerializer(tenancy.get_api_key(request.tenant, prefix)).data)

    @extend_schema(request=None, responses={200: ApiKeySerializer, 404: ErrorSerializer})
    def delete(self, request, prefix: str):
        """Revoke (the key is kept, marked revoked; revoking twice is a no-op)."""
        key = tenancy.revoke_api_key(tenancy.get_api_key(request.tenant, prefix), self.actor())
        return Response(ApiKeySerializer(key).data)


class ApiKeyRevoke(AdminView):
    @extend_schema(request=None, responses={200: ApiKeySerializer, 404: ErrorSerializer})
    def post(self, request, prefix: str):
        key = tenancy.revoke_api_key(tenancy.get_api_key(request.tenant, prefix), self.actor())
        return Response(ApiKeySerializer(key).data)


class ApiKeyRotate(AdminView):
    @extend_schema(
        request=None,
        responses={201: IssuedKeySerializer, 404: ErrorSerializer, 409: ErrorSerializer},
        description="A new secret under a new prefix with the same name and role; the old key stops working now.",
    )
    def post(self, request, prefix: str):
        issued = tenancy.rotate_api_key(
            tenancy.get_api_key(request.tenant, prefix), self.actor(), created_by=request_principal(request)
        )
        return Response(issued_payload(issued), status=status.HTTP_201_CREATED)


@extend_schema_view(get=extend_schema(responses=list_responses(MemberSerializer)))
class MemberListCreate(generics.ListAPIView, AdminView):
    serializer_class = MemberSerializer
    search_fields = ["user__username"]
    ordering_fields = ["user__username", "role", "created_at"]

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Membership.objects.none()
        return tenancy.members_with_key_counts(self.tenant)

    @extend_schema(
        request=MemberInput, responses={201: MemberSerializer, 400: ErrorSerializer, 409: ErrorSerializer}
    )
    def post(self, request):
        data = body_object(request)
        membership, _ = tenancy.invite_member(
            request.tenant,
            data.get("username"),
            data.get("role"),
            self.actor(),
            password=data.get("password"),
        )
        return Response(MemberSerializer(membership).data, status=status.HTTP_201_CREATED)


class MemberDetail(AdminView):
    @extend_schema(responses={200: MemberSerializer, 404: ErrorSerializer})
    def get(self, request, username: str):
        membership = tenancy.members_with_key_counts(request.tenant).filter(user__username=username).first()
        if membership is None:
            tenancy.get_membership(request.tenant, username)  # raises the 404
        return Response(MemberSerializer(membership).data)

    @extend_schema(
        request=RoleInput,
        responses={200: MemberSerializer, 400: ErrorSerializer, 404: ErrorSerializer, 409: ErrorSerializer},
    )
    def patch(self, request, username: str):
        data = body_object(request)
        tenancy.change_member_role(
            tenancy.get_membership(request.tenant, username), data.get("role"), self.actor()
        )
        return self.get(request, username)

    @extend_schema(responses={200: Revoked, 404: ErrorSerializer, 409: ErrorSerializer})
    def delete(self, request, username: str):
        revoked = tenancy.remove_member(tenancy.get_membership(request.tenant, username), self.actor())
        return Response({"username": username, "revoked_keys": revoked})


urlpatterns = [
    path("api-keys/", ApiKeyListCreate.as_view(), name="api-key-list"),
    path("api-keys/<str:prefix>/", ApiKeyDetail.as_view(), name="api-key-detail"),
    path("api-keys/<str:prefix>/revoke/", ApiKeyRevoke.as_view(), name="api-key-revoke"),
    path("api-keys/<str:prefix>/rotate/", ApiKeyRotate.as_view(), name="api-key-rotate"),
    path("members/", MemberListCreate.as_view(), name="member-list"),
    path("members/<str:username>/", MemberDetail.as_view(), name="member-detail"),
]
