"""Audit API: artifact lineage and investigations, summary diff, replay bundles, the audit log and
its verification. Paths are relative to /api/v1/."""

from __future__ import annotations

import django_filters
from django.urls import path
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import generics, serializers, status
from rest_framework.filters import OrderingFilter
from rest_framework.response import Response

from audit.diff import diff_summaries, resolve_pair
from audit.investigate import investigate, investigations_of
from audit.lineage import artifact_lineage, get_artifact
from audit.models import CHAIN_ORDER, NEWEST_FIRST, AuditEntry, Investigation
from audit.replay import get_trace, replay_bundle
from audit.verify import verify_chain
from memoryhub.core.errors import InvalidInput
from memoryhub.web.api.common import TenantAPIView, body_object, int_param
from memoryhub.web.api.fields import SafeIsoDateTimeFilter
from memoryhub.web.api.serializers import ErrorSerializer


class InvestigationSerializer(serializers.ModelSerializer):
    artifact_id = serializers.CharField(source="artifact.artifact_id", read_only=True)

    class Meta:
        model = Investigation
        fields = ["id", "artifact_id", "fact", "is_regex", "verdict", "evidence", "elapsed_ms", "actor", "at"]


class AuditEntrySerializer(serializers.ModelSerializer):
    pending = serializers.BooleanField(read_only=True, help_text="committed, not sequenced yet (seq null)")

    class Meta:
        model = AuditEntry
        fields = [
            "seq",
            "pending",
            "at",
            "actor",
            "action",
            "object_type",
            "object_id",
            "data",
            "prev_hash",
            "entry_hash",
            "sequenced_at",
        ]


InvestigateRequest = inline_serializer(
    "InvestigateRequest",
    {
        "fact": serializers.CharField(max_length=500),
        "regex": serializers.BooleanField(required=False, default=False),
    },
)
VerifyResponse = inline_serializer(
    "AuditVerifyResponse",
    {
        "ok": serializers.BooleanField(),
        "entries": serializers.IntegerField(),
        "first_bad_seq": serializers.IntegerField(allow_null=True),
        "problem": serializers.CharField(allow_null=True),
        "detail": serializers.CharField(),
        "head_seq": serializers.IntegerField(),
        "head_hash": serializers.CharField(),
        "pending": serializers.IntegerField(help_text="entries committed but not sequenced yet"),
        "pending_oldest_age_s": serializers.FloatField(allow_null=True),
        "sequenced_now": serializers.IntegerField(help_text="entries this call had to sequence itself"),
    },
)


class ArtifactLineage(TenantAPIView):
    @extend_schema(
        summary="Artifact lineage: traces → summary + tail → validation → events → job → lifecycle",
        responses={200: OpenApiTypes.OBJECT, 404: ErrorSerializer},
    )
    def get(self, request, artifact_id: str):
        return Response(artifact_lineage(get_artifact(request.tenant, artifact_id)))


class ArtifactInvestigate(TenantAPIView):
    @extend_schema(
        summary="Classify why the artifact missed a fact (text or regex), save and return the investigation",
        request=InvestigateRequest,
        responses={
            201: InvestigationSerializer,
            400: ErrorSerializer,
            404: ErrorSerializer,
            409: ErrorSerializer,
        },
    )
    def post(self, request, artifact_id: str):
        data = body_object(request)
        unknown = set(data) - {"fact", "regex"}
        if unknown:
            raise InvalidInput(f"unknown field(s) {sorted(unknown)}", code="invalid_body")
        regex = data.get("regex", False)
        if not isinstance(regex, bool):
            raise InvalidInput("regex must be a boolean", code="invalid_regex")
        artifact = get_artifact(request.tenant, artifact_id)
        result = investigate(artifact, data.get("fact", ""), self.actor(), regex=regex)
        return Response(InvestigationSerializer(result).data, status=status.HTTP_201_CREATED)


class ArtifactInvestigations(generics.ListAPIView, TenantAPIView):
    serializer_class = InvestigationSerializer
    filter_backends: list = []

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation: no tenant
            return Investigation.objects.none()
        return investigations_of(get_artifact(self.tenant, self.kwargs["artifact_id"]))


