"""Slack-compatible incoming webhook (Slack, Mattermost, Rocket.Chat): ``{"text": ...}``."""

from __future__ import annotations

import json

from memoryhub.models import Channel

from .base import DeliveryResult, Message, post


def send(channel: Channel, message: Message) -> DeliveryResult:
    body = json.dumps({"text": f"*{message.subject}*\n{message.text}"}).encode()
    return post(channel.url, body, {"Content-Type": "application/json"}, channel.timeout_seconds)
