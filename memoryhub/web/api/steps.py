"""The per-model-call round trip of the framework integrations (a thin view over triggers.steps)."""

from __future__ import annotations

from django.urls import path
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response

from memoryhub.models import Role
from memoryhub.web.api.common import WF, TenantAPIView
from memoryhub.web.api.serializers import ErrorSerializer
from triggers.steps import MAX_STEP_COMPACTIONS, MAX_STEP_TRACES, run_step


class StepRequestSerializer(serializers.Serializer):
    """Schema of the step body; triggers.steps parses it (one set of rules for API and spool replay)."""

    create = serializers.DictField(  # type: ignore[assignment]  # API field name shadows Serializer.create
        required=False,
        help_text='Create the workflow on first use: {"name"?, "graph_release"?, "source"?, "model"?}.',
    )
    events = serializers.ListField(
        child=serializers.DictField(),
        required=False,
        help_text="New events (≤ MEMORYHUB_MAX_BATCH_EVENTS), each with its client_event_id.",
    )
    compactions = serializers.ListField(
        child=serializers.DictField(),
        required=False,
        help_text=f"≤ {MAX_STEP_COMPACTIONS} observed compactions (observation_id required; covers_to_seq "
        "or covers_to_event).",
    )
    traces = serializers.ListField(
        child=serializers.DictField(),
        required=False,
        help_text=f"≤ {MAX_STEP_TRACES} consumer traces (tail_to_seq or tail_to_event; summary_id or "
        "summary_observation_id).",
    )
    decide = serializers.DictField(
        required=False, allow_null=True, help_text="Trigger inputs: when present the workflow policy decides."
    )
    context = serializers.BooleanField(  # type: ignore[assignment]  # API field name shadows Field.context
        required=False, help_text="Answer with the context id (+ manifest) of the read right after the step."
    )


class StepResponseSerializer(serializers.Serializer):
    workflow = serializers.CharField()
    created = serializers.BooleanField()
    head_seq = serializers.IntegerField()
    total_tokens = serializers.IntegerField()
    events = serializers.ListField(child=serializers.DictField())
    compactions = serializers.ListField(child=serializers.DictField())
    traces = serializers.ListField(child=serializers.DictField())
    decision = serializers.DictField(allow_null=True)
    context = serializers.DictField(  # type: ignore[assignment]  # API field name shadows Field.context
        allow_null=True,
        help_text="Only when asked (context: true). "
        "The read right after this step: context_id, manifest_hash (null past "
        "MANIFEST_MAX_TAIL_EVENTS tail events), summary_id, head_seq.",
    )


class WorkflowStep(TenantAPIView):
    """Append + record + decide in one idempotent round trip (one call per model call)."""

    write_role = Role.INGEST  # what integrations call: appends and observations only

    @extend_schema(
        request=StepRequestSerializer,
        responses={
            200: StepResponseSerializer,
            400: ErrorSerializer,
            404: ErrorSerializer,
            409: ErrorSerializer,
            413: ErrorSerializer,
        },
    )
    def post(self, request, wf: str):
        result = run_step(self.tenant, wf, request.data, self.actor())
        return Response(result, status=status.HTTP_200_OK)


urlpatterns = [
    path(f"workflows/{WF}/step/", WorkflowStep.as_view(), name="workflow-step"),
]
