"""Tenants, members and API keys."""
