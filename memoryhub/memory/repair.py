"""Close the loop: what a framework's compaction lost, handed back to the integration.

A framework (LangChain, Claude Code, OpenAI Agents, Anthropic) replaced the first part of a
conversation with a summary MemoryHub did not write. ``assess`` judges that summary against the
events it replaced (``memoryhub.core.verdicts``: the same rules-7 verdict the validator uses) and,
by the workflow policy's ``repair`` block (``memoryhub.core.repair_policy``), answers:

* ``verdict``: ``kept`` (nothing lost), ``repaired`` (losses handed back), ``blocked`` (the gate
  refuses the summary: an integration that can keeps the framework's previous context),
  ``observed`` (losses recorded, nothing handed back) or ``unknown`` (opaque content: what it lost
  cannot be read, so nothing can be handed back);
* ``items``: the lost obligation sentences first (contradicted ones marked), then the lost salient
  units grouped by the source sentence that states them, each with its source seq; an empty or
  unreadable summary (``empty_summary``) gets the tail of the events it replaced. Capped to the
  policy's ``max_tokens``; ``omitted`` counts what did not fit;
* ``text``: the "kept from before the summary" block an integration appends to the summary.

The stored trace of a verdict (``meta``) holds counts and seqs only, never event text: a purge of
the events leaves nothing behind; pages re-derive the items from the events still held.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from memoryhub.compaction.types import SourceEvent
from memoryhub.core import verdicts
from memoryhub.core.errors import InvalidInput, PayloadTooLarge
from memoryhub.core.opaque import is_opaque, unreadable
from memoryhub.core.repair_policy import DEFAULT_GATE, MAX_MAX_TOKENS, merged_repair
from memoryhub.core.tokens import count_tokens
from memoryhub.memory.events import EventIn, parse_batch
from memoryhub.memory.sources import source_events
from memoryhub.memory.summaries import max_summary_bytes
from memoryhub.models import CompactionJob, Event, Summary, Workflow
from triggers.policy import policy_for

HEADER = "Kept from before the summary (MemoryHub: the summary above lost these; source seq in brackets):"
_WORDY = re.compile(r"\w{2,}")
_MAX_SENTENCE = 300
TAIL_EVENTS = 12  # an empty summary: at most this many of the last replaced events are handed back


def is_empty_summary(text: str | None) -> bool:
    """Nothing a model could read: no text, only whitespace or punctuation."""
    return not text or not _WORDY.search(text)


@dataclass
class Handback:
    verdict: str  # kept | repaired | blocked | observed | unknown
    gate: str
    empty_summary: bool = False
    items: list[dict[str, Any]] = field(default_factory=list)
    omitted: int = 0
    lost: dict[str, int] = field(default_factory=dict)
    note: str = ""
    resummarize: bool = False

    @property
    def needed(self) -> bool:
        return self.verdict in ("repaired", "blocked", "observed")

    @property
    def text(self) -> str:
        if not self.items:
            return ""
        lines = [HEADER, *(f"- [seq {i['seq']}] {i['text']}" for i in self.items)]
        if self.omitted:
            lines.append(f"- … and {self.omitted} more (see MemoryHub)")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "gate": self.gate,
            "needed": self.needed,
            "empty_summary": self.empty_summary,
            "lost": self.lost,
            "items": self.items,
            "omitted": self.omitted,
            "text": self.text,
            "note": self.note,
            "resummarize": self.resummarize and self.needed,
        }

    def meta(self) -> dict[str, Any]:
        """What is stored beside the compaction: no event text (purge leaves nothing behind)."""
        return {
            "verdict": self.verdict,
            "gate": self.gate,
            "needed": self.needed,
            "empty_summary": self.empty_summary,
            "lost": self.lost,
            "handed_back": [{"kind": i["kind"], "seq": i["seq"]} for i in self.items],
            "omitted": self.omitted,
            "note": self.note,
        }


def settings_for(workflow: Workflow) -> dict[str, Any]:
    return merged_repair(policy_for(workflow).repair)


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _MAX_SENTENCE else text[: _MAX_SENTENCE - 1] + "…"


def _lost_items(events: list[Any], content: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, int]]:
    evidence = verdicts.build_evidence(events)
    verdict = verdicts.judge(evidence, content)
    items: list[dict[str, Any]] = []
    covered_sentences: set[tuple[int, str]] = set()
    for ob in sorted(verdict.obligations, key=lambda o: o.seq):
        if ob.state not in ("lost", "contradicted"):
            continue
        sentence = _clip(ob.obligation.sentence)
        text = sentence if ob.state == "lost" else f"(the summary contradicts this) {sentence}"
        items.append({"kind": "obligation", "seq": ob.seq, "text": text, "state": ob.state})
        covered_sentences.add((ob.seq, " ".join(ob.obligation.sentence.split())))
    lost_units = verdict.silent_losses()
    # Group the lost units by the first source sentence stating them (a unit inside a handed-back
    # obligation sentence is already handed back).
    groups: dict[tuple[int, str], list[str]] = {}
    for uv in sorted(lost_units, key=lambda v: v.seq):
        home = next(
            (
                s
                for s in evidence.sentences
                if s.seq == uv.seq and any(u.norm == uv.unit.norm for u in s.units)
            ),
            None,
        )
        sentence = " ".join(home.text.split()) if home is not None else ""
        if (uv.seq, sentence) in covered_sentences:
            continue
        values = groups.setdefault((uv.seq, sentence), [])
        if uv.unit.text not in values:
            values.append(uv.unit.text)
    for (seq, sentence), values in groups.items():
        text = ", ".join(values) + (f": {_clip(sentence)}" if sentence else "")
        items.append({"kind": "unit", "seq": seq, "text": text, "values": values})
    lost = {
        "obligations": sum(1 for o in verdict.obligations if o.state == "lost"),
        "contradicted": sum(1 for o in verdict.obligations if o.state == "contradicted"),
        "units": len(lost_units),
    }
    return items, lost


def _tail_items(events: list[Any]) -> list[dict[str, Any]]:
    """An empty summary replaced everything: hand back the last replaced events (oldest first)."""
    readable = [e for e in events if not e.purged and (e.content or "").strip()]
    return [
        {"kind": "tail", "seq": e.seq, "text": _clip(f"{e.role or e.kind}: {e.content}")}
        for e in readable[-TAIL_EVENTS:]
    ]


def _capped(items: list[dict[str, Any]], max_tokens: int) -> tuple[list[dict[str, Any]], int]:
    budget = max_tokens - count_tokens(HEADER)
    kept: list[dict[str, Any]] = []
    for i, item in enumerate(items):
        cost = count_tokens(f"- [seq {item['seq']}] {item['text']}")
        if cost > budget:
            return kept, len(items) - i
        budget -= cost
        kept.append(item)
    return kept, 0


def assess(
    workflow: Workflow,
    content: dict[str, Any],
    covers_from_seq: int,
    covers_to_seq: int,
    *,
    can_block: bool = False,
    settings: dict[str, Any] | None = None,
) -> Handback:
    """The verdict on a framework's summary ``content`` of events ``covers_from_seq..covers_to_seq``
    and what to hand back, by the workflow's repair policy (see the module doc)."""
    settings = settings or settings_for(workflow)
    if unreadable(content) and not _absent(content):
        return _unknown(settings["gate"])
    return judge_events(
        source_events(workflow, covers_from_seq, covers_to_seq),
        content,
        can_block=can_block,
        settings=settings,
    )


