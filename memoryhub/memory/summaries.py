"""Summary versions: writing immutable, hash-checked candidates and reading them back.

A summary's content is stored as canonical JSON text (sorted keys, compact separators, UTF-8) and
``content_hash = "sha256:" + hex`` of exactly those bytes, always computed here. A client may send
the hash it expects; it is compared, never stored as given. Lifecycle changes (validate, activate,
quarantine…) live in ``memoryhub.memory.lifecycle``; this module only creates and reads.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Iterable
from operator import attrgetter
from typing import Any, cast

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Field

from audit.log import record
from memoryhub.compaction.types import DROPPED_FIELD, manifest_problems
from memoryhub.core.actors import Actor
from memoryhub.core.canonical import HASH_PREFIX, canonical_bytes, sha256_hex
from memoryhub.core.errors import Conflict, InvalidInput, NotFound, PayloadTooLarge
from memoryhub.core.facts import FACT_KINDS, FACT_STATES
from memoryhub.core.opaque import ITEM_FIELDS, OPAQUE_SCHEMA, is_opaque, item_problems, opaque_problems
from memoryhub.core.quality import TOKEN_CLASSES
from memoryhub.core.tokens import count_tokens
from memoryhub.memory.lifecycle import approval_required, is_approved
from memoryhub.memory.workflows import workflow_encoding
from memoryhub.models import (
    SUMMARY_SCHEMA,
    CompactionJob,
    ConsumerTrace,
    LifecycleEvent,
    Summary,
    SummaryStatus,
    Tenant,
    ValidationRecord,
    Workflow,
)
from memoryhub.models.traces import TRACE_CALL_FIELDS, TRACE_READ_FIELDS

SUPPORTED_SCHEMAS = frozenset({SUMMARY_SCHEMA, OPAQUE_SCHEMA})
# "salient": optional {class: [token]} of identifiers, paths, numbers… kept verbatim (extractive-v2).
# ITEM_FIELDS: a framework's encrypted item inside readable content (``memoryhub.core.opaque``).
# "dropped": optional manifest of what a compactor left out for budget (extractive-v3;
# ``memoryhub.compaction.types.manifest_problems`` is its shape).
CONTENT_FIELDS = frozenset(
    {"schema", "narrative", "facts", "open_items", "salient", DROPPED_FIELD, *ITEM_FIELDS}
)
FACT_FIELDS = frozenset({"key", "kind", "text", "state", "source_seqs"})
COMPACTOR_FIELDS = {
    # API name -> Summary column
    "name": "compactor_name",
    "version": "compactor_version",
    "model": "model",
    "prompt_template_version": "prompt_template_version",
    "algorithm_version": "algorithm_version",
    "token_budget": "token_budget",
    "tool_schema_version": "tool_schema_version",
}
STORAGE_LOCATION = "db:memoryhub_summary.content"
TRACES_SHOWN = 50


def new_summary_id() -> str:
    """Public id: ``sum_`` + 16 hex chars (64 random bits; the unique index catches the rare clash)."""
    return "sum_" + secrets.token_hex(8)


def max_summary_bytes() -> int:
    return int(getattr(settings, "MEMORYHUB_MAX_SUMMARY_BYTES", 2 * 1024 * 1024))


# -- input checks (each raises InvalidInput naming the field) -------------------------------------


def _bad(field: str, message: str, code: str = "invalid_summary") -> InvalidInput:
    return InvalidInput(f"{field}: {message}", code=code, field=field)


def _int(value: Any, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _bad(field, f"must be an integer, got {value!r}", "invalid_coverage")
    return value


def _str_list(value: Any, field: str, *, max_len: int = 200, max_items: int = 1000) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise _bad(field, "must be a list of strings")
    items = list(value)
    if len(items) > max_items:
        raise _bad(field, f"at most {max_items} items")
    for i, item in enumerate(items):
        if not isinstance(item, str) or not item or len(item) > max_len:
            raise _bad(f"{field}[{i}]", f"must be a non-empty string of at most {max_len} characters")
    return items


def check_range(covers_from_seq: Any, covers_to_seq: Any) -> tuple[int, int]:
    """Integers with 1 <= covers_from_seq <= covers_to_seq."""
    start = _int(covers_from_seq, "covers_from_seq")
    end = _int(covers_to_seq, "covers_to_seq")
    if start < 1:
        raise _bad("covers_from_seq", f"must be at least 1, got {start}", "invalid_coverage")
    if end < start:
        raise _bad("covers_to_seq", f"{end} is before covers_from_seq {start}", "invalid_coverage")
    return start, end


def check_coverage(workflow: Workflow, covers_from_seq: Any, covers_to_seq: Any) -> tuple[int, int]:
    """Coverage must be inside 1..head and continue the active summary's coverage or start at 1."""
    start, end = check_range(covers_from_seq, covers_to_seq)
    if end > workflow.head_seq:
        raise _bad(
            "covers_to_seq",
            f"{end} is beyond the workflow head {workflow.head_seq}: a summary can only cover committed events",
            "coverage_beyond_head",
        )
    if start != 1:
        active = workflow.active_summary if workflow.active_summary_id else None
        if active is None:
            raise _bad(
                "covers_from_seq",
                f"{start} leaves events 1..{start - 1} uncovered: with no active summary coverage must start at 1",
                "coverage_gap",
            )
        expected = active.covers_to_seq + 1
        if start != expected:
            kind = "gap" if start > expected else "overlap"
            raise _bad(
                "covers_from_seq",
                f"{start} leaves a {kind} with the active summary S{active.version} (covers "
                f"{active.covers_from_seq}..{active.covers_to_seq}): must be 1 (full re-summary) or {expected}",
                f"coverage_{kind}",
            )
    return start, end


