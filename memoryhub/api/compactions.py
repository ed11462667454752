"""compactions API (filled in by its owner; see docs/TEAM.md)."""

urlpatterns: list = []
