"""Observed compactions: compactions a framework or provider performed outside MemoryHub.

GET|POST workflows/{wf}/observed-compactions/

POST stores the provider's summary as a version (coverage 1..covers_to_seq), validates it and
activates it by compare-and-swap (``memoryhub.memory.observed.record_observed_compaction``); a repeat of
the same ``observation_id`` returns the first result with 200.
"""

from __future__ import annotations

from django.urls import path
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.response import Response

from memoryhub.core.errors import InvalidInput
from memoryhub.memory.observed import (
    ObservedResult,
    observed_compactions,
    record_observed_compaction,
    threshold_in_force,
)
from memoryhub.models import Role
from memoryhub.web.api.common import WF, TenantAPIView, body_object
from memoryhub.web.api.serializers import ErrorSerializer

FIELDS = {
    "covers_to_seq",
    "text",
    "opaque",
    "compactor",
    "trigger",
    "observation_id",
    "source_refs",
    "activate",
}

ObservedRequest = inline_serializer(
    "ObservedCompactionRequest",
    {
        "covers_to_seq": serializers.IntegerField(
            min_value=1, help_text="Seq of the last event it replaced."
        ),
        "text": serializers.CharField(required=False, help_text="The provider's summary text, if readable."),
        "opaque": inline_serializer(
            "OpaqueContent",
            {
                "digest": serializers.CharField(help_text="sha256:<64 hex>"),
                "size_bytes": serializers.IntegerField(min_value=0),
                "media_type": serializers.CharField(required=False),
            },
            required=False,
        ),
        "compactor": serializers.DictField(
            help_text="{name: provider, model?, version?, token_budget?, settings?}"
        ),
        "trigger": serializers.DictField(
            required=False,
            help_text="{kind: auto|manual|threshold|unknown, pre_tokens?, post_tokens?, threshold_tokens?}",
        ),
        "observation_id": serializers.CharField(
            required=False, help_text="Provider's id; makes re-sends idempotent."
        ),
        "source_refs": serializers.ListField(child=serializers.CharField(), required=False),
        "activate": serializers.BooleanField(required=False, default=True),
    },
)
ObservedResponse = inline_serializer(
    "ObservedCompaction",
    {
        "summary_id": serializers.CharField(),
        "version": serializers.IntegerField(),
        "status": serializers.CharField(),
        "covers_to_seq": serializers.IntegerField(),
        "content_schema": serializers.CharField(),
        "job_id": serializers.IntegerField(),
        "observation_id": serializers.CharField(),
        "trigger": serializers.DictField(),
        "validation": serializers.ChoiceField(choices=["passed", "failed", "unverifiable", "not_validated"]),
        "activation": serializers.CharField(
            help_text="activated | stale | rejected | refused:<code> | recorded"
        ),
        "created": serializers.BooleanField(),
    },
)


class ObservedCompactions(TenantAPIView):
    write_role = Role.INGEST

    @extend_schema(
        responses={
            200: inline_serializer(
                "ObservedCompactionList",
                {
                    "observed": serializers.ListField(),
                    "threshold_in_force": serializers.DictField(allow_null=True),
                },
            )
        }
    )
    def get(self, request, wf: str):
        workflow = self.workflow(wf)
        rows = [
            ObservedResult(job.summary, job, False, "", job.outcome).to_dict()
            for job in observed_compactions(workflow)[:200]
            if job.summary is not None
        ]
        return Response({"observed": rows, "threshold_in_force": threshold_in_force(workflow)})

    @extend_schema(
        request=ObservedRequest,
        responses={
            201: ObservedResponse,
            200: ObservedResponse,
            400: ErrorSerializer,
            409: ErrorSerializer,
            413: ErrorSerializer,
        },
    )
    def post(self, request, wf: str):
        data = body_object(request)
        unknown = sorted(set(data) - FIELDS)
        if unknown:
            raise InvalidInput(f"unknown field(s) {unknown}; allowed: {sorted(FIELDS)}", code="invalid_field")
        if "covers_to_seq" not in data or "compactor" not in data:
            raise InvalidInput(
                "'covers_to_seq' and 'compactor' are required", code="invalid_observed_compaction"
            )
        activate = data.get("activate", True)
        if not isinstance(activate, bool):
            raise InvalidInput("'activate' must be a boolean", code="invalid_field")
        result = record_observed_compaction(
            self.workflow(wf),
            covers_to_seq=data["covers_to_seq"],
            text=data.get("text"),
            opaque=data.get("opaque"),
            compactor=data["compactor"],
            trigger=data.get("trigger"),
            observation_id=data.get("observation_id"),
            source_refs=data.get("source_refs"),
            activate=activate,
            actor=self.actor(),
        )
        return Response(
            result.to_dict(), status=status.HTTP_201_CREATED if result.created else status.HTTP_200_OK
        )


urlpatterns = [
    path(f"workflows/{WF}/observed-compactions/", ObservedCompactions.as_view(), name="workflow-observed"),
]