def check_content(content: Any, start: int, end: int) -> dict[str, Any]:
    """Shape of ``memoryhub.summary/v1`` content; fact citations must lie inside the coverage."""
    if not isinstance(content, dict):
        raise _bad("content", f"must be a JSON object, got {type(content).__name__}", "invalid_content")
    if is_opaque(content):  # content MemoryHub cannot read: digest and size only (memoryhub.core.opaque)
        for field, message in opaque_problems(content):
            raise _bad(field, message, "invalid_content")
        return content
    unknown = sorted(set(content) - CONTENT_FIELDS)
    if unknown:
        raise _bad(
            "content", f"unknown field(s) {unknown}; allowed: {sorted(CONTENT_FIELDS)}", "invalid_content"
        )
    schema = content.get("schema", SUMMARY_SCHEMA)  # absent means v1
    if schema not in SUPPORTED_SCHEMAS:
        raise _bad(
            "content.schema",
            f"unsupported schema {schema!r}; expected {SUMMARY_SCHEMA!r}",
            "unsupported_schema",
        )
    if not isinstance(content.get("narrative"), str):
        raise _bad("content.narrative", "a string is required", "invalid_content")
    facts = content.get("facts")
    if not isinstance(facts, list):
        raise _bad("content.facts", "a list is required (may be empty)", "invalid_content")
    seen: set[str] = set()
    for i, fact in enumerate(facts):
        where = f"content.facts[{i}]"
        if not isinstance(fact, dict):
            raise _bad(where, "must be an object {key, kind, text, state?, source_seqs}", "invalid_fact")
        extra = sorted(set(fact) - FACT_FIELDS)
        if extra:
            raise _bad(where, f"unknown field(s) {extra}", "invalid_fact")
        key = fact.get("key")
        if not isinstance(key, str) or not key.strip() or len(key) > 200:
            raise _bad(
                f"{where}.key", "a non-empty string of at most 200 characters is required", "invalid_fact"
            )
        if key in seen:
            raise _bad(f"{where}.key", f"fact key {key!r} appears twice", "duplicate_fact")
        seen.add(key)
        if fact.get("kind") not in FACT_KINDS:
            raise _bad(f"{where}.kind", f"must be one of {', '.join(FACT_KINDS)}", "invalid_fact")
        if not isinstance(fact.get("text", ""), str):
            raise _bad(f"{where}.text", "must be a string", "invalid_fact")
        if "state" in fact and fact["state"] not in FACT_STATES:
            raise _bad(f"{where}.state", f"must be one of {', '.join(FACT_STATES)}", "invalid_fact")
        seqs = fact.get("source_seqs")
        if not isinstance(seqs, list) or not all(
            isinstance(s, int) and not isinstance(s, bool) for s in seqs
        ):
            raise _bad(f"{where}.source_seqs", "a list of event seqs (integers) is required", "invalid_fact")
        outside = [s for s in seqs if not start <= s <= end]
        if outside:
            raise _bad(
                f"{where}.source_seqs",
                f"fact {key!r} cites seq(s) {outside} outside the coverage {start}..{end}",
                "fact_outside_coverage",
            )
    for field, message in item_problems(content):
        raise _bad(field, message, "invalid_content")
    items = content.get("open_items", [])
    if not isinstance(items, list):
        raise _bad("content.open_items", "must be a list", "invalid_content")
    for i, item in enumerate(items):
        ok = isinstance(item, str) and item or isinstance(item, dict) and isinstance(item.get("key"), str)
        if not ok:
            raise _bad(
                f"content.open_items[{i}]", "must be a fact key or an object with a 'key'", "invalid_content"
            )
    salient = content.get("salient", {})
    if not isinstance(salient, dict) or not all(
        name in TOKEN_CLASSES and isinstance(tokens, list) and all(isinstance(t, str) for t in tokens)
        for name, tokens in salient.items()
    ):
        raise _bad(
            "content.salient",
            f"must be an object of class ({', '.join(TOKEN_CLASSES)}) → list of strings",
            "invalid_content",
        )
    if DROPPED_FIELD in content:
        for field, message in manifest_problems(content[DROPPED_FIELD]):
            raise _bad(field, message, "invalid_content")
        outside = sorted({e["seq"] for e in content[DROPPED_FIELD] if not start <= e["seq"] <= end})
        if outside:
            raise _bad(
                "content.dropped",
                f"declares seq(s) {outside} outside the coverage {start}..{end}",
                "dropped_outside_coverage",
            )
    try:
        json.dumps(content, allow_nan=False)
    except ValueError as exc:
        raise _bad("content", f"not representable as JSON: {exc}", "invalid_content") from exc
    return content


