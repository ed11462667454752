"""Context assembly, consumer traces and artifacts (docs/ARCHITECTURE.md "Context and consumer traces")."""

from __future__ import annotations

import django_filters
from django.db.models import Q
from django.urls import path
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field, inline_serializer
from rest_framework import generics, serializers, status
from rest_framework.response import Response

from memoryhub.context.assembly import DROPPED_PAGE, DROPPED_PAGE_MAX, assemble_context
from memoryhub.context.timeline import record_timeline
from memoryhub.context.traces import record_artifact, record_trace
from memoryhub.core.errors import NotFound
from memoryhub.models import Artifact, ConsumerTrace, Role
from memoryhub.models.traces import TRACE_API_FIELDS
from memoryhub.web.api.common import WF, TenantAPIView, body_object, bool_param, int_param
from memoryhub.web.api.pagination import StandardPagination
from memoryhub.web.api.serializers import ErrorSerializer, EventSerializer

# -- serializers (outputs; inputs are parsed by memoryhub.context.traces, these document them) -------------


class ContextSummarySerializer(serializers.Serializer):
    summary_id = serializers.CharField()
    version = serializers.IntegerField()
    status = serializers.CharField()
    covers_from_seq = serializers.IntegerField()
    covers_to_seq = serializers.IntegerField(help_text="The coverage watermark.")
    content = serializers.JSONField()
    content_hash = serializers.CharField()
    token_count = serializers.IntegerField()
    compactor = serializers.CharField()
    source_refs = serializers.ListField(child=serializers.CharField())


class ContextSerializer(serializers.Serializer):
    workflow = serializers.CharField()
    summary = ContextSummarySerializer(allow_null=True)
    tail = EventSerializer(many=True, help_text="Every event after the watermark up to head_seq.")
    head_seq = serializers.IntegerField()
    tail_from_seq = serializers.IntegerField()
    tail_to_seq = serializers.IntegerField()
    active_revision = serializers.IntegerField()
    tokens = inline_serializer(
        "ContextTokens",
        {
            "summary": serializers.IntegerField(),
            "tail": serializers.IntegerField(),
            "total": serializers.IntegerField(),
        },
    )
    context_id = serializers.CharField(help_text="Signed id of this read; quote it in the consumer trace.")
    manifest_hash = serializers.CharField(help_text="sha256 of the canonical manifest of what was returned.")
    dropped = inline_serializer(
        "ContextDroppedEvents",
        {
            "summary_id": serializers.CharField(allow_null=True),
            "declared_seqs": serializers.IntegerField(
                help_text="Seqs the summary's manifest declares dropped."
            ),
            "events": EventSerializer(many=True),
            "next_from_seq": serializers.IntegerField(
                allow_null=True, help_text="Pass as dropped_from_seq for the next page; null: no more."
            ),
        },
        required=False,
        help_text="Only with include_dropped=true: the events the served summary's `dropped` manifest names.",
    )


class TraceInSerializer(serializers.Serializer):
    agent = serializers.CharField(max_length=100)
    agent_run_id = serializers.CharField(max_length=200)
    model_call_id = serializers.CharField(max_length=200, help_text="Idempotency key (per workflow).")
    summary_id = serializers.CharField(allow_null=True, help_text="null: the call read raw history.")
    tail_to_seq = serializers.IntegerField(min_value=0)
    context_id = serializers.CharField(required=False)
    manifest_hash = serializers.CharField(required=False)
    source_refs = serializers.ListField(child=serializers.CharField(), required=False)
    graph_release = serializers.CharField(required=False)
    thread_id = serializers.CharField(required=False)
    checkpoint_id = serializers.CharField(required=False)
    model = serializers.CharField(required=False)
    input_tokens = serializers.IntegerField(required=False, min_value=0)
    fallback_retrieval = serializers.BooleanField(required=False)
    fallback_reason = serializers.CharField(required=False)
    input_messages = serializers.ListField(
        child=serializers.DictField(),
        required=False,
        help_text="The messages the model was sent, each with a 'role' (at most 1000, 1 MB of JSON).",
    )
    output = serializers.CharField(
        required=False, help_text="The model's answer as text (structured output JSON-encoded)."
    )
    output_tokens = serializers.IntegerField(required=False, min_value=0)
    latency_ms = serializers.IntegerField(required=False, min_value=0, help_text="Model call latency.")
    cost_usd = serializers.FloatField(required=False, min_value=0, help_text="The call's cost in USD.")


