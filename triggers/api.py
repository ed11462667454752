"""Trigger API: context policies, stateful decisions (logged), what-if evaluation, simulator, export.

Paths are relative to /api/v1/. Views stay thin: every rule lives in triggers.services and
triggers.engine.
"""

from __future__ import annotations

from typing import Any

from django.urls import path
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import generics, serializers, status
from rest_framework.response import Response

from memoryhub.core.errors import InvalidInput
from memoryhub.models import Role
from memoryhub.web.api.common import WF, TenantAPIView, body_object, int_param
from memoryhub.web.api.serializers import ErrorSerializer
from triggers import policy, services
from triggers.engine import ACTIONS, MAX_INPUT_COUNT, PolicySpec, export_langchain, export_langmem
from triggers.figures import simulation_figure


class PolicySerializer(serializers.Serializer):
    """The policy shape of the API contract (documentation only; parsing is PolicySpec.parse)."""

    model = serializers.CharField()
    encoding = serializers.CharField()
    context_window = serializers.IntegerField()
    reserve_system = serializers.IntegerField()
    reserve_retrieval = serializers.IntegerField()
    reserve_output = serializers.IntegerField()
    safety_margin = serializers.IntegerField()
    target_tokens = serializers.IntegerField()
    min_new_tokens = serializers.IntegerField()
    min_interval_seconds = serializers.IntegerField()
    hard_limit_tokens = serializers.IntegerField(allow_null=True, required=False)
    require_approval = serializers.BooleanField()
    strategies = serializers.DictField(
        child=serializers.DictField(), help_text="name → {enabled, …thresholds}"
    )


class PolicyOutSerializer(PolicySerializer):
    safe_budget = serializers.IntegerField()
    usable_input_tokens = serializers.IntegerField()
    hard_limit = serializers.IntegerField()
    trigger_tokens = serializers.IntegerField()
    source = serializers.ChoiceField(choices=["workflow", "tenant", "default"])  # type: ignore[assignment]  # API field name shadows Field.source
    updated_at = serializers.DateTimeField(allow_null=True)
    updated_by = serializers.CharField()


class DecisionSerializer(serializers.Serializer):
    action = serializers.ChoiceField(choices=list(ACTIONS))
    strategy = serializers.CharField(allow_null=True)
    reasons = serializers.ListField(child=serializers.CharField())
    current_tokens = serializers.IntegerField()
    expected_next_step_tokens = serializers.IntegerField()
    projected_tokens = serializers.IntegerField()
    safe_budget = serializers.IntegerField()
    target_tokens = serializers.IntegerField()
    hard_limit = serializers.IntegerField()
    over_by = serializers.IntegerField()
    headroom = serializers.IntegerField()
    fired = serializers.ListField(child=serializers.CharField())
    blocked_by = serializers.ListField(child=serializers.CharField())
    suppressed_by = serializers.CharField(allow_null=True)
    # null for the what-if, and for a "continue" whose log row was committed asynchronously.
    decision_id = serializers.IntegerField(allow_null=True)
    durable = serializers.BooleanField(required=False)


class TriggerRequestSerializer(serializers.Serializer):
    expected_next_step_tokens = serializers.IntegerField(
        min_value=0, max_value=MAX_INPUT_COUNT, required=False
    )
    checkpoint_safe = serializers.BooleanField(required=False)
    remaining_steps = serializers.IntegerField(
        min_value=0, max_value=MAX_INPUT_COUNT, required=False, allow_null=True
    )
    quality_score = serializers.FloatField(min_value=0, max_value=1, required=False, allow_null=True)
    evidence_safeguarded = serializers.BooleanField(required=False)
    last_validation_failed = serializers.BooleanField(required=False)
    unresolved_tool_calls = serializers.IntegerField(min_value=0, max_value=MAX_INPUT_COUNT, required=False)
    pending_side_effects = serializers.IntegerField(min_value=0, max_value=MAX_INPUT_COUNT, required=False)
    compaction_cost_tokens = serializers.IntegerField(
        min_value=0, max_value=MAX_INPUT_COUNT, required=False, allow_null=True
    )
    expected_savings_per_step = serializers.IntegerField(
        min_value=0, max_value=MAX_INPUT_COUNT, required=False, allow_null=True
    )
    message_count = serializers.IntegerField(min_value=0, max_value=MAX_INPUT_COUNT, required=False)
    enqueue = serializers.BooleanField(
        required=False, help_text="Start the compaction job when action=compact."
    )


class WorkflowTriggerRequestSerializer(TriggerRequestSerializer):
    token_estimate = serializers.IntegerField(
        required=False,
        min_value=0,
        max_value=2**53,
        help_text="The client's own count of the history now; its drift from the running total is recorded.",
    )
    token_estimate_model = serializers.CharField(required=False, max_length=100)


