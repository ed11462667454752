"""Alert rules, channels, alerts (state flips) and metrics.

Reads need any role; writes and test-sends need admin. Inputs are validated by
memoryhub.observe.alerting.services (shared with the pages); the serializers here shape the output and
document the inputs. Secrets are never returned, only ``secret_set``.
"""

from __future__ import annotations

from datetime import timedelta
from urllib.parse import urlsplit

import django_filters
from django.db.models import Prefetch, QuerySet
from django.urls import path
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view, inline_serializer
from rest_framework import generics, serializers, status
from rest_framework.response import Response

from memoryhub.core.errors import InvalidInput, NotFound
from memoryhub.models import (
    Aggregation,
    AlertEvaluation,
    AlertEvent,
    AlertRule,
    AlertState,
    Channel,
    ChannelKind,
    Comparator,
    Notification,
    Role,
    Tenant,
    WorkflowSource,
    role_at_least,
)
from memoryhub.models.alerts import RULE_DEFINITION_FIELDS, rule_max_length, rule_range
from memoryhub.observe.alerting import services
from memoryhub.observe.metrics import METRICS, ROLLUP_BUCKET, series, snapshot
from memoryhub.web.api.common import TenantAPIView, body_object, int_param, list_responses
from memoryhub.web.api.fields import SafeIntegerFilter, SafeIsoDateTimeFilter
from memoryhub.web.api.serializers import ErrorSerializer

# --- serializers ----------------------------------------------------------------------------


class RuleSerializer(serializers.ModelSerializer):
    # Blank (every source) as well as a source: documented as one of the sources or "".
    source_filter = serializers.ChoiceField(choices=WorkflowSource.choices, allow_blank=True, read_only=True)
    channels = serializers.SerializerMethodField()
    muted = serializers.SerializerMethodField()

    class Meta:
        model = AlertRule
        fields = [
            "id",
            *RULE_DEFINITION_FIELDS,
            "channels",
            "enabled",
            "is_default",
            "muted_until",
            "muted",
            "state",
            "last_value",
            "last_evaluated_at",
            "next_eval_at",
            "created_at",
        ]
        read_only_fields = fields

    def get_channels(self, obj: AlertRule) -> list[int]:
        return sorted(c.pk for c in obj.channels.all())

    def get_muted(self, obj: AlertRule) -> bool:
        return services.is_muted(obj)


class RuleInputSerializer(serializers.Serializer):
    """Request shape (documentation; validation is memoryhub.observe.alerting.services.clean_rule)."""

    name = serializers.CharField(max_length=rule_max_length("name"))
    metric = serializers.ChoiceField(choices=list(METRICS))
    aggregation = serializers.ChoiceField(choices=Aggregation.choices, required=False)
    comparator = serializers.ChoiceField(choices=Comparator.choices, required=False)
    warning_threshold = serializers.FloatField(allow_null=True, required=False)
    critical_threshold = serializers.FloatField(allow_null=True, required=False)
    window_minutes = serializers.IntegerField(required=False, **rule_range("window_minutes"))
    interval_seconds = serializers.IntegerField(required=False, **rule_range("interval_seconds"))
    workflow_filter = serializers.CharField(
        required=False, allow_blank=True, max_length=rule_max_length("workflow_filter")
    )
    source_filter = serializers.ChoiceField(
        choices=WorkflowSource.choices,
        required=False,
        allow_blank=True,
        help_text="Only workflows this integration feeds; blank: every source.",
    )
    channels = serializers.ListField(child=serializers.IntegerField(), required=False)
    enabled = serializers.BooleanField(required=False)
    muted_until = serializers.DateTimeField(allow_null=True, required=False)


def sees_delivery_internals(request) -> bool:
    """Channel admins see URLs, delivery errors and status codes; other members see only whether
    a channel is healthy (an error can name internal hosts or carry a receiver's words)."""
    return request is not None and role_at_least(getattr(request, "role", None), Role.ADMIN)