def _absent(content: Any) -> bool:
    return is_opaque(content) and content.get("size_bytes") == 0  # no summary at all: empty


def _unknown(gate: str) -> Handback:
    return Handback(
        "unknown",
        gate,
        note="opaque content: what the compaction lost cannot be read, so nothing can be handed back",
    )


def judge_events(
    events: list[Any], content: dict[str, Any], *, can_block: bool, settings: dict[str, Any]
) -> Handback:
    """``assess`` over the given source events (stored, or sent with a verdict request)."""
    gate = settings["gate"]
    absent = _absent(content)
    if unreadable(content) and not absent:
        return _unknown(gate)
    narrative = content.get("narrative") if isinstance(content, dict) and not absent else None
    empty = is_empty_summary(narrative if isinstance(narrative, str) else None)
    items, lost = _lost_items(events, {"narrative": "", "facts": [], "open_items": []} if absent else content)
    if empty:
        obligations = [i for i in items if i["kind"] == "obligation"]
        items = obligations + [
            t for t in _tail_items(events) if t["seq"] not in {o["seq"] for o in obligations}
        ]
    if not items and not empty:
        return Handback("kept", gate, lost=lost)
    note = ""
    if gate == "observe":
        verdict = "observed"
    elif gate == "block" and can_block:
        verdict = "blocked"
    else:
        verdict = "repaired"
        if gate == "block":
            note = "gate 'block': this integration cannot keep the previous context; handed back instead"
    handed, omitted = _capped(items, int(settings["max_tokens"])) if verdict != "observed" else ([], 0)
    if empty and not note:
        note = "empty or unreadable summary: the tail it replaced is handed back"
    return Handback(
        verdict,
        gate,
        empty_summary=empty,
        items=handed,
        omitted=omitted if verdict != "observed" else len(items),
        lost=lost,
        note=note,
        resummarize=bool(settings.get("resummarize")),
    )


