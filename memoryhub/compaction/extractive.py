"""Built-in deterministic compactors (no model, same input → same bytes): ``extractive-v1`` and ``extractive-v2``."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

from memoryhub.compaction.base import Compactor, register
from memoryhub.compaction.extract import (
    carried_content,
    collect_refs,
    events_to_cover,
    first_sentence,
    first_sentence_tokens,
    json_string_tokens,
    salient_tokens,
)
from memoryhub.compaction.tokens import DEFAULT_ENCODING, count_json_tokens, count_tokens
from memoryhub.compaction.types import (
    CompactionResult,
    PreviousSummary,
    SourceEvent,
)
from memoryhub.core.quality import extract

# "#12 test-generator/tool_call: text" — agent and kind let later runs keep one line per agent.
_LINE = re.compile(r"^#(?P<seq>\d+) (?P<agent>[^/\s]*)/(?P<kind>[a-z_]+): ")
_OMITTED = re.compile(r"^\[(?P<n>\d+) earlier narrative entr(?:y|ies) omitted\]$")


@dataclass
class _Line:
    text: str
    agent: str | None  # None for lines we cannot attribute (e.g. prose from an LLM summary)
    order: int  # position in time: higher is newer
    cost: int  # tokens inside the JSON string, plus the joining newline


@functools.lru_cache(maxsize=1024)
def _prefix_tokens(who: str, kind: str, encoding: str) -> int:
    """Tokens of a line's "#<seq> <agent>/<kind>:" prefix, without the seq digits."""
    return count_tokens(f"# {who}/{kind}:", encoding)


def _omitted_marker(count: int) -> str:
    return f"[{count} earlier narrative entr{'y' if count == 1 else 'ies'} omitted]"


class TokenBudgetedCompactor(Compactor):
    """A compactor whose summary must fit ``token_budget`` tokens of ``encoding`` (lines capped at
    ``line_tokens``); ``model`` is recorded, not called (the extractive compactors call none)."""

    def __init__(
        self,
        token_budget: int | None = 2000,
        encoding: str = DEFAULT_ENCODING,
        line_tokens: int = 48,
        model: str = "none",
    ) -> None:
        self.token_budget = token_budget
        self.encoding = encoding
        self.line_tokens = line_tokens
        self.model = model

    def _result(
        self,
        previous: PreviousSummary | None,
        covered: list[SourceEvent],
        content: dict[str, Any],
        token_count: int,
    ) -> CompactionResult:
        """The candidate: ``content`` covering the previous summary's span and ``covered``."""
        tokens_in = sum(e.token_count or count_tokens(e.content, self.encoding) for e in covered)
        if previous:
            tokens_in += previous.token_count or count_json_tokens(previous.content, self.encoding)
        return CompactionResult(
            content=content,
            covers_from_seq=previous.covers_from_seq if previous else covered[0].seq,
            covers_to_seq=covered[-1].seq,
            source_refs=collect_refs(previous, covered),
            model=self.model,
            tokens_in=tokens_in,
            tokens_out=token_count,
            token_count=token_count,
            excluded_categories=["purged_content"] if any(e.purged for e in covered) else [],
        )


