"""Trigger API (see docs/TEAM.md)."""

urlpatterns: list = []