def check_compactor(compactor: Any) -> dict[str, Any]:
    """Compactor configuration → Summary column values."""
    if not isinstance(compactor, dict):
        raise _bad("compactor", "an object with at least a 'name' is required", "invalid_compactor")
    unknown = sorted(set(compactor) - set(COMPACTOR_FIELDS))
    if unknown:
        raise _bad(
            "compactor",
            f"unknown field(s) {unknown}; allowed: {sorted(COMPACTOR_FIELDS)}",
            "invalid_compactor",
        )
    name = compactor.get("name")
    if not isinstance(name, str) or not name.strip() or len(name) > 100:
        raise _bad(
            "compactor.name", "a non-empty string of at most 100 characters is required", "invalid_compactor"
        )
    columns: dict[str, Any] = {}
    for field, column in COMPACTOR_FIELDS.items():
        value = compactor.get(field)
        if field == "token_budget":
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise _bad("compactor.token_budget", "must be a positive integer", "invalid_compactor")
            columns[column] = value
            continue
        if value is None:
            value = ""
        limit = cast("Field[Any, Any]", Summary._meta.get_field(column)).max_length or 100
        if not isinstance(value, str) or len(value) > limit:
            raise _bad(
                f"compactor.{field}", f"must be a string of at most {limit} characters", "invalid_compactor"
            )
        columns[column] = value
    return columns


# -- writing ---------------------------------------------------------------------------------------