class ChannelSerializer(serializers.ModelSerializer):
    """Pass ``context={"request": request}``: without an admin's request the delivery internals
    (URL path, last error, disabled reason) are blanked."""

    url = serializers.SerializerMethodField()
    # Blank for webhook/Slack channels, so not documented as format "email".
    email = serializers.CharField(read_only=True)
    secret_set = serializers.SerializerMethodField()
    enabled = serializers.SerializerMethodField()

    class Meta:
        model = Channel
        fields = [
            "id",
            "kind",
            "name",
            "url",
            "email",
            "timeout_seconds",
            "secret_set",
            "enabled",
            "disabled_at",
            "disabled_reason",
            "last_error",
            "last_delivery_at",
            "created_at",
        ]
        read_only_fields = fields

    def get_url(self, obj: Channel) -> str:
        # A Slack-style incoming-webhook URL is itself a credential: show only its host; a
        # non-admin sees only the host of any URL.
        if obj.url and (obj.kind == ChannelKind.SLACK or not self._internals()):
            parts = urlsplit(obj.url)
            return f"{parts.scheme}://{parts.hostname}/…"
        return obj.url

    def _internals(self) -> bool:
        return sees_delivery_internals(self.context.get("request"))

    def to_representation(self, instance):
        data = super().to_representation(instance)
        if not self._internals():
            data["last_error"] = ""
            data["disabled_reason"] = "disabled after a delivery error" if data["disabled_at"] else ""
        return data

    def get_secret_set(self, obj: Channel) -> bool:
        return bool(obj.secret)

    def get_enabled(self, obj: Channel) -> bool:
        return obj.disabled_at is None


class ChannelInputSerializer(serializers.Serializer):
    """Request shape (documentation; validation is memoryhub.observe.alerting.services.clean_channel)."""

    kind = serializers.ChoiceField(choices=ChannelKind.choices)
    name = serializers.CharField(max_length=100)
    url = serializers.URLField(required=False)
    secret = serializers.CharField(required=False, write_only=True, allow_blank=True)
    email = serializers.EmailField(required=False)
    timeout_seconds = serializers.FloatField(required=False, min_value=0.5, max_value=30)


class NotificationSerializer(serializers.ModelSerializer):
    """Non-admins see whether an attempt succeeded, not its status code or error."""

    class Meta:
        model = Notification
        fields = ["id", "alert_event", "channel", "kind", "at", "ok", "status_code", "error"]
        read_only_fields = fields

    def to_representation(self, instance):
        data = super().to_representation(instance)
        if not sees_delivery_internals(self.context.get("request")):
            data["status_code"], data["error"] = None, ""
        return data


class AlertSerializer(serializers.ModelSerializer):
    rule_id = serializers.IntegerField(read_only=True)
    rule_name = serializers.CharField(source="rule.name", read_only=True)
    metric = serializers.CharField(source="rule.metric", read_only=True)
    kind = serializers.SerializerMethodField()

    class Meta:
        model = AlertEvent
        fields = [
            "id",
            "rule_id",
            "rule_name",
            "metric",
            "kind",
            "from_state",
            "to_state",
            "value",
            "at",
            "processed_at",
        ]
        read_only_fields = fields

    def get_kind(self, obj: AlertEvent) -> str:
        return "resolve" if obj.to_state == AlertState.OK else "alert"


class EvaluationSerializer(serializers.ModelSerializer):
    class Meta:
        model = AlertEvaluation
        fields = ["at", "value", "state", "warning_threshold", "critical_threshold"]
        read_only_fields = fields


class EvaluationListSerializer(serializers.Serializer):
    rule_id = serializers.IntegerField()
    evaluations = EvaluationSerializer(many=True)


class NotificationListSerializer(serializers.Serializer):
    channel_id = serializers.IntegerField()
    notifications = NotificationSerializer(many=True)


class MetricDefinitionSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=["counter", "gauge", "ratio", "mean"])
    unit = serializers.CharField()
    description = serializers.CharField()


class SeriesPointSerializer(serializers.Serializer):
    t = serializers.DateTimeField()
    value = serializers.FloatField(allow_null=True)


class MetricsResponseSerializer(serializers.Serializer):
    """A snapshot (``metrics`` + ``definitions``) or, with ?metric=, that metric's ``series``."""

    at = serializers.DateTimeField(required=False)
    window_minutes = serializers.IntegerField(required=False)
    workflow_prefix = serializers.CharField(required=False, allow_blank=True)
    metrics = serializers.DictField(child=serializers.FloatField(allow_null=True), required=False)
    definitions = serializers.DictField(child=MetricDefinitionSerializer(), required=False)
    metric = serializers.CharField(required=False)
    kind = serializers.CharField(required=False)
    unit = serializers.CharField(required=False)
    bucket_minutes = serializers.IntegerField(required=False)
    rollup_minutes = serializers.IntegerField(required=False)
    series = SeriesPointSerializer(many=True, required=False)


QUEUED = inline_serializer(
    "TestQueued", {"queued": serializers.BooleanField(), "detail": serializers.CharField()}
)