# -- what the pages show -------------------------------------------------------------------------

PAGE_MAX_COVERED = 5000  # covered events re-read to show a compaction's handed-back items on a page
OBSERVED_PREFIX = "observed/"


def _stored(job: Any) -> dict[str, Any] | None:
    meta = (job.attempts or [{}])[0].get("repair") if job is not None else None
    return meta if isinstance(meta, dict) else None


def recorded_handback(summary: Summary) -> dict[str, Any] | None:
    """A framework summary's verdict as recorded, with the handed-back items re-derived from the
    events still held (purged events give nothing back; over ``PAGE_MAX_COVERED`` covered events
    the items are not re-read). None: not an observed compaction, or recorded before repair."""
    job = summary.job
    if job is None or not job.idempotency_key.startswith(OBSERVED_PREFIX):
        return None
    meta = _stored(job)
    if meta is None:
        return None
    out = {**meta, "items": [], "items_note": ""}
    wanted = {(h.get("kind"), h.get("seq")) for h in meta.get("handed_back") or []}
    if not wanted:
        return out
    if summary.covers_to_seq - summary.covers_from_seq + 1 > PAGE_MAX_COVERED:
        out["items_note"] = f"over {PAGE_MAX_COVERED} covered events: the items are not re-read on a page"
        return out
    settings = {
        **settings_for(summary.workflow),
        "gate": meta.get("gate") or DEFAULT_GATE,
        "max_tokens": MAX_MAX_TOKENS,
    }
    live = assess(
        summary.workflow,
        json.loads(summary.content),
        summary.covers_from_seq,
        summary.covers_to_seq,
        can_block=meta.get("verdict") == "blocked",
        settings=settings,
    )
    out["items"] = [i for i in live.items if (i["kind"], i["seq"]) in wanted]
    if len(out["items"]) < len(wanted):
        out["items_note"] = "some handed-back events were purged since"
    return out


def workflow_handbacks(workflow: Workflow, limit: int = 20, with_items: int = 3) -> list[dict[str, Any]]:
    """The workflow's observed compactions, newest first, each with its verdict (the newest
    ``with_items`` with their handed-back items)."""
    jobs = (
        CompactionJob.objects.filter(workflow=workflow, idempotency_key__startswith=OBSERVED_PREFIX)
        .select_related("summary", "summary__workflow", "summary__job")
        .order_by("-created_at", "-id")[:limit]
    )
    rows = []
    for n, job in enumerate(jobs):
        if job.summary is None:
            continue
        meta = _stored(job)
        row: dict[str, Any] = {
            "summary": job.summary,
            "at": job.created_at,
            "outcome": job.outcome,
            "repair": meta,
        }
        if meta is not None and n < with_items:
            row["repair"] = recorded_handback(job.summary)
        rows.append(row)
    return rows


