"""Summary versions and their lifecycle actions.

GET|POST workflows/{wf}/summaries/          list (filter ?status=A,B; paginated) / submit a candidate
GET      summaries/{summary_id}/            all eight metadata groups
GET      summaries/{summary_id}/verify/     recompute the content hash
POST     summaries/{summary_id}/{validate|activate|approve|quarantine|reject|waive|release|rollback}/

Views are thin: parsing and rules live in memoryhub.memory.summaries and memoryhub.memory.lifecycle.
"""

from __future__ import annotations

from typing import Any, cast

import django_filters
from django.urls import path
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import generics, serializers, status
from rest_framework.response import Response

from audit.models import SummaryComment
from audit.review import add_comment
from memoryhub.core.errors import InvalidInput
from memoryhub.memory import lifecycle
from memoryhub.memory.summaries import (
    create_summary,
    get_summary,
    summary_detail,
    summary_row,
    validation_dict,
    verify_summary,
)
from memoryhub.models import Role, Summary, SummaryStatus, Workflow
from memoryhub.web.api.common import WF, TenantAPIView, body_object
from memoryhub.web.api.serializers import ErrorSerializer
from memoryhub.web.api.throttles import ReviewThrottle

# -- documentation serializers (inputs are parsed by the services) --------------------------------


class FactSerializer(serializers.Serializer):
    key = serializers.CharField()
    kind = serializers.CharField()
    text = serializers.CharField(allow_blank=True, required=False)
    state = serializers.CharField(required=False)
    source_seqs = serializers.ListField(child=serializers.IntegerField())


class ContentSerializer(serializers.Serializer):
    schema = serializers.CharField(required=False, help_text="memoryhub.summary/v1 (default)")
    narrative = serializers.CharField(allow_blank=True)
    facts = FactSerializer(many=True)
    open_items = serializers.ListField(child=serializers.JSONField(), required=False)


class CompactorSerializer(serializers.Serializer):
    name = serializers.CharField()
    version = serializers.CharField(required=False)
    model = serializers.CharField(required=False)
    prompt_template_version = serializers.CharField(required=False)
    algorithm_version = serializers.CharField(required=False)
    token_budget = serializers.IntegerField(required=False, min_value=1)
    tool_schema_version = serializers.CharField(required=False)


class SummarySubmitSerializer(serializers.Serializer):
    covers_from_seq = serializers.IntegerField(min_value=1)
    covers_to_seq = serializers.IntegerField(min_value=1)
    content = ContentSerializer()
    content_hash = serializers.CharField(
        required=False, help_text="Checked against the server's hash, never trusted."
    )
    source_refs = serializers.ListField(child=serializers.CharField(), required=False)
    excluded_categories = serializers.ListField(child=serializers.CharField(), required=False)
    compactor = CompactorSerializer()


class SummaryRowSerializer(serializers.Serializer):
    summary_id = serializers.CharField()
    version = serializers.IntegerField()
    label = serializers.CharField()  # type: ignore[assignment]  # API field name shadows Field.label
    status = serializers.ChoiceField(choices=SummaryStatus.choices)
    covers_from_seq = serializers.IntegerField()
    covers_to_seq = serializers.IntegerField()
    compactor = serializers.DictField()
    token_count = serializers.IntegerField()
    content_hash = serializers.CharField()
    created_at = serializers.DateTimeField()
    status_changed_at = serializers.DateTimeField()

    def to_representation(self, instance: Summary) -> dict[str, Any]:
        return summary_row(instance)


