"""Root URLconf: REST API under /api/, dashboard pages at /, Prometheus at /metrics, admin."""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from memoryhub.api.otel import otlp_patterns
from memoryhub.api.urls import urlpatterns as api_meta
from memoryhub.api.urls import v1_patterns
from memoryhub.pages import urlpatterns as page_patterns
from memoryhub.views.auth import ThrottledLoginView

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/login/", ThrottledLoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("api/", include(api_meta)),
    path("api/v1/", include((v1_patterns, "v1"), namespace="v1")),
    # OTLP/HTTP (an otlphttp exporter posts to <endpoint>/v1/traces): same Bearer API key as the API.
    path("", include((otlp_patterns, "otlp"), namespace="otlp")),
    path("", include((page_patterns, "memoryhub"), namespace="memoryhub")),
]

handler404 = "memoryhub.pages.handler404"
handler500 = "memoryhub.pages.handler500"