def create_summary(
    workflow: Workflow,
    *,
    content: dict[str, Any],
    covers_from_seq: int,
    covers_to_seq: int,
    compactor: dict[str, Any],
    source_refs: Iterable[str] = (),
    excluded_categories: Iterable[str] = (),
    job: CompactionJob | None = None,
    claimed_hash: str | None = None,
    source_purge_epoch: int | None = None,
    actor: Actor,
) -> Summary:
    """Store a new CANDIDATE version (next version number of the workflow).

    Raises InvalidInput with a precise reason for bad coverage, content shape, fact citations,
    compactor configuration or a client hash that does not match the canonical bytes.
    ``source_purge_epoch`` is the workflow's purge epoch when the content's source events were read
    (a compaction job passes it); a purge since then is a ``Conflict`` (``purged_since_read``),
    checked under the workflow lock a purge also takes, so purged content is never stored.
    """

    compactor_columns = check_compactor(compactor)
    refs = _str_list(source_refs, "source_refs")
    excluded = _str_list(excluded_categories, "excluded_categories", max_len=100)
    if claimed_hash is not None and (
        not isinstance(claimed_hash, str) or not claimed_hash.startswith(HASH_PREFIX)
    ):
        raise _bad("content_hash", f"must be a string '{HASH_PREFIX}<hex>'", "invalid_content_hash")
    if job is not None and job.workflow_id != workflow.pk:
        raise _bad("job", "the compaction job belongs to another workflow", "invalid_job")
    # Shape checks that need no lock first, so a bad body costs nothing.
    start, end = check_range(covers_from_seq, covers_to_seq)
    check_content(content, start, end)
    data = canonical_bytes(content)
    if len(data) > max_summary_bytes():
        raise PayloadTooLarge(
            f"content is {len(data)} bytes of canonical JSON, over the maximum of {max_summary_bytes()}",
            code="summary_too_large",
        )
    content_hash = sha256_hex(data)
    if claimed_hash is not None and claimed_hash != content_hash:
        raise InvalidInput(
            f"content_hash mismatch: the client claimed {claimed_hash} but the canonical content bytes hash "
            f"to {content_hash}",
            code="content_hash_mismatch",
            field="content_hash",
            computed_hash=content_hash,
        )
    text = data.decode("utf-8")
    tokens = count_tokens(text, workflow_encoding(workflow))

    with transaction.atomic():
        # The workflow lock orders version numbers and reads a head/active pointer nobody moves meanwhile.
        wf = (
            Workflow.objects.select_for_update(of=("self",))
            .select_related("tenant", "active_summary")
            .get(pk=workflow.pk)
        )
        if source_purge_epoch is not None and source_purge_epoch != wf.purge_epoch:
            raise Conflict(
                f"a purge landed after the source events were read (purge epoch {source_purge_epoch}, now "
                f"{wf.purge_epoch}): the content may hold purged material and is not stored",
                code="purged_since_read",
                purge_epoch=wf.purge_epoch,
            )
        check_coverage(wf, start, end)
        last = (
            Summary.objects.filter(workflow=wf).order_by("-version").values_list("version", flat=True).first()
        )
        summary = Summary.objects.create(
            summary_id=new_summary_id(),
            tenant_id=wf.tenant_id,
            workflow=wf,
            version=(last or 0) + 1,
            job=job,
            created_by=str(actor),
            covers_from_seq=start,
            covers_to_seq=end,
            source_revision=wf.head_seq,
            source_refs=refs,
            source_purge_epoch=wf.purge_epoch,
            excluded_categories=excluded,
            content_schema=content.get("schema", SUMMARY_SCHEMA),
            content=text,
            content_hash=content_hash,
            storage_location=STORAGE_LOCATION,
            token_count=tokens,
            status=SummaryStatus.CANDIDATE,
            **compactor_columns,
        )
        record(
            wf.tenant,
            actor,
            "summary.create",
            summary,
            {
                "workflow": wf.external_id,
                "version": summary.version,
                "covers": [start, end],
                "content_hash": content_hash,
                "compactor": compactor_columns["compactor_name"],
                "job": job.pk if job else None,
            },
        )
    return summary


# -- reading ---------------------------------------------------------------------------------------


def get_summary(tenant: Tenant, summary_id: str) -> Summary:
    """The tenant's summary by public id, or 404 (another tenant's summary is indistinguishable from none)."""
    # summary_id is unique: .get() needs no ORDER BY (every review action starts here).
    try:
        return Summary.objects.select_related("workflow", "job", "purged_by").get(
            tenant=tenant, summary_id=summary_id
        )
    except Summary.DoesNotExist:
        raise NotFound(f"summary {summary_id!r} not found", code="summary_not_found") from None


def summary_content(summary: Summary) -> dict[str, Any]:
    """The parsed content. A purged summary has none: it must be re-derived, never served."""
    if summary.purged_by_id is not None or not summary.content:
        raise Conflict(
            f"summary {summary.summary_id} (S{summary.version}) covers purged events; its content was removed",
            code="summary_purged",
        )
    return json.loads(summary.content)