SummaryDetailSerializer = inline_serializer(
    "SummaryDetail",
    {
        "summary_id": serializers.CharField(),
        "workflow": serializers.CharField(),
        "version": serializers.IntegerField(),
        "label": serializers.CharField(),
        "status": serializers.CharField(),
        "content_hash": serializers.CharField(),
        "identity": serializers.DictField(),
        "source_lineage": serializers.DictField(),
        "compactor": serializers.DictField(),
        "validation": serializers.DictField(),
        "integrity": serializers.DictField(),
        "content": serializers.DictField(allow_null=True),
        "lifecycle": serializers.DictField(),
        "activation": serializers.DictField(),
        "consumers": serializers.DictField(),
    },
)
VerifySerializer = inline_serializer(
    "SummaryVerify",
    {
        "summary_id": serializers.CharField(),
        "result": serializers.ChoiceField(choices=["match", "mismatch", "purged"]),
        "match": serializers.BooleanField(),
        "recorded_hash": serializers.CharField(),
        "computed_hash": serializers.CharField(),
        "canonical": serializers.BooleanField(),
        "byte_length": serializers.IntegerField(),
        "detail": serializers.CharField(),
    },
)
StateSerializer = inline_serializer(
    "SummaryState",
    {
        "summary_id": serializers.CharField(),
        "version": serializers.IntegerField(),
        "status": serializers.CharField(),
        "active_summary_id": serializers.CharField(allow_null=True),
        "active_revision": serializers.IntegerField(),
    },
)


def _reason(required: bool = True) -> serializers.CharField:
    """A reason field as ``lifecycle.clean_reason`` accepts it (the schema shows the same limit)."""
    return serializers.CharField(required=required, max_length=lifecycle.MAX_REASON)


ReasonSerializer = inline_serializer("ReviewReason", {"reason": _reason()})
RevisionSerializer = inline_serializer(
    "ActivateRequest",
    {"expected_revision": serializers.IntegerField(min_value=0), "reason": _reason(required=False)},
)
RollbackSerializer = inline_serializer(
    "RollbackRequest", {"expected_revision": serializers.IntegerField(min_value=0), "reason": _reason()}
)
WaiveSerializer = inline_serializer(
    "WaiveRequest", {"checks": serializers.ListField(child=serializers.CharField()), "reason": _reason()}
)
ActivationSerializer = inline_serializer(
    "ActivationResult",
    {
        "summary_id": serializers.CharField(),
        "version": serializers.IntegerField(),
        "status": serializers.CharField(),
        "active_revision": serializers.IntegerField(),
        "superseded_summary_id": serializers.CharField(allow_null=True),
    },
)
ConflictSerializer = inline_serializer(
    "LifecycleConflict",
    {
        "error": serializers.CharField(
            help_text="stale_revision | illegal_transition | approval_required | approval_not_required | "
            "already_approved | watermark_regression | summary_purged | purged_since_read | nothing_to_waive"
        ),
        "detail": serializers.CharField(),
        "current_revision": serializers.IntegerField(required=False),
        "current_status": serializers.CharField(required=False),
    },
)


# -- list / submit -------------------------------------------------------------------------------


class StatusInFilter(django_filters.BaseInFilter, django_filters.ChoiceFilter):
    pass


class SummaryFilter(django_filters.FilterSet):
    status = StatusInFilter(
        choices=SummaryStatus.choices, help_text="One status or several, comma-separated."
    )

    class Meta:
        model = Summary
        fields = ["status"]


class WorkflowSummaries(generics.ListAPIView, TenantAPIView):
    """List a workflow's summary versions (newest first; ?status=A,B) or submit an external candidate."""

    serializer_class = SummaryRowSerializer
    filterset_class = SummaryFilter
    ordering_fields = ["version", "created_at", "covers_to_seq"]
    ordering = ["-version"]

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation has no URL kwargs
            return Summary.objects.none()
        workflow = self.workflow(self.kwargs["wf"])
        return Summary.objects.filter(workflow=workflow).order_by("-version")

    @extend_schema(
        request=SummarySubmitSerializer,
        responses={
            201: SummaryDetailSerializer,
            400: ErrorSerializer,
            404: ErrorSerializer,
            413: ErrorSerializer,
        },
    )
    def post(self, request, wf: str):
        data = body_object(request)
        allowed = {
            "covers_from_seq",
            "covers_to_seq",
            "content",
            "content_hash",
            "source_refs",
            "excluded_categories",
            "compactor",
        }
        unknown = sorted(set(data) - allowed)
        if unknown:
            raise InvalidInput(f"unknown field(s) {unknown}", code="invalid_body")
        for required in ("covers_from_seq", "covers_to_seq", "content", "compactor"):
            if required not in data:
                raise InvalidInput(
                    f"{required}: this field is required", code="invalid_summary", field=required
                )
        summary = create_summary(
            self.workflow(wf),
            content=data["content"],
            covers_from_seq=data["covers_from_seq"],
            covers_to_seq=data["covers_to_seq"],
            compactor=data["compactor"],
            source_refs=data.get("source_refs") or (),
            excluded_categories=data.get("excluded_categories") or (),
            claimed_hash=data.get("content_hash"),
            actor=self.actor(),
        )
        return Response(summary_detail(_reload(summary)), status=status.HTTP_201_CREATED)


