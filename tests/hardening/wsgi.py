"""The Django WSGI app for in-process fuzzing inside the test transaction."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from django.core.handlers.wsgi import WSGIHandler
from django.core.signals import request_finished, request_started
from django.db import close_old_connections


class InTransactionWSGI:
    """Django's WSGI handler without ``close_old_connections`` around each request.

    That receiver would close the database connection (and with it the test's open transaction)
    at request start and end; django.test.Client switches it off the same way. The body is read
    inside the call so the response's close (which sends request_finished) happens here too.
    """

    def __init__(self) -> None:
        self.handler = WSGIHandler()

    def __call__(self, environ: dict[str, Any], start_response: Callable) -> Iterable[bytes]:
        request_started.disconnect(close_old_connections)
        request_finished.disconnect(close_old_connections)
        try:
            response = self.handler(environ, start_response)
            try:
                body = b"".join(response)
            finally:
                close = getattr(response, "close", None)
                if close is not None:
                    close()
        finally:
            request_started.connect(close_old_connections)
            request_finished.connect(close_old_connections)
        return [body]
