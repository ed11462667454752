"""Compaction quality beyond structured facts (pure Python, no Django).

Audits of real agent compactions show summaries keep most *decisions* but drop almost every file
path, command and number, and invent API names. This module measures exactly that:

* ``extract(text)`` finds the **salient tokens** of a text per class: identifiers (ticket and
  error ids, API names, ``snake_case``/``CamelCase`` symbols, header names), file paths, URLs,
  numbers with units, HTTP status codes, and quoted commands.
* ``SourceIndex`` holds the salient tokens of a summary's covered events (with the first seq that
  stated each), the words a summary may legitimately use, and the **mandatory events**: every
  event of kind requirement / approval / decision that no later event supersedes.
* ``measure(index, content)`` reports retention per class, the mandatory events a summary lost
  and the ``fabricated`` tokens it states that appear in no covered event (or prior summary).
* ``QualitySettings`` are the per-class floors and the fabricated threshold a policy sets;
  ``problems()`` turns a report into the validator's failure reasons.

The validator (rules-6), the summary/workflow pages (retention table, decay across versions) and
``manage.py bench quality`` all use these functions, so each number has one definition.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from memoryhub.core import salient
from memoryhub.core.opaque import unreadable

if TYPE_CHECKING:  # types only: the compaction package imports this module at run time
    from memoryhub.compaction.types import SourceEvent

# -- salient token classes ------------------------------------------------------------------------

IDENTIFIERS = "identifiers"
PATHS = "paths"
URLS = "urls"
NUMBERS = "numbers"
STATUS_CODES = "status_codes"
COMMANDS = "commands"
TOKEN_CLASSES: tuple[str, ...] = (IDENTIFIERS, PATHS, URLS, NUMBERS, STATUS_CODES, COMMANDS)
MANDATORY_EVENTS = "mandatory_events"
FACTS = "facts"
OBLIGATIONS = "obligations"
UNIT_KINDS: tuple[str, ...] = salient.KINDS
UNIT_CLASSES: tuple[str, ...] = tuple(f"unit_{kind}" for kind in UNIT_KINDS)
RETENTION_CLASSES: tuple[str, ...] = (*TOKEN_CLASSES, MANDATORY_EVENTS, *UNIT_CLASSES, OBLIGATIONS)
CLASS_LABELS = {
    IDENTIFIERS: "Identifiers",
    PATHS: "File paths",
    URLS: "URLs",
    NUMBERS: "Numbers with units",
    STATUS_CODES: "HTTP status codes",
    COMMANDS: "Quoted commands",
    MANDATORY_EVENTS: "Requirement / approval / decision events",
    FACTS: "Structured facts",
    OBLIGATIONS: "Obligation sentences (must / never / decided / approved / open)",
    **{f"unit_{kind}": f"Units: {kind}" for kind in salient.KINDS},
}
MANDATORY_EVENT_KINDS = frozenset({"requirement", "approval", "decision"})

_URL = re.compile(r"\bhttps?://[^\s\"'<>`)\]}]+")
_EXT = (
    r"(?:py|pyi|ya?ml|json|jsonl|md|rst|txt|toml|ini|cfg|conf|ts|tsx|js|jsx|go|rs|java|kt|rb|php|"
    r"c|h|cc|cpp|hpp|cs|sql|sh|bash|csv|log|html|xml|proto|lock|env|tf|gradle|ipynb|parquet)"
)
_PATH = re.compile(
    r"(?<![\w/.:-])(?:"
    r"(?:~|\.{1,2})?/[\w.@{}-]+(?:/[\w.@{}-]+)*/?"  # /abs/path, ./rel, ~/x, /payments/{id}
    # (not restarted after an "@" inside a word: that start was tried from the word's beginning,
    # and retrying at every "@" of a 60,000-char token was quadratic)
    r"|(?<![\w.@-]@)[\w.@-]+(?:/[\w.@{}-]+)+\." + _EXT + r"\b"  # src/app/main.py
    r"|[\w-]+(?:\.[\w-]+)*\." + _EXT + r"\b"  # payments-openapi.yaml
    r")"
)
_STATUS_PHRASES = (
    r"OK|Created|Accepted|No Content|Moved Permanently|Found|See Other|Not Modified|Bad Request|"
    r"Unauthorized|Payment Required|Forbidden|Not Found|Method Not Allowed|Not Acceptable|"
    r"Request Timeout|Conflict|Gone|Precondition Failed|Payload Too Large|Unsupported Media Type|"
    r"Unprocessable (?:Entity|Content)|Too Many Requests|Internal Server Error|Not Implemented|"
    r"Bad Gateway|Service Unavailable|Gateway Timeout"
)
_STATUS = re.compile(
    r"(?:\b(?:HTTP(?:/\d(?:\.\d)?)?|status(?: code)?|returns?|returned|returning|respond(?:s|ed)? with|"
    r"answered with|gets?|got|with an?|with)\s*:?\s+([1-5]\d\d)\b(?![.,]\d)"
    r"|\b([1-5]\d\d)(?=\s+(?:" + _STATUS_PHRASES + r")\b))"
)
_UNITS = (
    r"ms|µs|us|ns|s|sec|secs|seconds?|min|mins|minutes?|h|hrs?|hours?|days?|weeks?|"
    r"[kKMGT]i?B|bytes?|tokens?|%|percent|chars?|characters?|lines?|rows?|requests?|req/s|rps|"
    r"qps|files?|tests?|items?|retries|attempts?|workers?|x|×|USD|EUR|GBP|JPY|BHD|CHF|px|MHz|GHz"
)
_NUMBER = re.compile(r"(?<![\w.,#-])(\d+(?:[.,]\d+)*)\s?(" + _UNITS + r")(?![\w/-])")
_IDENTIFIER = re.compile(
    r"(?<![\w./-])(?:"
    r"[A-Z][A-Z0-9]*-\d+[A-Za-z0-9]*"  # JIRA-123, TC-14, E-42
    r"|[a-z][a-z0-9]*(?:-[a-z0-9]+)*-\d+[a-z0-9]*"  # bug-88, approval-12, review-19
    r"|[a-z][a-z0-9]*(?:_[a-z0-9]+)+"  # snake_case
    r"|[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+"  # CONSTANT_CASE / ERR_TIMEOUT
    r"|[a-z]+[0-9]*(?:[A-Z][a-z0-9]*)+"  # camelCase (createPayment)
    r"|[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+"  # PascalCase (PaymentCreate)
    r"|[A-Z][A-Za-z]*[a-z](?:-[A-Z][A-Za-z]*)+"  # header names (Idempotency-Key)
    r"|E\d{3,}"  # error codes
    r")(?![\w/-])"
)
# [ \t]* rather than \s*: \s* also crossed newlines, so every blank line restarted a scan to the
# end of the run (quadratic on a run of newlines); the commands captured are the same.
_COMMAND = re.compile(r"`([^`\n]{2,200})`|(?m:^[ \t]*\$ ([^\n]{2,200})$)")
_WORD = re.compile(r"[\w@{}-]+(?:[./:+][\w@{}-]+)*")  # whole words: a/b.py, payments:write
_PART = re.compile(r"[\w@{}-]+(?:\.[\w@{}-]+)*")  # their parts: a, b.py, payments, write
_DIGIT = re.compile(r"\d")
# A token cut by a length cap is no claim. Matched from a token's start only (the lookbehind):
# retried at every position of a long token it was quadratic.
_TRUNCATED = re.compile(r"(?<![\w./{}:-])[\w./{}:-]+…")
_WS = re.compile(r"\s+")


def _clean_path(token: str) -> str:
    return token.rstrip(".,:;")


def extract(text: str) -> dict[str, set[str]]:
    """The salient tokens of ``text`` per class (normalised: whitespace collapsed)."""
    if len(text) <= _CACHE_CHARS:
        return {name: set(tokens) for name, tokens in zip(TOKEN_CLASSES, _extract_cached(text), strict=True)}
    return _extract(text)


_CACHE_CHARS = 4000  # short texts (most events) are cached: validator, compactor and pages share them


@functools.lru_cache(maxsize=8192)
def _extract_cached(text: str) -> tuple[frozenset[str], ...]:
    found = _extract(text)
    return tuple(frozenset(found[name]) for name in TOKEN_CLASSES)


def _extract(text: str) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {name: set() for name in TOKEN_CLASSES}
    if not text:
        return found
    if "`" in text or "$ " in text:
        for match in _COMMAND.finditer(text):
            command = _WS.sub(" ", match.group(1) or match.group(2) or "").strip()
            if command:
                found[COMMANDS].add(command)
    rest = text
    if "://" in text:
        found[URLS] = {m.group(0).rstrip(".,:;") for m in _URL.finditer(text)}
        rest = _URL.sub(" ", text)
    if "/" in rest or "." in rest:
        for match in _PATH.finditer(rest):
            token = _clean_path(match.group(0))
            if len(token) > 1 and not token.replace("/", "").isdigit():
                found[PATHS].add(token)
    if _DIGIT.search(rest):
        for match in _STATUS.finditer(rest):
            found[STATUS_CODES].add(match.group(1) or match.group(2))
        for match in _NUMBER.finditer(rest):
            found[NUMBERS].add(f"{match.group(1)} {match.group(2)}")
    for match in _IDENTIFIER.finditer(rest):
        found[IDENTIFIERS].add(match.group(0))
    return found


def _number_value(token: str) -> str:
    return token.split(" ", 1)[0]


# -- what a summary says ---------------------------------------------------------------------------

_ENUM_KEYS = frozenset({"kind", "state", "schema"})


def _strings(value: Any, key: str = "") -> Iterator[str]:
    if isinstance(value, str):
        if key not in _ENUM_KEYS:
            yield value
    elif isinstance(value, Mapping):
        for k, item in value.items():
            yield from _strings(item, str(k))
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item, key)


def content_text(content: Any) -> str:
    """Every claim-bearing string of a summary's content (kinds, states and schema left out)."""
    return "\n".join(_strings(content))


