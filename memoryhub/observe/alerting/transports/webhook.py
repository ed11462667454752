"""Generic webhook: the JSON payload, signed with HMAC-SHA256 over the raw body.

Receivers verify ``X-MemoryHub-Signature: sha256=<hex>`` = HMAC-SHA256(channel secret, body).
"""

from __future__ import annotations

import hashlib
import hmac
import json

from memoryhub.models import Channel

from .base import DeliveryResult, Message, post

SIGNATURE_HEADER = "X-MemoryHub-Signature"


def sign(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def body_bytes(message: Message) -> bytes:
    return json.dumps(message.payload, sort_keys=True, separators=(",", ":"), default=str).encode()


def send(channel: Channel, message: Message) -> DeliveryResult:
    body = body_bytes(message)
    headers = {"Content-Type": "application/json", "X-MemoryHub-Event": message.kind}
    if channel.secret:
        headers[SIGNATURE_HEADER] = sign(channel.secret, body)
    return post(channel.url, body, headers, channel.timeout_seconds)