class SummaryDiff(TenantAPIView):
    @extend_schema(
        summary="Diff a summary against another version (default: the previous version)",
        parameters=[OpenApiParameter("against", str, description="summary_id to diff against")],
        responses={200: OpenApiTypes.OBJECT, 400: ErrorSerializer, 404: ErrorSerializer},
    )
    def get(self, request, summary_id: str):
        base, summary = resolve_pair(request.tenant, summary_id, request.query_params.get("against") or None)
        return Response(diff_summaries(base, summary))


class TraceReplay(TenantAPIView):
    @extend_schema(
        summary="Replay bundle of a consumer trace (inputs, configuration, and what is unavailable)",
        responses={200: OpenApiTypes.OBJECT, 404: ErrorSerializer},
    )
    def get(self, request, trace_id: str):
        return Response(replay_bundle(get_trace(request.tenant, trace_id)))


class AuditEntryFilter(django_filters.FilterSet):
    action = django_filters.CharFilter()
    action_prefix = django_filters.CharFilter(field_name="action", lookup_expr="startswith")
    object_type = django_filters.CharFilter()
    object_id = django_filters.CharFilter()
    actor = django_filters.CharFilter(lookup_expr="icontains")
    since = SafeIsoDateTimeFilter(field_name="at", lookup_expr="gte")
    until = SafeIsoDateTimeFilter(field_name="at", lookup_expr="lte")

    class Meta:
        model = AuditEntry
        fields = ["action", "action_prefix", "object_type", "object_id", "actor", "since", "until"]


class AuditOrdering(OrderingFilter):
    """``ordering=seq`` is chain order on every database: pending entries (seq null) come after the
    sequenced ones, and before them in ``-seq`` (SQLite and PostgreSQL sort NULLs differently)."""

    def filter_queryset(self, request, queryset, view):
        ordering = self.get_ordering(request, queryset, view) or []
        by_seq = {"seq": CHAIN_ORDER, "-seq": NEWEST_FIRST}
        return queryset.order_by(*[o for field in ordering for o in by_seq.get(field, [field])])


class AuditLog(generics.ListAPIView, TenantAPIView):
    """The tenant's audit entries, newest first (pending ones first of all), filtered and paginated."""

    serializer_class = AuditEntrySerializer
    filterset_class = AuditEntryFilter
    filter_backends = [DjangoFilterBackend, AuditOrdering]
    ordering_fields = ["seq", "at"]
    ordering = ["-seq"]

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation: no tenant
            return AuditEntry.objects.none()
        return AuditEntry.objects.filter(tenant=self.tenant)


class AuditVerify(TenantAPIView):
    @extend_schema(
        summary="Recompute the tenant's audit hash chain",
        parameters=[
            OpenApiParameter("checkpoint_seq", int, description="seq of an exported checkpoint"),
            OpenApiParameter("checkpoint_hash", str, description="entry_hash of that checkpoint"),
        ],
        responses={200: VerifyResponse, 400: ErrorSerializer},
    )
    def get(self, request):
        seq = int_param(request.query_params, "checkpoint_seq", None)
        entry_hash = request.query_params.get("checkpoint_hash")
        if (seq is None) != (entry_hash is None):
            raise InvalidInput("checkpoint_seq and checkpoint_hash go together", code="invalid_checkpoint")
        checkpoint = (
            {"tenant": request.tenant.slug, "seq": seq, "entry_hash": entry_hash} if seq is not None else None
        )
        return Response(verify_chain(request.tenant, checkpoint))


urlpatterns = [
    path("artifacts/<str:artifact_id>/lineage/", ArtifactLineage.as_view(), name="artifact-lineage"),
    path(
        "artifacts/<str:artifact_id>/investigate/", ArtifactInvestigate.as_view(), name="artifact-investigate"
    ),
    path(
        "artifacts/<str:artifact_id>/investigations/",
        ArtifactInvestigations.as_view(),
        name="artifact-investigations",
    ),
    path("summaries/<str:summary_id>/diff/", SummaryDiff.as_view(), name="summary-diff"),
    path("traces/<str:trace_id>/replay/", TraceReplay.as_view(), name="trace-replay"),
    path("audit/", AuditLog.as_view(), name="audit-log"),
    path("audit/verify/", AuditVerify.as_view(), name="audit-verify"),
]