@register
class ExtractiveCompactor(TokenBudgetedCompactor):
    """Keeps every structured fact verbatim; free text becomes one first sentence per event.

    Builds on the previous summary (its facts and narrative come first). When the content would
    exceed ``token_budget`` the oldest narrative lines go first, but each agent keeps its newest
    line as long as that fits. Facts are never dropped: if they alone exceed the budget the
    candidate is still produced and the validator's token-budget check rejects it.
    """

    name = "extractive-v1"
    version = "1.0.0"
    algorithm_version = "extractive/first-sentence-recency-1"
    prompt_template_version = None

    def compact(self, previous: PreviousSummary | None, events: list[SourceEvent]) -> CompactionResult:
        covered = events_to_cover(previous, events)
        prev_content, content = carried_content(previous, covered)
        carried, omitted = self._previous_lines(prev_content.get("narrative", ""))
        content["narrative"], token_count = self._fit(content, carried + self._event_lines(covered), omitted)
        return self._result(previous, covered, content, token_count)

    # -- narrative -------------------------------------------------------------------------

    def _line(self, text: str, agent: str | None, order: int) -> _Line:
        return _Line(text, agent, order, json_string_tokens(text, self.encoding) + 1)

    def _previous_lines(self, narrative: str) -> tuple[list[_Line], int]:
        """The previous narrative's lines and how many entries it had already omitted."""
        omitted = 0
        lines = []
        for raw in narrative.splitlines():
            raw = raw.strip()
            if not raw:
                continue
            marker = _OMITTED.match(raw)
            if marker:
                omitted += int(marker["n"])
                continue
            match = _LINE.match(raw)
            lines.append(self._line(raw, match["agent"] if match else None, 0))
        return lines, omitted

    def _event_lines(self, events: list[SourceEvent]) -> list[_Line]:
        lines = []
        for event in events:
            if event.purged:
                continue
            sentence, tokens = first_sentence_tokens(event.content, self.line_tokens, self.encoding)
            if not sentence:
                continue
            who = (event.agent or event.role or "").replace("/", "-").replace(" ", "-")
            text = f"#{event.seq} {who}/{event.kind}: {sentence}"
            # An estimate from one encoding pass (prefix, digits, JSON escapes, newline); _fit
            # confirms the total exactly.
            escapes = sum(sentence.count(ch) for ch in '"\\')
            cost = (
                _prefix_tokens(who, event.kind, self.encoding)
                + len(str(event.seq)) // 3
                + 1
                + tokens
                + escapes
                + 2
            )
            lines.append(_Line(text, who, 0, cost))
        return lines

    def _fit(self, content: dict[str, Any], lines: list[_Line], carried_omitted: int) -> tuple[str, int]:
        """The narrative (as many of ``lines``, oldest first, as fit beside the facts) and the
        exact token count of the whole content with it."""
        for order, line in enumerate(lines):
            line.order = order  # previous narrative first, so its lines count as oldest
        if self.token_budget is None:
            narrative = self._render(lines, carried_omitted)
            return narrative, count_json_tokens(dict(content, narrative=narrative), self.encoding)
        available = self.token_budget - count_json_tokens(content, self.encoding)
        available -= json_string_tokens(_omitted_marker(len(lines) + 999), self.encoding) + 1

        # Keep-priority: each agent's newest line, then everything else newest first.
        newest_per_agent: dict[str, _Line] = {}
        for line in lines:
            if line.agent is not None:
                newest_per_agent[line.agent] = line
        kept: set[int] = set()
        used = 0
        for line in sorted(newest_per_agent.values(), key=lambda ln: -ln.order):
            if used + line.cost <= available:
                kept.add(line.order)
                used += line.cost
        for line in sorted(lines, key=lambda ln: -ln.order):
            if line.order in kept:
                continue
            if used + line.cost > available:
                break  # older free text goes first; stop at the first line that does not fit
            kept.add(line.order)
            used += line.cost

        chosen = [ln for ln in lines if ln.order in kept]
        omitted = carried_omitted + len(lines) - len(chosen)
        narrative = self._render(chosen, omitted)
        # Per-line counts are estimates (tokens merge across boundaries): confirm exactly.
        total = count_json_tokens(dict(content, narrative=narrative), self.encoding)
        while chosen and total > self.token_budget:
            chosen.remove(min(chosen, key=lambda ln: ln.order))
            omitted += 1
            narrative = self._render(chosen, omitted)
            total = count_json_tokens(dict(content, narrative=narrative), self.encoding)
        return narrative, total

    @staticmethod
    def _render(lines: list[_Line], omitted: int) -> str:
        texts = [ln.text for ln in lines]
        if omitted:
            texts.insert(0, _omitted_marker(omitted))
        return "\n".join(texts)