# --- views ----------------------------------------------------------------------------------


def _rules(tenant: Tenant) -> QuerySet[AlertRule]:
    return AlertRule.objects.filter(tenant=tenant).prefetch_related(
        Prefetch("channels", Channel.objects.only("pk"))
    )


def _rule(request, pk: int) -> AlertRule:
    rule = _rules(request.tenant).filter(pk=pk).first()
    if rule is None:
        raise NotFound(f"alert rule {pk} not found", code="rule_not_found")
    return rule


def _channel(request, pk: int) -> Channel:
    channel = services.tenant_channel(request.tenant, pk)
    if channel is None:
        raise NotFound(f"channel {pk} not found", code="channel_not_found")
    return channel


class RuleFilter(django_filters.FilterSet):
    state = django_filters.ChoiceFilter(choices=AlertState.choices)
    metric = django_filters.CharFilter()
    enabled = django_filters.BooleanFilter()

    class Meta:
        model = AlertRule
        fields = ["state", "metric", "enabled"]


@extend_schema_view(get=extend_schema(responses=list_responses(RuleSerializer)))
class RuleListCreate(generics.ListAPIView, TenantAPIView):
    serializer_class = RuleSerializer
    filterset_class = RuleFilter
    search_fields = ["name", "metric"]
    ordering_fields = ["name", "state", "created_at", "last_evaluated_at"]
    write_role = Role.ADMIN

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation has no tenant
            return AlertRule.objects.none()
        # Tenant-scoped list: another tenant's rules never appear.
        return _rules(self.tenant).order_by("name", "pk")

    @extend_schema(request=RuleInputSerializer, responses={201: RuleSerializer, 400: ErrorSerializer})
    def post(self, request):
        rule = services.create_rule(request.tenant, body_object(request), self.actor())
        return Response(RuleSerializer(_rule(request, rule.pk)).data, status=status.HTTP_201_CREATED)


class RuleDetail(TenantAPIView):
    write_role = Role.ADMIN

    @extend_schema(responses={200: RuleSerializer, 404: ErrorSerializer})
    def get(self, request, pk: int):
        return Response(RuleSerializer(_rule(request, pk)).data)

    @extend_schema(
        request=RuleInputSerializer,
        responses={200: RuleSerializer, 400: ErrorSerializer, 404: ErrorSerializer},
        description="Partial update: only the fields sent change.",
    )
    def patch(self, request, pk: int):
        rule = services.update_rule(_rule(request, pk), body_object(request), self.actor())
        return Response(RuleSerializer(_rule(request, rule.pk)).data)

    @extend_schema(
        request=RuleInputSerializer,
        responses={200: RuleSerializer, 400: ErrorSerializer, 404: ErrorSerializer},
        description="Same as PATCH (fields not sent keep their values).",
    )
    def put(self, request, pk: int):
        return self.patch(request, pk)

    @extend_schema(responses={204: None, 404: ErrorSerializer})
    def delete(self, request, pk: int):
        services.delete_rule(_rule(request, pk), self.actor())
        return Response(status=status.HTTP_204_NO_CONTENT)


class RuleTest(TenantAPIView):
    write_role = Role.ADMIN

    @extend_schema(request=None, responses={202: QUEUED, 400: ErrorSerializer, 404: ErrorSerializer})
    def post(self, request, pk: int):
        rule = _rule(request, pk)
        if not rule.channels.filter(disabled_at__isnull=True).exists():
            raise InvalidInput("the rule has no enabled channel to test", code="no_channels")
        services.request_test_send(rule=rule, actor=self.actor())
        return Response(
            {"queued": True, "detail": "A worker sends the test to the rule's enabled channels."},
            status=status.HTTP_202_ACCEPTED,
        )


class RuleMute(TenantAPIView):
    write_role = Role.ADMIN

    @extend_schema(
        request=inline_serializer(
            "MuteRequest",
            {
                "minutes": serializers.IntegerField(required=False, help_text="0 unmutes"),
                "until": serializers.DateTimeField(required=False, allow_null=True),
            },
        ),
        responses={200: RuleSerializer, 400: ErrorSerializer, 404: ErrorSerializer},
    )
    def post(self, request, pk: int):
        data = body_object(request)
        rule = _rule(request, pk)
        if "minutes" in data:
            until = services.mute_until_minutes(data["minutes"])
        elif "until" in data:
            until = services.parse_moment(data["until"], "until")
        else:
            raise InvalidInput("send 'minutes' or 'until'", code="missing_field", field="minutes")
        services.mute_rule(rule, until, self.actor())
        return Response(RuleSerializer(_rule(request, pk)).data)


