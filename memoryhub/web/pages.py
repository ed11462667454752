"""Dashboard page routes, collected from one module per feature area (server-rendered)."""

import logging
from importlib import import_module

from django.http import HttpResponse, HttpResponseForbidden, HttpResponseNotFound, HttpResponseServerError
from django.template import loader

from memoryhub.web.api.errors import api_404, api_500, json_error

logger = logging.getLogger(__name__)

PAGE_MODULES = [
    "memoryhub.web.views.base",  # login, tenant switch, workflow list/detail
    "memoryhub.web.views.dashboard",  # overview, summary page, artifact page
    "memoryhub.web.views.alerts",  # alert rules and channels
    "triggers.views",  # policy form, simulator
    "audit.views",  # lineage, investigations, audit log
    "audit.views_retention",  # retention, purge
    "memoryhub.web.views.accounts",  # settings: members, API keys
    "memoryhub.web.views.traces",  # trace page, trace and artifact lists
    "memoryhub.web.views.compactors",  # compactor list and page
    "memoryhub.web.views.search",  # nav search box
]

urlpatterns: list = []
for module_name in PAGE_MODULES:
    urlpatterns += import_module(module_name).urlpatterns


# Error pages are the dashboard's own pages (nav included); API paths keep their JSON errors.
PLAIN_500 = (
    "<!doctype html><html lang='en'><head><title>Server error · MemoryHub</title></head>"
    "<body><h1>Server error</h1><p>Something went wrong; it has been logged.</p></body></html>"
)


def handler403(request, exception=None):
    if request.path.startswith("/api/"):
        return json_error("forbidden", str(exception or "Not allowed."), 403)
    reason = str(exception) if exception and str(exception) else ""
    return HttpResponseForbidden(loader.render_to_string("403.html", {"reason": reason}, request))


def handler404(request, exception=None):
    if request.path.startswith("/api/"):
        return api_404(request, exception)
    return HttpResponseNotFound(loader.render_to_string("404.html", {"path": request.path}, request))


def handler500(request):
    if request.path.startswith("/api/"):
        return api_500(request)
    try:  # the styled page needs the nav's context (tenant, memberships): it may be what is broken
        body = loader.render_to_string("500.html", {}, request)
    except Exception:
        logger.exception("500.html could not be rendered; serving the plain page")
        return HttpResponse(PLAIN_500, status=500)
    return HttpResponseServerError(body)
