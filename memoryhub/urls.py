"""Root URLconf: REST API under /api/, dashboard pages at /, Prometheus at /metrics, admin."""

from django.conf import settings
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView

from memoryhub.web.api.otel import otlp_patterns
from memoryhub.web.api.urls import urlpatterns as api_meta
from memoryhub.web.api.urls import v1_patterns
from memoryhub.web.pages import urlpatterns as page_patterns
from memoryhub.web.views.auth import ThrottledLoginView

urlpatterns = [
    # Browsers ask for /favicon.ico whatever a page says; answer with the one in static/ (public).
    path("favicon.ico", RedirectView.as_view(url=static("memoryhub/favicon.svg"), permanent=True)),
    path("accounts/login/", ThrottledLoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("api/", include(api_meta)),
    path("api/v1/", include((v1_patterns, "v1"), namespace="v1")),
    # OTLP/HTTP (an otlphttp exporter posts to <endpoint>/v1/traces): same Bearer API key as the API.
    path("", include((otlp_patterns, "otlp"), namespace="otlp")),
    path("", include((page_patterns, "memoryhub"), namespace="memoryhub")),
]

# Django's admin site edits rows beneath the services (no tenancy, audit or validation): off unless
# MEMORYHUB_ADMIN_SITE=true. When on, its login spends the same lockout budgets as /accounts/login/.
if settings.MEMORYHUB_ADMIN_SITE:
    urlpatterns.insert(0, path("admin/", admin.site.urls))

handler403 = "memoryhub.web.pages.handler403"
handler404 = "memoryhub.web.pages.handler404"
handler500 = "memoryhub.web.pages.handler500"