class EvaluateRequestSerializer(TriggerRequestSerializer):
    current_tokens = serializers.IntegerField(min_value=0, max_value=MAX_INPUT_COUNT)
    policy = PolicySerializer(
        required=False, help_text="Inline policy (partial: missing fields take defaults)."
    )
    workflow = serializers.CharField(required=False, help_text="Use this workflow's policy instead.")
    tokens_since_last_compaction = serializers.IntegerField(
        min_value=0, max_value=MAX_INPUT_COUNT, required=False, allow_null=True
    )
    seconds_since_last_compaction = serializers.FloatField(min_value=0, required=False, allow_null=True)


_SIM_OUT = OpenApiTypes.OBJECT
_EXPORT_PARAMS = [
    OpenApiParameter(
        "keep_recent_tokens", int, description="Recent tokens kept verbatim (default target/2)."
    ),
    OpenApiParameter(
        "typical_step_tokens",
        int,
        description="Lower the exported trigger by this much to approximate projection.",
    ),
]


def _export(spec: PolicySpec, params: Any) -> dict[str, Any]:
    keep = int_param(params, "keep_recent_tokens", None)
    step = int_param(params, "typical_step_tokens", 0) or 0
    if keep is not None and keep > spec.target_tokens:
        raise InvalidInput(
            f"keep_recent_tokens must be at most target_tokens ({spec.target_tokens})",
            code="invalid_parameter",
        )
    return {
        "langmem": export_langmem(spec, keep_recent_tokens=keep, typical_step_tokens=step),
        "langchain": export_langchain(spec, keep_recent_tokens=keep, typical_step_tokens=step),
    }


class _PolicyView(TenantAPIView):
    """GET / PUT (replace) / PATCH (merge) / DELETE one stored policy level."""

    def scope(self, wf: str | None):
        return self.workflow(wf) if wf is not None else None

    def _get(self, wf: str | None = None) -> Response:
        spec, source, row = policy.effective_policy(self.tenant, self.scope(wf))
        return Response(services.policy_payload(spec, source, row))

    def _save(self, wf: str | None, *, partial: bool) -> Response:
        workflow = self.scope(wf)
        row, spec = services.save_policy(
            self.tenant,
            body_object(self.request),
            self.actor(),
            workflow=workflow,
            partial=partial,
            role=getattr(self.request, "role", None),
        )
        source = policy.SOURCE_WORKFLOW if workflow is not None else policy.SOURCE_TENANT
        return Response(services.policy_payload(spec, source, row))

    def _delete(self, wf: str | None = None) -> Response:
        workflow = self.scope(wf)
        services.delete_policy(
            self.tenant, self.actor(), workflow=workflow, role=getattr(self.request, "role", None)
        )
        spec, source, row = policy.effective_policy(self.tenant, workflow)
        return Response(services.policy_payload(spec, source, row))


class WorkflowPolicy(_PolicyView):
    """The policy in effect for a workflow; PUT/PATCH store a per-workflow override."""

    @extend_schema(responses={200: PolicyOutSerializer, 404: ErrorSerializer})
    def get(self, request, wf: str):
        return self._get(wf)

    @extend_schema(request=PolicySerializer, responses={200: PolicyOutSerializer, 400: ErrorSerializer})
    def put(self, request, wf: str):
        return self._save(wf, partial=False)

    @extend_schema(request=PolicySerializer, responses={200: PolicyOutSerializer, 400: ErrorSerializer})
    def patch(self, request, wf: str):
        return self._save(wf, partial=True)

    @extend_schema(
        responses={200: PolicyOutSerializer}, description="Drop the override; the tenant default applies."
    )
    def delete(self, request, wf: str):
        return self._delete(wf)


class TenantPolicy(_PolicyView):
    """The tenant default policy (admin to change)."""

    write_role = Role.ADMIN

    @extend_schema(responses={200: PolicyOutSerializer})
    def get(self, request):
        return self._get()

    @extend_schema(request=PolicySerializer, responses={200: PolicyOutSerializer, 400: ErrorSerializer})
    def put(self, request):
        return self._save(None, partial=False)

    @extend_schema(request=PolicySerializer, responses={200: PolicyOutSerializer, 400: ErrorSerializer})
    def patch(self, request):
        return self._save(None, partial=True)

    @extend_schema(
        responses={200: PolicyOutSerializer}, description="Drop the tenant default; seed defaults apply."
    )
    def delete(self, request):
        return self._delete()


class WorkflowPolicyExport(TenantAPIView):
    @extend_schema(parameters=_EXPORT_PARAMS, responses={200: OpenApiTypes.OBJECT, 404: ErrorSerializer})
    def get(self, request, wf: str):
        return Response(_export(policy.policy_for(self.workflow(wf)), request.query_params))


class TenantPolicyExport(TenantAPIView):
    @extend_schema(parameters=_EXPORT_PARAMS, responses={200: OpenApiTypes.OBJECT})
    def get(self, request):
        spec, _, _ = policy.effective_policy(self.tenant)
        return Response(_export(spec, request.query_params))


