"""Statements of the hot write paths, sent with as little overhead as the database allows.

* ``insert_rows``: new model rows in one INSERT from a statement built once per model, row count
  and database vendor.
* ``run_together``: several statements in one round trip.
* ``PreparedStatement``: planned once per PostgreSQL session instead of on every call.
* ``built_per_vendor``: hand-written statements built from the models once per database vendor.
* ``ModelColumns``: a model's columns for a hand-written SELECT, and its rows as instances.
* ``reserve_ids_sql`` / ``ReservedIds``: ids drawn ahead from a table's sequence (PostgreSQL), so
  rows that reference each other can be inserted together in one round trip.

``insert_rows`` does what ``bulk_create`` does for models without database defaults or generated fields, minus
compiling the query on every call: on the hot write paths (an activation writes its payloads,
lifecycle events and audit entries this way) the compile took longer than the database took to
run the statement.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.models import Model
from psycopg import ClientCursor, Cursor
from psycopg.pq import ExecStatus

M = TypeVar("M", bound=Model)
T = TypeVar("T")

_statements: dict[tuple[str, type[Model], int, bool], tuple[str, list[Any]]] = {}


def _statement(model: type[Model], rows: int, with_ids: bool) -> tuple[str, list[Any]]:
    """(INSERT of ``rows`` rows of ``model`` returning their ids, the fields in column order);
    ``with_ids``: the ids are given (reserved), not left to the database."""
    key = (connection.vendor, model, rows, with_ids)
    if key not in _statements:
        qn = connection.ops.quote_name
        fields = [f for f in model._meta.concrete_fields if with_ids or not f.primary_key]
        row = "(" + ", ".join(["%s"] * len(fields)) + ")"
        pk = model._meta.pk
        assert pk is not None
        _statements[key] = (
            f"INSERT INTO {qn(model._meta.db_table)} ({', '.join(qn(f.column) for f in fields)}) "
            f"VALUES {', '.join([row] * rows)} RETURNING {qn(pk.column)}",
            fields,
        )
    return _statements[key]


def insert_rows(model: type[Model], objs: list[Any]) -> None:
    """INSERT the unsaved ``objs`` (all of ``model``) in one statement and set their ids."""
    if not objs:
        return
    set_ids(objs, run_together([insert_rows_sql(model, objs)])[0])


def insert_rows_sql(model: type[Model], objs: list[Any]) -> tuple[str, list[Any]]:
    """The statement and parameters ``insert_rows`` runs, for ``run_together``. Objects that
    already have their ids (``ReservedIds``) are inserted with them (all or none of ``objs``).

    On PostgreSQL the rows travel as one JSON parameter of a prepared statement (``_JsonInsert``)
    where every column type allows it; elsewhere as one parameter per value."""
    with_ids = objs[0].pk is not None
    if any((obj.pk is not None) != with_ids for obj in objs):
        raise ValueError("insert_rows_sql: either every object has its id or none has")
    if connection.vendor == "postgresql":
        json_insert = _json_insert(model, with_ids)
        if json_insert is not None:
            return json_insert.statement(objs)
    sql, fields = _statement(model, len(objs), with_ids)
    conn = connections[DEFAULT_DB_ALIAS]  # once, not per value through the proxy
    return sql, [f.get_db_prep_save(f.pre_save(obj, True), conn) for obj in objs for f in fields]


# Column types whose values psycopg takes as the model's attributes hold them (``get_db_prep_save``
# is the identity for them on PostgreSQL). Shared by the JSON insert below and the decision log's COPY.
PLAIN_COLUMN_TYPES = frozenset(
    {
        "AutoField",
        "BigAutoField",
        "ForeignKey",
        "OneToOneField",
        "CharField",
        "TextField",
        "SmallIntegerField",
        "IntegerField",
        "BigIntegerField",
        "PositiveSmallIntegerField",
        "PositiveIntegerField",
        "PositiveBigIntegerField",
        "BooleanField",
        "DateTimeField",
    }
)
# What a JSON document carries exactly, read back by PostgreSQL's input function of the column's
# type (``json_populate_recordset``); a model with any other type (binary, decimal, uuid, …)
# keeps the VALUES statement.
_JSON_CARRIED = PLAIN_COLUMN_TYPES | {"JSONField"}


class _JsonInsert:
    """An INSERT of any number of ``model`` rows from one JSON array, prepared once per session.

    One parameter instead of one per value: psycopg merges a statement's parameters client-side
    and only caches the parsing of statements with at most 50 of them, so a few rows of a wide
    model (an activation's events and audit entries) were re-parsed and quoted value by value on
    every call, which cost more than the server took to insert them. Rows come back in array
    order, as Django's own ``bulk_create`` relies on for ``UNNEST``."""

    def __init__(self, model: type[Model], with_ids: bool) -> None:
        qn = connection.ops.quote_name
        self.fields = [f for f in model._meta.concrete_fields if with_ids or not f.primary_key]
        self.kinds = [(f, f.column, f.get_internal_type()) for f in self.fields]
        table, pk = qn(model._meta.db_table), model._meta.pk
        assert pk is not None
        columns = ", ".join(qn(f.column) for f in self.fields)
        self.prepared = PreparedStatement(
            f"memoryhub_json_insert_{model._meta.db_table}{'_ids' if with_ids else ''}"[:63],
            f"INSERT INTO {table} ({columns}) SELECT {columns} "
            f"FROM json_populate_recordset(NULL::{table}, %s) RETURNING {qn(pk.column)}",
        )

    def statement(self, objs: list[Any]) -> tuple[str, list[Any]]:
        """The statement for ``objs``. None is JSON null, which the recordset reads as SQL NULL,
        as Django stores None in any column (a JSON field included)."""
        rows = []
        for obj in objs:
            row: dict[str, Any] = {}
            for field, column, kind in self.kinds:
                value = field.pre_save(obj, True)
                if kind == "DateTimeField" and value is not None:
                    value = value.isoformat()
                row[column] = value
            rows.append(row)
        return self.prepared.statement([json.dumps(rows, ensure_ascii=False, separators=(",", ":"))])


_json_inserts: dict[tuple[type[Model], bool], _JsonInsert | None] = {}


def _json_insert(model: type[Model], with_ids: bool) -> _JsonInsert | None:
    """``model``'s JSON insert (PostgreSQL), or None when one of its column types is not carried."""
    key = (model, with_ids)
    if key not in _json_inserts:
        carried = all(f.get_internal_type() in _JSON_CARRIED for f in model._meta.concrete_fields)
        _json_inserts[key] = _JsonInsert(model, with_ids) if carried else None
    return _json_inserts[key]


def set_ids(objs: list[Any], ids: list[Any]) -> None:
    """Give the inserted ``objs`` the ids their INSERT returned (in order)."""
    alias = connection.alias
    for obj, (pk,) in zip(objs, ids, strict=True):
        obj.pk = pk
        obj._state.adding, obj._state.db = False, alias


def run_together(statements: list[tuple[str, list[Any]]]) -> list[Any]:
    """Run ``statements`` in order; for each, its rows (a statement with results) or its row count.

    On PostgreSQL with client-side parameter binding (Django's default with psycopg 3) they travel
    as one query string in one round trip (the simple query protocol runs several statements and
    returns each one's result); elsewhere one at a time. Inside a transaction either way: a failing
    statement fails the transaction, so nothing after it counts.
    """
    results: list[Any] = []
    with connection.cursor() as cursor:
        raw = cursor.cursor
        if isinstance(raw, ClientCursor) and len(statements) > 1:
            cursor.execute(";\n".join(sql for sql, _ in statements), [p for _, ps in statements for p in ps])
            while True:
                results.append(raw.fetchall() if has_rows(raw) else raw.rowcount)
                if not raw.nextset():
                    break
        else:
            for sql, params in statements:
                cursor.execute(sql, params)
                results.append(cursor.fetchall() if has_rows(raw) else cursor.rowcount)
    assert len(results) == len(statements), "one result per statement"
    return results


def has_rows(raw: Any) -> bool:
    """Whether the DB-API cursor's current result is a set of rows: ``description is not None``,
    but on psycopg without building the column descriptions (which cost more than reading a short
    result)."""
    if isinstance(raw, Cursor):
        return raw.pgresult is not None and raw.pgresult.status == ExecStatus.TUPLES_OK
    return raw.description is not None


class PreparedStatement:
    """A statement run as a named prepared statement of each PostgreSQL session, so it is planned
    once per session instead of on every call (planning the lifecycle's read over the partitioned
    event table took longer than running it); plain SQL on SQLite, or with
    ``MEMORYHUB_PREPARE_STATEMENTS`` off (behind a transaction-mode pooler such as PgBouncer,
    which does not keep a session's prepared statements).

    ``sql`` uses ``%s`` placeholders; PostgreSQL infers their types from where they stand.
    """

    def __init__(self, name: str, sql: str) -> None:
        self.name, self.sql = name, sql
        self.arity = sql.count("%s")
        numbered = sql.split("%s")
        self.definition = numbered[0] + "".join(f"${i}{rest}" for i, rest in enumerate(numbered[1:], 1))
        self._sessions: weakref.WeakSet[Any] = weakref.WeakSet()

    def statement(self, params: list[Any]) -> tuple[str, list[Any]]:
        """(SQL, params) to run now on this connection (``cursor.execute`` or ``run_together``),
        preparing the statement on this session first when it has not been."""
        conn = connections[DEFAULT_DB_ALIAS]  # once: each use of the proxy looks it up again
        if conn.vendor != "postgresql" or not settings.MEMORYHUB_PREPARE_STATEMENTS:
            return self.sql, params
        conn.ensure_connection()
        session = conn.connection
        if session not in self._sessions:
            # Alone, so it is known to have run (PREPARE outlives a rolled-back transaction).
            with conn.cursor() as cursor:
                cursor.execute(f"PREPARE {self.name} AS {self.definition}")
            self._sessions.add(session)
        return f"EXECUTE {self.name} ({', '.join(['%s'] * self.arity)})", params


def built_per_vendor(build: Callable[[], T]) -> Callable[[], T]:
    """A getter of ``build()``'s result, built once per database vendor (on first use, when the
    connection's vendor is known): the statements a hot path runs, written from the models."""
    built: dict[str, T] = {}

    def get() -> T:
        vendor = connections[DEFAULT_DB_ALIAS].vendor
        if vendor not in built:
            built[vendor] = build()
        return built[vendor]

    return get


def reserve_ids_sql(model: type[Model], count: int) -> tuple[str, list[Any]] | None:
    """A statement drawing ``count`` ids from ``model``'s id sequence, for ``run_together`` (its
    rows feed ``ReservedIds``), or None where ids cannot be drawn ahead (SQLite). An id drawn and
    not used is a gap in the sequence, which nothing reads as meaningful."""
    if connection.vendor != "postgresql" or count < 1:
        return None
    pk = model._meta.pk
    assert pk is not None
    return (
        "SELECT nextval(pg_get_serial_sequence(%s, %s)) FROM generate_series(1, %s)",
        [model._meta.db_table, pk.column, count],
    )


class ReservedIds:
    """Ids drawn ahead (``reserve_ids_sql``) per model, handed out all or nothing (``give``)."""

    def __init__(self, drawn: dict[type[Model], list[Any]]) -> None:
        self._ids = {model: [row[0] for row in rows] for model, rows in drawn.items()}

    def give(self, *groups: list[Any]) -> bool:
        """Give every unsaved object of ``groups`` (each a list of one model's objects) the next
        id of its model and return True; or, when the ids left do not cover them all, give none,
        give no more ever, and return False (the caller lets the database number them)."""
        wanted: dict[type[Model], int] = {}
        for objs in groups:
            for obj in objs:
                wanted[type(obj)] = wanted.get(type(obj), 0) + 1
        if any(len(self._ids.get(model, ())) < n for model, n in wanted.items()):
            # From now on the database numbers the rows: an id drawn earlier must not follow them
            # (rows appended later have higher ids, which orders a workflow's history).
            self._ids.clear()
            return False
        for objs in groups:
            for obj in objs:
                obj.pk = self._ids[type(obj)].pop(0)
        return True


class ModelColumns(Generic[M]):
    """A model's concrete columns as ``alias.column, …`` and the converters the ORM applies to them."""

    def __init__(self, model: type[M], alias: str) -> None:
        qn = connection.ops.quote_name
        fields = list(model._meta.concrete_fields)
        self.model, self.width = model, len(fields)
        self.attnames = [f.attname for f in fields]
        self.pk_index = self.attnames.index(model._meta.pk.attname)
        self.sql = ", ".join(f"{alias}.{qn(f.column)}" for f in fields)
        self.converters: list[tuple[int, Any, list[Any]]] = []
        for index, field in enumerate(fields):
            col = field.get_col(model._meta.db_table)
            found = connection.ops.get_db_converters(col) + col.get_db_converters(connection)
            if found:
                self.converters.append((index, col, found))

    def instance(self, row: Sequence[Any], start: int = 0) -> M:
        """The instance of ``row[start : start + width]``, as a queryset builds it."""
        values = list(row[start : start + self.width])
        conn = connections[DEFAULT_DB_ALIAS]
        for index, col, converters in self.converters:
            for convert in converters:
                values[index] = convert(values[index], col, conn)
        return self.model.from_db(conn.alias, self.attnames, values)
