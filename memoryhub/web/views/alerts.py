"""Alert pages (/alerts/…) and the Prometheus endpoint (/metrics).

Everyone in the tenant can look; only admins create, edit, mute, test-send or re-enable. Every
change goes through memoryhub.observe.alerting.services; test-sends are queued for the worker.
"""

from __future__ import annotations

import json
from datetime import timedelta

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import path
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from memoryhub.core.errors import InvalidInput
from memoryhub.models import (
    Aggregation,
    AlertRule,
    Channel,
    ChannelKind,
    Comparator,
    Role,
    Tenant,
    WorkflowSource,
    role_at_least,
)
from memoryhub.models.alerts import rule_default, rule_max_length, rule_range
from memoryhub.observe.alerting import prometheus, services
from memoryhub.observe.alerting.figures import rule_history_figure
from memoryhub.observe.metrics import METRICS
from memoryhub.observe.reports import alert_index, channel_notifications, rule_history
from memoryhub.web.actors import request_actor
from memoryhub.web.views.base import page_tenant

HISTORY_HOURS = (1, 6, 24, 72, 168)
MUTE_CHOICES = ((15, "15 minutes"), (60, "1 hour"), (240, "4 hours"), (1440, "1 day"), (10080, "7 days"))


def _admin_tenant(request: HttpRequest) -> Tenant:
    tenant, role = page_tenant(request)
    if not role_at_least(role, Role.ADMIN):
        raise PermissionDenied("Only admins can change alerts.")
    return tenant


def _rule(tenant: Tenant, pk: int) -> AlertRule:
    rule = services.tenant_rule(tenant, pk)
    if rule is None:
        raise Http404("No such alert rule in this tenant.")
    return rule


def _channel(tenant: Tenant, pk: int) -> Channel:
    channel = services.tenant_channel(tenant, pk)
    if channel is None:
        raise Http404("No such channel in this tenant.")
    return channel


def _apply_error(form: forms.Form, error: InvalidInput) -> None:
    field = error.extra.get("field")
    form.add_error(field if field in form.fields else None, error.detail)


# --- forms ----------------------------------------------------------------------------------


