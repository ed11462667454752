"""The URLconf with Django's admin site on, as MEMORYHUB_ADMIN_SITE=true makes it (for the tests
of the admin door; the settings read the switch once, when the URLconf is first imported)."""

from django.contrib import admin
from django.urls import path

from memoryhub.urls import handler403, handler404, handler500  # noqa: F401
from memoryhub.urls import urlpatterns as site_patterns

urlpatterns = [path("admin/", admin.site.urls), *site_patterns]