class RuleEvaluations(TenantAPIView):
    @extend_schema(
        parameters=[OpenApiParameter("limit", int, description="Newest first, 1-1000 (default 100).")],
        responses={200: EvaluationListSerializer, 400: ErrorSerializer, 404: ErrorSerializer},
    )
    def get(self, request, pk: int):
        rule = _rule(request, pk)
        limit = int_param(request.query_params, "limit", 100, minimum=1, maximum=1000) or 100
        evaluations = AlertEvaluation.objects.filter(rule=rule).order_by("-at", "-id")[:limit]
        return Response(
            {"rule_id": rule.pk, "evaluations": EvaluationSerializer(evaluations, many=True).data}
        )


@extend_schema_view(get=extend_schema(responses=list_responses(ChannelSerializer)))
class ChannelListCreate(generics.ListAPIView, TenantAPIView):
    serializer_class = ChannelSerializer
    search_fields = ["name"]
    ordering_fields = ["name", "created_at", "last_delivery_at"]
    write_role = Role.ADMIN

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Channel.objects.none()
        return Channel.objects.filter(tenant=self.tenant).order_by("name", "pk")

    @extend_schema(request=ChannelInputSerializer, responses={201: ChannelSerializer, 400: ErrorSerializer})
    def post(self, request):
        channel = services.create_channel(request.tenant, body_object(request), self.actor())
        return Response(
            ChannelSerializer(channel, context={"request": request}).data, status=status.HTTP_201_CREATED
        )


class ChannelDetail(TenantAPIView):
    write_role = Role.ADMIN

    @extend_schema(responses={200: ChannelSerializer, 404: ErrorSerializer})
    def get(self, request, pk: int):
        return Response(ChannelSerializer(_channel(request, pk), context={"request": request}).data)

    @extend_schema(
        request=ChannelInputSerializer,
        responses={200: ChannelSerializer, 400: ErrorSerializer, 404: ErrorSerializer},
        description="Partial update; omit 'secret' to keep it, send \"\" to clear it.",
    )
    def patch(self, request, pk: int):
        channel = services.update_channel(_channel(request, pk), body_object(request), self.actor())
        return Response(ChannelSerializer(channel, context={"request": request}).data)

    @extend_schema(
        request=ChannelInputSerializer,
        responses={200: ChannelSerializer, 400: ErrorSerializer, 404: ErrorSerializer},
        description="Same as PATCH.",
    )
    def put(self, request, pk: int):
        return self.patch(request, pk)

    @extend_schema(responses={204: None, 404: ErrorSerializer})
    def delete(self, request, pk: int):
        services.delete_channel(_channel(request, pk), self.actor())
        return Response(status=status.HTTP_204_NO_CONTENT)


class ChannelTest(TenantAPIView):
    write_role = Role.ADMIN

    @extend_schema(request=None, responses={202: QUEUED, 404: ErrorSerializer})
    def post(self, request, pk: int):
        services.request_test_send(channel=_channel(request, pk), actor=self.actor())
        return Response(
            {"queued": True, "detail": "A worker sends the test; see the channel's notifications."},
            status=status.HTTP_202_ACCEPTED,
        )


class ChannelEnable(TenantAPIView):
    write_role = Role.ADMIN

    @extend_schema(request=None, responses={200: ChannelSerializer, 404: ErrorSerializer})
    def post(self, request, pk: int):
        channel = services.enable_channel(_channel(request, pk), self.actor())
        return Response(ChannelSerializer(channel, context={"request": request}).data)


class ChannelNotifications(TenantAPIView):
    @extend_schema(
        parameters=[OpenApiParameter("limit", int, description="Newest first, 1-500 (default 50).")],
        responses={200: NotificationListSerializer, 400: ErrorSerializer, 404: ErrorSerializer},
    )
    def get(self, request, pk: int):
        channel = _channel(request, pk)
        limit = int_param(request.query_params, "limit", 50, minimum=1, maximum=500) or 50
        rows = Notification.objects.filter(channel=channel).order_by("-at", "-id")[:limit]
        return Response(
            {
                "channel_id": channel.pk,
                "notifications": NotificationSerializer(rows, many=True, context={"request": request}).data,
            }
        )


class AlertFilter(django_filters.FilterSet):
    rule = SafeIntegerFilter(field_name="rule_id")
    to_state = django_filters.ChoiceFilter(choices=AlertState.choices)
    since = SafeIsoDateTimeFilter(field_name="at", lookup_expr="gte")

    class Meta:
        model = AlertEvent
        fields = ["rule", "to_state", "since"]