# -- the verdict before the record (LangChain: one light round trip on a compaction turn) --------

VERDICT_FIELDS = frozenset({"text", "covers_to_seq", "covers_to_event", "events", "can_block"})


def _bad(message: str, code: str = "invalid_repair_request") -> InvalidInput:
    return InvalidInput(message, code=code)


def verdict_for(workflow: Workflow, payload: Any) -> Handback:
    """The verdict on a summary a framework is about to use, before it is recorded (writes nothing).

    ``{"text": summary, "covers_to_event": client_event_id | "covers_to_seq": n, "events"?: [...],
    "can_block"?: bool}``: the summary replaces events 1..covers_to; ``events`` are events of the
    same workflow not stored yet (the framework's newest, sent with the step that records the
    compaction next): already stored ones (same ``client_event_id``) are skipped, the others are
    judged as if appended after the head (their seqs are provisional). The verdict is the one
    recording the compaction computes (same policy, same rules), so an integration can apply it
    while the record itself is sent in the background.
    """
    if not isinstance(payload, dict):
        raise _bad("body must be a JSON object")
    unknown = sorted(set(payload) - VERDICT_FIELDS)
    if unknown:
        raise _bad(f"unknown field(s) {unknown}; allowed: {sorted(VERDICT_FIELDS)}")
    text = payload.get("text")
    if not isinstance(text, str):
        raise _bad("'text' (the framework's summary, possibly empty) must be a string")
    if len(text.encode("utf-8")) > max_summary_bytes():
        raise PayloadTooLarge(
            f"'text' is over the maximum of {max_summary_bytes()} bytes", code="summary_too_large"
        )
    if ("covers_to_seq" in payload) == ("covers_to_event" in payload):
        raise _bad("give exactly one of covers_to_seq or covers_to_event")
    can_block = payload.get("can_block", False)
    if not isinstance(can_block, bool):
        raise _bad("'can_block' must be true or false")
    inline: list[EventIn] = []
    if payload.get("events") not in (None, []):
        inline, _ = parse_batch({"events": payload["events"]})
    stored_ids = set(
        Event.objects.filter(
            workflow=workflow, client_event_id__in=[e.client_event_id for e in inline if e.client_event_id]
        ).values_list("client_event_id", flat=True)
    )
    pending = [e for e in inline if not (e.client_event_id and e.client_event_id in stored_ids)]
    head = workflow.head_seq
    provisional = {e.client_event_id: head + i + 1 for i, e in enumerate(pending) if e.client_event_id}
    if "covers_to_seq" in payload:
        covers = payload["covers_to_seq"]
        if isinstance(covers, bool) or not isinstance(covers, int) or not 1 <= covers <= head + len(pending):
            raise _bad(f"covers_to_seq must be an integer from 1 to {head + len(pending)}")
    else:
        event_id = payload["covers_to_event"]
        if not isinstance(event_id, str) or not 0 < len(event_id) <= 200:
            raise _bad("covers_to_event must be a client_event_id (1-200 characters)")
        covers = provisional.get(event_id) or (
            Event.objects.filter(workflow=workflow, client_event_id=event_id)
            .values_list("seq", flat=True)
            .first()
        )
        if covers is None:
            raise _bad(
                f"covers_to_event: no event of this workflow has client_event_id {event_id!r}",
                "unknown_event",
            )
    events = source_events(workflow, 1, min(covers, head))
    for i, e in enumerate(pending):
        seq = head + i + 1
        if seq > covers:
            break
        events.append(
            SourceEvent(
                seq=seq,
                kind=e.kind,
                content=e.content,
                agent=e.agent,
                role=e.role,
                tool_call_id=e.tool_call_id,
                facts=list(e.facts or []),
                refs=list(e.refs or []),
                side_effect=e.side_effect,
            )
        )
    content = {"narrative": text, "facts": [], "open_items": []}
    return judge_events(events, content, can_block=can_block, settings=settings_for(workflow))
