"""Observability: metrics, their rollups, alerts and the reports the dashboard renders."""
