"""What a transport receives (a Message) and returns (a DeliveryResult), plus the shared HTTP post."""

from __future__ import annotations

from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from .guard import UnsafeURL, resolve_for_send

USER_AGENT = "MemoryHub-Alerts/1.0"
MAX_ERROR_CHARS = 1000


@dataclass(frozen=True)
class Message:
    """One notification: ``kind`` is alert | resolve | test; ``payload`` is the webhook JSON body."""

    kind: str
    subject: str
    text: str
    payload: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class DeliveryResult:
    """Outcome of one attempt. ``permanent`` errors (4xx other than 429, invalid URL, refused
    recipient) disable the channel; other errors are retried on a later run."""

    ok: bool
    status_code: int | None = None
    error: str = ""
    permanent: bool = False

    @classmethod
    def failed(cls, error: str, *, status_code: int | None = None, permanent: bool = False) -> DeliveryResult:
        return cls(ok=False, status_code=status_code, error=error[:MAX_ERROR_CHARS], permanent=permanent)


def reason_phrase(code: int) -> str:
    """The standard phrase for a status code: ours, never the receiver's words."""
    try:
        return HTTPStatus(code).phrase
    except ValueError:
        return "non-standard status"


def classify_status(response: httpx.Response) -> DeliveryResult:
    """Status code and a short standard reason. The response body is never kept: it is the
    receiver's content (an internal service's page, a token) and would be shown to users."""
    code = response.status_code
    if 200 <= code < 300:
        return DeliveryResult(ok=True, status_code=code)
    error = f"HTTP {code} {reason_phrase(code)}"
    # 4xx means the request itself is wrong (gone, unauthorised, bad URL) and retrying won't help;
    # 429 (rate limited), 3xx and 5xx may pass later.
    permanent = 400 <= code < 500 and code != 429
    return DeliveryResult.failed(error, status_code=code, permanent=permanent)


def pinned(url: str) -> tuple[str, dict[str, str], dict[str, Any]]:
    """``url`` rewritten to the vetted address its host resolves to now, with the Host header and
    the TLS server name (SNI, certificate check) of the original host. Raises UnsafeURL."""
    target = resolve_for_send(url)
    parts = urlsplit(url)
    ip = str(target.address)
    netloc = f"[{ip}]" if ":" in ip else ip
    if parts.port is not None:
        netloc += f":{parts.port}"
    return (
        urlunsplit((parts.scheme, netloc, parts.path, parts.query, "")),
        {"Host": parts.netloc},
        {"sni_hostname": target.host} if parts.scheme == "https" else {},
    )


def post(url: str, content: bytes, headers: dict[str, str], timeout: float) -> DeliveryResult:
    """POST ``content`` to ``url``: never raises, never follows redirects, only reaches public
    addresses (re-checked after resolving the name, and the connection goes to that address).

    Errors are short and ours: exception class or status phrase, never remote text."""
    try:
        target_url, host_header, extensions = pinned(url)
    except UnsafeURL as exc:
        return DeliveryResult.failed(f"refused URL: {exc}", permanent=exc.permanent)
    headers = {"User-Agent": USER_AGENT, **headers, **host_header}
    try:
        with httpx.Client(timeout=timeout, follow_redirects=False, trust_env=False) as client:
            response = client.post(target_url, content=content, headers=headers, extensions=extensions)
    except (httpx.InvalidURL, httpx.UnsupportedProtocol):
        return DeliveryResult.failed("invalid URL", permanent=True)
    except httpx.TimeoutException:
        return DeliveryResult.failed(f"timed out after {timeout:g}s")
    except httpx.ConnectError:
        return DeliveryResult.failed("connection failed")
    except httpx.HTTPError as exc:
        return DeliveryResult.failed(f"request failed ({type(exc).__name__})")
    return classify_status(response)
