"""What the audit log page (``/audit/``) shows: a page of the tenant's entries narrowed by the
filter form, each described (audit.story), the actions the filter offers, and the chain's
verification, cached per chain head.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.core.cache import cache
from django.core.paginator import Page, Paginator
from django.db.models import Q, QuerySet

from audit.log import sequence_pending
from audit.models import NEWEST_FIRST, AuditChainHead, AuditEntry
from audit.story import Described, describe
from audit.verify import verify_chain
from memoryhub.core.moments import BadMoment, parse_moment_text
from memoryhub.models import Tenant

ENTRIES_PER_PAGE = 50
CHAIN_STATUS_SECONDS = 300  # how long a chain walk is reused while the head does not move
AUDIT_FILTERS = ("action", "object", "actor", "since", "until", "object_type", "object_id")


def _moment(raw: str) -> datetime | None:
    """A datetime-local / ISO value from the filter form (UTC when it names no offset), or None
    when empty or bad (a filter the form cannot read is left out, not an error)."""
    if not raw:
        return None
    try:
        return parse_moment_text(raw)
    except BadMoment:
        return None


def filtered_entries(tenant: Tenant, filters: dict[str, str]) -> QuerySet[AuditEntry]:
    """The audit entries matching the page's filters (newest first); ``filters`` has every key
    of AUDIT_FILTERS, an empty value meaning "any".

    ``object`` matches an object id exactly, or every entry about a workflow (its summaries,
    jobs and traces carry the workflow's external id in their data)."""
    entries = AuditEntry.objects.filter(tenant=tenant).order_by(*NEWEST_FIRST)
    if filters["action"]:
        entries = entries.filter(action__startswith=filters["action"])
    if filters["object"]:
        entries = entries.filter(Q(object_id=filters["object"]) | Q(chained_data__workflow=filters["object"]))
    if filters["object_type"]:
        entries = entries.filter(object_type=filters["object_type"])
    if filters["object_id"]:
        entries = entries.filter(object_id=filters["object_id"])
    if filters["actor"]:
        entries = entries.filter(actor__icontains=filters["actor"])
    if since := _moment(filters["since"]):
        entries = entries.filter(at__gte=since)
    if until := _moment(filters["until"]):
        entries = entries.filter(at__lte=until)
    return entries


def logged_actions(tenant: Tenant) -> list[str]:
    """Every action the tenant's log holds, alphabetically (the filter form's choices)."""
    return list(
        AuditEntry.objects.filter(tenant=tenant)
        .values_list("action", flat=True)
        .distinct()
        .order_by("action")
    )


def chain_status(tenant: Tenant, *, force: bool = False) -> dict[str, Any]:
    """Full chain verification (audit.verify.verify_chain), cached per chain head for a few minutes.

    Verifying reads every entry (O(entries)); the page would otherwise pay that on each load. A new
    entry moves the head once it is sequenced (first, here: the key then names the head the walk
    sees) and so invalidates the cache; ``force`` walks afresh.
    """
    sequence_pending(tenant)
    head = AuditChainHead.objects.filter(tenant=tenant).values_list("seq", "entry_hash").first() or (0, "")
    key = f"audit-chain:{tenant.pk}:{head[0]}:{head[1]}"
    result = None if force else cache.get(key)
    if result is None:
        result = verify_chain(tenant)
        cache.set(key, result, timeout=CHAIN_STATUS_SECONDS)
    return result


@dataclass(frozen=True)
class AuditLogPage:
    page: Page
    rows: list[Described]
    chain: dict[str, Any]
    actions: list[str]


def audit_log_page(tenant: Tenant, filters: dict[str, str], page_no: Any, *, verify: bool) -> AuditLogPage:
    """Page ``page_no`` of the filtered entries, described; ``verify`` forces a fresh chain walk."""
    chain = chain_status(tenant, force=verify)  # sequences first: the page then lists the entries after it
    page = Paginator(filtered_entries(tenant, filters), ENTRIES_PER_PAGE).get_page(page_no)
    return AuditLogPage(
        page=page,
        rows=describe(tenant.pk, list(page.object_list)),
        chain=chain,
        actions=logged_actions(tenant),
    )
