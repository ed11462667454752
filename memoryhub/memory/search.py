"""Finding which events mention a phrase without reading the whole history.

On PostgreSQL a trigram GIN index over ``content || facts || refs`` (migration 0008) answers
``ILIKE`` and ``~*`` conditions, so an investigation over a million-event history reads only the
few candidate rows; the caller's exact matcher (whitespace- and case-insensitive) then decides.
Elsewhere (SQLite, the embedded default) there is no prefilter and the caller scans.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import DatabaseError, OperationalError, connection, transaction
from django.db.models import ExpressionWrapper, FloatField, Value
from django.db.models.functions import Length, Lower, Replace

from memoryhub.models import Event, Tenant, Workflow

# Must equal the indexed expression of migration 0008 exactly, or PostgreSQL cannot use the index.
SEARCH_EXPRESSION = "(content || ' ' || facts::text || ' ' || refs::text)"
MIN_WORD = 3  # trigram index needs three characters to narrow anything


def _like_escape(word: str) -> str:
    return word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


class SearchTooExpensive(Exception):
    """The database search ran out of its time budget (statement_timeout)."""


def candidate_seqs(
    workflow_id: int,
    fact: str,
    *,
    regex: bool,
    from_seq: int,
    to_seq: int | None,
    timeout: float | None = None,
) -> list[int] | None:
    """Seqs that *may* match (a superset of the true matches), or None when no index can help.

    ``timeout`` (seconds) bounds the query with a transaction-local ``statement_timeout``: a
    regular expression runs on PostgreSQL's own engine here, which is not linear-time for every
    pattern, so a search that outlives its budget raises SearchTooExpensive instead of holding a
    backend (and the request) for as long as the pattern takes."""
    if connection.vendor != "postgresql":
        return None
    conditions, params = [], []
    if regex:
        conditions.append(f"{SEARCH_EXPRESSION} ~* %s")
        params.append(fact)
    else:
        words = [w for w in fact.split() if len(w) >= MIN_WORD]
        if not words:
            return None
        for word in words:
            conditions.append(f"{SEARCH_EXPRESSION} ILIKE %s")
            params.append(f"%{_like_escape(word)}%")
    sql = (
        "SELECT seq FROM memoryhub_event WHERE workflow_id = %s AND seq >= %s"
        + (" AND seq <= %s" if to_seq is not None else "")
        + " AND purged_at IS NULL AND "
        + " AND ".join(conditions)
        + " ORDER BY seq"
    )
    args = [workflow_id, from_seq] + ([to_seq] if to_seq is not None else []) + params
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            if timeout is not None:
                cursor.execute(
                    "SELECT set_config('statement_timeout', %s, true)", [f"{max(1, int(timeout * 1000))}ms"]
                )
            cursor.execute(sql, args)
            return [row[0] for row in cursor.fetchall()]
    except OperationalError as exc:
        if getattr(exc.__cause__, "sqlstate", None) == "57014":  # query_canceled: the timeout
            raise SearchTooExpensive(str(exc)) from exc
        return None
    except DatabaseError:  # a regex PostgreSQL does not accept: the caller scans with RE2
        return None


# --- free text across a tenant ----------------------------------------------------------------------

# Django's SearchVector("content", config=FTS_CONFIG) compiles to FTS_EXPRESSION; migration 0025
# indexes exactly that expression (PostgreSQL uses an expression index only for the same expression).
FTS_CONFIG = "english"
FTS_EXPRESSION = f"to_tsvector('{FTS_CONFIG}'::regconfig, COALESCE(content, ''))"
MAX_WORDS = 8  # words of a query the substring fallback matches (each must occur)


@dataclass(frozen=True)
class EventMatch:
    event: Event
    workflow_external_id: str
    rank: float  # PostgreSQL: ts_rank; elsewhere: occurrences of the query's words


@dataclass(frozen=True)
class EventMatches:
    matches: list[EventMatch]
    has_next: bool
    engine: str  # "postgres-fts" (full-text, stemmed) or "substring" (case-insensitive, ranked by hits)


def query_words(q: str) -> list[str]:
    """The distinct words of ``q`` (lower-cased, in order), at most MAX_WORDS of them."""
    seen: list[str] = []
    for word in q.lower().split():
        if word not in seen:
            seen.append(word)
    return seen[:MAX_WORDS]


def search_events(
    tenant: Tenant, q: str, *, workflow: Workflow | None = None, offset: int = 0, limit: int = 20
) -> EventMatches:
    """Unpurged events of ``tenant`` (of ``workflow`` alone when given) matching the free text
    ``q``, best first, ``limit`` of them from ``offset``.

    On PostgreSQL: full-text search (``websearch_to_tsquery``: words, "quoted phrases", ``-not``,
    ``or``) ranked by ``ts_rank``, answered by a GIN index (migration 0025). Elsewhere: every word
    must occur (case-insensitive substring) and the rank is how often they do. Ties: newest first.
    A purged event never matches (its content is gone, and the filter says so too)."""
    words = query_words(q)
    if not words or limit <= 0:
        return EventMatches([], False, _engine())
    qs = Event.objects.filter(workflow__tenant=tenant, purged_at__isnull=True)
    if workflow is not None:
        if workflow.tenant_id != tenant.pk:
            return EventMatches([], False, _engine())
        qs = qs.filter(workflow=workflow)
    if _engine() == "postgres-fts":
        from django.contrib.postgres.search import SearchQuery, SearchRank, SearchVector

        vector = SearchVector("content", config=FTS_CONFIG)
        query = SearchQuery(q, config=FTS_CONFIG, search_type="websearch")
        qs = qs.alias(document=vector).filter(document=query).annotate(rank=SearchRank(vector, query))
    else:
        lowered = Lower("content")
        hits: Any = Value(0)
        for word in words:
            qs = qs.filter(content__icontains=word)
            hits = hits + (Length(lowered) - Length(Replace(lowered, Value(word), Value("")))) / len(word)
        qs = qs.annotate(rank=ExpressionWrapper(hits, output_field=FloatField()))
    rows = list(
        qs.select_related("workflow")
        .only("id", "seq", "kind", "agent", "role", "content", "created_at", "workflow__external_id")
        .order_by("-rank", "-created_at", "-id")[offset : offset + limit + 1]
    )
    matches = [EventMatch(e, e.workflow.external_id, float(e.rank)) for e in rows[:limit]]  # type: ignore[attr-defined]
    return EventMatches(matches, len(rows) > limit, _engine())


def _engine() -> str:
    return "postgres-fts" if connection.vendor == "postgresql" else "substring"