@dataclass
class SummaryView:
    """A summary's text, its salient tokens and its words (for fast membership tests)."""

    text: str
    tokens: dict[str, set[str]]
    words: set[str]
    fact_keys: set[str]
    bare: set[str] = field(default_factory=set)  # whitespace-separated words (a URL stays whole)
    flat: str = ""  # whitespace-collapsed text (quoted commands)

    @classmethod
    def of(cls, content: Any) -> SummaryView:
        text = content_text(content)
        claims = _TRUNCATED.sub(" ", text)
        facts = content.get("facts") if isinstance(content, Mapping) else None
        keys = {f["key"] for f in facts or [] if isinstance(f, Mapping) and isinstance(f.get("key"), str)}
        bare = {w.strip(".,:;'\"()[]`") for w in text.split()}
        return cls(
            text=text,
            tokens=extract(claims),
            words=_words(text),
            fact_keys=keys,
            bare=bare,
            flat=_WS.sub(" ", text),
        )

    def has(self, cls_name: str, token: str) -> bool:
        """Whether the summary states ``token`` (of class ``cls_name``) anywhere."""
        if token in self.tokens[cls_name]:
            return True
        if cls_name == NUMBERS:
            # "250 ms" kept as "250ms" or "250 ms" — but not as a segment of a URL or path.
            return _number_value(token) in self.bare or token.replace(" ", "") in self.bare
        if cls_name == COMMANDS:
            return token in self.flat
        if cls_name == STATUS_CODES:
            return token in self.bare
        return token in self.words


