"""What a transport receives (a Message) and returns (a DeliveryResult), plus the shared HTTP post."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import httpx

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


def classify_status(response: httpx.Response) -> DeliveryResult:
    code = response.status_code
    if 200 <= code < 300:
        return DeliveryResult(ok=True, status_code=code)
    body = response.text[:200].strip()
    error = f"HTTP {code}" + (f": {body}" if body else "")
    # 4xx means the request itself is wrong (gone, unauthorised, bad URL) and retrying won't help;
    # 429 (rate limited), 3xx and 5xx may pass later.
    permanent = 400 <= code < 500 and code != 429
    return DeliveryResult.failed(error, status_code=code, permanent=permanent)


def post(url: str, content: bytes, headers: dict[str, str], timeout: float) -> DeliveryResult:
    """POST ``content`` to ``url``: never raises, never follows redirects."""
    headers = {"User-Agent": USER_AGENT, **headers}
    try:
        with httpx.Client(timeout=timeout, follow_redirects=False) as client:
            response = client.post(url, content=content, headers=headers)
    except (httpx.InvalidURL, httpx.UnsupportedProtocol) as exc:
        return DeliveryResult.failed(f"invalid URL: {exc}", permanent=True)
    except httpx.TimeoutException:
        return DeliveryResult.failed(f"timed out after {timeout:g}s")
    except httpx.HTTPError as exc:
        return DeliveryResult.failed(f"{type(exc).__name__}: {exc}")
    return classify_status(response)
