"""Observed compactions: compactions a framework or provider performed outside MemoryHub.

GET|POST workflows/{wf}/observed-compactions/
POST workflows/{wf}/repair/ (the verdict before the record; writes nothing)

POST stores the provider's summary as a version (coverage 1..covers_to_seq), validates it and
activates it by compare-and-swap (``memoryhub.memory.observed.record_observed_compaction``); a repeat of
the same ``observation_id`` returns the first result with 200. The answer's ``repair`` is the
verdict on what the summary lost and the items to hand back (``memoryhub.memory.repair``).
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
from memoryhub.memory.repair import verdict_for
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
    "can_block",
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
        "can_block": serializers.BooleanField(
            required=False,
            default=False,
            help_text="The caller can keep its previous context: under policy gate 'block' a lossy "
            "summary is recorded but not activated (activation 'blocked').",
        ),
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
        "repair": serializers.DictField(
            allow_null=True,
            help_text="The verdict on what the summary lost and what to hand back: {verdict: "
            "kept|repaired|blocked|observed|unknown, gate, needed, empty_summary, lost, items: "
            "[{kind, seq, text}], omitted, text, note, resummarize}.",
        ),
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
        can_block = data.get("can_block", False)
        if not isinstance(can_block, bool):
            raise InvalidInput("'can_block' must be a boolean", code="invalid_field")
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
            can_block=can_block,
            actor=self.actor(),
        )
        return Response(
            result.to_dict(), status=status.HTTP_201_CREATED if result.created else status.HTTP_200_OK
        )


RepairRequest = inline_serializer(
    "RepairVerdictRequest",
    {
        "text": serializers.CharField(allow_blank=True, help_text="The framework's summary (may be empty)."),
        "covers_to_seq": serializers.IntegerField(required=False, min_value=1),
        "covers_to_event": serializers.CharField(
            required=False, help_text="client_event_id of the last event it replaces."
        ),
        "events": serializers.ListField(
            child=serializers.DictField(),
            required=False,
            help_text="Events not stored yet (sent with the step that records the compaction next).",
        ),
        "can_block": serializers.BooleanField(required=False, default=False),
    },
)
RepairResponse = inline_serializer(
    "RepairVerdict",
    {
        "verdict": serializers.ChoiceField(choices=["kept", "repaired", "blocked", "observed", "unknown"]),
        "gate": serializers.CharField(),
        "needed": serializers.BooleanField(),
        "empty_summary": serializers.BooleanField(),
        "lost": serializers.DictField(),
        "items": serializers.ListField(child=serializers.DictField()),
        "omitted": serializers.IntegerField(),
        "text": serializers.CharField(),
        "note": serializers.CharField(),
        "resummarize": serializers.BooleanField(),
    },
)


class RepairVerdict(TenantAPIView):
    """POST workflows/{wf}/repair/: the verdict on a summary a framework is about to use, before
    it is recorded (``memoryhub.memory.repair.verdict_for``). Writes nothing."""

    write_role = Role.INGEST

    @extend_schema(
        request=RepairRequest,
        responses={200: RepairResponse, 400: ErrorSerializer, 404: ErrorSerializer, 413: ErrorSerializer},
    )
    def post(self, request, wf: str):
        handback = verdict_for(self.workflow(wf), body_object(request))
        return Response(handback.to_dict(), status=status.HTTP_200_OK)


urlpatterns = [
    path(f"workflows/{WF}/observed-compactions/", ObservedCompactions.as_view(), name="workflow-observed"),
    path(f"workflows/{WF}/repair/", RepairVerdict.as_view(), name="workflow-repair"),
]
