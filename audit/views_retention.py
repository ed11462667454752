"""Retention pages (see docs/TEAM.md)."""

urlpatterns: list = []