def verify_summary(summary: Summary) -> dict[str, Any]:
    """Recompute the hash of the stored bytes and compare it with the recorded content_hash."""
    data = summary.content.encode("utf-8")
    computed = sha256_hex(data)
    purged = summary.purged_by_id is not None
    try:
        canonical = canonical_bytes(json.loads(data)) == data
    except ValueError:
        canonical = False
    match = computed == summary.content_hash
    if purged:
        result = "purged"
        detail = "content was removed by a purge; the recorded hash is kept as provenance"
    elif match and canonical:
        result, detail = "match", "stored bytes hash to the recorded content_hash"
    elif match:
        result, detail = "mismatch", "hash matches but the stored bytes are not canonical JSON"
    else:
        result, detail = (
            "mismatch",
            f"stored bytes hash to {computed}, not the recorded {summary.content_hash}",
        )
    return {
        "summary_id": summary.summary_id,
        "version": summary.version,
        "result": result,
        "match": match and canonical and not purged,
        "recorded_hash": summary.content_hash,
        "computed_hash": computed,
        "canonical": canonical,
        "byte_length": len(data),
        "storage_location": summary.storage_location,
        "purged": purged,
        "detail": detail,
    }


# -- the shapes readers serve -----------------------------------------------------------------------
# A record is shown by naming its fields, in the order a reader serves them. Each field is read one
# way: by a reader below, else as the model attribute of that name. A caller's keyword values give a
# field the form it serves (an ISO date, parsed content) or add one of its own (a URL). The summary
# page, the API, lineage, replay and the context read all pick from these definitions.


def _shape(
    record: Any, fields: Iterable[str], readers: dict[str, Callable[[Any], Any]], values: dict[str, Any]
) -> dict[str, Any]:
    fields = tuple(fields)
    if unknown := values.keys() - set(fields):
        raise TypeError(f"values for fields not shown: {sorted(unknown)}")
    return {
        name: values[name] if name in values else readers.get(name, attrgetter(name))(record)
        for name in fields
    }


def compactor_config(summary: Summary) -> dict[str, Any]:
    """The compactor configuration recorded with a summary, by its API names."""
    return {field: getattr(summary, column) for field, column in COMPACTOR_FIELDS.items()}


SUMMARY_READERS: dict[str, Callable[[Summary], Any]] = {
    "workflow": lambda s: s.workflow.external_id,
    "compactor": compactor_config,
    "watermark": attrgetter("covers_to_seq"),
}
# The compact list shape (no content).
SUMMARY_ROW_FIELDS = (
    "summary_id",
    "version",
    "label",
    "status",
    "covers_from_seq",
    "covers_to_seq",
    "compactor",
    "token_count",
    "content_hash",
    "created_at",
    "status_changed_at",
)


def summary_dict(summary: Summary, fields: Iterable[str], **values: Any) -> dict[str, Any]:
    """``fields`` of ``summary``, in that order (see the section comment for ``values``)."""
    return _shape(summary, fields, SUMMARY_READERS, values)


VALIDATION_FIELDS = (
    "id",
    "validator_version",
    "passed",
    # passed | failed | unverifiable (opaque content: nothing failed, nothing could be read)
    "result",
    "mandatory_coverage",
    "checks",
    "reasons",
    "waived_checks",
    "waived_by",
    "actor",
    "created_at",
)


def validation_dict(
    record: ValidationRecord, fields: Iterable[str] = VALIDATION_FIELDS, **values: Any
) -> dict[str, Any]:
    return _shape(record, fields, {}, values)


LIFECYCLE_EVENT_READERS: dict[str, Callable[[LifecycleEvent], Any]] = {
    "prior_active_summary_id": lambda e: (
        e.prior_active_summary.summary_id if e.prior_active_summary else None
    ),
    "prior_active_version": lambda e: e.prior_active_summary.version if e.prior_active_summary else None,
}
# What a lifecycle event changed, who asked, and against which revision.
LIFECYCLE_CHANGE_FIELDS = (
    "action",
    "result",
    "from_status",
    "to_status",
    "actor",
    "actor_kind",
    "task_attempt_id",
    "reason",
    "expected_revision",
    "observed_revision",
)
LIFECYCLE_EVENT_FIELDS = (
    "id",
    "at",
    *LIFECYCLE_CHANGE_FIELDS,
    "prior_active_summary_id",
    "prior_active_version",
    "source_revision_at_activation",
)