def _reload(summary: Summary) -> Summary:
    return Summary.objects.select_related("workflow", "job", "purged_by").get(pk=summary.pk)


# -- read one ------------------------------------------------------------------------------------


class SummaryDetail(TenantAPIView):
    """One summary with all eight metadata groups."""

    @extend_schema(responses={200: SummaryDetailSerializer, 404: ErrorSerializer})
    def get(self, request, summary_id: str):
        return Response(summary_detail(get_summary(request.tenant, summary_id)))


class SummaryVerify(TenantAPIView):
    """Recompute the hash of the stored canonical bytes and compare it with content_hash."""

    @extend_schema(responses={200: VerifySerializer, 404: ErrorSerializer})
    def get(self, request, summary_id: str):
        return Response(verify_summary(get_summary(request.tenant, summary_id)))


# -- lifecycle actions ---------------------------------------------------------------------------


def _state(summary: Summary, **extra: Any) -> dict[str, Any]:
    wf = Workflow.objects.select_related("active_summary").get(pk=summary.workflow_id)
    fresh = Summary.objects.get(pk=summary.pk)
    return {
        "summary_id": fresh.summary_id,
        "version": fresh.version,
        "label": fresh.label,
        "status": fresh.status,
        "active_summary_id": cast(Summary, wf.active_summary).summary_id if wf.active_summary_id else None,
        "active_revision": wf.active_revision,
        **extra,
    }


def _expected_revision(data: dict[str, Any]) -> int:
    if "expected_revision" not in data:
        raise InvalidInput(
            "expected_revision is required: the active_revision you read (compare-and-swap key)",
            code="expected_revision_required",
        )
    return lifecycle.clean_revision(data["expected_revision"])


def _activation_response(result: lifecycle.ActivationResult) -> Response:
    error = result.error()
    if error is not None:
        raise error  # the stale/refused LifecycleEvent is already committed
    return Response(
        {
            "summary_id": result.summary.summary_id,
            "version": result.summary.version,
            "status": result.summary.status,
            "active_revision": result.active_revision,
            "superseded_summary_id": result.superseded.summary_id if result.superseded else None,
        }
    )


class _Action(TenantAPIView):
    """Base of POST summaries/{summary_id}/<action>/. The input is checked first (400, nothing
    written), then ``allowed``: the action must be one of ``lifecycle.allowed_actions`` (the rule
    the summary page's buttons show; 403 for the role, a recorded 409 for the state), then the
    service runs. The least role also gates the request early (``write_role``)."""

    lifecycle_action = ""
    write_role: str = Role.REVIEWER

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.lifecycle_action:
            cls.write_role = lifecycle.ACTION_ROLES[cls.lifecycle_action]

    throttle_classes = [ReviewThrottle]
    throttle_scope = "review"

    def summary(self, summary_id: str) -> Summary:
        return get_summary(self.tenant, summary_id)

    def allowed(self, summary_id: str, *, reason: str = "", expected: int | None = None) -> Summary:
        """The summary, once ``lifecycle.check_allowed`` lets the caller take this action on it."""
        summary = self.summary(summary_id)
        role = self.request.role  # type: ignore[attr-defined]  # set by TenantMember
        lifecycle.check_allowed(
            summary, self.lifecycle_action, self.actor(), role, reason=reason, expected=expected
        )
        return summary