@extend_schema_view(get=extend_schema(responses=list_responses(AlertSerializer)))
class AlertList(generics.ListAPIView, TenantAPIView):
    """State flips (ok ↔ warning ↔ critical), newest first."""

    serializer_class = AlertSerializer
    filterset_class = AlertFilter
    ordering_fields = ["at"]

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return AlertEvent.objects.none()
        # Served by memoryhub_flip_tenant_at (tenant, -at).
        return AlertEvent.objects.filter(tenant=self.tenant).select_related("rule").order_by("-at", "-id")


class MetricsView(TenantAPIView):
    @extend_schema(
        parameters=[
            OpenApiParameter(
                "window_minutes", int, description="Snapshot window for counters/ratios (default 60)."
            ),
            OpenApiParameter(
                "workflow_prefix", str, description="Only workflows whose external_id starts with it."
            ),
            OpenApiParameter(
                "metric", str, description="Return this metric's series instead of the snapshot."
            ),
            OpenApiParameter("since", str, description="Series start (ISO 8601; default 24 h ago)."),
            OpenApiParameter(
                "bucket_minutes", int, description="Series bucket, a multiple of 5 (default 5)."
            ),
        ],
        responses={
            200: MetricsResponseSerializer,
            400: ErrorSerializer,
        },
    )
    def get(self, request):
        params = request.query_params
        now = timezone.now()
        metric = params.get("metric")
        if metric:
            if metric not in METRICS:
                raise InvalidInput(f"unknown metric {metric!r}", code="unknown_metric", field="metric")
            since = services.parse_moment(params.get("since"), "since") or now - timedelta(hours=24)
            minutes = int_param(params, "bucket_minutes", 5, minimum=5, maximum=1440) or 5
            if minutes % 5:
                raise InvalidInput("bucket_minutes must be a multiple of 5", code="invalid_parameter")
            bucket = timedelta(minutes=minutes)
            if since >= now:
                raise InvalidInput("since must be in the past", code="invalid_parameter")
            if (now - since) / bucket > 2000:
                raise InvalidInput(
                    "too many buckets: use a later 'since' or wider buckets", code="invalid_parameter"
                )
            points = series(request.tenant, metric, since, bucket, now=now)
            definition = METRICS[metric]
            return Response(
                {
                    "metric": metric,
                    "kind": definition.kind,
                    "unit": definition.unit,
                    "bucket_minutes": minutes,
                    "rollup_minutes": int(ROLLUP_BUCKET.total_seconds() // 60),
                    "series": [{"t": t.isoformat(), "value": v} for t, v in points],
                }
            )
        window = int_param(params, "window_minutes", 60, minimum=1, maximum=7 * 24 * 60) or 60
        prefix = params.get("workflow_prefix", "")
        values = snapshot(request.tenant, window=timedelta(minutes=window), workflow_prefix=prefix, now=now)
        return Response(
            {
                "at": now.isoformat(),
                "window_minutes": window,
                "workflow_prefix": prefix,
                "metrics": values,
                "definitions": {
                    name: {"kind": d.kind, "unit": d.unit, "description": d.description}
                    for name, d in METRICS.items()
                },
            }
        )


urlpatterns = [
    path("alert-rules/", RuleListCreate.as_view(), name="alert-rule-list"),
    path("alert-rules/<int:pk>/", RuleDetail.as_view(), name="alert-rule-detail"),
    path("alert-rules/<int:pk>/test/", RuleTest.as_view(), name="alert-rule-test"),
    path("alert-rules/<int:pk>/mute/", RuleMute.as_view(), name="alert-rule-mute"),
    path("alert-rules/<int:pk>/evaluations/", RuleEvaluations.as_view(), name="alert-rule-evaluations"),
    path("channels/", ChannelListCreate.as_view(), name="channel-list"),
    path("channels/<int:pk>/", ChannelDetail.as_view(), name="channel-detail"),
    path("channels/<int:pk>/test/", ChannelTest.as_view(), name="channel-test"),
    path("channels/<int:pk>/enable/", ChannelEnable.as_view(), name="channel-enable"),
    path("channels/<int:pk>/notifications/", ChannelNotifications.as_view(), name="channel-notifications"),
    path("alerts/", AlertList.as_view(), name="alert-list"),
    path("metrics/", MetricsView.as_view(), name="metrics"),
]