class RuleForm(forms.Form):
    # Lengths, bounds and defaults come from the model (rule_max_length, rule_range, rule_default); clean_rule
    # enforces the same, so the form refuses what the API refuses.
    name = forms.CharField(max_length=rule_max_length("name"))
    metric = forms.ChoiceField(choices=[(name, f"{name} — {d.description}") for name, d in METRICS.items()])
    aggregation = forms.ChoiceField(
        choices=[("", "metric default"), *Aggregation.choices],
        required=False,
        help_text="Counters: sum/count. Ratios and means: last/avg. Gauges: last/max/min/avg.",
    )
    comparator = forms.ChoiceField(choices=Comparator.choices)
    warning_threshold = forms.FloatField(required=False)
    critical_threshold = forms.FloatField(required=False)
    window_minutes = forms.IntegerField(
        initial=rule_default("window_minutes"), **rule_range("window_minutes")
    )
    interval_seconds = forms.IntegerField(
        initial=rule_default("interval_seconds"), **rule_range("interval_seconds")
    )
    workflow_filter = forms.CharField(
        required=False,
        help_text="Only workflows whose external id starts with this.",
        max_length=rule_max_length("workflow_filter"),
    )
    source_filter = forms.ChoiceField(
        choices=[("", "every source"), *WorkflowSource.choices],
        required=False,
        help_text="Only workflows this integration feeds (LangChain, Claude Code, …).",
    )
    channels = forms.MultipleChoiceField(required=False, widget=forms.CheckboxSelectMultiple)
    enabled = forms.BooleanField(required=False, initial=True)

    def __init__(self, *args, tenant: Tenant, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["channels"].choices = [  # type: ignore[attr-defined]  # fields[] is typed as the base Field
            (str(c.pk), f"{c.name} ({c.kind}{', disabled' if c.disabled_at else ''})")
            for c in services.channels_by_name(tenant)
        ]

    def payload(self) -> dict:
        data = dict(self.cleaned_data)
        data["channels"] = [int(pk) for pk in data["channels"]]
        data["workflow_filter"] = data.get("workflow_filter") or ""
        data["source_filter"] = data.get("source_filter") or ""
        if not data.get("aggregation"):
            data.pop("aggregation", None)
        return data

    @classmethod
    def initial_for(cls, rule: AlertRule) -> dict:
        return {
            **rule.definition(),
            "channels": [str(c.pk) for c in rule.channels.all()],
            "enabled": rule.enabled,
        }


class ChannelForm(forms.Form):
    kind = forms.ChoiceField(choices=ChannelKind.choices)
    name = forms.CharField(max_length=100)
    url = forms.CharField(
        max_length=500, required=False, help_text="Webhook or Slack-compatible incoming webhook URL."
    )
    email = forms.CharField(max_length=254, required=False)
    secret = forms.CharField(
        max_length=200,
        required=False,
        widget=forms.PasswordInput(render_value=False),
        help_text="Webhook HMAC-SHA256 key. Leave blank to keep the current one.",
    )
    clear_secret = forms.BooleanField(required=False, label="Remove the signing secret")
    timeout_seconds = forms.FloatField(min_value=0.5, max_value=30, initial=5.0)

    # Which kinds use a field: the page shows only those of the chosen kind (app.js; all without JS).
    KIND_FIELDS = {
        "url": (ChannelKind.WEBHOOK, ChannelKind.SLACK),
        "email": (ChannelKind.EMAIL,),
        "secret": (ChannelKind.WEBHOOK,),
        "clear_secret": (ChannelKind.WEBHOOK,),
    }

    def __init__(self, *args, channel: Channel | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.channel = channel
        for name, kinds in self.KIND_FIELDS.items():
            self.fields[name].kinds = " ".join(kinds)  # type: ignore[attr-defined]
        if channel is not None:
            self.fields["kind"].disabled = True
            self.fields["kind"].required = False

    def payload(self) -> dict:
        data = self.cleaned_data
        kind = self.channel.kind if self.channel else data["kind"]
        out: dict = {"name": data["name"], "timeout_seconds": data["timeout_seconds"]}
        if self.channel is None:
            out["kind"] = kind
        if kind == ChannelKind.EMAIL:
            out["email"] = data.get("email", "")
        else:
            out["url"] = data.get("url", "")
        if data.get("clear_secret"):
            out["secret"] = ""
        elif data.get("secret"):
            out["secret"] = data["secret"]
        return out


# --- pages ----------------------------------------------------------------------------------


@login_required
def index(request: HttpRequest) -> HttpResponse:
    tenant, role = page_tenant(request)
    report = alert_index(tenant)
    return render(
        request,
        "memoryhub/alerts/index.html",
        {
            "rules": report.rules,
            "channels": report.channels,
            "flips": report.flips,
            "now": timezone.now(),
            "can_edit": role_at_least(role, Role.ADMIN),
            "mute_choices": MUTE_CHOICES,
        },
    )


@login_required
def rule_detail(request: HttpRequest, pk: int) -> HttpResponse:
    tenant, role = page_tenant(request)
    rule = _rule(tenant, pk)
    hours = request.GET.get("hours", "24")
    hours_int = int(hours) if hours.isdigit() and int(hours) in HISTORY_HOURS else 24
    report = rule_history(rule, timezone.now() - timedelta(hours=hours_int))
    history = report.evaluations
    return render(
        request,
        "memoryhub/alerts/rule_detail.html",
        {
            "rule": rule,
            "definition": METRICS.get(rule.metric),
            "figure_json": json.dumps(rule_history_figure(rule, history)),
            "points": len(history),
            "recent": history[::-1][:30],
            "flips": report.flips,
            "hours": hours_int,
            "history_hours": HISTORY_HOURS,
            "can_edit": role_at_least(role, Role.ADMIN),
            "muted": services.is_muted(rule),
            "mute_choices": MUTE_CHOICES,
            "needs_plotly": True,
        },
    )


@login_required
def rule_new(request: HttpRequest) -> HttpResponse:
    tenant = _admin_tenant(request)
    form = RuleForm(
        request.POST or None, tenant=tenant, initial={"enabled": True, "comparator": Comparator.GT}
    )
    if request.method == "POST" and form.is_valid():
        try:
            rule = services.create_rule(tenant, form.payload(), request_actor(request))
        except InvalidInput as exc:
            _apply_error(form, exc)
        else:
            messages.success(request, f"Rule “{rule.name}” created; it is evaluated within a minute.")
            return redirect("memoryhub:alert-rule-detail", pk=rule.pk)
    return render(request, "memoryhub/alerts/rule_form.html", {"form": form, "rule": None})


@login_required
def rule_edit(request: HttpRequest, pk: int) -> HttpResponse:
    tenant = _admin_tenant(request)
    rule = _rule(tenant, pk)
    form = RuleForm(request.POST or None, tenant=tenant, initial=RuleForm.initial_for(rule))
    if request.method == "POST" and form.is_valid():
        try:
            services.update_rule(rule, form.payload(), request_actor(request))
        except InvalidInput as exc:
            _apply_error(form, exc)
        else:
            messages.success(request, f"Rule “{rule.name}” saved.")
            return redirect("memoryhub:alert-rule-detail", pk=rule.pk)
    return render(request, "memoryhub/alerts/rule_form.html", {"form": form, "rule": rule})


@login_required
@require_POST
def rule_test(request: HttpRequest, pk: int) -> HttpResponse:
    tenant = _admin_tenant(request)
    rule = _rule(tenant, pk)
    if not rule.channels.filter(disabled_at__isnull=True).exists():
        messages.error(request, "This rule has no enabled channel to test.")
    else:
        services.request_test_send(rule=rule, actor=request_actor(request))
        messages.success(request, "Test queued: a worker sends it to the rule's enabled channels.")
    return redirect("memoryhub:alert-rule-detail", pk=rule.pk)


@login_required
@require_POST
def rule_mute(request: HttpRequest, pk: int) -> HttpResponse:
    tenant = _admin_tenant(request)
    rule = _rule(tenant, pk)
    raw = request.POST.get("minutes", "")
    allowed = {str(m) for m, _ in MUTE_CHOICES} | {"0"}
    if raw not in allowed:
        messages.error(request, "Pick how long to mute the rule.")
    else:
        minutes = int(raw)
        until = timezone.now() + timedelta(minutes=minutes) if minutes else None
        services.mute_rule(rule, until, request_actor(request))
        messages.success(request, f"Muted until {until:%Y-%m-%d %H:%M} UTC." if until else "Unmuted.")
    if request.POST.get("back") == "index":
        return redirect("memoryhub:alerts")
    return redirect("memoryhub:alert-rule-detail", pk=rule.pk)


@login_required
@require_POST
def rule_delete(request: HttpRequest, pk: int) -> HttpResponse:
    tenant = _admin_tenant(request)
    rule = _rule(tenant, pk)
    services.delete_rule(rule, request_actor(request))
    messages.success(request, f"Rule “{rule.name}” deleted.")
    return redirect("memoryhub:alerts")


@login_required
def channel_new(request: HttpRequest) -> HttpResponse:
    tenant = _admin_tenant(request)
    form = ChannelForm(request.POST or None, initial={"timeout_seconds": 5.0})
    if request.method == "POST" and form.is_valid():
        try:
            channel = services.create_channel(tenant, form.payload(), request_actor(request))
        except InvalidInput as exc:
            _apply_error(form, exc)
        else:
            messages.success(request, f"Channel “{channel.name}” created.")
            return redirect("memoryhub:alerts")
    return render(request, "memoryhub/alerts/channel_form.html", {"form": form, "channel": None})


@login_required
def channel_edit(request: HttpRequest, pk: int) -> HttpResponse:
    tenant = _admin_tenant(request)
    channel = _channel(tenant, pk)
    initial = {
        "kind": channel.kind,
        "name": channel.name,
        "url": channel.url,
        "email": channel.email,
        "timeout_seconds": channel.timeout_seconds,
    }
    form = ChannelForm(request.POST or None, channel=channel, initial=initial)
    if request.method == "POST" and form.is_valid():
        try:
            services.update_channel(channel, form.payload(), request_actor(request))
        except InvalidInput as exc:
            _apply_error(form, exc)
        else:
            messages.success(request, f"Channel “{channel.name}” saved.")
            return redirect("memoryhub:alerts")
    return render(
        request,
        "memoryhub/alerts/channel_form.html",
        {"form": form, "channel": channel, "notifications": channel_notifications(channel)},
    )


@login_required
@require_POST
def channel_test(request: HttpRequest, pk: int) -> HttpResponse:
    tenant = _admin_tenant(request)
    channel = _channel(tenant, pk)
    services.request_test_send(channel=channel, actor=request_actor(request))
    messages.success(request, f"Test queued for “{channel.name}”: a worker sends it; the result shows here.")
    return redirect("memoryhub:alerts")


@login_required
@require_POST
def channel_enable(request: HttpRequest, pk: int) -> HttpResponse:
    tenant = _admin_tenant(request)
    channel = services.enable_channel(_channel(tenant, pk), request_actor(request))
    messages.success(request, f"Channel “{channel.name}” re-enabled.")
    return redirect("memoryhub:alerts")


@login_required
@require_POST
def channel_delete(request: HttpRequest, pk: int) -> HttpResponse:
    tenant = _admin_tenant(request)
    channel = _channel(tenant, pk)
    services.delete_channel(channel, request_actor(request))
    messages.success(request, f"Channel “{channel.name}” deleted.")
    return redirect("memoryhub:alerts")


# --- Prometheus -----------------------------------------------------------------------------


def _unauthorized(detail: str) -> HttpResponse:
    response = HttpResponse(detail + "\n", status=401, content_type="text/plain; charset=utf-8")
    response["WWW-Authenticate"] = 'Bearer realm="memoryhub-metrics"'
    return response


@require_GET
def prometheus_metrics(request: HttpRequest) -> HttpResponse:
    """Prometheus scrape. ``Authorization: Bearer <MEMORYHUB_METRICS_TOKEN>`` exports every
    tenant; a tenant API key exports its own tenant only; anything else is 401."""
    scheme, _, token = request.META.get("HTTP_AUTHORIZATION", "").partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        return _unauthorized("Authorization: Bearer <metrics token or API key> required.")
    tenants = prometheus.scrape_tenants(token)
    if tenants is None:
        return _unauthorized("Invalid metrics token or API key.")
    return HttpResponse(prometheus.render(tenants), content_type=prometheus.CONTENT_TYPE)


urlpatterns = [
    path("alerts/", index, name="alerts"),
    path("alerts/rules/new/", rule_new, name="alert-rule-new"),
    path("alerts/rules/<int:pk>/", rule_detail, name="alert-rule-detail"),
    path("alerts/rules/<int:pk>/edit/", rule_edit, name="alert-rule-edit"),
    path("alerts/rules/<int:pk>/test/", rule_test, name="alert-rule-test"),
    path("alerts/rules/<int:pk>/mute/", rule_mute, name="alert-rule-mute"),
    path("alerts/rules/<int:pk>/delete/", rule_delete, name="alert-rule-delete"),
    path("alerts/channels/new/", channel_new, name="alert-channel-new"),
    path("alerts/channels/<int:pk>/", channel_edit, name="alert-channel-edit"),
    path("alerts/channels/<int:pk>/test/", channel_test, name="alert-channel-test"),
    path("alerts/channels/<int:pk>/enable/", channel_enable, name="alert-channel-enable"),
    path("alerts/channels/<int:pk>/delete/", channel_delete, name="alert-channel-delete"),
    path("metrics", prometheus_metrics, name="prometheus-metrics"),
]
