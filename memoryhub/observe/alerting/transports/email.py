"""Email through Django's configured email backend (SMTP in production, locmem in tests)."""

from __future__ import annotations

import smtplib

from django.conf import settings
from django.core.mail import send_mail

from memoryhub.models import Channel

from .base import DeliveryResult, Message


def send(channel: Channel, message: Message) -> DeliveryResult:
    if not channel.email:
        return DeliveryResult.failed("channel has no email address", permanent=True)
    try:
        sent = send_mail(
            f"[MemoryHub] {message.subject}",
            message.text,
            settings.DEFAULT_FROM_EMAIL,
            [channel.email],
            fail_silently=False,
        )
    except smtplib.SMTPRecipientsRefused:
        # The server's own words are not kept (they are shown to users): a short reason only.
        return DeliveryResult.failed("recipient refused by the mail server", permanent=True)
    except (smtplib.SMTPException, OSError) as exc:
        return DeliveryResult.failed(f"mail server error ({type(exc).__name__})")
    if not sent:
        return DeliveryResult.failed("the email backend accepted no message")
    return DeliveryResult(ok=True)
