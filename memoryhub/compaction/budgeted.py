"""``extractive-v3``: a deterministic compactor that never exceeds its budget and declares its drops.

What it keeps comes from the salient extractor (``salient_units``), filled into the budget in
priority order:

0. obligation sentences (requirements, constraints, "must/never/only…", "muss/darf nicht…",
   "しなければ/禁止…") and requirement/constraint facts;
1. decisions (decision/approval events and sentences, decision facts);
2. open items (open issues, pending approvals);
3. units (identifiers, numbers, dates, paths…) of requirement/constraint events;
4. units of every other event (tool output, chat, diffs…) and the remaining facts;
5. narrative (one first sentence per event, newest first).

Everything that does not fit is listed in ``content["dropped"]`` (see
``memoryhub.compaction.types``) with its source seq, so a loss is declared, never silent. The
manifest counts against the budget: narrative drops are aggregated into seq ranges, and when even
that does not fit, older entries coarsen into ranges. Builds on its own previous summaries (kept
lines, facts and manifest are carried forward and may be evicted later, then declared).

An aggregated unit entry ("seqs 3-196: 51 units not listed (census 1f0c9a2e)") states the census
of the units it declares without naming them — their number and a digest, computed with the
validator's own reading of every covered event (``verdicts.census_notes``) — so rules-8 can tell a
unit declared by the range from one lost beside it. That is why this compactor reads the history
its previous summary covered (``reads_history``), not only the events after the watermark.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from memoryhub.compaction.base import CompactionError, register
from memoryhub.compaction.extract import (
    events_to_cover,
    json_string_tokens,
    merge_facts,
    open_items,
)
from memoryhub.compaction.extractive import TokenBudgetedCompactor
from memoryhub.compaction.salient_units import sentences as split_sentences
from memoryhub.compaction.salient_units import units as find_units
from memoryhub.compaction.secret_scan import redact_secrets
from memoryhub.compaction.tokens import count_json_tokens, count_tokens, truncate_to_tokens
from memoryhub.compaction.types import (
    DROPPED_FIELD,
    SUMMARY_SCHEMA,
    CompactionResult,
    PreviousSummary,
    SourceEvent,
    dropped_seqs,
    range_text,
)
from memoryhub.core import verdicts
from memoryhub.core.facts import is_mandatory

OBLIGATION, DECISION, OPEN_ITEM, REQ_UNIT, UNIT, NARRATIVE = range(6)
_MANIFEST_KIND = {
    OBLIGATION: "obligation",
    DECISION: "decision",
    OPEN_ITEM: "open_item",
    REQ_UNIT: "unit",
    UNIT: "unit",
    NARRATIVE: "narrative",
}
_TAG = {OBLIGATION: "must", DECISION: "decision", REQ_UNIT: "data", UNIT: "data"}
_TAG_PRIORITY = {"must": OBLIGATION, "decision": DECISION}
_OBLIGATION_KINDS = frozenset({"requirement", "constraint"})
_DECISION_KINDS = frozenset({"decision", "approval"})
_OBLIGATION_FACTS = frozenset({"requirement", "constraint", "scope"})
# "#7 planner/requirement [must]: …" and "#12 [units]: a · b" — what v3 writes and parses back (a
# units line carries no agent/kind: one short prefix per event is what keeping units costs).
_UNITS_LINE = re.compile(r"^#(?P<seq>\d+) \[(?P<tag>units|data)\]: (?P<text>.*)$")
_LINE = re.compile(
    r"^#(?P<seq>\d+) (?P<who>[^/\s]*)/(?P<kind>[a-z_]+)(?: \[(?P<tag>[a-z]+)\])?: (?P<text>.*)$"
)
_UNIT_SEP = " · "
_COARSE_RESERVE = 32  # tokens of one aggregated manifest entry per kind (level 2)
_MANIFEST_TEXT_TOKENS = 12  # a dropped sentence is named, not copied (its seq retrieves it)


@dataclass
class _Item:
    priority: int
    seq: int
    who: str
    kind: str  # event kind
    text: str  # a sentence, a single unit, or "" for a fact
    units: tuple[str, ...] = ()
    fact: dict[str, Any] | None = None
    cost: int = 0
    order: int = 0  # fill order (priority first)
    pos: int = 0  # position in the source: lines of one seq keep their sentence order
    kept: bool = False
    also: list[int] = field(default_factory=list)  # other seqs that stated the same text
    sentence: bool = False  # a unit-level item that is a whole sentence/line, not a bare unit
    required: bool = False  # a fact every validator requires (mandatory, open): filled first

    @property
    def seqs(self) -> list[int]:
        return [self.seq, *self.also]

    @property
    def head(self) -> str:
        return f"#{self.seq} {self.who}/{self.kind}"


@dataclass
class _Fill:
    items: list[_Item]
    carried_manifest: list[dict[str, Any]] = field(default_factory=list)


@register
class ExtractiveCompactorV3(TokenBudgetedCompactor):
    """Budgeted extractive compactor with a declared ``dropped`` manifest (module docstring)."""

    name = "extractive-v3"
    version = "3.0.0"
    algorithm_version = "extractive/priority-budget-manifest-3"
    prompt_template_version = None
    reads_history = True

    def compact(self, previous: PreviousSummary | None, events: list[SourceEvent]) -> CompactionResult:
        covered = events_to_cover(previous, events)
        prev_content: dict[str, Any] = previous.content if previous else {}
        facts = merge_facts(prev_content.get("facts", []), covered)
        fill = self._carried(previous)
        fill.items += self._fact_items(facts)
        for event in covered:
            if not event.purged:
                fill.items += self._event_items(event)
        history = [e for e in events if e.seq <= covered[-1].seq]
        if history[0].seq > (previous.covers_from_seq if previous else covered[0].seq):
            raise CompactionError(
                "extractive-v3 needs the events its previous summary covered (from seq "
                f"{previous.covers_from_seq if previous else covered[0].seq}) to state the census of "
                f"what it drops; it was given events from seq {history[0].seq}"
            )
        evidence = verdicts.build_evidence(history)
        content, token_count = self._fit(fill, evidence)
        return self._result(previous, covered, content, token_count)

    # -- candidates ----------------------------------------------------------------------------

    def _event_items(self, event: SourceEvent) -> list[_Item]:
        who = (event.agent or event.role or "").replace("/", "-").replace(" ", "-")
        text = redact_secrets(event.content)
        items: list[_Item] = []
        in_sentences: set[str] = set()
        narrative = ""
        unit_priority = REQ_UNIT if event.kind in _OBLIGATION_KINDS else UNIT
        for sentence in split_sentences(text):
            if event.kind in _OBLIGATION_KINDS or sentence.obligation:
                priority = OBLIGATION
            elif event.kind in _DECISION_KINDS or sentence.decision:
                priority = DECISION
            elif sentence.units and count_tokens(sentence.text, self.encoding) <= self.line_tokens:
                # A unit is kept in the sentence (or log line) that states it: verbatim, so the
                # value keeps its role and no juxtaposition reads as a new or changed value.
                items.append(
                    _Item(
                        unit_priority,
                        event.seq,
                        who,
                        event.kind,
                        sentence.text,
                        sentence.units,
                        sentence=True,
                    )
                )
                in_sentences.update(sentence.units)
                continue
            else:
                narrative = narrative or sentence.text
                continue
            items.append(_Item(priority, event.seq, who, event.kind, sentence.text, sentence.units))
            in_sentences.update(sentence.units)
        # Units of long sentences (and refs): listed bare on the event's units line.
        for unit in find_units("\n".join([text, *event.refs])):
            if unit not in in_sentences:
                items.append(_Item(unit_priority, event.seq, who, event.kind, unit, (unit,)))
        if narrative:
            line = self._cap(narrative)
            items.append(_Item(NARRATIVE, event.seq, who, event.kind, line, tuple(find_units(line))))
        return items

    def _fact_items(self, facts: list[dict[str, Any]]) -> list[_Item]:
        open_keys = {item["key"] for item in open_items(facts)}
        items = []
        for fact in facts:
            if fact["key"] in open_keys or (is_mandatory(fact) and fact.get("kind") not in _OBLIGATION_FACTS):
                priority = OPEN_ITEM  # open issues, pending approvals, failed tests…
            elif fact.get("kind") in _OBLIGATION_FACTS:
                priority = OBLIGATION
            elif fact.get("kind") in _DECISION_KINDS:
                priority = DECISION
            else:
                priority = UNIT
            seqs = fact.get("source_seqs") or [1]
            required = fact["key"] in open_keys or is_mandatory(fact)
            items.append(
                _Item(
                    priority,
                    max(seqs),
                    "",
                    fact.get("kind", ""),
                    "",
                    (fact["key"],),
                    fact=fact,
                    required=required,
                )
            )
        return items

    def _carried(self, previous: PreviousSummary | None) -> _Fill:
        """The previous summary's narrative lines as candidates again, and its manifest."""
        fill = _Fill(items=[])
        if previous is None:
            return fill
        content = previous.content
        fallback_seq = max(1, previous.covers_from_seq)
        for raw in str(content.get("narrative", "")).splitlines():
            raw = raw.strip()
            if not raw:
                continue
            units_line = _UNITS_LINE.match(raw)
            if units_line is not None:
                seq, text = int(units_line["seq"]), units_line["text"]
                if units_line["tag"] == "data":
                    fill.items.append(_Item(UNIT, seq, "", "", text, tuple(find_units(text)), sentence=True))
                else:
                    fill.items += [_Item(UNIT, seq, "", "", u, (u,)) for u in text.split(_UNIT_SEP) if u]
                continue
            m = _LINE.match(raw)
            if m is None:  # prose we cannot attribute (another compactor's summary)
                fill.items.append(
                    _Item(NARRATIVE, fallback_seq, "summary", "narrative", raw, tuple(find_units(raw)))
                )
                continue
            seq, who, kind, tag, text = int(m["seq"]), m["who"], m["kind"], m["tag"], m["text"]
            if tag == "data":
                priority = REQ_UNIT if kind in _OBLIGATION_KINDS else UNIT
                fill.items.append(
                    _Item(priority, seq, who, kind, text, tuple(find_units(text)), sentence=True)
                )
            elif tag == "units":
                priority = REQ_UNIT if kind in _OBLIGATION_KINDS else UNIT
                fill.items += [_Item(priority, seq, who, kind, u, (u,)) for u in text.split(_UNIT_SEP) if u]
            else:
                priority = _TAG_PRIORITY.get(tag or "", NARRATIVE)
                fill.items.append(_Item(priority, seq, who, kind, text, tuple(find_units(text))))
        # An earlier compactor's salient block: its tokens stay candidates (seq: coverage start).
        for tokens in (content.get("salient") or {}).values():
            for token in tokens if isinstance(tokens, list) else []:
                fill.items.append(_Item(UNIT, fallback_seq, "summary", "salient", token, (token,)))
        fill.carried_manifest = [dict(e) for e in content.get(DROPPED_FIELD) or [] if isinstance(e, dict)]
        return fill

    def _cap(self, sentence: str) -> str:
        capped = truncate_to_tokens(sentence, self.line_tokens, self.encoding)
        if capped == sentence:
            return sentence
        head = capped.rsplit(" ", 1)[0] if " " in capped else capped  # no half identifier
        return head.rstrip() + " …"

    # -- filling ----------------------------------------------------------------------------------

    def _fit(self, fill: _Fill, evidence: verdicts.Evidence) -> tuple[dict[str, Any], int]:
        """The fill at ``self.token_budget``, its aggregated entries sealed with their census (a
        census may cost a few tokens more than its placeholder: then fit again a little tighter)."""
        budget = self.token_budget
        for _ in range(6):
            content, tokens = self._fit_within(fill, budget)
            content = sealed(content, evidence)
            tokens = count_json_tokens(content, self.encoding)
            if self.token_budget is None or tokens <= self.token_budget:
                return content, tokens
            assert budget is not None
            budget -= tokens - self.token_budget + 2
        raise CompactionError(f"could not seal the manifest within the token budget {self.token_budget}")

    def _fit_within(self, fill: _Fill, token_budget: int | None) -> tuple[dict[str, Any], int]:
        items = self._dedupe(fill.items)
        for pos, item in enumerate(items):
            item.pos = pos
        # Fill order: the facts every validator requires (mandatory_facts, open_issues: no manifest
        # excuses them), then priority; within it oldest first, except narrative (newest first).
        items.sort(
            key=lambda it: (not it.required, it.priority, -it.seq if it.priority == NARRATIVE else it.seq)
        )
        for order, item in enumerate(items):
            item.order = order
            item.cost = self._cost(item)
        if token_budget is None:
            for item in items:
                item.kept = True
            content = self._render(items, fill.carried_manifest, level=0)
            return content, count_json_tokens(content, self.encoding)
        budget = token_budget
        # Level 0: dropped sentences named by a short text; 1: by seq and units only; 2: one
        # seq-range entry per kind (the manifest no longer grows with the history). Each level
        # keeps the longest prefix of the fill order that fits, counted exactly.
        # Detail first: the lowest level that keeps as many obligations, decisions and open items
        # as any level does (a coarser manifest only buys room for units and narrative).
        best: tuple[int, int] | None = None  # (high-priority items kept, level)
        for level in (0, 1, 2):
            if self._fill_level(items, fill.carried_manifest, budget, level) is None:
                continue
            high = sum(1 for it in items if it.kept and it.priority <= OPEN_ITEM)
            if best is None or high > best[0]:
                best = (high, level)
        if best is None:
            for item in items:
                item.kept = False
            smallest = count_json_tokens(self._render(items, fill.carried_manifest, level=2), self.encoding)
            raise CompactionError(
                f"token budget {budget} is below the smallest summary this history allows ({smallest} "
                "tokens with everything dropped and the manifest aggregated): raise the budget"
            )
        level = best[1]
        kept = self._fill_level(items, fill.carried_manifest, budget, level)
        assert kept is not None
        return kept[1], kept[2]

    def _fill_level(
        self, items: list[_Item], carried: list[dict[str, Any]], budget: int, level: int
    ) -> tuple[int, dict[str, Any], int] | None:
        """(items kept, content, tokens) for the longest prefix of the fill order that fits at
        ``level``, then any later item that still fits in the slack; None if nothing fits."""

        def total_with(keep: int) -> tuple[dict[str, Any], int]:
            for i, item in enumerate(items):
                item.kept = i < keep
            content = self._render(items, carried, level=level)
            return content, count_json_tokens(content, self.encoding)

        content, total = total_with(0)
        if total > budget:
            return None
        low, high = 0, len(items)  # total_with(low) fits; find the largest such prefix
        while low < high:
            mid = (low + high + 1) // 2
            if total_with(mid)[1] <= budget:
                low = mid
            else:
                high = mid - 1
        content, total = total_with(low)
        # Slack: later (smaller) items that fit by estimate, confirmed exactly (undo what overflows).
        slack = budget - total
        extra = []
        for item in items[low + 1 :]:
            cost = item.cost + 8
            if cost <= slack:
                item.kept = True
                extra.append(item)
                slack -= cost
        while extra:
            content = self._render(items, carried, level=level)
            total = count_json_tokens(content, self.encoding)
            if total <= budget:
                break
            extra.pop().kept = False
        else:
            content = self._render(items, carried, level=level)
            total = count_json_tokens(content, self.encoding)
        return sum(it.kept for it in items), content, total

    @staticmethod
    def _dedupe(items: list[_Item]) -> list[_Item]:
        """One candidate per fact key and per text (a unit, a sentence stated again by a later event
        or carried from the previous summary): kept once it is in the summary for every seq that
        stated it, dropped it is declared for each of them."""
        seen: dict[tuple[Any, ...], _Item] = {}
        for item in items:
            if item.fact is not None:
                key: tuple[Any, ...] = ("fact", item.fact["key"])
            elif item.priority in (REQ_UNIT, UNIT):
                key = ("unit", item.text)
            else:
                key = (item.priority, item.text)
            first = seen.setdefault(key, item)
            if first is not item:
                first.priority = min(first.priority, item.priority)
                if item.seq not in first.seqs:
                    first.also.append(item.seq)
        return list(seen.values())

    def _cost(self, item: _Item) -> int:
        if item.fact is not None:
            cost = count_json_tokens(item.fact, self.encoding) + 1
            if item.priority == OPEN_ITEM:
                cost += 16  # its open_items entry {"key","kind","state"}
            return cost
        if item.priority in (REQ_UNIT, UNIT) and not item.sentence:
            return json_string_tokens(_UNIT_SEP + item.text, self.encoding)
        return json_string_tokens(self._line(item), self.encoding) + 1

    @staticmethod
    def _line(item: _Item) -> str:
        if item.sentence:  # a data line: the seq is the pointer, agent and kind cost tokens
            return f"#{item.seq} [data]: {item.text}"
        tag = _TAG.get(item.priority)
        return f"{item.head} [{tag}]: {item.text}" if tag else f"{item.head}: {item.text}"

    def _entry_estimate(self, item: _Item, level: int) -> int:
        if item.priority == NARRATIVE or level == 2:
            return 1  # aggregated into a seq range with its neighbours
        units = sum(json_string_tokens(u, self.encoding) + 2 for u in item.units)
        if item.priority in (REQ_UNIT, UNIT) and item.fact is None:
            return units + 8  # its seq's entry, shared
        text = json_string_tokens(self._manifest_text(item), self.encoding) if level == 0 else 0
        return 16 + text + units

    def _manifest_text(self, item: _Item) -> str:
        text = f"{item.fact['key']}: {item.fact.get('text', '')}" if item.fact is not None else item.text
        return text if not text else self._cap_manifest(text)

    def _cap_manifest(self, text: str) -> str:
        capped = truncate_to_tokens(text, _MANIFEST_TEXT_TOKENS, self.encoding)
        return capped if capped == text else capped.rstrip() + "…"

    # -- rendering --------------------------------------------------------------------------------

    def _render(self, items: list[_Item], carried: list[dict[str, Any]], *, level: int) -> dict[str, Any]:
        kept = [it for it in items if it.kept]
        kept_facts = {it.fact["key"] for it in kept if it.fact is not None}
        facts = [it.fact for it in items if it.fact is not None and it.fact["key"] in kept_facts]
        facts.sort(key=lambda f: min(f.get("source_seqs") or [0]))
        content: dict[str, Any] = {
            "schema": SUMMARY_SCHEMA,
            "narrative": self._narrative([it for it in kept if it.fact is None]),
            "facts": facts,
            "open_items": open_items(facts),
            DROPPED_FIELD: self._manifest([it for it in items if not it.kept], carried, level=level),
        }
        return content

    def _narrative(self, kept: list[_Item]) -> str:
        lines: dict[tuple[int, int, int, str, str], list[str]] = {}
        rank = {OBLIGATION: 0, DECISION: 1, OPEN_ITEM: 1, REQ_UNIT: 2, UNIT: 2, NARRATIVE: 4}
        for item in kept:
            if item.priority in (REQ_UNIT, UNIT) and not item.sentence:
                lines.setdefault((item.seq, 3, 0, "", ""), []).append(item.text)
            else:
                key = (item.seq, rank[item.priority], item.pos, "", "")
                lines.setdefault(key, []).append(self._line(item))
        out = []
        for key in sorted(lines):
            if key[1] == 3:
                out.append(f"#{key[0]} [units]: " + _UNIT_SEP.join(lines[key]))
            else:
                out.extend(lines[key])
        return "\n".join(out)

    def _manifest(
        self, dropped: list[_Item], carried: list[dict[str, Any]], *, level: int
    ) -> list[dict[str, Any]]:
        entries: list[dict[str, Any]] = [dict(e) for e in carried]
        units_by_seq: dict[int, dict[str, None]] = {}
        narrative_seqs: set[int] = set()
        for entry in carried:
            if entry.get("kind") == "narrative":
                narrative_seqs.update(dropped_seqs(entry))
        entries = [e for e in entries if e.get("kind") != "narrative"]
        for item in dropped:
            if item.priority == NARRATIVE:
                narrative_seqs.update(item.seqs)
            elif item.priority in (REQ_UNIT, UNIT) and item.fact is None:
                for seq in item.seqs:
                    for unit in item.units:
                        units_by_seq.setdefault(seq, {})[unit] = None
            else:
                entries += [
                    {
                        "seq": seq,
                        "kind": _MANIFEST_KIND[item.priority],
                        "text": self._manifest_text(item) if level == 0 else "",
                        "units": list(item.units),
                    }
                    for seq in item.seqs
                ]
        for seq, units in units_by_seq.items():
            existing = next(
                (e for e in entries if e["kind"] == "unit" and e["seq"] == seq and not e["text"]), None
            )
            if existing is None:
                entries.append({"seq": seq, "kind": "unit", "text": "", "units": list(units)})
            else:
                existing["units"] = list(dict.fromkeys([*existing["units"], *units]))
        entries += [
            {"seq": first, "kind": "narrative", "text": range_text(first, last), "units": []}
            for first, last in _ranges(sorted(narrative_seqs))
        ]
        if level >= 1:  # sentences are named by seq only (the context read retrieves them)
            for entry in entries:
                if entry["kind"] not in ("unit", "narrative") and not entry["text"].startswith("seqs "):
                    entry["text"] = ""
        if level == 2:
            entries = _coarsen(entries)
        entries.sort(key=lambda e: (e["seq"], e["kind"]))
        return entries