def _words(text: str) -> set[str]:
    """Words and their /:+ separated parts, so membership is forgiving on punctuation."""
    return set(_WORD.findall(text)) | set(_PART.findall(text))


# -- the covered events -----------------------------------------------------------------------------


@dataclass
class MandatoryEvent:
    """A requirement/approval/decision event a summary must keep (no later event supersedes it)."""

    seq: int
    kind: str
    fact_keys: list[str]
    tokens: list[tuple[str, str]]  # (class, token)
    words: list[str]  # distinctive content words, for events with neither facts nor tokens
    excerpt: str


_STOP = frozenset(
    {
        *("the", "and", "that", "this", "with", "from", "must", "have", "will", "when", "then"),
        *("than", "they", "their", "there", "were", "been", "into", "each", "only", "also", "such"),
        *("over", "under", "after", "before", "while", "about", "which", "would", "could", "should"),
        *("shall", "other", "those", "these", "what", "where", "some", "more", "most", "very"),
        *("just", "like", "does", "done", "make", "made"),
    }
)


@dataclass
class SourceIndex:
    """Salient tokens of covered events (token → first seq per class) plus allowed vocabulary."""

    tokens: dict[str, dict[str, int]] = field(default_factory=lambda: {c: {} for c in TOKEN_CLASSES})
    words: set[str] = field(default_factory=set)
    mandatory: list[MandatoryEvent] = field(default_factory=list)
    fact_first_seq: dict[str, int] = field(default_factory=dict)
    texts: list[str] = field(default_factory=list)  # command-sized lookups for fabricated checks
    # Tokens of fact texts and of the prior summary: known (not fabricated), not owed.
    prior: dict[str, set[str]] = field(default_factory=lambda: {c: set() for c in TOKEN_CLASSES})
    max_seq: int = 0

    def total(self, cls_name: str, up_to: int | None = None) -> int:
        items = self.tokens[cls_name].values()
        return sum(1 for s in items if up_to is None or s <= up_to)

    def knows(self, cls_name: str, token: str) -> bool:
        """Whether ``token`` appears in the covered events (or prior summary)."""
        if token in self.tokens[cls_name] or token in self.prior[cls_name]:
            return True
        if cls_name == NUMBERS:
            return _number_value(token) in self.words
        if cls_name == COMMANDS:
            return any(token in t for t in self.texts)
        if cls_name == URLS:
            known = [*self.tokens[URLS], *self.prior[URLS]]
            return any(u.startswith(token) or token.startswith(u) for u in known)
        return token in self.words