def lifecycle_event_dict(
    event: LifecycleEvent, fields: Iterable[str] = LIFECYCLE_EVENT_FIELDS, **values: Any
) -> dict[str, Any]:
    return _shape(event, fields, LIFECYCLE_EVENT_READERS, values)


TRACE_READERS: dict[str, Callable[[ConsumerTrace], Any]] = {"trace_id": attrgetter("pk")}
# A consumer trace on the summary page (what it read, and when).
TRACE_PAGE_FIELDS = ("trace_id", *TRACE_CALL_FIELDS, *TRACE_READ_FIELDS, "flags", "at")


def trace_dict(
    trace: ConsumerTrace, fields: Iterable[str] = TRACE_PAGE_FIELDS, **values: Any
) -> dict[str, Any]:
    return _shape(trace, fields, TRACE_READERS, values)


def summary_row(summary: Summary) -> dict[str, Any]:
    """The compact list shape (no content)."""
    return summary_dict(
        summary,
        SUMMARY_ROW_FIELDS,
        compactor={"name": summary.compactor_name, "version": summary.compactor_version},
    )


def summary_detail(summary: Summary, *, traces_shown: int = TRACES_SHOWN) -> dict[str, Any]:
    """All eight metadata groups of a summary in one dict (a fixed number of queries)."""

    wf = summary.workflow
    validations = list(summary.validations.order_by("-created_at", "-id"))
    events = list(summary.lifecycle_events.select_related("prior_active_summary").order_by("at", "id"))
    traces_qs = ConsumerTrace.objects.filter(summary=summary)
    traces = list(traces_qs.order_by("-at", "-id")[:traces_shown])
    trace_count = len(traces) if len(traces) < traces_shown else traces_qs.aggregate(n=Count("id"))["n"]
    purged = summary.purged_by_id is not None
    content = None if purged or not summary.content else json.loads(summary.content)
    job = summary.job
    return {
        **summary_dict(
            summary,
            (
                "summary_id",
                "workflow",
                "version",
                "label",
                "status",
                "content_hash",
                "covers_from_seq",
                "covers_to_seq",
                "token_count",
            ),
        ),
        # 1. identity
        "identity": summary_dict(
            summary,
            ("summary_id", "workflow", "version", "label", "created_at", "created_by", "job"),
            job={"job_id": job.pk, "status": job.status, "idempotency_key": job.idempotency_key}
            if job
            else None,
        ),
        # 2. source lineage
        "source_lineage": summary_dict(
            summary,
            (
                "covers_from_seq",
                "covers_to_seq",
                "watermark",
                "source_revision",
                "source_refs",
                "excluded_categories",
            ),
        ),
        # 3. compactor configuration
        "compactor": compactor_config(summary),
        # 4. validation record(s), newest first
        "validation": {
            "latest": validation_dict(validations[0]) if validations else None,
            "records": [validation_dict(v) for v in validations],
        },
        # 5. content integrity
        "integrity": {
            "schema": summary.content_schema,
            "content_hash": summary.content_hash,
            "storage_location": summary.storage_location,
            "token_count": summary.token_count,
            "byte_length": len(summary.content.encode("utf-8")),
            "purged": purged,
            "purged_by": summary.purged_by.purge_id if purged and summary.purged_by else None,
        },
        "content": content,
        # 6. lifecycle status
        "lifecycle": {
            "status": summary.status,
            "status_changed_at": summary.status_changed_at,
            "is_active": wf.active_summary_id == summary.pk,
            "approval_required": approval_required(wf),
            "approved": is_approved(summary, events),
        },
        # 7. activation details: every lifecycle event of this summary, oldest first
        "activation": {"events": [lifecycle_event_dict(e) for e in events]},
        # 8. consumer traces that read this summary, newest first (capped)
        "consumers": {"count": trace_count, "shown": len(traces), "traces": [trace_dict(t) for t in traces]},
    }
