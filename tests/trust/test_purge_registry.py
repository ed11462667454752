"""The registry of columns that can hold event-derived text covers every model (issue #30, item 1).

``memoryhub.models.purgeable.EVENT_TEXT`` names each column a purge must reach and how;
``CONTENT_FREE`` names each other text column with the reason it holds no event text. The walker
fails on a text, JSON or binary column (or a long free CharField) of any installed model that is in
neither, so a new model cannot store event text behind the purge's back.
"""

from __future__ import annotations

import json

import pytest
from django.apps import apps
from django.db import models
from django.test.utils import isolate_apps
from django.utils import timezone

import audit.purge
from audit.purge import REACHERS, _rows_in_reach, purge_events
from memoryhub.core.actors import Actor
from memoryhub.models import OtelSpan, SpanMapping, Summary, Workflow
from memoryhub.models.purgeable import CONTENT_FREE, EVENT_TEXT, Reach, column_label, text_columns
from tests.factories import make_workflow


def all_text_columns() -> set[str]:
    return {
        column_label(field)
        for model in apps.get_models(include_auto_created=True)
        for field in text_columns(model)
    }


def test_every_text_column_of_every_model_is_registered_or_declared_content_free():
    columns = all_text_columns()
    assert len(columns) > 80  # the walker sees every app's models
    unknown = columns - set(EVENT_TEXT) - set(CONTENT_FREE)
    assert not unknown, (
        "columns that may hold event text: register them in memoryhub.models.purgeable.EVENT_TEXT "
        f"(and how a purge reaches them) or in CONTENT_FREE with the reason: {sorted(unknown)}"
    )


def test_registry_entries_name_real_columns_once_with_reasons():
    assert not set(EVENT_TEXT) & set(CONTENT_FREE)
    for label in [*EVENT_TEXT, *CONTENT_FREE]:
        app_label, model_name, name = label.split(".")
        apps.get_model(app_label, model_name)._meta.get_field(name)  # raises on a stale entry
    assert all(reason.strip() for reason in CONTENT_FREE.values())
    assert all(entry.why.strip() for entry in EVENT_TEXT.values())


@isolate_apps("memoryhub")
def test_the_walker_catches_a_new_model_with_text():
    class SpanCache(models.Model):
        body = models.JSONField()
        note = models.CharField(max_length=500)
        code = models.CharField(max_length=12)
        kind = models.CharField(max_length=200, choices=[("a", "A")])
        raw = models.BinaryField()

        class Meta:
            app_label = "memoryhub"

        def __str__(self) -> str:
            return self.code

    found = {column_label(f) for f in text_columns(SpanCache)}
    assert found == {"memoryhub.SpanCache.body", "memoryhub.SpanCache.note", "memoryhub.SpanCache.raw"}
    assert found.isdisjoint(EVENT_TEXT) and found.isdisjoint(CONTENT_FREE)


def test_every_kind_of_reach_has_its_reacher_in_the_purge():
    assert set(REACHERS) == set(Reach.values)
    for reach, name in REACHERS.items():
        assert callable(getattr(audit.purge, name)), (reach, name)
    assert {entry.reach for entry in EVENT_TEXT.values()} <= set(Reach.values)


@pytest.mark.django_db
def test_every_registered_scope_is_a_valid_query(tenant):
    """Each entry's workflow/tenant/time scope runs as a query (a typo would only fail at purge time)."""
    wf = make_workflow(tenant)
    for label, entry in EVENT_TEXT.items():
        app_label, model_name, _ = label.split(".")
        model = apps.get_model(app_label, model_name)
        assert entry.workflow or entry.since, label
        list(_rows_in_reach(model, entry, wf, timezone.now())[:1])


@pytest.mark.django_db
def test_a_deferred_compaction_read_before_a_purge_is_not_built_after_it(tenant, alice):
    """The epoch re-check where held work is executed: the ingest read the span (and the workflow's
    purge epoch) before the purge committed; building it afterwards writes nothing."""
    from memoryhub.otel import ingest, read_spans
    from memoryhub.otel.ingest import _record_compaction
    from tests.trust.test_purge_probe import _otlp_spans

    class Planted:
        token = "4111-1111-1111-1111"
        sentence = f"The customer's private card number is {token}, keep it out of every report."

    compaction, secret, early = _otlp_spans(Planted, "held")  # type: ignore[arg-type]

    def send(span: dict) -> None:
        body = {"resourceSpans": [{"resource": {}, "scopeSpans": [{"spans": [span]}]}]}
        spans, malformed = read_spans(json.dumps(body).encode(), "application/json")
        ingest(tenant, spans, Actor.system("otel"), malformed=malformed)

    send(compaction)
    send(secret)
    wf = Workflow.objects.get(tenant=tenant, external_id="held")
    read = Workflow.objects.get(pk=wf.pk)  # the ingest's view, before the purge
    held = OtelSpan.objects.get(workflow=wf, mapped_to=SpanMapping.DEFERRED)
    outcome = purge_events(wf, {"seqs": [1]}, Actor.user("alice"), "erasure request")
    assert outcome.settled == [held.span_id]

    send(early)  # an event the compaction covers arrives: the held row, read before the purge, is built
    assert _record_compaction(read, held, Actor.system("otel")) is False
    assert not Summary.objects.filter(workflow=wf).exists()
    held.refresh_from_db()
    assert held.mapped_to == SpanMapping.KEPT and Planted.token not in str(held.attributes)
    assert held.attributes["memoryhub.settled_by_purge"] == outcome.purge.purge_id
