"""What changed between two summary versions: facts, open items, salient units, narrative (word
level, and side by side by sentence: moved / changed / removed / added), coverage, config."""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from typing import Any

from audit.content import content_is_opaque, summary_content, summary_unavailable
from memoryhub.core import quality, salient
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
        "sentences": (
            diff_sentences(str((old or {}).get("narrative") or ""), str(new.get("narrative") or ""))
            if old is not None and new is not None
            else None
        ),
        # Opaque on either side: what was kept or lost is unknown, so no unit is called lost.
        "salient": diff_salient(old, new) if old is not None and new is not None else None,
        "opaque": [s.label for s in (a, b) if s is not None and content_is_opaque(s)],
    }


# --- narrative, side by side at sentence level -------------------------------------------------------

CHANGED_RATIO = 0.5  # two sentences at least this similar (word level) are one sentence, changed
MAX_SENTENCES = 400  # per side; longer narratives are compared on their first sentences


def _sentences(text: str) -> list[str]:
    return [text[s:e] for s, e in salient.full_sentences(text)][:MAX_SENTENCES]


def _norm(sentence: str) -> str:
    return " ".join(sentence.split()).casefold()


def _word_ops(old: str, new: str) -> list[dict[str, str]]:
    a, b = _words(old), _words(new)
    matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    return [
        {"op": tag, "old": "".join(a[i1:i2]), "new": "".join(b[j1:j2])}
        for tag, i1, i2, j1, j2 in matcher.get_opcodes()
    ]


def _similarity(old: str, new: str) -> float:
    return difflib.SequenceMatcher(a=_norm(old).split(), b=_norm(new).split(), autojunk=False).ratio()


def diff_sentences(old: str, new: str) -> dict[str, Any]:
    """The two narratives side by side, one row per sentence, each marked: ``same``; ``changed``
    (a sentence reworded: both sides, with word-level ``ops``); ``moved`` (the same sentence at
    another place: on each side, numbered ``to`` / ``from`` the other side's sentence); ``removed``
    (before only); ``added`` (after only). Sentences are numbered from 1 on each side."""
    a, b = _sentences(old), _sentences(new)
    na, nb = [_norm(s) for s in a], [_norm(s) for s in b]
    blocks = difflib.SequenceMatcher(a=na, b=nb, autojunk=False).get_opcodes()
    # Moved: a sentence outside the aligned runs on one side that appears, as it is, outside them on
    # the other.
    loose_a = [i for tag, i1, i2, _, _ in blocks if tag != "equal" for i in range(i1, i2)]
    loose_b = [j for tag, _, _, j1, j2 in blocks if tag != "equal" for j in range(j1, j2)]
    moved_to: dict[int, int] = {}
    free_b = {j: nb[j] for j in loose_b}
    for i in loose_a:
        j = next((j for j, text in free_b.items() if text == na[i]), None)
        if j is not None:
            moved_to[i] = j
            del free_b[j]
    # Changed: within each unaligned run, in order, each remaining sentence before paired with the
    # most similar remaining sentence after it (pairs never cross: the rows read top to bottom).
    pairs: dict[int, int] = {}
    taken_b = set(moved_to.values())
    for tag, i1, i2, j1, j2 in blocks:
        last = j1 - 1
        for i in range(i1, i2) if tag != "equal" else ():
            if i in moved_to:
                continue
            scored = [(_similarity(a[i], b[j]), j) for j in range(last + 1, j2) if j not in taken_b]
            best = max(scored, default=(0.0, -1), key=lambda sj: (sj[0], -sj[1]))
            if best[0] >= CHANGED_RATIO:
                pairs[i] = last = best[1]
    taken_b |= set(pairs.values())
    # Moved and reworded: a sentence left over on one side that is similar to one left over
    # elsewhere on the other.
    for i in loose_a:
        if i in moved_to or i in pairs:
            continue
        scored = [(_similarity(a[i], b[j]), j) for j in loose_b if j not in taken_b]
        best = max(scored, default=(0.0, -1), key=lambda sj: (sj[0], -sj[1]))
        if best[0] >= CHANGED_RATIO:
            moved_to[i] = best[1]
            taken_b.add(best[1])
    moved_from = {j: i for i, j in moved_to.items()}
    rows: list[dict[str, Any]] = []

    def row(state: str, i: int | None, j: int | None, **extra: Any) -> None:
        rows.append(
            {
                "state": state,
                "old": a[i] if i is not None else None,
                "new": b[j] if j is not None else None,
                "old_no": i + 1 if i is not None else None,
                "new_no": j + 1 if j is not None else None,
                **extra,
            }
        )

    for tag, i1, i2, j1, j2 in blocks:
        if tag == "equal":
            for k in range(i2 - i1):
                row("same", i1 + k, j1 + k)
            continue
        i, j = i1, j1
        while i < i2 or j < j2:
            if i < i2 and i in pairs and j == pairs[i]:
                row("changed", i, j, ops=_word_ops(a[i], b[j]))
                i, j = i + 1, j + 1
            elif i < i2 and i not in pairs:
                if i in moved_to:
                    k = moved_to[i]
                    row("moved", i, None, to=k + 1, reworded=na[i] != nb[k])
                else:
                    row("removed", i, None)
                i += 1
            elif j < j2:
                if j in moved_from:
                    k = moved_from[j]
                    reworded = na[k] != nb[j]
                    row(
                        "moved",
                        None,
                        j,
                        ops=_word_ops(a[k], b[j]) if reworded else None,
                        reworded=reworded,
                        **{"from": k + 1},
                    )
                else:
                    row("added", None, j)
                j += 1
            else:  # pragma: no cover - pairs only point forward into the block
                break
    counts = {state: 0 for state in ("same", "changed", "moved", "removed", "added")}
    for r in rows:
        counts[r["state"]] += 1
    counts["moved"] = len(moved_to)
    return {"rows": rows, "counts": counts, "before": len(a), "after": len(b)}


# --- salient units: what the retention table counts, version against version -------------------------


def diff_salient(old: dict[str, Any] | None, new: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Per salient class (the retention table's ``Units: …`` rows), the units the older version
    states and the newer does not (``lost``: shown as ``−1: 401``) and the other way round
    (``gained``). Matching is the validator's (``salient.contains``: 12,500 = 12500)."""
    text_a, text_b = quality.content_text(old or {}), quality.content_text(new or {})
    units_a, units_b = salient.units(text_a), salient.units(text_b)

    def missing(
        units: list[salient.Unit], other: list[salient.Unit], other_text: str
    ) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        seen: set[tuple[str, str]] = set()
        for u in units:
            if (u.kind, u.norm) in seen or salient.contains(other, other_text, u):
                continue
            seen.add((u.kind, u.norm))
            out.setdefault(u.kind, []).append(u.text)
        return out

    lost, gained = missing(units_a, units_b, text_b), missing(units_b, units_a, text_a)
    return [
        {
            "kind": kind,
            "label": quality.CLASS_LABELS[f"unit_{kind}"],
            "lost": lost.get(kind, []),
            "gained": gained.get(kind, []),
        }
        for kind in quality.UNIT_KINDS
        if lost.get(kind) or gained.get(kind)
    ]