class TraceSerializer(serializers.ModelSerializer):
    trace_id = serializers.IntegerField(source="pk", read_only=True)
    workflow = serializers.CharField(source="workflow.external_id", read_only=True)
    summary_id = serializers.SerializerMethodField()
    summary_version = serializers.SerializerMethodField()
    # A number in JSON, as it was sent (DRF would serve a decimal as a string).
    cost_usd = serializers.DecimalField(
        max_digits=12, decimal_places=6, coerce_to_string=False, allow_null=True, read_only=True
    )

    class Meta:
        model = ConsumerTrace
        fields = list(TRACE_API_FIELDS)
        read_only_fields = fields

    def get_summary_id(self, obj: ConsumerTrace) -> str | None:
        return obj.summary.summary_id if obj.summary is not None else None

    def get_summary_version(self, obj: ConsumerTrace) -> int | None:
        return obj.summary.version if obj.summary is not None else None


class ArtifactInSerializer(serializers.Serializer):
    artifact_id = serializers.CharField(max_length=200, help_text="Unique per tenant, e.g. T57.")
    kind = serializers.CharField(max_length=100)
    uri = serializers.CharField(required=False)
    content_hash = serializers.CharField(required=False)
    content = serializers.JSONField(required=False, help_text="Optional: hashed to check/fill content_hash.")
    quality_score = serializers.FloatField(required=False, min_value=0, max_value=1)
    produced_by = inline_serializer(
        "ArtifactProducedBy",
        {
            "model_call_id": serializers.CharField(required=False),
            "model_call_ids": serializers.ListField(child=serializers.CharField(), required=False),
            "agent_run_id": serializers.CharField(required=False),
        },
    )


class ProducerSerializer(serializers.Serializer):
    trace_id = serializers.IntegerField()
    model_call_id = serializers.CharField()
    agent = serializers.CharField()
    agent_run_id = serializers.CharField()
    summary_id = serializers.CharField(allow_null=True)
    tail_to_seq = serializers.IntegerField()


class ArtifactSerializer(serializers.ModelSerializer):
    workflow = serializers.CharField(source="workflow.external_id", read_only=True)
    produced_by = serializers.SerializerMethodField()

    class Meta:
        model = Artifact
        fields = [
            "artifact_id",
            "workflow",
            "kind",
            "uri",
            "content_hash",
            "quality_score",
            "produced_by",
            "actor",
            "at",
        ]
        read_only_fields = fields

    @extend_schema_field(ProducerSerializer(many=True))
    def get_produced_by(self, obj: Artifact) -> list[dict]:
        return [
            {
                "trace_id": t.pk,
                "model_call_id": t.model_call_id,
                "agent": t.agent,
                "agent_run_id": t.agent_run_id,
                "summary_id": t.summary.summary_id if t.summary is not None else None,
                "tail_to_seq": t.tail_to_seq,
            }
            for t in obj.produced_by.all()
        ]


# -- views -----------------------------------------------------------------------------------------


class WorkflowContext(TenantAPIView):
    @extend_schema(
        parameters=[
            OpenApiParameter(
                "min_seq", int, description="Read-after-write guard: 409 if the head is below this seq."
            ),
            OpenApiParameter(
                "include_dropped",
                bool,
                description="true: also return the events the summary's `dropped` manifest declares left out.",
            ),
            OpenApiParameter(
                "dropped_from_seq", int, description="Page cursor: dropped events after this seq."
            ),
            OpenApiParameter(
                "dropped_limit",
                int,
                description=f"Dropped events per page (1–{DROPPED_PAGE_MAX}, default {DROPPED_PAGE}).",
            ),
        ],
        responses={200: ContextSerializer, 400: ErrorSerializer, 404: ErrorSerializer, 409: ErrorSerializer},
    )
    def get(self, request, wf: str):
        params = request.query_params
        min_seq = int_param(params, "min_seq", None)
        include_dropped = bool_param(params, "include_dropped", False)
        from_seq = int_param(params, "dropped_from_seq", 0) or 0
        limit = int_param(params, "dropped_limit", DROPPED_PAGE, minimum=1, maximum=DROPPED_PAGE_MAX)
        return Response(
            assemble_context(
                self.workflow(wf),
                min_seq=min_seq,
                include_dropped=include_dropped,
                dropped_from_seq=from_seq,
                dropped_limit=limit or DROPPED_PAGE,
            )
        )


class TraceFilter(django_filters.FilterSet):
    agent = django_filters.CharFilter()
    agent_run_id = django_filters.CharFilter()
    flagged = django_filters.BooleanFilter(method="filter_flagged")

    class Meta:
        model = ConsumerTrace
        fields = ["agent", "agent_run_id", "flagged"]

    def filter_flagged(self, queryset, name, value):
        flagged = ~Q(flags=[])
        return queryset.filter(flagged) if value else queryset.exclude(flagged)