class WorkflowTrigger(TenantAPIView):
    """Ask "compact now?" before the next step: O(1) on running totals, logged, optional enqueue."""

    @extend_schema(
        request=WorkflowTriggerRequestSerializer,
        responses={200: DecisionSerializer, 400: ErrorSerializer, 404: ErrorSerializer},
    )
    def post(self, request, wf: str):
        body = dict(body_object(request))
        enqueue = body.pop("enqueue", False)
        if not isinstance(enqueue, bool):
            raise InvalidInput("enqueue must be true or false", code="invalid_trigger_input")
        workflow = services.workflow_for_decision(self.tenant, wf)
        row = services.decide(workflow, body, self.actor(), enqueue=enqueue)
        return Response(services.decision_payload(row))


class WorkflowDecisions(generics.ListAPIView, TenantAPIView):
    """A workflow's decision log, newest first (?action= filters)."""

    filter_backends: list = []

    @extend_schema(
        parameters=[OpenApiParameter("action", str, enum=list(ACTIONS))],
        responses={200: DecisionSerializer(many=True)},
    )
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)

    def get_queryset(self):
        qs = services.decisions_for(self.workflow(self.kwargs["wf"]))
        action = self.request.query_params.get("action")
        if action:
            if action not in ACTIONS:
                raise InvalidInput(f"action must be one of {', '.join(ACTIONS)}", code="invalid_parameter")
            qs = qs.filter(action=action)
        return qs

    def list(self, request, *args, **kwargs):
        page = self.paginate_queryset(self.get_queryset())
        assert page is not None  # StandardPagination has a fixed page_size: it always pages
        return self.get_paginated_response([services.decision_payload(row) for row in page])


class Evaluate(TenantAPIView):
    """Stateless what-if: an inline policy (or a workflow's) and explicit numbers; nothing logged."""

    write_role = Role.VIEWER  # a pure computation: nothing is written

    @extend_schema(
        request=EvaluateRequestSerializer, responses={200: DecisionSerializer, 400: ErrorSerializer}
    )
    def post(self, request):
        return Response(services.evaluate_what_if(self.tenant, body_object(request)))


class WorkflowSimulate(TenantAPIView):
    """Replay the workflow's recorded growth under its policy and a candidate, side by side."""

    write_role = Role.VIEWER

    @extend_schema(
        request=inline_serializer(
            "WorkflowSimulateRequest",
            {
                "candidate": PolicySerializer(required=False),
                "group": serializers.ChoiceField(choices=["auto", *services.GROUPINGS], required=False),
                "compaction_ratio": serializers.FloatField(required=False),
                "seconds_per_step": serializers.FloatField(required=False),
                "know_remaining_steps": serializers.BooleanField(required=False),
            },
        ),
        responses={200: _SIM_OUT, 400: ErrorSerializer, 404: ErrorSerializer},
    )
    def post(self, request, wf: str):
        result = services.simulate_workflow(self.workflow(wf), body_object(request))
        result["figure"] = simulation_figure(result)
        return Response(result)


class Simulate(TenantAPIView):
    """Simulate explicit per-step token growth under a policy and a candidate."""

    write_role = Role.VIEWER

    @extend_schema(
        request=inline_serializer(
            "SimulateRequest",
            {
                "steps": serializers.ListField(child=serializers.IntegerField(min_value=0)),
                "boundaries": serializers.ListField(child=serializers.IntegerField(), required=False),
                "initial_tokens": serializers.IntegerField(required=False),
                "policy": PolicySerializer(required=False),
                "candidate": PolicySerializer(required=False),
            },
        ),
        responses={200: _SIM_OUT, 400: ErrorSerializer},
    )
    def post(self, request):
        result = services.simulate_steps(self.tenant, body_object(request))
        result["figure"] = simulation_figure(result)
        return Response(result, status=status.HTTP_200_OK)


urlpatterns = [
    path(f"workflows/{WF}/policy/", WorkflowPolicy.as_view(), name="workflow-policy"),
    path(f"workflows/{WF}/policy/export/", WorkflowPolicyExport.as_view(), name="workflow-policy-export"),
    path(f"workflows/{WF}/trigger/", WorkflowTrigger.as_view(), name="workflow-trigger"),
    path(f"workflows/{WF}/decisions/", WorkflowDecisions.as_view(), name="workflow-decisions"),
    path(f"workflows/{WF}/simulate/", WorkflowSimulate.as_view(), name="workflow-simulate"),
    path("triggers/policy/", TenantPolicy.as_view(), name="tenant-policy"),
    path("triggers/policy/export/", TenantPolicyExport.as_view(), name="tenant-policy-export"),
    path("triggers/evaluate/", Evaluate.as_view(), name="triggers-evaluate"),
    path("triggers/simulate/", Simulate.as_view(), name="triggers-simulate"),
]