def _ranges(seqs: list[int]) -> list[tuple[int, int]]:
    """Consecutive runs of ``seqs`` (sorted) as (first, last)."""
    out: list[tuple[int, int]] = []
    for seq in seqs:
        if out and seq <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], seq))
        else:
            out.append((seq, seq))
    return out


def _coarsen(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Last resort when even the manifest overflows: one range entry per kind (units counted)."""
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for entry in entries:
        by_kind.setdefault(entry["kind"], []).append(entry)
        if entry["units"] and entry["kind"] != "unit":  # a dropped sentence's units: declared as units too
            by_kind.setdefault("unit", []).append({**entry, "kind": "unit"})
    out = []
    for kind, group in by_kind.items():
        seqs = [s for e in group for s in dropped_seqs(e)]
        n_units = len({u for e in group for u in e["units"]})
        # A census is a placeholder until ``sealed`` computes it (narrative is not owed: no census).
        if kind == "unit":
            note = f"{n_units} units not listed (census {_UNSEALED})"
        elif kind in verdicts.SENTENCE_DROP_KINDS:
            note = f"{len(group)} sentences not listed (census {_UNSEALED})"
        else:
            note = f"{len(group)} entries"
        out.append(
            {"seq": min(seqs), "kind": kind, "text": range_text(min(seqs), max(seqs), note), "units": []}
        )
    return out


_UNSEALED = "00000000"


def sealed(content: dict[str, Any], evidence: verdicts.Evidence) -> dict[str, Any]:
    """``content`` with every aggregated unit entry stating the census of the units it declares."""
    notes = verdicts.census_notes(evidence, content)
    if not notes:
        return content
    entries = [dict(e) for e in content[DROPPED_FIELD]]
    for pos, note in notes.items():
        seqs = dropped_seqs(entries[pos])
        entries[pos]["text"] = range_text(seqs[0], seqs[-1], note)
    return {**content, DROPPED_FIELD: entries}
