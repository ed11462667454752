"""One module per channel kind behind a small registry: ``send(channel, message) -> DeliveryResult``."""

from __future__ import annotations

from collections.abc import Callable

from memoryhub.models import Channel, ChannelKind

from . import email, slack, webhook
from .base import DeliveryResult, Message

Transport = Callable[[Channel, Message], DeliveryResult]

TRANSPORTS: dict[str, Transport] = {
    ChannelKind.WEBHOOK: webhook.send,
    ChannelKind.EMAIL: email.send,
    ChannelKind.SLACK: slack.send,
}


def send(channel: Channel, message: Message) -> DeliveryResult:
    """Deliver through the channel kind's transport; an unknown kind is a permanent error."""
    transport = TRANSPORTS.get(channel.kind)
    if transport is None:
        return DeliveryResult.failed(f"unknown channel kind {channel.kind!r}", permanent=True)
    return transport(channel, message)


__all__ = ["TRANSPORTS", "DeliveryResult", "Message", "send"]
