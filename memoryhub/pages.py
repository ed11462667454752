"""Dashboard page routes, collected from one module per feature area (server-rendered)."""

from importlib import import_module

from django.http import HttpResponseNotFound, HttpResponseServerError
from django.template import loader

from memoryhub.api.errors import api_404, api_500

PAGE_MODULES = [
    "memoryhub.views.base",  # login, tenant switch, workflow list/detail
    "memoryhub.views.dashboard",  # overview, summary page, artifact page
    "memoryhub.views.alerts",  # alert rules and channels
    "triggers.views",  # policy form, simulator
    "audit.views",  # lineage, investigations, audit log
    "audit.views_retention",  # retention, purge
    "memoryhub.views.accounts",  # settings: members, API keys
]

urlpatterns: list = []
for module_name in PAGE_MODULES:
    urlpatterns += import_module(module_name).urlpatterns


def handler404(request, exception=None):
    if request.path.startswith("/api/"):
        return api_404(request, exception)
    return HttpResponseNotFound(loader.render_to_string("404.html", {"path": request.path}, request))


def handler500(request):
    if request.path.startswith("/api/"):
        return api_500(request)
    return HttpResponseServerError(loader.render_to_string("500.html", {}, request))
