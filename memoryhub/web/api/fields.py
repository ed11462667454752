"""Input field types shared by the API, the pages and the services: values are checked against
what the database can store before any query sees them.

* date-times: ISO 8601, aware (naive = UTC), UTC offset within ±14:00 (the real-world range;
  PostgreSQL refuses displacements beyond ±15:59 at query time), and convertible to UTC within
  years 1..9999. Stored and compared in UTC.
* integers: MAX_INT32 for 32-bit columns and token/second counts (tokens, budgets, minutes);
  the JSON parser already refuses anything beyond 64 bits.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import django_filters
from django import forms
from django.core.exceptions import ValidationError

from memoryhub.core.moments import BadMoment, check_moment, parse_moment_text

MAX_INT32 = 2**31 - 1


class SafeIsoDateTimeField(django_filters.fields.IsoDateTimeField):
    """django-filter's ISO date-time field, with :func:`check_moment`."""

    def strptime(self, value: Any, format: str) -> datetime:
        try:
            return parse_moment_text(str(value))
        except BadMoment as exc:
            raise ValueError(str(exc))

    def to_python(self, value: Any) -> datetime | None:
        moment = super().to_python(value)
        if moment is None:
            return None
        try:
            return check_moment(moment)
        except BadMoment as exc:
            raise ValidationError(f"Enter a valid date-time: it {exc}.", code="invalid")


class SafeIsoDateTimeFilter(django_filters.IsoDateTimeFilter):
    field_class = SafeIsoDateTimeField


class SafeDateTimeField(forms.DateTimeField):
    """Page forms' date-time field, with :func:`check_moment`."""

    def to_python(self, value: Any) -> datetime | None:
        try:
            moment = super().to_python(value)
        except (ValueError, OverflowError):
            raise ValidationError("Enter a valid date/time.", code="invalid")
        if moment is None:
            return None
        try:
            return check_moment(moment)
        except BadMoment as exc:
            raise ValidationError(f"Enter a valid date/time: it {exc}.", code="invalid")


MAX_INT64 = 2**63 - 1


class SafeIntegerFilter(django_filters.NumberFilter):
    """A whole-number filter bounded to what a 64-bit column holds (ids, token counts): a float,
    ``1e49`` or ``2**63`` is a 400, never an overflow inside the database driver."""

    field_class = forms.IntegerField

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("min_value", 0)
        kwargs.setdefault("max_value", MAX_INT64)
        super().__init__(*args, **kwargs)