class WorkflowTraces(generics.ListAPIView, TenantAPIView):
    write_role = Role.INGEST
    serializer_class = TraceSerializer
    filterset_class = TraceFilter
    pagination_class = StandardPagination
    ordering_fields = ["at", "tail_to_seq"]

    @extend_schema(responses={200: TraceSerializer(many=True), 400: ErrorSerializer, 404: ErrorSerializer})
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation: no request tenant
            return ConsumerTrace.objects.none()
        workflow = self.workflow(self.kwargs["wf"])
        return ConsumerTrace.objects.filter(workflow=workflow).select_related("summary", "workflow")

    @extend_schema(
        request=TraceInSerializer,
        responses={
            201: TraceSerializer,
            200: TraceSerializer,
            400: ErrorSerializer,
            404: ErrorSerializer,
            409: ErrorSerializer,
            413: ErrorSerializer,
        },
    )
    def post(self, request, wf: str):
        data = body_object(request)
        trace, created = record_trace(self.workflow(wf), data, self.actor())
        return Response(
            TraceSerializer(trace).data, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK
        )


class WorkflowTimeline(TenantAPIView):
    """Events and the model calls between them, in order, in one request (memoryhub.context.timeline)."""

    write_role = Role.INGEST

    @extend_schema(
        request=inline_serializer(
            "TimelineIn", {"items": serializers.ListField(child=serializers.DictField())}
        ),
        responses={
            201: inline_serializer(
                "TimelineOut",
                {
                    "events": serializers.ListField(child=serializers.DictField()),
                    "traces": serializers.ListField(child=serializers.DictField()),
                    "head_seq": serializers.IntegerField(),
                },
            ),
            200: OpenApiTypes.OBJECT,
            400: ErrorSerializer,
            404: ErrorSerializer,
            409: ErrorSerializer,
            413: ErrorSerializer,
        },
    )
    def post(self, request, wf: str):
        result = record_timeline(self.workflow(wf), body_object(request), self.actor())
        return Response(
            {"events": result.events, "traces": result.traces, "head_seq": result.head_seq},
            status=status.HTTP_201_CREATED if result.written else status.HTTP_200_OK,
        )


class TraceDetail(TenantAPIView):
    @extend_schema(responses={200: TraceSerializer, 404: ErrorSerializer})
    def get(self, request, trace_id: int):
        trace = (
            ConsumerTrace.objects.filter(tenant=request.tenant, pk=trace_id)
            .select_related("summary", "workflow")
            .first()
        )
        if trace is None:
            raise NotFound(f"trace {trace_id} not found", code="trace_not_found")
        return Response(TraceSerializer(trace).data)


class WorkflowArtifacts(generics.ListAPIView, TenantAPIView):
    serializer_class = ArtifactSerializer
    pagination_class = StandardPagination

    @extend_schema(responses={200: ArtifactSerializer(many=True), 400: ErrorSerializer, 404: ErrorSerializer})
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Artifact.objects.none()
        workflow = self.workflow(self.kwargs["wf"])
        return (
            Artifact.objects.filter(workflow=workflow)
            .select_related("workflow")
            .prefetch_related("produced_by__summary")
        )

    @extend_schema(
        request=ArtifactInSerializer,
        responses={
            201: ArtifactSerializer,
            200: ArtifactSerializer,
            400: ErrorSerializer,
            404: ErrorSerializer,
            409: ErrorSerializer,
            413: ErrorSerializer,
        },
    )
    def post(self, request, wf: str):
        data = body_object(request)
        artifact, created = record_artifact(self.workflow(wf), data, self.actor())
        return Response(
            ArtifactSerializer(artifact).data,
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        )


class ArtifactDetail(TenantAPIView):
    @extend_schema(responses={200: ArtifactSerializer, 404: ErrorSerializer})
    def get(self, request, artifact_id: str):
        artifact = (
            Artifact.objects.filter(tenant=request.tenant, artifact_id=artifact_id)
            .select_related("workflow")
            .prefetch_related("produced_by__summary")
            .first()
        )
        if artifact is None:
            raise NotFound(f"artifact {artifact_id!r} not found", code="artifact_not_found")
        return Response(ArtifactSerializer(artifact).data)


urlpatterns = [
    path(f"workflows/{WF}/context/", WorkflowContext.as_view(), name="workflow-context"),
    path(f"workflows/{WF}/traces/", WorkflowTraces.as_view(), name="workflow-traces"),
    path(f"workflows/{WF}/timeline/", WorkflowTimeline.as_view(), name="workflow-timeline"),
    path("traces/<int:trace_id>/", TraceDetail.as_view(), name="trace-detail"),
    path(f"workflows/{WF}/artifacts/", WorkflowArtifacts.as_view(), name="workflow-artifacts"),
    path("artifacts/<str:artifact_id>/", ArtifactDetail.as_view(), name="artifact-detail"),
]
