"""The demo looks like a real day: every timestamp the demo writes is in the past.

Walks every concrete date-time column of every installed model, so a table added tomorrow is
checked too (a future-dated row reads "23 hours from now" on the pages and draws negative bars).
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.apps import apps
from django.db import models
from django.utils import timezone

pytestmark = pytest.mark.django_db


def _datetime_columns() -> list[tuple[type[models.Model], str]]:
    return [
        (model, field.name)
        for model in apps.get_models()
        for field in model._meta.get_fields()
        if isinstance(field, models.DateTimeField) and field.concrete
    ]


def test_the_walk_finds_the_tables_the_pages_date(loaded):
    walked = {(m._meta.label, name) for m, name in _datetime_columns()}
    assert {("memoryhub.Event", "created_at"), ("memoryhub.Summary", "created_at")} <= walked


def test_every_demo_timestamp_is_in_the_past(loaded):
    now = timezone.now() + timedelta(seconds=1)
    future = {
        f"{model._meta.label}.{name}": count
        for model, name in _datetime_columns()
        if (count := model._default_manager.filter(**{f"{name}__gt": now}).count())
    }
    assert future == {}


def test_the_demo_spans_days_not_minutes(loaded):
    from memoryhub.models import Event

    oldest = Event.objects.order_by("created_at").values_list("created_at", flat=True).first()
    assert oldest is not None and timezone.now() - oldest > timedelta(days=3)
