"""Finding which events mention a phrase without reading the whole history.

On PostgreSQL a trigram GIN index over ``content || facts || refs`` (migration 0008) answers
``ILIKE`` and ``~*`` conditions, so an investigation over a million-event history reads only the
few candidate rows; the caller's exact matcher (whitespace- and case-insensitive) then decides.
Elsewhere (SQLite, the embedded default) there is no prefilter and the caller scans.
"""

from __future__ import annotations

from django.db import DatabaseError, OperationalError, connection, transaction

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
