"""Admin registrations for every model; append-only models are read-only here too."""

from django.contrib import admin
from django.db.models import Model

from memoryhub import models as m


class ReadOnlyAdmin(admin.ModelAdmin):
    """Append-only records: viewable, never added, changed or deleted through the admin."""

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(m.Tenant)
class TenantAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "created_at"]
    search_fields = ["slug", "name"]


@admin.register(m.Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "tenant", "role"]
    list_filter = ["role", "tenant"]


@admin.register(m.ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    list_display = ["name", "tenant", "prefix", "role", "created_at", "revoked_at", "last_used_at"]
    readonly_fields = ["prefix", "secret_hash", "created_at", "last_used_at"]


@admin.register(m.Workflow)
class WorkflowAdmin(admin.ModelAdmin):
    list_display = ["external_id", "tenant", "head_seq", "total_tokens", "active_summary", "active_revision"]
    search_fields = ["external_id", "name"]
    readonly_fields = [f.name for f in m.Workflow._meta.fields if f.name not in ("name", "graph_release")]


@admin.register(m.Event)
class EventAdmin(ReadOnlyAdmin):
    list_display = ["workflow", "seq", "kind", "agent", "token_count", "purged_at"]
    list_filter = ["kind"]
    list_select_related = ["workflow"]


@admin.register(m.Summary)
class SummaryAdmin(ReadOnlyAdmin):
    list_display = [
        "summary_id",
        "workflow",
        "version",
        "status",
        "covers_from_seq",
        "covers_to_seq",
        "compactor_name",
    ]
    list_filter = ["status"]


model: type[Model]
for model in (
    m.ValidationRecord,
    m.LifecycleEvent,
    m.ConsumerTrace,
    m.Artifact,
    m.CompactionJob,
    m.AlertEvaluation,
    m.AlertEvent,
    m.Notification,
    m.MetricSample,
    m.MetricHour,
    m.TokenEstimate,
    m.OtelSpan,
    m.OutboxMessage,
):
    admin.site.register(model, ReadOnlyAdmin)

for model in (m.AlertRule, m.Channel):
    admin.site.register(model)
