"""Exceptions raised by the MemoryHub client.

Everything derives from :class:`MemoryHubError`. An HTTP error answer from the server becomes an
:class:`ApiError` subclass chosen by status code, carrying the server's ``{"error", "detail"}``.
"""

from __future__ import annotations

from typing import Any


class MemoryHubError(Exception):
    """Base class of every error the client raises."""


class NotConfigured(MemoryHubError, ValueError):
    """MemoryHub's URL or API key is missing or malformed: raised at construction, never a silent
    default target."""


class TransportError(MemoryHubError):
    """The server could not be reached (or the connection broke) after every retry."""

    def __init__(self, message: str, *, attempts: int, cause: BaseException | None = None) -> None:
        super().__init__(message)
        self.attempts = attempts
        self.cause = cause


class ApiError(MemoryHubError):
    """The server answered with an error status.

    ``code`` is the machine-readable ``error`` of the JSON body (``"http_<status>"`` when the body
    is not JSON), ``detail`` its human-readable text and ``payload`` the whole decoded body.
    """

    def __init__(self, status: int, code: str, detail: str, payload: dict[str, Any] | None = None) -> None:
        super().__init__(f"{status} {code}: {detail}")
        self.status = status
        self.code = code
        self.detail = detail
        self.payload: dict[str, Any] = payload or {}
        self.retries = 0  # how many retries preceded this answer (set by the client)


class ValidationFailed(ApiError):
    """400: the request was malformed or failed validation; nothing was written."""


class Unauthorized(ApiError):
    """401: missing, unknown or revoked API key."""


class PermissionDenied(ApiError):
    """403: the key or user is authenticated but may not do this."""


class NotFound(ApiError):
    """404: no such object in this tenant (another tenant's objects are 404 too)."""


class Conflict(ApiError):
    """409: the request raced with another change or contradicts stored state.

    ``current_revision`` is set for ``stale_revision`` (activation / rollback CAS lost) and
    ``head_seq`` when the server reports the workflow head (``expected_head`` mismatch, or a
    ``min_seq`` read-after-write guard).
    """

    @property
    def current_revision(self) -> int | None:
        value = self.payload.get("current_revision")
        return int(value) if value is not None else None

    @property
    def head_seq(self) -> int | None:
        value = self.payload.get("head_seq", self.payload.get("current_head"))
        return int(value) if value is not None else None


class PayloadTooLarge(ApiError):
    """413: the batch or content exceeds the server's limits."""


class RateLimited(ApiError):
    """429 after every retry; ``retry_after`` is the server's last hint in seconds (or None)."""

    def __init__(
        self,
        status: int,
        code: str,
        detail: str,
        payload: dict[str, Any] | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(status, code, detail, payload)
        self.retry_after = retry_after


class ServerError(ApiError):
    """5xx after every retry."""


class CompactionTimeout(MemoryHubError):
    """``wait_for_compaction`` gave up before the job reached a terminal status."""

    def __init__(self, job_id: str, timeout: float, last_status: str | None) -> None:
        super().__init__(f"compaction job {job_id} not finished after {timeout:g}s (status {last_status})")
        self.job_id = job_id
        self.timeout = timeout
        self.last_status = last_status


class ContextBudgetExceeded(MemoryHubError):
    """The context for the next model call would not fit its safe budget and no fallback fitted.

    Raised instead of ever sending an oversized context silently. ``decision`` is the trigger
    decision (a :class:`~memoryhub.client.types.Decision`) and ``reasons`` says why it stopped.
    """

    def __init__(
        self,
        message: str,
        *,
        decision: Any = None,
        projected_tokens: int | None = None,
        safe_budget: int | None = None,
        reasons: list[str] | None = None,
    ) -> None:
        super().__init__(message)
        self.decision = decision
        self.projected_tokens = projected_tokens
        self.safe_budget = safe_budget
        self.reasons = reasons or []


_BY_STATUS: dict[int, type[ApiError]] = {
    400: ValidationFailed,
    401: Unauthorized,
    403: PermissionDenied,
    404: NotFound,
    409: Conflict,
    413: PayloadTooLarge,
    422: ValidationFailed,
}


def error_for_status(
    status: int, code: str, detail: str, payload: dict[str, Any] | None, retry_after: float | None = None
) -> ApiError:
    """Build the :class:`ApiError` subclass matching ``status``."""
    if status == 429:
        return RateLimited(status, code, detail, payload, retry_after=retry_after)
    if status >= 500:
        return ServerError(status, code, detail, payload)
    return _BY_STATUS.get(status, ApiError)(status, code, detail, payload)
