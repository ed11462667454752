"""What changed between two summary versions: facts, open items, narrative, coverage, config."""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from typing import Any

from audit.content import summary_content, summary_unavailable
from memoryhub.core.errors import InvalidInput, NotFound
from memoryhub.models import Summary, Tenant, Workflow

FACT_FIELDS = ("kind", "state", "text")
COMPACTOR_FIELDS = (
    "compactor_name",
    "compactor_version",
    "model",
    "prompt_template_version",
    "algorithm_version",
    "token_budget",
    "tool_schema_version",
)
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def get_summary(tenant: Tenant, summary_id: str) -> Summary:
    summary = (
        Summary.objects.filter(tenant=tenant, summary_id=summary_id)
        .select_related("workflow", "purged_by")
        .first()
    )
    if summary is None:
        raise NotFound(f"summary {summary_id!r} not found", code="summary_not_found")
    return summary


def previous_version(summary: Summary) -> Summary | None:
    return (
        Summary.objects.filter(workflow_id=summary.workflow_id, version__lt=summary.version)
        .select_related("workflow", "purged_by")
        .order_by("-version")
        .first()
    )


VERSIONS_LISTED = 200


def versions_of(workflow: Workflow) -> list[Mapping[str, Any]]:
    """The workflow's summary versions, newest first (``summary_id``, ``version``): what a diff
    may be taken against."""
    return list(workflow.summaries.order_by("-version").values("summary_id", "version")[:VERSIONS_LISTED])


def resolve_pair(tenant: Tenant, summary_id: str, against: str | None) -> tuple[Summary | None, Summary]:
    """(base, summary) for the diff endpoint: ``against`` or the previous version of the workflow."""
    summary = get_summary(tenant, summary_id)
    if against:
        base = get_summary(tenant, against)
        if base.workflow_id != summary.workflow_id:
            raise InvalidInput(
                f"{against} belongs to workflow {base.workflow.external_id}, not {summary.workflow.external_id}",
                code="different_workflow",
            )
        return base, summary
    return previous_version(summary), summary


def _facts_by_key(content: dict[str, Any] | None, field: str = "facts") -> dict[str, dict[str, Any]]:
    facts: dict[str, dict[str, Any]] = {}
    for item in (content or {}).get(field) or []:
        if isinstance(item, dict) and item.get("key") is not None:
            key = str(item["key"])
            if key in facts:  # a repeated key: keep every occurrence distinguishable
                n = 2
                while f"{key}#{n}" in facts:
                    n += 1
                key = f"{key}#{n}"
            facts[key] = item
    return facts


def diff_facts(
    old: dict[str, Any] | None, new: dict[str, Any] | None, field: str = "facts"
) -> dict[str, Any]:
    """Facts (or open items) added, removed and changed, matched by key."""
    a, b = _facts_by_key(old, field), _facts_by_key(new, field)
    added = [b[k] for k in b if k not in a]
    removed = [a[k] for k in a if k not in b]
    changed = []
    unchanged = 0
    for key in (k for k in b if k in a):
        changes = {
            f: {"from": a[key].get(f), "to": b[key].get(f)}
            for f in FACT_FIELDS
            if a[key].get(f) != b[key].get(f)
        }
        if changes:
            changed.append({"key": key, "changes": changes, "from": a[key], "to": b[key]})
        else:
            unchanged += 1
    return {"added": added, "removed": removed, "changed": changed, "unchanged": unchanged}


def _words(text: str) -> list[str]:
    return re.findall(r"\S+|\s+", text)


def diff_narrative(old: str, new: str) -> dict[str, Any]:
    """Word-level opcodes (for rendering <del>/<ins>) and a sentence-per-line unified diff."""
    a, b = _words(old), _words(new)
    matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    ops = [
        {"op": tag, "old": "".join(a[i1:i2]), "new": "".join(b[j1:j2])}
        for tag, i1, i2, j1, j2 in matcher.get_opcodes()
    ]
    old_lines = [s for s in _SENTENCE.split(old.strip()) if s] if old.strip() else []
    new_lines = [s for s in _SENTENCE.split(new.strip()) if s] if new.strip() else []
    unified = list(difflib.unified_diff(old_lines, new_lines, "before", "after", lineterm="", n=1))
    return {"ops": ops, "unified": unified, "similarity": round(matcher.ratio(), 4), "changed": old != new}


def _side(summary: Summary | None) -> dict[str, Any] | None:
    if summary is None:
        return None
    return {
        "summary_id": summary.summary_id,
        "version": summary.version,
        "label": summary.label,
        "status": summary.status,
        "covers_from_seq": summary.covers_from_seq,
        "covers_to_seq": summary.covers_to_seq,
        "content_hash": summary.content_hash,
        "token_count": summary.token_count,
        "unavailable": summary_unavailable(summary),
    }


def diff_summaries(a: Summary | None, b: Summary) -> dict[str, Any]:
    """Diff from ``a`` (the base; None = nothing before) to ``b``."""
    old = summary_content(a) if a is not None else {}
    new = summary_content(b)
    unavailable = [u for u in (summary_unavailable(a) if a else None, summary_unavailable(b)) if u]
    compactor_changes = {
        f: {"from": getattr(a, f) if a else None, "to": getattr(b, f)}
        for f in COMPACTOR_FIELDS
        if a is None or getattr(a, f) != getattr(b, f)
    }
    a_to = a.covers_to_seq if a else 0
    coverage = {
        "from": {"covers_from_seq": a.covers_from_seq, "covers_to_seq": a.covers_to_seq} if a else None,
        "to": {"covers_from_seq": b.covers_from_seq, "covers_to_seq": b.covers_to_seq},
        "watermark_delta": b.covers_to_seq - a_to,
        "newly_covered": [a_to + 1, b.covers_to_seq] if b.covers_to_seq > a_to else None,
        "no_longer_covered": [b.covers_to_seq + 1, a_to] if a_to > b.covers_to_seq else None,
    }
    return {
        "from": _side(a),
        "to": _side(b),
        "identical": a is not None and a.content_hash == b.content_hash,
        "unavailable": unavailable,
        "coverage": coverage,
        "tokens": {
            "from": a.token_count if a else 0,
            "to": b.token_count,
            "delta": b.token_count - (a.token_count if a else 0),
        },
        "compactor_changes": compactor_changes,
        "facts": diff_facts(old, new) if old is not None and new is not None else None,
        "open_items": diff_facts(old, new, "open_items") if old is not None and new is not None else None,
        "narrative": (
            diff_narrative(str((old or {}).get("narrative") or ""), str(new.get("narrative") or ""))
            if old is not None and new is not None
            else None
        ),
    }
