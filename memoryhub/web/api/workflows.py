"""Workflows and their events."""

from __future__ import annotations

import django_filters
from django.urls import path
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import generics, status
from rest_framework.response import Response

from memoryhub.core.errors import InvalidInput
from memoryhub.memory.events import append_events, events_page, parse_batch
from memoryhub.memory.workflows import create_workflow
from memoryhub.models import Role, Workflow, WorkflowSource
from memoryhub.web.api.common import WF, TenantAPIView, body_object, int_param, list_responses
from memoryhub.web.api.fields import SafeIntegerFilter
from memoryhub.web.api.serializers import (
    AppendBatchSerializer,
    AppendResultSerializer,
    ErrorSerializer,
    EventPageSerializer,
    EventSerializer,
    WorkflowCreateSerializer,
    WorkflowSerializer,
)


class WorkflowFilter(django_filters.FilterSet):
    has_active_summary = django_filters.BooleanFilter(
        field_name="active_summary", lookup_expr="isnull", exclude=True
    )
    min_tail_tokens = SafeIntegerFilter(field_name="tail_tokens", lookup_expr="gte")
    graph_release = django_filters.CharFilter()
    source = django_filters.MultipleChoiceFilter(choices=WorkflowSource.choices)

    class Meta:
        model = Workflow
        fields = ["has_active_summary", "min_tail_tokens", "graph_release", "source"]


@extend_schema_view(get=extend_schema(responses=list_responses(WorkflowSerializer)))
class WorkflowListCreate(generics.ListAPIView, TenantAPIView):
    serializer_class = WorkflowSerializer
    filterset_class = WorkflowFilter
    search_fields = ["external_id", "name"]
    ordering_fields = ["updated_at", "created_at", "head_seq", "tail_tokens", "external_id"]
    write_role = Role.INGEST  # an integration creates the workflow it records

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # OpenAPI generation has no tenant
            return Workflow.objects.none()
        # Tenant-scoped list (not only get_object): another tenant's rows never appear.
        return Workflow.objects.filter(tenant=self.tenant).select_related("active_summary")

    @extend_schema(
        request=WorkflowCreateSerializer,
        responses={201: WorkflowSerializer, 200: WorkflowSerializer, 400: ErrorSerializer},
    )
    def post(self, request):
        data = body_object(request)
        serializer = WorkflowCreateSerializer(data=data)
        serializer.is_valid(raise_exception=True)
        workflow, created = create_workflow(request.tenant, actor=self.actor(), **serializer.validated_data)
        workflow = Workflow.objects.select_related("active_summary").get(pk=workflow.pk)
        return Response(
            WorkflowSerializer(workflow).data,
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        )


class WorkflowDetail(TenantAPIView):
    @extend_schema(responses={200: WorkflowSerializer, 404: ErrorSerializer})
    def get(self, request, wf: str):
        return Response(WorkflowSerializer(self.workflow(wf)).data)


class WorkflowEvents(TenantAPIView):
    write_role = Role.INGEST

    @extend_schema(
        parameters=[
            OpenApiParameter("after", int, description="Only events with seq > after (default 0)."),
            OpenApiParameter("until", int, description="Only events with seq <= until."),
            OpenApiParameter("limit", int, description="Page size, 1-1000 (default 100)."),
        ],
        responses={200: EventPageSerializer},
    )
    def get(self, request, wf: str):
        workflow = self.workflow(wf)
        after = int_param(request.query_params, "after", 0)
        until = int_param(request.query_params, "until", None)
        limit = int_param(request.query_params, "limit", 100, minimum=1, maximum=1000)
        if until is not None and until < (after or 0):
            raise InvalidInput("'until' must be >= 'after'", code="invalid_parameter")
        events = events_page(workflow, after=after or 0, until=until, limit=limit or 100)
        last = events[-1].seq if events else None
        upper = min(until, workflow.head_seq) if until is not None else workflow.head_seq
        has_more = last is not None and last < upper
        return Response(
            {
                "events": EventSerializer(events, many=True).data,
                "head_seq": workflow.head_seq,
                "next_after": last if has_more else None,
            }
        )

    @extend_schema(
        request=AppendBatchSerializer,
        responses={
            201: AppendResultSerializer,
            400: ErrorSerializer,
            409: ErrorSerializer,
            413: ErrorSerializer,
        },
    )
    def post(self, request, wf: str):
        events, expected_head = parse_batch(body_object(request))
        workflow = self.workflow(wf)
        result = append_events(workflow, events, expected_head=expected_head)
        return Response(
            {"events": result.events, "head_seq": result.head_seq, "total_tokens": result.total_tokens},
            status=status.HTTP_201_CREATED if result.written else status.HTTP_200_OK,
        )


urlpatterns = [
    path("workflows/", WorkflowListCreate.as_view(), name="workflow-list"),
    path(f"workflows/{WF}/", WorkflowDetail.as_view(), name="workflow-detail"),
    path(f"workflows/{WF}/events/", WorkflowEvents.as_view(), name="workflow-events"),
]
