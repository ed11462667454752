"""memoryhub.core.rows: statements sent together, prepared once per session, rows inserted in one
statement — the same results as running them one by one, on SQLite and PostgreSQL."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import DatabaseError, IntegrityError, connection, transaction
from django.test.utils import CaptureQueriesContext

from audit.models import AuditEntry, Payload
from memoryhub.core.rows import PreparedStatement, ReservedIds, insert_rows, reserve_ids_sql, run_together
from memoryhub.models import Workflow
from tests.factories import build_workflow

pytestmark = pytest.mark.django_db


def _payloads(tenant, *words: str) -> list[Payload]:
    return [Payload(tenant_id=tenant.pk, body={"reason": w}, digest=f"sha256:{w}") for w in words]


def test_insert_rows_writes_every_row_in_one_statement_and_sets_the_ids(tenant, settings):
    settings.MEMORYHUB_PREPARE_STATEMENTS = True
    rows = _payloads(tenant, "one", "two", "three")
    with CaptureQueriesContext(connection) as ctx:
        insert_rows(Payload, rows)
    sent = [q for q in ctx.captured_queries if not q["sql"].startswith("PREPARE")]  # once a session
    assert len(sent) == 1
    if connection.vendor == "postgresql":  # the rows as one JSON parameter of a prepared INSERT
        assert sent[0]["sql"].startswith("EXECUTE memoryhub_json_insert_audit_payload (")
    assert all(row.pk and not row._state.adding for row in rows)
    stored = dict(Payload.objects.filter(pk__in=[r.pk for r in rows]).values_list("pk", "body"))
    assert stored == {row.pk: row.body for row in rows}  # each id is its own row's


def test_run_together_answers_each_statement_in_order(tenant):
    wf = build_workflow(tenant)
    qn = connection.ops.quote_name
    table = qn(Workflow._meta.db_table)
    with CaptureQueriesContext(connection) as ctx, transaction.atomic():
        results = run_together(
            [
                (f"UPDATE {table} SET {qn('name')} = %s WHERE {qn('id')} = %s", ["renamed", wf.pk]),
                (f"SELECT {qn('name')} FROM {table} WHERE {qn('id')} = %s", [wf.pk]),
                (f"UPDATE {table} SET {qn('name')} = %s WHERE {qn('id')} = %s", ["nobody", -1]),
                (f"SELECT {qn('id')} FROM {table} WHERE {qn('id')} = %s", [-1]),
            ]
        )
    assert results == [1, [("renamed",)], 0, []]  # row counts and rows, statement by statement
    calls = [q for q in ctx.captured_queries if not q["sql"].startswith(("SAVEPOINT", "RELEASE"))]
    assert len(calls) == (1 if connection.vendor == "postgresql" else 4)  # one round trip on PostgreSQL


def test_a_failing_statement_fails_the_transaction_and_nothing_after_it_counts(tenant):
    wf = build_workflow(tenant)
    qn = connection.ops.quote_name
    table = qn(Workflow._meta.db_table)
    rename = f"UPDATE {table} SET {qn('name')} = %s WHERE {qn('id')} = %s"
    clash = (  # a second workflow with the same external id in the tenant: a unique violation
        f"INSERT INTO {table} ({qn('tenant_id')}, {qn('external_id')}) VALUES (%s, %s)",
        [tenant.pk, wf.external_id],
    )
    with pytest.raises((IntegrityError, DatabaseError)), transaction.atomic():
        run_together([(rename, ["before", wf.pk]), clash, (rename, ["after", wf.pk])])
    wf.refresh_from_db()
    assert wf.name != "before" and wf.name != "after"


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)  # it closes the connection
def test_a_prepared_statement_is_planned_once_per_session(tenant, settings):
    settings.MEMORYHUB_PREPARE_STATEMENTS = True
    wf = build_workflow(tenant)
    qn = connection.ops.quote_name
    read = PreparedStatement(
        "test_rows_read",
        f"SELECT {qn('external_id')} FROM {qn(Workflow._meta.db_table)} WHERE {qn('id')} = %s",
    )

    def fetch() -> tuple[list[str], list[tuple]]:
        with CaptureQueriesContext(connection) as ctx, connection.cursor() as cursor:
            cursor.execute(*read.statement([wf.pk]))
            rows = cursor.fetchall()
        return [q["sql"].split()[0] for q in ctx.captured_queries], rows

    assert fetch() == (["PREPARE", "EXECUTE"], [(wf.external_id,)])
    assert fetch() == (["EXECUTE"], [(wf.external_id,)])
    connection.close()  # a new session prepares again
    assert fetch() == (["PREPARE", "EXECUTE"], [(wf.external_id,)])
    settings.MEMORYHUB_PREPARE_STATEMENTS = False  # behind a transaction-mode pooler
    assert fetch() == (["SELECT"], [(wf.external_id,)])


def test_placeholders_become_numbered_parameters_in_order():
    statement = PreparedStatement("x", "SELECT %s, %s WHERE a = %s")
    assert statement.definition == "SELECT $1, $2 WHERE a = $3" and statement.arity == 3


@pytest.mark.postgres
def test_reserved_ids_are_the_ids_the_rows_get_and_the_sequence_moves_past_them(tenant):
    (drawn,) = run_together([reserve_ids_sql(Payload, 3)])
    reserved = ReservedIds({Payload: drawn})
    rows = _payloads(tenant, "one", "two")
    assert reserved.give(rows)
    assert [row.pk for row in rows] == [drawn[0][0], drawn[1][0]]
    insert_rows(Payload, rows)
    assert [row.pk for row in rows] == [drawn[0][0], drawn[1][0]]  # inserted with them
    assert Payload.objects.get(pk=rows[1].pk).body == {"reason": "two"}
    # One id is left: two more rows get none (all or nothing), and the database numbers them
    # past every id drawn.
    more = _payloads(tenant, "three", "four")
    assert not reserved.give(more) and all(row.pk is None for row in more)
    # Nor any row after that: the database numbers them from now on, and a lower id drawn
    # earlier must not follow (ids order a workflow's history).
    assert not reserved.give(_payloads(tenant, "five"))
    insert_rows(Payload, more)
    assert min(row.pk for row in more) > drawn[-1][0]


def test_ids_cannot_be_drawn_ahead_on_sqlite():
    if connection.vendor == "postgresql":
        pytest.skip("the SQLite answer")
    assert reserve_ids_sql(Payload, 2) is None


def test_rows_with_and_without_ids_do_not_mix(tenant):
    rows = _payloads(tenant, "one", "two")
    rows[0].pk = 10**9
    with pytest.raises(ValueError, match="every object has its id or none"):
        insert_rows(Payload, rows)


# Values that quoting, escaping or a JSON round trip could bend: quotes, backslashes, placeholders,
# non-ASCII, control characters, big and negative numbers, floats, nested nulls, empty containers.
AWKWARD_BODIES = [
    "it's a 'quoted' \"text\"",
    "back\\slash \\n and %s %(name)s %% {}",
    "naïve ☃ 🚀 \u00e9\t\r\n",
    "",
    {"nested": {"list": [1, -2, 2**62, 1.5, True, False, None, "x"], "empty": {}, "none": None}},
    [],
    {},
    0,
    -(2**53),
    3.25,
    True,
]


def _as_stored(model, rows) -> list[dict]:
    """Every column of ``rows`` as read back from the database, but the id and the times the
    insert itself stamps (``auto_now_add``)."""
    stamped = {"id"} | {f.attname for f in model._meta.concrete_fields if getattr(f, "auto_now_add", False)}
    stored = {r["id"]: r for r in model.objects.filter(pk__in=[row.pk for row in rows]).values()}
    return [{k: v for k, v in stored[row.pk].items() if k not in stamped} for row in rows]


@pytest.mark.impossible_state(
    "Django's own bulk_create writes the reference rows the insert is compared with"
)
@pytest.mark.parametrize("prepared", [True, False], ids=["prepared", "plain"])
def test_inserted_rows_read_back_exactly_as_the_orm_writes_them(tenant, settings, prepared):
    """Whatever way ``insert_rows`` sends the rows (one JSON document on PostgreSQL, prepared or
    plain behind a pooler; one parameter per value elsewhere), they read back as Django's
    ``bulk_create`` writes them."""
    settings.MEMORYHUB_PREPARE_STATEMENTS = prepared
    at = dt.datetime(2026, 12, 2, 7, 8, 9, 123456, tzinfo=dt.timezone(dt.timedelta(hours=5, minutes=30)))

    def payloads() -> list[Payload]:
        return [
            Payload(tenant_id=tenant.pk, body=body, digest=f"sha256:{i}")
            for i, body in enumerate(AWKWARD_BODIES)
        ]

    def entries() -> list[AuditEntry]:
        return [
            AuditEntry(
                tenant=tenant,
                at=at + dt.timedelta(microseconds=i),
                actor="user:o'brien \\ ☃",
                action="summary.activate",
                object_type="summary",
                object_id=str(i),
                chained_data={"value": body},
                payload_digest="",
                sequenced_at=None if i % 2 else at,
            )
            for i, body in enumerate(AWKWARD_BODIES)
        ]

    for build, model in ((payloads, Payload), (entries, AuditEntry)):
        ours, django = build(), build()
        with transaction.atomic():
            insert_rows(model, ours)
        model.objects.bulk_create(django)
        assert [row.pk for row in ours] == sorted(row.pk for row in ours)  # ids in row order
        assert _as_stored(model, ours) == _as_stored(model, django), model.__name__


@pytest.mark.impossible_state(
    "Django's own bulk_create writes the reference rows the insert is compared with"
)
def test_a_json_field_holding_none_is_stored_as_django_stores_it(tenant):
    """None in a JSON field is SQL NULL for Django (refused here: the column is NOT NULL) and for
    the one-document insert alike (JSON null reads back as SQL NULL)."""
    ours, django = _payloads(tenant, "one"), _payloads(tenant, "two")
    ours[0].body = django[0].body = None
    outcomes = []
    for insert in (lambda: insert_rows(Payload, ours), lambda: Payload.objects.bulk_create(django)):
        try:
            with transaction.atomic():
                insert()
            outcomes.append("stored")
        except IntegrityError:
            outcomes.append("refused")
    assert outcomes == ["refused", "refused"]  # the NOT NULL constraint, both ways
