"""Compaction jobs.

POST workflows/{wf}/compactions/   {"source_revision"?: n, "compactor"?: name} → 202 the job (idempotent)
GET  workflows/{wf}/compactions/   the workflow's jobs, newest first (?status=)
GET  compactions/{job_id}/          status, every attempt, tokens, estimated cost, latency

Views are thin: the rules live in memoryhub.pipeline.jobs.
"""

from __future__ import annotations

from typing import Any

import django_filters
from django.urls import path
from drf_spectacular.utils import extend_schema
from rest_framework import generics, serializers, status
from rest_framework.response import Response

from memoryhub.core.errors import InvalidInput, NotFound
from memoryhub.models import CompactionJob, JobStatus
from memoryhub.pipeline.jobs import job_payload, request_compaction
from memoryhub.web.api.common import WF, TenantAPIView, body_object
from memoryhub.web.api.serializers import ErrorSerializer

REQUEST_FIELDS = {"source_revision", "compactor"}


class CompactionRequestSerializer(serializers.Serializer):
    source_revision = serializers.IntegerField(
        required=False, min_value=1, help_text="Event seq to compact through (default: the head)."
    )
    compactor = serializers.CharField(
        required=False,
        help_text="extractive-v3 (default), extractive-v2, extractive-v1, openai-chat-v1 or openai-chat-v2.",
    )


class AttemptSerializer(serializers.Serializer):
    attempt = serializers.IntegerField(required=False)
    task_id = serializers.CharField()
    attempt_id = serializers.CharField(required=False)
    worker = serializers.CharField(required=False)
    started_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
    outcome = serializers.CharField(
        help_text="running | succeeded outcome | retry | skipped | lost | failed …"
    )
    error = serializers.CharField(allow_blank=True)


class JobSerializer(serializers.Serializer):
    """Documentation of the job shape; the data comes from ``jobs.job_payload``."""

    job_id = serializers.IntegerField()
    workflow = serializers.CharField()
    source_revision = serializers.IntegerField()
    compactor = serializers.CharField()
    idempotency_key = serializers.CharField()
    status = serializers.ChoiceField(choices=JobStatus.choices)
    outcome = serializers.CharField(
        help_text="activated | stale | refused | rejected | awaiting_approval | nothing_to_compact | failed …"
    )
    error = serializers.CharField(allow_blank=True)
    summary_id = serializers.CharField(allow_null=True)
    expected_revision = serializers.IntegerField(allow_null=True)
    attempts = AttemptSerializer(many=True)
    tokens_in = serializers.IntegerField()
    tokens_out = serializers.IntegerField()
    estimated_cost_usd = serializers.CharField()
    latency_ms = serializers.IntegerField(allow_null=True)
    enqueue_attempts = serializers.IntegerField()
    requested_by = serializers.CharField()
    created_at = serializers.DateTimeField()
    enqueued_at = serializers.DateTimeField(allow_null=True)
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    created = serializers.BooleanField(
        required=False, help_text="POST only: false when the job already existed."
    )

    def to_representation(self, instance: CompactionJob) -> dict[str, Any]:
        return serializers.Serializer.to_representation(self, job_payload(instance))


class JobFilter(django_filters.FilterSet):
    status = django_filters.ChoiceFilter(choices=JobStatus.choices)

    class Meta:
        model = CompactionJob
        fields = ["status"]


class WorkflowCompactions(generics.ListAPIView, TenantAPIView):
    serializer_class = JobSerializer
    filterset_class = JobFilter
    ordering_fields = ["created_at", "source_revision"]

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation: no request tenant
            return CompactionJob.objects.none()
        workflow = self.workflow(self.kwargs["wf"])
        # Workflow page: a workflow's jobs by recency (index memoryhub_job_wf_recent).
        return CompactionJob.objects.filter(tenant=self.tenant, workflow=workflow).select_related(
            "workflow", "summary"
        )

    @extend_schema(
        request=CompactionRequestSerializer,
        responses={202: JobSerializer, 400: ErrorSerializer, 404: ErrorSerializer},
    )
    def post(self, request, wf: str):
        data = body_object(request)
        unknown = sorted(set(data) - REQUEST_FIELDS)
        if unknown:
            raise InvalidInput(
                f"unknown field(s) {unknown}; allowed: {sorted(REQUEST_FIELDS)}", code="invalid_body"
            )
        revision = data.get("source_revision")
        if revision is not None and (isinstance(revision, bool) or not isinstance(revision, int)):
            raise InvalidInput("'source_revision' must be an integer", code="invalid_source_revision")
        compactor = data.get("compactor")
        if compactor is not None and (not isinstance(compactor, str) or not compactor.strip()):
            raise InvalidInput("'compactor' must be a non-empty string", code="unknown_compactor")
        job, created = request_compaction(
            self.workflow(wf), source_revision=revision, compactor=compactor, actor=self.actor()
        )
        job = CompactionJob.objects.select_related("workflow", "summary").get(pk=job.pk)
        return Response({**JobSerializer(job).data, "created": created}, status=status.HTTP_202_ACCEPTED)


class CompactionDetail(TenantAPIView):
    @extend_schema(responses={200: JobSerializer, 404: ErrorSerializer})
    def get(self, request, job_id: int):
        job = (
            CompactionJob.objects.filter(tenant=request.tenant, pk=job_id)
            .select_related("workflow", "summary")
            .first()
        )
        if job is None:  # another tenant's job is indistinguishable from none
            raise NotFound(f"compaction job {job_id} not found", code="job_not_found")
        return Response(JobSerializer(job).data)


urlpatterns = [
    path(f"workflows/{WF}/compactions/", WorkflowCompactions.as_view(), name="workflow-compactions"),
    path("compactions/<int:job_id>/", CompactionDetail.as_view(), name="compaction-detail"),
]
