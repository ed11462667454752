"""Read replica routing: reads that tolerate lag go to ``replica``; everything else to ``default``.

Active only when ``DATABASE_REPLICA_URL`` is set (settings add the ``replica`` alias and this
router). A read goes to the replica only when all of these hold:

- the code asked for it, by running inside :func:`lag_tolerant` — the web layer does so for
  safe (GET/HEAD) requests (:class:`ReplicaReadsMiddleware`): context, lists, pages, lineage;
- no transaction is open on the primary (a read inside a write — ``select_for_update``, a
  service's ``transaction.atomic`` — always sees the primary);
- the model is not one whose staleness would be a security or session bug (users, sessions,
  tenants, memberships and API keys: a revoked key must stop working at once).

The read-after-write guard is the context endpoint's ``min_seq``: a replica whose head is below
it answers 409 ``stale_context`` with ``Retry-After``, and the Python client retries.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from django.db import connections, models
from django.http import HttpRequest, HttpResponse

REPLICA = "replica"
PRIMARY = "default"

_lag_tolerant: ContextVar[bool] = ContextVar("memoryhub_lag_tolerant", default=False)

# Always read from the primary: authentication and membership must never lag.
_PRIMARY_APPS = {"auth", "sessions", "contenttypes", "admin", "axes"}
_PRIMARY_MODELS = {"memoryhub.tenant", "memoryhub.membership", "memoryhub.apikey"}


@contextmanager
def lag_tolerant() -> Iterator[None]:
    """Reads inside this block may be served by the replica (when one is configured)."""
    token = _lag_tolerant.set(True)
    try:
        yield
    finally:
        _lag_tolerant.reset(token)


def replica_configured() -> bool:
    return REPLICA in connections.settings


class ReplicaRouter:
    def db_for_read(self, model: type[models.Model], **hints: Any) -> str:
        if not _lag_tolerant.get() or connections[PRIMARY].in_atomic_block:
            return PRIMARY
        meta = model._meta
        if meta.app_label in _PRIMARY_APPS or meta.label_lower in _PRIMARY_MODELS:
            return PRIMARY
        return REPLICA

    def db_for_write(self, model: type[models.Model], **hints: Any) -> str:
        return PRIMARY

    def allow_relation(self, obj1: models.Model, obj2: models.Model, **hints: Any) -> bool:
        return True  # one database, two connections to it

    def allow_migrate(self, db: str, app_label: str, **hints: Any) -> bool:
        return db == PRIMARY


class ReplicaReadsMiddleware:
    """Safe requests (GET/HEAD) read lag-tolerantly; writes and their reads stay on the primary."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.method in ("GET", "HEAD") and replica_configured():
            with lag_tolerant():
                return self.get_response(request)
        return self.get_response(request)