def build_index(events: Iterable[SourceEvent], prior_content: Any = None) -> SourceIndex:
    """Index the covered events (purged ones contribute nothing) and a prior summary's text."""
    index = SourceIndex()
    pending: list[tuple[SourceEvent, dict[str, set[str]]]] = []
    later_keys: dict[str, int] = {}  # fact key → last seq stating it
    for event in sorted(events, key=lambda e: e.seq):
        index.max_seq = max(index.max_seq, event.seq)
        if event.purged:
            continue
        # Structured facts are checked by the fact rules; salient retention measures the free
        # text beyond them. Fact keys and texts still count as known words (not fabricated).
        fact_parts = []
        for fact in event.facts:
            fact_parts += [str(fact.get("key", "")), str(fact.get("text", ""))]
            if fact.get("key"):
                later_keys[fact["key"]] = event.seq
                index.fact_first_seq.setdefault(fact["key"], event.seq)
        text = "\n".join(p for p in [event.content, *event.refs] if p)
        found = extract(text)
        for cls_name, tokens in found.items():
            bucket = index.tokens[cls_name]
            for token in tokens:
                bucket.setdefault(token, event.seq)
        if fact_parts:
            facts_text = "\n".join(fact_parts)
            index.words.update(_words(facts_text))
            for cls_name, tokens in extract(facts_text).items():
                index.prior[cls_name].update(tokens)
        index.words.update(_words(text))
        index.words.update(w for w in (event.agent, event.role, event.kind, event.tool_call_id) if w)
        if found[COMMANDS]:
            index.texts.append(_WS.sub(" ", text))
        if event.kind in MANDATORY_EVENT_KINDS:
            pending.append((event, found))
    for event, found in pending:
        keys = [f["key"] for f in event.facts if f.get("key")]
        if keys and all(later_keys[k] > event.seq for k in keys):
            continue  # every fact it states is restated later: superseded
        owed = sorted((c, t) for c, ts in found.items() for t in ts)
        words = sorted(
            {w.lower() for w in re.findall(r"[A-Za-z]{5,}", event.content) if w.lower() not in _STOP}
        )
        excerpt = _WS.sub(" ", event.content).strip()[:140]
        index.mandatory.append(MandatoryEvent(event.seq, event.kind, keys, owed, words, excerpt))
    if prior_content is not None:
        prior = content_text(prior_content)
        index.words.update(_words(prior))
        index.texts.append(_WS.sub(" ", prior))
        for cls_name, tokens in extract(prior).items():
            index.prior[cls_name].update(tokens)
    return index


