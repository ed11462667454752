"""Privileges for running MemoryHub as a PostgreSQL role that does not own its tables.

The owner role runs migrations; the application role gets only what the code needs. On the
append-only tables UPDATE is granted column by column (the purge tombstone of events, the status
of summaries, the sequencing of audit entries), DELETE and TRUNCATE never: even a compromised
application cannot rewrite history.
"""

from __future__ import annotations

# table -> columns the app may UPDATE (None = no UPDATE at all). DELETE/TRUNCATE are revoked on all.
APPEND_ONLY_TABLES: dict[str, list[str] | None] = {
    "memoryhub_event": ["content", "facts", "refs", "purged_at", "purge_id"],
    "memoryhub_summary": ["status", "status_changed_at", "checks_failed", "content", "purged_by_id"],
    "memoryhub_validationrecord": None,
    "memoryhub_lifecycleevent": None,
    # The sequencer sets these once on a pending entry (the trigger refuses any other change).
    "audit_auditentry": ["seq", "prev_hash", "entry_hash", "sequenced_at"],
    # The purgeable text of the rows above: only its purge tombstone is ever written.
    "audit_payload": ["body", "purged_by_id", "purged_at"],
    # The chain head moves forward with each entry (the trigger refuses any other change).
    "audit_auditchainhead": ["seq", "entry_hash"],
}


def grant_statements(role: str) -> list[str]:
    if not role.replace("_", "").isalnum():
        raise ValueError("role names are letters, digits and underscores")
    statements = [
        f"GRANT USAGE ON SCHEMA public TO {role}",
        f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {role}",
        f"GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO {role}",
        f"REVOKE TRUNCATE ON ALL TABLES IN SCHEMA public FROM {role}",
    ]
    for table, columns in APPEND_ONLY_TABLES.items():
        statements.append(f"REVOKE UPDATE, DELETE, TRUNCATE ON {table} FROM {role}")
        if columns:
            statements.append(f"GRANT UPDATE ({', '.join(columns)}) ON {table} TO {role}")
    return statements
