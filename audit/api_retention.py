"""Retention and purge API (see docs/TEAM.md)."""

urlpatterns: list = []