def mandatory_kept(event: MandatoryEvent, view: SummaryView) -> bool:
    """Kept when its facts survive (by key); else when all its salient tokens do; else when most
    of its distinctive words do (an event with neither facts nor tokens)."""
    if event.fact_keys:  # as structured facts, or named in the prose of a prose-only summary
        return all(k in view.fact_keys or k in view.words for k in event.fact_keys)
    if event.tokens:
        return all(view.has(c, t) for c, t in event.tokens)
    if not event.words:
        return True
    lowered = {w.lower() for w in view.words}
    return sum(1 for w in event.words if w in lowered) >= 0.6 * len(event.words)


# -- the report -------------------------------------------------------------------------------------

_MAX_LISTED = 10


@dataclass
class ClassRetention:
    total: int
    kept: int
    missing: list[str]

    @property
    def ratio(self) -> float | None:
        return self.kept / self.total if self.total else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "kept": self.kept,
            "ratio": None if self.ratio is None else round(self.ratio, 4),
            "missing": self.missing[:_MAX_LISTED],
        }


@dataclass
class QualityReport:
    """Retention per class, lost mandatory events and fabricated tokens of one summary."""

    retention: dict[str, ClassRetention]
    fabricated: list[tuple[str, str]]  # (class, token)
    missing_mandatory: list[MandatoryEvent]

    def ratio(self, cls_name: str) -> float | None:
        return self.retention[cls_name].ratio

    def to_dict(self) -> dict[str, Any]:
        return {
            "retention": {name: r.to_dict() for name, r in self.retention.items()},
            "fabricated": [{"class": c, "token": t} for c, t in self.fabricated[:_MAX_LISTED]],
            "fabricated_count": len(self.fabricated),
        }


def measure(index: SourceIndex, content: Any, *, up_to: int | None = None) -> QualityReport:
    """How much of the covered events' salient content ``content`` keeps, and what it invents.

    ``up_to`` restricts the covered events to seqs ≤ ``up_to`` (an older version's coverage).
    """
    view = SummaryView.of(content)
    retention: dict[str, ClassRetention] = {}
    for cls_name in TOKEN_CLASSES:
        items = sorted(
            (seq, tok) for tok, seq in index.tokens[cls_name].items() if up_to is None or seq <= up_to
        )
        missing = [tok for _, tok in items if not view.has(cls_name, tok)]
        retention[cls_name] = ClassRetention(len(items), len(items) - len(missing), missing)
    mandatory = [m for m in index.mandatory if up_to is None or m.seq <= up_to]
    lost = [m for m in mandatory if not mandatory_kept(m, view)]
    retention[MANDATORY_EVENTS] = ClassRetention(
        len(mandatory), len(mandatory) - len(lost), [f"seq {m.seq} ({m.kind}): {m.excerpt}" for m in lost]
    )
    fabricated = sorted(
        (cls_name, tok)
        for cls_name in (IDENTIFIERS, PATHS, URLS, NUMBERS, STATUS_CODES)
        for tok in view.tokens[cls_name]
        if not index.knows(cls_name, tok)
    )
    return QualityReport(retention=retention, fabricated=fabricated, missing_mandatory=lost)


# -- policy settings --------------------------------------------------------------------------------