class ValidateView(_Action):
    """Run the validator: CANDIDATE → VALIDATED or REJECTED (a new ValidationRecord)."""

    lifecycle_action = "validate"

    @extend_schema(
        request=None, responses={200: StateSerializer, 404: ErrorSerializer, 409: ConflictSerializer}
    )
    def post(self, request, summary_id: str):
        summary = lifecycle.validate(self.allowed(summary_id), self.actor())
        latest = summary.validations.order_by("-created_at", "-id").first()
        return Response(_state(summary, validation=validation_dict(latest) if latest else None))


class ActivateView(_Action):
    """Compare-and-swap activation: applies only if active_revision == expected_revision."""

    lifecycle_action = "activate"

    @extend_schema(
        request=RevisionSerializer,
        responses={
            200: ActivationSerializer,
            400: ErrorSerializer,
            404: ErrorSerializer,
            409: ConflictSerializer,
        },
    )
    def post(self, request, summary_id: str):
        data = body_object(request)
        revision = _expected_revision(data)
        reason = lifecycle.clean_reason(data.get("reason"), required=False)
        # The role half here; the state half is the service's own, read under the workflow lock
        # in the one statement the compare-and-swap reads (the same rules and codes as
        # ``check_allowed``: a pre-check would read them all again, ~8 ms through the ORM).
        lifecycle.check_role(self.lifecycle_action, self.request.role)  # type: ignore[attr-defined]  # set by TenantMember
        summary = self.summary(summary_id)
        return _activation_response(lifecycle.activate(summary, revision, self.actor(), reason=reason))


class RollbackView(_Action):
    """Reviewer re-activates a SUPERSEDED version (one that was active before) by compare-and-swap;
    a reason is required and the approval rule of activate applies."""

    lifecycle_action = "rollback"

    @extend_schema(
        request=RollbackSerializer,
        responses={
            200: ActivationSerializer,
            400: ErrorSerializer,
            404: ErrorSerializer,
            409: ConflictSerializer,
        },
    )
    def post(self, request, summary_id: str):
        data = body_object(request)
        revision = _expected_revision(data)
        reason = lifecycle.clean_reason(data.get("reason"))
        summary = self.allowed(summary_id, reason=reason, expected=revision)
        return _activation_response(lifecycle.rollback(summary, revision, self.actor(), reason))


def _review_view(name: str, func, *, doc: str = "") -> type[_Action]:
    """One POST view per review action taking {"reason"}."""

    @extend_schema(
        request=ReasonSerializer,
        responses={
            200: StateSerializer,
            400: ErrorSerializer,
            403: ErrorSerializer,
            404: ErrorSerializer,
            409: ConflictSerializer,
        },
        description=doc,
    )
    def post(self, request, summary_id: str):
        reason = lifecycle.clean_reason(body_object(request).get("reason"))
        summary = func(self.allowed(summary_id, reason=reason), self.actor(), reason)
        return Response(_state(summary))

    return type(f"{name.title()}View", (_Action,), {"post": post, "lifecycle_action": name, "__doc__": doc})


ApproveRequestSerializer = inline_serializer(
    "ApproveRequest",
    {
        "reason": _reason(),
        "activate": serializers.BooleanField(required=False, default=False),
        "expected_revision": serializers.IntegerField(min_value=0, required=False),
    },
)


class ApproveView(_Action):
    """Reviewer approval (needed when require_approval). With ``"activate": true`` and the
    ``expected_revision`` seen, the summary also goes live in the same transaction."""

    lifecycle_action = "approve"

    @extend_schema(
        request=ApproveRequestSerializer,
        responses={
            200: StateSerializer,
            400: ErrorSerializer,
            403: ErrorSerializer,
            404: ErrorSerializer,
            409: ConflictSerializer,
        },
    )
    def post(self, request, summary_id: str):
        data = body_object(request)
        go_live = data.get("activate", False)
        if not isinstance(go_live, bool):
            raise InvalidInput("'activate' must be true or false", code="invalid_body")
        reason = lifecycle.clean_reason(data.get("reason"))
        revision = _expected_revision(data) if go_live else None
        summary = self.allowed(summary_id, reason=reason)
        if revision is None:
            return Response(_state(lifecycle.approve(summary, self.actor(), reason)))
        return _activation_response(lifecycle.approve_and_activate(summary, revision, self.actor(), reason))


