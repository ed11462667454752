"""On PostgreSQL the event table is PARTITION BY HASH (workflow_id) (migration 0017): every index,
constraint and trigger holds on every partition, a workflow's reads touch one partition, and the
conversion is reversible without losing a row. (The append-only and purge suites run against the
same partitioned table in CI's PostgreSQL run.)"""

from __future__ import annotations

import re

import pytest
from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.utils import DatabaseError

from memoryhub.core.partitioning import (
    TABLE,
    is_partitioned,
    partition_events,
    partition_names,
    unpartition_events,
)
from memoryhub.models import Event
from tests.factories import append, event, make_workflow

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


def scalar(sql: str, params: tuple = ()):
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone()[0]


def index_columns(table: str) -> list[str]:
    """Each index of ``table`` as its definition with the table name taken out (comparable)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_get_indexdef(indexrelid) FROM pg_index WHERE indrelid = %s::regclass", (table,)
        )
        defs = [row[0] for row in cursor.fetchall()]
    return sorted(d.split(" USING ", 1)[1] for d in defs)


@pytest.fixture
def workflows(tenant):
    made = []
    for n in range(6):
        wf = make_workflow(tenant, f"wf-part-{n}")
        append(wf, [event(i, client_event_id=f"p{n}-{i}") for i in range(1, 6)])
        made.append(wf)
    return made


def test_the_layout_is_hash_partitioned_with_every_index_on_every_partition():
    with connection.cursor() as cursor:
        assert is_partitioned(cursor)
        partitions = partition_names(cursor)
    assert len(partitions) == settings.MEMORYHUB_EVENT_PARTITIONS == 16
    assert scalar("SELECT pg_get_partkeydef(%s::regclass)", (TABLE,)) == "HASH (workflow_id)"
    parent = index_columns(TABLE)
    assert len(parent) >= 6  # pk, unique seq, unique client id, purge fk, purged, unpurged, trigram
    assert any("gin_trgm_ops" in d for d in parent)
    for partition in partitions:
        assert index_columns(partition) == parent, partition
        # The append-only row trigger is cloned onto each partition.
        assert (
            scalar(
                "SELECT count(*) FROM pg_trigger WHERE tgrelid = %s::regclass AND tgname = 'memoryhub_event_append_only'",
                (partition,),
            )
            == 1
        )


def test_a_workflow_lives_in_one_partition_and_its_tail_read_touches_only_that_one(workflows):
    for wf in workflows:
        tables = {
            scalar("SELECT tableoid::regclass::text FROM memoryhub_event WHERE id = %s", (pk,))
            for pk in Event.objects.filter(workflow=wf).values_list("pk", flat=True)
        }
        assert len(tables) == 1
    wf = workflows[0]
    query = Event.objects.filter(workflow=wf, seq__gt=2).order_by("seq")
    with connection.cursor() as cursor:
        sql, params = query.query.sql_with_params()
        cursor.execute("EXPLAIN " + sql, params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    scanned = {name for name in partition_names_in(plan)}
    assert len(scanned) == 1, plan


def partition_names_in(plan: str) -> set[str]:
    """The partitions a plan scans (not the names of their indexes)."""
    return set(re.findall(rf"\bon ({TABLE}_p\d+)\b", plan))


def test_constraints_and_append_only_rules_hold_in_partitions(workflows):
    wf = workflows[1]
    with pytest.raises(IntegrityError), transaction.atomic():
        Event.objects.create(
            workflow=wf,
            seq=1,
            kind="message",
            content="dup",
            content_hash="sha256:x",
            token_count=1,
            cum_tokens=1,
        )
    with pytest.raises(IntegrityError), transaction.atomic():
        Event.objects.create(
            workflow=wf, seq=99, client_event_id="p1-1", kind="message", content="dup id",
            content_hash="sha256:x", token_count=1, cum_tokens=1,
        )  # fmt: skip
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        Event.objects.filter(workflow=wf, seq=1).update(content="rewritten history")
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        Event.objects.filter(workflow=wf, seq=1).delete()


def test_the_conversion_is_reversible_without_losing_a_row(workflows):
    def snapshot():
        return list(Event.objects.order_by("id").values_list("id", "workflow_id", "seq", "content_hash"))

    before = snapshot()
    partitioned_indexes = index_columns(TABLE)
    with connection.cursor() as cursor:
        unpartition_events(cursor)
        assert not is_partitioned(cursor)
    assert snapshot() == before
    # Same indexes on the plain table; the primary key is (id) again.
    assert index_columns(TABLE) == sorted(d.replace("(id, workflow_id)", "(id)") for d in partitioned_indexes)
    assert scalar(
        "SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conname = 'memoryhub_event_pkey'"
    ) == ("PRIMARY KEY (id)")
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        Event.objects.filter(workflow=workflows[0], seq=1).update(content="rewritten history")

    with connection.cursor() as cursor:
        partition_events(cursor, 4)
        assert is_partitioned(cursor) and len(partition_names(cursor)) == 4
    assert snapshot() == before
    assert index_columns(TABLE) == partitioned_indexes
    # New rows continue the id sequence.
    append(workflows[0], [event(6, client_event_id="p0-6")])
    assert Event.objects.get(workflow=workflows[0], seq=6).pk > max(row[0] for row in before)


def test_neither_the_table_nor_any_partition_can_be_truncated(workflows):
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # no deferred FK checks pending from the fixture
        targets = [TABLE, *partition_names(cursor)]
    for target in targets:
        with (
            pytest.raises(DatabaseError, match="append-only"),
            transaction.atomic(),
            connection.cursor() as cursor,
        ):
            cursor.execute(f"TRUNCATE {target}")
    assert Event.objects.filter(workflow__in=workflows).count() == 30