RULES_5, RULES_6, RULES_7, RULES_8 = "rules-5", "rules-6", "rules-7", "rules-8"
VALIDATOR_VERSIONS = (RULES_5, RULES_6, RULES_7, RULES_8)
# rules-7 and rules-8 (memoryhub.core.verdicts over memoryhub.core.salient) judge any text;
# rules-8 also checks the census of aggregated drops. Older versions stay runnable so outcomes
# they recorded reproduce.
VERDICT_VALIDATORS = (RULES_7, RULES_8)
DEFAULT_VALIDATOR = RULES_8
# A status code or a requirement lost is a contract lost (S3's 401): no slack by default.
DEFAULT_FLOORS: dict[str, float] = {
    IDENTIFIERS: 0.9,
    PATHS: 0.9,
    URLS: 0.9,
    NUMBERS: 0.9,
    STATUS_CODES: 1.0,
    COMMANDS: 0.9,
    MANDATORY_EVENTS: 1.0,
    # rules-7/8: per salient-unit kind, the share kept or declared dropped. A compactor can always
    # declare what it leaves out, so a silent loss fails by default (a policy may allow some).
    **{f"unit_{kind}": 1.0 for kind in UNIT_KINDS},
    OBLIGATIONS: 1.0,
}
DEFAULT_MAX_FABRICATED = 0


def default_quality() -> dict[str, Any]:
    """The policy's ``quality`` block: validator version, per-class floors, fabricated threshold."""
    return {
        "validator": DEFAULT_VALIDATOR,
        "floors": dict(DEFAULT_FLOORS),
        "max_fabricated": DEFAULT_MAX_FABRICATED,
    }


def merged_quality(raw: Any) -> dict[str, Any]:
    """``raw`` (possibly partial) over the defaults; shapes are checked by ``quality_errors``."""
    merged = default_quality()
    if isinstance(raw, Mapping):
        for key, value in raw.items():
            if key == "floors" and isinstance(value, Mapping):
                merged["floors"] = merged["floors"] | dict(value)
            else:
                merged[key] = value
    return merged


def quality_errors(raw: Any, prefix: str = "quality") -> list[tuple[str, str]]:
    """Every problem with a policy ``quality`` block, as (field, message)."""
    if not isinstance(raw, Mapping):
        return [(prefix, "must be an object with validator, floors and max_fabricated")]
    errors: list[tuple[str, str]] = []
    for key in raw:
        if key not in ("validator", "floors", "max_fabricated"):
            errors.append((f"{prefix}.{key}", "unknown field; known: validator, floors, max_fabricated"))
    if "validator" in raw and raw["validator"] not in VALIDATOR_VERSIONS:
        errors.append((f"{prefix}.validator", f"must be one of {', '.join(VALIDATOR_VERSIONS)}"))
    floors = raw.get("floors", {})
    if not isinstance(floors, Mapping):
        errors.append((f"{prefix}.floors", "must be an object of class → minimum share kept (0..1)"))
    else:
        for name, value in floors.items():
            where = f"{prefix}.floors.{name}"
            if name not in RETENTION_CLASSES:
                errors.append((where, f"unknown class; known: {', '.join(RETENTION_CLASSES)}"))
            elif isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
                errors.append((where, "must be a number from 0 to 1"))
    if "max_fabricated" in raw:
        value = raw["max_fabricated"]
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            errors.append((f"{prefix}.max_fabricated", "must be a whole number ≥ 0"))
    return errors


@dataclass(frozen=True)
class QualitySettings:
    floors: Mapping[str, float]
    max_fabricated: int

    @classmethod
    def of(cls, raw: Any) -> QualitySettings:
        merged = merged_quality(raw)
        return cls(floors=dict(merged["floors"]), max_fabricated=int(merged["max_fabricated"]))


def retention_problems(report: QualityReport, settings: QualitySettings) -> list[str]:
    """One reason per token class kept below its floor."""
    problems = []
    for cls_name in TOKEN_CLASSES:
        kept = report.retention[cls_name]
        floor = settings.floors.get(cls_name, 0.0)
        if kept.ratio is not None and kept.ratio < floor:
            problems.append(
                f"{cls_name} {kept.kept}/{kept.total} kept ({kept.ratio:.0%} < floor {floor:.0%}); "
                f"lost {_listed(kept.missing)}"
            )
    return problems


