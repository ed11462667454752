"""REST API v1 routes, collected from one module per feature area."""

from importlib import import_module

from django.urls import path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

FEATURE_MODULES = [
    "memoryhub.web.api.workflows",  # workflows, events
    "memoryhub.web.api.steps",  # one round trip per model call (append + record + decide)
    "memoryhub.web.api.summaries",  # summary versions, lifecycle actions
    "memoryhub.web.api.compactions",  # compaction jobs
    "memoryhub.web.api.observed",  # compactions observed from providers/frameworks
    "memoryhub.web.api.otel",  # OTLP ingest status (the OTLP endpoint itself is /v1/traces, see memoryhub.urls)
    "memoryhub.web.api.context",  # context assembly, consumer traces, artifacts
    "memoryhub.web.api.alerts",  # alert rules, channels, alerts, metrics
    "triggers.api",  # policies, trigger decisions, what-if
    "audit.api",  # lineage, investigations, diff, replay, audit log
    "audit.api_retention",  # retention, purge
    "memoryhub.web.api.accounts",  # members, API keys
]

urlpatterns = [
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
]
v1_patterns: list = []
for module_name in FEATURE_MODULES:
    v1_patterns += import_module(module_name).urlpatterns
