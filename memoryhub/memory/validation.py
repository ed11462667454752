"""The summary validator (pure Python, no Django): versioned rules over bytes and source events.

``validate_summary`` runs every check and never stops early, so a rejection lists every reason.
Two rule sets exist and both stay runnable so a recorded outcome can be reproduced:

* ``rules-5`` — structured facts only (integrity, schema, coverage, tool pairs, mandatory facts,
  groundedness, open issues, budget, secrets). The seed incident's S3 passed it although the 401
  requirement was gone: that requirement lived in free text.
* ``rules-6`` — rules-5 plus ``salient_retention`` (identifiers, paths, URLs, numbers, status
  codes and commands of the covered events, kept per class above the policy's floors),
  ``mandatory_events`` (requirement/approval/decision events not superseded later) and
  ``fabricated`` (salient tokens that appear in no covered event or prior summary). See
  ``memoryhub.core.quality``.
* ``rules-7`` — rules-5 plus the verdicts of ``memoryhub.core.verdicts`` over the one extractor
  ``memoryhub.core.salient`` (any text, any language): ``unit_retention`` (every salient unit kept
  or declared in the ``dropped`` manifest, per kind above the policy's floors), ``obligations``
  (must/never/decided/approved/open sentences kept with their units and polarity),
  ``fabricated`` (units no covered event or prior summary states), ``contradictions`` (a value
  that replaces the source's in the same sentence role, a flipped polarity or decision) and
  ``declared_drops`` (a warning that lists what the summary says it left out, by seq). It is the
  policy default until rules-8.
* ``rules-8`` — rules-7, except that an aggregated ``dropped`` entry ("seqs 3-196: 51 units not
  listed (census 1f0c9a2e)") declares the units of its seqs only with an exact census: their
  number and a digest of their values. Under rules-7 such a range declared every unit of its seqs,
  so a unit lost beside them read as declared. The policy default for new compactions.

The Django layer stores the outcome as a ValidationRecord and moves the summary to VALIDATED or
REJECTED; a reviewer may later waive named failed checks with ``apply_waivers``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from memoryhub.compaction.secret_scan import find_secrets
from memoryhub.compaction.tokens import DEFAULT_ENCODING, count_json_tokens, count_tokens
from memoryhub.compaction.types import SUMMARY_SCHEMA, SourceEvent
from memoryhub.core import quality as q
from memoryhub.core import verdicts as v
from memoryhub.core.canonical import canonical_bytes, sha256_hex
from memoryhub.core.checks import FAILED, NON_WAIVABLE, WAIVED, check_state
from memoryhub.core.facts import is_mandatory
from memoryhub.core.opaque import TEXT_CHECKS, unreadable
from memoryhub.core.quality import RULES_5, RULES_6, RULES_7, RULES_8, QualitySettings, SourceIndex

# ``validate_summary``'s default when no version is asked for (recorded outcomes reproduce);
# new compactions take the policy's ``quality.validator`` (rules-6 unless set otherwise).
VALIDATOR_VERSION = RULES_5
LATEST_VALIDATOR = RULES_8
VALIDATOR_VERSIONS = (RULES_5, RULES_6, RULES_7, RULES_8)
SUPPORTED_SCHEMAS = frozenset({SUMMARY_SCHEMA})

CHECK_NAMES = (
    "integrity",
    "schema_version",
    "coverage_contiguity",
    "tool_call_pairs",
    "mandatory_facts",
    "groundedness",
    "open_issues",
    "token_budget",
    "secret_scan",
    "content_readable",
)
QUALITY_CHECK_NAMES = ("salient_retention", "mandatory_events", "fabricated")
VERDICT_CHECK_NAMES = ("unit_retention", "obligations", "fabricated", "contradictions", "declared_drops")
CHECKS_BY_VERSION: dict[str, tuple[str, ...]] = {
    RULES_5: CHECK_NAMES,
    RULES_6: CHECK_NAMES + QUALITY_CHECK_NAMES,
    RULES_7: CHECK_NAMES + VERDICT_CHECK_NAMES,
    RULES_8: CHECK_NAMES + VERDICT_CHECK_NAMES,
}
# Content checks that read the text; none of them can run on an opaque (provider-encrypted) summary.
CONTENT_CHECKS = frozenset(TEXT_CHECKS) | frozenset(QUALITY_CHECK_NAMES) | frozenset(VERDICT_CHECK_NAMES)

_OPEN = frozenset({"open", "pending"})
_OPEN_ITEM_KINDS = frozenset({"issue", "approval"})
_WS = re.compile(r"\s+")
_MAX_LISTED = 10  # keep details readable: list at most this many offenders per problem


class WaiverError(ValueError):
    """A waiver naming an unknown, non-waivable or non-failed check."""


@dataclass(frozen=True)
class ValidationOutcome:
    """Result of one validator run: per-check results plus the summary numbers."""

    validator_version: str
    checks: list[dict[str, Any]]
    mandatory_coverage: float
    passed: bool
    reasons: list[str]
    waived_checks: list[str] = field(default_factory=list)
    # rules-6: retention per class and fabricated tokens (``QualityReport.to_dict()``).
    quality: dict[str, Any] | None = None

    def check(self, name: str) -> dict[str, Any]:
        return next(c for c in self.checks if c["name"] == name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "validator_version": self.validator_version,
            "checks": self.checks,
            "mandatory_coverage": self.mandatory_coverage,
            "passed": self.passed,
            "reasons": self.reasons,
            "waived_checks": self.waived_checks,
        }


def validate_summary(
    content_bytes: bytes,
    claimed_hash: str,
    covers_from_seq: int,
    covers_to_seq: int,
    events: list[SourceEvent],
    previous_covers_to_seq: int | None,
    token_budget: int | None,
    head_seq: int,
    *,
    encoding: str = DEFAULT_ENCODING,
    version: str = VALIDATOR_VERSION,
    quality: Any = None,
    previous_content: Any = None,
    source_index: SourceIndex | None = None,
    evidence: v.Evidence | None = None,
) -> ValidationOutcome:
    """Run every rule of ``version`` on a candidate's stored bytes.

    ``events`` are the covered source events (seqs ``covers_from_seq..covers_to_seq``, purged
    ones included with ``purged=True``); events outside that range are ignored. rules-6 also
    reads ``quality`` (the policy's floors, ``memoryhub.core.quality.default_quality()`` shape),
    ``previous_content`` (the prior summary: its tokens are not fabricated) and may reuse a
    ``source_index`` already built over exactly these covered events.
    """
    if version not in CHECKS_BY_VERSION:
        raise ValueError(f"unknown validator {version!r}; known: {', '.join(CHECKS_BY_VERSION)}")
    content, parse_error = _parse(content_bytes)
    covered = sorted((e for e in events if covers_from_seq <= e.seq <= covers_to_seq), key=lambda e: e.seq)
    facts = _facts(content)
    latest = _latest_source_facts(covered)

    checks: list[dict[str, Any]] = []

    def add(name: str, problems: list[str], ok_detail: str) -> None:
        checks.append({"name": name, "passed": not problems, "detail": "; ".join(problems) or ok_detail})

    add("integrity", _integrity(content_bytes, claimed_hash, content, parse_error), "hash matches")
    add("schema_version", _schema(content, parse_error), f"{SUMMARY_SCHEMA}, well-formed")
    add(
        "coverage_contiguity",
        _contiguity(covers_from_seq, covers_to_seq, covered, previous_covers_to_seq, head_seq),
        f"covers {covers_from_seq}..{covers_to_seq} of head {head_seq}, no gap",
    )
    add("tool_call_pairs", _tool_pairs(covered), "every tool call has its result in coverage")
    coverage, mandatory_problems, mandatory_total = _mandatory(facts, latest)
    add(
        "mandatory_facts",
        mandatory_problems,
        f"all {mandatory_total} mandatory facts preserved",
    )
    add(
        "groundedness",
        _groundedness(facts, covered, covers_from_seq, covers_to_seq, latest),
        f"all {len(facts)} facts cite supporting events inside the coverage",
    )
    add("open_issues", _open_issues(content, facts, latest), "open issues and approvals kept")
    add("token_budget", *_budget(content, content_bytes, token_budget, encoding))
    add("secret_scan", _secrets(content, content_bytes), "no credentials found")

    report = None
    quality_dict: dict[str, Any] | None = None
    if version == RULES_6:
        settings = QualitySettings.of(quality)
        index = source_index or q.build_index(covered, previous_content)
        report = q.measure(index, content if isinstance(content, dict) else {})
        kept = {
            name: f"{r.kept}/{r.total}"
            for name, r in report.retention.items()
            if r.total and name != "mandatory_events"
        }
        add(
            "salient_retention",
            q.retention_problems(report, settings),
            "kept " + (", ".join(f"{k} {v}" for k, v in kept.items()) or "nothing to keep"),
        )
        events_kept = report.retention["mandatory_events"]
        add(
            "mandatory_events",
            q.mandatory_problems(report, settings),
            f"{events_kept.kept}/{events_kept.total} requirement/approval/decision events kept",
        )
        add(
            "fabricated",
            q.fabricated_problems(report, settings),
            f"{len(report.fabricated)} fabricated tokens",
        )
        # The numbers behind the verdict travel with the record (summary page retention table).
        numbers = report.to_dict()
        checks[-3]["retention"] = numbers["retention"]
        checks[-1]["fabricated"] = numbers["fabricated"]

    if version in (RULES_7, RULES_8):
        verdict = v.judge(
            evidence or v.build_evidence(covered, previous_content),
            content if isinstance(content, dict) else {},
            census=version == RULES_8,
        )
        report_7 = verdict.to_dict()
        settings = QualitySettings.of(quality)
        for name, problems, ok_detail in v.all_checks(
            verdict, content, settings.floors, settings.max_fabricated
        ):
            add(name, problems, ok_detail)
        checks[-5]["retention"] = report_7["units"]
        checks[-4]["obligations"] = report_7["obligations"]
        checks[-4]["totals"] = {
            "total": report_7["obligations_total"],
            "kept": report_7["obligations_kept"],
            "declared": sum(1 for o in verdict.obligations if o.state == "declared"),
        }
        checks[-3]["fabricated"] = report_7["fabricated"]
        checks[-2]["contradictions"] = report_7["contradictions"]
        declared = v.declared_list(verdict, content)
        checks[-1]["dropped"] = declared
        if declared and checks[-1]["passed"]:
            checks[-1]["warning"] = True
        quality_dict = report_7

    unread = unreadable(content)
    add("content_readable", [unread] if unread else [], "content is readable text")
    if unread:
        # Opaque content: report only what could be checked, and say the rest is unverifiable.
        checks = [c for c in checks if c["name"] not in CONTENT_CHECKS]
        coverage = 0.0
    if report is not None:
        quality_dict = report.to_dict()
    return judged(version, checks, coverage, quality=quality_dict)


def judged(
    version: str,
    checks: list[dict[str, Any]],
    mandatory_coverage: float,
    *,
    waived: Collection[str] = (),
    quality: dict[str, Any] | None = None,
) -> ValidationOutcome:
    """The outcome of ``checks``: the reasons are exactly the FAILED checks; it passes without any."""
    reasons = [f"{c['name']}: {c['detail']}" for c in checks if check_state(c, waived) == FAILED]
    return ValidationOutcome(
        validator_version=version,
        checks=checks,
        mandatory_coverage=mandatory_coverage,
        passed=not reasons,
        reasons=reasons,
        waived_checks=sorted(waived),
        quality=quality,
    )


def apply_waivers(outcome: ValidationOutcome, waived: Iterable[str]) -> ValidationOutcome:
    """``outcome`` with the named failed checks waived by a reviewer.

    Waived checks keep ``passed: False`` and gain ``waived: True``; the outcome passes when no
    check is FAILED any more. Raises ``WaiverError`` for unknown names, ``integrity``, or a
    check that is not FAILED.
    """
    names = list(dict.fromkeys(waived))
    states = {c["name"]: check_state(c, outcome.waived_checks) for c in outcome.checks}
    known = CHECKS_BY_VERSION.get(outcome.validator_version, CHECK_NAMES)
    for name in names:
        if name not in known:
            raise WaiverError(f"unknown check {name!r}; checks are: {', '.join(known)}")
        if name in NON_WAIVABLE:
            raise WaiverError(f"check {name!r} cannot be waived")
        if states.get(name) == WAIVED:
            raise WaiverError(f"check {name!r} is already waived")
        if states.get(name) != FAILED:
            raise WaiverError(f"check {name!r} did not fail; nothing to waive")
    all_waived = set(outcome.waived_checks) | set(names)
    checks = [dict(c, waived=True) if c["name"] in all_waived else dict(c) for c in outcome.checks]
    return replace(
        judged(outcome.validator_version, checks, outcome.mandatory_coverage, waived=all_waived),
        quality=outcome.quality,
    )


# -- parsing -------------------------------------------------------------------------------


def _parse(content_bytes: bytes) -> tuple[Any, str | None]:
    try:
        return json.loads(content_bytes.decode("utf-8")), None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return None, f"content is not UTF-8 JSON: {exc}"


def _facts(content: Any) -> list[dict[str, Any]]:
    """The well-formed-enough facts (a dict with a key) so later checks can still run."""
    if not isinstance(content, dict) or not isinstance(content.get("facts"), list):
        return []
    return [f for f in content["facts"] if isinstance(f, dict) and isinstance(f.get("key"), str)]


def _open_item_keys(content: Any) -> list[str]:
    items = content.get("open_items", []) if isinstance(content, dict) else []
    keys = []
    for item in items if isinstance(items, list) else []:
        if isinstance(item, str):
            keys.append(item)
        elif isinstance(item, dict) and isinstance(item.get("key"), str):
            keys.append(item["key"])
    return keys


def _latest_source_facts(covered: list[SourceEvent]) -> dict[str, tuple[dict[str, Any], int]]:
    """key → (latest fact stating it, its seq) over the covered, non-purged events."""
    latest: dict[str, tuple[dict[str, Any], int]] = {}
    for event in covered:
        if event.purged:
            continue
        for fact in event.facts:
            if fact.get("key"):
                latest[fact["key"]] = (fact, event.seq)
    return latest


def _state(fact: dict[str, Any]) -> str:
    return fact.get("state") or "info"


def _compatible(summary_state: str, source_state: str) -> bool:
    return summary_state == source_state or (summary_state in _OPEN and source_state in _OPEN)


def _listed(items: list[str]) -> str:
    more = len(items) - _MAX_LISTED
    return ", ".join(items[:_MAX_LISTED]) + (f" and {more} more" if more > 0 else "")


def _norm(text: str) -> str:
    return _WS.sub(" ", text).strip().casefold()


# -- checks (each returns its problems; empty means passed) ---------------------------------


def _integrity(content_bytes: bytes, claimed: str, content: Any, parse_error: str | None) -> list[str]:
    problems = []
    actual = sha256_hex(content_bytes)
    if actual != claimed:
        problems.append(f"hash mismatch: claimed {claimed}, bytes hash to {actual}")
    if parse_error:
        problems.append(parse_error)
    elif canonical_bytes(content) != content_bytes:
        problems.append("bytes are not canonical JSON (sorted keys, no whitespace, UTF-8)")
    return problems


def _schema(content: Any, parse_error: str | None) -> list[str]:
    if parse_error:
        return [parse_error]
    if not isinstance(content, dict):
        return [f"content must be a JSON object, got {type(content).__name__}"]
    problems = []
    # Absent means v1: the original submit shape predates the explicit field.
    schema = content.get("schema", SUMMARY_SCHEMA)
    if schema not in SUPPORTED_SCHEMAS:
        problems.append(
            f"unknown schema {schema!r}; this validator understands {', '.join(SUPPORTED_SCHEMAS)}"
        )
    if not isinstance(content.get("narrative"), str):
        problems.append("'narrative' must be a string")
    facts = content.get("facts")
    if not isinstance(facts, list):
        problems.append("'facts' must be a list")
        facts = []
    seen: set[str] = set()
    for i, fact in enumerate(facts):
        if not isinstance(fact, dict):
            problems.append(f"facts[{i}] must be an object")
            continue
        for name in ("key", "kind", "text"):
            if not isinstance(fact.get(name), str) or not fact.get(name) and name != "text":
                problems.append(f"facts[{i}].{name} must be a non-empty string")
        if "state" in fact and not isinstance(fact["state"], str):
            problems.append(f"facts[{i}].state must be a string")
        seqs = fact.get("source_seqs")
        if not isinstance(seqs, list) or not all(
            isinstance(s, int) and not isinstance(s, bool) for s in seqs
        ):
            problems.append(f"facts[{i}].source_seqs must be a list of integers")
        key = fact.get("key")
        if isinstance(key, str):
            if key in seen:
                problems.append(f"fact key {key!r} appears twice")
            seen.add(key)
    if "open_items" in content and not isinstance(content["open_items"], list):
        problems.append("'open_items' must be a list")
    return problems


def _contiguity(
    start: int, end: int, covered: list[SourceEvent], previous_to: int | None, head: int
) -> list[str]:
    problems = []
    if start < 1 or end < start:
        return [f"invalid range {start}..{end}"]
    if end > head:
        problems.append(f"covers_to_seq {end} is beyond the head revision {head}")
    if start != 1:
        if previous_to is None:
            problems.append(f"covers_from_seq {start} must be 1: there is no previous summary")
        elif start != previous_to + 1:
            problems.append(
                f"covers_from_seq {start} leaves a gap or overlap: must be 1 (full re-summary) "
                f"or {previous_to + 1} (previous watermark {previous_to} + 1)"
            )
    present = {e.seq for e in covered}
    missing = [str(s) for s in range(start, min(end, head) + 1) if s not in present]
    if missing:
        problems.append(f"source events missing from the coverage: seqs {_listed(missing)}")
    return problems


def _tool_pairs(covered: list[SourceEvent]) -> list[str]:
    calls: dict[str, int] = {}
    for event in covered:
        if event.kind == "tool_call" and event.tool_call_id:
            calls.setdefault(event.tool_call_id, event.seq)
        elif event.kind == "tool_result" and event.tool_call_id:
            calls.pop(event.tool_call_id, None)
    return (
        [
            f"tool call {_listed([f'{cid} (seq {seq})' for cid, seq in calls.items()])} "
            "has no result inside the coverage"
        ]
        if calls
        else []
    )


def _mandatory(
    facts: list[dict[str, Any]], latest: dict[str, tuple[dict[str, Any], int]]
) -> tuple[float, list[str], int]:
    by_key = {f["key"]: f for f in facts}
    # A key is mandatory when its latest covered statement is (an approval later approved is not).
    mandatory = {k: v for k, v in latest.items() if is_mandatory(v[0])}
    missing, mismatched = [], []
    for key, (source, seq) in mandatory.items():
        kept = by_key.get(key)
        if kept is None:
            missing.append(f"{key} ({source.get('kind')}, {_state(source)}, seq {seq})")
        elif not _compatible(_state(kept), _state(source)):
            mismatched.append(f"{key} is {_state(kept)!r} in the summary but {_state(source)!r} at seq {seq}")
    problems = []
    if missing:
        problems.append(f"missing mandatory facts: {_listed(missing)}")
    if mismatched:
        problems.append(f"incompatible state: {_listed(mismatched)}")
    total = len(mandatory)
    kept_count = total - len(missing) - len(mismatched)
    return (kept_count / total if total else 1.0), problems, total


def _groundedness(
    facts: list[dict[str, Any]],
    covered: list[SourceEvent],
    start: int,
    end: int,
    latest: dict[str, tuple[dict[str, Any], int]],
) -> list[str]:
    by_seq = {e.seq: e for e in covered}
    problems = []
    for fact in facts:
        key = fact["key"]
        seqs = fact.get("source_seqs")
        if not isinstance(seqs, list) or not seqs:
            problems.append(f"{key} cites no source event")
            continue
        text = _norm(str(fact.get("text", "")))
        citation_problems = []
        supports_text = False
        for seq in seqs:
            event = by_seq.get(seq) if isinstance(seq, int) else None
            if event is None:
                inside = isinstance(seq, int) and start <= seq <= end
                citation_problems.append(
                    f"{key} cites seq {seq}, "
                    + ("missing from the covered events" if inside else f"outside {start}..{end}")
                )
                continue
            if event.purged:
                supports_text = True  # legitimately deleted evidence: cannot be re-checked
                continue
            stated = [f for f in event.facts if f.get("key") == key]
            in_content = bool(text) and text in _norm(event.content)
            if not stated and not in_content:
                citation_problems.append(
                    f"{key} cites seq {seq}, which neither states it nor contains its text"
                )
            if in_content or any(_norm(str(f.get("text", ""))) == text for f in stated):
                supports_text = True
        problems += citation_problems
        if not supports_text and not citation_problems:
            problems.append(f"{key}: no cited event supports its text {fact.get('text')!r}")
        if key in latest:
            source, seq = latest[key]
            if not _compatible(_state(fact), _state(source)):
                problems.append(
                    f"{key} is {_state(fact)!r} but the latest source (seq {seq}) says {_state(source)!r}"
                )
    if len(problems) > _MAX_LISTED:
        problems = problems[:_MAX_LISTED] + [f"and {len(problems) - _MAX_LISTED} more"]
    return problems


def _open_issues(
    content: Any, facts: list[dict[str, Any]], latest: dict[str, tuple[dict[str, Any], int]]
) -> list[str]:
    by_key = {f["key"]: f for f in facts}
    items = set(_open_item_keys(content))
    required = [
        (key, seq)
        for key, (source, seq) in latest.items()
        if source.get("kind") in _OPEN_ITEM_KINDS and _state(source) in _OPEN
    ]
    not_in_facts = [
        f"{k} (seq {s})" for k, s in required if by_key.get(k) is None or _state(by_key[k]) not in _OPEN
    ]
    not_in_items = [f"{k} (seq {s})" for k, s in required if k not in items]
    orphans = sorted(k for k in items if k not in by_key)
    closed = sorted(k for k in items if k in by_key and _state(by_key[k]) not in _OPEN)
    settled = sorted(
        f"{k} ({_state(latest[k][0])} at seq {latest[k][1]})"
        for k in items
        if k in latest and _state(latest[k][0]) not in _OPEN
    )
    problems = []
    if not_in_facts:
        problems.append(f"open in sources but not open in facts: {_listed(not_in_facts)}")
    if not_in_items:
        problems.append(f"missing from open_items: {_listed(not_in_items)}")
    if orphans:
        problems.append(f"open_items without a fact: {_listed(orphans)}")
    if closed:
        problems.append(f"open_items whose fact is no longer open: {_listed(closed)}")
    if settled:
        problems.append(f"open_items already settled in the sources: {_listed(settled)}")
    return problems


def _budget(content: Any, content_bytes: bytes, budget: int | None, encoding: str) -> tuple[list[str], str]:
    if content is not None:
        tokens = count_json_tokens(content, encoding)
    else:
        tokens = count_tokens(content_bytes.decode("utf-8", "replace"), encoding)
    if budget is None:
        return [], f"{tokens} tokens; no budget set"
    if tokens > budget:
        return [f"content is {tokens} tokens, over the budget of {budget} by {tokens - budget}"], ""
    return [], f"{tokens} of {budget} tokens"


def _strings(value: Any, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _strings(item, f"{path}[{i}]")


def _secrets(content: Any, content_bytes: bytes) -> list[str]:
    if content is None:
        pairs = [("content", content_bytes.decode("utf-8", "replace"))]
    else:
        pairs = list(_strings(content, ""))
    found = [
        f"{match.pattern} in {path} ({match.masked})" for path, text in pairs for match in find_secrets(text)
    ]
    return [f"credentials found: {_listed(found)}"] if found else []
