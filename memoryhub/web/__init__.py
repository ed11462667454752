"""Delivery over HTTP: the REST API, dashboard pages, middleware and request-scoped tenancy."""