@register
class ExtractiveCompactorV2(ExtractiveCompactor):
    """``extractive-v2``: extractive-v1 plus what audits show summaries lose.

    * ``salient``: every identifier, path, URL, number with unit, status code and quoted command
      of the covered events (``memoryhub.core.quality.extract``) that the facts do not already state,
      carried forward from the previous summary so nothing decays across versions.
    * Requirement / approval / decision events with neither structured facts nor salient tokens
      keep their line: the narrative never drops them for budget.
    * Sentences are cut at a word boundary, so a capped line never produces a half identifier.

    Priority under the budget: facts, mandatory lines, salient tokens, then narrative lines as in
    v1 (each agent's newest, then newest first). If facts, mandatory lines and salient tokens
    alone exceed the budget the candidate is still produced and the validator rejects it.
    """

    name = "extractive-v2"
    version = "2.0.0"
    algorithm_version = "extractive/salient-index-2"

    def compact(self, previous: PreviousSummary | None, events: list[SourceEvent]) -> CompactionResult:
        covered = events_to_cover(previous, events)
        prev_content, content = carried_content(previous, covered)
        content["salient"] = salient_tokens(prev_content.get("salient"), covered, content["facts"])
        carried, omitted = self._previous_lines(prev_content.get("narrative", ""))
        lines = carried + self._event_lines(covered)
        # A requirement/approval/decision event needs its own line only when neither its facts
        # nor its salient tokens (kept in ``salient``) carry it: a plain-words requirement.
        stated = {seq for f in content["facts"] for seq in f.get("source_seqs", [])}
        pinned = [
            ln
            for ln in lines
            if (m := _PINNED.match(ln.text))
            and int(m["seq"]) not in stated
            and not any(extract(ln.text[m.end() :]).values())
        ]
        pinned_ids = {id(ln) for ln in pinned}
        others = [ln for ln in lines if id(ln) not in pinned_ids]
        content["narrative"], token_count = self._fit_pinned(content, pinned, others, omitted)
        return self._result(previous, covered, content, token_count)

    def _event_lines(self, events: list[SourceEvent]) -> list[_Line]:
        lines = []
        for event in events:
            if event.purged:
                continue
            sentence = first_sentence(event.content, self.line_tokens, self.encoding)
            if sentence.endswith("…"):  # cut at a word boundary: no half identifier
                head = sentence[:-1].rsplit(" ", 1)[0] if " " in sentence else sentence[:-1]
                sentence = head.rstrip() + " …"
            if not sentence:
                continue
            who = (event.agent or event.role or "").replace("/", "-").replace(" ", "-")
            lines.append(self._line(f"#{event.seq} {who}/{event.kind}: {sentence}", who, 0))
        return lines

    def _fit_pinned(
        self, content: dict[str, Any], pinned: list[_Line], others: list[_Line], omitted: int
    ) -> tuple[str, int]:
        """Pinned lines (mandatory events) always stay; the rest fit as in v1 around them."""
        if not pinned:
            return self._fit(content, others, omitted)
        pinned_text = "\n".join(ln.text for ln in pinned)
        budget = self.token_budget
        if budget is not None:
            # The pinned block is part of the fixed cost, like facts.
            self.token_budget = max(0, budget - json_string_tokens(pinned_text, self.encoding) - 1)
        try:
            rest, _ = self._fit(content, others, omitted)
        finally:
            self.token_budget = budget
        narrative = pinned_text + ("\n" + rest if rest else "")
        return narrative, count_json_tokens(dict(content, narrative=narrative), self.encoding)


# "#7 agent/requirement:" — lines of mandatory event kinds are pinned in extractive-v2.
_PINNED = re.compile(r"^#(?P<seq>\d+) [^/\s]*/(?:requirement|approval|decision): ")