def mandatory_problems(report: QualityReport, settings: QualitySettings) -> list[str]:
    kept = report.retention[MANDATORY_EVENTS]
    floor = settings.floors.get(MANDATORY_EVENTS, 1.0)
    if kept.ratio is None or kept.ratio >= floor:
        return []
    return [
        f"{kept.kept}/{kept.total} requirement/approval/decision events kept (floor {floor:.0%}); "
        f"lost {_listed(kept.missing)}"
    ]


def fabricated_problems(report: QualityReport, settings: QualitySettings) -> list[str]:
    if len(report.fabricated) <= settings.max_fabricated:
        return []
    listed = _listed([f"{t} ({c})" for c, t in report.fabricated])
    return [
        f"{len(report.fabricated)} fabricated token(s) appear in no covered event or prior summary "
        f"(allowed {settings.max_fabricated}): {listed}"
    ]


def _listed(items: Sequence[str]) -> str:
    more = len(items) - _MAX_LISTED
    return ", ".join(items[:_MAX_LISTED]) + (f" and {more} more" if more > 0 else "")


# -- decay across versions ---------------------------------------------------------------------------


@dataclass(frozen=True)
class VersionContent:
    version: int
    covers_to_seq: int
    content: Any


def decay(index: SourceIndex, versions: Sequence[VersionContent], tail: SourceIndex | None = None) -> dict:
    """For every fact and salient token: the versions that kept it, the first version that lost it
    (after it was covered) and whether a later version or the tail restored it; plus the share of
    S1's salient content each later version still holds (the summary-of-summary decay curve)."""
    ordered = sorted(versions, key=lambda v: v.version)
    # An opaque (provider-encrypted) version can be read by nobody: it neither keeps nor loses.
    unknown = [v.version for v in ordered if unreadable(v.content)]
    views = [(v, SummaryView.of(v.content)) for v in ordered if v.version not in unknown]
    rows: list[dict[str, Any]] = []
    items: list[tuple[str, str, int]] = [
        (cls_name, tok, seq)
        for cls_name in TOKEN_CLASSES
        for tok, seq in index.tokens[cls_name].items()
        if seq
    ]
    items += [(FACTS, key, seq) for key, seq in index.fact_first_seq.items()]
    for cls_name, tok, seq in sorted(items, key=lambda i: (i[2], i[0], i[1])):
        kept_in, first_lost, restored = [], None, None
        for v, view in views:
            if v.covers_to_seq < seq:
                continue
            has = tok in view.fact_keys if cls_name == FACTS else view.has(cls_name, tok)
            if has:
                kept_in.append(v.version)
                if first_lost is not None and restored is None:
                    restored = f"S{v.version}"
            elif first_lost is None:
                first_lost = v.version
        in_tail = tail is not None and (
            tok in tail.fact_first_seq if cls_name == FACTS else tail.knows(cls_name, tok)
        )
        if first_lost is not None and restored is None and in_tail:
            restored = "tail"
        rows.append(
            {
                "class": cls_name,
                "token": tok,
                "first_seq": seq,
                "kept_in": kept_in,
                "first_lost": first_lost,
                "restored_by": restored,
            }
        )
    curve: dict[str, list[float | None]] = {}
    if views:
        first_view = views[0][1]
        for cls_name in (FACTS, *TOKEN_CLASSES):
            base = first_view.fact_keys if cls_name == FACTS else first_view.tokens[cls_name]
            if not base:
                continue
            shares: list[float | None] = []
            for v in ordered:
                if v.version in unknown:
                    shares.append(None)
                    continue
                view = next(view for w, view in views if w.version == v.version)
                if cls_name == FACTS:
                    kept = sum(1 for t in base if t in view.fact_keys)
                else:
                    kept = sum(1 for t in base if view.has(cls_name, t))
                shares.append(kept / len(base))
            curve[cls_name] = shares
    return {
        "versions": [v.version for v in ordered],
        "rows": rows,
        "curve": curve,
        "unknown_versions": unknown,
    }
