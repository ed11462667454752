"""Domain errors raised by service functions and rendered by the API as JSON.

Every error becomes ``{"error": code, "detail": text, **extra}`` with ``status``.
"""

from __future__ import annotations

from typing import Any


class DomainError(Exception):
    status = 400
    code = "invalid"

    def __init__(
        self, detail: str, *, code: str | None = None, status: int | None = None, **extra: Any
    ) -> None:
        super().__init__(detail)
        self.detail = detail
        if code:
            self.code = code
        if status:
            self.status = status
        self.extra = extra

    def as_dict(self) -> dict[str, Any]:
        return {"error": self.code, "detail": self.detail, **self.extra}


class InvalidInput(DomainError):
    status = 400
    code = "invalid"


class NotFound(DomainError):
    status = 404
    code = "not_found"


class Forbidden(DomainError):
    status = 403
    code = "forbidden"


class Conflict(DomainError):
    status = 409
    code = "conflict"


class PayloadTooLarge(DomainError):
    status = 413
    code = "payload_too_large"
