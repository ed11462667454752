"""Retention policies and purges (admin only to change anything)."""

from __future__ import annotations

from typing import cast

from django.urls import path
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.response import Response

from audit.models import Purge
from audit.purge import PURGE_REASON_ROOM, parse_selector, purge_events, purges_of
from audit.retention import policies_for, set_policies
from memoryhub.memory import lifecycle
from memoryhub.models import Role, Workflow
from memoryhub.web.api.common import WF, TenantAPIView, body_object, int_param
from memoryhub.web.api.serializers import ErrorSerializer
from memoryhub.web.api.throttles import PrincipalScopedThrottle

PoliciesSerializer = inline_serializer(
    "RetentionPolicies",
    {"policies": serializers.DictField(child=serializers.IntegerField(allow_null=True, min_value=1))},
)
PurgeRequestSerializer = inline_serializer(
    "PurgeRequest",
    {
        "reason": serializers.CharField(max_length=lifecycle.MAX_REASON - PURGE_REASON_ROOM),
        "seq_from": serializers.IntegerField(required=False, min_value=1),
        "seq_to": serializers.IntegerField(required=False, min_value=1),
        "seqs": serializers.ListField(child=serializers.IntegerField(min_value=1), required=False),
        "subject": serializers.CharField(required=False),
    },
)


def purge_dict(purge: Purge) -> dict:
    return {
        "purge_id": purge.purge_id,
        "workflow": cast(Workflow, purge.workflow).external_id if purge.workflow_id else None,
        "reason": purge.reason,
        "actor": purge.actor,
        "source": purge.source,
        "selector": {k: v for k, v in purge.selector.items() if k != "subject"},
        "event_count": purge.event_count,
        "seqs": purge.seqs,
        "affected_summaries": purge.affected_summaries,
        "at": purge.at.isoformat(),
    }


class RetentionView(TenantAPIView):
    write_role = Role.ADMIN

    @extend_schema(responses={200: PoliciesSerializer})
    def get(self, request):
        return Response({"policies": policies_for(request.tenant)})

    @extend_schema(request=PoliciesSerializer, responses={200: PoliciesSerializer, 400: ErrorSerializer})
    def put(self, request):
        body = body_object(request)
        return Response({"policies": set_policies(request.tenant, body.get("policies"), self.actor())})


class PurgeView(TenantAPIView):
    write_role = Role.ADMIN
    throttle_classes = [PrincipalScopedThrottle]
    throttle_scope = "purge"

    @extend_schema(
        request=PurgeRequestSerializer,
        responses={201: dict, 400: ErrorSerializer, 403: ErrorSerializer, 409: ErrorSerializer},
    )
    def post(self, request, wf: str):
        body = body_object(request)
        selector = parse_selector(body)
        workflow = self.workflow(wf)
        outcome = purge_events(workflow, selector, self.actor(), body.get("reason"))
        return Response(outcome.as_dict(), status=status.HTTP_201_CREATED)


class PurgeList(TenantAPIView):
    @extend_schema(responses={200: dict})
    def get(self, request):
        limit = int_param(request.query_params, "limit", 50, minimum=1, maximum=500)
        purges = purges_of(request.tenant)
        wf = request.query_params.get("workflow")
        if wf:
            purges = purges.filter(workflow__external_id=wf)
        return Response({"purges": [purge_dict(p) for p in purges[:limit]]})


urlpatterns = [
    path("retention/", RetentionView.as_view(), name="retention"),
    path("purges/", PurgeList.as_view(), name="purge-list"),
    path(f"workflows/{WF}/purge/", PurgeView.as_view(), name="workflow-purge"),
]
