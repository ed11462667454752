"""Date-times a client may send: ISO 8601, stored as aware UTC, refused with a readable reason.

One rule for the API's filters and fields, alert mutes and every other place a client names a moment.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.utils import timezone
from django.utils.dateparse import parse_datetime

MAX_UTC_OFFSET = timedelta(hours=14)


class BadMoment(ValueError):
    """Why a date-time cannot be used (a readable sentence)."""


def check_moment(moment: datetime) -> datetime:
    """``moment`` as an aware UTC datetime; raises BadMoment for an unstorable one."""
    if timezone.is_naive(moment):
        moment = moment.replace(tzinfo=UTC)
    offset = moment.utcoffset() or timedelta(0)
    if abs(offset) > MAX_UTC_OFFSET:
        raise BadMoment("has a UTC offset beyond ±14:00")
    try:
        return moment.astimezone(UTC)
    except OverflowError:
        raise BadMoment("is out of range once converted to UTC")


def parse_moment_text(value: str) -> datetime:
    """Parse an ISO 8601 date-time (see :func:`check_moment`); raises BadMoment."""
    try:
        moment = parse_datetime(value.strip())
    except ValueError:  # well-formed but impossible: month 13, offset +99:00
        raise BadMoment("is not a valid date-time")
    if moment is None:
        raise BadMoment("must be an ISO 8601 date-time")
    return check_moment(moment)