RejectView = _review_view(
    "reject", lifecycle.reject, doc="Reviewer rejects a CANDIDATE or VALIDATED summary."
)
QuarantineView = _review_view(
    "quarantine", lifecycle.quarantine, doc="Reviewer quarantine; an ACTIVE summary's pointer falls back."
)
ReleaseView = _review_view(
    "release",
    lifecycle.release,
    doc="Admin releases a QUARANTINED summary (reason required).",
)


class WaiveView(_Action):
    """Reviewer waives named failed checks of a REJECTED summary (reason required)."""

    lifecycle_action = "waive"

    @extend_schema(
        request=WaiveSerializer,
        responses={200: StateSerializer, 400: ErrorSerializer, 404: ErrorSerializer, 409: ConflictSerializer},
    )
    def post(self, request, summary_id: str):
        data = body_object(request)
        if data.get("checks") is None:
            raise InvalidInput("checks: the failed check names to waive are required", code="invalid_waiver")
        checks = lifecycle.clean_checks(data["checks"])
        reason = lifecycle.clean_reason(data.get("reason"))
        summary = lifecycle.waive(self.allowed(summary_id, reason=reason), checks, self.actor(), reason)
        latest = summary.validations.order_by("-created_at", "-id").first()
        return Response(_state(summary, validation=validation_dict(latest) if latest else None))


class CommentSerializer(serializers.Serializer):
    """One comment on a summary (documentation; the view builds the dict)."""

    id = serializers.IntegerField()
    summary_id = serializers.CharField()
    author = serializers.CharField()
    text = serializers.CharField()
    at = serializers.DateTimeField()


def _comment(comment: SummaryComment) -> dict[str, Any]:
    return {
        "id": comment.pk,
        "summary_id": comment.summary.summary_id,
        "author": comment.author,
        "text": comment.text,
        "at": comment.at,
    }


class SummaryComments(_Action):
    """A summary's discussion: GET lists the comments (oldest first); POST {"text"} adds one
    (reviewer or above; audited)."""

    lifecycle_action = "comment"

    @extend_schema(responses={200: CommentSerializer(many=True), 404: ErrorSerializer})
    def get(self, request, summary_id: str):
        summary = self.summary(summary_id)
        return Response(
            [_comment(c) for c in summary.comments.select_related("summary").order_by("at", "id")]
        )

    @extend_schema(
        request=inline_serializer(
            "CommentRequest", {"text": serializers.CharField(max_length=lifecycle.MAX_COMMENT)}
        ),
        responses={201: CommentSerializer, 400: ErrorSerializer, 403: ErrorSerializer, 404: ErrorSerializer},
    )
    def post(self, request, summary_id: str):
        data = body_object(request)
        comment = add_comment(self.summary(summary_id), self.actor(), data.get("text"))
        return Response(_comment(comment), status=status.HTTP_201_CREATED)


SID = "<str:summary_id>"
urlpatterns = [
    path(f"workflows/{WF}/summaries/", WorkflowSummaries.as_view(), name="workflow-summaries"),
    path(f"summaries/{SID}/", SummaryDetail.as_view(), name="summary-detail"),
    path(f"summaries/{SID}/verify/", SummaryVerify.as_view(), name="summary-verify"),
    path(f"summaries/{SID}/validate/", ValidateView.as_view(), name="summary-validate"),
    path(f"summaries/{SID}/activate/", ActivateView.as_view(), name="summary-activate"),
    path(f"summaries/{SID}/rollback/", RollbackView.as_view(), name="summary-rollback"),
    path(f"summaries/{SID}/approve/", ApproveView.as_view(), name="summary-approve"),
    path(f"summaries/{SID}/reject/", RejectView.as_view(), name="summary-reject"),
    path(f"summaries/{SID}/quarantine/", QuarantineView.as_view(), name="summary-quarantine"),
    path(f"summaries/{SID}/release/", ReleaseView.as_view(), name="summary-release"),
    path(f"summaries/{SID}/waive/", WaiveView.as_view(), name="summary-waive"),
    path(f"summaries/{SID}/comments/", SummaryComments.as_view(), name="summary-comments"),
]
